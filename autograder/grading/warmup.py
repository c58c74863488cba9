"""Warm-ups shared by the zygote (inside the sandbox) and the judge (on the host): both fork per
submission, so whatever a first use costs - imports, kernel initialisation - is paid once in the
parent instead of in every child. Nothing here is secret or judges anything."""

import contextlib
import gc


@contextlib.contextmanager
def without_gc():
    """The warm-up with Python's cyclic garbage collector off, then one full collection, and the
    collector back on before anything is forked. Importing torch and the rest builds about a
    million objects, and the collector, on, walks the growing heap again and again: a warm-up
    took 2.50 s of CPU with it and 2.00 s without, the final collection included (measured
    2026-11-26, on the development machine). A forked child starts with the collector on, as any
    Python does."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.collect()
        if enabled:
            gc.enable()


def wants_training(preload) -> bool:
    """Whether the course's sources use an optimizer (``torch.optim`` among the modules they use,
    :meth:`..intake.collect.SourceNotebook.imports`): then the warm processes run
    :func:`training` once. A course that does not pays nothing for it (about 1.3 s of CPU in the
    zygote and in the judge, each run: the first optimizer imports torch._dynamo); a student who
    uses one there pays it in that notebook's own process."""
    return any(name == "torch.optim" or name.startswith("torch.optim.") for name in preload)


def training(torch):
    """What tests compute expected values with: the first optimizer imports torch._dynamo (about 1 s),
    first uses of layers and losses initialise kernels - once here, not in every forked child."""
    import torch.nn.functional as F

    nn = torch.nn
    for dtype in (torch.float32, torch.float64):
        net = nn.Sequential(
            nn.Conv2d(1, 2, 3, dtype=dtype),
            nn.BatchNorm2d(2, dtype=dtype),
            nn.LeakyReLU(0.2, True),
            nn.Dropout(0.5),
            nn.Flatten(),
            nn.Linear(8, 1, dtype=dtype),
        )
        for opt in (
            torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, weight_decay=0.1),
            torch.optim.Adam(net.parameters()),
            torch.optim.AdamW(net.parameters()),
            torch.optim.RMSprop(net.parameters()),
        ):
            out = net(torch.randn(3, 1, 4, 4, dtype=dtype))
            loss = F.binary_cross_entropy_with_logits(
                out, torch.ones_like(out)
            ) + nn.BCEWithLogitsLoss()(out, out.detach())
            opt.zero_grad()
            loss.backward()
            opt.step()
        with torch.no_grad():
            for p in net.parameters():
                p.clamp_(-0.1, 0.1)
