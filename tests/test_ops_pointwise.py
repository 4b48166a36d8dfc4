"""The pointwise ops (ops_pointwise.cpp, NK_KERNEL_POINTWISE) against torch
on the CPU: every op over the native dtypes, mixed dtypes and Python
scalars, broadcast / transposed / expanded / empty / 0-dim operands,
in-place and out=, integer division by zero, and autograd of a few.  The
whole file runs with the fallback in "error" mode, so each result proves
the op is native."""
import operator

import pytest
import torch

from conftest import assert_same
from torch_neuronx._fallback import fallback_mode, fallback_stats, reset_fallback_stats

DEV = "neuron"
FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INTS = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]
ALL = FLOATS + INTS + [torch.bool]


@pytest.fixture(autouse=True)
def _native(native):
    yield


def make(shape, dtype, low=-20, high=20, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype.is_floating_point:
        # quarters: quotients and remainders stay exact in every float dtype
        return (torch.randint(4 * low, 4 * high, shape, generator=g) / 4).to(dtype)
    if dtype == torch.uint8:
        low, high = max(low, 0), max(high, max(low, 0) + 3)
    return torch.randint(low, high, shape, generator=g).to(dtype)


def to_dev(x):
    return x.to(DEV) if isinstance(x, torch.Tensor) else x


def compare(fn, *args, **kwargs):
    """fn on the CPU and on neuron copies: the same result, or both raise."""
    try:
        expected = fn(*args, **kwargs)
    except (RuntimeError, TypeError, NotImplementedError) as e:
        with pytest.raises(type(e)):
            actual = fn(*[to_dev(a) for a in args], **{k: to_dev(v) for k, v in kwargs.items()})
            if isinstance(actual, torch.Tensor):
                actual.cpu()
        return
    actual = fn(*[to_dev(a) for a in args], **{k: to_dev(v) for k, v in kwargs.items()})
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert_same(actual, expected)


BINARY = {
    "pow": torch.pow,
    "remainder": torch.remainder,
    "fmod": torch.fmod,
    "div_trunc": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    "div_floor": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "div_none": lambda a, b: torch.div(a, b, rounding_mode=None),
    "floor_divide": torch.floor_divide,
    "maximum": torch.maximum,
    "minimum": torch.minimum,
    "fmax": torch.fmax,
    "fmin": torch.fmin,
    "atan2": torch.atan2,
    "hypot": torch.hypot,
    "copysign": torch.copysign,
    "xlogy": torch.xlogy,
    "nextafter": torch.nextafter,
    "xlog1py": torch.special.xlog1py,
    "logaddexp": torch.logaddexp,
    "logaddexp2": torch.logaddexp2,
    "heaviside": torch.heaviside,
    "gcd": torch.gcd,
    "lcm": torch.lcm,
    "eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge,
    "logical_and": torch.logical_and,
    "logical_or": torch.logical_or,
    "logical_xor": torch.logical_xor,
    "bitwise_and": torch.bitwise_and,
    "bitwise_or": torch.bitwise_or,
    "bitwise_xor": torch.bitwise_xor,
    "lshift": torch.bitwise_left_shift,
    "rshift": torch.bitwise_right_shift,
    "__lshift__": operator.lshift,
    "__rshift__": operator.rshift,
}
DIVISIONS = {"remainder", "fmod", "div_trunc", "div_floor", "floor_divide"}
SHIFTS = {"lshift", "rshift", "__lshift__", "__rshift__"}


def operands(name, dtype, shape_a=(5, 7), shape_b=(5, 7)):
    a = make(shape_a, dtype, seed=1)
    if name in SHIFTS or name == "pow":
        b = make(shape_b, dtype, 0, 6, seed=2)
    else:
        b = make(shape_b, dtype, seed=2)
    if name in DIVISIONS and not dtype.is_floating_point and dtype != torch.bool:
        b = torch.where(b == 0, torch.ones_like(b), b)
    if name in ("xlogy", "xlog1py", "pow", "heaviside") and dtype.is_floating_point:
        a[0, 0], b[0, 1] = 0, float("nan")
    return a, b


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("name", list(BINARY))
def test_binary_same_dtype(name, dtype):
    a, b = operands(name, dtype)
    compare(BINARY[name], a, b)


@pytest.mark.parametrize("name", list(BINARY))
def test_binary_layouts_scalars_and_promotion(name):
    fn = BINARY[name]
    a, b = operands(name, torch.int32)
    fa, fb = operands(name, torch.float32)
    compare(fn, a, fb)                               # int32 x float32
    compare(fn, a.to(torch.uint8).abs(), b.to(torch.int8).abs())  # uint8 x int8 -> int16
    compare(fn, fa.t(), fb.t())                      # transposed
    compare(fn, fa[:, :1], fb[0])                    # (5, 1) x (7,) broadcast
    compare(fn, fa[:1].expand(5, 7), fb)             # expanded, stride 0
    compare(fn, fa[::2, 1::3], fb[::2, ::3])         # strided views
    compare(fn, fa[:0], fb[:0])                      # empty
    compare(fn, fa[0, 0], fb[1, 1])                  # 0-dim
    compare(fn, a, 3)                                # Python int
    compare(fn, fa, 2.5 if name not in SHIFTS else 2)  # Python float
    compare(fn, fa.to(torch.float16), 1.5)           # a float16 tensor keeps its dtype
    compare(fn, fa, torch.tensor(2.0))               # 0-dim CPU tensor as a scalar
    compare(fn, a.to(torch.int8), 3)                 # wrapped scalar in int8


@pytest.mark.parametrize("name", ["remainder", "fmod", "bitwise_and", "pow", "__lshift__", "atan2"])
def test_scalar_first_operand(name):
    fn = BINARY[name]
    b = operands(name, torch.int64)[1]
    compare(fn, 7, b)
    compare(fn, 2.5 if name != "__lshift__" else 2, operands(name, torch.float32)[1])


INPLACE = {
    "pow": "pow_", "remainder": "remainder_", "fmod": "fmod_", "atan2": "atan2_",
    "hypot": "hypot_", "copysign": "copysign_", "gcd": "gcd_", "heaviside": "heaviside_", "xlogy": "xlogy_", "nextafter": "nextafter_",
    "eq": "eq_", "lt": "lt_", "ge": "ge_", "logical_and": "logical_and_",
    "logical_xor": "logical_xor_", "bitwise_or": "bitwise_or_", "lshift": "bitwise_left_shift_",
    "__rshift__": "__irshift__", "floor_divide": "floor_divide_",
}


@pytest.mark.parametrize("name", list(INPLACE))
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64], ids=str)
def test_inplace(name, dtype):
    a, b = operands(name, dtype)
    method = INPLACE[name]

    def run(x, y):
        x = x.clone()
        r = getattr(x, method)(y)
        assert r is x
        return x
    compare(run, a, b)
    compare(run, a, b[0])         # broadcast other
    compare(run, a, 2)            # scalar other
    compare(run, a[:, :3], b[:, :1])  # into a view


