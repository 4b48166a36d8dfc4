"""Tensor basics that must run natively: every test here runs with the
fallback in error mode (the `native` fixture), so an op that silently went
through the CPU fails.  References are the same ops on CPU tensors."""
import pytest
import torch

from conftest import assert_same

pytestmark = pytest.mark.usefixtures("native")

ALL_DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32,
              torch.int64, torch.float16, torch.bfloat16, torch.float32, torch.float64]
NUMERIC_DTYPES = ALL_DTYPES[1:]


def equal(x, expected):
    assert x.device.type == "neuron", x.device
    assert x.dtype == expected.dtype, (x.dtype, expected.dtype)
    assert x.shape == expected.shape, (x.shape, expected.shape)
    # Exact, with NaN == NaN (bit patterns reinterpreted as floats can be NaN).
    torch.testing.assert_close(x.cpu(), expected, rtol=0, atol=0, equal_nan=True)


# ----------------------------------------------------------------- factories

def test_empty_and_empty_strided():
    x = torch.empty(3, 4, device="neuron")
    assert x.shape == (3, 4) and x.stride() == (4, 1) and x.dtype == torch.float32
    s = torch.empty_strided((2, 3), (1, 2), dtype=torch.float64, device="neuron")
    assert s.stride() == (1, 2) and s.dtype == torch.float64
    assert s.untyped_storage().nbytes() == 6 * 8
    assert torch.empty(0, device="neuron").numel() == 0
    assert torch.empty((), device="neuron").dim() == 0
    assert torch.empty_like(s).stride() == (1, 2)  # preserves the layout, as CPU


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_zeros_ones_full(dtype):
    equal(torch.zeros(2, 3, dtype=dtype, device="neuron"), torch.zeros(2, 3, dtype=dtype))
    equal(torch.ones(5, dtype=dtype, device="neuron"), torch.ones(5, dtype=dtype))
    value = True if dtype == torch.bool else 7
    equal(torch.full((2, 2), value, dtype=dtype, device="neuron"),
          torch.full((2, 2), value, dtype=dtype))
    equal(torch.zeros((), dtype=dtype, device="neuron"), torch.zeros((), dtype=dtype))


def test_full_infers_dtype_and_keeps_precision():
    equal(torch.full((3,), 2.5, device="neuron"), torch.full((3,), 2.5))
    equal(torch.full((3,), 2**53 + 1, device="neuron"), torch.full((3,), 2**53 + 1))
    equal(torch.full((2,), 0.1, dtype=torch.float64, device="neuron"),
          torch.full((2,), 0.1, dtype=torch.float64))
    equal(torch.full((2,), 1 / 3, dtype=torch.bfloat16, device="neuron"),
          torch.full((2,), 1 / 3, dtype=torch.bfloat16))


@pytest.mark.parametrize("args, kwargs", [
    ((10,), {}),
    ((2, 20, 3), {}),
    ((-5, 5), {"dtype": torch.int8}),
    ((0.0, 1.0, 0.1), {}),
    ((1.5, -2.0, -0.25), {"dtype": torch.float64}),
    ((0, 2**40, 2**37), {}),
    ((0,), {}),
])
def test_arange(args, kwargs):
    equal(torch.arange(*args, **kwargs, device="neuron"), torch.arange(*args, **kwargs))


@pytest.mark.parametrize("start, end, steps, dtype", [
    (0, 1, 11, torch.float32), (-3.5, 7.25, 100, torch.float32),
    (0, 1, 1, torch.float32), (5, 5, 4, torch.float64), (0, 10, 7, torch.int64),
    (1, 0, 9, torch.float16), (0, 1, 0, torch.float32), (-1, 1, 1001, torch.float64),
])
def test_linspace(start, end, steps, dtype):
    x = torch.linspace(start, end, steps, dtype=dtype, device="neuron")
    expected = torch.linspace(start, end, steps, dtype=dtype)
    if dtype.is_floating_point:
        # CPU's own result depends on its vector width (lanes are base + i * step
        # from each vector's first element), so elements may differ by an ulp.
        assert_same(x, expected)
        if steps > 0:  # but both ends are exact: the formula counts from each end
            assert (x[0].item(), x[-1].item()) == (expected[0].item(), expected[-1].item())
    else:
        equal(x, expected)


