"""Multi-tensor ops on neuron (ops_optim.cpp, kernels/src/optim/optim.c) against
torch on the CPU: the _foreach_* overloads torch.optim, clip_grad_* and
GradScaler use, the fused Adam/AdamW/SGD/Adagrad steps, the AMP ops, and
whole optimizers (SGD, Adam, AdamW, RMSprop, Adagrad; foreach and fused)
stepping a small model.  Everything runs with the fallback in "error"
mode, so a passing test proves the ops native; the profiler checks that the
fast route is one _foreach op, not ATen's per-tensor loop."""
import copy
import math
import os

import pytest
import torch
import torch.nn as nn

import torch_neuronx  # noqa: F401
from torch_neuronx._fallback import fallback_mode, fallback_stats, reset_fallback_stats

DEV = "neuron"
FLOATS = [torch.float32, torch.bfloat16, torch.float64, torch.float16]


@pytest.fixture(autouse=True)
def native():
    reset_fallback_stats()
    with fallback_mode("error"):
        yield
    assert fallback_stats() == {}


def tol(dtype):
    if dtype == torch.bfloat16:
        return dict(rtol=2e-2, atol=2e-2)
    if dtype == torch.float16:
        return dict(rtol=2e-3, atol=2e-3)
    if dtype == torch.float64:
        return dict(rtol=1e-12, atol=1e-12)
    return dict(rtol=2e-6, atol=2e-6)


SHAPES = [(), (0,), (3,), (7, 5), (129, 260)]  # the last one spans two blocks


def make_list(dtype, seed, positive=False, transposed=True):
    g = torch.Generator().manual_seed(seed)
    out = []
    for s in SHAPES:
        t = torch.randn(s, generator=g, dtype=torch.float64)
        if positive:
            t = t.abs() + 0.5
        out.append(t.to(dtype))
    if transposed:  # dense but not contiguous: still the fast route
        t = torch.randn(6, 9, generator=g, dtype=torch.float64)
        out.append((t.abs() + 0.5 if positive else t).to(dtype).t())
    return out


def to_dev(ts):
    return [t.to(DEV) for t in ts]


def check_lists(got, want, dtype):
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert a.device.type == DEV
        assert a.shape == b.shape and a.dtype == b.dtype
        torch.testing.assert_close(a.cpu(), b, **tol(dtype), equal_nan=True)


