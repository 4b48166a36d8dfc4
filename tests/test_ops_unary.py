"""The unary math and activation ops (ops_unary.cpp) against torch on the CPU.

Every test runs inside fallback_mode("error"), so a silent CPU fallback
fails it: the ops are proved native.  Covered: every op over the floating
dtypes (and the integral/bool dtypes where ATen takes them), contiguous,
transposed, strided, expanded (stride 0), empty and 0-dim inputs, in-place
and out= (also a wider out dtype), the parameters, the backward ops autograd
calls (directly and through torch.autograd.grad), ATen's errors, and the
CPU fallback of the dtypes the device lacks (complex)."""
import math

import pytest
import torch
import torch.nn.functional as F

import torch_neuronx
from torch_neuronx._fallback import fallback_mode

FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INTS = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]


@pytest.fixture(autouse=True)
def native():
    with fallback_mode("error"):
        yield


def same(actual, expected, **kw):
    assert actual.device.type == "neuron", actual.device
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    torch.testing.assert_close(actual.cpu(), expected, equal_nan=True, **kw)


SPECIAL = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1.0, -1.0, 0.5])


def sample(dtype, lo=-4.0, hi=4.0, shape=(7, 9), special=True):
    g = torch.Generator().manual_seed(0)
    x = torch.rand(shape, generator=g, dtype=torch.float64) * (hi - lo) + lo
    if special:
        x.view(-1)[: SPECIAL.numel()] = SPECIAL.double()
    return x.to(dtype)


# name -> (callable, input range)
FLOAT_OPS = {
    "abs": (torch.abs, None), "neg": (torch.neg, None), "sign": (torch.sign, None),
    "sgn": (torch.sgn, None), "exp": (torch.exp, None), "exp2": (torch.exp2, None),
    "expm1": (torch.expm1, None), "log": (torch.log, (0.01, 8)), "log2": (torch.log2, (0.01, 8)),
    "log10": (torch.log10, (0.01, 8)), "log1p": (torch.log1p, (-0.9, 8)),
    "sqrt": (torch.sqrt, (0, 8)), "rsqrt": (torch.rsqrt, (0.01, 8)),
    "reciprocal": (torch.reciprocal, None), "sin": (torch.sin, None), "cos": (torch.cos, None),
    "tan": (torch.tan, (-1.4, 1.4)), "asin": (torch.asin, (-1, 1)), "acos": (torch.acos, (-1, 1)),
    "atan": (torch.atan, None), "sinh": (torch.sinh, None), "cosh": (torch.cosh, None),
    "tanh": (torch.tanh, None), "asinh": (torch.asinh, None), "acosh": (torch.acosh, (1, 8)),
    "atanh": (torch.atanh, (-0.99, 0.99)), "sigmoid": (torch.sigmoid, None),
    "logit": (torch.logit, (0.01, 0.99)), "erf": (torch.erf, None), "erfc": (torch.erfc, None),
    "erfinv": (torch.erfinv, (-0.99, 0.99)), "lgamma": (torch.lgamma, (0.1, 8)),
    "digamma": (torch.digamma, (0.1, 8)), "floor": (torch.floor, None),
    "ceil": (torch.ceil, None), "round": (torch.round, None), "trunc": (torch.trunc, None),
    "frac": (torch.frac, None), "relu": (torch.relu, None),
    # gelu: ATen's float32 CPU path (oneDNN) gives NaN at +-inf; no specials
    "gelu": (F.gelu, (-6, 6)),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), None), "silu": (F.silu, None),
    "mish": (F.mish, None), "softplus": (F.softplus, None), "elu": (F.elu, None),
    "selu": (F.selu, None), "celu": (lambda x: F.celu(x, alpha=0.7), None),
    "leaky_relu": (F.leaky_relu, None), "hardtanh": (F.hardtanh, None), "relu6": (F.relu6, None),
    "hardsigmoid": (F.hardsigmoid, None), "hardswish": (F.hardswish, None),
    "threshold": (lambda x: F.threshold(x, 0.5, -2.0), None),
    "nan_to_num": (torch.nan_to_num, None), "sinc": (torch.sinc, None),
    "hardshrink": (F.hardshrink, None), "softshrink": (lambda x: F.softshrink(x, 0.7), None),
    "logsigmoid": (F.logsigmoid, (-20, 20)), "tanhshrink": (F.tanhshrink, None),
    "polygamma1": (lambda x: torch.polygamma(1, x), (0.1, 8)),
    "polygamma3": (lambda x: torch.polygamma(3, x), (0.1, 8)),
    "special_expit": (torch.special.expit, None), "special_ndtr": (torch.special.ndtr, None),
}


