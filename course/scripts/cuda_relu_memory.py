"""Lesson 1, section 8.6: the in-place ReLU's memory effect, as the CUDA allocator reports it.

The lesson measures live tensor bytes on the CPU, exactly and deterministically. On a GPU, what
people look at is the caching allocator: ``torch.cuda.max_memory_allocated()`` (the peak of the
bytes held by tensors) and ``torch.cuda.memory_reserved()`` (what the allocator keeps from the
driver; ``nvidia-smi`` shows that plus the CUDA context). This script runs one step of each of
the lesson's models - training (forward, then backward of ``out.sum()``) and ``torch.no_grad()``
(forward only), with ``inplace=False`` and ``inplace=True`` - and prints a markdown table.

    python course/scripts/cuda_relu_memory.py              # needs a CUDA GPU
    python course/scripts/cuda_relu_memory.py --device cuda:1

Each configuration is built on the GPU, run once to warm up (cuDNN/cuBLAS handles and
workspaces), its gradients dropped, the cache emptied and the peak statistics reset; then the
measured step runs. "before" is ``memory_allocated()`` just before the measured step (parameters,
input, library workspaces); "peak" is ``max_memory_allocated()`` during it. The numbers include
what cuDNN allocates as workspace, so they are not the lesson's CPU numbers. On a machine
without CUDA the script prints one line and exits with status 0.

The models and batch sizes are imported from course/relu_memory.py (lesson 1, section 8; its
appendix 01a_relu_inplace_appendix.ipynb shows them), so both measure the same networks.
gpu_scale.py runs this measurement at larger batch sizes.
"""

from __future__ import annotations

import argparse
import gc
import sys

import torch
from gpu_common import NO_CUDA, MiB, cuda_device, header, relu_memory

# name -> (build(inplace), input shape): the lesson's models and batch sizes
MODELS = relu_memory.MODELS
MODES = ("training", "no_grad")


def run(model, inp, mode):
    if mode == "training":
        model(inp).sum().backward()
    else:
        with torch.no_grad():
            model(inp)


def measure(name, inplace, mode, device, models=None):
    """(allocated before the step, peak allocated during it, peak reserved, reserved after),
    in bytes, for models[name] (default: MODELS)."""
    build, shape = (models or MODELS)[name]
    torch.manual_seed(0)
    model = build(inplace).to(device)
    inp = torch.randn(shape, device=device)
    run(model, inp, mode)  # warm-up
    model.zero_grad(set_to_none=True)
    torch.cuda.synchronize(device)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device)
    run(model, inp, mode)
    torch.cuda.synchronize(device)
    result = (
        before,
        torch.cuda.max_memory_allocated(device),
        torch.cuda.max_memory_reserved(device),
        torch.cuda.memory_reserved(device),
    )
    del model, inp
    gc.collect()
    torch.cuda.empty_cache()
    return result


def table(device, models=None):
    rows = [
        "| model | mode | inplace | allocated before (MiB) | max_memory_allocated (MiB) "
        "| peak - before (MiB) | max_memory_reserved (MiB) | memory_reserved after (MiB) |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for name in models or MODELS:
        for mode in MODES:
            for inplace in (False, True):
                before, peak, max_reserved, reserved = measure(name, inplace, mode, device, models)
                rows.append(
                    f"| {name} | {mode} | {inplace} | {before / MiB:.2f} "
                    f"| {peak / MiB:.2f} | {(peak - before) / MiB:.2f} "
                    f"| {max_reserved / MiB:.2f} | {reserved / MiB:.2f} |"
                )
    return "\n".join(rows)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", help="CUDA device (default: cuda)")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print(NO_CUDA)
        return 0
    device = cuda_device(args.device)  # set_device refuses torch.device("cuda"): no index
    torch.cuda.set_device(device)
    print(header(device))
    print(table(device))
    return 0


if __name__ == "__main__":
    sys.exit(main())
