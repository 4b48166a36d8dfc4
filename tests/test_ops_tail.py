"""The long tail on neuron vs the CPU (ops_tail.cpp, kernels/src/tail/tail.c):
glu (+ backward), prelu (+ backward), rrelu, renorm, cross/linalg.cross,
cdist/pdist (+ backward), embedding_bag (+ backward),
frexp, unfold's backward, channel_shuffle, normal with tensor mean/std,
sgn's backward (_efficientzerotensor), isin, repeat_interleave,
nonzero_static, logspace, histc/histogram/histogramdd and nanmedian.
Everything runs in fallback_mode("error"), so a silent CPU fallback fails
the test; autograd checks allow other families' fallbacks but not ours."""
import pytest
import torch
import torch.nn.functional as F

import torch_neuronx  # noqa: F401
from torch_neuronx._fallback import fallback_mode

D = "neuron"
FLOATS = [torch.float32, torch.float64, torch.bfloat16, torch.float16]
INTS = [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8]


@pytest.fixture(autouse=True)
def native():
    with fallback_mode("error"):
        yield


def same(actual, expected, **kw):
    assert actual.device.type == "neuron", actual.device
    torch.testing.assert_close(actual.cpu(), expected, equal_nan=True, **kw)


def rand(shape, dtype=torch.float32, seed=0, lo=-3, hi=3):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return (torch.rand(shape, generator=g, dtype=torch.float64) * (hi - lo) + lo).to(dtype)
    return torch.randint(lo, hi + 1, shape, generator=g).to(dtype)


def tol(dtype):
    return {"atol": 2e-2, "rtol": 2e-2} if dtype in (torch.bfloat16, torch.float16) else {}


def grads_match(fn, *inputs, dtype=torch.float64):
    """d(sum(fn(x) * w))/dx on neuron equals the CPU's."""
    cpu = [x.detach().clone().to(dtype).requires_grad_() for x in inputs]
    dev = [x.detach().clone().to(dtype).to(D).requires_grad_() for x in inputs]
    out_c = fn(*cpu)
    w = rand(out_c.shape, dtype, seed=7)
    (out_c * w).sum().backward()
    (fn(*dev) * w.to(D)).sum().backward()
    for c, d in zip(cpu, dev):
        same(d.grad, c.grad, **tol(dtype))


# ---- glu ----------------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS)
def test_glu_matches_cpu(dtype):
    x = rand((4, 6, 8), dtype)
    for dim in (0, 1, -1):
        same(F.glu(x.to(D), dim), F.glu(x, dim), **tol(dtype))
    xt = x.transpose(0, 2)  # non-contiguous
    same(F.glu(xt.to(D), 1), F.glu(xt, 1), **tol(dtype))
    out = torch.empty(0, dtype=dtype, device=D)
    torch._C._nn.glu(x.to(D), -1, out=out)
    same(out, F.glu(x, -1), **tol(dtype))
    e = torch.empty(0, 4, dtype=dtype)
    same(F.glu(e.to(D), 1), F.glu(e, 1))


def test_glu_backward_and_errors():
    x = rand((3, 4, 6))
    for dim in (0, 2, -2):
        if x.shape[dim] % 2 == 0:
            grads_match(lambda t: F.glu(t, dim), x)
    grads_match(lambda t: F.glu(t.transpose(0, 2), 0), x, dtype=torch.float32)
    g = rand((3, 4, 3), seed=2)
    same(torch.ops.aten.glu_backward(g.to(D), x.to(D), -1), torch.ops.aten.glu_backward(g, x, -1))
    with pytest.raises(RuntimeError, match="Halving dimension must be even"):
        torch.ops.aten.glu_backward(g.to(D), rand((3, 4, 5)).to(D), -1)
    with pytest.raises(RuntimeError, match="0-dimensional"):
        torch.ops.aten.glu_backward(torch.ones((), device=D), torch.ones((), device=D), 0)