def tol(dtype, name):
    if dtype == torch.float32 and name in ("lgamma", "digamma", "erfinv", "tan", "polygamma1",
                                           "polygamma3"):
        return {"rtol": 2e-5, "atol": 2e-5}
    return {}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", sorted(FLOAT_OPS))
def test_float_ops(name, dtype):
    fn, rng = FLOAT_OPS[name]
    x = sample(dtype, *(rng or (-4.0, 4.0)), special=rng is None)
    d = x.to("neuron")
    same(fn(d), fn(x), **tol(dtype, name))
    same(fn(d.t()), fn(x.t()), **tol(dtype, name))              # transposed
    same(fn(d[::2, 1::3]), fn(x[::2, 1::3]), **tol(dtype, name))  # strided
    same(fn(d[2:3, 4:5].expand(5, 6)), fn(x[2:3, 4:5].expand(5, 6)), **tol(dtype, name))
    same(fn(d[1, 2]), fn(x[1, 2]), **tol(dtype, name))          # 0-dim
    same(fn(d[:0]), fn(x[:0]))                                   # empty


@pytest.mark.parametrize("dtype", INTS + [torch.bool])
@pytest.mark.parametrize("name", ["abs", "neg", "sign", "sgn", "relu", "bitwise_not", "floor",
                                  "ceil", "round", "trunc", "exp", "sin", "sigmoid", "sqrt",
                                  "hardtanh", "threshold", "nan_to_num", "logical_not", "signbit",
                                  "isnan", "isinf", "isfinite", "isposinf", "isneginf"])
def test_integral_and_bool(name, dtype):
    fn = {"bitwise_not": torch.bitwise_not, "logical_not": torch.logical_not,
          "signbit": torch.signbit, "isnan": torch.isnan, "isinf": torch.isinf,
          "isfinite": torch.isfinite, "isposinf": torch.isposinf,
          "isneginf": torch.isneginf}.get(name) or FLOAT_OPS[name][0]
    if dtype == torch.bool:
        x = torch.tensor([[True, False, True], [False, False, True]])
    else:
        info = torch.iinfo(dtype)
        vals = [info.min, info.min + 1, -5, -1, 0, 1, 3, 100, info.max]
        x = torch.tensor([v for v in vals if info.min <= v <= info.max], dtype=dtype)
    d = x.to("neuron")
    try:
        expected = fn(x)
    except (RuntimeError, NotImplementedError) as e:   # ATen refuses this dtype: so must we
        with pytest.raises(type(e)):
            fn(d)
        return
    same(fn(d), expected)


@pytest.mark.parametrize("name", ["exp", "tanh", "sigmoid", "abs", "neg", "floor", "gelu", "silu",
                                  "relu", "hardswish", "elu", "leaky_relu", "hardtanh",
                                  "nan_to_num", "logit", "round"])
