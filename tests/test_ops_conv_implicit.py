"""The implicit-GEMM convolution path (kernels/src/conv/conv_implicit.c) against
torch CPU, with the path forced on (and off, as a control) through
TORCHNEURON_CONV_IMPLICIT, which conv.c reads on every call: stride-1
convolutions in 1-3 dims with padding up to the kernel's extent and beyond
it (those go back to im2col), dilation, groups, bias, strided and
channels-last inputs, and the weight gradient of an input holding inf/NaN
(left to im2col, because the padded grid's dropped columns would multiply
them by zero).  Forward, input and weight gradients, float32 and float64,
in fallback mode "error".  bfloat16 (both paths, and both ways: on the
AVX512_BF16 dot-product GEMM and widened to float32) against the float32
convolution of the same values within one rounding, and against the CPU's
bfloat16: bias or not, groups, stride, padding, dilation, 1x1 (direct),
transposed, channels-last and strided inputs and weights."""
import os
import random

import pytest
import torch
import torch.nn.functional as F

import torch_neuronx  # noqa: F401
from torch_neuronx._fallback import fallback_mode


@pytest.fixture(params=["1", "0"], ids=["implicit", "im2col"])
def path(request):
    # the direct 3x3 kernels (test_ops_conv_direct.py) off, so that their
    # shapes take the path named here
    old = {v: os.environ.get(v) for v in ("TORCHNEURON_CONV_IMPLICIT", "TORCHNEURON_CONV_DIRECT")}
    os.environ["TORCHNEURON_CONV_IMPLICIT"] = request.param
    os.environ["TORCHNEURON_CONV_DIRECT"] = "0"
    with fallback_mode("error"):
        yield request.param
    for var, value in old.items():
        if value is None:
            os.environ.pop(var, None)
        else:
            os.environ[var] = value