# ---- prelu / rrelu ---------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS)
def test_prelu_matches_cpu(dtype):
    x = rand((2, 3, 5), dtype)
    for w in (torch.tensor([0.25], dtype=dtype), rand((3,), dtype, seed=3)):
        same(F.prelu(x.to(D), w.to(D)), F.prelu(x, w), **tol(dtype))
    xt = x.transpose(1, 2).contiguous().transpose(1, 2)  # channels non-contiguous
    w = rand((3,), dtype, seed=4)
    same(F.prelu(xt.to(D), w.to(D)), F.prelu(xt, w), **tol(dtype))


def test_prelu_backward():
    x = rand((2, 3, 5))
    grads_match(F.prelu, x, rand((3,), seed=5))
    grads_match(F.prelu, x, torch.tensor([0.3]))
    gx, gw = torch.ops.aten._prelu_kernel_backward(torch.ones(4, device=D), torch.tensor([-1.0, 2, -3, 0], device=D),
                                                    torch.full((4,), 0.5, device=D))
    same(gx, torch.tensor([0.5, 1, 0.5, 0.5]))
    same(gw, torch.tensor([-1.0, 0, -3, 0]))


def test_rrelu():
    x = rand((4, 50))
    # eval: leaky_relu with the mean slope
    same(F.rrelu(x.to(D), 0.1, 0.3, training=False), F.rrelu(x, 0.1, 0.3, training=False))
    # training: positives unchanged, negatives scaled by a slope in [lower, upper), noise kept
    torch.manual_seed(0)
    y = F.rrelu(x.to(D), 0.1, 0.3, training=True).cpu()
    pos = x > 0
    assert torch.equal(y[pos], x[pos])
    slope = y[~pos] / x[~pos]
    assert ((slope >= 0.1 - 1e-6) & (slope < 0.3 + 1e-6)).all()
    assert slope.std() > 0  # random, not one slope
    noise = torch.empty_like(x, device=D)
    out = torch.ops.aten.rrelu_with_noise(x.to(D), noise, 0.1, 0.3, True)
    n = noise.cpu()
    assert torch.equal(n[pos], torch.ones_like(n[pos]))
    same(out, x * n)
    xr = x.clone().to(D).requires_grad_()
    F.rrelu(xr, 0.1, 0.3, training=True).sum().backward()
    assert xr.grad is not None


# ---- renorm / cross / frexp ---------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_renorm_matches_cpu(dtype):
    x = rand((4, 5, 3), dtype)
    for p, dim, maxnorm in ((2, 0, 1.0), (1, 1, 2.5), (float("inf"), -1, 0.5), (3, 2, 100.0)):
        same(torch.renorm(x.to(D), p, dim, maxnorm), torch.renorm(x, p, dim, maxnorm), **tol(dtype))
    y = x.clone().to(D)
    y.renorm_(2, 0, 1.0)
    same(y, torch.renorm(x, 2, 0, 1.0), **tol(dtype))
    if dtype == torch.float64:
        grads_match(lambda t: torch.renorm(t, 2, 1, 1.0), x)


@pytest.mark.parametrize("dtype", FLOATS + INTS)
def test_cross_matches_cpu(dtype):
    a, b = rand((4, 3, 5), dtype, seed=1), rand((4, 3, 5), dtype, seed=2)
    same(torch.linalg.cross(a.to(D), b.to(D), dim=1), torch.linalg.cross(a, b, dim=1), **tol(dtype))
    a2, b2 = a.transpose(1, 2), rand((1, 5, 3), dtype, seed=3)  # broadcast, non-contiguous
    same(torch.linalg.cross(a2.to(D), b2.to(D)), torch.linalg.cross(a2, b2), **tol(dtype))
    same(torch.cross(a.to(D), b.to(D), dim=1), torch.cross(a, b, dim=1), **tol(dtype))
    e = torch.empty(0, 3, dtype=dtype)
    same(torch.linalg.cross(e.to(D), e.to(D)), torch.linalg.cross(e, e))


