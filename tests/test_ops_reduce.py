"""Reductions, scans and softmax on neuron (ops_reduce.cpp) against torch's
CPU: every op over dtypes, dim lists (none, negative, several, empty),
keepdim, non-contiguous/transposed/expanded inputs, empty inputs, NaN,
long float32 sums, out= and in-place forms, and autograd.  The ops of this
family run inside fallback_mode("error"), so a silent CPU fallback fails;
composites that also need other families' ops (logsumexp's exp, ...) run in
silent mode and assert that none of this family's ops fell back."""
import math

import pytest
import torch

import torch_neuronx
from torch_neuronx._fallback import fallback_mode, fallback_stats, reset_fallback_stats
from conftest import run_python

FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INTS = [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool]
OURS = ("aminmax", "sum", "mean", "prod", "amax", "amin", "max", "min", "argmax", "argmin", "var", "std",
        "var_mean", "std_mean", "norm", "linalg_vector_norm", "all", "any", "count_nonzero",
        "nansum", "cumsum", "cumprod", "_cummax_helper", "_cummin_helper", "_logcumsumexp",
        "_softmax", "_log_softmax", "_softmax_backward_data", "_log_softmax_backward_data")


def same(actual, expected, **kw):
    assert actual.device.type == "neuron", actual.device
    torch.testing.assert_close(actual.cpu(), expected, equal_nan=True, **kw)


@pytest.fixture(autouse=True)
def native():
    with fallback_mode("error"):
        yield


def make(dtype, shape=(4, 5, 6), low=-3, high=3):
    if dtype == torch.bool:
        return torch.rand(shape) > 0.4
    if dtype.is_floating_point:
        return (torch.rand(shape, dtype=torch.float64) * (high - low) + low).to(dtype)
    lo = 0 if dtype == torch.uint8 else low
    return torch.randint(lo, high + 1, shape, dtype=dtype)


def layouts(cpu):
    """(name, cpu view) of the same values in several layouts; the device
    view is built the same way from the device copy."""
    yield "contiguous", lambda t: t
    yield "transposed", lambda t: t.transpose(0, 2)
    yield "sliced", lambda t: t[:, 1:, ::2]
    yield "expanded", lambda t: t[:, :1].expand(-1, 5, -1)


DIMS = [None, 0, -1, (0, 2), (-1, 1), ()]


def truth(fn, t):
    """fn(t) on the CPU; for 16-bit floats computed in float64 and rounded
    once: ATen's CPU sums some 16-bit layouts in the 16-bit dtype
    (pytorch#83149), so its own result can be far from the truth, while the
    device accumulates in float32."""
    if t.dtype in (torch.float16, torch.bfloat16):
        return fn(t.double()).to(fn(t).dtype)
    return fn(t)


def tol(dtype):
    # 16-bit sums: ATen's CPU accumulates some layouts in the 16-bit dtype
    # (pytorch#83149), the device always in float32 -- both near the truth.
    return {torch.float16: dict(rtol=1e-2, atol=1e-2), torch.bfloat16: dict(rtol=5e-2, atol=5e-2)}.get(
        dtype, {})