@pytest.mark.parametrize("name", ["pow", "remainder", "maximum", "atan2", "lt", "logical_or",
                                  "bitwise_xor", "div_floor", "floor_divide", "copysign"])
def test_out(name):
    fn = BINARY[name]
    a, b = operands(name, torch.int32)

    def run(x, y, dtype):
        out = torch.empty(0, dtype=dtype, device=x.device)
        r = fn(x, y, out=out) if "div_" not in name else torch.div(
            x, y, rounding_mode=name[4:], out=out)
        assert r is out
        return out
    for dtype in (torch.int32, torch.int64, torch.float64, torch.bool):
        compare(run, a, b, dtype)
    # out with the wrong size is resized; a strided out is written through
    out = torch.zeros(7, 5, device=DEV).t()
    r = torch.maximum(a.float().to(DEV), b.float().to(DEV), out=out)
    assert r is out and not out.is_contiguous()
    assert_same(out, torch.maximum(a.float(), b.float()))


def test_integer_division_by_zero_raises_like_cpu():
    a = torch.tensor([5, -7, 9], dtype=torch.int32)
    b = torch.tensor([2, 0, 3], dtype=torch.int32)
    for fn in (torch.remainder, torch.fmod, torch.floor_divide,
               lambda x, y: torch.div(x, y, rounding_mode="trunc")):
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            fn(a, b)
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            fn(a.to(DEV), b.to(DEV)).cpu()
    # the device goes on working afterwards
    assert_same(torch.remainder(a.to(DEV), 2), torch.remainder(a, 2))
    # float division by zero is IEEE, as on the CPU
    fa, fb = a.float(), b.float()
    compare(torch.remainder, fa, fb)
    compare(lambda x, y: torch.div(x, y, rounding_mode="floor"), fa, fb)


