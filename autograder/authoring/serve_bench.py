"""``make bench-serve``: submit-to-feedback times of ``autograder serve`` on this course.

    python -m autograder.authoring.serve_bench [--sequential 30] [--burst 60] [--burst-seconds 10] [--jobs N]

A throwaway course with every assignment and a real exchange; the service runs as a subprocess
(as an instructor starts it). Submissions are written into inbound as ``nbgrader submit``
writes them (its timestamp in the name: the clock starts there), the students cycling
through every assignment's honest notebooks (:func:`autograder.authoring.bench.pool`):

1. sequential: one at a time, each after the previous one's feedback: p50 / p95 / max of
   submitted -> released (the ledger's times);
2. burst: N in S seconds: when the last one is released, and p50 / p95;
3. restart: another burst, the service killed (SIGKILL, its whole process group) in the
   middle and started again: submissions lost (never released) and released twice;
4. the scores: ``autograder grade`` of what the service put in ``submitted/`` gives the same
   score on every test cell as the service's ``grades.csv``;
5. no hidden test line in any page the service released into the exchange.

Prints the figures and writes them to ``artifacts/bench-serve.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

from autograder.authoring.accounts import Unavailable, accounts
from autograder.course import REPO, assignments
from autograder.procs import explain, run


def _pct(values, q):
    values = sorted(values)
    if not values:
        return float("nan")
    k = min(len(values) - 1, max(0, round(q / 100 * (len(values) - 1))))
    return values[k]


def _latencies(rows):
    return [r["released"] - r["submitted"] for r in rows if r["released"]]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sequential", type=int, default=30)
    ap.add_argument("--burst", type=int, default=60)
    ap.add_argument("--burst-seconds", type=float, default=10.0)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--keep", type=Path, default=None, help="build the course here and keep it")
    args = ap.parse_args(argv)

    root = args.keep or Path(tempfile.mkdtemp(prefix="bench-serve-"))
    with contextlib.ExitStack() as stack:
        user = None
        # an instructor runs the service, never root (docs/instructor.md, "Who runs what")
        if os.geteuid() == 0:
            try:
                user = stack.enter_context(accounts(root, ("teach",), prefix="agbench"))["teach"]
            except Unavailable as exc:
                print(f"bench-serve: as root, and no instructor account to run serve: {exc}")
                return 2
        return _bench(args, root, user)


def _bench(args, root, user) -> int:
    from autograder.authoring.bench import pool
    from autograder.grading.serve.harness import ServeCourse

    items = pool()
    who = f"{user.name} (uid {user.uid})" if user else f"uid {os.geteuid()}"
    print(
        f"bench-serve: course in {root}; {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; "
        f"the service runs as {who}"
    )
    sc = ServeCourse(
        root / "bench",
        assignments(),
        policy={"cooldown": 0, "max_attempts": 0},
        serve_args=["--jobs", str(args.jobs)],
        user=user,
    )
    n = 0

    def put(student):
        nonlocal n
        a, nb, path = items[n % len(items)]
        n += 1
        return sc.put(student, a, {f"{nb}.ipynb": path.read_bytes()})

    figures: dict = {"cpus": os.cpu_count(), "jobs": args.jobs, "load_average": os.getloadavg()[0]}
    figures["service_user"] = user.name if user else None
    figures["service_uid"] = user.uid if user else os.geteuid()
    t = time.monotonic()
    sc.start(timeout=900)
    figures["start_s"] = round(time.monotonic() - t, 1)
    try:
        # 1. sequential
        for i in range(args.sequential):
            put(f"seq{i:03d}")
            sc.wait_final(i + 1, timeout=300)
        rows = sc.rows()
        seq = _latencies(rows)
        figures["sequential"] = {
            "n": len(seq),
            "p50_s": round(statistics.median(seq), 2),
            "p95_s": round(_pct(seq, 95), 2),
            "max_s": round(max(seq), 2),
        }
        print(f"sequential: {figures['sequential']}", flush=True)
        # 2. burst
        done = len(rows)
        t0 = time.time()
        for i in range(args.burst):
            put(f"burst{i:03d}")
            time.sleep(max(0.0, t0 + (i + 1) * args.burst_seconds / args.burst - time.time()))
        rows = sc.wait_final(done + args.burst, timeout=900)
        burst = [r for r in rows if r["student"].startswith("burst")]
        lat = _latencies(burst)
        figures["burst"] = {
            "n": len(burst),
            "submitted_over_s": round(max(r["submitted"] for r in burst) - t0, 1),
            "all_released_after_s": round(max(r["released"] for r in burst) - t0, 1),
            "p50_s": round(statistics.median(lat), 2),
            "p95_s": round(_pct(lat, 95), 2),
        }
        print(f"burst: {figures['burst']}", flush=True)
        # 3. restart mid-burst
        done = len(rows)
        t0 = time.time()
        killed = False
        for i in range(args.burst):
            put(f"restart{i:03d}")
            if not killed and i >= args.burst // 2:
                sc.stop(signal.SIGKILL)
                killed = True
                released_at_kill = sum(
                    r["state"] == "released"
                    for r in sc.rows()
                    if r["student"].startswith("restart")
                )
                sc.start(wait=False)  # the burst goes on while it starts again
            time.sleep(max(0.0, t0 + (i + 1) * args.burst_seconds / args.burst - time.time()))
        rows = sc.wait_final(done + args.burst, timeout=900)
        again = [r for r in rows if r["student"].startswith("restart")]
        figures["restart"] = {
            "n": len(again),
            "released_before_kill": released_at_kill,
            "lost": sum(r["state"] != "released" for r in again),
            "released_twice": sum(r["releases"] > 1 for r in rows),
            "graded_twice": sum(r["gradings"] > 1 for r in again),
            "all_released_after_s": round(max(r["released"] or 0 for r in again) - t0, 1),
        }
        print(f"restart: {figures['restart']}", flush=True)
    finally:
        sc.stop()
    figures["scores"] = _same_scores(sc)
    found, checked = _leaks(sc)
    figures["hidden_test_lines_in_exchange"] = found
    figures["hidden_test_lines_checked"] = checked
    print(f"scores vs autograder grade: {figures['scores']}")
    print(f"hidden test lines in the exchange: {figures['hidden_test_lines_in_exchange']}")
    out = REPO / "artifacts" / "bench-serve.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(figures, indent=2) + "\n")
    print(f"wrote {out}")
    ok = (
        figures["restart"]["lost"] == 0
        and figures["restart"]["released_twice"] == 0
        and figures["scores"]["different"] == 0
        and figures["hidden_test_lines_in_exchange"] == 0
    )
    return 0 if ok else 1


def _same_scores(sc) -> dict:
    grade_out = sc.root / "grade-out"
    proc = run(
        [
            str(Path(sys.executable).with_name("autograder")),
            "grade",
            "--course",
            str(sc.course.root),
            "--out",
            str(grade_out),
            "--no-gradebook",
            "--quiet",
        ],
        expect=None,  # what it graded is compared below; a failure is said, not raised
        timeout=None,
    )
    if proc.returncode != 0:
        print(explain(proc, what="autograder grade (the scores to compare)"), file=sys.stderr)

    def read(path):
        with open(path) as fh:
            return {
                (r["student"], r["assignment"], r["notebook"], r["grade_id"]): r["score"]
                for r in csv.DictReader(fh)
            }

    served = read(sc.out / "grades.csv")
    graded = read(grade_out / "grades.csv") if (grade_out / "grades.csv").exists() else {}
    return {
        "cells": len(served),
        "different": sum(served.get(k) != v for k, v in graded.items())
        + len(set(served) ^ set(graded)),
    }


def _leaks(sc) -> tuple[int, int]:
    import nbformat

    lines = set()
    for src in sc.course.root.glob("solutions/*/*.ipynb"):
        for cell in nbformat.read(src, as_version=4).cells:
            meta = cell.metadata.get("nbgrader", {})
            if (
                meta.get("grade")
                and not meta.get("solution")
                and "BEGIN HIDDEN TESTS" in cell.source
            ):
                hidden = cell.source.split("BEGIN HIDDEN TESTS", 1)[1]
                lines |= {ln.strip() for ln in hidden.splitlines() if len(ln.strip()) >= 20}
    # a line the released notebook also holds (a visible test's hint that a hidden test repeats)
    # is no secret: the student has it
    released = "".join(
        json.dumps(nbformat.read(p, as_version=4).cells)
        for p in sc.course.root.glob("exercises/*/*.ipynb")
    )
    lines = {ln for ln in lines if json.dumps(ln)[1:-1] not in released}
    found = 0
    for page in (sc.exchange / "autograd-inplace" / "feedback").iterdir():
        text = page.read_text(errors="replace")
        found += sum(line in text for line in lines)
    return found, len(lines)


if __name__ == "__main__":
    sys.exit(main())
