"""course/scripts/gpu_all.py: every GPU script, one table file each, under a time limit.

No GPU in CI: without CUDA it prints one line and exits 0; run_script() runs a real script (no
CUDA: its one line lands in NAME.md, no stderr file); main() under a faked CUDA device runs the
five scripts in order with their arguments (subprocess faked), records a stopped one, writes
index.md and exits 1 when a script failed.
"""

import subprocess
import sys
from unittest import mock

import pytest
import torch

from autograder.procs import run
from gpu_fakes import SCRIPTS, fake_cuda, load


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present: it would measure")
def test_without_cuda_one_line_and_status_0(tmp_path):
    result = run([sys.executable, str(SCRIPTS / "gpu_all.py"), str(tmp_path / "o")], timeout=120)
    assert len(result.stdout.strip().splitlines()) == 1 and "CUDA" in result.stdout


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present: it would measure")
def test_run_script_runs_a_real_script(tmp_path):
    script = load("gpu_all")
    code, seconds = script.run_script("cuda_relu_memory", [], 120, tmp_path)
    assert code == 0 and seconds > 0
    assert (tmp_path / "cuda_relu_memory.md").read_text().startswith("No CUDA device")
    assert not (tmp_path / "cuda_relu_memory.stderr.txt").exists()


def test_every_script_has_a_limit_and_all_fit_in_6_minutes():
    script = load("gpu_all")
    assert list(script.LIMITS) == [
        "cuda_relu_memory",
        "gpu_zoo",
        "gpu_scale",
        "gpu_reserved",
        "gpu_autocast",
    ]
    assert all((SCRIPTS / f"{name}.py").exists() for name in script.LIMITS)
    assert (
        sum(limit for _, limit in script.LIMITS.values()) <= 420
    )  # one run of the device tool: 7 min


def test_main_on_a_faked_gpu(tmp_path, capsys):
    script = load("gpu_all")
    commands = []

    def fake_run(command, stdout, stderr, timeout, check):
        commands.append(command)
        name = command[1].rsplit("/", 1)[-1]
        stdout.write(f"table of {name}\n")
        if name == "gpu_scale.py":
            stderr.write("a warning\n")
        if name == "gpu_reserved.py":
            raise subprocess.TimeoutExpired(command, timeout)
        return subprocess.CompletedProcess(command, 0)

    with fake_cuda(), mock.patch.object(script.subprocess, "run", side_effect=fake_run):
        assert script.main([str(tmp_path), "--quick"]) == 1
    assert [c[1].rsplit("/", 1)[-1] for c in commands] == [
        "cuda_relu_memory.py",
        "gpu_zoo.py",
        "gpu_scale.py",
        "gpu_reserved.py",
        "gpu_autocast.py",
    ]
    assert all(c[0] == sys.executable for c in commands)
    assert commands[1][2:] == ["--steps", "5", "--warmup", "2", "--quick"]
    assert (tmp_path / "gpu_zoo.md").read_text() == "table of gpu_zoo.py\n"
    assert (tmp_path / "gpu_scale.stderr.txt").read_text() == "a warning\n"
    assert not (tmp_path / "gpu_zoo.stderr.txt").exists()
    index = (tmp_path / "index.md").read_text()
    assert index.startswith(f"torch {torch.__version__}, Fake GPU, ")
    assert "| gpu_reserved.py | --repeats 3 --dcgan-repeats 2 | stopped after 180 s |" in index
    assert "| gpu_autocast.py |  | 0 |" in index
    assert "some scripts failed" in capsys.readouterr().out
