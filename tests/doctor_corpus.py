"""The in-place doctor's corpus (tests/test_doctor.py): broken programs, each with its culprit.

``BROKEN``: programs whose backward fails with "... modified by an inplace operation ..." (or whose
write into a leaf is refused). Marks on their lines: ``# WRITE`` the line the report must name as
the write that broke it (for a write made inside a library - an optimizer, nn.init, a module - the
learner's line that called it); ``# SAVE`` a line the report must name as saving (or making) the
tensor; ``# ALSO`` another write the report must list. ``BLIND``: failing programs where the
write cannot be seen from Python, and the report must say so instead of naming a wrong line.
``CORRECT``: programs that run; the doctor must print nothing and change no gradient.
"""

from __future__ import annotations

HEAD = (
    "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\ntorch.manual_seed(0)\n"
)

BROKEN = {
    # -- lesson 3's own errors ---------------------------------------------------------------------
    "lesson3_exp_then_index_write": """
x = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
h = x * 3
e = torch.exp(h)  # SAVE
out = e * 2
e[0] = 0.0  # WRITE
out.sum().backward()
""",
    "lesson3_leaf_index_write": """
w = torch.zeros(3, requires_grad=True)
w[0] = 1.0  # WRITE
""",
    "lesson3_leaf_add_": """
w = nn.Parameter(torch.ones(2, 2))
w.add_(1.0)  # WRITE
""",
    "lesson3_training_step_mask_write": """
w = torch.randn(4, requires_grad=True)
x = torch.randn(4)
a = torch.tanh(w * x)  # SAVE
a[a < 0] = 0.0  # WRITE
loss = (a ** 2).sum()
loss.backward()
""",
    # -- in-place activations (lesson 1) -----------------------------------------------------------
    "relu_module_inplace_after_sigmoid": """
x = torch.randn(5, requires_grad=True)
s = torch.sigmoid(x * 2)  # SAVE
y = nn.ReLU(inplace=True)(s)  # WRITE
y.sum().backward()
""",
    "relu_functional_inplace_after_tanh": """
x = torch.randn(5, requires_grad=True)
t = torch.tanh(x)  # SAVE
F.relu(t, inplace=True)  # WRITE
t.sum().backward()
""",
    "relu_method_after_exp": """
x = torch.randn(5, requires_grad=True)
e = x.exp()  # SAVE
e.relu_()  # WRITE
e.sum().backward()
""",
    "clamp_after_exp": """
x = torch.randn(5, requires_grad=True)
e = x.exp()  # SAVE
e.clamp_(max=1.0)  # WRITE
e.sum().backward()
""",
    "dropout_inplace_after_sigmoid": """
x = torch.randn(8, requires_grad=True)
s = x.sigmoid()  # SAVE
d = F.dropout(s, p=0.5, training=True, inplace=True)  # WRITE
d.sum().backward()
""",
    "elu_inplace_in_a_model": """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.act = nn.ELU(inplace=True)

    def forward(self, x):
        h = torch.sigmoid(self.lin(x))  # SAVE
        return self.act(h)  # WRITE

net = Net()
net(torch.randn(2, 4)).sum().backward()
""",
    # -- arithmetic in place -----------------------------------------------------------------------
    "iadd_after_sin": """
x = torch.randn(3, requires_grad=True)
h = x * 2
y = h.sin()  # SAVE
h += 1  # WRITE
y.sum().backward()
""",
    "mul_after_square": """
x = torch.randn(3, requires_grad=True)
h = x + 1
y = h * h  # SAVE
h.mul_(2)  # WRITE
y.sum().backward()
""",
    "out_argument_into_saved": """
x = torch.randn(3, requires_grad=True)
e = x.exp()  # SAVE
torch.add(torch.ones(3), torch.ones(3), out=e.detach())  # WRITE
e.sum().backward()
""",
    "copy_into_saved": """
x = torch.randn(3, requires_grad=True)
e = torch.exp(x)  # SAVE
with torch.no_grad():
    e.copy_(torch.zeros(3))  # WRITE
e.sum().backward()
""",
    "masked_fill_on_saved": """
x = torch.randn(4, requires_grad=True)
s = torch.sigmoid(x)  # SAVE
s.masked_fill_(s > 0.5, 0.0)  # WRITE
s.sum().backward()
""",
    "scatter_into_saved": """
x = torch.randn(4, requires_grad=True)
t = torch.tanh(x)  # SAVE
t.scatter_(0, torch.tensor([1]), 0.0)  # WRITE
t.sum().backward()
""",
    "two_writes_both_listed": """
x = torch.randn(3, requires_grad=True)
e = torch.exp(x)  # SAVE
e[0] = 0.0  # WRITE
e[1] = 0.0  # ALSO
e.sum().backward()
""",
    # -- views ---------------------------------------------------------------------------------------
    "write_base_of_a_saved_view": """
x = torch.randn(4, requires_grad=True)
h = x * 2
v = h[1:]
y = v.pow(2)  # SAVE
h[0:2] = 0.0  # WRITE
y.sum().backward()
""",
    "write_through_a_transpose_view": """
x = torch.randn(2, 3, requires_grad=True)
e = x.exp()  # SAVE
t = e.t()
t[0, 0] = 1.0  # WRITE
e.sum().backward()
""",
    "write_base_of_an_expand": """
x = torch.randn(3, requires_grad=True)
a = x.exp()  # SAVE
b = a.expand(2, 3)
(b * 2).sum()
a[0] = 1.0  # WRITE
a.sum().backward()
""",
    # -- training loops (lesson 4) -----------------------------------------------------------------
    "optimizer_step_between_two_backwards": """
w = nn.Parameter(torch.randn(3))
opt = torch.optim.SGD([w], lr=0.1)
x = torch.randn(3)
loss1 = (w * x).sum()
loss2 = (w ** 2).sum()  # SAVE
loss1.backward()
opt.step()  # WRITE
loss2.backward()
""",
    "gan_step_discriminator_updated_before_generator_backward": """
G = nn.Sequential(nn.Linear(2, 4), nn.Tanh(), nn.Linear(4, 2))
D = nn.Sequential(nn.Linear(2, 4), nn.Tanh(), nn.Linear(4, 1))
opt_d = torch.optim.Adam(D.parameters(), lr=1e-2)
opt_g = torch.optim.Adam(G.parameters(), lr=1e-2)
z, real = torch.randn(8, 2), torch.randn(8, 2)
fake = G(z)
d_fake = D(fake)  # SAVE
d_loss = F.softplus(-D(real)).mean() + F.softplus(d_fake).mean()
g_loss = F.softplus(-d_fake).mean()
opt_d.zero_grad()
d_loss.backward(retain_graph=True)
opt_d.step()  # WRITE
opt_g.zero_grad()
g_loss.backward()
""",
    "sgd_without_foreach_between_backwards": """
lin = nn.Linear(3, 1)
opt = torch.optim.SGD(lin.parameters(), lr=0.1, foreach=False)
x = torch.randn(5, 3, requires_grad=True)
out = lin(x)  # SAVE
loss_a, loss_b = out.mean(), (out ** 2).mean()
loss_a.backward(retain_graph=True)
opt.step()  # WRITE
loss_b.backward()
""",
    "manual_update_before_backward": """
w = torch.randn(3, requires_grad=True)
x = torch.randn(3)
y = (w * w).sum()  # SAVE
with torch.no_grad():
    w -= 0.1 * x  # WRITE
y.backward()
""",
    "buffer_updated_in_place": """
class Scale(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("scale", torch.ones(3))

    def forward(self, x):
        y = x * self.scale  # SAVE
        self.scale.mul_(0.9)  # WRITE
        return y

m = Scale()
x = torch.randn(3, requires_grad=True)
m(x).sum().backward()
""",
    "forward_hook_writes_output": """
def hook(module, inputs, output):
    output.mul_(2)  # WRITE

act = nn.Sigmoid()
act.register_forward_hook(hook)
x = torch.randn(4, requires_grad=True)
act(x).sum().backward()  # SAVE
""",
    "init_inside_library_on_saved": """
x = torch.randn(4, requires_grad=True)
h = torch.tanh(x)  # SAVE
nn.init.zeros_(h)  # WRITE
h.sum().backward()
""",
    "rnn_state_decayed_in_place": """
W = torch.randn(3, 3, requires_grad=True)
h = torch.zeros(3)
for _ in range(2):
    h = torch.tanh(W @ h + 1)  # SAVE
h.mul_(0.5)  # WRITE
h.sum().backward()
""",
    "write_in_a_helper_function": """
def normalize_(t):
    t.div_(t.sum())  # WRITE

x = torch.rand(4, requires_grad=True)
p = torch.softmax(x, 0)  # SAVE
normalize_(p)
p.sum().backward()
""",
    # -- custom autograd.Function (lesson 2) -------------------------------------------------------
    "custom_function_saved_input_written_later": """
class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g

x = torch.randn(3, requires_grad=True)
h = x + 1  # SAVE
y = Square.apply(h)
h.add_(1)  # WRITE
y.sum().backward()
""",
    "custom_function_backward_writes_saved_output": """
class Exp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y

x = torch.randn(3, requires_grad=True)
y = Exp.apply(x)  # (saved by Exp's forward: the report says so, without a line)
z = y.sigmoid()
y.zero_()  # WRITE
z.sum().backward()
""",
    # -- autocast ------------------------------------------------------------------------------------
    "autocast_region_exp_then_write": """
x = torch.randn(4, requires_grad=True)
with torch.autocast("cpu", dtype=torch.bfloat16):
    e = torch.exp(x)  # SAVE
    e[0] = 0.0  # WRITE
e.float().sum().backward()
""",
}

