"""What nvidia-smi shows vs the tensor peak: reserved memory in fresh processes.

``torch.cuda.max_memory_allocated()`` is the peak of the bytes held by tensors. The caching
allocator reserves memory from the driver in blocks and keeps it (``memory_reserved()``,
``max_memory_reserved()``); ``nvidia-smi`` shows that plus the CUDA context and library
workspaces. This script measures both, each configuration in a FRESH Python process (so no cache
of an earlier run is reused), repeated to show the figures are repeatable:

1. AlexNet features (course/relu_memory.py's ``alexnet_features``), batch 128 at 224 x 224, one
   training step (forward, backward of ``out.sum()``) after a warm-up step, cache emptied and
   peak reset before it, as cuda_relu_memory.py does; ``inplace`` False vs True.
2. PyTorch's DCGAN example (github.com/pytorch/examples, dcgan/main.py): its G and D (nz=100,
   ngf=ndf=64, 64 x 64 images; relu_memory's ``dcgan_generator`` / ``dcgan_discriminator`` are
   the same layers) with the example's weight init, ``cudnn.benchmark = True``, BCELoss, Adam
   (lr 2e-4, betas 0.5, 0.999), batch 64 of random images (as its ``--dataset fake``), 3 full
   training steps as the example writes them; G's ReLU and D's LeakyReLU inplace True / False.
   The peak is taken over the 3 steps (Adam's state included, and the workspaces cuDNN tries
   while ``benchmark`` picks its algorithms in the first step); "before" is after building.

Columns: max_memory_allocated; peak - before; max_memory_reserved; memory_reserved at the end;
"device used" = total - free from ``torch.cuda.mem_get_info()`` at the end (what nvidia-smi
reports for the whole GPU, CUDA context included); "process added" = free at the start (after
the CUDA context) - free at the end.

    python course/scripts/gpu_reserved.py                  # 3 runs (AlexNet), 2 runs (DCGAN)
    python course/scripts/gpu_reserved.py --repeats 5 --dcgan-repeats 3

Prints markdown tables; without CUDA, one line, exit status 0.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import torch
import torch.nn as nn
from gpu_common import NO_CUDA, MiB, cuda_device, header, peak_step, relu_memory, sync

COLUMNS = (
    "max_memory_allocated",
    "peak - before",
    "max_memory_reserved",
    "memory_reserved",
    "device used",
    "process added",
)


def alexnet_child(device, inplace, batch=128, size=224):
    torch.manual_seed(0)
    model = relu_memory.alexnet_features(inplace).to(device)
    x = torch.randn(batch, 3, size, size, device=device)
    model(x).sum().backward()  # warm-up
    model.zero_grad(set_to_none=True)
    before, peak = peak_step(lambda: model(x).sum().backward(), device)
    return before, peak


def weights_init(m):
    """The DCGAN example's initialisation."""
    name = type(m).__name__
    if "Conv" in name:
        nn.init.normal_(m.weight, 0.0, 0.02)
    elif "BatchNorm" in name:
        nn.init.normal_(m.weight, 1.0, 0.02)
        nn.init.zeros_(m.bias)


