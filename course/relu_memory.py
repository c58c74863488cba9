"""Lesson 1, section 8: the memory tracker, the models and the figures.

Lesson 1 imports this module to draw its two figures and its results table; its appendix,
01a_relu_inplace_appendix.ipynb, shows and explains the code. Everything runs on the CPU and
counts bytes of live tensor storages, exactly: no allocator cache, no timing.
course/scripts/cuda_relu_memory.py measures the same models on a GPU; keep both in step.
"""
import contextlib
import textwrap

import matplotlib.pyplot as plt
import torch
import torch.nn as nn
from matplotlib.ticker import MaxNLocator
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves     # every tensor inside nested args / outputs
from torch.utils.checkpoint import checkpoint


class BasicBlock(nn.Module):
    # torchvision's ResNet BasicBlock (no downsampling), as in lesson 1, section 7
    def __init__(self, channels, inplace):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.relu = nn.ReLU(inplace=inplace)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x):                                # as torchvision writes it
        identity = x
        out = self.conv1(x)
        out = self.bn1(out)
        out = self.relu(out)                             # ReLU after batch norm
        out = self.conv2(out)
        out = self.bn2(out)
        out += identity                                  # the residual addition
        return self.relu(out)                            # ReLU after the addition


class LiveTensorBytes(TorchDispatchMode):
    # After every ATen operator, record the total bytes of all storages still alive.

    def __init__(self, *already_alive):
        super().__init__()
        self.storages = {}     # storage id -> (weak reference, bytes)
        self.timeline = []     # (operator name, live bytes after it)
        for t in already_alive:             # parameters, buffers, the input
            self.see(t)
        self.baseline = self.live_bytes()

    def see(self, t):
        if isinstance(t, torch.Tensor):
            ref = StorageWeakRef(t.untyped_storage())
            if ref.cdata not in self.storages:
                self.storages[ref.cdata] = (ref, t.untyped_storage().nbytes())

    def live_bytes(self):
        self.storages = {k: (ref, n) for k, (ref, n) in self.storages.items() if not ref.expired()}
        return sum(n for _, n in self.storages.values())

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = func.overloadpacket.__name__
        if name != "detach":                # an alias autograd makes; it allocates nothing
            for t in tree_leaves((args, kwargs, out)):
                self.see(t)
            self.timeline.append((name, self.live_bytes()))
        return out


def run_step(model, inp, mode="training", wrap=None):
    # One step under the tracker. mode: "training" (forward, then backward of out.sum()),
    # "no_grad" or "inference_mode" (forward only). Returns the tracker, with .backward_starts,
    # .peak (bytes above parameters + input) and .forward_peak (the same, forward only).
    context = {"training": contextlib.nullcontext, "no_grad": torch.no_grad,
               "inference_mode": torch.inference_mode}[mode]
    with LiveTensorBytes(inp, *model.parameters(), *model.buffers()) as tracker:
        with context():
            out = (wrap or model)(inp)
        tracker.backward_starts = len(tracker.timeline)
        if mode == "training":
            out.sum().backward()
    live = [b - tracker.baseline for _, b in tracker.timeline]
    tracker.peak, tracker.forward_peak = max(live), max(live[:tracker.backward_starts])
    return tracker


MiB = 2 ** 20


def mlp(inplace, d=256):
    return nn.Sequential(nn.Linear(d, 4 * d), nn.ReLU(inplace), nn.Linear(4 * d, d))


def alexnet_features(inplace):              # torchvision's AlexNet().features, by hand
    def relu():
        return nn.ReLU(inplace)
    return nn.Sequential(
        nn.Conv2d(3, 64, 11, 4, 2), relu(), nn.MaxPool2d(3, 2),
        nn.Conv2d(64, 192, 5, padding=2), relu(), nn.MaxPool2d(3, 2),
        nn.Conv2d(192, 384, 3, padding=1), relu(),
        nn.Conv2d(384, 256, 3, padding=1), relu(),
        nn.Conv2d(256, 256, 3, padding=1), relu(), nn.MaxPool2d(3, 2))


