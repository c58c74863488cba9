"""Probes of the exercise 05_diagnosis's tests: the small seeded models of its broken training
steps and the one probe that runs a step where the student's code runs (public: the procedure of
a check, never its expected values or its messages).

A *builder* (``functools.partial(gan, 3, "adam")``) makes fresh networks, optimizers and batches:
``(nets, calls)``, where ``nets`` names the modules whose parameters are compared and ``calls`` are
the argument tuples of consecutive steps. :func:`run_steps` runs a step function on them; a test
runs the student's step through :func:`autograder.checks.observe` and its reference step on a
second build, in the test.
"""

import torch
import torch.nn as nn

from autograder.probes import student  # noqa: F401

_OPTIMIZERS = {
    "sgd": lambda params: torch.optim.SGD(params, lr=0.1),
    "momentum": lambda params: torch.optim.SGD(params, lr=0.05, momentum=0.9),
    "adam": lambda params: torch.optim.Adam(params, lr=0.01, betas=(0.5, 0.999)),
    "rmsprop": lambda params: torch.optim.RMSprop(params, lr=0.005),
}


def _optimizer(name, module):
    return _OPTIMIZERS[name](module.parameters())


def run_steps(step, build, steps):
    """Runs where your code runs: ``steps`` consecutive calls of ``step`` on what ``build()`` makes;
    per call, what it returned and a copy of every parameter of the named networks after it."""
    nets, calls = build()
    out = []
    for i in range(steps):
        torch.manual_seed(100 + i)
        returned = step(*calls[i % len(calls)])
        out.append(
            (
                returned,
                {
                    f"{k}.{n}": p.detach().clone()
                    for k, net in nets.items()
                    for n, p in net.named_parameters()
                },
            )
        )
    return out


def run_versions(step, build, steps):
    """Runs where your code runs: ``steps`` consecutive calls of ``step`` on what ``build()`` makes;
    per call, how far each parameter's version counter moved (an in-place write autograd can see
    moves it; a write through ``.data`` does not)."""
    nets, calls = build()
    params = {f"{k}.{n}": p for k, net in nets.items() for n, p in net.named_parameters()}
    out = []
    for i in range(steps):
        torch.manual_seed(100 + i)
        before = {name: p._version for name, p in params.items()}
        step(*calls[i % len(calls)])
        out.append({name: p._version - before[name] for name, p in params.items()})
    return out


def gan(seed=0, optimizer="sgd", dtype=torch.float32, batch=16):
    """Steps 1 and 4: a small G and D, their optimizers, two batches ``(real, z)``."""
    torch.manual_seed(seed)
    G = nn.Sequential(nn.Linear(2, 8, dtype=dtype), nn.ReLU(), nn.Linear(8, 2, dtype=dtype))
    D = nn.Sequential(nn.Linear(2, 8, dtype=dtype), nn.LeakyReLU(0.2), nn.Linear(8, 1, dtype=dtype))
    opt_G, opt_D = _optimizer(optimizer, G), _optimizer(optimizer, D)
    gen = torch.Generator().manual_seed(seed + 1)
    calls = [
        (
            G,
            D,
            opt_G,
            opt_D,
            torch.randn(batch, 2, generator=gen, dtype=dtype) * 0.5 + 1,
            torch.randn(batch, 2, generator=gen, dtype=dtype),
        )
        for _ in range(2)
    ]
    return {"G": G, "D": D}, calls


def critic(seed=0, optimizer="sgd", c=0.05, dtype=torch.float32, batch=16):
    """Step 2: a WGAN critic C, its optimizer, two batches ``(real, fake)``, the clip value c."""
    torch.manual_seed(seed)
    C = nn.Sequential(
        nn.Linear(2, 16, dtype=dtype), nn.LeakyReLU(0.2), nn.Linear(16, 1, dtype=dtype)
    )
    opt_C = _optimizer(optimizer, C)
    gen = torch.Generator().manual_seed(seed + 1)
    calls = [
        (
            C,
            opt_C,
            torch.randn(batch, 2, generator=gen, dtype=dtype) * 0.5 + 1,
            torch.randn(batch, 2, generator=gen, dtype=dtype),
            c,
        )
        for _ in range(2)
    ]
    return {"C": C}, calls


def gated_mlp(seed=0, optimizer="sgd", squash="sigmoid", dtype=torch.float32, batch=16):
    """Step 3: ``Linear, Sigmoid (or Tanh), ReLU(inplace=True), Linear``, its optimizer, two batches ``(x, y)``."""
    torch.manual_seed(seed)
    model = nn.Sequential(
        nn.Linear(4, 8, dtype=dtype),
        nn.Tanh() if squash == "tanh" else nn.Sigmoid(),
        nn.ReLU(inplace=True),
        nn.Linear(8, 1, dtype=dtype),
    )
    opt = _optimizer(optimizer, model)
    gen = torch.Generator().manual_seed(seed + 1)
    calls = [
        (
            model,
            opt,
            torch.randn(batch, 4, generator=gen, dtype=dtype),
            torch.randn(batch, 1, generator=gen, dtype=dtype),
        )
        for _ in range(2)
    ]
    return {"model": model}, calls