@pytest.mark.parametrize("dtype", FLOATS + INTS)
def test_sum_prod(dtype):
    cpu = make(dtype)
    dev = cpu.to("neuron")
    for _, view in layouts(cpu):
        for dim in DIMS:
            for keepdim in (False, True):
                if dim is None:
                    same(view(dev).sum(), truth(torch.sum, view(cpu)), **tol(dtype))
                    continue
                same(view(dev).sum(dim, keepdim=keepdim),
                     truth(lambda t: t.sum(dim, keepdim=keepdim), view(cpu)), **tol(dtype))
    # products of values near 1 (floats) or of -1/1/2 (ints) stay in range
    pcpu = (torch.rand(4, 5, 6, dtype=torch.float64) * 0.5 + 0.75).to(dtype) if dtype.is_floating_point \
        else torch.randint(-1, 2, (4, 5, 6)).clamp(min=0 if dtype in (torch.uint8, torch.bool) else -1).to(dtype)
    pdev = pcpu.to("neuron")
    for _, view in layouts(pcpu):
        same(view(pdev).prod(1), view(pcpu).prod(1), **tol(dtype))
        same(view(pdev).prod(), view(pcpu).prod(), **tol(dtype))
    same(dev.sum(1, dtype=torch.float64), cpu.sum(1, dtype=torch.float64))
    if dtype == torch.int32:
        same(dev.sum(0, dtype=torch.int32), cpu.sum(0, dtype=torch.int32))  # int32 accumulation wraps alike
        big = torch.full((70000,), 2**30, dtype=torch.int32)
        same(big.to("neuron").sum(dtype=torch.int32), big.sum(dtype=torch.int32))


@pytest.mark.parametrize("dtype", FLOATS)
def test_mean_nansum(dtype):
    cpu = make(dtype)
    cpu[1, 2, 3] = float("nan")
    dev = cpu.to("neuron")
    for _, view in layouts(cpu):
        for dim in DIMS:
            d = dim if dim is not None else []
            same(view(dev).mean(d), truth(lambda t: t.mean(d), view(cpu)), **tol(dtype))
            same(view(dev).mean(d, keepdim=True), truth(lambda t: t.mean(d, keepdim=True), view(cpu)),
                 **tol(dtype))
            same(torch.nansum(view(dev), d), truth(lambda t: torch.nansum(t, d), view(cpu)), **tol(dtype))
    same(dev.mean(dtype=torch.float64), cpu.mean(dtype=torch.float64))


@pytest.mark.parametrize("dtype", FLOATS + INTS)
def test_amax_amin_max_min(dtype):
    cpu = make(dtype)
    dev = cpu.to("neuron")
    for _, view in layouts(cpu):
        same(view(dev).max(), view(cpu).max())
        same(view(dev).min(), view(cpu).min())
        for dim in (None, 0, -1):
            for keepdim in (False, True):
                got, want = torch.aminmax(view(dev), dim=dim, keepdim=keepdim), \
                    torch.aminmax(view(cpu), dim=dim, keepdim=keepdim)
                same(got.min, want.min)
                same(got.max, want.max)
        for dim in (0, -1, (0, 2), ()):
            same(view(dev).amax(dim), view(cpu).amax(dim))
            same(view(dev).amin(dim, keepdim=True), view(cpu).amin(dim, keepdim=True))
        for dim in (0, 1, -1):
            for keepdim in (False, True):
                v, i = view(dev).max(dim, keepdim)
                cv, ci = view(cpu).max(dim, keepdim)
                same(v, cv)
                same(i, ci)
                v, i = view(dev).min(dim, keepdim)
                cv, ci = view(cpu).min(dim, keepdim)
                same(v, cv)
                same(i, ci)
                if dtype != torch.bool:
                    same(view(dev).argmax(dim, keepdim), view(cpu).argmax(dim, keepdim))
                    same(view(dev).argmin(dim, keepdim), view(cpu).argmin(dim, keepdim))
        if dtype == torch.bool:  # refused by ATen's meta, as on the CPU
            with pytest.raises(RuntimeError, match="does not support bool"):
                view(dev).argmax()
            continue
        same(view(dev).argmax(), view(cpu).argmax())
        same(view(dev).argmin(), view(cpu).argmin())


def test_first_index_and_nan():
    cpu = torch.tensor([[1.0, 3.0, 3.0, 0.0, 0.0], [2.0, float("nan"), 5.0, float("nan"), 1.0]])
    dev = cpu.to("neuron")
    for op in ("argmax", "argmin"):
        same(getattr(dev, op)(1), getattr(cpu, op)(1))
    for op in ("max", "min"):
        v, i = getattr(dev, op)(1)
        cv, ci = getattr(cpu, op)(1)
        same(v, cv)
        same(i, ci)
        same(getattr(dev, op)(), getattr(cpu, op)())
    same(dev.amax(1), cpu.amax(1))
    same(dev.sum(1), cpu.sum(1))
    same(dev.argmax(), cpu.argmax())


