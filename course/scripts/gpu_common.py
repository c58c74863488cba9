"""Helpers shared by the GPU scripts of course/scripts/ (not a script itself).

- ``relu_memory``: the lessons' module course/relu_memory.py (one folder up), imported from there,
  so the GPU scripts measure exactly the models the lessons measure on the CPU;
- ``cuda_device(name)``: a CUDA ``torch.device`` with its index resolved (``torch.cuda.set_device``
  refuses ``torch.device("cuda")``, which has none);
- ``header(device)``: the lines each table starts with (torch, GPU, cuDNN, date);
- ``peak_step(fn, device)``: bytes allocated before ``fn()``, and the peak while it ran;
- ``NO_CUDA``: the one line a script prints where there is no CUDA device.
"""

from __future__ import annotations

import datetime
import importlib
import sys
import types
from pathlib import Path

import torch

MiB = 2**20
COURSE = Path(__file__).resolve().parents[1]
NO_CUDA = "No CUDA device: this script measures a CUDA GPU and has nothing to measure here."


def _load_relu_memory():
    if str(COURSE) not in sys.path:
        sys.path.insert(0, str(COURSE))
    try:
        importlib.import_module("matplotlib.pyplot")
    except ImportError:
        # A GPU machine without matplotlib: relu_memory imports it for the lessons' figures,
        # which no script draws. Empty stand-ins let the models and helpers import.
        for name in ("matplotlib", "matplotlib.pyplot", "matplotlib.ticker"):
            sys.modules.setdefault(name, types.ModuleType(name))
        sys.modules["matplotlib.ticker"].MaxNLocator = None
    return importlib.import_module("relu_memory")


relu_memory = _load_relu_memory()


def cuda_device(name="cuda"):
    """torch.device(name), with the current CUDA device's index when name gives none."""
    device = torch.device(name)
    if device.type != "cuda":
        raise ValueError(f"not a CUDA device: {name!r}")
    if device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    return device


def header(device):
    """Markdown lines naming what measured: torch, the GPU, cuDNN, the date (UTC)."""
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return f"torch {torch.__version__}, {name}, cuDNN {cudnn}, {now}\n"


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def peak_step(fn, device):
    """Run fn() once; return (allocated before, peak allocated during it) in bytes.

    The allocator's cache is emptied and its peak reset first, so the peak belongs to this call;
    subtract "before" (parameters, inputs, gradients and workspaces already held) to get what
    the step itself added.
    """
    sync(device)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device)
    fn()
    sync(device)
    return before, torch.cuda.max_memory_allocated(device)


def change(before, after):
    """after relative to before, as a signed percentage ("-20.0%": after is 20 % lower)."""
    return f"{100 * (after - before) / before:+.1f}%" if before else "n/a"
