"""The in-place doctor (autograder/doctor.py) on its corpus (tests/doctor_corpus.py).

Each broken program runs as a file (so its lines are real lines) under ``inplace_doctor()``:
the error is the one the program raises without the doctor, word for word, and the report names
the line marked ``# WRITE`` as the write that broke it and the line marked ``# SAVE`` as where the
tensor was saved (or made). Blind programs get a report that says it cannot name the write and
names no line. Correct programs print nothing and end with the same values and gradients as
without the doctor. The identification rate over the corpus is asserted (every broken program).
"""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
from autograder.doctor import inplace_doctor  # noqa: E402
from doctor_corpus import BLIND, BROKEN, CORRECT, HEAD  # noqa: E402


def _write(tmp_path, name, source) -> tuple[Path, str]:
    path = tmp_path / f"{name}.py"
    text = HEAD + source
    path.write_text(text)
    return path, text


def _run(path: Path, text: str, doctor: bool):
    """Run the program: (exception or None, report text, the program's globals)."""
    out = io.StringIO()
    scope: dict = {"__name__": "__main__", "__file__": str(path)}
    lines = text.splitlines(keepends=True)
    on = next((k for k, line in enumerate(lines) if line.strip() == "# ON"), 0)
    before = compile("".join(lines[:on]), str(path), "exec")
    after = compile("\n" * on + "".join(lines[on:]), str(path), "exec")
    err = None
    torch.manual_seed(0)
    try:
        exec(before, scope)
        if doctor:
            with inplace_doctor(file=out):
                exec(after, scope)
        else:
            exec(after, scope)
    except Exception as exc:  # what the program raises: compared below
        err = exc
    return err, out.getvalue(), scope


def _marked(text: str, mark: str) -> list[int]:
    return [k for k, line in enumerate(text.splitlines(), 1) if line.rstrip().endswith(f"# {mark}")]


def _named(report: str, kind: str) -> set[int]:
    """The line numbers the report names after ``kind`` (written by / saved by / made by / at)."""
    return {int(n) for n in re.findall(rf"{kind}\s+\S+, line (\d+):", report)}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_each_broken_program_names_its_culprit(name, tmp_path):
    path, text = _write(tmp_path, name, BROKEN[name])
    plain, _, _ = _run(path, text, doctor=False)
    err, report, _ = _run(path, text, doctor=True)
    assert isinstance(plain, RuntimeError), f"{name}: the program itself does not fail"
    # the original error, unchanged
    assert type(err) is type(plain) and str(err) == str(plain)
    assert report.startswith("\nin-place doctor: "), report
    (write,) = _marked(text, "WRITE")
    if "leaf Variable" in str(err):
        assert _named(report, "at") == {write}, report
        return
    broke = [ln for ln in report.splitlines() if ln.endswith("<- the write that broke it")]
    assert len(broke) == 1, report
    # the line named as the write that broke it is the marked one (its entry is the line above)
    entries = report.splitlines()
    k = entries.index(broke[0])
    assert _named(entries[k - 1], "written by") == {write}, report
    assert set(_marked(text, "ALSO")) <= _named(report, "written by"), report
    saved = _named(report, "saved by") | _named(report, "made by")
    assert set(_marked(text, "SAVE")) <= saved, report
    assert "fix: " in report


@pytest.mark.parametrize("name", sorted(BLIND))
def test_a_write_it_cannot_see_is_not_guessed(name, tmp_path):
    path, text = _write(tmp_path, name, BLIND[name])
    plain, _, _ = _run(path, text, doctor=False)
    err, report, _ = _run(path, text, doctor=True)
    assert isinstance(plain, RuntimeError) and str(err) == str(plain)
    assert "It cannot name the write" in report and "Find it by hand" in report
    assert not _named(report, "written by"), report


