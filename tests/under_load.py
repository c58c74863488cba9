"""`make test` on a fresh clone of a busy machine (make test-under-load).

    python3 -m tests.under_load [--runs N] [--burners K] [--keep]

Each run clones the repository's HEAD into a new temporary folder (what CI and a newcomer get:
nothing installed, no .venv, no stock memo but the committed one), starts K CPU burners (default:
twice the number of cores, so the load average stays at twice the core count or more whatever
the suite does), runs `make test` there and stops the burners. The load average is sampled every
10 s. Printed per run: exit status, pytest's closing line, minutes, the load it ran under; the
whole log of each run is kept in artifacts/under-load/run-N-COMMIT-TIME.log. Exit status 1 when a run failed.

Uncommitted changes are not in the clone: commit first (a warning says so).
Standard library only: it runs before any virtualenv exists.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ARTIFACTS = REPO / "artifacts" / "under-load"
SUMMARY = re.compile(r"^=+ (.*(passed|failed|error).*) =+$", re.M)


def start_burners(k: int) -> list[subprocess.Popen]:
    code = "while True: pass"
    return [subprocess.Popen([sys.executable, "-c", code]) for _ in range(k)]


def stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        p.kill()
    for p in procs:
        p.wait()


class LoadSampler(threading.Thread):
    def __init__(self, every: float = 10.0):
        super().__init__(daemon=True)
        self.every, self.samples, self._done = every, [], threading.Event()

    def run(self) -> None:
        while not self._done.wait(self.every):
            self.samples.append(os.getloadavg()[0])

    def stop(self) -> tuple[float, float, float]:
        self._done.set()
        self.join()
        s = self.samples or [os.getloadavg()[0]]
        return min(s), sum(s) / len(s), max(s)


def one_run(index: int, burners: int, keep: bool) -> dict:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=f"under-load-{index}-"))
    clone = folder / "repo"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True)
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=clone, capture_output=True, text=True
    ).stdout.strip()
    # one log per run and commit: a later invocation never overwrites an earlier run's log
    log = ARTIFACTS / f"run-{index}-{head}-{time.strftime('%Y%m%d-%H%M%S')}.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "VIRTUAL_ENV"))}
    env.pop("MAKEFLAGS", None)  # this script may itself run under make
    env.pop("MAKELEVEL", None)
    procs = start_burners(burners)
    sampler = LoadSampler()
    sampler.start()
    start = time.monotonic()
    try:
        with open(log, "w") as out:
            rc = subprocess.run(
                ["make", "test"], cwd=clone, env=env, stdout=out, stderr=subprocess.STDOUT
            ).returncode
    finally:
        seconds = time.monotonic() - start
        load = sampler.stop()
        stop(procs)
    found = SUMMARY.findall(log.read_text(errors="replace"))
    if not keep:
        shutil.rmtree(folder, ignore_errors=True)
    return {
        "run": index,
        "commit": head,
        "rc": rc,
        "summary": found[-1][0] if found else "(no pytest summary: see the log)",
        "minutes": seconds / 60,
        "load": load,
        "log": log,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--burners", type=int, default=2 * (os.cpu_count() or 1))
    parser.add_argument("--keep", action="store_true", help="keep each run's clone")
    args = parser.parse_args(argv)
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        cwd=REPO,
        capture_output=True,
        text=True,
    ).stdout
    if dirty.strip():
        print("under_load: uncommitted changes are not in the clone (HEAD is tested)")
    print(
        f"under_load: {args.runs} run(s) of `make test` on a fresh clone, {args.burners} CPU burners"
    )
    results = []
    for i in range(1, args.runs + 1):
        r = one_run(i, args.burners, args.keep)
        results.append(r)
        lo, mean, hi = r["load"]
        print(
            f"run {i} ({r['commit']}): exit {r['rc']}, {r['summary']}, {r['minutes']:.1f} min, "
            f"load average {lo:.1f}-{hi:.1f} (mean {mean:.1f}); log {r['log']}",
            flush=True,
        )
    failed = [r for r in results if r["rc"] != 0]
    print(f"under_load: {len(results) - len(failed)} of {len(results)} runs green")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
