"""course/scripts/gpu_common.py: what the GPU scripts share.

The scripts measure the lessons' own models (course/relu_memory.py, imported, not copied), also
on a GPU machine without matplotlib; a CUDA device name gets its index before set_device.
"""

import sys

import pytest
import torch

from autograder.procs import run
from gpu_fakes import SCRIPTS, fake_cuda, load

COURSE = SCRIPTS.parent


def test_relu_memory_is_the_lessons_module():
    common = load("gpu_common")
    assert common.relu_memory.__file__ == str(COURSE / "relu_memory.py")
    assert load("cuda_relu_memory").MODELS is common.relu_memory.MODELS


def test_relu_memory_imports_without_matplotlib():
    code = f"""
import importlib.abc, sys
class NoMatplotlib(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "matplotlib":
            raise ImportError("no matplotlib here")
sys.meta_path.insert(0, NoMatplotlib())
sys.path.insert(0, {str(SCRIPTS)!r})
import gpu_common
model, inp = gpu_common.relu_memory.build("MLP", True)
print(tuple(model(inp).shape))
"""
    result = run([sys.executable, "-c", code], timeout=120)
    assert result.stdout.strip() == "(64, 256)"


@pytest.mark.parametrize("name, index", [("cuda", 0), ("cuda:0", 0), ("cuda:2", 2)])
def test_cuda_device_has_an_index(name, index):
    common = load("gpu_common")
    with fake_cuda():
        assert common.cuda_device(name) == torch.device("cuda", index)
    with pytest.raises(ValueError):
        common.cuda_device("cpu")


def test_header_and_change():
    common = load("gpu_common")
    with fake_cuda():
        line = common.header(torch.device("cuda", 0))
    assert line.startswith(f"torch {torch.__version__}, Fake GPU, cuDNN ") and "UTC" in line
    assert common.change(200, 150) == "-25.0%" and common.change(0, 1) == "n/a"


def test_peak_step_subtracts_nothing_itself():
    common = load("gpu_common")
    with fake_cuda() as cuda:
        assert common.peak_step(lambda: None, torch.device("cpu")) == (100 * 2**20, 150 * 2**20)
    cuda.reset_peak_memory_stats.assert_called_once()