def test_cross_int64_wraps_and_grads():
    a = torch.tensor([[2**62, 3, 1]])
    b = torch.tensor([[5, 7, 2**61]])
    same(torch.linalg.cross(a.to(D), b.to(D)), torch.linalg.cross(a, b))
    grads_match(lambda x, y: torch.linalg.cross(x, y, dim=0), rand((3, 4)), rand((3, 4), seed=1))
    with pytest.raises(RuntimeError, match="must have length 3"):
        torch.linalg.cross(torch.ones(4, 2, device=D), torch.ones(4, 2, device=D))


@pytest.mark.parametrize("dtype", FLOATS)
def test_frexp_matches_cpu(dtype):
    x = rand((6, 7), dtype, lo=-1000, hi=1000)
    x[0, :4] = torch.tensor([0.0, -0.0, float("inf"), float("nan")]).to(dtype)
    m, e = torch.frexp(x.to(D))
    mc, ec = torch.frexp(x)
    same(m, mc)
    fin = torch.isfinite(x)
    assert torch.equal(e.cpu()[fin], ec[fin])  # the exponent of inf/nan is unspecified
    assert e.dtype == torch.int32
    mt, et = torch.frexp(x.t().to(D))
    same(mt, torch.frexp(x.t())[0])
    mo, eo = torch.empty(0, dtype=dtype, device=D), torch.empty(0, dtype=torch.int32, device=D)
    torch.frexp(x.to(D), out=(mo, eo))
    same(mo, mc)


# ---- unfold backward / channel_shuffle ----------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_unfold_backward_matches_cpu(dtype):
    x = rand((3, 11, 4), dtype)
    for dim, size, step in ((1, 4, 1), (1, 3, 2), (0, 2, 1), (2, 4, 3), (1, 2, 5), (-1, 1, 1)):
        g = rand(x.unfold(dim, size, step).shape, dtype, seed=9)
        got = torch.ops.aten.unfold_backward(g.to(D), x.shape, dim, size, step)
        same(got, torch.ops.aten.unfold_backward(g, x.shape, dim, size, step), **tol(dtype))
    gt = rand((3, 4, 4, 8), dtype).transpose(2, 3)  # non-contiguous grad, windows along dim 1
    same(torch.ops.aten.unfold_backward(gt.to(D), [3, 11, 8], 1, 4, 2),
         torch.ops.aten.unfold_backward(gt, [3, 11, 8], 1, 4, 2), **tol(dtype))
    grads_match(lambda t: t.unfold(1, 4, 2), x.double())
    same(torch.ops.aten.unfold_backward(torch.ones(1, dtype=dtype, device=D), [], 0, 1, 1),
         torch.ops.aten.unfold_backward(torch.ones(1, dtype=dtype), [], 0, 1, 1))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_channel_shuffle_matches_cpu(dtype):
    x = rand((2, 6, 3, 2), dtype) if dtype != torch.bool else rand((2, 6, 3, 2), torch.int64) > 0
    same(F.channel_shuffle(x.to(D), 3), F.channel_shuffle(x, 3))
    same(F.channel_shuffle(x.to(D), 2), F.channel_shuffle(x, 2))


# ---- random: normal with tensors, sgn backward ----------------------------------------

def test_normal_tensor_overloads():
    torch.manual_seed(1)
    mean = torch.linspace(-100, 100, 4000).to(D)
    std = torch.full((4000,), 0.01, device=D)
    for y in (torch.normal(mean, 0.01), torch.normal(mean, std)):
        assert y.device.type == "neuron" and y.shape == (4000,)
        assert (y.cpu() - mean.cpu()).abs().max() < 0.1
    y = torch.normal(3.0, std * 100)
    assert abs(y.cpu().mean().item() - 3.0) < 0.2 and 0.8 < y.cpu().std().item() < 1.2
    out = torch.empty(0, device=D)
    torch.normal(mean, std, out=out)
    assert out.shape == (4000,)
    with pytest.raises(RuntimeError, match="std >= 0.0"):
        torch.normal(mean, -1.0)
    with pytest.raises(RuntimeError, match="std >= 0.0"):
        torch.normal(mean, -std)
    b = torch.normal(torch.zeros(3, 1, device=D), torch.ones(1, 5, device=D))  # broadcast
    assert b.shape == (3, 5)