@pytest.mark.parametrize("shape", [(4,), (3, 5), (5, 2), (0,), (1, 1)])
def test_eye(shape):
    equal(torch.eye(*shape, device="neuron"), torch.eye(*shape))
    equal(torch.eye(*shape, dtype=torch.int32, device="neuron"), torch.eye(*shape, dtype=torch.int32))


def test_fill_and_zero_on_views():
    x = torch.arange(20.0, device="neuron").view(4, 5)
    ref = torch.arange(20.0).view(4, 5)
    for t in (x, ref):
        t[:, 1].fill_(-3)
        t[2].zero_()
        t.t()[::2, ::3].fill_(9)
    equal(x, ref)
    y = torch.empty(3, dtype=torch.int16, device="neuron").fill_(-7)
    equal(y, torch.full((3,), -7, dtype=torch.int16))
    z = torch.ones(3, device="neuron").fill_(torch.tensor(2.5))  # 0-dim cpu value
    equal(z, torch.full((3,), 2.5))


# ------------------------------------------------------------------- copies

def test_copy_between_cpu_and_neuron():
    cpu = torch.randn(7, 9)
    x = cpu.to("neuron")
    equal(x, cpu)
    dst = torch.empty(7, 9)
    dst.copy_(x)
    assert torch.equal(dst, cpu)
    back = torch.zeros(7, 9, device="neuron")
    back.copy_(cpu)
    equal(back, cpu)


def test_copy_between_devices():
    cpu = torch.randn(33, 5)
    x0 = cpu.to("neuron:0")
    x1 = x0.to("neuron:1")
    assert x1.device == torch.device("neuron:1")
    equal(x1, cpu)
    target = torch.zeros(5, 33, device="neuron:0")
    target.copy_(x1.t())  # strided source on the other device
    equal(target, cpu.t().contiguous())
    strided_dst = torch.zeros(33, 10, device="neuron:1")
    strided_dst[:, ::2].copy_(x0)
    ref = torch.zeros(33, 10)
    ref[:, ::2] = cpu
    equal(strided_dst, ref)


@pytest.mark.parametrize("layout", ["transpose", "slice", "expand", "offset"])
def test_copy_strided_and_broadcast(layout):
    cpu = torch.randn(6, 8)
    make = {
        "transpose": lambda t: t.t(),
        "slice": lambda t: t[1:5:2, ::3],
        "expand": lambda t: t[:1].expand(5, 8),
        "offset": lambda t: t.view(-1)[7:31].view(4, 6),
    }[layout]
    src = make(cpu.to("neuron"))
    expected = make(cpu)
    # neuron -> neuron, neuron -> cpu, cpu -> neuron strided destinations.
    dst = torch.empty(expected.shape, device="neuron")
    dst.copy_(src)
    equal(dst, expected.contiguous())
    host = torch.empty(expected.shape)
    host.copy_(src)
    assert torch.equal(host, expected)
    big = torch.zeros(10, 20, device="neuron")
    window = big[2:2 + expected.shape[0], 3:3 + expected.shape[1]]
    window.copy_(expected)
    ref = torch.zeros(10, 20)
    ref[2:2 + expected.shape[0], 3:3 + expected.shape[1]] = expected
    equal(big, ref)
    broadcast = torch.empty(3, *expected.shape, device="neuron")
    broadcast.copy_(src)
    equal(broadcast, expected.expand(3, *expected.shape).contiguous())


