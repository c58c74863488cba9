"""``make bench-scale``: how ``autograder grade`` grows with a class, loops included.

    python -m autograder.authoring.bench_scale [--sizes 60,600,3000] [--loopers 0.05]
        [--jobs N] [--timeout S] [--no-stock] [--dir D]

For each size N, a throwaway course with every assignment and N submissions: students cycling
through the honest notebooks of ``make bench`` (the solution, the release, the fixture
submissions), and every ``1 / loopers``-th one a *looper*: the instructor's solution with its
first graded function made to loop forever (``while True: pass`` as its first statement), as
real classes have (every public nbgrader course graded on 2026-11-28 had one). Each stage is
graded by ``autograder grade --jobs N --timings`` and prints, for the stage:

* wall time, start-up, per-notebook time and its ratio to the first stage's (linear growth: 1.00);
* the host's peak memory (the ``autograder grade`` process, sampled every 0.2 s with psutil);
* the gradebook's writes: count, seconds, the ``gradebook.db`` size;
* where the sandboxes' time went: the loopers' share of all run seconds, one kernel's and the
  judge's apart, and the number of test cells that ran past the limit;
* stock ``nbgrader autograde`` on the first stage (serial, same course, same timeout), with the
  scores compared test cell by test cell, and its time extrapolated linearly to the others.

The limit is the course's ``Execute.timeout`` (120 s in this course) unless ``--timeout`` sets it
(written into the throwaway course's ``nbgrader_config.py``, so stock and this grader both read
it). A loop costs a class its limit for every test cell that calls the looping function, in one
kernel, as in stock: that is what a faithful score costs (a cell that finishes a second before
the limit passes). The judge runs after one kernel and gives such a test a tenth of the limit
(:func:`autograder.grading.host.supervisor.after_kernel_limit`).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import nbformat

from autograder.authoring.bench import grade_command, grade_scores, gradebook_scores, pool
from autograder.course import SOLUTIONS, TempCourse
from autograder.procs import explain

LOOP = "while True:  # bench-scale: this submission loops forever\n{indent}    pass\n"


def looper(assignment: str, name: str) -> nbformat.NotebookNode | None:
    """The solution of ``assignment``'s notebook ``name`` with its first graded function looping
    forever, or None when no solution cell defines a function."""
    nb = nbformat.read(SOLUTIONS / assignment / f"{name}.ipynb", as_version=4)
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.cell_type != "code" or not meta.get("solution"):
            continue
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:
            continue
        for node in tree.body:
            if not isinstance(node, ast.FunctionDef) or node.body[0].lineno == node.lineno:
                continue
            first = node.body[0]
            lines = cell.source.splitlines(keepends=True)
            indent = " " * first.col_offset
            lines.insert(first.lineno - 1, indent + LOOP.format(indent=indent))
            cell.source = "".join(lines)
            return nb
    return None


def populate(course: TempCourse, n: int, share: float, folder: Path) -> set:
    """N submissions into ``course``; the students whose notebook loops (``share`` of N, drawn
    with a fixed seed among the submissions of assignments whose solution defines a function)."""
    import random

    items = pool()
    loops: dict = {}
    for a, nb, _ in items:
        if (a, nb) not in loops:
            made = looper(a, nb)
            loops[(a, nb)] = None if made is None else folder / f"looper-{a}-{nb}.ipynb"
            if made is not None:
                nbformat.write(made, loops[(a, nb)])
    can = [i for i in range(n) if loops[items[i % len(items)][:2]] is not None]
    chosen = set(random.Random(n).sample(can, min(len(can), round(n * share))))
    loopers = set()
    for i in range(n):
        a, nb, path = items[i % len(items)]
        student = f"student{i:05d}"
        if i in chosen:
            path = loops[(a, nb)]
            loopers.add(student)
        course.submit(student, a, path, nb)
    return loopers


class PeakRSS:
    """The peak resident memory of one process, sampled every 0.2 s while it runs."""

    def __init__(self, pid: int):
        import psutil

        self.proc = psutil.Process(pid)
        self.peak = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()

    def _watch(self):
        import psutil

        while not self.stop.is_set():
            try:
                self.peak = max(self.peak, self.proc.memory_info().rss)
            except psutil.Error:
                return
            self.stop.wait(0.2)

    def done(self) -> int:
        self.stop.set()
        self.thread.join()
        return self.peak


def grade(course: TempCourse, out: Path, jobs: int, env: dict) -> dict:
    """``autograder grade`` of the whole class, timed; its ``--timings`` and the host's peak."""
    import subprocess

    timings = out.parent / "timings.json"
    cmd = grade_command(course, out, jobs, "--timings", str(timings))
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = PeakRSS(proc.pid)
    stdout, stderr = proc.communicate()
    wall = time.perf_counter() - start
    rss = peak.done()
    if proc.returncode != 0:  # a timeout is a row's status, not the run's: 0
        raise SystemExit(explain(subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)))
    data = json.loads(timings.read_text())
    data.update(wall=wall, peak_rss=rss, stdout=stdout)
    return data


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m autograder.authoring.bench_scale", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--sizes", default="60,600,3000", help="class sizes (default 60,600,3000)")
    parser.add_argument(
        "--loopers", type=float, default=0.05, help="share of looping submissions (default 0.05)"
    )
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument(
        "--timeout", type=float, help="Execute.timeout for this run (default: the course's)"
    )
    parser.add_argument("--no-stock", action="store_true", help="do not run stock nbgrader")
    parser.add_argument("--dir", type=Path, help="keep the courses here (default: a temp folder)")
    args = parser.parse_args(argv)
    sizes = [int(x) for x in args.sizes.split(",") if x.strip()]
    root = args.dir or Path(tempfile.mkdtemp(prefix="autograder-bench-scale-"))
    root.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, AUTOGRADER_CACHE=str(root / "cache"))
    print(
        f"sizes {sizes}, {args.loopers:.0%} loopers, --jobs {args.jobs}, {os.cpu_count()} CPUs, "
        f"load {os.getloadavg()[0]:.1f}; courses in {root}",
        flush=True,
    )
    first = None
    stock_per = None
    for n in sizes:
        course = TempCourse(root / f"class-{n}")
        course.generate()
        if args.timeout is not None:
            config = course.root / "nbgrader_config.py"
            config.write_text(config.read_text() + f"\nc.Execute.timeout = {args.timeout:g}\n")
        loopers = populate(course, n, args.loopers, root)
        r = grade(course, root / f"out-{n}", args.jobs, env)
        graded = r["wall"] - r["startup"]
        per = graded / n
        if first is None:
            first = per
        runs = r["runs"]
        total = sum(x[4] or 0.0 for x in runs)
        looping = sum(x[4] or 0.0 for x in runs if x[0] in loopers)
        by_kind = {
            kind: sum(x[4] or 0.0 for x in runs if x[0] in loopers and x[3] == kind)
            for kind in ("kernel", "judge")
        }
        timeouts = {kind: sum(x[5] for x in runs if x[3] == kind) for kind in ("kernel", "judge")}
        db = course.root / "gradebook.db"
        gb = r["gradebook"]
        print(
            f"\n{n} submissions ({len(loopers)} loopers): {r['wall']:.1f} s (start-up "
            f"{r['startup']:.1f} s, then {graded:.1f} s grading: {per:.3f} s per notebook, "
            f"{per / first:.2f}x the first stage's per notebook)",
            flush=True,
        )
        print(f"  host peak memory (autograder grade): {r['peak_rss'] / 2**20:.0f} MiB")
        print(
            f"  gradebook: {gb['writes']} notebooks recorded in {gb['seconds']:.1f} s "
            f"({1000 * gb['seconds'] / max(1, gb['writes']):.1f} ms each), "
            f"gradebook.db {db.stat().st_size / 2**20:.1f} MiB"
            if db.exists()
            else "  gradebook: none"
        )
        print(
            f"  sandbox seconds: {total:.0f}, of which the loopers' {looping:.0f} "
            f"({100 * looping / max(total, 1e-9):.0f}%: one kernel's {by_kind['kernel']:.0f}, the "
            f"judge's {by_kind['judge']:.0f}); test cells past the limit: one kernel "
            f"{timeouts['kernel']}, judge {timeouts['judge']}",
            flush=True,
        )
        if stock_per is None and not args.no_stock:
            start = time.perf_counter()
            for a in course.assignments:
                course.autograde(a)
            stock_seconds = time.perf_counter() - start
            stock_per = stock_seconds / n
            same = gradebook_scores(course) == grade_scores(root / f"out-{n}")
            print(
                f"  stock nbgrader autograde (serial): {stock_seconds:.1f} s ({stock_per:.2f} s per "
                f"notebook); scores identical: {'yes' if same else 'NO'}; ratio "
                f"{stock_seconds / r['wall']:.1f}x",
                flush=True,
            )
            if not same:
                return 1
        elif stock_per is not None:
            print(
                f"  stock nbgrader, extrapolated from the first stage: {stock_per * n:.0f} s "
                f"(ratio {stock_per * n / r['wall']:.1f}x)",
                flush=True,
            )
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
