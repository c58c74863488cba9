"""course/scripts/cuda_relu_memory.py (lesson 1, section 8.6): without CUDA it says so in one line and exits 0.

The CUDA path itself is not run in CI (no GPU); its models are checked to run a training and a
no_grad step on the CPU, so a typo there shows up here.
"""
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[1] / "course" / "scripts" / "cuda_relu_memory.py"


def _load():
    spec = importlib.util.spec_from_file_location("cuda_relu_memory", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present: the script would measure")
def test_without_cuda_one_line_and_status_0():
    result = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.strip().splitlines()) == 1 and "CUDA" in result.stdout


def test_models_run_on_cpu():
    script = _load()
    for name, (build, shape) in script.MODELS.items():
        for inplace in (False, True):
            for mode in script.MODES:
                torch.manual_seed(0)
                script.run(build(inplace), torch.randn(shape), mode)
