"""The language surface in both dialects: each kernel runs compiled (on
neuron) and simulated, against torch on the CPU."""
import numpy as np
import pytest
import nki_testutil  # noqa: F401  (examples/nki on sys.path)
import torch
import torch.nn.functional as F

from torch_neuronx import nki
import torch_neuronx.nki.isa as nisa
import torch_neuronx.nki.language as nl


def both(kernel, *args, grid=(1,), **kw):
    """(compiled on neuron, simulated) results."""
    dev = [a.to("neuron") if isinstance(a, torch.Tensor) else a for a in args]
    c = kernel[grid](*dev, **kw)
    s = nki.simulate(kernel)[grid](*args, **kw)
    return c, s


def assert_both(kernel, ref, *args, atol=1e-5, rtol=1e-5, **kw):
    c, s = both(kernel, *args, **kw)
    for out in (c, s):
        torch.testing.assert_close(out.cpu(), ref, atol=atol, rtol=rtol)


@nki.jit
def unary_beta1(x, op):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    nl.store(out, getattr(nl, op)(t))
    return out


UNARY = {"exp": torch.exp, "log": torch.log, "tanh": torch.tanh, "sigmoid": torch.sigmoid,
         "relu": torch.relu, "gelu": F.gelu, "silu": F.silu, "rsqrt": torch.rsqrt,
         "sqrt": torch.sqrt, "square": torch.square, "reciprocal": torch.reciprocal,
         "abs": torch.abs, "negative": torch.neg}


@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary(op):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(128, 300, generator=g) * 4
    if op in ("log", "rsqrt", "sqrt"):
        x = x.abs() + 1e-3
    x[0, :6] = torch.tensor([0.0, -0.0, 30.0, -30.0, 1e-5, -1e-5]).abs() \
        if op in ("log", "rsqrt", "sqrt") else torch.tensor([0.0, -0.0, 90.0, -90.0, 1e-5, -1e-5])
    if op in ("log", "rsqrt", "sqrt", "reciprocal"):
        x[0, :2] = 1.0
    assert_both(unary_beta1, UNARY[op](x), x, op, atol=1e-6, rtol=2e-6)


@nki.jit
def binary_beta1(x, y, op):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, getattr(nl, op)(nl.load(x), nl.load(y)))
    return out


@pytest.mark.parametrize("op,ref", [("add", torch.add), ("subtract", torch.sub),
                                    ("multiply", torch.mul), ("divide", torch.div),
                                    ("maximum", torch.maximum), ("minimum", torch.minimum)])
def test_binary(op, ref):
    x, y = torch.randn(100, 64), torch.randn(100, 64)
    assert_both(binary_beta1, ref(x, y), x, y, op)


@nki.jit
def operators_beta1(x, y):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    a, b = nl.load(x), nl.load(y)
    r = (a + b) * 2.0 - a / (b * b + 1.0)
    r = -r + 1 - 0.5 * a
    nl.store(out, r)
    return out


def test_operators():
    x, y = torch.randn(64, 96), torch.randn(64, 96)
    a, b = x, y
    ref = -((a + b) * 2.0 - a / (b * b + 1.0)) + 1 - 0.5 * a
    assert_both(operators_beta1, ref, x, y)


@nki.jit
def reductions(x, op, keepdims):
    P, F_ = x.shape
    out = nl.ndarray((P, 1), dtype=x.dtype, buffer=nl.shared_hbm)
    r = getattr(nl, op)(nl.load(x), axis=1, keepdims=keepdims)
    nl.store(out, r)
    return out


@pytest.mark.parametrize("op", ["sum", "max", "min", "mean"])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reductions(op, keepdims):
    x = torch.randn(128, 777)
    ref = {"sum": x.sum(1), "max": x.amax(1), "min": x.amin(1), "mean": x.mean(1)}[op]
    assert_both(reductions, ref[:, None], x, op, keepdims, atol=1e-4, rtol=1e-5)


