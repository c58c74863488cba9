"""course/scripts/gpu_zoo.py: torchvision models, inplace ReLU False vs True, on a GPU.

No GPU and no torchvision in CI: without CUDA the script prints one line and exits 0; without
torchvision it says so and exits 0; the measuring code (warm-up, measured step, timing, gradient
comparison, table row) runs on the CPU under faked CUDA statistics with small stand-in models,
and main() runs end to end with a stand-in for torchvision.models.
"""

import sys
import types

import pytest
import torch
import torch.nn as nn

from autograder.procs import run
from gpu_fakes import SCRIPTS, fake_cuda, load


def tiny(num_classes=1000):
    """A torchvision-like classifier: ReLU and ReLU6 modules, batch norm, dropout."""
    return nn.Sequential(
        nn.Conv2d(3, 4, 3),
        nn.BatchNorm2d(4),
        nn.ReLU(inplace=True),
        nn.Conv2d(4, 4, 3),
        nn.ReLU6(inplace=True),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Dropout(0.2),
        nn.Linear(4, num_classes),
    )


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present: it would measure")
def test_without_cuda_one_line_and_status_0():
    result = run([sys.executable, str(SCRIPTS / "gpu_zoo.py")], timeout=120)
    assert len(result.stdout.strip().splitlines()) == 1 and "CUDA" in result.stdout


def test_set_inplace_sets_every_relu():
    script = load("gpu_zoo")
    model = tiny()
    assert script.set_inplace(model, False) == 2
    assert [m.inplace for m in model.modules() if isinstance(m, (nn.ReLU, nn.ReLU6))] == [False] * 2


@pytest.mark.parametrize("mode", ["training", "no_grad"])
@pytest.mark.parametrize("dtype", [None, torch.bfloat16])
def test_rows_on_cpu_under_fake_statistics(mode, dtype):
    script = load("gpu_zoo")
    with fake_cuda():
        line = script.row(
            "tiny", tiny, 4, mode, dtype, torch.device("cpu"), steps=2, warmup=1, size=16
        )
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[:6] == ["tiny", "4", mode, "fp32" if dtype is None else "bf16", "2", "50.0"]
    assert cells[6:8] == ["50.0", "+0.0%"]
    assert float(cells[8]) > 0 and float(cells[9]) > 0
    # same weights, input and dropout seed: in-place ReLU changes no gradient
    assert cells[10] == ("0.00e+00" if mode == "training" else "")


def test_without_torchvision_a_note_and_status_0(capsys):
    script = load("gpu_zoo")
    with fake_cuda() as cuda, pytest.MonkeyPatch.context() as mp:
        mp.setattr(script, "torchvision_models", lambda: None)
        assert script.main([]) == 0
    assert cuda.set_device_calls == [torch.device("cuda", 0)]
    assert "torchvision is not installed" in capsys.readouterr().out


def test_main_with_a_stand_in_torchvision(capsys):
    script = load("gpu_zoo")
    real_measure = script.measure
    seen = []

    def on_cpu(build, batch, inplace, mode, dtype, device, steps, warmup, size=224):
        seen.append((device, batch, steps, warmup))
        return real_measure(
            build, batch, inplace, mode, dtype, torch.device("cpu"), steps, warmup, size=16
        )

    with fake_cuda(), pytest.MonkeyPatch.context() as mp:
        mp.setattr(script, "torchvision_models", lambda: types.SimpleNamespace(resnet18=tiny))
        mp.setattr(script, "measure", on_cpu)
        assert script.main(["--models", "resnet18", "--quick"]) == 0
    assert set(seen) == {(torch.device("cuda", 0), 8, 2, 1)} and len(seen) == 8
    out = capsys.readouterr().out
    assert script.TABLE_HEAD in out
    assert out.count("| resnet18 | 8 |") == 4 and "error" not in out
