"""Quick smoke test of the native basic ops (ops_*.cpp): each result is
compared with the same op on the CPU, inside fallback_mode("error") so that
a silent fallback to the CPU fails the test.  The full suites live in the
other test files."""
import pytest
import torch

import torch_neuronx
from torch_neuronx._fallback import fallback_mode

FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def same(actual, expected):
    assert actual.device.type == "neuron", actual.device
    torch.testing.assert_close(actual.cpu(), expected, equal_nan=True)


@pytest.fixture(autouse=True)
def native():
    with fallback_mode("error"):
        yield


@pytest.mark.parametrize("dtype", FLOATS + [torch.int32, torch.int64, torch.bool, torch.uint8])
def test_roundtrip_and_strided_copies(dtype):
    cpu = (torch.randn(6, 5) * 10).to(dtype)
    dev = cpu.to("neuron")
    same(dev, cpu)
    same(dev.t().contiguous(), cpu.t().contiguous())   # strided device copy
    same(dev[::2, 1:], cpu[::2, 1:])                   # strided D2H
    out = torch.zeros(5, 6, dtype=dtype, device="neuron")
    out.t().copy_(cpu)                                 # H2D into a strided view
    same(out, cpu.t())
    same(dev.to(torch.float64), cpu.to(torch.float64))  # cast on the device


def test_copy_broadcasts_and_same_data_is_noop():
    dst = torch.empty(3, 4, device="neuron")
    dst.copy_(torch.arange(4.0))
    same(dst, torch.arange(4.0).expand(3, 4))
    dst.copy_(dst)
    same(dst, torch.arange(4.0).expand(3, 4))


def test_non_blocking_pinned_copies():
    host = torch.randn(1000).pin_memory()
    dev = host.to("neuron", non_blocking=True)
    back = torch.empty(1000).pin_memory()
    back.copy_(dev, non_blocking=True)
    torch.neuron.synchronize()
    assert torch.equal(back, host)


def test_unsupported_dtype_copies_through_raw_bits():
    cpu = torch.randn(4, 3, dtype=torch.complex64)
    dev = cpu.to("neuron")
    assert torch.equal(dev.t().contiguous().cpu(), cpu.t().contiguous())


@pytest.mark.skipif(torch.neuron.device_count() < 2, reason="needs two devices")
def test_copy_between_devices():
    a = torch.randn(8, 8).to("neuron:0")
    b = a.t().to("neuron:1")
    assert b.device == torch.device("neuron:1")
    same(b, a.cpu().t())


@pytest.mark.parametrize("op", [torch.add, torch.sub, torch.mul, torch.div])
@pytest.mark.parametrize("dtype", FLOATS + [torch.int64])
def test_binary_same_shape(op, dtype):
    a = (torch.randn(8) * 5).to(dtype)
    b = (torch.randn(8) * 5 + 7).to(dtype)
    same(op(a.to("neuron"), b.to("neuron")), op(a, b))


@pytest.mark.parametrize("op", [torch.add, torch.sub, torch.mul, torch.div])
def test_binary_broadcast_promotion_and_scalars(op):
    a = torch.randint(1, 9, (3, 1), dtype=torch.int32)
    b = torch.randn(4)
    same(op(a.to("neuron"), b.to("neuron")), op(a, b))            # int32 x float
    same(op(a.to("neuron"), 3), op(a, 3))                         # Python int
    same(op(b.to("neuron"), 2.5), op(b, 2.5))                     # Python float
    same(op(b.to("neuron"), torch.tensor(2.0)), op(b, torch.tensor(2.0)))  # 0-dim CPU
    same(op(torch.tensor(3), b.to("neuron")), op(torch.tensor(3), b))


def test_alpha_inplace_and_out():
    a, b = torch.randn(5), torch.randn(5)
    x = a.to("neuron")
    x.add_(b.to("neuron"), alpha=2)
    same(x, a + 2 * b)
    x.sub_(1.5)
    same(x, a + 2 * b - 1.5)
    out = torch.empty(0, device="neuron")
    torch.mul(a.to("neuron"), b.to("neuron"), out=out)
    same(out, a * b)
    with pytest.raises(RuntimeError, match="can't be cast"):
        long_out = torch.empty(5, dtype=torch.long, device="neuron")
        torch.add(a.to("neuron"), b.to("neuron"), out=long_out)
    with pytest.raises(RuntimeError, match="bool"):
        flags = torch.ones(2, dtype=torch.bool, device="neuron")
        flags - flags


def test_binary_errors_like_cuda():
    x = torch.randn(3).to("neuron")
    with pytest.raises(RuntimeError, match="same device.*neuron:0 and cpu"):
        x + torch.randn(3)
    with pytest.raises(RuntimeError, match="must match the size"):
        x + torch.randn(4).to("neuron")


def test_factories_fill_and_item():
    same(torch.zeros(2, 3, device="neuron"), torch.zeros(2, 3))
    same(torch.full((4,), 7, dtype=torch.int16, device="neuron"),
         torch.full((4,), 7, dtype=torch.int16))
    same(torch.arange(10, device="neuron"), torch.arange(10))
    same(torch.arange(1, 2.5, 0.25, device="neuron"), torch.arange(1, 2.5, 0.25))
    same(torch.linspace(-1, 1, 7, device="neuron"), torch.linspace(-1, 1, 7))
    same(torch.eye(3, 5, device="neuron"), torch.eye(3, 5))
    t = torch.empty(3, 4, device="neuron")
    t[:, 1].fill_(2.0)
    t.zero_()
    t.t()[1].fill_(torch.tensor(3.0))
    expected = torch.zeros(3, 4)
    expected[:, 1] = 3.0
    same(t, expected)
    assert torch.tensor(4.5, device="neuron").item() == 4.5
    with pytest.raises(RuntimeError, match="overflow"):
        torch.zeros(2, dtype=torch.uint8, device="neuron").fill_(300)


def test_views_and_resize_are_native():
    cpu = torch.arange(24.0).reshape(2, 3, 4)
    dev = cpu.to("neuron")
    for view in (lambda t: t.view(6, 4), lambda t: t.transpose(0, 2), lambda t: t.permute(2, 0, 1),
                 lambda t: t[:, 1], lambda t: t.unsqueeze(1).expand(2, 5, 3, 4),
                 lambda t: t.diagonal(0, 1, 2), lambda t: t.unfold(2, 2, 1),
                 lambda t: t.as_strided((3, 2), (1, 3), 1), lambda t: t.reshape(4, 6)):
        same(view(dev), view(cpu))
    r = torch.empty(2, device="neuron")
    r.resize_(100)
    assert r.shape == (100,)


def test_fallback_is_counted_and_error_mode_names_the_op():
    x = torch.rand(4).to("neuron")
    with pytest.raises(RuntimeError, match="negate_it"):
        torch.ops.cpu_only.negate_it(x)
    torch_neuronx._fallback.reset_fallback_stats()
    with fallback_mode("silent"):
        same(torch.ops.cpu_only.negate_it(x), -x.cpu())
        str(x)  # printing works, falling back where it must
    assert any(name.startswith("cpu_only::negate_it") for name in torch_neuronx.fallback_stats())
