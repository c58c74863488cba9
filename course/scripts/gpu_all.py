"""Run every GPU script of course/scripts/, one table file each, in a few minutes.

    python course/scripts/gpu_all.py "$OUT"             # from the repository root
    python course/scripts/gpu_all.py "$OUT" --quick     # the zoo at batch 8: a smoke test

Runs, in order and each in its own Python process, cuda_relu_memory.py (lesson 1's models at the
lesson's sizes), gpu_zoo.py (torchvision models; 5 timed steps after 2 warm-ups), gpu_scale.py
(lesson 1's models at batch 32 and 128), gpu_reserved.py (reserved memory in fresh processes)
and gpu_autocast.py (lesson 4's GAN step under autocast). Each script's stdout, markdown that
starts with torch's version, the GPU, cuDNN's version and the date, goes to OUTDIR/NAME.md; its
stderr, if any, to OUTDIR/NAME.stderr.txt; OUTDIR/index.md lists exit statuses and seconds.
Progress goes to stdout. Each script has a time limit (LIMITS, 410 s in all); one that
runs past it is stopped, keeps what it had written, and the next one runs. On one H100 or H200
the whole run takes a few minutes. Without CUDA: one line, exit status 0. Exit status 1 if any
script failed or was stopped.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import torch
from gpu_common import NO_CUDA, cuda_device, header

HERE = Path(__file__).resolve().parent
# script -> (arguments, time limit in seconds)
LIMITS = {
    "cuda_relu_memory": ([], 30),
    "gpu_zoo": (["--steps", "5", "--warmup", "2"], 130),
    "gpu_scale": ([], 45),
    "gpu_reserved": (["--repeats", "3", "--dcgan-repeats", "2"], 180),
    "gpu_autocast": ([], 25),
}


def run_script(name, args, limit, outdir):
    """Run NAME.py with args, stdout to OUTDIR/NAME.md; (status, seconds). status: the exit
    code, or "stopped after N s"."""
    md, err = outdir / f"{name}.md", outdir / f"{name}.stderr.txt"
    start = time.perf_counter()
    with md.open("w") as out, err.open("w") as errors:
        try:
            code = subprocess.run(
                [sys.executable, str(HERE / f"{name}.py"), *args],
                stdout=out,
                stderr=errors,
                timeout=limit,
                check=False,
            ).returncode
        except subprocess.TimeoutExpired:
            code = f"stopped after {limit} s"
    if err.stat().st_size == 0:
        err.unlink()
    return code, time.perf_counter() - start


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("outdir", type=Path, help="folder for the tables (created)")
    parser.add_argument("--quick", action="store_true", help="gpu_zoo.py --quick")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print(NO_CUDA)
        return 0
    args.outdir.mkdir(parents=True, exist_ok=True)
    top = header(cuda_device())  # reads the name only: the driver allocates nothing on the GPU
    print(top, flush=True)
    index = [top, "| script | arguments | exit status | seconds |", "|---|---|---|---:|"]
    failed = False
    for name, (script_args, limit) in LIMITS.items():
        script_args = [*script_args, *(["--quick"] if args.quick and name == "gpu_zoo" else [])]
        print(f"{name}.py {' '.join(script_args)} (limit {limit} s) ...", flush=True)
        code, seconds = run_script(name, script_args, limit, args.outdir)
        failed |= code != 0
        print(
            f"    exit status {code}, {seconds:.0f} s -> {args.outdir / (name + '.md')}", flush=True
        )
        index.append(f"| {name}.py | {' '.join(script_args)} | {code} | {seconds:.0f} |")
    (args.outdir / "index.md").write_text("\n".join(index) + "\n")
    print("done: " + ("some scripts failed, see index.md" if failed else "all exit status 0"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