def dcgan_child(device, g_inplace, d_inplace, batch=64, steps=3, nz=100):
    torch.backends.cudnn.benchmark = True  # as the example sets it
    torch.manual_seed(0)
    G = relu_memory.dcgan_generator(g_inplace, nz=nz, ngf=64).to(device)
    D = relu_memory.dcgan_discriminator(d_inplace, ndf=64).to(device)
    G.apply(weights_init)
    D.apply(weights_init)
    criterion = nn.BCELoss()
    opt_D = torch.optim.Adam(D.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_G = torch.optim.Adam(G.parameters(), lr=2e-4, betas=(0.5, 0.999))
    real = torch.rand(batch, 3, 64, 64, device=device) * 2 - 1
    label = torch.empty(batch, device=device)

    def train():
        for _ in range(steps):  # the example's loop body
            D.zero_grad()
            output = D(real).view(-1)
            criterion(output, label.fill_(1.0)).backward()
            fake = G(torch.randn(batch, nz, 1, 1, device=device))
            output = D(fake.detach()).view(-1)
            criterion(output, label.fill_(0.0)).backward()
            opt_D.step()
            G.zero_grad()
            output = D(fake).view(-1)
            criterion(output, label.fill_(1.0)).backward()
            opt_G.step()

    return peak_step(train, device)


def child(kind, flags, device):
    """Run one configuration in this process; return the figures in MiB."""
    free_start, total = torch.cuda.mem_get_info(device)
    if kind == "alexnet":
        before, peak = alexnet_child(device, flags[0])
    else:
        before, peak = dcgan_child(device, *flags)
    sync(device)
    free_end, _ = torch.cuda.mem_get_info(device)
    figures = (
        peak,
        peak - before,
        torch.cuda.max_memory_reserved(device),
        torch.cuda.memory_reserved(device),
        total - free_end,
        free_start - free_end,
    )
    return dict(zip(COLUMNS, (round(v / MiB, 1) for v in figures), strict=True))


def in_fresh_process(kind, flags, device):
    """child() in a new Python process: its figures, or {"error": ...}."""
    command = [
        sys.executable,
        __file__,
        "--device",
        str(device),
        "--child",
        kind,
        *[str(int(f)) for f in flags],
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    lines = result.stdout.strip().splitlines()
    if result.returncode != 0 or not lines:
        return {"error": (result.stderr.strip().splitlines() or ["no output"])[-1][:150]}
    return json.loads(lines[-1])


def cells(figures):
    if "error" in figures:
        return f"error: {figures['error']} |"
    return " | ".join(f"{figures[c]:.1f}" for c in COLUMNS) + " |"


def alexnet_table(device, repeats):
    rows = [
        "### AlexNet features, batch 128, training step, a fresh process per run",
        "",
        "| inplace | run | " + " (MiB) | ".join(COLUMNS) + " (MiB) |",
        "|---|---:|" + "---:|" * len(COLUMNS),
    ]
    for inplace in (False, True):
        for run in range(1, repeats + 1):
            rows.append(
                f"| {inplace} | {run} | " + cells(in_fresh_process("alexnet", [inplace], device))
            )
    return "\n".join(rows) + "\n"


def dcgan_table(device, repeats):
    rows = [
        "### PyTorch's DCGAN example, batch 64, 3 training steps, a fresh process per run",
        "",
        "| G ReLU inplace | D LeakyReLU inplace | run | " + " (MiB) | ".join(COLUMNS) + " (MiB) |",
        "|---|---|---:|" + "---:|" * len(COLUMNS),
    ]
    for g_inplace, d_inplace in ((False, False), (True, False), (False, True), (True, True)):
        for run in range(1, repeats + 1):
            figures = in_fresh_process("dcgan", [g_inplace, d_inplace], device)
            rows.append(f"| {g_inplace} | {d_inplace} | {run} | " + cells(figures))
    return "\n".join(rows) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", help="CUDA device (default: cuda)")
    parser.add_argument("--repeats", type=int, default=3, help="AlexNet runs per setting")
    parser.add_argument("--dcgan-repeats", type=int, default=2, help="DCGAN runs per setting")
    parser.add_argument("--child", choices=["alexnet", "dcgan"], help=argparse.SUPPRESS)
    parser.add_argument("flags", nargs="*", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print(NO_CUDA)
        return 0
    device = cuda_device(args.device)
    if args.child:
        torch.cuda.set_device(device)
        print(json.dumps(child(args.child, [bool(f) for f in args.flags], device)))
        return 0
    # The parent allocates nothing on the GPU (no set_device, no tensor: no CUDA context of
    # its own), so "device used" in a child counts that child (and whatever else runs there).
    print(header(device))
    print(alexnet_table(device, args.repeats), flush=True)
    print(dcgan_table(device, args.dcgan_repeats), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
