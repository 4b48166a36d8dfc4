"""Data movement on neuron vs the CPU (ops_movement.cpp): cat (stack, hstack,
vstack), flip, roll, repeat, tril/triu (+ in-place, out=), constant_pad_nd,
reflection/replication pads, one_hot.  Everything runs in
fallback_mode("error"), so a silent CPU fallback fails the test."""
import pytest
import torch
import torch.nn.functional as F

import torch_neuronx  # noqa: F401
from torch_neuronx._fallback import fallback_mode

D = "neuron"
FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INTS = [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8]
ALL = FLOATS + INTS + [torch.bool]


@pytest.fixture(autouse=True)
def native():
    with fallback_mode("error"):
        yield


def same(actual, expected, **kw):
    assert actual.device.type == "neuron", actual.device
    torch.testing.assert_close(actual.cpu(), expected, equal_nan=True, **kw)


def sample(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(-50, 50, shape, generator=g)
    if dtype == torch.bool:
        return x > 0
    if dtype == torch.uint8:
        x = x.abs()
    return (x.to(dtype) / 4) if dtype.is_floating_point else x.to(dtype)


def only_other_families_fall_back(fn, mine):
    torch_neuronx._C.reset_fallback_stats()
    with fallback_mode("silent"):
        fn()
    stats = torch_neuronx._C.fallback_stats()
    assert not [op for op in stats if op.split(".")[0].removeprefix("aten::") in mine], stats


def grad_check(fn, *shapes, mine):
    """fn's gradient on neuron equals the CPU's (float64)."""
    xs = [torch.randn(s, dtype=torch.float64, requires_grad=True) for s in shapes]
    ds = [x.detach().to(D).requires_grad_() for x in xs]
    y = fn(*xs)
    g = torch.randn(y.shape, dtype=torch.float64)
    y.backward(g)
    only_other_families_fall_back(lambda: fn(*ds).backward(g.to(D)), mine)
    for d, x in zip(ds, xs):
        same(d.grad, x.grad)


# ---- cat / stack ------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ALL)
def test_cat_stack(dtype):
    a, b, c = sample((3, 4), dtype), sample((2, 4), dtype, 1), sample((5, 4), dtype, 2)
    for dim_args in ((0,), (-2,)):
        same(torch.cat([a.to(D), b.to(D), c.to(D)], *dim_args), torch.cat([a, b, c], *dim_args))
    same(torch.cat([a.t().to(D), c.to(D).t()], 1), torch.cat([a.t(), c.t()], 1))  # non-contiguous
    same(torch.stack([a.to(D), a.to(D)], 1), torch.stack([a, a], 1))
    same(torch.hstack([a.to(D), a.to(D)]), torch.hstack([a, a]))
    same(torch.vstack([a.to(D), b.to(D)]), torch.vstack([a, b]))
    same(torch.cat([a.to(D), torch.empty(0, dtype=dtype).to(D)]), torch.cat([a, torch.empty(0, dtype=dtype)]))
    same(torch.cat([torch.empty(0, 4, dtype=dtype).to(D)] * 2), torch.empty(0, 4, dtype=dtype))


def test_cat_promotes_out_and_errors():
    a, b = torch.randn(2, 3), torch.arange(6).reshape(2, 3)
    same(torch.cat([a.to(D), b.to(D)], 1), torch.cat([a, b], 1))
    same(torch.cat([b.to(D), a.to(D).half()]), torch.cat([b, a.half()]))
    out = torch.empty(0, device=D)
    torch.cat([a.to(D), a.to(D)], out=out)
    same(out, torch.cat([a, a]))
    wide = torch.empty(4, 6, device=D)[:, ::2]
    torch.cat([a.to(D), a.to(D)], out=wide)
    same(wide, torch.cat([a, a]))
    e = torch.randn(1, 2, 3, 4)
    same(torch.cat([e.to(D), e.to(D)], 3), torch.cat([e, e], 3))
    with pytest.raises(RuntimeError, match="Sizes of tensors must match"):
        torch.cat([a.to(D), torch.randn(2, 4).to(D)])
    with pytest.raises((RuntimeError, ValueError), match="expected a non-empty list of Tensors"):
        torch.cat([], 0)


def test_cat_autograd():
    grad_check(lambda x, y: torch.cat([x, y], 1), (3, 2), (3, 5), mine=["cat"])


# ---- flip / roll / repeat ----------------------------------------------------------

@pytest.mark.parametrize("dtype", ALL)
def test_flip_roll_repeat(dtype):
    x = sample((3, 4, 5), dtype)
    xd = x.to(D)
    for dims in ((0,), (2,), (-1, 0), (0, 1, 2), ()):
        same(torch.flip(xd, dims), torch.flip(x, dims))
    same(torch.flip(xd.transpose(0, 2), (0, 1)), torch.flip(x.transpose(0, 2), (0, 1)))
    same(torch.fliplr(xd[0]), torch.fliplr(x[0]))
    same(torch.flipud(xd[0]), torch.flipud(x[0]))
    for shifts, dims in ((1, 0), (-2, 2), ((1, 3), (0, 1)), (7, None), (13, -1), (0, 1)):
        same(torch.roll(xd, shifts, dims), torch.roll(x, shifts, dims))
    same(xd.repeat(2, 1, 3), x.repeat(2, 1, 3))
    same(xd[0].repeat(2, 2, 1), x[0].repeat(2, 2, 1))


def test_flip_roll_edge_cases():
    s = torch.tensor(3.0)
    same(torch.flip(s.to(D), ()), torch.flip(s, ()))
    e = torch.empty(0, 3)
    same(torch.flip(e.to(D), (0, 1)), e)
    same(torch.roll(e.to(D), 1, 1), e)
    with pytest.raises(RuntimeError, match="appears multiple times"):
        torch.flip(torch.randn(2, 3).to(D), (0, 0))
    grad_check(lambda x: torch.flip(x, (0,)), (4, 3), mine=["flip"])
    grad_check(lambda x: torch.roll(x, 2, 1), (4, 3), mine=["roll", "cat"])


# ---- tril / triu -------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ALL)
def test_tril_triu(dtype):
    x = sample((2, 5, 7), dtype)
    xd = x.to(D)
    for k in (0, 1, -2, 6, -9, 100):
        same(torch.tril(xd, k), torch.tril(x, k))
        same(torch.triu(xd, k), torch.triu(x, k))
        same(torch.triu(xd.transpose(1, 2), k), torch.triu(x.transpose(1, 2), k))
    y = xd.clone()
    y.tril_(1)
    same(y, torch.tril(x, 1))
    y = xd.clone().transpose(1, 2)
    y.triu_(-1)
    same(y, torch.triu(x.transpose(1, 2), -1))
    out = torch.empty(0, dtype=dtype, device=D)
    torch.triu(xd, 2, out=out)
    same(out, torch.triu(x, 2))


def test_tril_triu_edge_cases():
    e = torch.empty(0, 4)
    same(torch.tril(e.to(D)), e)
    with pytest.raises(RuntimeError, match="at least 2"):
        torch.tril(torch.randn(3).to(D))
    grad_check(lambda x: torch.tril(x, -1), (4, 4), mine=["tril"])
    grad_check(lambda x: torch.triu(x, 1), (3, 5), mine=["triu"])


# ---- pads --------------------------------------------------------------------------

PADS = [
    ("reflect", (3, 5), (2, 1)), ("replicate", (3, 5), (3, 4)),
    ("reflect", (2, 3, 4), (1, 2)), ("replicate", (2, 3, 4), (0, 5)),
    ("reflect", (3, 4, 5), (2, 1, 3, 0)), ("replicate", (2, 3, 4, 5), (1, 2, 3, 4)),
    ("reflect", (2, 3, 4, 5), (3, 3, 1, 2)),
    ("reflect", (2, 3, 4, 5), (1, 2, 0, 3, 2, 1)), ("replicate", (1, 2, 3, 4, 5), (1, 0, 2, 3, 4, 1)),
    ("replicate", (2, 3, 4, 5), (-1, 2, 1, -2)),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("mode,shape,pad", PADS)
def test_reflection_replication_pads(dtype, mode, shape, pad):
    x = sample(shape, dtype)

    def reference(t):
        # The CPU lacks reflection_pad3d for 16-bit floats; padding moves values
        # without arithmetic, so padding in float32 and casting back is exact.
        if mode == "reflect" and dtype in (torch.float16, torch.bfloat16) and len(pad) == 6:
            return F.pad(t.float(), pad, mode=mode).to(dtype)
        return F.pad(t, pad, mode=mode)

    same(F.pad(x.to(D), pad, mode=mode), reference(x))
    same(F.pad(x.to(D).transpose(-1, -2), pad, mode=mode), reference(x.transpose(-1, -2)))


def test_pads_out_errors_and_constant():
    x = torch.randn(2, 3, 4)
    out = torch.empty(0, device=D)
    torch._C._nn.reflection_pad1d(x.to(D), (1, 2), out=out)
    same(out, torch._C._nn.reflection_pad1d(x, (1, 2)))
    out = torch.empty(0, device=D)
    torch._C._nn.reflection_pad2d(x.to(D), (1, 2, 0, 1), out=out)
    same(out, torch._C._nn.reflection_pad2d(x, (1, 2, 0, 1)))
    with pytest.raises(RuntimeError, match="Padding size should be less than"):
        F.pad(x.to(D), (4, 0), mode="reflect")
    with pytest.raises(RuntimeError, match="Padding size should be less than"):
        F.pad(x.to(D), (0, 0, 3, 0), mode="reflect")
    for dtype in (torch.float32, torch.int64, torch.bool, torch.uint8):
        y = sample((2, 3), dtype)
        same(F.pad(y.to(D), (1, 2, 0, 1), value=1), F.pad(y, (1, 2, 0, 1), value=1))
        same(F.pad(y.to(D), (-1, 1)), F.pad(y, (-1, 1)))


@pytest.mark.parametrize("mode,shape,pad", [("constant", (2, 3, 4), (1, 2))] + PADS)
def test_pad_autograd(mode, shape, pad):
    """Forward and backward both native (the backward kernels sum each
    input's preimage)."""
    xs = torch.randn(shape, dtype=torch.float64, requires_grad=True)
    xd = xs.detach().to(D).requires_grad_()
    y = F.pad(xs, pad, mode=mode)
    g = torch.randn(y.shape, dtype=torch.float64)
    y.backward(g)
    F.pad(xd, pad, mode=mode).backward(g.to(D))
    same(xd.grad, xs.grad)


def test_pad_backward_out_and_errors():
    x = torch.randn(2, 3, 4, 5)
    g = torch.randn(2, 3, 6, 8)
    gi = torch.empty(0, device=D)
    torch.ops.aten.replication_pad2d_backward.grad_input(g.to(D), x.to(D), [1, 2, 1, 1], grad_input=gi)
    same(gi, torch.ops.aten.replication_pad2d_backward(g, x, [1, 2, 1, 1]))
    same(torch.ops.aten.reflection_pad2d_backward(g.to(D).transpose(2, 3).transpose(2, 3), x.to(D), [1, 2, 1, 1]),
         torch.ops.aten.reflection_pad2d_backward(g, x, [1, 2, 1, 1]))
    with pytest.raises(RuntimeError, match="gradOutput width unexpected"):
        torch.ops.aten.replication_pad2d_backward(g.to(D), x.to(D), [1, 1, 1, 1])


def test_one_hot():
    # one_hot is zeros + scatter_ (the index family's) on non-CPU devices
    x = torch.tensor([0, 2, 1, 3])
    got = []
    only_other_families_fall_back(lambda: got.append(F.one_hot(x.to(D), 5)), ["one_hot", "cat", "sort"])
    same(got[0], F.one_hot(x, 5))
