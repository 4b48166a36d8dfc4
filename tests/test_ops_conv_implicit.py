"""The implicit-GEMM convolution path (kernels/src/conv_implicit.c) against
torch CPU, with the path forced on (and off, as a control) through
TORCHNEURON_CONV_IMPLICIT, which conv.c reads on every call: stride-1
convolutions in 1-3 dims with padding up to the kernel's extent and beyond
it (those go back to im2col), dilation, groups, bias, strided and
channels-last inputs, and the weight gradient of an input holding inf/NaN
(left to im2col, because the padded grid's dropped columns would multiply
them by zero).  Forward, input and weight gradients, float32 and float64,
in fallback mode "error"."""
import os
import random

import pytest
import torch
import torch.nn.functional as F

import torchneuron  # noqa: F401
from torchneuron._fallback import fallback_mode


@pytest.fixture(params=["1", "0"], ids=["implicit", "im2col"])
def path(request):
    old = os.environ.get("TORCHNEURON_CONV_IMPLICIT")
    os.environ["TORCHNEURON_CONV_IMPLICIT"] = request.param
    with fallback_mode("error"):
        yield request.param
    if old is None:
        del os.environ["TORCHNEURON_CONV_IMPLICIT"]
    else:
        os.environ["TORCHNEURON_CONV_IMPLICIT"] = old


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


def test_weight_grad_with_inf(path):
    """An inf in the input: the CPU's weight gradient is inf/NaN exactly where
    the inf meets the gradient, and finite elsewhere; so is ours."""
    x = torch.randn(2, 4, 8, 8)
    x[0, 1, 0, 0] = float("inf")
    x[1, 2, 7, 7] = float("nan")
    w = torch.randn(6, 4, 3, 3)
    gy = torch.randn(2, 6, 8, 8)
    ref = torch.autograd.grad(F.conv2d(x, w.requires_grad_(), padding=1), w, gy)[0]
    wd = w.detach().to("neuron").requires_grad_()
    got = torch.autograd.grad(F.conv2d(x.to("neuron"), wd, padding=1), wd, gy.to("neuron"))[0]
    torch.testing.assert_close(got.cpu(), ref, atol=1e-4, rtol=1e-4, equal_nan=True)
    assert torch.isfinite(ref).any() and not torch.isfinite(ref).all()
