"""What the in-place doctor costs: a training step with it off and on.

    python -m autograder.authoring.doctor_bench [--steps 30] [--rounds 5] [--threads 1]

Two steps: lesson 4's GAN step (``gan_step``: G and D, 2-16-2 MLPs, batch 64, SGD) and a
ResNet-18 training step (the torchvision architecture, written out here since torchvision has no
CPU build on the course's machines: batch 16 of 3x64x64 images, 10 classes, SGD with momentum).
Each is timed with the doctor off and on, in alternating rounds (so a busy machine slows both
alike); the figure is each side's median time per step, and their ratio. "Off" runs no code of the
doctor at all (nothing is installed), so its cost off is zero by construction.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from autograder.doctor import inplace_doctor


def bce(logits, real):
    target = torch.ones_like(logits) if real else torch.zeros_like(logits)
    return F.binary_cross_entropy_with_logits(logits, target)


def gan():
    """Lesson 4's networks and its correct step (course/04_training_loops.ipynb, section 3)."""
    torch.manual_seed(0)
    G = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 2))
    D = nn.Sequential(nn.Linear(2, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
    opt_G = torch.optim.SGD(G.parameters(), lr=0.05)
    opt_D = torch.optim.SGD(D.parameters(), lr=0.05)
    gen = torch.Generator().manual_seed(1)
    real = torch.randn(64, 2, generator=gen) * 0.3 + torch.tensor([2.0, 1.0])
    z = torch.randn(64, 2, generator=gen)

    def step():
        fake = G(z)
        loss_D = bce(D(real), True) + bce(D(fake.detach()), False)
        opt_D.zero_grad()
        loss_D.backward()
        opt_D.step()
        loss_G = bce(D(fake), True)
        opt_G.zero_grad()
        loss_G.backward()
        opt_G.step()

    return step


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x):
        identity = x if self.down is None else self.down(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += identity
        return self.relu(out)


def resnet18(classes=10):
    layers = [
        nn.Conv2d(3, 64, 7, 2, 3, bias=False),
        nn.BatchNorm2d(64),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(3, 2, 1),
    ]
    cin = 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        layers += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, classes)]
    return nn.Sequential(*layers)


def resnet():
    torch.manual_seed(0)
    model = resnet18()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = torch.randn(16, 3, 64, 64), torch.randint(0, 10, (16,))

    def step():
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()

    return step


def timed(step, steps: int, on: bool) -> float:
    start = time.perf_counter()
    if on:
        with inplace_doctor():
            for _ in range(steps):
                step()
    else:
        for _ in range(steps):
            step()
    return (time.perf_counter() - start) / steps


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=30, help="steps per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} thread(s), {args.rounds} rounds")
    for name, make, steps in (
        ("lesson 4 GAN step", gan, args.steps * 10),
        ("ResNet-18 step, batch 16x3x64x64", resnet, args.steps),
    ):
        step = make()
        step()  # (warm-up)
        off, on = [], []
        for _ in range(args.rounds):
            off.append(timed(step, steps, False))
            on.append(timed(step, steps, True))
        a, b = statistics.median(off), statistics.median(on)
        print(
            f"{name}: off {1000 * a:.2f} ms, on {1000 * b:.2f} ms per step "
            f"({b / a:.2f}x, +{1000 * (b - a):.2f} ms)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