BROKEN["write_inside_torch_compile_eager_backend"] = """
@torch.compile(backend="eager")
def scale_(t):
    t.mul_(2)  # WRITE

x = torch.randn(3, requires_grad=True)
e = x.exp()  # SAVE
scale_(e.detach())
e.sum().backward()
"""

BLIND = {
    # the write was made before the doctor was turned on (tests/test_doctor.py turns it on at the
    # line marked `# ON`)
    "write_before_the_doctor_was_on": """
x = torch.randn(3, requires_grad=True)
e = x.exp()
e[0] = 0.0
# ON
e.sum().backward()
""",
    # torch function modes are per thread: a write from another thread is not seen
    "write_from_another_thread": """
import threading
x = torch.randn(3, requires_grad=True)
e = x.exp()
worker = threading.Thread(target=lambda: e.detach().mul_(2))
worker.start()
worker.join()
e.sum().backward()
""",
}

CORRECT = {
    "clone_before_the_write": """
x = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
e = torch.exp(x * 3).clone()
out = e * 2
e2 = e.clone()
e2[0] = 0.0
out.sum().backward()
""",
    "relu_out_of_place_after_sigmoid": """
x = torch.randn(5, requires_grad=True)
y = nn.ReLU()(torch.sigmoid(x))
y.sum().backward()
""",
    "batchnorm_then_inplace_relu": """
net = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.ReLU(inplace=True), nn.Linear(4, 1))
net(torch.randn(8, 4)).sum().backward()
""",
    "optimizer_step_after_every_backward": """
w = nn.Parameter(torch.randn(3))
opt = torch.optim.SGD([w], lr=0.1)
for _ in range(3):
    opt.zero_grad()
    loss = (w ** 2).sum()
    loss.backward()
    opt.step()
""",
    "add_in_place_on_unsaved": """
x = torch.randn(3, requires_grad=True)
h = x + 1
h.add_(1)
h.sum().backward()
""",
    "torch_where_instead_of_index_write": """
x = torch.randn(4, requires_grad=True)
a = torch.tanh(x)
a = torch.where(a < 0, torch.zeros_like(a), a)
(a ** 2).sum().backward()
""",
    "no_grad_update_after_backward": """
w = torch.randn(3, requires_grad=True)
(w * w).sum().backward()
with torch.no_grad():
    w -= 0.1 * w.grad
""",
}