@pytest.mark.parametrize("src_dtype", NUMERIC_DTYPES + [torch.bool])
@pytest.mark.parametrize("dst_dtype", [torch.bool, torch.uint8, torch.int32, torch.int64,
                                       torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_casts(src_dtype, dst_dtype):
    values = torch.tensor([0.0, 1.0, -1.0, 2.5, -2.5, 3.7, 100.3, 1 / 3, -0.0, 7.0])
    if src_dtype == torch.uint8 or dst_dtype == torch.uint8:
        values = values.abs()  # negative -> uint8 is implementation-defined
    cpu = values.to(src_dtype)
    x = cpu.to("neuron")
    equal(x.to(dst_dtype), cpu.to(dst_dtype))
    out = torch.empty(10, dtype=dst_dtype, device="neuron")
    out.copy_(x)  # cast inside copy_
    equal(out, cpu.to(dst_dtype))
    equal(cpu.to("neuron", dst_dtype), cpu.to(dst_dtype))  # cast while uploading


def test_bf16_and_fp16_round_to_nearest_even():
    cpu = torch.randn(4096, dtype=torch.float64) * 1000
    x = cpu.to("neuron")
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        equal(x.to(dtype), cpu.to(dtype))


def test_non_blocking_copies_with_pinned_memory():
    host = torch.arange(1 << 18, dtype=torch.float32).pin_memory()
    assert host.is_pinned()
    x = host.to("neuron", non_blocking=True)
    y = x * 2
    out = torch.empty(1 << 18, pin_memory=True)
    assert out.is_pinned()
    out.copy_(y, non_blocking=True)
    torch.neuron.synchronize()
    assert torch.equal(out, torch.arange(1 << 18, dtype=torch.float32) * 2)
    # Pageable memory with non_blocking=True is still correct (and synchronous).
    pageable = torch.empty(1 << 18)
    pageable.copy_(y, non_blocking=True)
    torch.neuron.synchronize()
    assert torch.equal(pageable, out)


def test_copies_from_pageable_memory_queue_only_when_non_blocking():
    # As cudaMemcpyAsync from pageable memory: a non-blocking copy returns at
    # once (the runtime stages the source, so the caller may reuse it); a
    # blocking one returns with the data there and the stream drained.
    stream = torch.neuron.current_stream()
    host = torch.arange(4096, dtype=torch.float32)
    torch.neuron._sleep(50_000_000)  # 50 ms of queued work
    x = host.to("neuron", non_blocking=True)
    assert not stream.query()
    host.zero_()
    torch.neuron.synchronize()
    assert torch.equal(x.cpu(), torch.arange(4096, dtype=torch.float32))
    torch.neuron._sleep(20_000_000)
    y = host.to("neuron")
    assert stream.query()
    assert torch.equal(y.cpu(), host)
    # into an existing tensor, behind work that writes it
    z = torch.zeros(4096, device="neuron")
    torch.neuron._sleep(20_000_000)
    z.add_(5)
    z.copy_(torch.full((4096,), 2.0), non_blocking=True)
    assert torch.equal(z.cpu(), torch.full((4096,), 2.0))


def test_item():
    assert torch.full((), 3.25, device="neuron").item() == 3.25
    assert torch.tensor([[-9]], device="neuron").item() == -9
    assert torch.ones(1, dtype=torch.bool, device="neuron").item() is True
    assert torch.tensor(2**40 + 3, device="neuron").item() == 2**40 + 3
    assert torch.arange(10, device="neuron")[7].item() == 7


def test_item_after_queued_work_sees_the_result():
    x = torch.zeros(1 << 16, device="neuron")
    for _ in range(10):
        x.add_(1)
    assert x[-1].item() == 10


# -------------------------------------------------------------------- views

VIEWS = {
    "view": lambda t: t.view(4, 6),
    "as_strided": lambda t: t.as_strided((3, 3), (4, 1), 2),
    "reshape": lambda t: t.reshape(2, 3, 4),
    "transpose": lambda t: t.view(4, 6).transpose(0, 1),
    "permute": lambda t: t.view(2, 3, 4).permute(2, 0, 1),
    "slice": lambda t: t.view(4, 6)[1:3, ::2],
    "select": lambda t: t.view(4, 6)[:, 2],
    "narrow": lambda t: t.view(4, 6).narrow(1, 2, 3),
    "unsqueeze_squeeze": lambda t: t.unsqueeze(0).unsqueeze(2).squeeze(0),
    "unfold": lambda t: t.view(4, 6).unfold(1, 2, 2),
    "diagonal": lambda t: t.view(4, 6).diagonal(offset=1),
    "t": lambda t: t.view(4, 6).t(),
    "unbind": lambda t: t.view(4, 6).unbind(1)[3],
    "split": lambda t: t.split(5)[2],
    "chunk": lambda t: t.view(4, 6).chunk(3, dim=1)[1],
    "view_as_dtype": lambda t: t.view(torch.int32)[3:9],
}


@pytest.mark.parametrize("make_view", VIEWS.values(), ids=VIEWS.keys())
def test_view_reads_match_cpu(make_view):
    cpu = torch.arange(24.0)
    base = cpu.to("neuron")
    view = make_view(base)
    expected = make_view(cpu)
    assert view.shape == expected.shape and view.stride() == expected.stride()
    assert view.storage_offset() == expected.storage_offset()
    assert view.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()
    equal(view.contiguous(), expected.contiguous())
    equal(view.clone(), expected.clone())


@pytest.mark.parametrize("make_view", VIEWS.values(), ids=VIEWS.keys())
def test_writes_through_a_view_reach_the_base(make_view):
    cpu = torch.arange(24.0)
    base = cpu.to("neuron")
    for t in (base, cpu):
        view = make_view(t)
        view.mul_(-1)
        view.add_(100)
        if view.dtype.is_floating_point:
            view.div_(2)
        make_view(t).copy_(torch.arange(view.numel()).view(view.shape).to(view.dtype))
        if view.dim() > 0:
            view.select(-1, 0).fill_(-5)
    equal(base, cpu)


def test_expand_is_a_stride_zero_view():
    cpu = torch.arange(3.0).view(3, 1)
    x = cpu.to("neuron")
    e = x.expand(3, 4)
    assert e.stride() == (1, 0)
    equal(e.contiguous(), cpu.expand(3, 4).contiguous())
    equal(e + 1, cpu.expand(3, 4) + 1)
    x[1, 0] = 50  # write the base, read through the expanded view
    assert e.cpu()[1].tolist() == [50.0] * 4


def test_reshape_copies_only_when_it_must():
    x = torch.arange(12.0, device="neuron").view(3, 4)
    assert x.reshape(12).untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    y = x.t().reshape(12)  # not viewable: a copy, as on CPU
    assert y.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()
    equal(y, torch.arange(12.0).view(3, 4).t().reshape(12))


def test_contiguous():
    cpu = torch.randn(5, 6, 7)
    x = cpu.to("neuron").permute(2, 0, 1)
    assert not x.is_contiguous()
    c = x.contiguous()
    assert c.is_contiguous() and c.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()
    equal(c, cpu.permute(2, 0, 1).contiguous())
    assert c.contiguous() is c
    cl = cpu.to("neuron").view(1, 5, 6, 7).contiguous(memory_format=torch.channels_last)
    assert cl.stride() == cpu.view(1, 5, 6, 7).contiguous(memory_format=torch.channels_last).stride()
    equal(cl.contiguous(), cpu.view(1, 5, 6, 7))


def test_resize_keeps_the_prefix_and_set_shares_storage():
    x = torch.arange(6.0, device="neuron")
    x.resize_(10)
    assert x.shape == (10,)
    equal(x[:6], torch.arange(6.0))
    x.resize_(2, 3)
    equal(x, torch.arange(6.0).view(2, 3))
    e = torch.empty(0, device="neuron")
    e.resize_(4, 5)
    assert e.shape == (4, 5) and e.stride() == (5, 1)

    src = torch.arange(12.0, device="neuron")
    y = torch.empty(0, device="neuron")
    y.set_(src.untyped_storage(), 2, (2, 3), (1, 2))
    equal(y, torch.arange(12.0).as_strided((2, 3), (1, 2), 2))
    y.fill_(0)
    ref = torch.arange(12.0)
    ref.as_strided((2, 3), (1, 2), 2).fill_(0)
    equal(src, ref)
    z = torch.empty(0, device="neuron")
    z.set_(src)
    assert z.untyped_storage().data_ptr() == src.untyped_storage().data_ptr()
    equal(z, ref)
    w = torch.empty(0, device="neuron").set_()
    assert w.numel() == 0


# ---------------------------------------------------------------- arithmetic

BINARY = {
    "add": (torch.add, lambda a, b: a + b),
    "sub": (torch.sub, lambda a, b: a - b),
    "mul": (torch.mul, lambda a, b: a * b),
    "div": (torch.div, lambda a, b: a / b),
}


def operands(dtype):
    torch.manual_seed(0)
    a = torch.randn(4, 5, dtype=torch.float64) * 10
    b = torch.randn(4, 5, dtype=torch.float64) * 10
    if not dtype.is_floating_point:
        a, b = a.round(), b.round()
        b[b == 0] = 3
    return a.to(dtype), b.to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16,
                                   torch.bfloat16, torch.int64, torch.int32, torch.int16])