def test_sgn_backward_is_native():
    x = rand((5, 4)).to(D).requires_grad_()
    torch.sgn(x).sum().backward()
    same(x.grad, torch.zeros(5, 4))
    z = torch.ops.aten._efficientzerotensor([2, 3], device=D)
    assert z.device.type == "neuron" and z._is_zerotensor()
    same(z + torch.ones(2, 3, device=D), torch.ones(2, 3))


# ---- isin / repeat_interleave / nonzero_static ------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.int8, torch.bfloat16])
def test_isin_matches_cpu(dtype):
    e = rand((6, 7), dtype, lo=-5, hi=5)
    for t in (rand((3,), dtype, seed=2, lo=-5, hi=5), rand((200,), dtype, seed=3, lo=-5, hi=5)):
        for invert in (False, True):
            same(torch.isin(e.to(D), t.to(D), invert=invert), torch.isin(e, t, invert=invert))
    same(torch.isin(e.t().to(D), e[0].to(D)), torch.isin(e.t(), e[0]))
    same(torch.isin(e.to(D), torch.tensor(1.5).to(D)), torch.isin(e, torch.tensor(1.5)))
    same(torch.isin(e[:0].to(D), e[0].to(D)), torch.isin(e[:0], e[0]))


def test_isin_nan_and_mixed_dtypes():
    e = torch.tensor([1.0, float("nan"), 3.0])
    t = torch.tensor([float("nan"), 3.0])
    same(torch.isin(e.to(D), t.to(D)), torch.isin(e, t))
    same(torch.isin(torch.arange(5).to(D), torch.tensor([1.0, 3.5]).to(D)),
         torch.isin(torch.arange(5), torch.tensor([1.0, 3.5])))


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_repeat_interleave_matches_cpu(dtype):
    r = torch.tensor([2, 0, 3, 1, 0], dtype=dtype)
    same(torch.repeat_interleave(r.to(D)), torch.repeat_interleave(r))
    same(torch.repeat_interleave(r.to(D), output_size=6), torch.repeat_interleave(r))
    x = rand((5, 2))
    same(torch.repeat_interleave(x.to(D), r.to(D), dim=0), torch.repeat_interleave(x, r, dim=0))
    same(torch.repeat_interleave(x.to(D), 3, dim=1), torch.repeat_interleave(x, 3, dim=1))
    same(torch.repeat_interleave(r[:0].to(D)), torch.repeat_interleave(r[:0]))
    same(torch.repeat_interleave(r[::2].to(D)), torch.repeat_interleave(r[::2]))  # non-contiguous
    with pytest.raises(RuntimeError, match="negative"):
        torch.repeat_interleave(torch.tensor([1, -1], dtype=dtype, device=D))
    with pytest.raises(RuntimeError, match="1D"):
        torch.repeat_interleave(torch.ones(2, 2, dtype=dtype, device=D))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_nonzero_static_matches_cpu(dtype):
    x = rand((4, 5), torch.int64, lo=-1, hi=1).to(dtype)
    n = int(torch.count_nonzero(x))
    for size in (0, 3, n, n + 4):
        for fill in (-1, 7):
            same(torch.nonzero_static(x.to(D), size=size, fill_value=fill),
                 torch.nonzero_static(x, size=size, fill_value=fill))
    same(torch.nonzero_static(x.t().to(D), size=4), torch.nonzero_static(x.t(), size=4))
    same(torch.nonzero_static(torch.tensor(3).to(D), size=2), torch.nonzero_static(torch.tensor(3), size=2))