def test_integer_edge_cases():
    big = torch.tensor([torch.iinfo(torch.int64).min, 7, -7], dtype=torch.int64)
    m1 = torch.tensor([-1, -1, 2], dtype=torch.int64)
    # INT64_MIN / -1 wraps on the device (the CPU's answer is undefined)
    out = torch.div(big.to(DEV), m1.to(DEV), rounding_mode="trunc").cpu()
    assert out.tolist() == [torch.iinfo(torch.int64).min, -7, -3]
    assert torch.remainder(big.to(DEV), m1.to(DEV)).cpu().tolist() == [0, 0, 1]
    # shifts by >= the width and by negative amounts, every integer dtype
    for dtype in INTS:
        x = make((40,), dtype, -100, 100, seed=3)
        s = torch.arange(40, dtype=torch.int64).remainder(20).to(dtype) - (0 if dtype == torch.uint8 else 3)
        compare(torch.bitwise_left_shift, x, s)
        compare(torch.bitwise_right_shift, x, s)
    # integer pow with negative exponents (powi), and overflow wrapping
    base = torch.tensor([1, -1, -1, 2, 0, 3, 7], dtype=torch.int64)
    exp = torch.tensor([-5, -3, -4, -1, 3, 40, 25], dtype=torch.int64)
    compare(torch.pow, base, exp)
    compare(torch.pow, base.to(torch.int8), exp.to(torch.int8))
    with pytest.raises(RuntimeError, match="negative integer powers"):
        torch.pow(base.to(DEV), -2)


def test_pow_scalar_exponents():
    x = make((6, 5), torch.float32).abs() + 0.25
    for dtype in FLOATS:
        for e in (0, 1, 2, 3, -2, 0.5, -0.5, -1, 1.7, -3):
            compare(torch.pow, x.to(dtype), e)
    for dtype in INTS:
        for e in (0, 1, 2, 3, 5, 0.5, -1.5):
            compare(torch.pow, make((6, 5), dtype, 0, 6), e)
    compare(torch.pow, 2, make((6, 5), torch.int64, 0, 10))      # pow(Scalar, Tensor)
    compare(torch.pow, 1.5, make((6, 5), torch.float16, -3, 3))
    compare(torch.pow, 1, make((4,), torch.float32))                # base 1: fill

    def out_variant(a):
        out = torch.empty(3, dtype=torch.float64, device=a.device)
        return torch.pow(2.0, a, out=out)
    compare(out_variant, make((3,), torch.float64))
    compare(lambda a: a.clone().pow_(2), x)


def test_nextafter_steps():
    for dtype in FLOATS:
        a = torch.tensor([0.0, 1.0, -1.0, 1.0, float("inf"), float("nan")], dtype=dtype)
        b = torch.tensor([1.0, 2.0, 0.0, 1.0, 0.0, 1.0], dtype=dtype)
        compare(torch.nextafter, a, b)


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_comparisons_with_scalars_and_nan(dtype):
    a = make((4, 6), dtype)
    if dtype.is_floating_point:
        a[0, :2] = float("nan")
    for op in (torch.eq, torch.ne, torch.lt, torch.le, torch.gt, torch.ge):
        compare(op, a, 3)
        compare(op, a, 2.5)
        compare(op, a, a.flip(0))
        compare(op, a, torch.tensor(1))
    if dtype in (torch.int8, torch.uint8):
        compare(torch.eq, a, 300)   # the scalar is wrapped to the dtype, as on the CPU
        compare(torch.lt, a, -200)


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_where(dtype):
    cond = make((4, 5), torch.bool, seed=7)
    a, b = make((4, 5), dtype, seed=8), make((5,), dtype, seed=9)
    compare(torch.where, cond, a, b)
    compare(lambda c, x, y: x.where(c, y), cond, a, b)
    compare(torch.where, cond, a, 2)
    compare(torch.where, cond, 1.5, a)
    compare(torch.where, cond[:, :1], a.t().contiguous().t(), b)
    compare(torch.where, cond, a, make((4, 5), torch.float64, seed=3))   # promotion
    compare(torch.where, cond[:0], a[:0], b)

    def out_variant(c, x, y):
        out = torch.empty(4, 5, dtype=x.dtype, device=x.device)
        return torch.where(c, x, y, out=out)
    compare(out_variant, cond, a, b)


def test_where_uint8_condition_and_cpu_scalar_condition():
    cond = make((3, 4), torch.uint8, 0, 2)
    a, b = make((3, 4), torch.float32), make((3, 4), torch.float32, seed=4)
    with pytest.warns(UserWarning):
        compare(torch.where, cond, a, b)
    compare(torch.where, torch.tensor(True), a, b)


