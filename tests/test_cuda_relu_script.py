"""course/scripts/cuda_relu_memory.py (lesson 1, section 8.6).

Without CUDA it says so in one line and exits 0. With CUDA (faked on the CPU, tests/gpu_fakes.py)
main() resolves the device's index before ``torch.cuda.set_device``: as shipped, the default
``--device cuda`` raised ``ValueError: Expected a torch.device with a specified index`` on every
GPU. The measuring code runs on the CPU under the faked statistics, and its models run a
training and a no_grad step on the CPU, so a typo there shows up here.
"""

import sys
from unittest import mock

import pytest
import torch

from autograder.procs import run
from gpu_fakes import SCRIPTS, MiB, fake_cuda, load

SCRIPT = SCRIPTS / "cuda_relu_memory.py"


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present: it would measure")
def test_without_cuda_one_line_and_status_0():
    result = run([sys.executable, str(SCRIPT)], timeout=120)
    assert len(result.stdout.strip().splitlines()) == 1 and "CUDA" in result.stdout


@pytest.mark.parametrize(
    "argv, index", [([], 0), (["--device", "cuda"], 0), (["--device", "cuda:1"], 1)]
)
def test_main_sets_a_device_with_an_index(argv, index, capsys):
    script = load("cuda_relu_memory")
    with fake_cuda() as cuda, mock.patch.object(script, "table", return_value="TABLE") as table:
        assert script.main(argv) == 0
    assert cuda.set_device_calls == [torch.device("cuda", index)]
    table.assert_called_once_with(torch.device("cuda", index))
    out = capsys.readouterr().out
    assert "Fake GPU" in out and out.rstrip().endswith("TABLE")


def test_measuring_code_runs_under_fake_statistics():
    script = load("cuda_relu_memory")
    with fake_cuda() as cuda:
        result = script.measure("MLP", True, "training", torch.device("cpu"))
    assert result == (100 * MiB, 150 * MiB, 200 * MiB, 200 * MiB)  # before, peak, reserved x 2
    cuda.reset_peak_memory_stats.assert_called()


def test_models_run_on_cpu():
    script = load("cuda_relu_memory")
    for build, shape in script.MODELS.values():
        for inplace in (False, True):
            for mode in script.MODES:
                torch.manual_seed(0)
                script.run(build(inplace), torch.randn(shape), mode)
