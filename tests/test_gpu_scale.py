"""course/scripts/gpu_scale.py: lesson 1's models at batch 32 and 128 on a GPU.

No GPU in CI: without CUDA the script prints one line and exits 0; its scaled models run a
training and a no_grad step on the CPU; main() runs end to end on the CPU under a faked CUDA
device (tests/gpu_fakes.py), the measurement redirected to the CPU.
"""

import sys

import pytest
import torch

from autograder.procs import run
from gpu_fakes import SCRIPTS, fake_cuda, load


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present: it would measure")
def test_without_cuda_one_line_and_status_0():
    result = run([sys.executable, str(SCRIPTS / "gpu_scale.py")], timeout=120)
    assert len(result.stdout.strip().splitlines()) == 1 and "CUDA" in result.stdout


def test_scaled_models_are_the_lessons_and_run_on_cpu():
    script, run = load("gpu_scale"), load("cuda_relu_memory").run
    models = script.scaled_models(2)
    assert list(models) == [
        n.replace("BasicBlock", "BasicBlock(64ch, 56x56)") for n in script.relu_memory.MODELS
    ]
    assert models["MLP"][1] == (128, 256)
    assert models["BasicBlock(64ch, 56x56)"][1] == (2, 64, 56, 56)
    for build, shape in models.values():
        for inplace in (False, True):
            for mode in script.MODES:
                torch.manual_seed(0)
                run(build(inplace), torch.randn(shape), mode)


def test_main_on_a_faked_gpu(capsys):
    script = load("gpu_scale")
    real_measure = script.measure
    seen = []

    def on_cpu(name, inplace, mode, device, models):
        seen.append(device)
        return real_measure(name, inplace, mode, torch.device("cpu"), models)

    with fake_cuda() as cuda, pytest.MonkeyPatch.context() as mp:
        mp.setattr(script, "measure", on_cpu)
        mp.setattr(
            script, "scaled_models", lambda batch: {"MLP": (script.relu_memory.mlp, (batch, 256))}
        )
        assert script.main(["--batches", "1", "2"]) == 0
    assert cuda.set_device_calls == [torch.device("cuda", 0)]
    assert set(seen) == {torch.device("cuda", 0)} and len(seen) == 2 * 2 * 2
    out = capsys.readouterr().out
    assert "### batch 1 " in out and "### batch 2 " in out
    # the fake statistics: 150 - 100 MiB added in both runs, so no change
    assert "| MLP | training | 50.00 | 50.00 | +0.0% | 200 | 200 |" in out