def aten_ops(fn):
    """The aten ops a call dispatches (the profiler sees nested calls)."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        fn()
    return {e.name for e in prof.events()}


# ---------------------------------------------------------------- binary ops

BINARY = ["add", "sub", "mul", "div", "clamp_min", "clamp_max", "maximum", "minimum", "pow"]
OVERLOADS = {
    "add": ["Scalar", "List", "ScalarList", "Tensor"],
    "sub": ["Scalar", "List", "ScalarList"],
    "mul": ["Scalar", "List", "ScalarList", "Tensor"],
    "div": ["Scalar", "List", "ScalarList", "Tensor"],
}


def binary_args(name, overload, dtype, on_dev):
    n = len(SHAPES) + 1
    if overload == "Scalar":
        return (2.0 if name == "pow" else 0.75,), {}
    if overload == "ScalarList":
        vals = [0.5, -1.25, 2.0, 3.0, -0.5, 1.5] if name != "pow" else [2.0, 0.5, 3.0, -1.0, 1.7, -2.0]
        return (vals[:n],), {}
    if overload == "Tensor":
        t = torch.tensor(1.5, dtype=dtype)
        return (t.to(DEV) if on_dev else t,), ({"alpha": -0.5} if name == "add" else {})
    other = make_list(dtype, 7, positive=(name in ("div", "pow")))
    kw = {"alpha": 2.5} if name in ("add", "sub") else {}
    return (to_dev(other) if on_dev else other,), kw


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("inplace", [False, True])
@pytest.mark.parametrize("name", BINARY)
def test_binary(name, inplace, dtype):
    for overload in OVERLOADS.get(name, ["Scalar", "List", "ScalarList"]):
        x = make_list(dtype, 1, positive=(name == "pow"))
        xd = to_dev(x)
        args_c, kw = binary_args(name, overload, dtype, False)
        args_d, _ = binary_args(name, overload, dtype, True)
        if inplace:
            getattr(torch, f"_foreach_{name}_")(x, *args_c, **kw)
            getattr(torch, f"_foreach_{name}_")(xd, *args_d, **kw)
            check_lists(xd, x, dtype)
        else:
            want = getattr(torch, f"_foreach_{name}")(x, *args_c, **kw)
            got = getattr(torch, f"_foreach_{name}")(xd, *args_d, **kw)
            check_lists(got, want, dtype)
            check_lists(xd, x, dtype)  # inputs untouched


def test_tensor_scalar_on_cpu_and_pow_scalar_and_tensor():
    x = make_list(torch.float32, 2)
    xd = to_dev(x)
    s = torch.tensor(-2.0)
    check_lists(torch._foreach_mul(xd, s), torch._foreach_mul(x, s), torch.float32)
    e = make_list(torch.float32, 3)
    check_lists(torch._foreach_pow(2.0, to_dev(e)), torch._foreach_pow(2.0, e), torch.float32)


def test_fast_route_is_one_op():
    x = to_dev(make_list(torch.float32, 1))
    y = to_dev(make_list(torch.float32, 2))
    ops = aten_ops(lambda: torch._foreach_add_(x, y, alpha=0.5))
    assert "aten::_foreach_add_" in ops and "aten::add_" not in ops
    ops = aten_ops(lambda: torch._foreach_norm(x))
    assert "aten::linalg_vector_norm" not in ops
    # integers and non-dense views take ATen's per-tensor loop (still native)
    xi = [torch.arange(5, device=DEV), torch.arange(3, device=DEV)]
    ops = aten_ops(lambda: torch._foreach_add_(xi, 1))
    assert "aten::add_" in ops
    assert [t.tolist() for t in xi] == [[1, 2, 3, 4, 5], [1, 2, 3]]


@pytest.mark.parametrize("dtype", FLOATS)
def test_addcmul_addcdiv_lerp(dtype):
    x, a, b = make_list(dtype, 1), make_list(dtype, 2), make_list(dtype, 3, positive=True)
    xd, ad, bd = to_dev(x), to_dev(a), to_dev(b)
    n = len(x)
    scal = [0.5 * (i + 1) - 1.2 for i in range(n)]
    for name in ("addcmul", "addcdiv"):
        f, f_ = getattr(torch, f"_foreach_{name}"), getattr(torch, f"_foreach_{name}_")
        check_lists(f(xd, ad, bd, value=-0.7), f(x, a, b, value=-0.7), dtype)
        check_lists(f(xd, ad, bd, scal), f(x, a, b, scal), dtype)
        packed = torch.tensor(scal)
        check_lists(f(xd, ad, bd, packed), f(x, a, b, packed), dtype)
        xc, xdc = [t.clone() for t in x], [t.clone() for t in xd]
        f_(xc, a, b, scal)
        f_(xdc, ad, bd, scal)
        check_lists(xdc, xc, dtype)
    w = make_list(dtype, 4)
    check_lists(torch._foreach_lerp(xd, ad, to_dev(w)), torch._foreach_lerp(x, a, w), dtype)
    for weight in (0.1, 0.9):  # both sides of ATen's lerp formula
        check_lists(torch._foreach_lerp(xd, ad, weight), torch._foreach_lerp(x, a, weight), dtype)
    check_lists(torch._foreach_lerp(xd, ad, scal), torch._foreach_lerp(x, a, scal), dtype)
    torch._foreach_lerp_(x, a, 0.3)
    torch._foreach_lerp_(xd, ad, 0.3)
    check_lists(xd, x, dtype)


UNARY = ["sqrt", "neg", "abs", "exp", "sign", "reciprocal", "rsqrt", "log", "log1p", "expm1",
         "sigmoid", "tanh", "sin", "cos", "ceil", "floor", "round", "trunc", "frac", "erf"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_unary(dtype):
    for name in UNARY:
        positive = name in ("sqrt", "rsqrt", "log", "log1p")
        x = make_list(dtype, 5, positive=positive)
        xd = to_dev(x)
        check_lists(getattr(torch, f"_foreach_{name}")(xd), getattr(torch, f"_foreach_{name}")(x),
                    dtype)
        getattr(torch, f"_foreach_{name}_")(x)
        getattr(torch, f"_foreach_{name}_")(xd)
        check_lists(xd, x, dtype)


def test_zero_copy():
    x = to_dev(make_list(torch.float32, 1))
    torch._foreach_zero_(x)
    assert all((t == 0).all() for t in x)
    src = make_list(torch.bfloat16, 2)
    torch._foreach_copy_(x, to_dev(src))  # across dtypes
    check_lists(x, [t.float() for t in src], torch.float32)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_norm_and_max(dtype):
    x = make_list(dtype, 6)
    xd = to_dev(x)
    for ord in (1, 2, 3.0, math.inf):
        for out_dtype in (None, torch.float64):
            if ord == math.inf:
                xx, xxd = x[2:], xd[2:]  # no empty tensors: the CPU raises for those
            else:
                xx, xxd = x, xd
            got = torch._foreach_norm(xxd, ord, dtype=out_dtype)
            want = torch._foreach_norm(xx, ord, dtype=out_dtype)
            check_lists(got, want, torch.float32 if dtype == torch.float32 else dtype)
    check_lists(torch._foreach_max(xd[2:]), torch._foreach_max(x[2:]), dtype)
    with pytest.raises(RuntimeError):
        torch._foreach_max(xd)  # an empty tensor, as on the CPU


def test_empty_and_mixed_lists():
    for f in (lambda l: torch._foreach_add(l, 1.0), lambda l: torch._foreach_norm(l)):
        with pytest.raises(RuntimeError, match="at least one tensor"):
            f([])
    with pytest.raises(RuntimeError, match="at least one tensor"):
        torch._foreach_add_([], [])
    mixed = [torch.randn(4), torch.randn(3, dtype=torch.float64), torch.randn(2).bfloat16()]
    md = to_dev(mixed)
    check_lists(torch._foreach_mul(md, 3.0), torch._foreach_mul(mixed, 3.0), torch.bfloat16)
    check_lists(torch._foreach_norm(md), torch._foreach_norm(mixed), torch.bfloat16)
    # non-dense views take the per-tensor path
    base = torch.randn(8, 10)
    views = [base[:, ::2], base[1:3]]
    vd_base = base.to(DEV)
    vd = [vd_base[:, ::2], vd_base[1:3]]
    torch._foreach_mul_(views, 2.0)
    torch._foreach_mul_(vd, 2.0)
    torch.testing.assert_close(vd_base.cpu(), base)
    # zero-size tensors only
    z = [torch.empty(0, device=DEV), torch.empty(0, 3, device=DEV)]
    torch._foreach_add_(z, 1.0)
    assert [t.norm().item() for t in torch._foreach_norm(z)] == [0.0, 0.0]


# ---------------------------------------------------------------- fused ops

def fused_state(dtype, seed, n_extra=0):
    params = make_list(dtype, seed, transposed=False)[2:]
    grads = make_list(dtype, seed + 1, transposed=False)[2:]
    m = [torch.randn_like(p.double()).to(dtype) * 0.1 for p in params]
    v = [torch.rand_like(p.double()).to(dtype) * 0.01 for p in params]
    vmax = [t.clone() + 0.001 for t in v]
    steps = [torch.tensor(3.0) for _ in params]
    return [params, grads, m, v, vmax, steps]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("name", ["_fused_adam_", "_fused_adamw_"])
def test_fused_adam_direct(name, dtype):
    f = getattr(torch, name)
    for amsgrad, maximize, wd, lr_tensor, scaled in [
        (False, False, 0.0, None, False),
        (True, True, 0.1, "cpu", True),
        (False, False, 0.01, "dev", True),
    ]:
        cpu = fused_state(dtype, 3)
        dev = [to_dev(l) for l in cpu]
        kw = dict(beta1=0.9, beta2=0.99, weight_decay=wd, eps=1e-8, amsgrad=amsgrad,
                  maximize=maximize)
        lr_c = torch.tensor(0.01, dtype=torch.float64) if lr_tensor else 0.01
        lr_d = lr_c.to(DEV) if lr_tensor == "dev" else lr_c
        gs = torch.tensor(2.0) if scaled else None
        fi = torch.tensor(0.0) if scaled else None
        mx_c = cpu[4] if amsgrad else []
        mx_d = dev[4] if amsgrad else []
        f(cpu[0], cpu[1], cpu[2], cpu[3], mx_c, cpu[5], lr=lr_c, grad_scale=gs, found_inf=fi, **kw)
        f(dev[0], dev[1], dev[2], dev[3], mx_d, dev[5], lr=lr_d,
          grad_scale=gs.to(DEV) if scaled else None, found_inf=fi.to(DEV) if scaled else None, **kw)
        for k in range(5):
            check_lists(dev[k], cpu[k], dtype)
    # found_inf == 1: nothing moves
    dev = [to_dev(l) for l in fused_state(dtype, 4)]
    before = [[t.clone() for t in l] for l in dev]
    f(dev[0], dev[1], dev[2], dev[3], [], dev[5], lr=0.1, beta1=0.9, beta2=0.99, weight_decay=0.0,
      eps=1e-8, amsgrad=False, maximize=False, grad_scale=torch.tensor(2.0, device=DEV),
      found_inf=torch.tensor(1.0, device=DEV))
    for l, b in zip(dev, before):
        for t, u in zip(l, b):
            assert torch.equal(t, u)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_fused_sgd_adagrad_direct(dtype):
    for nesterov, first, momentum, lr_dev in [(False, True, 0.9, False), (True, False, 0.9, True),
                                              (False, False, 0.0, False)]:
        cpu = fused_state(dtype, 5)
        dev = [to_dev(l) for l in cpu]
        bufs_c = cpu[2] if momentum else []
        bufs_d = dev[2] if momentum else []
        kw = dict(weight_decay=0.01, momentum=momentum, dampening=0.1, nesterov=nesterov,
                  maximize=False, is_first_step=first)
        torch._fused_sgd_(cpu[0], cpu[1], bufs_c, lr=0.1, **kw)
        lr = torch.tensor(0.1, dtype=torch.float64, device=DEV) if lr_dev else 0.1
        torch._fused_sgd_(dev[0], dev[1], bufs_d, lr=lr, **kw)
        check_lists(dev[0], cpu[0], dtype)
        check_lists(dev[2], cpu[2], dtype)
    cpu = fused_state(dtype, 6)
    dev = [to_dev(l) for l in cpu]
    kw = dict(lr=0.1, lr_decay=0.01, weight_decay=0.1, eps=1e-10, maximize=True)
    torch._fused_adagrad_(cpu[0], cpu[1], cpu[3], cpu[5], **kw)
    torch._fused_adagrad_(dev[0], dev[1], dev[3], dev[5], **kw)
    check_lists(dev[0], cpu[0], dtype)
    check_lists(dev[3], cpu[3], dtype)


def test_fused_steps_bitwise_equal_to_cpu():
    """With FMA on both sides (torch's AVX2/AVX-512 kernels, our AVX2 rows),
    float32 fused steps agree with the CPU's bit for bit (sizes a multiple
    of 16: ATen's scalar tail loop rounds differently)."""
    exact = (torch.backends.cpu.get_cpu_capability() in ("AVX2", "AVX512")
             and os.environ.get("TORCHNEURON_ISA", "") != "portable")
    check = torch.equal if exact else (lambda a, b: torch.allclose(a, b, rtol=1e-5, atol=1e-6))
    g = torch.Generator().manual_seed(9)
    n = 4096 * 17

    def state():
        p, gr, m = (torch.randn(n, generator=g) for _ in range(3))
        v = torch.rand(n, generator=g) * 0.01
        return [[p], [gr], [m * 0.1], [v], [v + 1e-3], [torch.tensor(3.0)]]

    # without amsgrad, a two-pass loop per (weight decay kind, lerp end)
    for name, ams, wd, beta1 in (("_fused_adam_", True, 0.1, 0.9), ("_fused_adamw_", False, 0.1, 0.9),
                                 ("_fused_adam_", False, 0.1, 0.9), ("_fused_adam_", False, 0.0, 0.9),
                                 ("_fused_adamw_", False, 0.1, 0.3)):
        kw = dict(lr=0.01, beta1=beta1, beta2=0.99, weight_decay=wd, eps=1e-8, maximize=False)
        cpu = state()
        dev = [to_dev(l) for l in cpu]
        mx = (lambda s: s[4]) if ams else (lambda s: [])
        getattr(torch, name)(cpu[0], cpu[1], cpu[2], cpu[3], mx(cpu), cpu[5], amsgrad=ams, **kw)
        getattr(torch, name)(dev[0], dev[1], dev[2], dev[3], mx(dev), dev[5], amsgrad=ams, **kw)
        for k in range(5):
            assert check(dev[k][0].cpu(), cpu[k][0]), (name, ams, wd, beta1, k)
    # SGD with momentum after the first step has a one-pass loop per
    # (weight decay, nesterov): each of the four against the CPU
    for wd, nesterov in ((0.01, True), (0.0, True), (0.01, False), (0.0, False)):
        cpu = state()
        dev = [to_dev(l) for l in cpu]
        sgd = dict(weight_decay=wd, momentum=0.9, lr=0.1, dampening=0.1, nesterov=nesterov,
                   maximize=False, is_first_step=False)
        torch._fused_sgd_(cpu[0], cpu[1], cpu[2], **sgd)
        torch._fused_sgd_(dev[0], dev[1], dev[2], **sgd)
        for k in range(3):
            assert check(dev[k][0].cpu(), cpu[k][0]), (wd, nesterov, k)
    ada = dict(lr=0.1, lr_decay=0.01, weight_decay=0.1, eps=1e-10, maximize=False)
    torch._fused_adagrad_(cpu[0], cpu[1], cpu[3], cpu[5], **ada)
    torch._fused_adagrad_(dev[0], dev[1], dev[3], dev[5], **ada)
    for k in range(4):
        assert check(dev[k][0].cpu(), cpu[k][0]), k


# ---------------------------------------------------------------- optimizers

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(16, 32)
        self.b = nn.Linear(32, 4)
        self.scale = nn.Parameter(torch.ones(4))
        self.empty = nn.Parameter(torch.zeros(0))

    def forward(self, x):
        return self.b(torch.relu(self.a(x))) * self.scale + self.empty.sum()


def run_steps(model, make_opt, device, steps=4, scaler=None, inject_inf_at=None):
    torch.manual_seed(0)
    xs = [torch.randn(8, 16) for _ in range(steps)]
    ys = [torch.randn(8, 4) for _ in range(steps)]
    model = model.to(device)
    opt = make_opt(model.parameters())
    scales = []
    for i, (x, y) in enumerate(zip(xs, ys)):
        opt.zero_grad()
        loss = ((model(x.to(device)) - y.to(device)) ** 2).mean()
        if scaler is None:
            loss.backward()
            opt.step()
        else:
            scaler.scale(loss).backward()
            if i == inject_inf_at:
                with torch.no_grad():
                    model.a.weight.grad[0, 0] = float("inf")
            scaler.step(opt)
            scaler.update()
            scales.append(scaler.get_scale())
    return model, scales


OPTIMIZERS = [
    ("sgd", lambda p, **k: torch.optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True,
                                          weight_decay=1e-2, **k)),
    ("sgd_max", lambda p, **k: torch.optim.SGD(p, lr=0.05, momentum=0.5, dampening=0.1,
                                              maximize=True, **k)),
    ("sgd_plain", lambda p, **k: torch.optim.SGD(p, lr=0.05, **k)),
    ("adam", lambda p, **k: torch.optim.Adam(p, lr=1e-2, weight_decay=1e-2, **k)),
    ("adam_ams", lambda p, **k: torch.optim.Adam(p, lr=1e-2, amsgrad=True, maximize=True, **k)),
    ("adamw", lambda p, **k: torch.optim.AdamW(p, lr=1e-2, **k)),
    ("adamw_ams", lambda p, **k: torch.optim.AdamW(p, lr=1e-2, amsgrad=True, weight_decay=0.1,
                                                  **k)),
    ("adagrad", lambda p, **k: torch.optim.Adagrad(p, lr=0.1, lr_decay=1e-3, weight_decay=1e-2,
                                                  **k)),
    ("rmsprop", lambda p, **k: torch.optim.RMSprop(p, lr=1e-2, momentum=0.9, centered=True,
                                                  weight_decay=1e-2, **k)),
]
FUSED = {"sgd", "sgd_max", "sgd_plain", "adam", "adam_ams", "adamw", "adamw_ams", "adagrad"}