@pytest.mark.parametrize("dtype", FLOATS)
def test_var_std(dtype):
    cpu = make(dtype)
    dev = cpu.to("neuron")
    t = dict(rtol=1e-5, atol=1e-6) if dtype == torch.float32 else tol(dtype)
    for _, view in layouts(cpu):
        for dim in (None, 0, -1, (0, 2)):
            for correction in (0, 1, 2):
                for keepdim in (False, True):
                    same(torch.var(view(dev), dim, correction=correction, keepdim=keepdim),
                         truth(lambda x: torch.var(x, dim, correction=correction, keepdim=keepdim), view(cpu)), **t)
                    same(torch.std(view(dev), dim, correction=correction, keepdim=keepdim),
                         truth(lambda x: torch.std(x, dim, correction=correction, keepdim=keepdim), view(cpu)), **t)
            v, m = torch.var_mean(view(dev), dim)
            cv, cm = torch.var_mean(view(cpu), dim)
            same(v, cv, **t)
            same(m, cm, **t)
            s, m = torch.std_mean(view(dev), dim, correction=0)
            cs, cm = torch.std_mean(view(cpu), dim, correction=0)
            same(s, cs, **t)
            same(m, cm, **t)
    with pytest.warns(UserWarning, match="degrees of freedom"):
        same(torch.var(dev[:, :1], 1), torch.var(cpu[:, :1], 1))


@pytest.mark.parametrize("dtype", FLOATS)
def test_norms(dtype):
    cpu = make(dtype)
    cpu[0, 0, 0] = 0
    dev = cpu.to("neuron")
    t = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else tol(dtype)
    for _, view in layouts(cpu):
        for ord in (0, 1, 2, math.inf, -math.inf, 3, 0.5, -2):
            for dim in (None, 0, -1, (0, 2)):
                same(torch.linalg.vector_norm(view(dev), ord, dim),
                     truth(lambda x: torch.linalg.vector_norm(x, ord, dim), view(cpu)), **t)
        same(view(dev).norm(), view(cpu).norm(), **t)
        same(view(dev).norm(1, dim=(0, 1), keepdim=True), view(cpu).norm(1, dim=(0, 1), keepdim=True), **t)
    if dtype != torch.float64:
        same(torch.linalg.vector_norm(dev, dtype=torch.float64), torch.linalg.vector_norm(cpu, dtype=torch.float64))


@pytest.mark.parametrize("dtype", FLOATS + INTS)
def test_all_any_count_nonzero(dtype):
    cpu = make(dtype, low=-1, high=1)
    dev = cpu.to("neuron")
    for _, view in layouts(cpu):
        for op in (torch.all, torch.any):
            same(op(view(dev)), op(view(cpu)))
            for dim in (0, -1, (0, 2)):
                same(op(view(dev), dim), op(view(cpu), dim))
                same(op(view(dev), dim, keepdim=True), op(view(cpu), dim, keepdim=True))
        for dim in (None, 0, (1, 2), ()):
            same(torch.count_nonzero(view(dev), dim), torch.count_nonzero(view(cpu), dim))