def test_inplace_and_out(name):
    x = (sample(torch.float32, 0.05, 0.95) if name == "logit"
         else sample(torch.float32, special=name != "gelu"))
    d = x.to("neuron")
    fn, _ = FLOAT_OPS[name]
    expected = fn(x)
    # in place, also on a non-contiguous view
    inplace = {"gelu": lambda t: F.gelu(t, inplace=False) if False else t.copy_(F.gelu(t)),
               "silu": lambda t: F.silu(t, inplace=True), "relu": lambda t: F.relu(t, inplace=True),
               "hardswish": lambda t: F.hardswish(t, inplace=True),
               "elu": lambda t: F.elu(t, inplace=True),
               "leaky_relu": lambda t: F.leaky_relu(t, inplace=True),
               "hardtanh": lambda t: F.hardtanh(t, inplace=True)}.get(name)
    inplace = inplace or getattr(torch.Tensor, name + "_")
    y = d.clone()
    inplace(y)
    same(y, expected)
    y = d.clone().t()
    inplace(y)
    same(y, expected.t())
    # out=: resized, non-contiguous, wider dtype (cast on store)
    out_fn = {"gelu": lambda t, out: torch._C._nn.gelu(t, out=out),
              "silu": lambda t, out: torch._C._nn.silu(t, out=out),
              "hardswish": lambda t, out: torch._C._nn.hardswish(t, out=out),
              "elu": lambda t, out: torch._C._nn.elu(t, out=out),
              "leaky_relu": lambda t, out: torch._C._nn.leaky_relu(t, out=out),
              "hardtanh": lambda t, out: torch._C._nn.hardtanh(t, out=out),
              "relu": None}.get(name, lambda t, out: getattr(torch, name)(t, out=out))
    if out_fn is None:
        return
    out = torch.empty(0, device="neuron")
    out_fn(d, out=out)
    same(out, expected)
    out = torch.empty(9, 7, device="neuron").t()
    out_fn(d, out=out)
    same(out, expected)
    if name in ("exp", "tanh", "sigmoid", "logit"):   # unary_float_op: any float out dtype
        out = torch.empty(7, 9, device="neuron", dtype=torch.float64)
        out_fn(d, out=out)
        same(out, out_fn(x, out=torch.empty(7, 9, dtype=torch.float64)))


def test_integer_inputs_promote():
    x = torch.arange(-3, 5, dtype=torch.int32)
    d = x.to("neuron")
    for fn in (torch.exp, torch.sigmoid, torch.sqrt, torch.erfinv, torch.logit, torch.lgamma):
        same(fn(d), fn(x))
    out = torch.empty(8, dtype=torch.float64, device="neuron")
    torch.exp(d, out=out)
    same(out, torch.exp(x, out=torch.empty(8, dtype=torch.float64)))


def test_parameters():
    x = sample(torch.float32)
    d = x.to("neuron")
    same(torch.round(d, decimals=2), torch.round(x, decimals=2))
    same(torch.round(d, decimals=-1), torch.round(x * 10, decimals=-1) / 10 * 10 / 10
         if False else torch.round(x, decimals=-1))
    same(torch.round(d.double(), decimals=3), torch.round(x.double(), decimals=3))
    p = x.sigmoid()
    for eps in (None, 0.0, 0.2, 0.5):
        same(torch.logit(p.to("neuron"), eps=eps), torch.logit(p, eps=eps))
    for args in ({}, {"nan": 1.5}, {"posinf": 9.0, "neginf": -9.0}):
        for dt in FLOATS:
            same(torch.nan_to_num(d.to(dt), **args), torch.nan_to_num(x.to(dt), **args))
    for beta, th in ((1, 20), (2.5, 1.0), (0.5, 3.0)):
        same(F.softplus(d, beta, th), F.softplus(x, beta, th))
    for a, s, i in ((1.0, 1.0, 1.0), (0.3, 2.0, 1.5), (2.0, 0.5, 0.25)):
        same(torch.ops.aten.elu(d, a, s, i), torch.ops.aten.elu(x, a, s, i))
    same(F.leaky_relu(d, 0.3), F.leaky_relu(x, 0.3))
    same(F.hardtanh(d, -0.25, 2.0), F.hardtanh(x, -0.25, 2.0))
    same(F.threshold(d, 1.0, 7.0), F.threshold(x, 1.0, 7.0))
    xi = torch.arange(-6, 6)
    same(F.hardtanh(xi.to("neuron"), -2.7, 3.2), F.hardtanh(xi, -2.7, 3.2))
    same(F.threshold(xi.to("neuron"), 1, 42), F.threshold(xi, 1, 42))


def test_errors_match_aten():
    b = torch.tensor([True, False], device="neuron")
    with pytest.raises(NotImplementedError, match="not implemented for 'Bool'"):
        torch.abs(b)
    with pytest.raises(RuntimeError, match="Negation, the `-` operator, on a bool tensor"):
        torch.neg(b)
    with pytest.raises(RuntimeError, match="Boolean inputs not supported for relu"):
        torch.relu(b)
    with pytest.raises(RuntimeError, match="Bool inputs not supported for hardtanh"):
        F.hardtanh(b)
    with pytest.raises(RuntimeError, match="unsigned type with negative limits"):
        F.hardtanh(torch.arange(4, dtype=torch.uint8, device="neuron"))
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        torch.round(torch.arange(3, device="neuron"), decimals=1)
    with pytest.raises(NotImplementedError, match="not implemented for 'Float'"):
        torch.bitwise_not(torch.ones(2, device="neuron"))
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
        torch.exp(torch.ones(2, device="neuron"), out=torch.empty(2, dtype=torch.long, device="neuron"))
    with pytest.raises(RuntimeError, match="signbit does not support non-boolean outputs"):
        torch.signbit(torch.ones(2, device="neuron"), out=torch.empty(2, device="neuron"))


