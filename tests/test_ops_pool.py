"""Pooling and upsampling on neuron (ops_pool.cpp, kernels pool.c and
upsample.c) against torch on the CPU: max/avg/adaptive pools 1d/2d/3d with
their options, max_unpool, interpolate in every mode, forward and backward,
over dtypes and layouts (channels_last, non-contiguous, no batch dim,
empty batch), out= variants and the error paths.  Everything runs inside
fallback_mode("error"), so a CPU fallback fails the test: the ops are
native."""
import pytest
import torch
import torch.nn.functional as F

import torch_neuronx  # noqa: F401
from torch_neuronx._fallback import fallback_mode

FLOATS = [torch.float32, torch.float64, torch.bfloat16, torch.float16]


@pytest.fixture(autouse=True)
def native():
    with fallback_mode("error"):
        yield


def make(shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=g) * 3).to(dtype)
    return torch.randint(-50, 50, shape, generator=g).to(dtype)


def layouts(x):
    """x as given, channels_last (4-d/5-d), and a non-contiguous slice."""
    out = [("contiguous", x)]
    if x.dim() == 4:
        out.append(("channels_last", x.contiguous(memory_format=torch.channels_last)))
    if x.dim() == 5:
        out.append(("channels_last_3d", x.contiguous(memory_format=torch.channels_last_3d)))
    big = torch.cat([x, x], dim=-1)
    out.append(("strided", big[..., ::2]))
    return out


def check(fn, x, grad=True, **tol):
    """fn on CPU and on neuron; results (and input grads) must agree."""
    xc = x.detach().clone().requires_grad_(grad)
    xn = x.detach().to("neuron").requires_grad_(grad)
    rc = fn(xc)
    rn = fn(xn)
    rcs = rc if isinstance(rc, tuple) else (rc,)
    rns = rn if isinstance(rn, tuple) else (rn,)
    for a, b in zip(rns, rcs):
        assert a.device.type == "neuron"
        torch.testing.assert_close(a.cpu(), b, equal_nan=True, **tol)
    if grad:
        g = make(rcs[0].shape, rcs[0].dtype, seed=1)
        rcs[0].backward(g)
        rns[0].backward(g.to("neuron"))
        torch.testing.assert_close(xn.grad.cpu(), xc.grad, equal_nan=True, **tol)
    return rn


def tol_for(dtype):
    if dtype in (torch.bfloat16, torch.float16):
        return dict(atol=2e-2, rtol=2e-2)
    return {}


# ---------------------------------------------------------------- max pool

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("args", [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=(3, 2), stride=(1, 2), padding=(1, 0), dilation=(2, 1)),
    dict(kernel_size=3, stride=2, ceil_mode=True),
])
def test_max_pool2d(dtype, args):
    x = make((2, 3, 9, 8), dtype)
    for name, v in layouts(x):
        check(lambda t: F.max_pool2d(t, return_indices=True, **args), v, **tol_for(dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_max_pool1d_3d(dtype):
    x1 = make((2, 3, 11), dtype)
    check(lambda t: F.max_pool1d(t, 3, stride=2, padding=1, return_indices=True), x1, **tol_for(dtype))
    check(lambda t: F.max_pool1d(t, 2, ceil_mode=True), x1, **tol_for(dtype))
    check(lambda t: F.max_pool1d(t, 2), x1[0], **tol_for(dtype))  # no batch dim
    x3 = make((2, 2, 5, 6, 7), dtype)
    for name, v in layouts(x3):
        check(lambda t: F.max_pool3d(t, (2, 3, 2), stride=(1, 2, 2), padding=(1, 1, 0), return_indices=True), v,
              **tol_for(dtype))
    check(lambda t: F.max_pool3d(t, 3, stride=2, dilation=(1, 1, 2), ceil_mode=True), x3, **tol_for(dtype))
    check(lambda t: F.max_pool3d(t, 2), x3[0], **tol_for(dtype))


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8, torch.int8])
def test_max_pool_integers(dtype):
    x = make((2, 3, 7, 6), dtype)
    check(lambda t: F.max_pool2d(t, 3, stride=2, padding=1, return_indices=True), x, grad=False)
    check(lambda t: F.max_pool3d(t, 2, return_indices=True), x, grad=False)


