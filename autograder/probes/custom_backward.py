"""Probes of the exercise 02_custom_backward's tests: functions its test cells hand to
:func:`autograder.checks.observe`, run where the student's code runs (public: the procedure of a
check, never its expected values or its messages). The student's names are looked up with
:func:`autograder.probes.student` when a probe runs."""

# generated from the test cells of solutions/02_custom_backward/02_custom_backward.ipynb; edited by hand since
import torch

from autograder.checks import TensorState
from autograder.probes import student  # noqa: F401


def relu_sum_backward(x0):
    """Runs where your code runs: y = MyReLU.apply(x) on a leaf x that requires grad, then y.sum().backward()."""
    MyReLU = student("MyReLU")
    x = x0.detach().clone().requires_grad_(True)
    y = MyReLU.apply(x)
    y.sum().backward()
    return y, x.grad


def my_relu_forward(data, requires_grad):
    """Runs where your code runs: MyReLU.apply on a copy of data (a leaf that requires grad, or not)."""
    MyReLU = student("MyReLU")
    return MyReLU.apply(data.detach().clone().requires_grad_(requires_grad))


def grad_through_my_relu(data, upstream):
    """Runs where your code runs: upstream(MyReLU.apply(x)).backward(); returns x.grad."""
    MyReLU = student("MyReLU")
    x = data.detach().clone().requires_grad_(True)
    upstream(MyReLU.apply(x)).backward()
    return x.grad


def weight_grad_through_my_relu(layer, x):
    """Runs where your code runs: the gradient of MyReLU.apply(layer(x)).sum() w.r.t. layer.weight."""
    MyReLU = student("MyReLU")
    return torch.autograd.grad(MyReLU.apply(layer(x)).sum(), layer.weight)[0]


def my_relu_backward_with(data, g):
    """Runs where your code runs: MyReLU.apply(x).backward(g) for a leaf x; returns x.grad."""
    MyReLU = student("MyReLU")
    x = data.detach().clone().requires_grad_(True)
    MyReLU.apply(x).backward(g)
    return x.grad


def reduced_backward(d, reduce):
    """Runs where your code runs: reduce(MyReLU.apply(x)).backward(); the gradient tensor MyReLU's backward
    received (and its state on arrival, recorded by a hook), and x.grad."""
    MyReLU = student("MyReLU")
    x = d.detach().clone().requires_grad_(True)
    y = MyReLU.apply(x)
    seen = []
    y.register_hook(lambda g: seen.append((g, TensorState(g))))
    reduce(y).backward()
    return seen[0][0], seen[0][1], x.grad


def my_relu_backward_with_g(d, g):
    """Runs where your code runs: MyReLU.apply(x).backward(g); returns x.grad."""
    MyReLU = student("MyReLU")
    x = d.detach().clone().requires_grad_(True)
    MyReLU.apply(x).backward(g)
    return x.grad


def my_relu_shared_backward(d, w0, g):
    """Runs where your code runs: (3 * w + MyReLU.apply(x)).backward(g); returns w.grad and x.grad."""
    MyReLU = student("MyReLU")
    x = d.detach().clone().requires_grad_(True)
    w = w0.detach().clone().requires_grad_(True)
    (3 * w + MyReLU.apply(x)).backward(g)
    return w.grad, x.grad


def residual_backward(d):
    """Runs where your code runs: h = x * 1; (MyReLU.apply(h) + h).sum().backward(); returns x.grad."""
    MyReLU = student("MyReLU")
    x = d.detach().clone().requires_grad_(True)
    h = x * 1
    (MyReLU.apply(h) + h).sum().backward()
    return x.grad


def two_backwards(data):
    """Runs where your code runs: y = MyReLU.apply(x) with x = base * 1 (a non-leaf). The states of x, y, the
    saved tensors and the tensors kept on ctx before a backward, the same tensors after it, and the gradients
    of that backward and of a second one through the same graph (or the error it raised)."""
    MyReLU = student("MyReLU")
    base = data.detach().clone().requires_grad_(True)
    x = base * 1
    y = MyReLU.apply(x)
    node = y.grad_fn
    before = (TensorState(x), TensorState(y))
    saved_before = [None if t is None else TensorState(t) for t in node.saved_tensors]
    extra = {k: v for k, v in vars(node).items() if isinstance(v, torch.Tensor)}
    extra_before = {k: TensorState(v) for k, v in extra.items()}
    y.backward(torch.ones_like(y), retain_graph=True)
    first = base.grad.clone()
    try:
        saved_after = list(node.saved_tensors)
    except RuntimeError as exc:
        saved_after = exc
    base.grad = None
    try:
        y.backward(torch.ones_like(y))
        second = base.grad
    except RuntimeError as exc:
        second = exc
    return x, y, before, saved_before, saved_after, extra, extra_before, first, second


def jacobian_rows(data):
    """Runs where your code runs: y = MyReLU.apply(x) for a float64 leaf x, then one backward per unit vector
    grad_output through the same graph (as gradcheck does), the first one twice. Returns y and the rows."""
    MyReLU = student("MyReLU")
    x = data.detach().clone().requires_grad_(True)
    y = MyReLU.apply(x)
    rows = []
    for i in list(range(y.numel())) + [0]:
        v = torch.zeros(y.numel(), dtype=y.dtype)
        v[i] = 1.0
        rows.append(torch.autograd.grad(y, x, v.reshape(y.shape), retain_graph=True)[0])
    return y, rows


