"""Probes of the exercise 04_training_loops's tests: functions its test cells hand to
:func:`autograder.checks.observe`, run where the student's code runs (public: the procedure of a
check, never its expected values or its messages). The student's names are looked up with
:func:`autograder.probes.student` when a probe runs."""

# generated from the test cells of solutions/04_training_loops/04_training_loops.ipynb; edited by hand since
import torch
import torch.nn as nn

from autograder.probes import student  # noqa: F401


def visible_gan():
    torch.manual_seed(0)
    G = nn.Sequential(
        nn.Linear(2, 8, dtype=torch.float64), nn.ReLU(), nn.Linear(8, 2, dtype=torch.float64)
    )
    D = nn.Sequential(
        nn.Linear(2, 8, dtype=torch.float64),
        nn.LeakyReLU(0.2),
        nn.Linear(8, 1, dtype=torch.float64),
    )
    gen = torch.Generator().manual_seed(1)
    real = torch.randn(16, 2, generator=gen, dtype=torch.float64) * 0.3 + 2
    z = torch.randn(16, 2, generator=gen, dtype=torch.float64)
    return G, D, real, z


def two_calls(step):
    """Runs where your code runs: two calls of step on the same networks and SGD optimizers."""
    G, D, real, z = visible_gan()
    opt_G, opt_D = torch.optim.SGD(G.parameters(), lr=0.1), torch.optim.SGD(D.parameters(), lr=0.1)
    calls = []
    for _ in range(2):
        returned = step(G, D, opt_G, opt_D, real, z)
        calls.append(
            (
                returned,
                {
                    f"{k}.{n}": p.detach().clone()
                    for k, net in (("G", G), ("D", D))
                    for n, p in net.named_parameters()
                },
            )
        )
    return calls


def steps_probe(step, build, steps):
    """Runs where your code runs: `steps` calls of step(G, D, opt_G, opt_D, real, z) on the networks
    and optimizers build() makes; what each call returned and every parameter after it."""
    G, D, opt_G, opt_D, batches = build()
    calls = []
    for i in range(steps):
        real, z = batches[i % len(batches)]
        torch.manual_seed(100 + i)  # the same dropout masks for your step and the reference
        returned = step(G, D, opt_G, opt_D, real, z)
        calls.append(
            (
                returned,
                {
                    f"{k}.{n}": p.detach().clone()
                    for k, net in (("G", G), ("D", D))
                    for n, p in net.named_parameters()
                },
            )
        )
    return calls


def mlp_gan(dtype, seed):
    """The networks, optimizers and batches of one case (a builder: functools.partial(mlp_gan, ...))."""
    torch.manual_seed(seed)
    G = nn.Sequential(nn.Linear(3, 8, dtype=dtype), nn.Tanh(), nn.Linear(8, 2, dtype=dtype))
    D = nn.Sequential(nn.Linear(2, 8, dtype=dtype), nn.LeakyReLU(0.2), nn.Linear(8, 1, dtype=dtype))
    opts = torch.optim.SGD(G.parameters(), lr=0.2), torch.optim.SGD(D.parameters(), lr=0.2)
    gen = torch.Generator().manual_seed(seed + 1)
    batches = [
        (
            torch.randn(12, 2, generator=gen, dtype=dtype) - 1,
            torch.randn(12, 3, generator=gen, dtype=dtype),
        )
        for _ in range(2)
    ]
    return (G, D, *opts, batches)


class CountingG(nn.Module):
    """G that counts its forward calls (G(z) and G.forward(z) alike)."""

    def __init__(self, net):
        super().__init__()
        self.net = net
        self.calls = 0

    def forward(self, z):
        self.calls += 1
        return self.net(z)


def count_calls(step):
    """Runs where your code runs: how many times each of three steps calls G."""
    torch.manual_seed(5)
    G = CountingG(nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 2)))
    D = nn.Sequential(nn.Linear(2, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1))
    opt_G, opt_D = (
        torch.optim.Adam(G.parameters(), lr=0.01),
        torch.optim.Adam(D.parameters(), lr=0.01),
    )
    real, z = torch.randn(10, 2) + 1, torch.randn(10, 2)
    counts = []
    for _ in range(3):
        before = G.calls
        step(G, D, opt_G, opt_D, real, z)
        counts.append(G.calls - before)
    return counts