def test_max_pool_nan_wins():
    x = make((1, 2, 6, 6))
    x[0, 0, 1, 1] = float("nan")
    x[0, 1, 2, :] = float("nan")
    x[0, 1, 4, 4] = float("-inf")
    check(lambda t: F.max_pool2d(t, 3, stride=1, padding=1, return_indices=True), x)
    check(lambda t: F.adaptive_max_pool2d(t, 4, return_indices=True), x)


def test_max_pool_backward_bad_index():
    x = torch.randn(1, 1, 4, 4, device="neuron")
    out, idx = F.max_pool2d(x, 2, return_indices=True)
    idx[0, 0, 0, 0] = 16
    with pytest.raises(RuntimeError, match="out of bounds"):
        torch.ops.aten.max_pool2d_with_indices_backward(torch.ones_like(out), x, [2, 2], [2, 2], [0, 0], [1, 1],
                                                        False, idx)
        torch.neuron.synchronize()


def test_max_pool_out_and_errors():
    x = make((2, 3, 8, 8))
    out = torch.empty(0, device="neuron")
    idx = torch.empty(0, dtype=torch.long, device="neuron")
    torch.ops.aten.max_pool2d_with_indices.out(x.to("neuron"), [2, 2], [2, 2], [0, 0], [1, 1], False, out=out,
                                                indices=idx)
    ro, ri = F.max_pool2d(x, 2, return_indices=True)
    torch.testing.assert_close(out.cpu(), ro)
    torch.testing.assert_close(idx.cpu(), ri)
    with pytest.raises(RuntimeError, match="pad should be at most half"):
        F.max_pool2d(x.to("neuron"), 2, padding=2)
    with pytest.raises(RuntimeError):
        F.max_pool3d(x.to("neuron")[0, 0], 2)  # 2-d input


def test_empty_batch():
    x = make((0, 3, 8, 8))
    check(lambda t: F.max_pool2d(t, 2), x)
    check(lambda t: F.avg_pool2d(t, 2), x)
    check(lambda t: F.interpolate(t, scale_factor=2, mode="bilinear"), x)


