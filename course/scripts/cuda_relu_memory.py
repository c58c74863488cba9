"""Lesson 1, section 8.6: the in-place ReLU's memory effect as the CUDA caching allocator reports it.

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

The models are those of course/relu_memory.py (lesson 1, section 8; its appendix
01a_relu_inplace_appendix.ipynb shows them); keep both in step.
"""
from __future__ import annotations

import argparse
import gc
import sys

import torch
import torch.nn as nn

MiB = 2 ** 20


class BasicBlock(nn.Module):
    """torchvision's ResNet BasicBlock (no downsampling), as in lesson 1, section 7."""

    def __init__(self, channels, inplace):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.relu = nn.ReLU(inplace=inplace)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x):                       # as torchvision writes it
        identity = x
        out = self.conv1(x)
        out = self.bn1(out)
        out = self.relu(out)
        out = self.conv2(out)
        out = self.bn2(out)
        out += identity
        return self.relu(out)


def mlp(inplace, d=256):
    return nn.Sequential(nn.Linear(d, 4 * d), nn.ReLU(inplace), nn.Linear(4 * d, d))


def alexnet_features(inplace):
    def relu():
        return nn.ReLU(inplace)
    return nn.Sequential(
        nn.Conv2d(3, 64, 11, 4, 2), relu(), nn.MaxPool2d(3, 2),
        nn.Conv2d(64, 192, 5, padding=2), relu(), nn.MaxPool2d(3, 2),
        nn.Conv2d(192, 384, 3, padding=1), relu(),
        nn.Conv2d(384, 256, 3, padding=1), relu(),
        nn.Conv2d(256, 256, 3, padding=1), relu(), nn.MaxPool2d(3, 2))


def dcgan_generator(inplace, nz=100, ngf=64):
    def up(cin, cout, stride, padding):
        return [nn.ConvTranspose2d(cin, cout, 4, stride, padding, bias=False), nn.BatchNorm2d(cout),
                nn.ReLU(inplace)]
    return nn.Sequential(*up(nz, ngf * 8, 1, 0), *up(ngf * 8, ngf * 4, 2, 1), *up(ngf * 4, ngf * 2, 2, 1),
                         *up(ngf * 2, ngf, 2, 1), nn.ConvTranspose2d(ngf, 3, 4, 2, 1, bias=False), nn.Tanh())


def conv_bn_net(inplace, blocks=8, c=32):
    layers = []
    for i in range(blocks):
        layers += [nn.Conv2d(3 if i == 0 else c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c),
                   nn.ReLU(inplace)]
    return nn.Sequential(*layers)


def dcgan_discriminator(inplace, ndf=64):
    def down(cin, cout):
        return [nn.Conv2d(cin, cout, 4, 2, 1, bias=False), nn.BatchNorm2d(cout), nn.LeakyReLU(0.2, inplace)]
    return nn.Sequential(nn.Conv2d(3, ndf, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace),
                         *down(ndf, ndf * 2), *down(ndf * 2, ndf * 4), *down(ndf * 4, ndf * 8),
                         nn.Conv2d(ndf * 8, 1, 4, 1, 0, bias=False), nn.Sigmoid())


# name -> (build(inplace), input shape): the lesson's models and batch sizes
MODELS = {
    "MLP": (mlp, (64, 256)),
    "AlexNet features": (alexnet_features, (8, 3, 224, 224)),
    "BasicBlock": (lambda inplace: BasicBlock(8, inplace), (4, 8, 16, 16)),
    "DCGAN generator": (dcgan_generator, (4, 100, 1, 1)),
    "8 x conv-BN-ReLU": (conv_bn_net, (8, 3, 32, 32)),
    "DCGAN discriminator (LeakyReLU)": (dcgan_discriminator, (4, 3, 64, 64)),
}
MODES = ("training", "no_grad")


def run(model, inp, mode):
    if mode == "training":
        model(inp).sum().backward()
    else:
        with torch.no_grad():
            model(inp)


def measure(name, inplace, mode, device):
    """(allocated before the step, peak allocated during it, peak reserved, reserved after), in bytes."""
    build, shape = MODELS[name]
    torch.manual_seed(0)
    model = build(inplace).to(device)
    inp = torch.randn(shape, device=device)
    run(model, inp, mode)                       # warm-up
    model.zero_grad(set_to_none=True)
    torch.cuda.synchronize(device)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device)
    run(model, inp, mode)
    torch.cuda.synchronize(device)
    result = (before, torch.cuda.max_memory_allocated(device), torch.cuda.max_memory_reserved(device),
              torch.cuda.memory_reserved(device))
    del model, inp
    gc.collect()
    torch.cuda.empty_cache()
    return result


def table(device):
    rows = ["| model | mode | inplace | allocated before (MiB) | max_memory_allocated (MiB) "
            "| peak - before (MiB) | max_memory_reserved (MiB) | memory_reserved after (MiB) |",
            "|---|---|---|---:|---:|---:|---:|---:|"]
    for name in MODELS:
        for mode in MODES:
            for inplace in (False, True):
                before, peak, max_reserved, reserved = measure(name, inplace, mode, device)
                rows.append(f"| {name} | {mode} | {inplace} | {before / MiB:.2f} | {peak / MiB:.2f} "
                            f"| {(peak - before) / MiB:.2f} | {max_reserved / MiB:.2f} | {reserved / MiB:.2f} |")
    return "\n".join(rows)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", help="CUDA device (default: cuda)")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("No CUDA device: this script measures the CUDA caching allocator and has nothing to measure here.")
        return 0
    device = torch.device(args.device)
    if device.index is None:                    # set_device refuses torch.device("cuda")
        device = torch.device("cuda", torch.cuda.current_device())
    torch.cuda.set_device(device)
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name(device)}\n")
    print(table(device))
    return 0


if __name__ == "__main__":
    sys.exit(main())
