"""Autocast and the in-place check: lesson 4's reported GAN step under fp16/bf16 autocast.

Three experiments, on the CPU (bf16 autocast) and, where there is one, on a CUDA GPU (fp16 and
bf16 autocast), each against plain fp32:

1. Lesson 4's reported GAN step (course/04_training_loops.ipynb: G = Linear(2,16)-ReLU-
   Linear(16,2), D = Linear(2,16)-LeakyReLU(0.2)-Linear(16,1), SGD lr 0.05, the lesson's seeds;
   one forward of D on the fake batch used by both losses, then ``loss_D.backward(
   retain_graph=True); opt_D.step(); loss_G.backward()``). In fp32 the second backward raises
   the in-place error (opt_D.step() wrote D's weights, which the forward saved). Under autocast
   it raises nothing: a Linear saves the fp16/bf16 *cast copy* of its weight, a different
   tensor with its own version counter, and G is trained against the OLD D without a word.
   The table says so by comparing G's gradient with the gradient of the same step without
   opt_D.step() (against the old D) and with a fresh forward of the updated D (the correct step).
2. The same with a LayerNorm, then a BatchNorm1d, after D's first Linear: norms run in fp32
   under autocast and save their weight and bias themselves, so the error comes back.
   Saved-tensor hooks that record each saved tensor's version (as lesson 4's ``check_saved``)
   name every saved tensor that opt_D.step() moved.
3. Autocast's weight-cast cache: inside ONE autocast region, a Linear's weight is cast once and
   the copy reused. Forward, ``with torch.no_grad(): weight.add_(1)``, forward again in the same
   region: the second output still uses the stale cast copy; a fresh region sees the new weight.

    python course/scripts/gpu_autocast.py                  # CPU rows; CUDA rows where a GPU is

The CPU part of the output is deterministic (booleans and error messages; tests/test_gpu_autocast.py
compares it). Prints markdown tables; exit status 0.
"""

from __future__ import annotations

import argparse
import contextlib
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from gpu_common import cuda_device, header

LR = 0.05


def data():
    """Lesson 4's batch: real points around (2, 1) and G's noise, from generator seed 1."""
    gen = torch.Generator().manual_seed(1)
    real = torch.randn(64, 2, generator=gen) * 0.3 + torch.tensor([2.0, 1.0])
    z = torch.randn(64, 2, generator=gen)
    return real, z


def make_gan(norm=None):
    """Lesson 4's make_gan(), seed 0; norm: a layer class put after D's first Linear."""
    torch.manual_seed(0)
    G = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 2))
    D = nn.Sequential(
        nn.Linear(2, 16), *([norm(16)] if norm else []), nn.LeakyReLU(0.2), nn.Linear(16, 1)
    )
    return G, D


def bce(logits, real):
    target = torch.ones_like(logits) if real else torch.zeros_like(logits)
    return F.binary_cross_entropy_with_logits(logits, target)


def precision(device, dtype):
    """A context: autocast to dtype on device, or nothing for fp32 (dtype None)."""
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=dtype)


def reported_step(device, dtype, norm=None, variant="reported"):
    """G's gradients after lesson 4's reported step. variant "old D": the same without
    opt_D.step() (G against the old D); "updated D": G's loss from a new forward of the
    updated D (the correct step). Raises what autograd raises."""
    real, z = (t.to(device) for t in data())
    G, D = (m.to(device) for m in make_gan(norm))
    opt_G = torch.optim.SGD(G.parameters(), lr=LR)
    opt_D = torch.optim.SGD(D.parameters(), lr=LR)
    with precision(device, dtype):
        fake = G(z)
        d_real, d_fake = D(real), D(fake)  # D(fake): one forward, used by both losses
        loss_D = bce(d_real, True) + bce(d_fake, False)
        loss_G = bce(d_fake, True)
    opt_D.zero_grad()
    loss_D.backward(retain_graph=True)
    if variant != "old D":
        opt_D.step()  # writes D's weights in place
    if variant == "updated D":
        with precision(device, dtype):
            loss_G = bce(D(fake), True)
    opt_G.zero_grad()
    loss_G.backward()
    return [p.grad.detach().clone() for p in G.parameters()]


def first_sentence(exc):
    return f"{type(exc).__name__}: {str(exc).split('. ')[0]}"


def outcome(fn):
    try:
        fn()
    except RuntimeError as exc:
        return first_sentence(exc)
    return "no error"


def same(grads_a, grads_b):
    return all(torch.equal(a, b) for a, b in zip(grads_a, grads_b, strict=True))