def compare_models(got, want, **kw):
    for (name, p), q in zip(got.named_parameters(), want.parameters()):
        torch.testing.assert_close(p.detach().cpu(), q.detach(), msg=name, **kw)


CASES = [(n, m, mode) for n, m in OPTIMIZERS for mode in ("foreach", "fused")
         if mode == "foreach" or n in FUSED]  # RMSprop has no fused variant


@pytest.mark.parametrize("name,make,mode", CASES, ids=[f"{c[0]}-{c[2]}" for c in CASES])
def test_optimizer_matches_cpu(name, make, mode):
    kw = {"foreach": True} if mode == "foreach" else {"fused": True}
    torch.manual_seed(1)
    base = Net()
    got, _ = run_steps(copy.deepcopy(base), lambda p: make(p, **kw), DEV)
    want, _ = run_steps(copy.deepcopy(base), lambda p: make(p, **kw), "cpu")
    compare_models(got, want, rtol=1e-5, atol=1e-6)


def test_fused_adamw_bfloat16_matches_cpu():
    torch.manual_seed(2)
    base = Net().bfloat16()
    make = lambda p: torch.optim.AdamW(p, lr=1e-2, fused=True)  # noqa: E731

    def run(device):
        m = copy.deepcopy(base).to(device)
        opt = make(m.parameters())
        for p in m.parameters():
            g = (torch.arange(p.numel(), dtype=torch.float32).reshape(p.shape) / 7).sin()
            p.grad = g.bfloat16().to(device)
        for _ in range(3):
            opt.step()
        return m

    compare_models(run(DEV), run("cpu"), rtol=2e-2, atol=2e-2)