@pytest.mark.parametrize("name", BINARY)
def test_binary_matches_cpu(name, dtype):
    fn, operator = BINARY[name]
    a, b = operands(dtype)
    na, nb = a.to("neuron"), b.to("neuron")
    equal(operator(na, nb), operator(a, b))
    equal(fn(na, nb.t().contiguous().t()), fn(a, b))  # strided operand
    equal(operator(na[:, :4:2], nb[:, 1::2]), operator(a[:, :4:2], b[:, 1::2]))


@pytest.mark.parametrize("name", BINARY)
def test_binary_broadcasting_scalars_and_promotion(name):
    fn, operator = BINARY[name]
    a = torch.randn(3, 1, 4)
    b = torch.randn(5, 1) + 3
    i = torch.arange(1, 6).view(5, 1)
    na, nb, ni = a.to("neuron"), b.to("neuron"), i.to("neuron")
    equal(operator(na, nb), operator(a, b))  # broadcast
    equal(operator(na, 2.5), operator(a, 2.5))  # python scalar
    equal(operator(ni, 2), operator(i, 2))
    equal(operator(ni, na), operator(i, a))  # int64 with float32 -> float32
    equal(operator(na, torch.tensor(1.5)), operator(a, torch.tensor(1.5)))  # cpu 0-dim
    equal(operator(na.double(), nb.half()), operator(a.double(), b.half()))
    equal(operator(na.bfloat16(), nb.half()), operator(a.bfloat16(), b.half()))
    equal(operator(torch.tensor(3.0, device="neuron"), nb), operator(torch.tensor(3.0), b))
    equal(fn(ni, ni), fn(i, i))  # div of ints is true division: float
    empty = torch.empty(0, 4, device="neuron")
    assert operator(empty, na).shape == (3, 0, 4)