@contextlib.contextmanager
def moved_saved_tensors(moved, **modules):
    """Saved-tensor hooks (as lesson 4's check_saved) that append to `moved`, at backward, the
    name of every saved tensor whose version changed since the forward saved it. They replace
    autograd's own check, so backward runs to the end."""
    owners = {
        t.untyped_storage().data_ptr(): f"{name}.{n}"
        for name, module in modules.items()
        for n, t in [*module.named_parameters(), *module.named_buffers()]
    }

    def pack(t):
        return t.detach(), t._version

    def unpack(packed):
        t, version = packed
        if t._version != version:
            owner = owners.get(t.untyped_storage().data_ptr(), "a tensor no module owns")
            entry = f"{owner} {tuple(t.shape)} v{version} -> v{t._version}"
            if entry not in moved:
                moved.append(entry)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        yield


def moved_tensors(device, dtype, norm):
    """The saved tensors of G and D that the reported step's opt_D.step() moved, named."""
    real, z = (t.to(device) for t in data())
    G, D = (m.to(device) for m in make_gan(norm))
    opt_D = torch.optim.SGD(D.parameters(), lr=LR)
    moved = []
    with moved_saved_tensors(moved, G=G, D=D):
        with precision(device, dtype):
            fake = G(z)
            d_real, d_fake = D(real), D(fake)
            loss_D = bce(d_real, True) + bce(d_fake, False)
            loss_G = bce(d_fake, True)
        loss_D.backward(retain_graph=True)
        opt_D.step()
        loss_G.backward()
    return ", ".join(moved) or "none"


def label(dtype):
    return "fp32" if dtype is None else f"autocast {str(dtype).removeprefix('torch.')}"


def gan_table(device, dtypes):
    rows = [
        "| device | precision | D | reported step | G's gradient = G against the old D "
        "| = G against the updated D (correct) | saved tensors opt_D.step() moved |",
        "|---|---|---|---|---|---|---|",
    ]
    for norm in (None, nn.LayerNorm, nn.BatchNorm1d):
        d_name = "-".join(["Linear", *([norm.__name__] if norm else []), "LeakyReLU", "Linear"])
        for dtype in dtypes:
            result = outcome(lambda: reported_step(device, dtype, norm))  # noqa: B023
            old = updated = "-"
            if result == "no error":
                grads = reported_step(device, dtype, norm)
                old = same(grads, reported_step(device, dtype, norm, "old D"))
                updated = same(grads, reported_step(device, dtype, norm, "updated D"))
            moved = moved_tensors(device, dtype, norm)
            rows.append(
                f"| {device.type} | {label(dtype)} | {d_name} | {result} | {old} "
                f"| {updated} | {moved} |"
            )
    return "\n".join(rows) + "\n"


def cache_table(device, dtypes):
    rows = [
        "| device | precision | same region, after `weight.add_(1)`: output changed "
        "| fresh region: output changed | fresh region = the new weight cast by hand |",
        "|---|---|---|---|---|",
    ]
    for dtype in dtypes:
        torch.manual_seed(0)
        lin = nn.Linear(2, 3).to(device)
        x = torch.randn(8, 2).to(device)
        with torch.autocast(device.type, dtype=dtype):
            first = lin(x)
            with torch.no_grad():
                lin.weight.add_(1)  # an in-place update inside the region
            second = lin(x)  # the cached cast of the OLD weight
        with torch.autocast(device.type, dtype=dtype):
            fresh = lin(x)
        by_hand = F.linear(x.to(dtype), lin.weight.to(dtype), lin.bias.to(dtype))
        rows.append(
            f"| {device.type} | {label(dtype)} | {not torch.equal(first, second)} "
            f"| {not torch.equal(first, fresh)} | {torch.equal(fresh, by_hand)} |"
        )
    return "\n".join(rows) + "\n"


def report(device):
    """The markdown tables for one device (cpu: bf16 autocast; cuda: fp16 and bf16)."""
    low = [torch.bfloat16] if device.type == "cpu" else [torch.float16, torch.bfloat16]
    return (
        f"### {device.type}: lesson 4's reported GAN step, fp32 vs autocast\n\n"
        + gan_table(device, [None, *low])
        + f"\n### {device.type}: autocast's weight-cast cache inside one region\n\n"
        + cache_table(device, low)
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", help="CUDA device (default: cuda)")
    parser.add_argument("--cpu-only", action="store_true", help="leave the CUDA rows out")
    args = parser.parse_args(argv)
    cuda = torch.cuda.is_available() and not args.cpu_only
    device = cuda_device(args.device) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    print(header(device))
    print(report(torch.device("cpu")), flush=True)
    if cuda:
        print(report(device))
    else:
        print("No CUDA device: the CUDA rows are left out.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