# ---------------------------------------------------------------- clipping, AMP

@pytest.mark.parametrize("norm_type", [2.0, math.inf, 1.0])
def test_clip_grad_norm(norm_type):
    torch.manual_seed(3)
    params = [torch.randn(5, 7, requires_grad=True), torch.randn(300, requires_grad=True),
              torch.randn(0, requires_grad=True)]
    for p in params:
        p.grad = torch.randn_like(p) * 3
    dev = [p.detach().to(DEV).requires_grad_() for p in params]
    for p, q in zip(dev, params):
        p.grad = q.grad.to(DEV)
    if norm_type == math.inf:  # the CPU raises for the empty grad's max
        params, dev = params[:2], dev[:2]
    n_c = torch.nn.utils.clip_grad_norm_(params, 1.0, norm_type=norm_type, foreach=True)
    n_d = torch.nn.utils.clip_grad_norm_(dev, 1.0, norm_type=norm_type, foreach=True)
    torch.testing.assert_close(n_d.cpu(), n_c)
    check_lists([p.grad for p in dev], [p.grad for p in params], torch.float32)
    torch.nn.utils.clip_grad_value_(params, 0.1, foreach=True)
    torch.nn.utils.clip_grad_value_(dev, 0.1, foreach=True)
    check_lists([p.grad for p in dev], [p.grad for p in params], torch.float32)