# ---- logspace ---------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS + INTS)
def test_logspace_matches_cpu(dtype):
    for start, end, steps, base in ((0, 3, 7, 10.0), (-2, 2, 10, 2.0), (1, 1, 1, 10.0), (0, 5, 0, 2.0),
                                    (3, -1, 5, 3.0), (0.5, 1.5, 4, 2.0)):
        if dtype == torch.uint8 and min(start, end) < 0:
            continue
        got = torch.logspace(start, end, steps, base, dtype=dtype, device=D)
        same(got, torch.logspace(start, end, steps, base, dtype=dtype), **tol(dtype))
    big = torch.logspace(0, 2, 70000, dtype=torch.float64, device=D)  # parallel path
    same(big, torch.logspace(0, 2, 70000, dtype=torch.float64))
    out = torch.empty(3, 4, device=D).t()
    torch.logspace(0, 1, 12, out=out)
    same(out, torch.logspace(0, 1, 12).reshape(4, 3))
    same(torch.logspace(torch.tensor(0.0), torch.tensor(2.0), 5, device=D), torch.logspace(0, 2, 5))


# ---- histograms ---------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_histc_matches_cpu(dtype):
    x = rand((50, 7), dtype)
    x[0, :3] = torch.tensor([float("nan"), 10.0, -10.0]).to(dtype)
    for bins, lo, hi in ((7, -1, 1), (1, -3, 3), (13, -2.5, 2.0)):
        same(torch.histc(x.to(D), bins, lo, hi), torch.histc(x, bins, lo, hi))
    xf = torch.nan_to_num(x)  # min == max == 0 takes the data's range, which a NaN makes non-finite (CPU too)
    same(torch.histc(xf.to(D), 10, 0, 0), torch.histc(xf, 10, 0, 0))
    same(torch.histc(x.t().to(D), 5, -2, 2), torch.histc(x.t(), 5, -2, 2))
    same(torch.histc(torch.full((4,), 2.0, dtype=dtype).to(D), 4), torch.histc(torch.full((4,), 2.0, dtype=dtype), 4))
    same(torch.histc(x[:0].to(D), 4, 0, 1), torch.histc(x[:0], 4, 0, 1))
    out = torch.empty(0, dtype=dtype, device=D)
    torch.histc(x.to(D), 6, -1, 1, out=out)
    same(out, torch.histc(x, 6, -1, 1))


def test_histc_errors():
    with pytest.raises(RuntimeError, match="max must be larger than min"):
        torch.histc(torch.ones(3, device=D), 4, 2, 1)
    # integer inputs are CUDA's histc (not the CPU's NotImplementedError):
    # tests/test_ops_linalg_param.py


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_histogram_matches_cpu(dtype):
    x = rand((40,), dtype)
    w = rand((40,), dtype, seed=3, lo=0, hi=2)
    for kw in ({}, {"weight": w}, {"density": True}, {"weight": w, "density": True}):
        for bins in (5, torch.tensor([-3.0, -1.0, 0.0, 0.5, 3.0], dtype=dtype)):
            hc, ec = torch.histogram(x, bins, **kw)
            kwd = {k: (v.to(D) if torch.is_tensor(v) else v) for k, v in kw.items()}
            hd, ed = torch.histogram(x.to(D), bins.to(D) if torch.is_tensor(bins) else bins, **kwd)
            same(hd, hc)
            same(ed, ec)
    hc, ec = torch.histogram(x, 6, range=(-1.0, 1.0))
    hd, ed = torch.histogram(x.to(D), 6, range=(-1.0, 1.0))
    same(hd, hc)
    same(ed, ec)


