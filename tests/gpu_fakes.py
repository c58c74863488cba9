"""A CUDA device faked on the CPU, for the tests of the GPU scripts in course/scripts/.

CI has no GPU. ``fake_cuda()`` makes ``torch.cuda.is_available()`` say True and replaces the
CUDA calls the scripts make: ``set_device`` validates its argument exactly as torch's does (it
resolves the index first, so ``torch.device("cuda")`` raises ValueError) and records it; the
memory statistics return fixed byte counts; synchronize, empty_cache and the peak reset do nothing.
A test then runs a script's code on the CPU with ``device=torch.device("cpu")`` or patches the
part that would move tensors to the GPU.
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
import types
from pathlib import Path
from unittest import mock

import torch
from torch.cuda._utils import _get_device_index  # what torch.cuda.set_device calls first

SCRIPTS = Path(__file__).resolve().parents[1] / "course" / "scripts"
MiB = 2**20


def load(name):
    """course/scripts/NAME.py as a fresh module (its own folder on sys.path, as when run)."""
    if str(SCRIPTS) not in sys.path:
        sys.path.insert(0, str(SCRIPTS))
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def fake_cuda(allocated=100 * MiB, peak=150 * MiB, reserved=200 * MiB):
    """Yield a namespace of the mocks; set_device_calls lists the devices set_device received."""
    calls = []

    def set_device(device):
        calls.append(device)
        _get_device_index(device)  # ValueError for torch.device("cuda"), as on a GPU

    patches = {
        "is_available": mock.Mock(return_value=True),
        "device_count": mock.Mock(return_value=1),
        "current_device": mock.Mock(return_value=0),
        "set_device": mock.Mock(side_effect=set_device),
        "get_device_name": mock.Mock(return_value="Fake GPU"),
        "synchronize": mock.Mock(),
        "empty_cache": mock.Mock(),
        "reset_peak_memory_stats": mock.Mock(),
        "memory_allocated": mock.Mock(return_value=allocated),
        "max_memory_allocated": mock.Mock(return_value=peak),
        "max_memory_reserved": mock.Mock(return_value=reserved),
        "memory_reserved": mock.Mock(return_value=reserved),
        "mem_get_info": mock.Mock(return_value=(1000 * MiB, 80000 * MiB)),
    }
    with contextlib.ExitStack() as stack:
        for name, value in patches.items():
            stack.enter_context(mock.patch.object(torch.cuda, name, value))
        yield types.SimpleNamespace(set_device_calls=calls, **patches)