def inplace_then_backward(data):
    """Runs where your code runs: h = base * 1 (a non-leaf that requires grad), out = MyReLUInplace.apply(h),
    out.sum().backward(). Returns h, out, h's version before the call, base.grad."""
    MyReLUInplace = student("MyReLUInplace")
    base = data.detach().clone().requires_grad_(True)
    h = base * 1
    version = h._version
    out = MyReLUInplace.apply(h)
    out.sum().backward()
    return h, out, version, base.grad


def overwrite(data, non_leaf):
    """Runs where your code runs: x = a copy of data (a non-leaf that requires grad, or a tensor that does not
    require grad), out = MyReLUInplace.apply(x). Returns x, out and x's version before the call."""
    MyReLUInplace = student("MyReLUInplace")
    x = data.detach().clone().requires_grad_(True) * 1 if non_leaf else data.detach().clone()
    version = x._version
    out = MyReLUInplace.apply(x)
    return x, out, version


def run_my_relu_inplace(data, use_input, upstream):
    """Runs where your code runs: h = base * 1, out = MyReLUInplace.apply(h), upstream(h or out).backward()."""
    MyReLUInplace = student("MyReLUInplace")
    base = data.detach().clone().requires_grad_(True)
    h = base * 1  # a non-leaf that requires grad
    out = MyReLUInplace.apply(h)
    upstream(h if use_input else out).backward()
    return base.grad


def my_relu_inplace_backward_with(data, upstream):
    """Runs where your code runs: MyReLUInplace.apply(h).backward(upstream) with h = base * 1; returns base.grad."""
    MyReLUInplace = student("MyReLUInplace")
    base = data.detach().clone().requires_grad_(True)
    MyReLUInplace.apply(base * 1).backward(upstream)
    return base.grad


def on_non_leaf(data):
    """Runs where your code runs: MyReLUInplace.apply(h).sum().backward() with h = base * 1."""
    MyReLUInplace = student("MyReLUInplace")
    base = data.detach().clone().requires_grad_(True)
    MyReLUInplace.apply(base * 1).sum().backward()
    return base.grad


def after(op, data, upstream):
    """Runs where your code runs: upstream(MyReLUInplace.apply(op(x))).backward() for a leaf x; returns x.grad."""
    MyReLUInplace = student("MyReLUInplace")
    x = data.detach().clone().requires_grad_(True)
    upstream(MyReLUInplace.apply(op(x))).backward()
    return x.grad


def clamp_sum_backward(x0, lo, hi):
    """Runs where your code runs: y = Clamp.apply(x, lo, hi) on a leaf x that requires grad, then y.sum().backward()."""
    Clamp = student("Clamp")
    x = x0.detach().clone().requires_grad_(True)
    y = Clamp.apply(x, lo, hi)
    y.sum().backward()
    return y, x.grad


def clamp_forward(data, requires_grad, lo, hi):
    """Runs where your code runs: Clamp.apply on a copy of data (a leaf that requires grad, or not)."""
    Clamp = student("Clamp")
    return Clamp.apply(data.detach().clone().requires_grad_(requires_grad), lo, hi)


def grad_through_clamp(data, lo, hi, upstream):
    """Runs where your code runs: upstream(Clamp.apply(x, lo, hi)).backward(); returns x.grad."""
    Clamp = student("Clamp")
    x = data.detach().clone().requires_grad_(True)
    upstream(Clamp.apply(x, lo, hi)).backward()
    return x.grad


def clamp_sum_backward_at(data, lo, hi):
    """Runs where your code runs: Clamp.apply(x, lo, hi).sum().backward() for a leaf x; returns x.grad."""
    Clamp = student("Clamp")
    x = data.detach().clone().requires_grad_(True)
    Clamp.apply(x, lo, hi).sum().backward()
    return x.grad


def what_backward_returns(data, lo, hi):
    """Runs where your code runs: a full backward (the autograd engine itself checks the count and refuses a
    gradient for a non-tensor input), then what backward returns, called through the node autograd recorded."""
    Clamp = student("Clamp")
    x = data.detach().clone().requires_grad_(True)
    Clamp.apply(x, lo, hi).sum().backward()
    y = Clamp.apply(data.detach().clone().requires_grad_(True), lo, hi)
    with torch.no_grad():
        return y.grad_fn.apply(torch.ones(data.shape))


def clamp_grad_output_seen(d):
    """Runs where your code runs: Clamp.apply(x, -1, 1).sum().backward(); the gradient tensor Clamp's backward
    received (and its state on arrival, recorded by a hook), and x.grad."""
    Clamp = student("Clamp")
    x = d.detach().clone().requires_grad_(True)
    y = Clamp.apply(x, -1, 1)
    seen = []
    y.register_hook(lambda g: seen.append((g, TensorState(g))))
    y.sum().backward()
    return seen[0][0], seen[0][1], x.grad


def clamp_backward_with(d, g):
    """Runs where your code runs: Clamp.apply(x, -1, 1).backward(g); returns x.grad."""
    Clamp = student("Clamp")
    x = d.detach().clone().requires_grad_(True)
    Clamp.apply(x, -1, 1).backward(g)
    return x.grad


def clamp_shared_backward(d, w0, g):
    """Runs where your code runs: (3 * w + Clamp.apply(x, -1, 1)).backward(g); returns w.grad."""
    Clamp = student("Clamp")
    x = d.detach().clone().requires_grad_(True)
    w = w0.detach().clone().requires_grad_(True)
    (3 * w + Clamp.apply(x, -1, 1)).backward(g)
    return w.grad