@pytest.mark.parametrize("dtype", FLOATS + INTS, ids=str)
def test_clamp(dtype):
    x = make((6, 7), dtype)
    if dtype.is_floating_point:
        x[0, 0] = float("nan")
    lo, hi = make((6, 7), dtype, -10, 0, seed=5), make((7,), dtype, 0, 10, seed=6)
    compare(torch.clamp, x, -3, 4)
    compare(torch.clamp, x, min=-3)
    compare(torch.clamp, x, max=4)
    compare(torch.clamp, x, 5, -5)                 # min > max gives max
    compare(torch.clamp, x, -2.5, 3.5)             # float bounds (promote ints)
    compare(torch.clamp, x, lo, hi)
    compare(torch.clamp, x, min=lo)
    compare(torch.clamp, x, max=hi)
    compare(torch.clamp_min, x, -1)
    compare(torch.clamp_max, x, 2)
    compare(torch.clamp_min, x, lo)
    compare(torch.clamp_max, x, hi)
    compare(torch.clip, x.t(), -3, 4)
    compare(lambda t: t.clone().clamp_(-1, 1), x)
    compare(lambda t, a, b: t.clone().clamp_(a, b), x, lo, hi)

    def out_variant(t):
        out = torch.empty(0, dtype=t.dtype, device=t.device)
        return torch.clamp(t, -2, 2, out=out)
    compare(out_variant, x)


def test_clamp_nan_bounds_and_bool():
    x = make((3, 4), torch.float32)
    compare(torch.clamp, x, float("nan"), 1.0)
    compare(torch.clamp, x, x.flip(0).fill_(float("nan")), x)
    compare(torch.clamp, make((3, 4), torch.bool), 0, 1)      # bool promotes to int64


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_lerp_addcmul_addcdiv(dtype):
    a, b, w = make((5, 6), dtype, seed=1), make((5, 6), dtype, seed=2), make((6,), dtype, -1, 2, seed=3) / 4
    compare(torch.lerp, a, b, 0.3)
    compare(torch.lerp, a, b, 0.8)
    compare(torch.lerp, a, b, w)
    compare(torch.lerp, a.t(), b.t(), w[:5])
    compare(lambda x, y: x.clone().lerp_(y, 0.25), a, b)
    c = make((5, 6), dtype, 1, 5, seed=4)
    compare(torch.addcmul, a, b, c, value=0.5)
    compare(torch.addcmul, a, b[0], c, value=-2)
    compare(torch.addcdiv, a, b, c, value=0.5)
    compare(torch.addcdiv, a[0], b, c.t().contiguous().t(), value=3)
    compare(lambda x, y, z: x.clone().addcmul_(y, z), a, b, c)
    compare(lambda x, y, z: x.clone().addcdiv_(y, z, value=2), a, b, c)


def test_integer_addcmul_and_errors_like_cpu():
    a, b, c = (make((4, 5), torch.int64, seed=s) for s in (1, 2, 3))
    compare(torch.addcmul, a, b, c, value=3)
    compare(torch.addcmul, a.to(torch.int8), b.to(torch.int8), c.to(torch.int8), value=2)
    compare(torch.addcdiv, a, b, c)                               # integer addcdiv: error
    compare(torch.lerp, a.float(), b.float(), 0.5)
    compare(torch.lerp, a, b, 0.5)                                # integer lerp: error
    compare(torch.atan2, a, b)                                    # promoted to float
    compare(torch.hypot, a, b)                                    # not defined for ints
    compare(torch.bitwise_and, a.float(), b.float())              # not for floats
    compare(torch.bitwise_left_shift, a.bool(), b.bool())         # not for bool
    compare(torch.remainder, a.bool(), b.bool())


def test_mixed_dtypes_matrix():
    for da in (torch.bool, torch.uint8, torch.int32, torch.float16, torch.bfloat16, torch.float64):
        for db in (torch.int8, torch.int64, torch.float32):
            a, b = make((3, 4), da, seed=1), make((3, 4), db, 1, 9, seed=2)
            for fn in (torch.maximum, torch.remainder, torch.lt, torch.eq, torch.logical_xor,
                       torch.fmin, torch.copysign, torch.pow, torch.floor_divide):
                compare(fn, a, b)


