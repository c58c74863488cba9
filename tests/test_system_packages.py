"""system-packages.txt and system-packages.sh: what `make test` and `make lab` do about the Debian
packages (bubblewrap, chromium, npm) before anything else.

The script runs with a PATH of its own: the few commands it needs, none of the packages'
commands, and fakes of `id` (root or not), `sudo` (passwordless or not) and `apt-get` (records
what it was asked and "installs" the commands), so nothing is installed for real.
"""

import os
import re
import shutil
from pathlib import Path

import pytest

from autograder.procs import explain, run

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "system-packages.sh"
LISTED = [
    line.split()
    for line in (REPO / "system-packages.txt").read_text().splitlines()
    if line.strip() and not line.startswith("#")
]
PACKAGES = [row[0] for row in LISTED]
COMMANDS = [row[1] for row in LISTED]
TOOLS = ["bash", "sh", "dirname", "env", "make", "cat", "chmod", "touch"]


def fake_path(tmp_path, uid=1000, sudo=False, apt=False):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in TOOLS:
        os.symlink(shutil.which(tool), bin_dir / tool)
    scripts = {"id": f'#!/bin/sh\n[ "$1" = -u ] && echo {uid}\n'}
    scripts["sudo"] = (
        '#!/bin/sh\necho "sudo $*" >> "$LOG"\n[ "$1" = -n ] && shift\n"$@"\n'
        if sudo
        else '#!/bin/sh\necho "sudo: a password is required" >&2\nexit 1\n'
    )
    if apt:  # records its arguments; `install` puts the packages' commands on PATH
        creates = "".join(f'touch "{bin_dir}/{c}"; chmod +x "{bin_dir}/{c}"; ' for c in COMMANDS)
        scripts["apt-get"] = (
            f'#!/bin/sh\necho "apt-get $* DEBIAN_FRONTEND=$DEBIAN_FRONTEND" >> "$LOG"\n'
            f'[ "$1" = install ] && {{ {creates}}}\nexit 0\n'
        )
    for name, text in scripts.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    env = {"PATH": str(bin_dir), "LOG": str(tmp_path / "log"), "HOME": str(tmp_path)}
    for command in COMMANDS:
        assert shutil.which(command, path=env["PATH"]) is None
    return env


def run_script(env, *args, command=None):
    """The script (or ``command``) on the fake PATH, any exit status: the callers check it."""
    return run(command or ["bash", str(SCRIPT), *args], expect=None, env=env, cwd=REPO, timeout=60)


def log(env):
    path = Path(env["LOG"])
    return path.read_text().splitlines() if path.exists() else []


def test_the_list_names_bubblewrap_chromium_and_npm():
    assert dict(zip(PACKAGES, COMMANDS, strict=True)) == {
        "bubblewrap": "bwrap",
        "chromium": "chromium",
        "npm": "npm",
    }


def test_without_root_or_sudo_it_stops_with_the_exact_command(tmp_path):
    env = fake_path(tmp_path)
    result = run_script(env)
    assert result.returncode == 1, explain(result)
    assert (
        "    sudo apt-get update && sudo apt-get install -y --no-install-recommends bubblewrap chromium npm\n"
        in result.stderr
    )
    assert "Missing system packages for `make test`: bubblewrap chromium npm" in result.stderr
    assert "no apt-get on this machine" in result.stderr  # this fake machine has none
    assert log(env) == []


def test_make_test_stops_at_once_with_the_command(tmp_path):
    env = fake_path(tmp_path)
    result = run_script(env, command=["make", "--no-print-directory", "-C", str(REPO), "test"])
    assert result.returncode != 0, explain(result)
    assert (
        "sudo apt-get install -y --no-install-recommends bubblewrap chromium npm" in result.stderr
    )
    assert "pytest" not in result.stdout and "pip" not in result.stdout  # nothing else ran


def test_make_lab_says_what_needs_bubblewrap_and_goes_on(tmp_path):
    env = fake_path(tmp_path)
    result = run_script(env, "lab", "--warn")
    assert result.returncode == 0, explain(result)
    assert "sudo apt-get install -y --no-install-recommends bubblewrap\n" in result.stderr
    assert "chromium" not in result.stderr


@pytest.mark.parametrize("as_root", [True, False], ids=["root", "passwordless-sudo"])
def test_it_installs_when_it_can(tmp_path, as_root):
    env = fake_path(tmp_path, uid=0 if as_root else 1000, sudo=not as_root, apt=True)
    result = run_script(env)
    assert result.returncode == 0, explain(result)
    apt = [
        line for line in log(env) if line.startswith("apt-get ")
    ]  # what apt-get itself was asked
    assert apt[0].startswith("apt-get update")
    assert re.match(
        r"apt-get install -y --no-install-recommends bubblewrap chromium npm .*DEBIAN_FRONTEND=noninteractive",
        apt[1],
    )
    assert [line for line in log(env) if line.startswith("sudo ")] == (
        []
        if as_root
        else [
            "sudo -n true",
            "sudo apt-get update -qq",
            "sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends bubblewrap chromium npm -qq",
        ]
    )
    again = run_script(env)
    assert again.stdout == "", explain(again)  # present now: nothing to do


def test_makefile_ci_and_workflow_use_the_one_list():
    makefile = (REPO / "Makefile").read_text()
    assert re.search(r"^test: system-packages-test ", makefile, re.M)
    assert re.search(r"^lab: system-packages-lab ", makefile, re.M)
    assert "./system-packages.sh test" in (REPO / ".ci" / "run").read_text()
    assert "./system-packages.sh test" in (REPO / ".github" / "workflows" / "ci.yml").read_text()
    for path in (
        REPO / ".ci" / "run",
        REPO / ".github" / "workflows" / "ci.yml",
        REPO / "Makefile",
    ):
        assert "apt-get install" not in path.read_text(), f"{path.name} names packages itself"
