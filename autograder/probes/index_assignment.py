"""Probes of the exercise 03_index_assignment's tests: functions its test cells hand to
:func:`autograder.checks.observe`, run where the student's code runs (public: the procedure of a
check, never its expected values or its messages). The student's names are looked up with
:func:`autograder.probes.student` when a probe runs."""

# generated from the test cells of solutions/03_index_assignment/03_index_assignment.ipynb; edited by hand since
import warnings

import torch
import torch.nn.functional as F

from autograder.probes import student  # noqa: F401


def sum_backward(x0, index, value):
    """Runs where your code runs: set_index on a leaf that requires grad, then .sum().backward()."""
    set_index = student("set_index")
    leaf = x0.detach().clone().requires_grad_(True)
    result = set_index(leaf, index, value)
    result.sum().backward()
    return result, leaf.grad


def plain_tensor():
    return torch.tensor([1.0, -2.0, 3.0, 4.0]), None


def view_of_another():
    base = torch.arange(10.0) - 4.0
    return base[2:6], base


def leaf_with_grad():
    leaf = torch.tensor([1.0, -2.0, 3.0, 4.0], requires_grad=True)
    leaf.grad = torch.full((4,), 7.0)
    return leaf, None


def non_leaf():
    a = torch.tensor([0.5, -1.0, 2.0, 0.0], requires_grad=True)
    return a * 2, None


def integer_tensor():
    return torch.tensor([3, 1, 4, 1]), None


def call_on(make, index, value):
    """Runs where your code runs: make x (and the tensor it is a view of), call set_index, return all three."""
    set_index = student("set_index")
    x, base = make()
    result = set_index(x, index, value)
    return result, x, base


def weighted_backward(x0, index, value, weights):
    """Runs where your code runs: set_index on a leaf that requires grad, then (out * weights).sum().backward()."""
    set_index = student("set_index")
    leaf = x0.detach().clone().requires_grad_(True)
    result = set_index(leaf, index, value)
    if not result.requires_grad:
        return result, None
    (result * weights).sum().backward()
    return result, leaf.grad


def value_backward(x0, x_requires_grad, index, value0, weights):
    """Runs where your code runs: set_index with a value that requires grad, then (out * weights).sum().backward()."""
    set_index = student("set_index")
    x = x0.detach().clone().requires_grad_(x_requires_grad)
    value = value0.detach().clone().requires_grad_(True)
    result = set_index(x, index, value)
    if not result.requires_grad:
        return result, None
    (result * weights).sum().backward()
    return result, value.grad


def after_saving_op(op, a0, index, w):
    """Runs where your code runs: x = op(a) (op saves x), set_index(x, index, 0.0), then backward.
    Returns how far x._version moved, and a's gradient (or the error backward raised)."""
    set_index = student("set_index")
    a = a0.detach().clone().requires_grad_(True)
    x = op(a)
    version = x._version
    result = set_index(x, index, 0.0)
    moved = x._version - version
    try:
        (result * w).sum().backward()
    except RuntimeError as exc:
        return moved, exc
    return moved, a.grad


def saved_as_input(a0):
    """Runs where your code runs: q = p * p saves p; set_index(p, 1, 10.0); backward through both."""
    set_index = student("set_index")
    a = a0.detach().clone().requires_grad_(True)
    p = a * 1
    q = p * p
    result = set_index(p, 1, 10.0)
    (q.sum() + (result * 3).sum()).backward()
    return a.grad


def float64_backward(x0, index, v0, weights):
    """Runs where your code runs: set_index in float64 with x and v requiring grad, then backward."""
    set_index = student("set_index")
    x = x0.detach().clone().requires_grad_(True)
    v = v0.detach().clone().requires_grad_(True)
    result = set_index(x, index, v)
    (result * weights).sum().backward()
    return x.grad, v.grad


def blog_example_1():
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 2
    x[0] = 5.0
    y.sum().backward()


def sigmoid_output_overwritten():
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    s = torch.sigmoid(x)
    s[0] = 0.0
    s.sum().backward()


