"""Unit tests of autograder.checks and autograder.messages (what the test cells rely on)."""

import numpy as np
import pytest
import torch

from autograder.checks import (
    CallRecorder,
    CheckFailure,
    TensorState,
    as_bool,
    check_bool,
    check_call,
    check_grad,
    check_raises,
    check_returns,
    check_same_object,
    check_tensor,
    check_true,
    check_unchanged,
    quiet,
    same_values,
    shares_storage,
)
from autograder.messages import describe, format_failure


def test_failure_message_has_expected_found_and_cause():
    with pytest.raises(CheckFailure) as info:
        check_true(False, "f(x) is wrong", expected=1, found=2, cause="a typo")
    text = str(info.value)
    assert text.splitlines() == [
        "f(x) is wrong",
        "  expected: 1",
        "  found:    2",
        "  likely cause: a typo",
    ]
    assert isinstance(info.value, AssertionError)


def test_format_failure_omits_missing_parts():
    assert format_failure("only what") == "only what"


def test_describe_is_short_and_has_no_addresses():
    assert describe(torch.tensor([1.0, 2.0])) == "tensor([1., 2.])"
    assert "shape (100,)" in describe(torch.zeros(100))
    assert describe(torch.tensor([1.0], dtype=torch.float64)) == "tensor([1.], dtype=torch.float64)"
    assert "0x" not in describe(object())
    assert len(describe("x" * 10_000)) <= 300


def test_describe_names_tensor_subclasses():
    class Sneaky(torch.Tensor):
        pass

    assert "subclass" in describe(torch.zeros(2).as_subclass(Sneaky))


@pytest.mark.parametrize(
    "value,expected", [(True, True), (np.bool_(False), False), (torch.tensor(True), True)]
)
def test_as_bool_accepts_bool_like_results(value, expected):
    assert as_bool(value) is expected


@pytest.mark.parametrize("value", [1, "True", torch.tensor([True, False]), None, torch.tensor(1.0)])
def test_as_bool_rejects_everything_else(value):
    with pytest.raises(CheckFailure, match="must be True or False"):
        as_bool(value)


def test_as_bool_rejects_objects_that_fake_truth():
    class AlwaysTrue:
        def __bool__(self):
            return True

        def __eq__(self, other):
            return True

    with pytest.raises(CheckFailure):
        check_bool(AlwaysTrue(), True, "f()")


def test_check_bool_reports_value_and_cause():
    with pytest.raises(CheckFailure, match="returned False") as info:
        check_bool(False, True, "f()", cause="because")
    assert "likely cause: because" in str(info.value)
    check_bool(True, True, "f()")


def test_check_returns_turns_exceptions_into_messages():
    def boom():
        raise ValueError("bad input")

    with pytest.raises(CheckFailure, match="raised ValueError"):
        check_returns(boom, True, "f()")
    check_returns(lambda: True, True, "f()")


def test_check_call_returns_result_or_explains_the_exception():
    import warnings

    def noisy():
        warnings.warn("ignored", stacklevel=2)
        return 3

    assert check_call(noisy, "f()") == 3

    def leaf_write():
        torch.ones(2, requires_grad=True).add_(1)

    with pytest.raises(CheckFailure) as info:
        check_call(leaf_write, "f(x)", cause="clone x first")
    text = str(info.value)
    assert text.startswith("f(x) raised RuntimeError")
    assert "found:    RuntimeError: a leaf Variable that requires grad" in text
    assert "likely cause: clone x first" in text

    def inner_check():
        check_true(False, "inner")

    with pytest.raises(CheckFailure, match="^inner$"):
        check_call(inner_check, "outer")


def test_check_tensor_accepts_equal_and_nan():
    a = torch.tensor([1.0, float("nan")])
    check_tensor(a.clone(), a, "y")


@pytest.mark.parametrize(
    "found,match",
    [
        (torch.tensor([1.0, 3.0]), r"wrong values \(first difference at index \[1\]"),
        (torch.tensor([1.0]), "wrong shape"),
        (torch.tensor([1, 2]), "wrong dtype"),
        ([1.0, 2.0], "must be a torch.Tensor"),
    ],
)
def test_check_tensor_failures(found, match):
    with pytest.raises(CheckFailure, match=match):
        check_tensor(found, torch.tensor([1.0, 2.0]), "y")


def test_check_tensor_rejects_subclass_that_fakes_equality():
    class Liar(torch.Tensor):
        def __eq__(self, other):
            return torch.ones_like(other, dtype=torch.bool)

    liar = torch.zeros(2).as_subclass(Liar)
    with pytest.raises(CheckFailure, match="plain torch.Tensor"):
        check_tensor(liar, torch.ones(2), "y")


