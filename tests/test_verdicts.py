"""The two-verdicts rule (autograder/grading/verdicts.py), at unit level: generated pairs of one
kernel's and the judge's rows, every setting of AutograderGrade.counts. No difference is silent;
agreement is the judge's row; the student sees nothing of one kernel's run but pass/fail. The
end-to-end proofs (real sandboxes, real nbgrader) are in tests/test_two_verdicts.py."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.grading import verdicts
from autograder.grading.results.report import FIELDS, Row
from autograder.grading.status import Status

STATUSES = ["ok", "timeout", "kernel-died", "memory-limit", "output-limit", "tampered"]
SCORES = st.sampled_from([0.0, 0.5, 1.0, 2.0])


def row(gid, score, status="ok", message="", max_score=2.0):
    return Row("s", "a", "nb", gid, score, max_score, status, message, hidden=True)


@st.composite
def pairs(draw):
    n = draw(st.integers(1, 6))
    krows, jrows, unconf = [], [], set()
    for k in range(n):
        ks, js = draw(SCORES), draw(SCORES)
        kst = draw(st.sampled_from(STATUSES)) if ks == 0 else "ok"
        jst = draw(st.sampled_from(STATUSES)) if js == 0 else "ok"
        krows.append(row(f"t{k}", ks, kst, message="KERNEL-SECRET hidden test source"))
        jrows.append(row(f"t{k}", js, jst, message=f"judge says {k}"))
        if js == 0 and jst == "ok" and draw(st.booleans()):
            unconf.add(k)
    only = {f"t{k}": "calibration" for k in range(n) if draw(st.booleans()) and k not in unconf}
    return krows, jrows, unconf, only


@settings(max_examples=400, deadline=None)
@given(pairs(), st.sampled_from(verdicts.COUNTS))
def test_no_difference_is_silent_and_the_setting_decides_the_score(case, counts):
    krows, jrows, unconf, only = case
    rows = verdicts.merge(krows, jrows, counts, only, unconf)
    assert [r.grade_id for r in rows] == [r.grade_id for r in krows]
    for r, k, j in zip(rows, krows, jrows, strict=True):
        assert "KERNEL-SECRET" not in r.message  # one kernel's text never reaches a student
        if r.grade_id in only:
            assert r.status in ("in-kernel", k.status) and r.score == k.score
            assert r.judge_score is None and r.judge_status == "not-run"
            continue
        assert (r.kernel_score, r.judge_score) == (k.score, j.score)
        if k.score == j.score:
            assert r.status not in ("unconfirmed", "contradicted")
            assert r.score == j.score
            if not unconf.__contains__(int(r.grade_id[1:])):
                assert (r.status, r.message) == (j.status, j.message)  # agreement: the judge's row
        else:
            want = "unconfirmed" if k.score > j.score else "contradicted"
            assert r.status == want and r.message == verdicts.UNDER_REVIEW
            assert (
                r.score
                == {
                    "kernel": k.score,
                    "judge": j.score,
                    "lower": min(k.score, j.score),
                }[counts]
            )


def test_a_forged_pass_is_unconfirmed_and_the_reverse_contradicted():
    rows = verdicts.merge(
        [row("forged", 2.0), row("args", 0.0, message="AssertionError")],
        [row("forged", 0.0, message="CheckFailure: wrong"), row("args", 2.0)],
        "kernel",
    )
    assert [(r.status, r.score, r.kernel_score, r.judge_score) for r in rows] == [
        ("unconfirmed", 2.0, 2.0, 0.0),
        ("contradicted", 0.0, 0.0, 2.0),
    ]
    assert rows[0].judge_reason == "CheckFailure: wrong"
    lines = verdicts.difference_lines(rows, "kernel")
    assert len(lines) == 2 and "one kernel 2, the judge 0 / 2" in lines[0]


def test_not_confirmed_is_the_judges_word_never_a_row_status():
    judge = {"tests": [{"status": "needs-kernel", "message": "not run: threads"}, {"passed": True}]}
    out, ks = verdicts.not_confirmed(judge)
    assert ks == {0} and out["tests"][0]["message"] == "not confirmed: threads"
    rows = verdicts.merge(
        [row("t0", 2.0), row("t1", 0.0)],
        [row("t0", 0.0, message="x"), row("t1", 0.0)],
        "kernel",
        None,
        ks,
    )
    assert rows[0].status == "unconfirmed" and rows[0].judge_status == "not-confirmed"
    assert rows[1].status == "ok"


def test_a_hidden_difference_is_a_grader_bug():
    r = row("t", 2.0)
    r.kernel_score, r.judge_score = 2.0, 0.0
    with pytest.raises(verdicts.DifferenceHidden):
        verdicts.check_rows([r], "kernel")


def test_an_unknown_setting_is_refused():
    with pytest.raises(ValueError, match="counts"):
        verdicts.merge([row("t", 1.0)], [row("t", 1.0)], "max")


def test_grades_csv_carries_both_verdicts():
    assert FIELDS[-4:] == ["kernel_score", "judge_score", "judge_status", "judge_reason"]
    assert Status.of("unconfirmed") is Status.UNCONFIRMED
    assert Status.of("contradicted") is Status.CONTRADICTED


def test_a_settlement_holds_while_the_two_scores_are_the_ones_settled(tmp_path):
    """`autograder serve` writes its grades from every attempt's rows, and a re-run of `autograder
    grade` grades again: a settled difference stays settled only for the same two scores."""
    (tmp_path / "settled.csv").write_text(
        "settled_at,student,assignment,notebook,grade_id,was,kernel_score,judge_score,took,score\n"
        "now,s,a,nb,t,unconfirmed,2,0,judge,0\n"
    )
    decisions = verdicts.settled(tmp_path)
    same = verdicts.merge([row("t", 2.0)], [row("t", 0.0)], "kernel")
    other = verdicts.merge([row("t", 2.0)], [row("t", 1.0)], "kernel")
    verdicts.apply_settled(same + other, decisions)
    assert (same[0].status, same[0].score) == ("settled", 0.0)
    assert (other[0].status, other[0].score) == ("unconfirmed", 2.0)
    verdicts.check_rows(same + other, "kernel")