def test_predicates_out_dtypes():
    x = SPECIAL.to("neuron")
    out = torch.empty(8, device="neuron")
    torch.logical_not(x, out=out)
    same(out, torch.logical_not(SPECIAL, out=torch.empty(8)))
    for dt in FLOATS:
        same(torch.isnan(x.to(dt)), torch.isnan(SPECIAL.to(dt)))
        same(torch.isinf(x.to(dt).t()), torch.isinf(SPECIAL.to(dt).t()))
        same(torch.isfinite(x.to(dt)[::2]), torch.isfinite(SPECIAL.to(dt)[::2]))


BACKWARD = {
    "sigmoid_backward": lambda g, x: torch.ops.aten.sigmoid_backward(g, x.sigmoid()),
    "tanh_backward": lambda g, x: torch.ops.aten.tanh_backward(g, x.tanh()),
    "logit_backward": lambda g, x: torch.ops.aten.logit_backward(g, x.sigmoid()),
    "logit_backward_eps": lambda g, x: torch.ops.aten.logit_backward(g, x.sigmoid(), 0.2),
    "gelu_backward": lambda g, x: torch.ops.aten.gelu_backward(g, x),
    "gelu_backward_tanh": lambda g, x: torch.ops.aten.gelu_backward(g, x, approximate="tanh"),
    "silu_backward": lambda g, x: torch.ops.aten.silu_backward(g, x),
    "mish_backward": lambda g, x: torch.ops.aten.mish_backward(g, x),
    "softplus_backward": lambda g, x: torch.ops.aten.softplus_backward(g, x, 2.0, 3.0),
    "elu_backward": lambda g, x: torch.ops.aten.elu_backward(g, 1.2, 1.1, 0.8, False, x),
    "elu_backward_result": lambda g, x: torch.ops.aten.elu_backward(g, 1.2, 1.1, 0.8, True, x),
    "leaky_relu_backward": lambda g, x: torch.ops.aten.leaky_relu_backward(g, x, 0.2, False),
    "hardtanh_backward": lambda g, x: torch.ops.aten.hardtanh_backward(g, x, -1.0, 2.0),
    "hardsigmoid_backward": lambda g, x: torch.ops.aten.hardsigmoid_backward(g, x),
    "hardswish_backward": lambda g, x: torch.ops.aten.hardswish_backward(g, x),
    "threshold_backward": lambda g, x: torch.ops.aten.threshold_backward(g, x, 0.5),
    "hardshrink_backward": lambda g, x: torch.ops.aten.hardshrink_backward(g, x, 0.5),
    "softshrink_backward": lambda g, x: torch.ops.aten.softshrink_backward(g, x, 0.7),
    "log_sigmoid_backward": lambda g, x: torch.ops.aten.log_sigmoid_backward(
        g, x, torch.ops.aten.log_sigmoid_forward(x)[1]),
}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", sorted(BACKWARD))
def test_backward_ops(name, dtype):
    fn = BACKWARD[name]
    x = sample(dtype, special=False)
    g = sample(dtype, -2, 2, special=False).flip(0)
    same(fn(g.to("neuron"), x.to("neuron")), fn(g, x))
    same(fn(g.to("neuron").t(), x.to("neuron").t()), fn(g.t(), x.t()))
    same(fn(g[:1].to("neuron").expand(7, 9), x.to("neuron")), fn(g[:1].expand(7, 9), x))


