"""In-place ReLU on real torchvision models: peak memory, step time and gradients on a GPU.

For torchvision's resnet18, resnet50 (batch 64), vgg16, densenet121 (batch 32) and mobilenet_v2
(batch 64) at 224 x 224, randomly initialised, this script measures

- a training step (forward, cross-entropy against random labels, backward; ``model.train()``)
  and a ``torch.no_grad()`` forward (``model.eval()``),
- in fp32 and under ``torch.autocast(dtype=torch.bfloat16)``,
- with every ReLU module set to ``inplace=False`` and then ``inplace=True`` (``m.inplace`` on
  every ``nn.ReLU``, and ``nn.ReLU6`` for mobilenet_v2; torchvision builds them in place; a
  functional ``F.relu(..., inplace=True)`` in a forward, as densenet121's last one, stays).

Each configuration is built afresh (seed 0), runs ``--warmup`` steps, its gradients dropped; then
the measured step: cache emptied, ``reset_peak_memory_stats()``, "before" = ``memory_allocated()``,
the step, "peak" = ``max_memory_allocated()``. The table gives peak - before (what the step added:
activations, gradients, workspaces) for both settings and the change (negative: in place uses
less); the median time of ``--steps`` further steps (``cudnn.benchmark`` off, synchronized); and
for training the largest absolute difference between the two settings' gradients of that
measured step (same weights, same input, same dropout seed).

    python course/scripts/gpu_zoo.py                         # all five, 5 timed steps
    python course/scripts/gpu_zoo.py --models resnet18 vgg16 --steps 10
    python course/scripts/gpu_zoo.py --quick                 # batch 8, 2 steps: a smoke test

Prints a markdown table; without CUDA, one line, exit status 0. torchvision is imported only
here; without it the script says so and leaves the rows out.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from gpu_common import NO_CUDA, MiB, change, cuda_device, header, peak_step, sync

BATCH = {"resnet18": 64, "resnet50": 64, "vgg16": 32, "densenet121": 32, "mobilenet_v2": 64}
MODES = ("training", "no_grad")
DTYPES = (None, torch.bfloat16)  # None: fp32, no autocast
RELUS = (nn.ReLU, nn.ReLU6)


def set_inplace(model, flag):
    """Set inplace=flag on every ReLU / ReLU6 module of model; return how many."""
    found = [m for m in model.modules() if isinstance(m, RELUS)]
    for m in found:
        m.inplace = flag
    return len(found)


def autocast(device, dtype):
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=dtype)


def step(model, x, target, mode, device, dtype):
    if mode == "training":
        with autocast(device, dtype):
            loss = F.cross_entropy(model(x).float(), target)
        loss.backward()
    else:
        with torch.no_grad(), autocast(device, dtype):
            model(x)


def measure(build, batch, inplace, mode, dtype, device, steps, warmup, size=224):
    """One configuration: dict(relus, added (bytes), ms (median), grads (training, on the CPU))."""
    torch.manual_seed(0)
    model = build().to(device)
    relus = set_inplace(model, inplace)
    model.train(mode == "training")
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(batch, 3, size, size, generator=gen).to(device)
    target = torch.randint(0, 1000, (batch,), generator=gen).to(device)

    one = functools.partial(step, model, x, target, mode, device, dtype)
    for _ in range(warmup):
        one()
        model.zero_grad(set_to_none=True)
    torch.manual_seed(1)  # the same dropout masks in both settings
    before, peak = peak_step(one, device)
    grads = None
    if mode == "training":
        grads = torch.cat(
            [
                p.grad.detach().float().flatten().cpu()
                for p in model.parameters()
                if p.grad is not None
            ]
        )
    times = []
    for _ in range(steps):
        model.zero_grad(set_to_none=True)
        sync(device)
        start = time.perf_counter()
        one()
        sync(device)
        times.append(time.perf_counter() - start)
    del one, model, x, target
    gc.collect()
    torch.cuda.empty_cache()
    return {
        "relus": relus,
        "added": peak - before,
        "grads": grads,
        "ms": 1000 * statistics.median(times) if times else float("nan"),
    }


def row(name, build, batch, mode, dtype, device, steps, warmup, size=224):
    label = "fp32" if dtype is None else "bf16"
    try:
        off = measure(build, batch, False, mode, dtype, device, steps, warmup, size)
        on = measure(build, batch, True, mode, dtype, device, steps, warmup, size)
    except RuntimeError as exc:  # out of memory, say: one row lost, not the table
        gc.collect()
        torch.cuda.empty_cache()
        return (
            f"| {name} | {batch} | {mode} | {label} | error: {type(exc).__name__}: "
            f"{str(exc).splitlines()[0][:120]} |"
        )
    diff = "" if off["grads"] is None else f"{(off['grads'] - on['grads']).abs().max().item():.2e}"
    return (
        f"| {name} | {batch} | {mode} | {label} | {off['relus']} | {off['added'] / MiB:.1f} "
        f"| {on['added'] / MiB:.1f} | {change(off['added'], on['added'])} | {off['ms']:.2f} "
        f"| {on['ms']:.2f} | {diff} |"
    )


TABLE_HEAD = (
    "| model | batch | mode | dtype | ReLU modules | peak - before, inplace=False (MiB) "
    "| inplace=True (MiB) | change | step ms, False | step ms, True "
    "| max abs grad diff |\n|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|"
)


def torchvision_models():
    """torchvision.models, or None where torchvision is not installed."""
    try:
        import torchvision.models
    except ImportError:
        return None
    return torchvision.models


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", help="CUDA device (default: cuda)")
    parser.add_argument("--models", nargs="+", choices=list(BATCH), default=list(BATCH))
    parser.add_argument("--steps", type=int, default=5, help="timed steps (median reported)")
    parser.add_argument("--warmup", type=int, default=2, help="steps before the measured one")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="batch 8, 2 timed steps, 1 warm-up: a smoke test, not figures",
    )
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print(NO_CUDA)
        return 0
    device = cuda_device(args.device)
    torch.cuda.set_device(device)
    torch.backends.cudnn.benchmark = False  # same kernels in both settings
    print(header(device))
    tvm = torchvision_models()
    if tvm is None:
        print(
            "torchvision is not installed: the rows of " + ", ".join(args.models) + " are left out."
        )
        return 0
    if args.quick:
        args.steps, args.warmup = 2, 1
    print(TABLE_HEAD, flush=True)
    for name in args.models:
        batch = 8 if args.quick else BATCH[name]
        build = getattr(tvm, name)
        for mode in MODES:
            for dtype in DTYPES:
                print(
                    row(name, build, batch, mode, dtype, device, args.steps, args.warmup),
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