def test_empty_inputs():
    cpu = torch.zeros(3, 0, 4)
    dev = cpu.to("neuron")
    same(dev.sum(), cpu.sum())
    same(dev.sum(1), cpu.sum(1))
    same(dev.sum(0), cpu.sum(0))
    same(dev.prod(1), cpu.prod(1))
    same(dev.mean(1), cpu.mean(1))
    same(dev.all(1), cpu.all(1))
    same(dev.any(1), cpu.any(1))
    same(torch.linalg.vector_norm(dev, 2, 1), torch.linalg.vector_norm(cpu, 2, 1))
    same(torch.count_nonzero(dev, 1), torch.count_nonzero(cpu, 1))
    same(dev.amax(0), cpu.amax(0))
    for fn in (lambda t: t.max(), lambda t: t.amax(1), lambda t: t.max(1), lambda t: t.argmax(),
               lambda t: t.min()):
        with pytest.raises((RuntimeError, IndexError)) as cpu_err:
            fn(cpu)
        with pytest.raises(type(cpu_err.value)) as dev_err:
            fn(dev)
        assert str(dev_err.value).split("\n")[0] == str(cpu_err.value).split("\n")[0]


def test_zero_dim_inputs():
    cpu = torch.tensor(2.5)
    dev = cpu.to("neuron")
    for fn in (torch.sum, torch.mean, torch.prod, torch.amax, torch.max, torch.argmax, torch.all,
               torch.var):  # (vector_norm of one element is abs: another family's op)
        same(fn(dev), fn(cpu))
    same(dev.cumsum(0), cpu.cumsum(0))
    same(torch.softmax(dev, 0), torch.softmax(cpu, 0))
    v, i = dev.max(0)
    same(v, cpu)
    same(i, torch.tensor(0))


def test_long_float32_sum_precision():
    cpu = torch.rand(1_000_003) + 0.1
    dev = cpu.to("neuron")
    exact = cpu.double().sum()
    got = dev.sum().cpu()
    assert abs(got.double() - exact) / exact < 1e-6
    torch.testing.assert_close(got, cpu.sum(), rtol=1e-6, atol=0)
    rows = torch.rand(1000, 1500)
    same(rows.to("neuron").sum(1), rows.sum(1), rtol=1e-6, atol=1e-5)
    same(rows.to("neuron").sum(0), rows.sum(0), rtol=1e-6, atol=1e-5)
    same(rows.to("neuron").mean(), rows.mean(), rtol=1e-6, atol=1e-7)
    half = (torch.rand(200_000) + 0.5).to(torch.bfloat16)
    same(half.to("neuron").sum(), half.sum(), rtol=1e-2, atol=0)


def test_results_do_not_depend_on_thread_count():
    code = """
        import torch, torch_neuronx
        torch.manual_seed(0)
        x = torch.randn(3_000_000).to("neuron")
        m = torch.randn(2000, 700).to("neuron")
        parts = [x.sum(), x.var(), x.norm(), m.sum(0), m.sum(1), x.view(3, -1).amax(1), x.argmax()]
        print([p.cpu().double().sum().item() for p in parts])
    """
    outs = []
    for threads in ("1", "2", "3"):
        r = run_python(code, env={"TORCHNEURON_NUM_THREADS": threads})
        assert r.returncode == 0, r.stderr
        outs.append(r.stdout)
    assert outs[0] == outs[1] == outs[2]


