"""The direct 3x3 convolution (kernels/src/conv/conv_direct.c: float32,
stride 1 or 2 (phase planes; the strided input gradient goes elsewhere),
padding 1, one group) against torch CPU, forced on wherever the
shape allows (TORCHNEURON_CONV_DIRECT=1, read by conv.c on every call, any
channel count) and off as a control: forward with and without bias, input
and weight gradients, planes around the vector width (a vector's tail, a
vector spanning rows, one row, one column, 1x1), channel counts around the
register tiles, batch and channel slices (larger sample and channel
strides, still read in place), layouts the kernel declines (channels-last,
a strided width), the 4096-position limit, an inf/NaN input, and the
threads not changing a bit."""
import os

import pytest
import torch
import torch.nn.functional as F

import torch_neuronx  # noqa: F401
from torch_neuronx._fallback import fallback_mode


@pytest.fixture(params=["1", "0"], ids=["direct", "other"])
def path(request):
    old = os.environ.get("TORCHNEURON_CONV_DIRECT")
    os.environ["TORCHNEURON_CONV_DIRECT"] = request.param
    with fallback_mode("error"):
        yield request.param
    if old is None:
        os.environ.pop("TORCHNEURON_CONV_DIRECT", None)
    else:
        os.environ["TORCHNEURON_CONV_DIRECT"] = old


def run(x, w, b, gy, stride=1):
    """(y, dx, dw, db) of conv2d(x, w, b, stride, padding=1) and the gradient gy."""
    leaves = [x.detach().requires_grad_(), w.detach().requires_grad_()]
    if b is not None:
        leaves.append(b.detach().requires_grad_())
    y = F.conv2d(leaves[0], leaves[1], leaves[2] if b is not None else None, stride=stride, padding=1)
    return [y.detach()] + list(torch.autograd.grad(y, leaves, gy))


def check(n, cin, cout, h, w, bias, view=None, seed=0, stride=1):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, cin, h, w, generator=g)
    wt = torch.randn(cout, cin, 3, 3, generator=g) * 0.3
    b = torch.randn(cout, generator=g) if bias else None
    sh, sw = (stride, stride) if isinstance(stride, int) else stride
    gy = torch.randn(n, cout, (h - 1) // sh + 1, (w - 1) // sw + 1, generator=g)
    dx = x.to("neuron")
    if view == "batch_slice":  # every other sample: a larger sample stride
        x, dx = torch.cat([x, x]), torch.cat([dx, dx])
        x, dx = x[::2], dx[::2]
    elif view == "channel_slice":  # every other channel: a larger channel stride
        x = torch.stack([x, x], dim=2).flatten(1, 2)[:, ::2]
        dx = x.to("neuron").unflatten(1, (cin, 1)).expand(n, cin, 2, h, w).flatten(1, 2)[:, ::2]
    elif view == "channels_last":
        dx = dx.contiguous(memory_format=torch.channels_last)
    elif view == "strided_width":
        dx = torch.stack([dx, dx], dim=-1)[..., 0]
    ref = run(x, wt, b, gy, stride)
    got = run(dx, wt.to("neuron"), None if b is None else b.to("neuron"), gy.to("neuron"), stride)
    for name, a, e in zip(["y", "dx", "dw", "db"], got, ref):
        torch.testing.assert_close(a.cpu(), e, atol=1e-4, rtol=1e-4, msg=lambda m: f"{name}: {m}")


CASES = [
    # n, cin, cout, h, w, bias
    (4, 16, 16, 16, 16, False),  # the CNN example's layers
    (3, 32, 32, 8, 8, True),     # a vector spans two rows (AVX-512)
    (2, 3, 16, 16, 16, True),    # the stem
    (2, 5, 7, 7, 7, True),       # 49 positions: a vector's tail
    (2, 1, 1, 1, 1, True),       # one position: every tap but the centre is padding
    (2, 3, 9, 1, 37, False),     # one row
    (2, 6, 3, 19, 1, True),      # one column
    (2, 33, 13, 5, 3, False),    # channels past the tiles, odd counts
    (1, 2, 5, 64, 64, True),     # 4096 positions: the limit
    (1, 2, 3, 65, 64, False),    # past it: another path
    (0, 4, 4, 8, 8, True),       # empty batch: dw is zero
]


@pytest.mark.parametrize("case", CASES, ids=[str(c) for c in CASES])
def test_matches_cpu(path, case):
    check(*case)


STRIDED = [
    # n, cin, cout, h, w, bias, stride: the input split into phase planes
    (4, 16, 32, 16, 16, False, 2),  # the CNN example's downsampling layer
    (3, 5, 7, 9, 11, True, 2),      # odd sizes: a phase plane past the input
    (2, 3, 4, 15, 7, True, (2, 1)),
    (2, 3, 4, 6, 9, False, (1, 2)),
    (2, 2, 3, 1, 1, True, 2),
]


@pytest.mark.parametrize("case", STRIDED, ids=[str(c) for c in STRIDED])
def test_stride_2(path, case):
    check(*case[:6], stride=case[6])


@pytest.mark.parametrize("view", ["batch_slice", "channel_slice", "channels_last", "strided_width"])
def test_views(path, view):
    check(3, 6, 8, 9, 10, True, view=view)


def test_inf_and_nan_inputs(path):
    """An inf or NaN input meets the weight only at real taps (the masked
    lanes are never read), so the output and both gradients are non-finite
    exactly where the CPU's are."""
    x = torch.randn(2, 4, 8, 8)
    x[0, 1, 0, 0] = float("inf")
    x[1, 2, 7, 7] = float("nan")
    w = torch.randn(6, 4, 3, 3)
    gy = torch.randn(2, 6, 8, 8)
    ref = run(x, w, None, gy)
    got = [t.cpu() for t in run(x.to("neuron"), w.to("neuron"), None, gy.to("neuron"))]
    for a, e in zip(got, ref):
        assert torch.equal(torch.isfinite(a), torch.isfinite(e))
        torch.testing.assert_close(a, e, atol=1e-4, rtol=1e-4, equal_nan=True)


def test_threads_do_not_change_the_bits(path):
    """Every sum runs in an order fixed by the shapes: one compute thread
    and all of them give the same bits (the weight gradient's tiles each
    sum every sample themselves)."""
    import subprocess
    import sys
    code = """
import torch, torch_neuronx, torch.nn.functional as F, hashlib
g = torch.Generator().manual_seed(0)
x = torch.randn(8, 16, 16, 16, generator=g).to("neuron").requires_grad_()
w = torch.randn(16, 16, 3, 3, generator=g).to("neuron").requires_grad_()
y = F.conv2d(x, w, padding=1)
y.backward(torch.randn(y.shape, generator=g).to("neuron"))
print(hashlib.sha256(b"".join(t.detach().cpu().numpy().tobytes() for t in (y, x.grad, w.grad))).hexdigest())
"""
    digests = set()
    for threads in ("1", "2", "3"):
        env = dict(os.environ, TORCHNEURON_NUM_THREADS=threads)
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 0, r.stderr[-500:]
        digests.add(r.stdout.strip())
    assert len(digests) == 1
