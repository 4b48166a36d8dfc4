"""The special functions (kernels/src/elementwise/special.c, ATen's Math.h ported to C)
against torch on the CPU.

Every test runs inside fallback_mode("error"), so a silent CPU fallback fails
it: the ops are proved native.  Covered: every unary special op (i0, i0e, i1,
i1e, ndtri, log_ndtr, erfcx, entr, airy_ai, the Bessel families) and every
binary one (igamma, igammac, zeta, the Chebyshev/Hermite/Laguerre/Legendre
polynomials) over float32/float64 (and float16/bfloat16 where ATen's CPU has a
kernel; elsewhere ATen's "not implemented" error), integer inputs promoted to
float, edge values (0, -0, negative, +-inf, NaN, large), wide ranges,
non-contiguous/expanded/0-dim/empty inputs, out=, in-place, Python-scalar
operands, and signal.windows.kaiser (which needs i0)."""
import pytest
import torch

import torch_neuronx  # noqa: F401
from torch_neuronx._fallback import fallback_mode

S = torch.special
F32_64 = [torch.float32, torch.float64]
ALL_FLOATS = F32_64 + [torch.float16, torch.bfloat16]


@pytest.fixture(autouse=True)
def native():
    with fallback_mode("error"):
        yield


def same(actual, expected, **kw):
    assert actual.device.type == "neuron", actual.device
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    torch.testing.assert_close(actual.cpu(), expected, equal_nan=True, **kw)


EDGES = [float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1e-30,
         8.0, -8.0, 30.0, 100.0, 1e4, 1e10, -1e10]


def sample(dtype, lo, hi, n=400, edges=True):
    g = torch.Generator().manual_seed(0)
    x = torch.rand(n, generator=g, dtype=torch.float64) * (hi - lo) + lo
    if edges:
        x = torch.cat([torch.tensor(EDGES, dtype=torch.float64), x])
    return x.to(dtype)


# name -> (callable, dtypes ATen's CPU kernel takes, input range)
UNARY = {
    "i0": (torch.i0, ALL_FLOATS, (-30, 30)),
    "i0e": (S.i0e, ALL_FLOATS, (-50, 50)),
    "i1": (S.i1, ALL_FLOATS, (-30, 30)),
    "i1e": (S.i1e, ALL_FLOATS, (-50, 50)),
    "ndtri": (S.ndtri, F32_64, (-0.1, 1.1)),
    "log_ndtr": (S.log_ndtr, F32_64, (-40, 10)),
    "erfcx": (S.erfcx, F32_64, (-30, 60)),
    "entr": (S.entr, ALL_FLOATS, (-2, 10)),
    "airy_ai": (S.airy_ai, F32_64, (-20, 20)),
    "bessel_j0": (S.bessel_j0, F32_64, (-40, 40)),
    "bessel_j1": (S.bessel_j1, F32_64, (-40, 40)),
    "bessel_y0": (S.bessel_y0, F32_64, (-5, 40)),
    "bessel_y1": (S.bessel_y1, F32_64, (-5, 40)),
    "modified_bessel_i0": (S.modified_bessel_i0, F32_64, (-30, 30)),
    "modified_bessel_i1": (S.modified_bessel_i1, F32_64, (-30, 30)),
    "modified_bessel_k0": (S.modified_bessel_k0, F32_64, (-1, 30)),
    "modified_bessel_k1": (S.modified_bessel_k1, F32_64, (-1, 30)),
    "scaled_modified_bessel_k0": (S.scaled_modified_bessel_k0, F32_64, (-1, 30)),
    "scaled_modified_bessel_k1": (S.scaled_modified_bessel_k1, F32_64, (-1, 30)),
    "spherical_bessel_j0": (S.spherical_bessel_j0, F32_64, (-30, 30)),
}