def fine():
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    (x * 2).sum().backward()


def leaf():
    return torch.tensor([1.0, -2.0, 3.0], requires_grad=True)


def add_():
    leaf().add_(1)


def iadd():
    x = leaf()
    x += 1


def setitem():
    x = leaf()
    x[0] = 5.0


def setitem_mask():
    x = leaf()
    x[x < 0] = 0.0


def view_mul_():
    leaf()[:2].mul_(2)


def relu_inplace():
    F.relu(leaf(), inplace=True)


def sgd_step_without_no_grad():
    p = torch.nn.Parameter(torch.ones(3))
    (p * p).sum().backward()
    p -= 0.1 * p.grad


def prune_weight_column():
    layer = torch.nn.Linear(3, 2)
    layer.weight[:, 0] = 0.0


class DoubleInPlace(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t):
        t.mul_(2)
        ctx.mark_dirty(t)
        return t

    @staticmethod
    def backward(ctx, grad):
        return 2 * grad


def custom_on_leaf():
    DoubleInPlace.apply(torch.tensor([1.0, 2.0], requires_grad=True))


def custom_on_parameter():
    DoubleInPlace.apply(torch.nn.Parameter(torch.ones(3)))


def custom_on_view_of_leaf():
    DoubleInPlace.apply(torch.tensor([1.0, 2.0, 3.0], requires_grad=True)[1:])


def x():
    return torch.tensor([0.5, -1.0, 2.0], requires_grad=True)


def sigmoid_output():
    s = torch.sigmoid(x())
    s[0] = 0.0
    s.sum().backward()


def exp_output_add_():
    e = torch.exp(x())
    e.add_(1)
    e.sum().backward()


def relu_output_with_autograd_grad():
    a = x()
    r = torch.relu(a * 3)
    r.mul_(2)
    torch.autograd.grad(r.sum(), a)


def saved_input():
    h = x() * 1
    y = h * h  # mul saves both inputs
    h[1] = 0.0
    y.sum().backward()


class ExpSaved(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t):
        out = t.exp()
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return grad * out


def custom_function_saved_output():
    out = ExpSaved.apply(x())
    out[2] = 1.0
    out.sum().backward()


def training_step_with_padding():
    torch.manual_seed(0)
    layer = torch.nn.Linear(3, 4)
    inputs = torch.randn(2, 5, 3)
    pad = torch.tensor([[False, False, False, True, True], [False, False, False, False, True]])
    hidden = torch.tanh(layer(inputs))
    hidden[pad] = 0.0
    loss = hidden.sum(1).pow(2).mean()
    loss.backward()


def with_anomaly_detection():
    with torch.autograd.set_detect_anomaly(True):
        sigmoid_output()


def returns_a_tensor():
    return torch.ones(2)


def returns_a_label():
    return "leaf-inplace"


def returns_an_exception():
    return RuntimeError(
        "a leaf Variable that requires grad is being used in an in-place operation."
    )


def handles_its_own_error():
    try:
        torch.ones(2, requires_grad=True).add_(1)
    except RuntimeError:
        pass


def no_grad_update():
    p = torch.ones(3, requires_grad=True)
    (p * p).sum().backward()
    with torch.no_grad():
        p -= 0.1 * p.grad


def inplace_on_unsaved_non_leaf():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    h = x * 2
    h.add_(1)
    h.sum().backward()


def warns():
    warnings.warn("just a warning", stacklevel=1)


class DataError(Exception):
    pass


class Abort(BaseException):
    pass


def ok():
    return torch.ones(2) * 2


def leaf_write():
    torch.tensor([1.0, 2.0], requires_grad=True)[0] = 3.0


def saved_write():
    s = torch.sigmoid(torch.tensor([1.0, 2.0], requires_grad=True))
    s.mul_(2)
    s.sum().backward()


def other_runtime_error():
    torch.ones(2) + torch.ones(3)


def value_error():
    raise ValueError("bad batch")