def test_add_sub_alpha_inplace_and_out():
    a, b = torch.randn(6, 7), torch.randn(6, 7)
    na, nb = a.to("neuron"), b.to("neuron")
    equal(torch.add(na, nb, alpha=-2.5), torch.add(a, b, alpha=-2.5))
    equal(torch.sub(na, nb, alpha=3), torch.sub(a, b, alpha=3))
    ia, ib = torch.arange(10), torch.arange(10, 20)
    equal(torch.add(ia.neuron(), ib.neuron(), alpha=7), torch.add(ia, ib, alpha=7))
    out = torch.empty(6, 7, device="neuron")
    result = torch.mul(na, nb, out=out)
    assert result is out
    equal(out, a * b)
    strided_out = torch.zeros(6, 14, device="neuron")[:, ::2]
    torch.div(na, nb, out=strided_out)
    equal(strided_out, a / b)
    resized = torch.empty(0, device="neuron")
    torch.add(na, nb, out=resized)
    equal(resized, a + b)
    c, nc = a.clone(), na.clone()
    for t, u in ((c, b), (nc, nb)):
        t.add_(u, alpha=2)
        t.sub_(1)
        t.mul_(u[0])
        t.div_(3)
    equal(nc, c)
    x = torch.arange(5, device="neuron")
    with pytest.raises(RuntimeError):
        x.div_(2)  # result type float can't be cast to int64 in place, as CPU


def test_arithmetic_on_neuron_1():
    a = torch.randn(100)
    x = a.to("neuron:1")
    y = (x + 1) * x - x / 4
    assert y.device == torch.device("neuron:1")
    equal(y, (a + 1) * a - a / 4)


def test_large_elementwise_matches_cpu():
    a, b = torch.randn(1 << 20), torch.randn(1 << 20)
    na, nb = a.to("neuron"), b.to("neuron")
    equal(na * nb + na, a * b + a)
    equal(na[1::3] / nb[::3][: na[1::3].numel()], a[1::3] / b[::3][: a[1::3].numel()])
