"""Issue 34's reproduction: many processes start Jupyter kernels at once on a loaded machine.

    python -m tests.kernel_starts --transport tcp --procs 16 --starts 20 [--burners 4]
    python -m tests.kernel_starts --transport ipc --procs 16 --starts 20

Each of ``--procs`` processes starts and stops ``--starts`` kernels one after the other, as
``nbgrader autograde`` does (jupyter_client's KernelManager, nbclient's ``wait_for_ready``),
while ``--burners`` CPU burners hold the load up. ``tcp`` is jupyter_client's default (five
localhost ports per kernel, picked by binding port 0 and closing it); ``ipc`` is what the tests
give stock nbgrader (autograder.course.stock_kernels: unix sockets in a private folder). Prints
every failed start with the last line of that kernel's own stderr, and the counts. Not part of
the suite (minutes of load); its results are in issue 34's closing note.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def starts(transport: str, n: int, tag: str) -> int:
    from jupyter_client.manager import KernelManager

    failed = 0
    for i in range(n):
        folder = tempfile.mkdtemp(prefix="kernel-starts-")
        err = Path(folder) / "stderr.txt"
        extra = {"ip": f"{folder}/kernel"} if transport == "ipc" else {}
        km = KernelManager(kernel_name="python3", transport=transport, **extra)
        start = time.monotonic()
        with open(err, "w") as fh:
            try:
                km.start_kernel(stdout=fh, stderr=fh, cwd=tempfile.gettempdir())
                kc = km.client()
                kc.start_channels()
                kc.wait_for_ready(timeout=60)
                kc.stop_channels()
                print(f"{tag} start {i}: ok {time.monotonic() - start:.1f} s", flush=True)
            except Exception as exc:  # what nbclient would report; the kernel's stderr says why
                failed += 1
                fh.flush()
                last = [ln for ln in err.read_text().splitlines() if "WARNING" not in ln][-1:]
                print(f"{tag} start {i}: FAILED {exc}; the kernel's stderr: {last}", flush=True)
            finally:
                km.shutdown_kernel(now=True)
        subprocess.run(["rm", "-rf", folder], check=False)
    return failed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--transport", choices=("tcp", "ipc"), default="tcp")
    parser.add_argument("--procs", type=int, default=16)
    parser.add_argument("--starts", type=int, default=20)
    parser.add_argument("--burners", type=int, default=2 * (os.cpu_count() or 1))
    parser.add_argument("--one", help=argparse.SUPPRESS)  # (a child: its tag)
    args = parser.parse_args(argv)
    if args.one:
        return min(starts(args.transport, args.starts, args.one), 100)
    burn = "while True: pass"
    burners = [subprocess.Popen([sys.executable, "-c", burn]) for _ in range(args.burners)]
    began = time.monotonic()
    try:
        children = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tests.kernel_starts",
                    "--transport",
                    args.transport,
                    "--starts",
                    str(args.starts),
                    "--one",
                    f"{args.transport}{p}",
                ],
                stdout=subprocess.PIPE,
                text=True,
            )
            for p in range(args.procs)
        ]
        lines = []
        for child in children:
            out, _ = child.communicate()
            lines += out.splitlines()
    finally:
        for b in burners:
            b.kill()
    failures = [ln for ln in lines if "FAILED" in ln]
    times = sorted(float(ln.split(": ok ")[1].split()[0]) for ln in lines if ": ok " in ln)
    print("\n".join(failures))
    print(
        f"{args.transport}: {len(failures)} of {args.procs * args.starts} kernel starts failed "
        f"({args.procs} processes at once, {args.burners} CPU burners, load average "
        f"{os.getloadavg()[0]:.1f}, {time.monotonic() - began:.0f} s); start-up of the others: "
        f"median {times[len(times) // 2] if times else 0:.1f} s, max {times[-1] if times else 0:.1f} s"
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