@nki.jit
def reduce_3d(x):
    P, A, B = x.shape
    out = nl.ndarray((P, A), dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.sum(nl.load(x), axis=2))
    return out


def test_reduce_3d():
    x = torch.randn(16, 5, 40)
    assert_both(reduce_3d, x.sum(2), x, atol=1e-5)


@nki.jit
def beta2_add(a, b, c):
    """Beta 2: dst= ISA calls, slicing, plain range, results written in place."""
    P, F_ = a.shape
    for i in range(P // 128):
        ta = nl.ndarray((128, F_), dtype=a.dtype, buffer=nl.sbuf)
        tb = nl.ndarray((128, F_), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=ta, src=a[i * 128:(i + 1) * 128, :])
        nisa.dma_copy(dst=tb, src=b[i * 128:(i + 1) * 128, 0:F_])
        tc = nl.ndarray((128, F_), dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=tc, data1=ta, data2=tb, op=nl.add)
        nisa.activation(dst=tc, op=nl.exp, data=tc, scale=0.5)
        nisa.dma_copy(dst=c[i * 128:(i + 1) * 128, :], src=tc)


def test_beta2_inplace_output():
    a, b = torch.randn(256, 80), torch.randn(256, 80)
    c = torch.zeros(256, 80, device="neuron")
    assert beta2_add(a.to("neuron"), b.to("neuron"), c) is None
    torch.testing.assert_close(c.cpu(), torch.exp(0.5 * (a + b)))
    cs = torch.zeros(256, 80)
    nki.simulate(beta2_add)(a, b, cs)
    torch.testing.assert_close(cs, torch.exp(0.5 * (a + b)))


@nki.jit
def isa_beta1(x, bias):
    P, F_ = x.shape
    out = nl.ndarray((P, F_), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    bt = nl.load(bias)
    s = nisa.tensor_scalar(t, np.subtract, 1.0, reverse0=True, op1=np.multiply, operand1=bt)
    a = nisa.activation(np.tanh, s, bias=bt, scale=2.0)
    r = nisa.tensor_reduce(np.add, a, axis=1, keepdims=True)
    nl.store(out, nl.add(a, r))
    return out


def test_isa_beta1():
    x, bias = torch.randn(64, 48), torch.randn(64, 1)
    s = (1.0 - x) * bias
    a = torch.tanh(s * 2.0 + bias)
    ref = a + a.sum(1, keepdim=True)
    assert_both(isa_beta1, ref, x, bias, atol=1e-5, rtol=1e-5)


@nki.jit
def select_iota_transpose(x):
    P, F_ = x.shape
    out = nl.ndarray((F_, P), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    i_p = nl.arange(P)[:, None]
    i_f = nl.arange(F_)[None, :]
    causal = nisa.affine_select(pred=(i_p - i_f >= 0), on_true_tile=t, on_false_value=-5.0)
    idx = nisa.iota(i_p * 0 + i_f, dtype=nl.float32)
    w = nl.where(nl.greater(causal, 0.0), causal, idx.broadcast_to((P, F_)))
    nl.store(out, nl.transpose(w))
    return out


def test_select_iota_transpose():
    x = torch.randn(96, 64)
    causal = torch.where(torch.ones(96, 64).tril().bool(), x, torch.tensor(-5.0))
    idx = torch.arange(64.0).expand(96, 64)
    ref = torch.where(causal > 0, causal, idx).T
    assert_both(select_iota_transpose, ref, x)


@nki.jit
def grid3(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    i, j, k = nl.program_id(0), nl.program_id(1), nl.program_id(2)
    ip, jf = nl.mgrid[0:4, 0:8]
    t = nl.load(x[i, j * 4 + ip, k * 8 + jf])
    nl.store(out[i, j * 4 + ip, k * 8 + jf], t * (i + 1) + nl.num_programs(2))
    return out


def test_grid_3d():
    x = torch.randn(3, 8, 16)
    ref = x * torch.arange(1, 4.0)[:, None, None] + 2
    assert_both(grid3, ref, x, grid=(3, 2, 2))


@nki.jit
def carried_sequential(x):
    """sequential_range with a carried tile and a list of tiles built in a loop."""
    P, F_ = x.shape
    out = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    acc = nl.zeros((128, 64), dtype=nl.float32)
    tiles = []
    for j in nl.sequential_range(F_ // 64):
        t = nl.load(x[0:128, j * 64:(j + 1) * 64])
        tiles.append(t)
        acc = acc * 0.5 + t
    for t in tiles:
        acc = nl.maximum(acc, t)
    nl.store(out, acc)
    return out


def test_sequential_carried():
    x = torch.randn(128, 512)
    acc = torch.zeros(128, 64)
    chunks = x.split(64, 1)
    for t in chunks:
        acc = acc * 0.5 + t
    for t in chunks:
        acc = torch.maximum(acc, t)
    assert_both(carried_sequential, acc, x, atol=1e-5)


@nki.jit
def dtypes_kernel(x):
    out = nl.ndarray(x.shape, dtype=nl.float16, buffer=nl.shared_hbm)
    out_i = nl.ndarray(x.shape, dtype=nl.int32, buffer=nl.shared_hbm)
    t = nl.load(x, dtype=nl.bfloat16)
    nl.store(out, nl.multiply(t, 3.0, dtype=nl.float16))
    nl.store(out_i, nl.copy(t, dtype=nl.int32))
    return out, out_i


def test_dtype_rounding():
    x = torch.randn(32, 100) * 100
    c, s = both(dtypes_kernel, x)
    xb = x.bfloat16().float()
    for out, out_i in (c, s):
        assert out.dtype == torch.float16 and out_i.dtype == torch.int32
        torch.testing.assert_close(out.cpu(), (xb * 3).half(), atol=0, rtol=0)
        torch.testing.assert_close(out_i.cpu(), xb.to(torch.int32), atol=0, rtol=0)


def test_cpu_tensors_run_compiled():
    x = torch.randn(128, 64)
    torch.testing.assert_close(unary_beta1(x, "exp"), torch.exp(x))


@nki.jit
def masked_assign(a):
    """t[...] = op(..., mask=m) writes only where m holds; a shifted
    self-assignment reads the old values."""
    out = nl.ndarray((128, 16), dtype=a.dtype, buffer=nl.shared_hbm)
    ix, iy = nl.mgrid[0:128, 0:16]
    t = nl.full((128, 16), 7.0, dtype=nl.float32)
    x = nl.load(a)
    t[...] = nl.multiply(x, 2.0, mask=(iy < 8))
    s = nl.load(a)
    s[:, 1:16] = nl.copy(s[:, 0:15])
    nl.store(out, t + s)
    return out


def test_masked_assignment():
    a = torch.randn(128, 16)
    t = torch.full((128, 16), 7.0)
    t[:, :8] = a[:, :8] * 2
    s = a.clone()
    s[:, 1:] = a[:, :15]
    assert_both(masked_assign, t + s, a)


@nki.jit
def shifted_copy(a):
    s = nl.load(a)
    nisa.tensor_copy(dst=s[:, 1:16], src=s[:, 0:15])
    nl.store(a, s)


def test_overlapping_copy_reads_old_values():
    a = torch.randn(128, 16)
    ref = a.clone()
    ref[:, 1:] = a[:, :15]
    an = a.to("neuron")
    shifted_copy(an)
    torch.testing.assert_close(an.cpu(), ref)
    asim = a.clone()
    nki.simulate(shifted_copy)(asim)
    torch.testing.assert_close(asim, ref)


@nki.jit
def helper_exp(t):
    return nl.exp(t)


@nki.jit
def calls_helper(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, helper_exp(nl.load(a)))
    return out


def test_kernel_called_from_a_kernel_is_inlined():
    a = torch.randn(64, 32)
    assert_both(calls_helper, a.exp(), a, atol=1e-6, rtol=1e-6)