ACTIVATIONS = {"relu": nn.ReLU, "leaky_relu": lambda inplace: nn.LeakyReLU(0.2, inplace), "relu6": nn.ReLU6}


def dcgan_generator(inplace, nz=100, ngf=64):
    def up(cin, cout, stride, padding):
        return [nn.ConvTranspose2d(cin, cout, 4, stride, padding, bias=False), nn.BatchNorm2d(cout),
                nn.ReLU(inplace)]
    return nn.Sequential(*up(nz, ngf * 8, 1, 0), *up(ngf * 8, ngf * 4, 2, 1), *up(ngf * 4, ngf * 2, 2, 1),
                         *up(ngf * 2, ngf, 2, 1), nn.ConvTranspose2d(ngf, 3, 4, 2, 1, bias=False), nn.Tanh())


def conv_bn_net(inplace, blocks=8, c=32, act="relu"):
    layers = []
    for i in range(blocks):
        layers += [nn.Conv2d(3 if i == 0 else c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c),
                   ACTIVATIONS[act](inplace)]
    return nn.Sequential(*layers)


def dcgan_discriminator(inplace, ndf=64, act="leaky_relu"):
    def down(cin, cout):
        return [nn.Conv2d(cin, cout, 4, 2, 1, bias=False), nn.BatchNorm2d(cout), ACTIVATIONS[act](inplace)]
    return nn.Sequential(nn.Conv2d(3, ndf, 4, 2, 1, bias=False), ACTIVATIONS[act](inplace),
                         *down(ndf, ndf * 2), *down(ndf * 2, ndf * 4), *down(ndf * 4, ndf * 8),
                         nn.Conv2d(ndf * 8, 1, 4, 1, 0, bias=False), nn.Sigmoid())


# name -> (build(inplace, **options), input shape)
MODELS = {
    "MLP": (mlp, (64, 256)),
    "AlexNet features": (alexnet_features, (8, 3, 224, 224)),
    "BasicBlock": (lambda inplace: BasicBlock(8, inplace), (4, 8, 16, 16)),
    "DCGAN generator": (dcgan_generator, (4, 100, 1, 1)),
    "8 x conv-BN-ReLU": (conv_bn_net, (8, 3, 32, 32)),
    "DCGAN discriminator (LeakyReLU)": (dcgan_discriminator, (4, 3, 64, 64)),
}


def build(name, inplace, **options):
    # the model and its input, seeded
    make, shape = MODELS[name]
    torch.manual_seed(0)
    return make(inplace, **options), torch.randn(shape)


def step(name, inplace, mode="training"):
    return run_step(*build(name, inplace), mode)


def relu_steps(tracker):
    # positions of the ReLUs in forward and of their backward (threshold_backward), paired
    names = [name for name, _ in tracker.timeline]
    forward = [i for i in range(tracker.backward_starts) if names[i] in ("relu", "relu_")]
    backward = [i for i in range(tracker.backward_starts, len(names)) if names[i] == "threshold_backward"]
    return forward, backward[::-1]          # backward meets the ReLUs in reverse order


def arrow(a, b):
    return f"{a / MiB:.2f} -> {b / MiB:.2f}"


def print_peak_table(results):
    def backward_covers_bumps(tracker):
        forward, backward = relu_steps(tracker)
        return str(all(tracker.timeline[b][1] >= tracker.timeline[f][1] for f, b in zip(forward, backward))
                   if forward else "-")
    print("CPU tracker, activation memory: MiB above parameters + input, out of place -> in place")
    print(f"{'model':32s}{'training: forward peak':>24s}{'training: peak':>18s}{'no_grad: peak':>18s}"
          f"{'no_grad: lower by':>19s}{'bwd >= bump':>13s}")
    for name in MODELS:
        train, no_grad = results[name, "training"], results[name, "no_grad"]
        print(f"{name:32s}{arrow(train[False].forward_peak, train[True].forward_peak):>24s}"
              f"{arrow(train[False].peak, train[True].peak):>18s}{arrow(no_grad[False].peak, no_grad[True].peak):>18s}"
              f"{1 - no_grad[True].peak / no_grad[False].peak:19.1%}{backward_covers_bumps(train[False]):>13s}")