def test_add_sub_mul_div_every_dtype_stays_native():
    for dtype in ALL:
        a, b = make((4, 5), dtype, seed=1), make((4, 5), dtype, 1, 9, seed=2)
        compare(torch.add, a, b)
        compare(torch.mul, a, b)
        compare(torch.div, a, b)           # integer true division gives float
        if dtype != torch.bool:
            compare(torch.sub, a, b, alpha=2)
        compare(torch.true_divide, a, 3)
        compare(torch.rsub, a, b) if dtype != torch.bool else None


def _grads(fn, *inputs):
    leaves = [x.detach().clone().requires_grad_(x.is_floating_point()) for x in inputs]
    out = fn(*leaves)
    out.backward(torch.ones_like(out))
    return out.detach(), [x.grad for x in leaves if x.requires_grad]


AUTOGRAD = {
    "pow_scalar": (lambda a: a.pow(3), 1),
    "pow_tensor": (lambda a, b: a.abs().add(0.5).pow(b), 2),
    "maximum": (torch.maximum, 2),
    "where": (lambda a, b: torch.where(a > b, a, b * 2), 2),
    "clamp": (lambda a: a.clamp(-1, 1.5), 1),
    "clamp_tensor": (lambda a, b: a.clamp(min=b), 2),
    "lerp": (lambda a, b: torch.lerp(a, b, 0.3), 2),
    "lerp_tensor": (lambda a, b, c: torch.lerp(a, b, c), 3),
    "addcdiv": (lambda a, b, c: torch.addcdiv(a, b, c.abs() + 1, value=0.5), 3),
    "addcmul": (lambda a, b, c: torch.addcmul(a, b, c, value=2), 3),
    "atan2": (torch.atan2, 2),
    "remainder": (torch.remainder, 2),
}


# Backward formulas also use ops of other families (abs, neg, reciprocal,
# masked_fill, ...); those may still fall back, ours must not.
OTHER_FAMILIES = {"abs", "neg", "reciprocal", "masked_fill_", "masked_fill", "sign", "log",
                  "sgn", "zeros_like", "ones_like", "fill_", "sum", "expand", "copy_",
                  "isnan", "logical_not", "bitwise_not", "trunc", "floor", "ceil"}


@pytest.mark.parametrize("name", list(AUTOGRAD))
def test_autograd(name):
    fn, n = AUTOGRAD[name]
    inputs = [torch.randn(4, 5, generator=torch.Generator().manual_seed(i), dtype=torch.float64) for i in range(n)]
    out_cpu, grads_cpu = _grads(fn, *inputs)
    with fallback_mode("silent"):
        reset_fallback_stats()
        out_dev, grads_dev = _grads(fn, *[x.to(DEV) for x in inputs])
        fell_back = {op.split("::")[1].split(".")[0] for op in fallback_stats()}
    assert fell_back <= OTHER_FAMILIES, fell_back
    assert_same(out_dev, out_cpu)
    assert len(grads_dev) == len(grads_cpu)
    for g_dev, g_cpu in zip(grads_dev, grads_cpu):
        assert_same(g_dev, g_cpu)


def test_composites_built_on_these_ops_are_native():
    a, b = make((4, 5), torch.float32, seed=1), make((4, 5), torch.float32, seed=2)
    compare(torch.max, a, b)                      # max.other -> maximum
    compare(torch.min, a, b)
    compare(torch.square, a)
    compare(torch.float_power, a.abs(), 2)
    compare(torch.clip, a, -1, 1)
    compare(torch.true_divide, a, b)
    compare(torch.greater_equal, a, b)
    compare(lambda x, y: (x > 0) & (y < 0) | (x == y), a, b)
    compare(lambda x: x % 3, make((4, 5), torch.int64))
    compare(lambda x: 2 ** x, make((4, 5), torch.int64, 0, 8))
    compare(lambda x: x // 2.5, a)


def test_dtypes_the_device_lacks_fall_back_to_the_cpu():
    a = torch.randn(3, 4, dtype=torch.complex64)
    with fallback_mode("silent"):
        reset_fallback_stats()
        assert_same(torch.eq(a.to(DEV), a.to(DEV)), torch.eq(a, a))
        assert_same(torch.where(a.real > 0, a, a * 2).to(DEV), torch.where(a.real > 0, a, a * 2))
        assert_same(torch.where((a.real > 0).to(DEV), a.to(DEV), a.to(DEV)),
                    torch.where(a.real > 0, a, a))
        assert_same(torch.pow(a.to(DEV), 2), torch.pow(a, 2), rtol=1e-5, atol=1e-5)
        stats = fallback_stats()
    assert any("eq" in op for op in stats) and any("where" in op for op in stats), stats