AUTOGRAD = {
    "gelu": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"), "silu": F.silu,
    "tanh": torch.tanh, "sigmoid": torch.sigmoid, "elu": F.elu, "selu": F.selu,
    "celu": lambda x: F.celu(x, 0.6), "softplus": F.softplus, "mish": F.mish, "relu": F.relu,
    "leaky_relu": lambda x: F.leaky_relu(x, 0.2), "hardtanh": F.hardtanh, "relu6": F.relu6,
    "hardsigmoid": F.hardsigmoid, "hardswish": F.hardswish, "logit": lambda x: torch.logit(x.sigmoid()),
    "exp": torch.exp, "neg": torch.neg, "abs": torch.abs, "sin": torch.sin,
    "threshold": lambda x: F.threshold(x, 0.1, 3.0), "logsigmoid": F.logsigmoid,
    "hardshrink": F.hardshrink, "softshrink": F.softshrink,
    "lgamma": lambda x: torch.lgamma(x.abs() + 0.5), "digamma": lambda x: torch.digamma(x.abs() + 0.5),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name", sorted(AUTOGRAD))
def test_autograd(name, dtype):
    fn = AUTOGRAD[name]
    x = sample(dtype, special=False)
    g = sample(dtype, -2, 2, special=False)
    xc = x.clone().requires_grad_()
    (expected,) = torch.autograd.grad(fn(xc), xc, g)
    xd = x.to("neuron").requires_grad_()
    (got,) = torch.autograd.grad(fn(xd), xd, g.to("neuron"))
    same(got, expected)


def test_large_rows_take_the_fast_paths():
    x = torch.randn(1 << 17, generator=torch.Generator().manual_seed(3)) * 6
    d = x.to("neuron")
    for fn in (torch.exp, torch.tanh, torch.sigmoid, F.gelu, lambda t: F.gelu(t, approximate="tanh"),
               F.silu, torch.relu, torch.erf, F.softplus):
        same(fn(d), fn(x))
    same(torch.ops.aten.gelu_backward(d, d), torch.ops.aten.gelu_backward(x, x))


def _near(values, count=2048):
    """count consecutive float32 values on each side of each value"""
    out = []
    for v in values:
        u = torch.tensor([v], dtype=torch.float32).view(torch.int32).item()
        out.append(torch.arange(u - count, u + count, dtype=torch.int32).view(torch.float32))
    return torch.cat(out)


@pytest.mark.parametrize("name", ["sigmoid", "silu", "tanh", "gelu_tanh", "mish"])
def test_a_value_does_not_depend_on_its_neighbours(name):
    # Each element's result is a function of that element alone: a NaN
    # beside it, in the same vector wherever the vectors start, changes
    # nothing.  AVX-512 divides these activations with a reciprocal and
    # Newton steps (simd_avx512_f32.h, vdiv_fast), one ulp off the divider
    # in rare cases (1 / b for b just below a power of two), and divides its
    # special lanes exactly: it once re-divided the whole vector, and 15
    # sigmoids of the x below (1 + e^-x just below 4, 512, 65536, 2^23)
    # came out one ulp different beside a NaN.
    fn = {"sigmoid": torch.sigmoid, "silu": F.silu, "tanh": torch.tanh, "mish": F.mish,
          "gelu_tanh": lambda t: F.gelu(t, approximate="tanh")}[name]
    logs = [math.log(b - 1) for b in (3.99999976, 511.999969, 65535.9961, 8388607.5)]
    x = torch.cat([torch.randn(1 << 16, generator=torch.Generator().manual_seed(5)) * 4,
                   _near([s * v for v in logs for s in (-1, 1, -0.5, 0.5)])])
    clean = fn(x.to("neuron")).cpu()
    for start in range(16):  # a NaN in every run of 16 elements, at every phase
        dirty = x.clone()
        dirty[start::16] = float("nan")
        got = fn(dirty.to("neuron")).cpu()
        keep = torch.ones_like(x, dtype=torch.bool)
        keep[start::16] = False
        assert torch.equal(got[keep].view(torch.int32), clean[keep].view(torch.int32)), (name, start)
        assert got[~keep].isnan().all()


def test_complex_falls_back_to_cpu():
    z = torch.randn(4, dtype=torch.complex64)
    torch_neuronx._C.reset_fallback_stats()
    with fallback_mode("silent"):
        same(torch.exp(z.to("neuron")), torch.exp(z))
        same(torch.abs(z.to("neuron")), torch.abs(z))
        same(torch.sgn(z.to("neuron")), torch.sgn(z))
    stats = torch_neuronx._C.fallback_stats()
    assert any("exp" in k for k in stats), stats