def test_out_variants():
    cpu = make(torch.float32)
    dev = cpu.to("neuron")
    out = torch.empty(0, device="neuron")
    torch.sum(dev, 1, out=out)
    same(out, cpu.sum(1))
    out = torch.empty(0, device="neuron")
    torch.amax(dev, (0, 2), out=out)
    same(out, cpu.amax((0, 2)))
    out = torch.empty(0, device="neuron")
    torch.var(dev, 0, out=out)
    same(out, cpu.var(0))
    v, i = torch.empty(0, device="neuron"), torch.empty(0, dtype=torch.long, device="neuron")
    torch.max(dev, 2, out=(v, i))
    cv, ci = cpu.max(2)
    same(v, cv)
    same(i, ci)
    o = torch.empty(0, device="neuron")
    torch.cumsum(dev, 1, out=o)
    same(o, cpu.cumsum(1))
    torch._softmax(dev, 1, False, out=o)
    same(o, torch._softmax(cpu, 1, False))
    a = dev.clone()
    a.cumsum_(0)
    same(a, cpu.cumsum(0))


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64, torch.int32, torch.uint8, torch.bool])
def test_scans(dtype):
    cpu = make(dtype, (5, 7, 3), low=-2, high=2)
    dev = cpu.to("neuron")
    for _, view in layouts(cpu):
        for dim in (0, 1, -1):
            if dtype != torch.bool:
                same(view(dev).cumsum(dim), view(cpu).cumsum(dim), **tol(dtype))
                same(view(dev).cumprod(dim), view(cpu).cumprod(dim), **tol(dtype))
            for op in (torch.cummax, torch.cummin):
                v, i = op(view(dev), dim)
                cv, ci = op(view(cpu), dim)
                same(v, cv)
                same(i, ci)
            if dtype.is_floating_point:
                same(torch.logcumsumexp(view(dev), dim), torch.logcumsumexp(view(cpu), dim), **tol(dtype))
    same(dev.cumsum(0, dtype=torch.float64), cpu.cumsum(0, dtype=torch.float64))


def test_scan_nan_and_ties():
    cpu = torch.tensor([1.0, 3.0, 3.0, float("nan"), 5.0, -float("inf"), 2.0])
    dev = cpu.to("neuron")
    for op in (torch.cummax, torch.cummin):
        v, i = op(dev, 0)
        cv, ci = op(cpu, 0)
        same(v, cv)
        same(i, ci)
    same(torch.logcumsumexp(dev, 0), torch.logcumsumexp(cpu, 0))
    inf = torch.tensor([-float("inf"), -float("inf"), float("inf"), 1.0])
    same(torch.logcumsumexp(inf.to("neuron"), 0), torch.logcumsumexp(inf, 0))


@pytest.mark.parametrize("dtype", FLOATS)
def test_softmax_forward_backward(dtype):
    cpu = make(dtype, (4, 6, 37), low=-8, high=8)
    dev = cpu.to("neuron")
    t = dict(rtol=1e-5, atol=1e-6) if dtype == torch.float32 else tol(dtype)
    for _, view in layouts(cpu):
        for dim in (0, 1, -1):
            for fn in (torch.softmax, torch.log_softmax):
                same(fn(view(dev), dim), fn(view(cpu), dim), **t)
                y_cpu = fn(view(cpu), dim)
                g_cpu = make(dtype, y_cpu.shape)
                back = torch.ops.aten._softmax_backward_data if fn is torch.softmax else \
                    torch.ops.aten._log_softmax_backward_data
                same(back(g_cpu.to("neuron"), y_cpu.to("neuron"), dim, dtype),
                     back(g_cpu, y_cpu, dim, dtype), **t)
    same(torch.softmax(dev, 1, dtype=torch.float64), torch.softmax(cpu, 1, dtype=torch.float64))