# name -> (callable, dtypes, range of the first input, range of the second)
BINARY = {
    "igamma": (torch.igamma, ALL_FLOATS, (0, 30), (0, 30)),
    "igammac": (torch.igammac, ALL_FLOATS, (0, 30), (0, 30)),
    "zeta": (S.zeta, F32_64, (0.5, 8), (-3, 10)),
    "chebyshev_polynomial_t": (S.chebyshev_polynomial_t, F32_64, (-1.2, 1.2), (-2, 12)),
    "chebyshev_polynomial_u": (S.chebyshev_polynomial_u, F32_64, (-1.2, 1.2), (-2, 12)),
    "chebyshev_polynomial_v": (S.chebyshev_polynomial_v, F32_64, (-1.2, 1.2), (-2, 12)),
    "chebyshev_polynomial_w": (S.chebyshev_polynomial_w, F32_64, (-1.2, 1.2), (-2, 12)),
    "shifted_chebyshev_polynomial_t": (S.shifted_chebyshev_polynomial_t, F32_64, (-0.2, 1.2), (-2, 12)),
    "shifted_chebyshev_polynomial_u": (S.shifted_chebyshev_polynomial_u, F32_64, (-0.2, 1.2), (-2, 12)),
    "shifted_chebyshev_polynomial_v": (S.shifted_chebyshev_polynomial_v, F32_64, (-0.2, 1.2), (-2, 12)),
    "shifted_chebyshev_polynomial_w": (S.shifted_chebyshev_polynomial_w, F32_64, (-0.2, 1.2), (-2, 12)),
    "hermite_polynomial_h": (S.hermite_polynomial_h, F32_64, (-3, 3), (-2, 12)),
    "hermite_polynomial_he": (S.hermite_polynomial_he, F32_64, (-3, 3), (-2, 12)),
    "laguerre_polynomial_l": (S.laguerre_polynomial_l, F32_64, (-3, 10), (-2, 12)),
    "legendre_polynomial_p": (S.legendre_polynomial_p, F32_64, (-1.2, 1.2), (-2, 12)),
}
POLYNOMIALS = [k for k in BINARY if "polynomial" in k]
# a degree of 1e10 would run ATen's recurrence 1e10 times (on the CPU too);
# 1e30 converts to INT64_MIN, a negative degree
DEGREE_EDGES = [e if e != 1e10 else 1e30 for e in EDGES]


# ATen's recurrences for these return an uninitialized variable when x is NaN
# and the degree reaches the loop (n >= 2): the loop is skipped on isnan(q).
# The CPU result there is whatever the register held (0, 1, NaN...); ours is NaN.
UNINIT_ON_NAN = {"chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w",
                 "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u",
                 "shifted_chebyshev_polynomial_v", "shifted_chebyshev_polynomial_w",
                 "laguerre_polynomial_l", "legendre_polynomial_p"}


def expected_binary(name, fn, a, b):
    """fn(a, b) on the CPU, NaN where ATen's result is undefined (see UNINIT_ON_NAN)."""
    want = fn(a, b)
    if name in UNINIT_ON_NAN:
        a, b = torch.broadcast_tensors(a, b)
        b = b.double()  # the degree as ATen's int64 cast sees it (out of range: INT64_MIN, on x86)
        n = torch.where(b.isfinite() & (b.abs() < 2.0**63), b, torch.full_like(b, -1)).trunc()
        want = torch.where(a.isnan() & (n >= 2), torch.full_like(want, float("nan")), want)
    return want


def tol(dtype):
    # float32: the same float algorithm as the CPU; a few ulps of libm and
    # contraction differences, amplified in the steep tails
    if dtype == torch.float32:
        return dict(rtol=1e-5, atol=1e-6)
    return {}


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("dtype", ALL_FLOATS)
def test_unary(name, dtype):
    fn, dtypes, (lo, hi) = UNARY[name]
    x = sample(dtype, lo, hi)
    if dtype not in dtypes:
        with pytest.raises(NotImplementedError, match="not implemented for"):
            fn(x.to("neuron"))
        return
    same(fn(x.to("neuron")), fn(x), **tol(dtype))


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("dtype", ALL_FLOATS)
def test_binary(name, dtype):
    fn, dtypes, (alo, ahi), (blo, bhi) = BINARY[name]
    a = sample(dtype, alo, ahi)
    b_edges = DEGREE_EDGES if name in POLYNOMIALS else EDGES
    b = sample(dtype, blo, bhi, edges=False)
    b = torch.cat([torch.tensor(b_edges, dtype=dtype), b])[: a.numel()]
    if name in POLYNOMIALS:  # integral degrees too (a degree's fraction truncates)
        b[::2] = b[::2].round()
    if dtype not in dtypes:
        with pytest.raises(NotImplementedError, match="not implemented for"):
            fn(a.to("neuron"), b.to("neuron"))
        return
    same(fn(a.to("neuron"), b.to("neuron")), expected_binary(name, fn, a, b), **tol(dtype))
    # every pair of edge values
    e, f = torch.tensor(EDGES, dtype=dtype), torch.tensor(b_edges, dtype=dtype)
    ea, eb = e[:, None].expand(len(EDGES), len(EDGES)), f[None, :].expand(len(EDGES), len(EDGES))
    same(fn(ea.to("neuron"), eb.to("neuron")), expected_binary(name, fn, ea, eb), **tol(dtype))


@pytest.mark.parametrize("name", ["chebyshev_polynomial_t", "hermite_polynomial_h", "legendre_polynomial_p",
                                  "laguerre_polynomial_l", "shifted_chebyshev_polynomial_w"])
def test_polynomial_degrees(name):
    # large, huge, negative, fractional and non-finite degrees (ATen's int64 cast)
    fn = BINARY[name][0]
    x = torch.linspace(-1.5, 1.5, 13, dtype=torch.float64)
    n = torch.tensor([0, 1, 2, 6, 7, 50, 200, 600, 1e6, 1e30, -1e30, -3, 2.5, 7.9,
                      float("nan"), float("inf"), -float("inf")], dtype=torch.float64)
    xx, nn = x[:, None].expand(13, n.numel()), n[None, :].expand(13, n.numel())
    same(fn(xx.to("neuron"), nn.to("neuron")), fn(xx, nn))
    same(fn(xx.float().to("neuron"), nn.float().to("neuron")), fn(xx.float(), nn.float()), **tol(torch.float32))