def gan_with(make_opt_G, make_opt_D, seed):
    """The networks, optimizers and batches of one case (a builder: functools.partial(gan_with, ...))."""
    torch.manual_seed(seed)
    G = nn.Sequential(
        nn.Linear(2, 8, dtype=torch.float64), nn.ReLU(), nn.Linear(8, 2, dtype=torch.float64)
    )
    D = nn.Sequential(
        nn.Linear(2, 8, dtype=torch.float64),
        nn.LeakyReLU(0.2),
        nn.Linear(8, 1, dtype=torch.float64),
    )
    gen = torch.Generator().manual_seed(seed + 1)
    batches = [
        (
            torch.randn(16, 2, generator=gen, dtype=torch.float64) * 0.5 + 1,
            torch.randn(16, 2, generator=gen, dtype=torch.float64),
        )
        for _ in range(3)
    ]
    return G, D, make_opt_G(G.parameters()), make_opt_D(D.parameters()), batches


def gan_with_old_grads():
    torch.manual_seed(9)
    G = nn.Sequential(
        nn.Linear(2, 8, dtype=torch.float64), nn.ReLU(), nn.Linear(8, 2, dtype=torch.float64)
    )
    D = nn.Sequential(
        nn.Linear(2, 8, dtype=torch.float64),
        nn.LeakyReLU(0.2),
        nn.Linear(8, 1, dtype=torch.float64),
    )
    for p in [*G.parameters(), *D.parameters()]:
        p.grad = torch.full_like(p, 0.75)  # left over from some earlier computation
    gen = torch.Generator().manual_seed(10)
    batches = [
        (
            torch.randn(16, 2, generator=gen, dtype=torch.float64) + 1,
            torch.randn(16, 2, generator=gen, dtype=torch.float64),
        )
        for _ in range(2)
    ]
    return (
        G,
        D,
        torch.optim.SGD(G.parameters(), lr=0.1),
        torch.optim.SGD(D.parameters(), lr=0.1),
        batches,
    )


def steps_on(step, real, z):
    """Runs where your code runs: two steps on the real and z given."""
    torch.manual_seed(11)
    G = nn.Sequential(
        nn.Linear(3, 8, dtype=real.dtype), nn.ReLU(inplace=True), nn.Linear(8, 2, dtype=real.dtype)
    )
    D = nn.Sequential(
        nn.Linear(2, 8, dtype=real.dtype),
        nn.LeakyReLU(0.2, inplace=True),
        nn.Linear(8, 1, dtype=real.dtype),
    )
    opt_G, opt_D = torch.optim.SGD(G.parameters(), lr=0.1), torch.optim.SGD(D.parameters(), lr=0.1)
    for _ in range(2):
        step(G, D, opt_G, opt_D, real, z)


def batchnorm_mlp_gan():
    torch.manual_seed(13)
    f32 = torch.float32
    G = nn.Sequential(
        nn.Linear(3, 8, bias=False, dtype=f32),
        nn.BatchNorm1d(8, dtype=f32),
        nn.ReLU(inplace=True),
        nn.Linear(8, 2, dtype=f32),
    )
    D = nn.Sequential(
        nn.Linear(2, 8, dtype=f32),
        nn.LeakyReLU(0.2, inplace=True),
        nn.Linear(8, 8, dtype=f32),
        nn.ReLU(inplace=True),
        nn.Linear(8, 1, dtype=f32),
    )
    gen = torch.Generator().manual_seed(14)
    batches = [
        (
            torch.randn(16, 2, generator=gen, dtype=f32) + 1,
            torch.randn(16, 3, generator=gen, dtype=f32),
        )
        for _ in range(2)
    ]
    return (
        G,
        D,
        torch.optim.Adam(G.parameters(), lr=0.01, betas=(0.5, 0.999)),
        torch.optim.Adam(D.parameters(), lr=0.01, betas=(0.5, 0.999)),
        batches,
    )


def conv_gan():
    torch.manual_seed(15)
    f64 = torch.float64
    G = nn.Sequential(
        nn.Linear(4, 16, bias=False, dtype=f64),
        nn.BatchNorm1d(16, dtype=f64),
        nn.ReLU(inplace=True),
        nn.Linear(16, 16, dtype=f64),
        nn.Unflatten(1, (1, 4, 4)),
    )
    D = nn.Sequential(
        nn.Conv2d(1, 4, 3, bias=False, dtype=f64),
        nn.BatchNorm2d(4, dtype=f64),
        nn.LeakyReLU(0.2, inplace=True),
        nn.Flatten(),
        nn.Linear(16, 1, dtype=f64),
    )
    gen = torch.Generator().manual_seed(16)
    batches = [
        (
            torch.randn(8, 1, 4, 4, generator=gen, dtype=f64),
            torch.randn(8, 4, generator=gen, dtype=f64),
        )
        for _ in range(2)
    ]
    return (
        G,
        D,
        torch.optim.SGD(G.parameters(), lr=0.05, momentum=0.9),
        torch.optim.SGD(D.parameters(), lr=0.05, momentum=0.9),
        batches,
    )