# ----------------------------------------------------------------- avg pool

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("args", [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
    dict(kernel_size=(3, 2), stride=1, padding=(1, 0), divisor_override=5),
])
def test_avg_pool2d(dtype, args):
    x = make((2, 3, 9, 8), dtype)
    for name, v in layouts(x):
        check(lambda t: F.avg_pool2d(t, **args), v, **tol_for(dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_avg_pool1d_3d(dtype):
    x1 = make((2, 3, 11), dtype)
    check(lambda t: F.avg_pool1d(t, 3, stride=2, padding=1, ceil_mode=True, count_include_pad=False), x1,
          **tol_for(dtype))
    check(lambda t: F.avg_pool1d(t, 4), x1[0], **tol_for(dtype))
    if dtype == torch.bfloat16:
        return  # the CPU has no bfloat16 avg_pool3d to compare with
    x3 = make((2, 2, 5, 6, 7), dtype)
    for name, v in layouts(x3):
        check(lambda t: F.avg_pool3d(t, (2, 3, 2), stride=(1, 2, 2), padding=(1, 1, 0)), v, **tol_for(dtype))
    check(lambda t: F.avg_pool3d(t, 3, stride=2, padding=1, ceil_mode=True, count_include_pad=False), x3,
          **tol_for(dtype))
    check(lambda t: F.avg_pool3d(t, 2, divisor_override=3), x3[0], **tol_for(dtype))


def test_avg_pool_int64_and_out():
    x = make((2, 3, 7, 6), torch.int64)
    check(lambda t: F.avg_pool2d(t, 3, stride=2, padding=1), x, grad=False)
    out = torch.empty(0, device="neuron")
    xf = make((1, 2, 6, 6))
    torch.ops.aten.avg_pool2d.out(xf.to("neuron"), [2, 2], [2, 2], [0, 0], False, True, None, out=out)
    torch.testing.assert_close(out.cpu(), F.avg_pool2d(xf, 2))
    with pytest.raises(RuntimeError, match="divisor must be not zero"):
        F.avg_pool2d(xf.to("neuron"), 2, divisor_override=0)


# ------------------------------------------------------------ adaptive pools

@pytest.mark.parametrize("dtype", FLOATS)
def test_adaptive_avg(dtype):
    t = tol_for(dtype)
    check(lambda v: F.adaptive_avg_pool1d(v, 4), make((2, 3, 10), dtype), **t)
    x = make((2, 3, 9, 7), dtype)
    for name, v in layouts(x):
        check(lambda u: F.adaptive_avg_pool2d(u, (4, 3)), v, **t)
        check(lambda u: F.adaptive_avg_pool2d(u, (9, 10)), v, **t)  # upsampling windows
    check(lambda u: F.adaptive_avg_pool2d(u, 3), x[0], **t)
    x3 = make((2, 2, 5, 6, 7), dtype)
    for name, v in layouts(x3):
        check(lambda u: F.adaptive_avg_pool3d(u, (2, 4, 3)), v, **t)
    check(lambda u: F.adaptive_avg_pool3d(u, 2), x3[0], **t)


@pytest.mark.parametrize("dtype", FLOATS)
def test_adaptive_max(dtype):
    t = tol_for(dtype)
    check(lambda v: F.adaptive_max_pool1d(v, 4, return_indices=True), make((2, 3, 10), dtype), **t)
    x = make((2, 3, 9, 7), dtype)
    for name, v in layouts(x):
        check(lambda u: F.adaptive_max_pool2d(u, (4, 3), return_indices=True), v, **t)
    x3 = make((2, 2, 5, 6, 7), dtype)
    for name, v in layouts(x3):
        check(lambda u: F.adaptive_max_pool3d(u, (2, 4, 3), return_indices=True), v, **t)
    check(lambda u: F.adaptive_max_pool3d(u, 2), x3[0], **t)


def test_adaptive_errors():
    with pytest.raises(RuntimeError, match="Expected 3D or 4D tensor"):
        F.adaptive_avg_pool2d(torch.randn(2, device="neuron"), 2)
    with pytest.raises(RuntimeError, match="non-zero size"):
        F.adaptive_avg_pool2d(torch.randn(1, 0, 4, 4, device="neuron"), 2)


# --------------------------------------------------------------- max_unpool

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_max_unpool(dtype):
    x = make((2, 3, 8, 6), dtype)
    o, i = F.max_pool2d(x, 2, return_indices=True)
    on, inn = o.to("neuron"), i.to("neuron")
    torch.testing.assert_close(F.max_unpool2d(on, inn, 2).cpu(), F.max_unpool2d(o, i, 2))
    torch.testing.assert_close(F.max_unpool2d(on, inn, 2, output_size=(9, 7)).cpu(),
                               F.max_unpool2d(o, i, 2, output_size=(9, 7)))
    x1 = make((2, 3, 10), dtype)
    o1, i1 = F.max_pool1d(x1, 2, return_indices=True)
    torch.testing.assert_close(F.max_unpool1d(o1.to("neuron"), i1.to("neuron"), 2).cpu(), F.max_unpool1d(o1, i1, 2))
    x3 = make((2, 2, 4, 6, 4), dtype)
    o3, i3 = F.max_pool3d(x3, 2, return_indices=True)
    torch.testing.assert_close(F.max_unpool3d(o3.to("neuron"), i3.to("neuron"), 2).cpu(), F.max_unpool3d(o3, i3, 2))
    cl = on.contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(F.max_unpool2d(cl, inn, 2).cpu(), F.max_unpool2d(o, i, 2))


def test_max_unpool_bad_index():
    o = torch.randn(1, 1, 2, 2, device="neuron")
    i = torch.tensor([[[[0, 1], [2, 99]]]], device="neuron")
    with pytest.raises(RuntimeError, match="Found an invalid max index: 99"):
        F.max_unpool2d(o, i, 2)
        torch.neuron.synchronize()


# -------------------------------------------------------------- interpolate

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("mode", ["nearest", "nearest-exact", "bilinear", "bicubic", "area"])
@pytest.mark.parametrize("size", [dict(scale_factor=1.7), dict(scale_factor=0.6), dict(size=(5, 11)),
                                  dict(scale_factor=2)])
def test_interpolate_2d(dtype, mode, size):
    x = make((2, 3, 6, 7), dtype)
    t = tol_for(dtype) if dtype in (torch.bfloat16, torch.float16) else dict(atol=1e-5, rtol=1e-5)
    for name, v in layouts(x):
        check(lambda u: F.interpolate(u, mode=mode, **size), v, **t)
        if mode in ("bilinear", "bicubic"):
            check(lambda u: F.interpolate(u, mode=mode, align_corners=True, **size), v, **t)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("mode", ["nearest", "nearest-exact", "linear", "area"])
def test_interpolate_1d(dtype, mode):
    x = make((2, 3, 9), dtype)
    t = tol_for(dtype)
    for sf in (1.5, 0.5, 3):
        check(lambda u: F.interpolate(u, scale_factor=sf, mode=mode), x, **t)
    check(lambda u: F.interpolate(u, size=13, mode=mode), x, **t)
    if mode == "linear":
        check(lambda u: F.interpolate(u, size=13, mode=mode, align_corners=True), x, **t)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("mode", ["nearest", "nearest-exact", "trilinear", "area"])
def test_interpolate_3d(dtype, mode):
    x = make((1, 2, 4, 5, 3), dtype)
    t = tol_for(dtype) if dtype != torch.float32 else dict(atol=1e-5, rtol=1e-5)
    for name, v in layouts(x):
        check(lambda u: F.interpolate(u, scale_factor=(1.5, 0.7, 2), mode=mode), v, **t)
    check(lambda u: F.interpolate(u, size=(3, 7, 5), mode=mode), x, **t)
    if mode == "trilinear":
        check(lambda u: F.interpolate(u, size=(3, 7, 5), mode=mode, align_corners=True), x, **t)


def test_interpolate_bit_exact_float32():
    """Nearest indices and max pooling are the CPU's exactly (bilinear is
    within rounding of the CPU, whose vectorised loop sums in another
    order; it is checked with tolerances above)."""
    x = make((2, 3, 13, 11))
    xn = x.to("neuron")
    for kw in [dict(mode="nearest", scale_factor=1.3), dict(mode="nearest-exact", size=(17, 5)),
               dict(mode="nearest", size=(7, 29))]:
        assert torch.equal(F.interpolate(xn, **kw).cpu(), F.interpolate(x, **kw)), kw
    assert torch.equal(F.max_pool2d(xn, 3, 2, 1).cpu(), F.max_pool2d(x, 3, 2, 1))


def test_interpolate_uint8_nearest():
    x = make((1, 3, 5, 6), torch.uint8) + 60
    check(lambda u: F.interpolate(u, scale_factor=1.5, mode="nearest"), x, grad=False)
    check(lambda u: F.interpolate(u, size=(4, 9), mode="nearest-exact"), x, grad=False)


def test_upsample_out_variant():
    x = make((1, 2, 4, 4))
    out = torch.empty(0, device="neuron")
    torch.ops.aten.upsample_bilinear2d.out(x.to("neuron"), [7, 6], False, None, None, out=out)
    torch.testing.assert_close(out.cpu(), torch.ops.aten.upsample_bilinear2d(x, [7, 6], False, None, None))
