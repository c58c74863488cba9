"""course/scripts/gpu_reserved.py: reserved memory vs the tensor peak, fresh processes, on a GPU.

No GPU in CI: without CUDA the script prints one line and exits 0; the two children (AlexNet
features, the DCGAN example's 3 training steps) run on the CPU, small, under faked CUDA
statistics; the parent's process handling (command line, JSON, an error row) and main() run
with the subprocess faked.
"""

import functools
import json
import subprocess
import sys
from unittest import mock

import pytest
import torch

from autograder.procs import run
from gpu_fakes import SCRIPTS, fake_cuda, load

CPU = torch.device("cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present: it would measure")
def test_without_cuda_one_line_and_status_0():
    result = run([sys.executable, str(SCRIPTS / "gpu_reserved.py")], timeout=120)
    assert len(result.stdout.strip().splitlines()) == 1 and "CUDA" in result.stdout


@pytest.mark.parametrize("inplace", [False, True])
def test_alexnet_child_on_cpu(inplace):
    script = load("gpu_reserved")
    with (
        fake_cuda(),
        mock.patch.object(
            script, "alexnet_child", functools.partial(script.alexnet_child, batch=2, size=64)
        ),
    ):
        figures = script.child("alexnet", [inplace], CPU)
    assert figures == {
        "max_memory_allocated": 150.0,
        "peak - before": 50.0,
        "max_memory_reserved": 200.0,
        "memory_reserved": 200.0,
        "device used": 79000.0,
        "process added": 0.0,
    }


def test_dcgan_child_runs_the_examples_steps_on_cpu(monkeypatch):
    script = load("gpu_reserved")
    monkeypatch.setattr(torch.backends.cudnn, "benchmark", False)  # the child sets it
    with fake_cuda():
        before, peak = script.dcgan_child(CPU, True, True, batch=2, steps=2)
    assert (before, peak) == (100 * 2**20, 150 * 2**20)
    assert torch.backends.cudnn.benchmark is True


def test_in_fresh_process_command_and_parsing():
    script = load("gpu_reserved")
    figures = {c: 1.0 for c in script.COLUMNS}
    done = subprocess.CompletedProcess(
        [], 0, stdout="noise\n" + json.dumps(figures) + "\n", stderr=""
    )
    with mock.patch.object(script.subprocess, "run", return_value=done) as run:
        assert script.in_fresh_process("dcgan", [True, False], torch.device("cuda", 0)) == figures
    command = run.call_args.args[0]
    assert command[0] == sys.executable and command[1].endswith("gpu_reserved.py")
    assert command[2:] == ["--device", "cuda:0", "--child", "dcgan", "1", "0"]
    failed = subprocess.CompletedProcess([], 1, stdout="", stderr="Traceback\nOutOfMemoryError")
    with mock.patch.object(script.subprocess, "run", return_value=failed):
        figures = script.in_fresh_process("alexnet", [True], torch.device("cuda", 0))
    assert figures == {"error": "OutOfMemoryError"}
    assert script.cells(figures) == "error: OutOfMemoryError |"


def test_main_parent_and_child_on_a_faked_gpu(capsys):
    script = load("gpu_reserved")
    figures = {c: 1.0 for c in script.COLUMNS}
    with (
        fake_cuda() as cuda,
        mock.patch.object(script, "in_fresh_process", return_value=figures) as fresh,
    ):
        assert script.main([]) == 0
    assert cuda.set_device_calls == []  # the parent holds no context
    assert fresh.call_count == 2 * 3 + 4 * 2
    out = capsys.readouterr().out
    assert out.count("| 1.0 | 1.0 | 1.0 | 1.0 | 1.0 | 1.0 |") == 14
    with fake_cuda() as cuda, mock.patch.object(script, "child", return_value=figures) as child:
        assert script.main(["--device", "cuda:0", "--child", "dcgan", "1", "0"]) == 0
    assert cuda.set_device_calls == [torch.device("cuda", 0)]
    child.assert_called_once_with("dcgan", [True, False], torch.device("cuda", 0))
    assert json.loads(capsys.readouterr().out) == figures