def dropout_gan(dropout_in_D):
    """The networks, optimizers and batches of one case (a builder: functools.partial(dropout_gan, ...))."""
    torch.manual_seed(17)
    f64 = torch.float64
    G = nn.Sequential(
        nn.Linear(2, 16, dtype=f64), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 2, dtype=f64)
    )
    D = nn.Sequential(
        nn.Linear(2, 16, dtype=f64),
        nn.LeakyReLU(0.2),
        *([nn.Dropout(0.2)] if dropout_in_D else []),
        nn.Linear(16, 1, dtype=f64),
    )
    gen = torch.Generator().manual_seed(18)
    batches = [
        (
            torch.randn(16, 2, generator=gen, dtype=f64) + 1,
            torch.randn(16, 2, generator=gen, dtype=f64),
        )
        for _ in range(2)
    ]
    return (
        G,
        D,
        torch.optim.SGD(G.parameters(), lr=0.1),
        torch.optim.SGD(D.parameters(), lr=0.1),
        batches,
    )


def shaped_gan(head, dtype, batch, seed):
    """D returns one logit per sample: shaped (B,) ("flat"), (B, 1) ("column") or (B, 1, 1, 1) ("conv")."""
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed + 1)
    if head == "conv":  # a DCGAN-style head: a convolution down to 1 x 1
        G = nn.Sequential(nn.Linear(4, 16, dtype=dtype), nn.Tanh(), nn.Unflatten(1, (1, 4, 4)))
        D = nn.Sequential(
            nn.Conv2d(1, 4, 3, padding=1, dtype=dtype),
            nn.LeakyReLU(0.2),
            nn.Conv2d(4, 1, 4, dtype=dtype),
        )
        batches = [
            (
                torch.randn(batch, 1, 4, 4, generator=gen, dtype=dtype),
                torch.randn(batch, 4, generator=gen, dtype=dtype),
            )
            for _ in range(2)
        ]
    else:
        G = nn.Sequential(nn.Linear(3, 8, dtype=dtype), nn.ReLU(), nn.Linear(8, 2, dtype=dtype))
        D = nn.Sequential(
            nn.Linear(2, 8, dtype=dtype),
            nn.LeakyReLU(0.2),
            nn.Linear(8, 1, dtype=dtype),
            *([nn.Flatten(0)] if head == "flat" else []),
        )
        batches = [
            (
                torch.randn(batch, 2, generator=gen, dtype=dtype) + 1,
                torch.randn(batch, 3, generator=gen, dtype=dtype),
            )
            for _ in range(2)
        ]
    return (
        G,
        D,
        torch.optim.SGD(G.parameters(), lr=0.1, momentum=0.5),
        torch.optim.Adam(D.parameters(), lr=0.01),
        batches,
    )


class ClipTestNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv1d(1, 2, 3), nn.BatchNorm1d(2), nn.LeakyReLU(0.2))
        self.heads = nn.ModuleDict(
            {"score": nn.Linear(4, 1), "aux": nn.Sequential(nn.Linear(4, 3))}
        )
        self.scale = nn.Parameter(torch.tensor([3.0, -0.2, 0.01, -7.5]))
        self.extra = nn.ParameterList([nn.Parameter(torch.randn(2, 2) * 5)])
        self.frozen = nn.Parameter(torch.linspace(-2, 2, 5), requires_grad=False)
        self.register_buffer("stat", torch.tensor([-4.0, 4.0]))


def memory_and_versions(clip, build, c):
    """Runs where your code runs: per parameter, (same data_ptr() after clip(module, c), _version change)."""
    module = build()
    before = {n: (p.data_ptr(), p._version) for n, p in module.named_parameters()}
    clip(module, c)
    return {
        n: (p.data_ptr() == before[n][0], p._version - before[n][1])
        for n, p in module.named_parameters()
    }


def critic_with_frozen_layer():
    torch.manual_seed(21)
    critic = nn.Sequential(nn.Linear(2, 8), nn.LeakyReLU(0.2), nn.Linear(8, 8), nn.Linear(8, 1))
    critic[2].requires_grad_(False)
    return critic


def backward_after_clip(clip, c):
    """Runs where your code runs: forward, clip, then the backward of that forward; its error, if any."""
    torch.manual_seed(22)
    critic = nn.Sequential(nn.Linear(2, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1))
    score = critic(torch.randn(6, 2)).mean()  # the last layer saved its weight for backward
    clip(critic, c)
    try:
        score.backward()
    except RuntimeError as exc:
        return str(exc)
    return "no error"
