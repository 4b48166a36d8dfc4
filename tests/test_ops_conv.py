"""Convolution on neuron (ops_conv.cpp, kernels/src/conv/conv.c) against torch CPU:
conv1d/2d/3d and conv_transpose1d/2d/3d with stride/padding/dilation/groups
(depthwise included), 'same'/'valid' padding, non-contiguous and channels-last
inputs, empty batches, gradients for input/weight/bias, unfold/fold, and the
CPU's error messages.  Everything runs in fallback mode "error", so a silent
CPU fallback fails the test."""
import random

import pytest
import torch
import torch.nn.functional as F

import torch_neuronx  # noqa: F401
from torch_neuronx._fallback import fallback_mode

FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


@pytest.fixture(autouse=True)
def native():
    with fallback_mode("error"):
        yield


def tol(dtype):
    return {torch.float32: dict(atol=1e-4, rtol=1e-4), torch.float64: dict(atol=1e-10, rtol=1e-10),
            torch.float16: dict(atol=2e-2, rtol=2e-2), torch.bfloat16: dict(atol=1e-1, rtol=5e-2)}[dtype]


def close(actual, expected, dtype):
    assert actual.device.type == "neuron"
    torch.testing.assert_close(actual.cpu().double(), expected.double(), **tol(dtype))


def rand(shape, dtype, gen):
    return torch.randn(shape, generator=gen, dtype=torch.float64).to(dtype)


def run_both(fn, tensors, dtype, grads=True):
    """fn(*tensors) on the CPU (in float32 for 16-bit dtypes, the reference)
    and on neuron; compares the outputs and, with grads, the gradients of
    every tensor for a random upstream gradient."""
    ref_dtype = torch.float64 if dtype == torch.float64 else torch.float32
    cpu = [t.detach().to(ref_dtype).requires_grad_(grads) for t in tensors]
    dev = [t.detach().to("neuron").requires_grad_(grads) for t in tensors]
    out_cpu = fn(*cpu)
    out_dev = fn(*dev)
    assert out_dev.dtype == dtype
    close(out_dev, out_cpu, dtype)
    if not grads:
        return
    g = torch.randn(out_cpu.shape, dtype=torch.float64).to(dtype)
    out_cpu.backward(g.to(ref_dtype))
    out_dev.backward(g.to("neuron"))
    for c, d in zip(cpu, dev):
        close(d.grad, c.grad, dtype)


def conv_case(rng, nd, transposed):
    groups = rng.choice([1, 1, 2, 3])
    cin = groups * rng.choice([1, 2, 3])
    cout = groups * rng.choice([1, 2])
    n = rng.choice([1, 2, 3])
    k = [rng.choice([1, 2, 3]) for _ in range(nd)]
    s = [rng.choice([1, 2, 3]) for _ in range(nd)]
    d = [rng.choice([1, 2]) for _ in range(nd)]
    p = [rng.choice([0, 1, 2]) for _ in range(nd)]
    size = [rng.choice([1, 2, 5, 7, 11]) for _ in range(nd)]
    op = [0] * nd
    if transposed:
        op = [rng.randrange(0, max(s[i], d[i])) for i in range(nd)]
        # the output must have positions: (size - 1) * s - 2p + d(k - 1) + op + 1 >= 1
        p = [p[i] if (size[i] - 1) * s[i] - 2 * p[i] + d[i] * (k[i] - 1) + op[i] >= 0 else 0
             for i in range(nd)]
    else:
        # the dilated kernel must fit the padded input
        size = [max(size[i], d[i] * (k[i] - 1) + 1 - 2 * p[i]) for i in range(nd)]
    return n, cin, cout, groups, k, s, d, p, size, op


CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
CONVT = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("dtype", FLOATS)
def test_random_sweep(nd, transposed, dtype):
    rng = random.Random(nd * 10 + transposed + FLOATS.index(dtype) * 100)
    gen = torch.Generator().manual_seed(nd)
    for _ in range(6 if nd < 3 else 3):
        n, cin, cout, groups, k, s, d, p, size, op = conv_case(rng, nd, transposed)
        x = rand([n, cin] + size, dtype, gen)
        if transposed:
            w = rand([cin, cout // groups] + k, dtype, gen)
        else:
            w = rand([cout, cin // groups] + k, dtype, gen)
        b = rand([cout], dtype, gen)
        if transposed:
            fn = lambda x, w, b: CONVT[nd](x, w, b, stride=s, padding=p, output_padding=op,
                                           groups=groups, dilation=d)
        else:
            fn = lambda x, w, b: CONV[nd](x, w, b, stride=s, padding=p, dilation=d, groups=groups)
        run_both(fn, [x, w, b], dtype, grads=dtype in (torch.float32, torch.float64))


@pytest.mark.parametrize("dtype", FLOATS)
def test_16bit_gradients(dtype):
    gen = torch.Generator().manual_seed(3)
    x, w, b = rand([2, 4, 9, 8], dtype, gen), rand([6, 2, 3, 3], dtype, gen), rand([6], dtype, gen)
    run_both(lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1, groups=2), [x, w, b], dtype)
    wt = rand([4, 3, 2, 3], dtype, gen)
    run_both(lambda x, w: F.conv_transpose2d(x, w, stride=(2, 1), padding=1, output_padding=(1, 0)),
             [x, wt], dtype)


@pytest.mark.parametrize("padding", ["same", "valid"])
@pytest.mark.parametrize("nd", [1, 2, 3])
def test_padding_modes(padding, nd):
    gen = torch.Generator().manual_seed(5)
    size = [7, 6, 5][:nd]
    x = rand([2, 3] + size, torch.float32, gen)
    w = rand([4, 3] + [4, 3, 2][:nd], torch.float32, gen)  # even kernel: asymmetric 'same'
    run_both(lambda x, w: CONV[nd](x, w, padding=padding, dilation=2 if padding == "same" else 1),
             [x, w], torch.float32)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_depthwise(dtype):
    gen = torch.Generator().manual_seed(7)
    for mult in (1, 2):
        x = rand([3, 8, 13, 11], dtype, gen)
        w = rand([8 * mult, 1, 3, 3], dtype, gen)
        b = rand([8 * mult], dtype, gen)
        run_both(lambda x, w, b: F.conv2d(x, w, b, stride=(2, 1), padding=(1, 2), dilation=(1, 2),
                                          groups=8), [x, w, b], dtype)
    x1 = rand([2, 5, 17], dtype, gen)
    w1 = rand([5, 1, 5], dtype, gen)
    run_both(lambda x, w: F.conv1d(x, w, padding=2, groups=5), [x1, w1], dtype)


def test_layouts():
    gen = torch.Generator().manual_seed(11)
    x = rand([2, 6, 9, 10], torch.float32, gen)
    w = rand([5, 6, 3, 3], torch.float32, gen)
    b = rand([5], torch.float32, gen)
    fn = lambda x, w, b: F.conv2d(x, w, b, padding=1)
    # channels last input and weight
    xd = x.to("neuron").to(memory_format=torch.channels_last).requires_grad_()
    wd = w.to("neuron").to(memory_format=torch.channels_last).requires_grad_()
    out = fn(xd, wd, b.to("neuron"))
    # The layout ATen predicts for this backend (what fake tensors and so
    # torch.compile assume), not the input's.
    predicted = torch._C._conv_determine_backend_memory_format(
        xd, wd, torch._C._ConvBackend.Overrideable)
    assert predicted == torch.contiguous_format
    assert out.is_contiguous(memory_format=predicted)
    close(out, fn(x, w, b), torch.float32)
    out.sum().backward()
    xc, wc = x.clone().requires_grad_(), w.clone().requires_grad_()
    fn(xc, wc, b).sum().backward()
    close(xd.grad, xc.grad, torch.float32)
    close(wd.grad, wc.grad, torch.float32)
    # non-contiguous: a transposed and a sliced view
    xt = rand([2, 10, 9, 6], torch.float32, gen)
    run_both(lambda x, w, b: fn(x.permute(0, 3, 2, 1), w, b), [xt, w, b], torch.float32)
    xs = rand([2, 6, 18, 20], torch.float32, gen)
    run_both(lambda x, w, b: fn(x[:, :, ::2, 1::2], w[:, :, :, :], b), [xs, w, b], torch.float32)
    # 1x1 on a strided view (the no-col path must respect strides)
    w1 = rand([4, 6, 1, 1], torch.float32, gen)
    run_both(lambda x, w: F.conv2d(x[:, :, ::2, ::2], w), [xs, w1], torch.float32)
    # channels_last 3d
    x3 = rand([1, 3, 4, 5, 6], torch.float32, gen)
    w3 = rand([2, 3, 2, 2, 2], torch.float32, gen)
    d3 = x3.to("neuron").to(memory_format=torch.channels_last_3d)
    close(F.conv3d(d3, w3.to("neuron"), padding=1), F.conv3d(x3, w3, padding=1), torch.float32)
    # non-contiguous upstream gradient (expanded: stride 0)
    xd = x.to("neuron").requires_grad_()
    o = F.conv2d(xd, w.to("neuron"))
    o.backward(torch.ones(1, device="neuron").expand_as(o))
    xc = x.clone().requires_grad_()
    oc = F.conv2d(xc, w)
    oc.backward(torch.ones_like(oc))
    close(xd.grad, xc.grad, torch.float32)


def test_empty_and_size_one():
    gen = torch.Generator().manual_seed(13)
    w = rand([4, 3, 3, 3], torch.float32, gen)
    x0 = torch.empty(0, 3, 8, 8)
    out = F.conv2d(x0.to("neuron"), w.to("neuron"), padding=1)
    assert out.shape == (0, 4, 8, 8)
    x1 = rand([1, 3, 1, 1], torch.float32, gen)
    w1 = rand([5, 3, 1, 1], torch.float32, gen)
    run_both(lambda x, w: F.conv2d(x, w), [x1, w1], torch.float32)
    run_both(lambda x, w: F.conv_transpose2d(x, w.transpose(0, 1).contiguous()), [x1, w1],
             torch.float32)


def test_modules_and_large_batch():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, stride=2, padding=1), torch.nn.ReLU(),
                            torch.nn.Conv2d(8, 8, 3, padding=1, groups=8),
                            torch.nn.ConvTranspose2d(8, 4, 2, stride=2))
    x = torch.randn(17, 3, 32, 32)
    md = torch.nn.Sequential(*[l for l in m]).to("neuron")
    import copy
    mc = copy.deepcopy(m).cpu()
    out_c = mc(x)
    out_d = md(x.to("neuron"))
    close(out_d, out_c, torch.float32)
    out_c.square().mean().backward()
    out_d.square().mean().backward()
    for pc, pd in zip(mc.parameters(), md.parameters()):
        close(pd.grad, pc.grad, torch.float32)


@pytest.mark.parametrize("dtype", FLOATS)
def test_unfold_fold(dtype):
    gen = torch.Generator().manual_seed(17)
    x = rand([2, 3, 9, 8], dtype, gen)
    for k, d, p, s in [((2, 3), 1, 0, 1), (3, (2, 1), (1, 2), (2, 3)), (1, 1, 0, 1)]:
        run_both(lambda x: F.unfold(x, k, dilation=d, padding=p, stride=s), [x], dtype,
                 grads=dtype == torch.float64)
        cols = F.unfold(x.float(), k, dilation=d, padding=p, stride=s).to(dtype)
        run_both(lambda c: F.fold(c, (9, 8), k, dilation=d, padding=p, stride=s), [cols], dtype,
                 grads=dtype == torch.float64)
    # unbatched and non-contiguous
    run_both(lambda x: F.unfold(x[0].transpose(1, 2), 2), [x], dtype, grads=False)
    c2 = rand([12, 30], dtype, gen)
    run_both(lambda c: F.fold(c, (6, 7), 2), [c2], dtype, grads=False)


def test_error_messages_match_cpu():
    cases = [
        lambda dev: F.conv2d(torch.randn(1, 3, 5, 5, device=dev), torch.randn(4, 2, 3, 3, device=dev)),
        lambda dev: F.conv2d(torch.randn(1, 3, 2, 2, device=dev), torch.randn(4, 3, 3, 3, device=dev)),
        lambda dev: F.conv2d(torch.randn(1, 4, 5, 5, device=dev), torch.randn(4, 2, 3, 3, device=dev),
                             groups=3),
        lambda dev: F.conv2d(torch.randn(1, 3, 5, 5, device=dev), torch.randn(4, 3, 3, 3, device=dev),
                             stride=0),
        lambda dev: F.conv2d(torch.randn(1, 3, 5, 5, device=dev), torch.randn(4, 3, 3, 3, device=dev),
                             torch.randn(5, device=dev)),
        lambda dev: F.conv2d(torch.randn(3, 5, 5, 5, 5, device=dev), torch.randn(4, 3, 3, 3, device=dev)),
        lambda dev: F.conv_transpose2d(torch.randn(1, 3, 5, 5, device=dev),
                                       torch.randn(3, 2, 3, 3, device=dev), stride=2, output_padding=2),
        lambda dev: F.conv_transpose1d(torch.randn(1, 3, 5, device=dev),
                                       torch.randn(3, 2, 3, device=dev), stride=2, output_padding=2),
        lambda dev: F.conv_transpose3d(torch.randn(1, 3, 2, 2, 2, device=dev),
                                       torch.randn(3, 2, 1, 1, 1, device=dev), output_padding=1),
        lambda dev: F.conv2d(torch.randn(1, 3, 5, 5, device=dev),
                             torch.randn(4, 3, 3, 3, device=dev, dtype=torch.float64)),
        lambda dev: F.conv2d(torch.randn(1, 3, 5, 5, device=dev), torch.randn(4, 3, 3, 3, device=dev),
                             torch.randn(4, device=dev, dtype=torch.float64)),
        lambda dev: F.unfold(torch.randn(1, 3, 2, 2, device=dev), 3),
        lambda dev: F.fold(torch.randn(1, 7, 4, device=dev), (3, 3), 2),
    ]
    for case in cases:
        with pytest.raises(Exception) as cpu_err:
            case("cpu")
        with pytest.raises(type(cpu_err.value)) as dev_err:
            case("neuron")
            torch.neuron.synchronize()
        assert str(dev_err.value).split("\n")[0] == str(cpu_err.value).split("\n")[0]


def test_integer_conv_goes_to_the_cpu():
    x = torch.arange(9).reshape(1, 1, 3, 3)
    w = torch.ones(1, 1, 2, 2, dtype=torch.int64)
    with fallback_mode("silent"):
        out = F.conv2d(x.to("neuron"), w.to("neuron"))
    assert out.device.type == "neuron"
    assert torch.equal(out.cpu(), F.conv2d(x, w))


def test_no_fallback_used():
    torch_neuronx._C.reset_fallback_stats()
    x = torch.randn(2, 3, 8, 8, device="neuron", requires_grad=True)
    w = torch.randn(4, 3, 3, 3, device="neuron", requires_grad=True)
    b = torch.randn(4, device="neuron", requires_grad=True)
    F.conv2d(x, w, b, padding=1).sum().backward()
    F.conv_transpose2d(x, w.transpose(0, 1), b, stride=2).sum().backward()
    F.fold(F.unfold(x, 2), (8, 8), 2).sum().backward()
    torch.neuron.synchronize()
    assert torch_neuronx._C.fallback_stats() == {}