@pytest.mark.parametrize("name", sorted(CORRECT))
def test_a_correct_program_gets_no_report_and_the_same_numbers(name, tmp_path):
    path, text = _write(tmp_path, name, CORRECT[name])
    err0, _, plain = _run(path, text, doctor=False)
    err, report, doctored = _run(path, text, doctor=True)
    assert err0 is None and err is None and report == ""

    def numbers(scope):
        out = {}
        for key, value in scope.items():
            if isinstance(value, torch.Tensor):
                grad = value.grad if value.is_leaf else None
                out[key] = (value.detach().clone(), grad)
            elif isinstance(value, torch.nn.Module):
                for pname, p in value.named_parameters():
                    out[f"{key}.{pname}"] = (p.detach().clone(), p.grad)
        return out

    a, b = numbers(plain), numbers(doctored)
    assert a.keys() == b.keys() and a
    for key in a:
        assert torch.equal(a[key][0], b[key][0]), key
        assert (a[key][1] is None) == (b[key][1] is None), key
        if a[key][1] is not None:
            assert torch.equal(a[key][1], b[key][1]), key


def test_identification_rate_is_every_broken_program():
    """The rate docs/learner.md states ("The in-place doctor"): every broken program in the corpus, whose write is in Python
    code the learner can edit, gets its culprit named (the test above, one per program)."""
    assert len(BROKEN) >= 30
    assert len(CORRECT) >= 5 and len(BLIND) >= 2


def test_off_installs_nothing():
    """Off, no torch function mode is on: nothing costs."""
    from torch.overrides import _get_current_function_mode_stack

    assert not _get_current_function_mode_stack()
    with inplace_doctor():
        assert len(_get_current_function_mode_stack()) == 1
    assert not _get_current_function_mode_stack()


def test_ipython_extension_reports_after_the_traceback(capsys):
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
    try:
        ip.run_cell("%load_ext autograder.doctor", store_history=True)
        ip.run_cell(
            "import torch\nx = torch.ones(3, requires_grad=True)\ne = x.exp()", store_history=True
        )
        result = ip.run_cell("e[0] = 0.0\ne.sum().backward()", store_history=True)
        assert isinstance(result.error_in_exec, RuntimeError)
        out = capsys.readouterr().out
        assert "modified by an inplace operation" in out  # the traceback, as usual
        assert "saved by   Cell In[2], line 3: e = x.exp()" in out, out
        assert "written by Cell In[3], line 1: e[0] = 0.0" in out, out
        ip.run_cell("%unload_ext autograder.doctor")
        from torch.overrides import _get_current_function_mode_stack

        assert not _get_current_function_mode_stack()
    finally:
        InteractiveShell.clear_instance()


def test_an_exercise_answer_that_uses_the_doctor_gets_full_marks(tmp_path, needs_bubblewrap):
    """Exercise 5 tells its learners they may use the doctor: an answer that keeps it on inside
    its step is graded like any other (the full check: the sandbox, both verdicts)."""
    import subprocess

    import nbformat

    from autograder.course import EXERCISES, SOLUTIONS

    sol = nbformat.read(SOLUTIONS / "05_diagnosis" / "05_diagnosis.ipynb", as_version=4)
    answers = {
        c.metadata["nbgrader"]["grade_id"]: re.sub(
            r"(?m)^[ \t]*### (BEGIN|END) SOLUTION\n", "", c.source
        )
        for c in sol.cells
        if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("solution")
    }
    nb = nbformat.read(EXERCISES / "05_diagnosis" / "05_diagnosis.ipynb", as_version=4)
    head = "def fixed_step_1(G, D, opt_G, opt_D, real, z):\n"
    for c in nb.cells:
        gid = c.metadata.get("nbgrader", {}).get("grade_id")
        if c.cell_type == "code" and gid in answers:
            c.source = answers[gid]
            if gid == "fixed_step_1":
                assert head in c.source
                c.source = "from autograder.doctor import inplace_doctor\n\n" + c.source.replace(
                    head,
                    head + "    with inplace_doctor():\n"
                    "        return _fixed_step_1(G, D, opt_G, opt_D, real, z)\n\n\n"
                    "def _fixed_step_1(G, D, opt_G, opt_D, real, z):\n",
                    1,
                )
    path = tmp_path / "05_diagnosis.ipynb"
    nbformat.write(nb, path)
    autograder = Path(sys.executable).with_name("autograder")
    proc = subprocess.run(
        [str(autograder), "check", "--hidden", str(path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    from autograder.procs import explain

    assert proc.returncode == 0, explain(proc)
    assert "Full marks" in proc.stdout and "under review" not in proc.stdout, proc.stdout