@pytest.mark.parametrize("fn", [torch.i0, S.i0e, S.bessel_j0, S.ndtri, S.entr, S.spherical_bessel_j0])
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8, torch.bool])
def test_unary_integer_inputs_promote(fn, dtype):
    x = torch.arange(-5, 6).to(dtype) if dtype != torch.bool else torch.tensor([True, False, True])
    same(fn(x.to("neuron")), fn(x))


@pytest.mark.parametrize("fn", [S.zeta, S.chebyshev_polynomial_u, S.hermite_polynomial_he])
def test_binary_integer_and_mixed_inputs(fn):
    a = torch.arange(-3, 9)
    b = torch.arange(0, 12).flip(0)
    same(fn(a.to("neuron"), b.to("neuron")), fn(a, b))
    same(fn(a.double().to("neuron"), b.to("neuron")), fn(a.double(), b))


def test_igamma_integer_inputs_refused_like_cpu():
    a = torch.arange(1, 5)
    with pytest.raises(NotImplementedError, match="igamma"):
        torch.igamma(a.to("neuron"), a.to("neuron"))


def test_layouts():
    g = torch.Generator().manual_seed(1)
    x = torch.rand(6, 7, generator=g) * 20 - 5
    d = x.to("neuron")
    same(torch.i0(d.t()), torch.i0(x.t()), **tol(torch.float32))  # transposed
    same(S.bessel_j1(d[::2, 1::3]), S.bessel_j1(x[::2, 1::3]), **tol(torch.float32))  # strided
    same(S.erfcx(d[:1].expand(5, 7)), S.erfcx(x[:1].expand(5, 7)), **tol(torch.float32))  # stride 0
    same(S.i1e(d[2, 3]), S.i1e(x[2, 3]))  # 0-dim
    same(S.i0e(d[:0]), S.i0e(x[:0]))  # empty
    # broadcast binary, and a Python number on either side
    a, b = torch.rand(6, 1, generator=g) * 10, torch.rand(1, 7, generator=g) * 10
    same(torch.igamma(a.to("neuron"), b.to("neuron")), torch.igamma(a, b), **tol(torch.float32))
    same(S.zeta(3.0, b.to("neuron")), S.zeta(3.0, b), **tol(torch.float32))
    same(S.zeta(a.to("neuron"), 2.0), S.zeta(a, 2.0), **tol(torch.float32))
    same(S.chebyshev_polynomial_t(a.to("neuron"), 5), S.chebyshev_polynomial_t(a, 5), **tol(torch.float32))
    same(S.legendre_polynomial_p(0.3, b.to("neuron").round()), S.legendre_polynomial_p(0.3, b.round()),
         **tol(torch.float32))


def test_out_and_inplace():
    x = torch.linspace(-10, 10, 50)
    out = torch.empty(50, device="neuron")
    S.i1(x.to("neuron"), out=out)
    same(out, S.i1(x), **tol(torch.float32))
    out64 = torch.empty(5, dtype=torch.float64, device="neuron")  # resized, float64
    S.modified_bessel_k1(x.double().abs().to("neuron"), out=out64)
    same(out64, S.modified_bessel_k1(x.double().abs()))
    d = x.to("neuron")
    d.i0_()
    same(d, torch.i0(x), **tol(torch.float32))
    a, b = torch.rand(50) * 5, torch.rand(50) * 5
    da = a.to("neuron")
    da.igammac_(b.to("neuron"))
    same(da, torch.igammac(a, b), **tol(torch.float32))
    out = torch.empty(50, device="neuron")
    S.hermite_polynomial_h(x.to("neuron"), torch.full((50,), 4.0, device="neuron"), out=out)
    same(out, S.hermite_polynomial_h(x, torch.full((50,), 4.0)), **tol(torch.float32))


def test_kaiser_window_is_native():
    for m in [1, 2, 7, 64]:
        for beta in [0.0, 4.0, 12.0]:
            got = torch.signal.windows.kaiser(m, beta=beta, device="neuron")
            same(got, torch.signal.windows.kaiser(m, beta=beta), **tol(torch.float32))
    same(torch.kaiser_window(16, periodic=True, beta=8.0, device="neuron"),
         torch.kaiser_window(16, periodic=True, beta=8.0), **tol(torch.float32))


def test_complex_falls_back_to_cpu():
    # i0 has no complex kernel on the CPU either: the CPU's error, through the fallback
    with fallback_mode("silent"):
        x = torch.tensor([1 + 1j], device="neuron")
        with pytest.raises((RuntimeError, NotImplementedError)):
            torch.i0(x)
