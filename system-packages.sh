#!/usr/bin/env bash
# Install the Debian packages named in system-packages.txt that are missing here.
#
#   ./system-packages.sh [TARGET] [--warn]
#
# TARGET (default: test) keeps the packages whose third column names it (`make test` needs
# all of them, `make lab` only bubblewrap). A package counts as present when its command is
# on PATH. Missing packages are installed with apt-get when that needs no password: as root,
# or with passwordless sudo (`sudo -n true`). Otherwise it stops at once with exit status 1
# and prints the exact command to run (with --warn it prints the same and exits 0: `make lab`).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
list="${SYSTEM_PACKAGES_FILE:-$here/system-packages.txt}"
target=test
warn=0
for arg in "$@"; do
  case "$arg" in
    --warn) warn=1 ;;
    -*) echo "system-packages.sh: unknown option $arg" >&2; exit 2 ;;
    *) target="$arg" ;;
  esac
done

find_missing() {  # sets missing=(packages) and uses=(lines saying what needs them)
  missing=() uses=()
  local package command targets use
  while read -r package command targets use; do
    case "$package" in ''|'#'*) continue ;; esac
    case ",$targets," in *",$target,"*) ;; *) continue ;; esac
    if ! command -v "$command" >/dev/null 2>&1; then
      missing+=("$package")
      uses+=("  $package (provides $command): $use")
    fi
  done < "$list"
}

find_missing
[ ${#missing[@]} -eq 0 ] && exit 0
install="apt-get install -y --no-install-recommends ${missing[*]}"

sudo=none
if [ "$(id -u)" = 0 ]; then
  sudo=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true >/dev/null 2>&1; then
  sudo="sudo"
fi
if [ "$sudo" != none ] && command -v apt-get >/dev/null 2>&1; then
  echo "Installing the missing system packages for \`make $target\` with apt-get: ${missing[*]}"
  printf '%s\n' "${uses[@]}"
  if $sudo apt-get update -qq && $sudo env DEBIAN_FRONTEND=noninteractive $install -qq >/dev/null; then
    find_missing
    [ ${#missing[@]} -eq 0 ] && exit 0
    echo "system-packages.sh: apt-get ran, but the commands of these packages are still not on PATH:" >&2
  else
    echo "system-packages.sh: apt-get failed." >&2
  fi
fi

{
  echo "Missing system packages for \`make $target\`: ${missing[*]}"
  printf '%s\n' "${uses[@]}"
  echo "Install them with (then run make $target again):"
  echo
  echo "    sudo apt-get update && sudo $install"
  echo
  command -v apt-get >/dev/null 2>&1 \
    || echo "(no apt-get on this machine: install the packages that provide these commands with your system's package manager)"
} >&2
[ $warn = 1 ] && exit 0
exit 1
