"""course/scripts/gpu_autocast.py: lesson 4's reported GAN step under autocast, on the CPU.

The CPU part of the script's output is deterministic; it is compared in full with
tests/fixtures/gpu/gpu_autocast_cpu.md (regenerate: `python course/scripts/gpu_autocast.py
--cpu-only | tail -n +3`). What it shows: fp32 raises the in-place error, bf16 autocast does
not and G's gradient is the one against the old D; a LayerNorm or BatchNorm1d in D brings the
error back (their weight moved); autocast's cast cache serves the old weight within one region.
With a faked CUDA device, main() reports the CPU and then the CUDA device (index resolved).
"""

import sys
from unittest import mock

import torch
import torch.nn as nn

from autograder.procs import run
from gpu_fakes import SCRIPTS, fake_cuda, load

EXPECTED = SCRIPTS.parents[1] / "tests" / "fixtures" / "gpu" / "gpu_autocast_cpu.md"


def test_cpu_output_is_the_recorded_one():
    result = run([sys.executable, str(SCRIPTS / "gpu_autocast.py"), "--cpu-only"], timeout=300)
    lines = result.stdout.splitlines(keepends=True)
    assert lines[0].startswith(f"torch {torch.__version__}, CPU, cuDNN ")
    assert "".join(lines[2:]) == EXPECTED.read_text()


def test_the_facts_behind_the_table():
    script = load("gpu_autocast")
    cpu, bf16 = torch.device("cpu"), torch.bfloat16
    assert script.outcome(lambda: script.reported_step(cpu, None)).startswith(
        "RuntimeError: one of the variables needed for gradient computation has been modified"
    )
    grads = script.reported_step(cpu, bf16)  # no error under autocast
    assert script.same(grads, script.reported_step(cpu, bf16, variant="old D"))
    assert not script.same(grads, script.reported_step(cpu, bf16, variant="updated D"))
    assert script.moved_tensors(cpu, bf16, None) == "none"
    assert "D.1.weight (16,)" in script.moved_tensors(cpu, bf16, nn.LayerNorm)
    assert script.moved_tensors(cpu, bf16, nn.BatchNorm1d) == "D.1.weight (16,) v1 -> v2"


def test_main_on_a_faked_gpu(capsys):
    script = load("gpu_autocast")
    seen = []
    with (
        fake_cuda() as cuda,
        mock.patch.object(
            script, "report", side_effect=lambda d: seen.append(d) or f"REPORT {d}\n"
        ),
    ):
        assert script.main([]) == 0
    assert cuda.set_device_calls == [torch.device("cuda", 0)]
    assert seen == [torch.device("cpu"), torch.device("cuda", 0)]
    out = capsys.readouterr().out
    assert out.startswith(f"torch {torch.__version__}, Fake GPU, ") and "REPORT cuda:0" in out
