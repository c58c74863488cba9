"""Lesson 1's six models at realistic batch sizes: does the in-place activation's saving scale?

cuda_relu_memory.py measures the models of course/relu_memory.py at the lesson's small batch
sizes (4 to 8). This script measures the same models, imported from there, at batch 32 and 128:
the MLP with 2048 and 8192 rows (64 rows per "image"), the ResNet BasicBlock with 64 channels at
56 x 56 (the size of torchvision resnet18's first stage), the others at the lesson's image sizes.

For each model, mode (training: forward, then backward of ``out.sum()``; no_grad: forward) and
``inplace`` False / True, it does what cuda_relu_memory.py does: one warm-up step, the cache
emptied, ``reset_peak_memory_stats()``, then the measured step. "peak - before" is
``max_memory_allocated()`` during the step minus ``memory_allocated()`` just before it (what the
step itself added: activations, gradients, workspaces); "change" is inplace=True against
inplace=False (negative: in place uses less). ``max_memory_reserved()`` is what the caching
allocator held from the driver at its highest (what ``nvidia-smi`` reflects, without the CUDA
context).

    python course/scripts/gpu_scale.py                    # batch 32 and 128
    python course/scripts/gpu_scale.py --batches 8 32

Prints markdown tables; without CUDA, one line, exit status 0.
"""

from __future__ import annotations

import argparse
import sys

import torch
from cuda_relu_memory import MODES, measure
from gpu_common import NO_CUDA, MiB, change, cuda_device, header, relu_memory


def scaled_models(batch):
    """name -> (build(inplace), input shape) for relu_memory's models at this batch size."""
    rm = relu_memory
    return {
        "MLP": (rm.mlp, (batch * 64, 256)),
        "AlexNet features": (rm.alexnet_features, (batch, 3, 224, 224)),
        "BasicBlock(64ch, 56x56)": (
            lambda inplace: rm.BasicBlock(64, inplace),
            (batch, 64, 56, 56),
        ),
        "DCGAN generator": (rm.dcgan_generator, (batch, 100, 1, 1)),
        "8 x conv-BN-ReLU": (rm.conv_bn_net, (batch, 3, 32, 32)),
        "DCGAN discriminator (LeakyReLU)": (rm.dcgan_discriminator, (batch, 3, 64, 64)),
    }


def table(device, batch):
    models = scaled_models(batch)
    rows = [
        f"### batch {batch} (MLP rows: {batch * 64})",
        "",
        "| model | mode | peak - before, inplace=False (MiB) | inplace=True (MiB) | change "
        "| max_memory_reserved, False (MiB) | True (MiB) |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for name in models:
        for mode in MODES:
            before0, peak0, reserved0, _ = measure(name, False, mode, device, models)
            before1, peak1, reserved1, _ = measure(name, True, mode, device, models)
            added0, added1 = peak0 - before0, peak1 - before1
            rows.append(
                f"| {name} | {mode} | {added0 / MiB:.2f} | {added1 / MiB:.2f} "
                f"| {change(added0, added1)} | {reserved0 / MiB:.0f} "
                f"| {reserved1 / MiB:.0f} |"
            )
    return "\n".join(rows) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", help="CUDA device (default: cuda)")
    parser.add_argument("--batches", type=int, nargs="+", default=[32, 128])
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print(NO_CUDA)
        return 0
    device = cuda_device(args.device)
    torch.cuda.set_device(device)
    print(header(device))
    for batch in args.batches:
        print(table(device, batch), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