def test_softmax_special_values_and_half_to_float():
    cpu = torch.tensor([[0.0, -float("inf"), 1.0, -float("inf")] * 5, [float("nan")] + [1.0] * 19])
    dev = cpu.to("neuron")
    same(torch.softmax(dev, 1), torch.softmax(cpu, 1))
    same(torch.log_softmax(dev, 1), torch.log_softmax(cpu, 1))
    half = torch.randn(3, 40, dtype=torch.float16)
    got = torch._softmax(half.to("neuron"), 1, True)
    assert got.dtype == torch.float32
    same(got, torch.softmax(half.float(), 1), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("n", [1000, 2048, 32000 + 5])
def test_softmax_vocab_rows(dtype, n):
    # the loss of a language model: (tokens, vocab) logits along the last dim
    # (the vector line; 16-bit rows widened to float32 for it)
    cpu = (torch.randn(12, n) * 3).to(dtype)
    dev = cpu.to("neuron")
    t = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else tol(dtype)
    for fn, back in ((torch.log_softmax, torch.ops.aten._log_softmax_backward_data),
                     (torch.softmax, torch.ops.aten._softmax_backward_data)):
        y = fn(cpu, -1)
        same(fn(dev, -1), y, **t)
        g = torch.randn(12, n).to(dtype)
        same(back(g.to("neuron"), y.to("neuron"), -1, dtype), back(g, y, -1, dtype), **t)


def test_large_softmax_and_sum_match_cpu():
    cpu = torch.randn(2**24 // 1024, 1024) * 4
    dev = cpu.to("neuron")
    same(torch.softmax(dev, -1), torch.softmax(cpu, -1), rtol=1e-5, atol=1e-7)
    same(torch.log_softmax(dev, -1), torch.log_softmax(cpu, -1), rtol=1e-5, atol=1e-5)
    same(dev.sum(), cpu.sum(), rtol=1e-5, atol=1e-2)


def grads(fn, cpu_input):
    cpu = cpu_input.clone().requires_grad_()
    dev = cpu_input.to("neuron").requires_grad_()
    out_cpu, out_dev = fn(cpu), fn(dev)
    g = torch.randn_like(out_cpu)
    out_cpu.backward(g)
    out_dev.backward(g.to("neuron"))
    return out_dev, out_cpu, dev.grad, cpu.grad


AUTOGRAD = {
    "sum": lambda t: t.sum((0, 2)),
    "mean": lambda t: t.mean(1),
    "softmax": lambda t: torch.softmax(t, -1),
    "log_softmax": lambda t: torch.log_softmax(t, 1),
    "logsumexp": lambda t: torch.logsumexp(t, 1),
    "var": lambda t: t.var(1),
    "norm": lambda t: torch.linalg.vector_norm(t, 2, 1),
    "amax": lambda t: t.amax(1),
    "cumsum": lambda t: t.cumsum(1),
}


@pytest.mark.parametrize("name", list(AUTOGRAD))
def test_autograd(name):
    reset_fallback_stats()
    with fallback_mode("silent"):
        out_dev, out_cpu, g_dev, g_cpu = grads(AUTOGRAD[name], torch.randn(3, 5, 4, dtype=torch.float64))
    torch.testing.assert_close(out_dev.cpu(), out_cpu)
    torch.testing.assert_close(g_dev.cpu(), g_cpu)
    fell = [op for op in fallback_stats() if op.split("::")[-1].split(".")[0] in OURS]
    assert not fell, fell


def test_composites_use_native_pieces():
    cpu = make(torch.float32)
    cpu[0, 0, 0] = float("nan")
    dev = cpu.to("neuron")
    reset_fallback_stats()
    with fallback_mode("silent"):
        same(torch.logsumexp(dev, (0, 2)), torch.logsumexp(cpu, (0, 2)))
        same(torch.nanmean(dev, 1), torch.nanmean(cpu, 1))
    fell = [op for op in fallback_stats() if op.split("::")[-1].split(".")[0] in OURS]
    assert not fell, fell


def test_non_native_dtypes_fall_back():
    cpu = torch.randn(4, 5, dtype=torch.complex64)
    with fallback_mode("silent"):
        dev = cpu.to("neuron")
        same(dev.sum(1), cpu.sum(1))
        same(dev.prod(), cpu.prod())
        same(torch.var(dev, 1), torch.var(cpu, 1))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int32, torch.uint8])
def test_trace_matches_cpu(native, dtype):
    x = (torch.arange(20) % 7).reshape(4, 5).to(dtype)
    views = [lambda t: t, lambda t: t.t(), lambda t: t[::2, 1:]]
    for view in views:
        torch.testing.assert_close(torch.trace(view(x.to("neuron"))).cpu(), torch.trace(view(x)))
    with pytest.raises(RuntimeError, match="expected a matrix"):
        torch.trace(torch.ones(3, device="neuron"))