def test_amp_ops_direct():
    g = [torch.randn(10), torch.randn(3, 4).bfloat16(), torch.randn(70000)]
    gd = to_dev(g)
    for inject in (False, True):
        if inject:
            g[2][12345] = float("nan")
            gd[2][12345] = float("nan")
        found_c, found_d = torch.zeros(()), torch.zeros((), device=DEV)
        inv_c, inv_d = torch.full((), 0.25), torch.full((), 0.25, device=DEV)
        torch._amp_foreach_non_finite_check_and_unscale_(g, found_c, inv_c)
        torch._amp_foreach_non_finite_check_and_unscale_(gd, found_d, inv_d)
        assert found_d.item() == found_c.item() == float(inject)
        check_lists(gd, g, torch.bfloat16)
    for found in (0.0, 1.0, 0.0, 0.0):
        for dev in ("cpu", DEV):
            pass
        s_c, t_c = torch.full((), 1024.0), torch.zeros((), dtype=torch.int32)
        s_d, t_d = s_c.to(DEV), t_c.to(DEV)
        f_c = torch.full((), found)
        torch._amp_update_scale_(s_c, t_c, f_c, 2.0, 0.5, 1)
        torch._amp_update_scale_(s_d, t_d, f_c.to(DEV), 2.0, 0.5, 1)
        assert s_d.item() == s_c.item() and t_d.item() == t_c.item()


@pytest.mark.parametrize("fused", [False, True])
def test_grad_scaler_skips_inf_step(fused):
    torch.manual_seed(4)
    base = Net()
    make = lambda p: torch.optim.Adam(p, lr=1e-2, **({"fused": True} if fused else {"foreach": True}))  # noqa: E731
    results = {}
    for device in ("cpu", DEV):
        scaler = torch.amp.GradScaler(device, init_scale=2.0**10, growth_interval=2)
        results[device] = run_steps(copy.deepcopy(base), make, device, steps=5, scaler=scaler,
                                    inject_inf_at=2)
    (got, s_got), (want, s_want) = results[DEV], results["cpu"]
    assert s_got == s_want
    assert s_got[2] == s_got[1] / 2  # the injected inf halved the scale
    compare_models(got, want, rtol=1e-5, atol=1e-6)