def saved_for_backward(name, inplace, **options):
    # bytes of the distinct storages autograd saves in one forward pass (parameters and buffers excluded)
    model, inp = build(name, inplace, **options)
    weights = {t.untyped_storage().data_ptr() for t in (*model.parameters(), *model.buffers())}
    saved = {}

    def pack(t):                            # called with every tensor autograd saves
        storage = t.untyped_storage()
        if storage.data_ptr() not in weights:
            saved[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(inp)
    return sum(saved.values())


def plot_timelines(runs):
    # live tensor memory after each operator, out of place vs in place, one panel per model
    fig, axes = plt.subplots(1, len(runs), figsize=(13, 4.8))
    for ax, (title, r) in zip(axes, runs.items()):
        out, start = r[False], r[False].backward_starts
        live0 = [b / MiB for _, b in r[False].timeline]
        live1 = [b / MiB for _, b in r[True].timeline]
        ax.axvspan(start - 0.5, len(live0) - 0.5, color="0.92", label="backward pass")
        ax.axhline(max(live0), color="0.4", lw=0.8, ls=":", label="overall peak (both runs)")
        ax.step(range(len(live0)), live0, where="mid", color="tab:red", lw=2.2, label="nn.ReLU()  (out of place)")
        ax.step(range(len(live1)), live1, where="mid", color="tab:blue", lw=1.6, ls="--",
                label="nn.ReLU(inplace=True)")
        relus = [i for i, (name, _) in enumerate(out.timeline) if name == "relu"]
        ax.plot(relus, [live0[i] for i in relus], "o", color="tab:red", ms=6, label="a ReLU runs")
        ax.plot(relus, [live1[i] for i in relus], "o", color="tab:blue", ms=4)
        ax.set_title(f"{title} (parameters + input: {out.baseline / MiB:.2f} MiB)")
        ax.set_xlabel("ATen operator, in execution order (forward, then backward)")
        ax.set_ylabel("live tensor memory (MiB)")
        ax.set_ylim(0, max(live0) * 1.08)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right", fontsize=8.5, framealpha=0.95)
    fig.suptitle("Training step, live tensor bytes after each operator: the in-place ReLU removes the bump at each "
                 "ReLU;\nthe forward peak drops in both, the overall peak (in backward) in neither")
    fig.tight_layout()
    plt.show()


def plot_peaks(results):
    # in-place peak as a percentage of the out-of-place peak, for each model and mode
    series = [("training: forward peak", "training", "forward_peak"), ("training: overall peak", "training", "peak"),
              ("no_grad: peak", "no_grad", "peak")]
    fig, ax = plt.subplots(figsize=(13, 5))
    for k, (label, mode, attr) in enumerate(series):
        ratios = [100 * getattr(results[name, mode][True], attr) / getattr(results[name, mode][False], attr)
                  for name in MODELS]
        bars = ax.bar([i + (k - 1) * 0.27 for i in range(len(MODELS))], ratios, 0.27, label=label)
        ax.bar_label(bars, fmt="%.0f", fontsize=8)
    ax.axhline(100, color="0.3", lw=0.8, ls=":")
    ax.set_xticks(range(len(MODELS)), [textwrap.fill(name, 18) for name in MODELS])
    ax.set_ylim(0, 125)
    ax.set_xlabel("model (sizes: lesson 1 appendix, A.2)")
    ax.set_ylabel("in-place peak, % of out-of-place peak\n(activation memory)")
    ax.set_title("In-place activation, peak activation memory relative to out of place (CPU, live tensor bytes)")
    ax.legend(loc="upper center", ncol=3, fontsize=9, framealpha=0.95)
    fig.tight_layout()
    plt.show()


def checkpointed(model, layers=3):
    # model (an nn.Sequential) as chunks of `layers` layers, each under activation checkpointing
    chunks = [model[i:i + layers] for i in range(0, len(model), layers)]

    def forward(x):
        for chunk in chunks:
            x = checkpoint(chunk, x, use_reentrant=False)   # keeps x; reruns chunk's forward in backward
        return x
    return forward