def check(nd, n, cin, cout, size, k, padding, dilation, groups, bias, dtype, layout="contiguous",
          seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn((n, cin) + (size,) * nd, generator=g, dtype=dtype)
    w = torch.randn((cout, cin // groups) + (k,) * nd, generator=g, dtype=dtype) * 0.3
    b = torch.randn(cout, generator=g, dtype=dtype) if bias else None
    conv = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[nd]
    args = dict(padding=padding, dilation=dilation, groups=groups)
    y = conv(x, w, b, **args)
    gy = torch.randn(y.shape, generator=g, dtype=dtype)
    ref = [x.clone().requires_grad_(), w.clone().requires_grad_()] + ([b.clone().requires_grad_()] if bias else [])
    dx = x.to("neuron")
    if layout == "channels_last" and nd == 2:
        dx = dx.contiguous(memory_format=torch.channels_last)
    elif layout == "strided":
        dx = torch.stack([dx, dx], dim=-1)[..., 0]  # width stride 2
    dev = [dx.detach().requires_grad_(), w.to("neuron").requires_grad_()] + (
        [b.to("neuron").requires_grad_()] if bias else [])
    out_ref = conv(ref[0], ref[1], ref[2] if bias else None, **args)
    out_dev = conv(dev[0], dev[1], dev[2] if bias else None, **args)
    tol = dict(atol=1e-4, rtol=1e-4) if dtype == torch.float32 else dict(atol=1e-10, rtol=1e-10)
    torch.testing.assert_close(out_dev.cpu(), out_ref.detach(), **tol)
    grads_ref = torch.autograd.grad(out_ref, ref, gy)
    grads_dev = torch.autograd.grad(out_dev, dev, gy.to("neuron"))
    for a, e in zip(grads_dev, grads_ref):
        torch.testing.assert_close(a.cpu(), e, **tol)


CASES = [
    # nd, n, cin, cout, size, k, padding, dilation, groups, bias
    (2, 4, 16, 16, 16, 3, 1, 1, 1, False),   # the small ResNet's layer
    (2, 3, 32, 32, 8, 3, 1, 1, 1, True),
    (2, 2, 3, 16, 16, 3, 1, 1, 1, False),    # stem: 3 input channels
    (2, 2, 5, 7, 9, 3, 0, 1, 1, True),       # no padding
    (2, 2, 4, 6, 10, 5, 2, 1, 1, False),
    (2, 2, 4, 6, 11, 3, 2, 2, 1, True),      # dilation, padding = extent / 2
    (2, 2, 4, 6, 7, 3, 3, 1, 1, False),      # padding beyond the extent: im2col
    (2, 2, 6, 9, 8, 3, 1, 1, 3, True),       # groups
    (2, 5, 8, 13, 7, 3, 1, 1, 1, False),     # odd channel counts: edge tiles
    (2, 1, 40, 100, 6, 3, 1, 1, 1, True),    # more rows than one tile
    (1, 3, 6, 10, 33, 5, 2, 1, 1, True),
    (1, 2, 4, 4, 20, 3, 4, 3, 2, False),
    (3, 2, 4, 5, 6, 3, 1, 1, 1, True),
    (3, 1, 3, 4, 5, 2, 1, 1, 1, False),      # even kernel
]


@pytest.mark.parametrize("case", CASES, ids=[str(c) for c in CASES])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_matches_cpu(path, case, dtype):
    check(*case, dtype=dtype)


@pytest.mark.parametrize("layout", ["channels_last", "strided"])
def test_layouts(path, layout):
    check(2, 3, 8, 12, 10, 3, 1, 1, 1, True, torch.float32, layout=layout)


def test_random_shapes(path):
    rng = random.Random(7)
    for seed in range(12):
        nd = rng.choice([1, 2, 3])
        k = rng.choice([1, 2, 3])
        d = rng.choice([1, 2])
        groups = rng.choice([1, 2])
        cin, cout = groups * rng.randint(1, 5), groups * rng.randint(1, 6)
        size = rng.randint((k - 1) * d + 1, 9)
        check(nd, rng.randint(1, 4), cin, cout, size, k, rng.randint(0, (k - 1) * d + 1), d, groups,
              rng.random() < 0.5, torch.float32, seed=seed)


@pytest.mark.parametrize("size", [15, 16])
@pytest.mark.parametrize("padding", [0, 1, 2])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_stride2_phases(path, size, padding, dtype):
    """Stride 2: the padded copy splits each row into its even and odd
    phase (in one pass for float32 and bfloat16 sources), odd widths
    included; forward and weight gradient against the CPU."""
    g = torch.Generator().manual_seed(size + padding)
    x = torch.randn(3, 5, size, size + 2, generator=g).to(dtype)
    w = (torch.randn(4, 5, 3, 3, generator=g) * 0.3).to(dtype)
    ref_x, ref_w = x.clone().requires_grad_(), w.clone().requires_grad_()
    ref = F.conv2d(ref_x, ref_w, stride=2, padding=padding)
    gy = torch.randn(ref.shape, generator=g).to(dtype)
    dw_ref = torch.autograd.grad(ref, ref_w, gy)[0]
    dev_w = w.to("neuron").requires_grad_()
    got = F.conv2d(x.to("neuron"), dev_w, stride=2, padding=padding)
    dw = torch.autograd.grad(got, dev_w, gy.to("neuron"))[0]
    tol = dict(atol=1e-4, rtol=1e-4) if dtype == torch.float32 else dict(atol=0.1, rtol=2e-2)
    torch.testing.assert_close(got.cpu(), ref.detach(), **tol)
    torch.testing.assert_close(dw.cpu(), dw_ref, **tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_weight_grad_with_inf(path, dtype):
    """An inf in the input: the CPU's weight gradient is inf/NaN exactly where
    the inf meets the gradient, and finite elsewhere; so is ours (the padded
    copy's exponent test per dtype, conv_implicit.c)."""
    x = torch.randn(2, 4, 8, 8)
    x[0, 1, 0, 0] = float("inf")
    x[1, 2, 7, 7] = float("nan")
    w = torch.randn(6, 4, 3, 3)
    gy = torch.randn(2, 6, 8, 8)
    x, w, gy = x.to(dtype), w.to(dtype), gy.to(dtype)
    ref = torch.autograd.grad(F.conv2d(x, w.requires_grad_(), padding=1), w, gy)[0]
    wd = w.detach().to("neuron").requires_grad_()
    got = torch.autograd.grad(F.conv2d(x.to("neuron"), wd, padding=1), wd, gy.to("neuron"))[0].cpu()
    assert torch.equal(torch.isfinite(got), torch.isfinite(ref))
    assert torch.isfinite(ref).any() and not torch.isfinite(ref).all()
    tol = 5e-2 if dtype == torch.bfloat16 else 1e-4
    torch.testing.assert_close(got.float(), ref.float(), atol=tol, rtol=tol, equal_nan=True)


# ---------------------------------------------------------------- bfloat16
# bfloat16 convolutions on both paths (the fixture above) and both ways of
# computing them: operands handed to the AVX512_BF16 dot-product GEMM as
# bfloat16 (TORCHNEURON_CONV_BF16_DOT=1, on a CPU that has it; conv.c's own
# choice picks one of the two per shape) and widened to float32 copies
# ("0").  Either way the products are exact and
# summed in float32, and the result is rounded to bfloat16 once, so it must
# be within a rounding of the float32 convolution of the same bfloat16
# values (tighter than a bfloat16-vs-float32 comparison: a mis-paired k
# index, a bias added after rounding or a col kept in bfloat16 all fail it),
# and close to the CPU's own bfloat16 convolution.


@pytest.fixture(params=["dot", "widened"])
def bf16_way(request):
    old = os.environ.get("TORCHNEURON_CONV_BF16_DOT")
    os.environ["TORCHNEURON_CONV_BF16_DOT"] = "0" if request.param == "widened" else "1"
    yield request.param
    if old is None:
        os.environ.pop("TORCHNEURON_CONV_BF16_DOT", None)
    else:
        os.environ["TORCHNEURON_CONV_BF16_DOT"] = old


def within_one_rounding(got, ref):
    """got (bfloat16, neuron) against ref (float32 from bfloat16 inputs):
    |got - ref| <= 2^-8 |ref| (half an ulp, with room for float32 summation
    order) + a small floor for sums that cancel."""
    got = got.cpu().float()
    floor = 1e-4 * (ref.abs().max().item() + 1)
    bad = (got - ref).abs() > ref.abs() * 2 ** -8 + floor
    assert not bad.any(), (f"{int(bad.sum())} of {bad.numel()} elements off, worst "
                           f"{(got - ref).abs().max().item():.4g} at max |ref| {ref.abs().max().item():.4g}")


def check_bf16(nd, n, cin, cout, size, k, stride=1, padding=0, dilation=1, groups=1, bias=True,
               transposed=False, output_padding=0, layout="contiguous", seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn((n, cin) + (size,) * nd, generator=g).bfloat16()
    wshape = (cin, cout // groups) if transposed else (cout, cin // groups)
    w = (torch.randn(wshape + (k,) * nd, generator=g) * 0.3).bfloat16()
    b = torch.randn(cout, generator=g).bfloat16() if bias else None
    if transposed:
        conv = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}[nd]
        args = dict(stride=stride, padding=padding, output_padding=output_padding, groups=groups,
                    dilation=dilation)
    else:
        conv = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[nd]
        args = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    gy = torch.randn(conv(x.float(), w.float(), None, **args).shape, generator=g).bfloat16()
    # references: float32 of the bfloat16 values, and the CPU in bfloat16
    ref = [t.float().requires_grad_() for t in (x, w) + ((b,) if bias else ())]
    cpu = [t.clone().requires_grad_() for t in (x, w) + ((b,) if bias else ())]
    out_ref = conv(ref[0], ref[1], ref[2] if bias else None, **args)
    out_cpu = conv(cpu[0], cpu[1], cpu[2] if bias else None, **args)
    dx = x.to("neuron")
    if layout == "channels_last" and nd == 2:
        dx = dx.contiguous(memory_format=torch.channels_last)
    elif layout == "strided":
        dx = torch.stack([dx, dx], dim=-1)[..., 0]  # last-dim stride 2
    dw = w.to("neuron")
    if layout == "strided":
        dw = torch.stack([dw, dw], dim=1)[:, 0]  # a non-contiguous weight too
    dev = [dx.detach().requires_grad_(), dw.detach().requires_grad_()] + (
        [b.to("neuron").requires_grad_()] if bias else [])
    out_dev = conv(dev[0], dev[1], dev[2] if bias else None, **args)
    assert out_dev.dtype == torch.bfloat16
    if not (transposed and bias):  # (the glue adds a transposed conv's bias afterwards: two roundings)
        within_one_rounding(out_dev, out_ref.detach())
    torch.testing.assert_close(out_dev.cpu(), out_cpu.detach(), atol=2e-2, rtol=1.6e-2)
    grads_ref = torch.autograd.grad(out_ref, ref, gy.float())
    grads_cpu = torch.autograd.grad(out_cpu, cpu, gy)
    grads_dev = torch.autograd.grad(out_dev, dev, gy.to("neuron"))
    for d, r, c in zip(grads_dev, grads_ref, grads_cpu):
        assert d.dtype == torch.bfloat16
        within_one_rounding(d, r)
        scale = c.float().abs().max().item() + 1
        torch.testing.assert_close(d.cpu().float(), c.float(), atol=2e-2 * scale, rtol=1.6e-2)


BF16_CASES = [
    # nd, n, cin, cout, size, k, dict(stride, padding, dilation, groups, bias)
    (2, 4, 16, 16, 16, 3, dict(padding=1, bias=False)),      # the small ResNet's layers
    (2, 3, 16, 32, 16, 3, dict(stride=2, padding=1, bias=False)),
    (2, 2, 32, 32, 8, 3, dict(padding=1)),
    (2, 2, 3, 16, 16, 3, dict(padding=1)),                   # stem: 3 input channels (odd k)
    (2, 3, 16, 32, 16, 1, dict(stride=2, bias=False)),       # projection: 1x1 stride 2
    (2, 3, 24, 40, 7, 1, dict()),                            # 1x1: the direct path
    (2, 2, 6, 9, 8, 3, dict(padding=1, groups=3)),           # groups
    (2, 2, 5, 7, 9, 3, dict(bias=False)),                    # no padding
    (2, 2, 4, 6, 11, 3, dict(padding=2, dilation=2)),
    (2, 2, 4, 6, 7, 3, dict(padding=3)),                     # padding beyond the extent
    (2, 1, 40, 100, 6, 3, dict(padding=1)),                  # more rows than one tile
    (2, 2, 8, 12, 9, 3, dict(stride=(2, 1), padding=(1, 0))),
    (1, 3, 6, 10, 33, 5, dict(padding=2)),
    (3, 2, 4, 5, 6, 3, dict(padding=1)),
]


@pytest.mark.parametrize("case", BF16_CASES, ids=[str(c) for c in BF16_CASES])
def test_bf16_matches_cpu(path, bf16_way, case):
    nd, n, cin, cout, size, k, kw = case
    check_bf16(nd, n, cin, cout, size, k, **kw)


@pytest.mark.parametrize("layout", ["channels_last", "strided"])
def test_bf16_layouts(path, bf16_way, layout):
    check_bf16(2, 3, 8, 12, 10, 3, padding=1, layout=layout)
    check_bf16(2, 2, 16, 8, 6, 1, layout=layout)


def test_bf16_transposed(path, bf16_way):
    check_bf16(2, 2, 16, 8, 7, 3, stride=2, padding=1, output_padding=1, transposed=True)
    check_bf16(2, 2, 6, 9, 8, 3, padding=1, groups=3, transposed=True, bias=False)
    check_bf16(1, 3, 8, 4, 10, 4, stride=2, padding=1, transposed=True)