def test_histogramdd_matches_cpu():
    x = rand((60, 3))
    w = rand((60,), seed=4, lo=0, hi=1)
    for bins in ([3, 4, 5], 4):
        for kw in ({}, {"weight": w}, {"density": True}, {"range": [-1.0, 1.0, -2.0, 2.0, 0.0, 3.0]}):
            hc, ec = torch.histogramdd(x, bins, **kw)
            kwd = {k: (v.to(D) if torch.is_tensor(v) else v) for k, v in kw.items()}
            hd, ed = torch.histogramdd(x.to(D), bins, **kwd)
            same(hd, hc)
            for a, b in zip(ed, ec):
                same(a, b)
    edges = [torch.tensor([-3.0, 0.0, 3.0]), torch.tensor([-3.0, -1.0, 1.0, 3.0]), torch.tensor([-3.0, 3.0])]
    hc, _ = torch.histogramdd(x, edges)
    hd, _ = torch.histogramdd(x.to(D), [e.to(D) for e in edges])
    same(hd, hc)


# ---- nanmedian -------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64, torch.int16])
def test_nanmedian_matches_cpu(dtype):
    x = rand((6, 9), dtype, lo=-4, hi=4)
    if dtype.is_floating_point:
        x[0, ::2] = float("nan")
        x[1, :] = float("nan")
        x[2, 1] = float("nan")
    same(torch.nanmedian(x.to(D)), torch.nanmedian(x))
    for dim in (0, 1, -1):
        for keepdim in (False, True):
            v, i = torch.nanmedian(x.to(D), dim, keepdim)
            vc, ic = torch.nanmedian(x, dim, keepdim)
            same(v, vc)
            # an all-NaN slice's index is whatever std::nth_element leaves first on the
            # CPU (implementation-defined): there, only check that it names a NaN
            allnan = x.isnan().all(dim, keepdim=True)
            picked = x.gather(dim, i.cpu() if keepdim else i.cpu().unsqueeze(dim))
            assert picked[allnan].isnan().all()
            allnan = allnan if keepdim else allnan.squeeze(dim)
            same(torch.where(allnan.to(D), 0, i), torch.where(allnan, 0, ic))
    v, i = torch.nanmedian(x.t().to(D), 0)
    same(v, torch.nanmedian(x.t(), 0)[0])
    allnan = x.t().isnan().all(0)  # as above: the index of an all-NaN slice is implementation-defined
    assert x.t().gather(0, i.cpu().unsqueeze(0))[0][allnan].isnan().all()
    same(torch.where(allnan.to(D), 0, i), torch.where(allnan, 0, torch.nanmedian(x.t(), 0)[1]))
    same(torch.nanmedian(x[:0].to(D)), torch.nanmedian(x[:0]))
    s = torch.tensor(5, dtype=dtype)
    same(torch.nanmedian(s.to(D), 0)[0], torch.nanmedian(s, 0)[0])


def test_nanmedian_grad_and_masked_median():
    x = rand((5, 6), torch.float64)
    x[0, 1] = float("nan")
    grads_match(lambda t: torch.nanmedian(t, 1)[0], x)
    mask = rand((5, 6), torch.int64, lo=0, hi=1).bool()
    got = torch.masked._ops.median(x.to(D), 1, mask=mask.to(D))
    same(got, torch.masked._ops.median(x, 1, mask=mask))


# ---- cdist / pdist ----------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cdist_matches_cpu(dtype):
    a, b = rand((2, 5, 4), dtype), rand((2, 6, 4), dtype, seed=1)
    for p in (0.0, 1.0, 2.0, 0.5, 1.5, 3.0, float("inf")):
        same(torch.cdist(a.to(D), b.to(D), p), torch.cdist(a, b, p))
        same(torch.cdist(a.to(D), b.to(D), p, compute_mode="donot_use_mm_for_euclid_dist"),
             torch.cdist(a, b, p, compute_mode="donot_use_mm_for_euclid_dist"))
    same(torch.cdist(a[0].t().to(D), a[1].t().to(D)), torch.cdist(a[0].t(), a[1].t()))  # non-contiguous
    same(torch.cdist(a[:, :0].to(D), b.to(D)), torch.cdist(a[:, :0], b))
    big1, big2 = rand((40, 3), dtype), rand((30, 3), dtype, seed=2)  # the matmul path for p = 2
    same(torch.cdist(big1.to(D), big2.to(D)), torch.cdist(big1, big2))