def test_check_grad_names_position_and_input():
    x = torch.tensor([-1.0, 0.0, 2.0])
    with pytest.raises(CheckFailure) as info:
        check_grad(
            torch.tensor([0.0, 1.0, 1.0]),
            torch.tensor([0.0, 0.0, 1.0]),
            "grad",
            inputs=x,
            cause="torch.relu uses 0 at x == 0",
        )
    assert "at x[1] == 0.0 your gradient is 1.0; expected 0.0" in str(info.value)
    with pytest.raises(CheckFailure, match="no gradient"):
        check_grad(None, torch.zeros(1), "grad")
    check_grad(torch.ones(2), torch.ones(2), "grad")


def test_check_raises_type_message_and_absence():
    def raise_value():
        raise ValueError("lo=2 > hi=1")

    exc = check_raises(raise_value, ValueError, "f()", match="lo=2")
    assert isinstance(exc, ValueError)
    with pytest.raises(CheckFailure, match="unexpected message"):
        check_raises(raise_value, ValueError, "f()", match="nope")
    with pytest.raises(CheckFailure, match="wrong exception"):
        check_raises(raise_value, TypeError, "f()")
    with pytest.raises(CheckFailure, match="did not raise"):
        check_raises(lambda: None, TypeError, "f()")


def test_check_same_object():
    err = KeyError("k")

    def raise_it():
        raise err

    def raise_copy():
        raise KeyError("k")

    check_same_object(raise_it, err, "f()")
    with pytest.raises(CheckFailure, match="original exception"):
        check_same_object(raise_copy, err, "f()")
    with pytest.raises(CheckFailure, match="swallowed"):
        check_same_object(lambda: None, err, "f()")


def test_unchanged_names_the_role_of_the_tensor():
    g = torch.ones(3)
    state = TensorState(g)
    g[0] = 0.0
    with pytest.raises(CheckFailure, match="backward changed the values of grad_output"):
        check_unchanged(g, state, "backward", role="grad_output")


def test_unchanged_detects_values_version_requires_grad_and_grad():
    x = torch.tensor([1.0, float("nan")], requires_grad=True)
    state = TensorState(x)
    check_unchanged(x, state, "f(x)")
    with torch.no_grad():
        x.mul_(1)
    with pytest.raises(CheckFailure, match="_version moved from 0 to 1"):
        check_unchanged(x, state, "f(x)")
    y = torch.tensor([1.0, 2.0])
    state = TensorState(y)
    y.data[0] = 5.0
    with pytest.raises(CheckFailure, match="changed the values"):
        check_unchanged(y, state, "f(x)")
    z = torch.zeros(2, requires_grad=True)
    state = TensorState(z)
    z.grad = torch.ones(2)
    with pytest.raises(CheckFailure, match=r"changed the \.grad"):
        check_unchanged(z, state, "f(x)")
    w = torch.zeros(2)
    state = TensorState(w)
    w.requires_grad_()
    with pytest.raises(CheckFailure, match="requires_grad"):
        check_unchanged(w, state, "f(x)")


def test_unchanged_on_non_leaf_does_not_warn(recwarn):
    leaf = torch.ones(2, requires_grad=True)
    check_unchanged(leaf * 2, TensorState(leaf * 2), "f(x)")
    assert not [w for w in recwarn if ".grad attribute" in str(w.message)]


def test_quiet_captures_warnings_and_stderr(capsys):
    import sys
    import warnings

    with quiet() as caught:
        warnings.warn("loud", stacklevel=2)
        print("noise", file=sys.stderr)
    assert caught == ["loud"]
    assert capsys.readouterr().err == ""


def test_same_values_and_shares_storage():
    a = torch.tensor([1.0, float("nan")])
    assert same_values(a, a.clone())
    assert not same_values(a, a.double())
    assert shares_storage(a, a[1:]) and not shares_storage(a, a.clone())


def test_call_recorder():
    rec = CallRecorder(lambda t: t + 1)
    assert rec(1) == 2 and rec.count == 1 and rec.first_arg() == 1


def test_as_bool_rejects_a_numpy_bool_look_alike():
    class bool_:  # noqa: N801 - imitates numpy.bool_
        __module__ = "numpy"

        def __bool__(self):
            return True

    with pytest.raises(CheckFailure, match="must be True or False"):
        as_bool(bool_())


def test_state_helpers_reject_tensor_subclasses():
    class Agreeable(torch.Tensor):
        def __eq__(self, other):
            return True

    fake = torch.zeros(2).as_subclass(Agreeable)
    plain = torch.zeros(2)
    for call in (
        lambda: same_values(fake, plain),
        lambda: shares_storage(plain, fake),
        lambda: TensorState(fake),
    ):
        with pytest.raises(CheckFailure, match="plain torch.Tensor"):
            call()
    state = TensorState(plain)
    with pytest.raises(CheckFailure, match="turned its input into something else"):
        check_unchanged(fake, state, "f(x)")
