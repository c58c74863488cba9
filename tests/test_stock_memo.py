"""tests/stock_memo.py's recorded_run: stock's scores are reused only for exactly the inputs they
came from, and a run that failed, or whose kernels did not all report their modules, is never
kept. The stock run here is a stand-in that writes what tests/stock_site's recorder writes."""

import json

import pytest

import stock_memo


@pytest.fixture
def memo(tmp_path, monkeypatch):
    monkeypatch.setattr(stock_memo, "FOLDER", tmp_path / "memo")
    monkeypatch.delenv("AUTOGRADER_STOCK_MEMO", raising=False)
    course = tmp_path / "course"
    (course / "source" / "hw1").mkdir(parents=True)
    (course / "source" / "hw1" / "hw1.ipynb").write_text("{}")
    (course / "nbgrader_config.py").write_text("c = get_config()\n")
    (course / "submitted" / "alice" / "hw1").mkdir(parents=True)
    (course / "submitted" / "alice" / "hw1" / "hw1.ipynb").write_text("{}")
    calls = []

    def stand_in(kernels=1, ok=True, score=1.0):
        def run(env):
            calls.append(env)
            record = env["AUTOGRADER_STOCK_RECORD"]
            for k in range(kernels):  # what each kernel's sitecustomize writes
                with open(f"{record}/{k}.txt", "w") as fh:
                    fh.write(
                        "python -m ipykernel_launcher -f k.json\nautograder\nautograder.checks\n"
                    )
            return {("alice", "hw1", "test_a"): score}, ok

        return run

    return {"course": course, "calls": calls, "run": stand_in}


def test_the_same_inputs_reuse_the_scores(memo):
    first = stock_memo.recorded_run("x", memo["course"], "hw1", memo["run"]())
    again = stock_memo.recorded_run("x", memo["course"], "hw1", memo["run"](score=0.0))
    assert first == again == {("alice", "hw1", "test_a"): 1.0}
    assert len(memo["calls"]) == 1
    kept = json.loads((stock_memo.FOLDER / "x.json").read_text())
    assert set(kept["kernel modules"]) == {"autograder/__init__.py", "autograder/checks.py"}
    assert set(kept["inputs"]["files"]) == {
        "nbgrader_config.py",
        "source/hw1/hw1.ipynb",
        "submitted/alice/hw1/hw1.ipynb",
    }


@pytest.mark.parametrize("change", ["file", "new file", "kernel module", "python", "off"])
def test_any_changed_input_runs_stock_again(memo, monkeypatch, change):
    stock_memo.recorded_run("x", memo["course"], "hw1", memo["run"]())
    path = stock_memo.FOLDER / "x.json"
    if change == "file":
        (memo["course"] / "source" / "hw1" / "hw1.ipynb").write_text('{"cells": []}')
    elif change == "new file":
        (memo["course"] / "submitted" / "bob" / "hw1").mkdir(parents=True)
        (memo["course"] / "submitted" / "bob" / "hw1" / "hw1.ipynb").write_text("{}")
    elif change == "kernel module":  # as if autograder/checks.py had changed since
        kept = json.loads(path.read_text())
        kept["kernel modules"]["autograder/checks.py"] = "0" * 64
        path.write_text(json.dumps(kept))
    elif change == "python":
        kept = json.loads(path.read_text())
        kept["inputs"]["python"] = "3.10.0"
        path.write_text(json.dumps(kept))
    else:
        monkeypatch.setenv("AUTOGRADER_STOCK_MEMO", "0")
    got = stock_memo.recorded_run("x", memo["course"], "hw1", memo["run"](score=0.0))
    assert got == {("alice", "hw1", "test_a"): 0.0}
    assert len(memo["calls"]) == 2


@pytest.mark.parametrize("how", ["failed", "a kernel did not report"])
def test_a_run_that_cannot_be_trusted_is_not_kept(memo, how):
    if how == "failed":
        run = memo["run"](ok=False)
    else:  # two notebooks submitted, one kernel's record
        (memo["course"] / "submitted" / "bob" / "hw1").mkdir(parents=True)
        (memo["course"] / "submitted" / "bob" / "hw1" / "hw1.ipynb").write_text("{}")
        run = memo["run"](kernels=1)
    stock_memo.recorded_run("x", memo["course"], "hw1", run)
    assert not (stock_memo.FOLDER / "x.json").exists()