def test_cdist_pdist_grads():
    a, b = rand((5, 3)), rand((4, 3), seed=1)
    for p in (1.0, 2.0, 0.5, 3.0, float("inf")):
        grads_match(lambda x, y: torch.cdist(x, y, p, compute_mode="donot_use_mm_for_euclid_dist"), a, b)
        grads_match(lambda x: F.pdist(x, p), a)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_pdist_matches_cpu(dtype):
    x = rand((7, 4), dtype)
    for p in (0.0, 1.0, 2.0, 0.5, 3.0, float("inf")):
        same(F.pdist(x.to(D), p), F.pdist(x, p))
    same(F.pdist(x[:1].to(D)), F.pdist(x[:1]))


# ---- embedding_bag -----------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_matches_cpu(dtype, mode):
    w = rand((10, 4), dtype)
    idx = torch.tensor([1, 4, 4, 0, 9, 2, 1, 5, 3, 3])
    for offsets, last in ((torch.tensor([0, 3, 3, 7]), False), (torch.tensor([0, 2, 8, 10]), True)):
        for pad in (None, 4):
            kw = dict(mode=mode, include_last_offset=last, padding_idx=pad)
            same(F.embedding_bag(idx.to(D), w.to(D), offsets.to(D), **kw), F.embedding_bag(idx, w, offsets, **kw),
                 **tol(dtype))
    same(F.embedding_bag(idx.view(2, 5).to(D), w.to(D), mode=mode), F.embedding_bag(idx.view(2, 5), w, mode=mode),
         **tol(dtype))
    same(F.embedding_bag(idx.int().to(D), w.to(D), torch.tensor([0, 5], dtype=torch.int32).to(D), mode=mode),
         F.embedding_bag(idx.int(), w, torch.tensor([0, 5], dtype=torch.int32), mode=mode), **tol(dtype))


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_grads(mode):
    w = rand((10, 4), torch.float64)
    idx, offsets = torch.tensor([1, 4, 4, 0, 9, 2, 1, 5]), torch.tensor([0, 3, 3, 6])
    grads_match(lambda t: F.embedding_bag(idx.to(t.device), t, offsets.to(t.device), mode=mode), w)
    grads_match(lambda t: F.embedding_bag(idx.to(t.device), t, offsets.to(t.device), mode=mode, padding_idx=4), w)
    if mode != "max":
        grads_match(lambda t: F.embedding_bag(idx.to(t.device), t, offsets.to(t.device), mode=mode,
                                              scale_grad_by_freq=True), w)
    if mode == "sum":
        psw = rand((8,), torch.float64, seed=5)
        grads_match(lambda t, s: F.embedding_bag(idx.to(t.device), t, offsets.to(t.device), mode="sum",
                                                 per_sample_weights=s), w, psw)


def test_embedding_bag_errors():
    w = torch.ones(5, 3, device=D)
    with pytest.raises(RuntimeError, match="out of range"):
        F.embedding_bag(torch.tensor([1, 5], device=D), w, torch.tensor([0], device=D))
        torch.neuron.synchronize()
    with pytest.raises(RuntimeError, match="out of range"):
        F.embedding_bag(torch.tensor([1, -1], device=D), w, torch.tensor([0], device=D))
        torch.neuron.synchronize()
    with pytest.raises(RuntimeError, match="offsets\\[0\\] has to be 0"):
        F.embedding_bag(torch.tensor([1, 2], device=D), w, torch.tensor([1], device=D))
    with pytest.raises(RuntimeError, match="only supported for mode='sum'"):
        F.embedding_bag(torch.tensor([1, 2], device=D), w, torch.tensor([0], device=D), mode="mean",
                        per_sample_weights=torch.ones(2, device=D))
    torch.neuron.synchronize()
