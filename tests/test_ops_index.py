"""Indexing ops on neuron (ops_index.cpp): gather, scatter*, index_select,
index_add/copy/fill, advanced indexing and index_put_, masked_fill/scatter/
select, nonzero, take/put_, embedding (and their autograd), each compared
with the same call on the CPU inside fallback_mode("error"), so a silent CPU
fallback fails the test.  Out-of-range indices raise at the next
synchronisation and the device keeps working."""
import pytest
import torch

import torch_neuronx  # noqa: F401
from torch_neuronx._fallback import fallback_mode

DEV = "neuron"
ALL = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8,
       torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool]
SOME = [torch.float32, torch.bfloat16, torch.int64, torch.bool]


@pytest.fixture(autouse=True)
def native():
    torch_neuronx._C.reset_fallback_stats()
    torch.manual_seed(0)
    with fallback_mode("error"):
        yield
    assert torch_neuronx._C.fallback_stats() == {}


def make(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g) * 4
    if dtype == torch.bool:
        return x > 0
    if dtype == torch.uint8:
        return x.abs().to(dtype)
    return x.to(dtype)


def same(actual, expected, accumulated=False):
    """accumulated: a float16/bfloat16 sum of several terms.  ATen's CPU
    sometimes adds in a wider type and rounds once (scatter_add on float16,
    scatter_reduce); neuron rounds after each step, so they may differ by
    an ulp."""
    assert actual.device.type == "neuron", actual.device
    assert actual.dtype == expected.dtype
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    tol = {}
    if accumulated and expected.dtype in (torch.float16, torch.bfloat16):
        tol = {"atol": 5e-2, "rtol": 2e-2}
    torch.testing.assert_close(actual.cpu(), expected, equal_nan=True, **tol)


def dev(t):
    return t.to(DEV)


# ------------------------------------------------------------------ gather

@pytest.mark.parametrize("dtype", ALL)
def test_gather_dtypes_and_layouts(dtype):
    x = make((5, 7), dtype)
    idx = torch.randint(0, 7, (5, 4))
    same(torch.gather(dev(x), 1, dev(idx)), torch.gather(x, 1, idx))
    xt, it = x.t(), torch.randint(0, 5, (3, 5)).t()          # non-contiguous self and index
    same(torch.gather(dev(x).t(), -1, dev(it.t().contiguous()).t()), torch.gather(xt, -1, it))
    out = torch.empty(0, dtype=dtype, device=DEV)              # out=, resized
    torch.gather(dev(x), 0, dev(idx[:3] % 5), out=out)
    same(out, torch.gather(x, 0, idx[:3] % 5))


def test_gather_edge_shapes():
    x = torch.arange(6.0)
    same(torch.gather(dev(x), 0, dev(torch.tensor([], dtype=torch.long))),
         torch.gather(x, 0, torch.tensor([], dtype=torch.long)))
    s = torch.tensor(3.5)
    same(torch.gather(dev(s), 0, dev(torch.tensor(0))), torch.gather(s, 0, torch.tensor(0)))
    big = torch.randn(50000)
    i = torch.randint(0, 50000, (120000,))
    same(torch.gather(dev(big), 0, dev(i)), torch.gather(big, 0, i))


# ------------------------------------------------------------------ scatter

@pytest.mark.parametrize("dtype", ALL)
def test_scatter_src_value_add(dtype):
    x = make((4, 6), dtype)
    src = make((4, 6), dtype, 1)
    idx = torch.randint(0, 6, (4, 3))                          # duplicates likely
    same(dev(x).scatter(1, dev(idx), dev(src)), x.scatter(1, idx, src))
    same(dev(x).scatter(1, dev(idx), 2), x.scatter(1, idx, 2))
    same(dev(x).scatter_add(1, dev(idx), dev(src)), x.scatter_add(1, idx, src), True)
    d = dev(x)
    d.scatter_add_(0, dev(idx % 4), dev(src))
    same(d, x.clone().scatter_add_(0, idx % 4, src), True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int32, torch.int64])
@pytest.mark.parametrize("reduce", ["add", "multiply"])
def test_scatter_legacy_reduce(dtype, reduce):
    x = make((3, 5), dtype)
    src = make((3, 5), dtype, 2)
    idx = torch.randint(0, 5, (3, 4))
    same(dev(x).scatter(1, dev(idx), dev(src), reduce=reduce), x.scatter(1, idx, src, reduce=reduce))
    same(dev(x).scatter(1, dev(idx), 3, reduce=reduce), x.scatter(1, idx, 3, reduce=reduce))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64, torch.int16])
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_two(dtype, reduce, include_self):
    x = make((6, 5), dtype)
    src = make((6, 8), dtype, 3)
    idx = torch.randint(0, 5, (6, 8))
    if reduce == "prod" and dtype.is_floating_point:
        src = src.sign() + (src == 0).to(dtype)               # keep products exact
    got = dev(x).scatter_reduce(1, dev(idx), dev(src), reduce, include_self=include_self)
    same(got, x.scatter_reduce(1, idx, src, reduce, include_self=include_self), True)


def test_scatter_reduce_nan_and_noncontiguous():
    x = torch.tensor([1.0, float("nan"), 3.0, 0.0])
    src = torch.tensor([float("nan"), 5.0, 7.0, -1.0])
    idx = torch.tensor([0, 1, 2, 2])
    for r in ["amax", "amin"]:
        same(dev(x).scatter_reduce(0, dev(idx), dev(src), r), x.scatter_reduce(0, idx, src, r))
    base = torch.randn(8, 6)
    idx = torch.randint(0, 8, (6, 8)).t()
    d = dev(base).t().contiguous().t()                         # non-contiguous self
    d.scatter_reduce_(0, dev(idx), dev(base), "sum")
    same(d, base.clone().scatter_reduce_(0, idx, base, "sum"))


def test_scatter_add_deterministic_with_duplicates():
    src = torch.randn(64, 4096)
    idx = torch.randint(0, 3, (64, 4096))
    runs = [dev(torch.zeros(64, 3)).scatter_add_(1, dev(idx), dev(src)).cpu() for _ in range(3)]
    assert all(torch.equal(runs[0], r) for r in runs)
    torch.testing.assert_close(runs[0], torch.zeros(64, 3).scatter_add_(1, idx, src))


# ---------------------------------------------------- index_select / add / copy / fill

@pytest.mark.parametrize("dtype", ALL)
def test_index_select(dtype):
    x = make((5, 6), dtype)
    for idx_dtype in [torch.int64, torch.int32]:
        idx = torch.tensor([4, 0, 0, 2], dtype=idx_dtype)
        same(torch.index_select(dev(x), 0, dev(idx)), torch.index_select(x, 0, idx))
        same(torch.index_select(dev(x).t(), -1, dev(idx)), torch.index_select(x.t(), -1, idx))
    idx = torch.arange(6).flip(0)[::2]                         # non-contiguous index
    same(torch.index_select(dev(x), 1, dev(idx)), torch.index_select(x, 1, idx))
    empty = torch.tensor([], dtype=torch.long)
    same(torch.index_select(dev(x), 1, dev(empty)), torch.index_select(x, 1, empty))
    out = torch.empty(0, dtype=dtype, device=DEV)
    torch.index_select(dev(x), 0, dev(torch.tensor([1])), out=out)
    same(out, x[1:2])
    s = torch.tensor(2.0)
    same(torch.index_select(dev(s), 0, dev(torch.tensor([0]))), torch.index_select(s, 0, torch.tensor([0])))


@pytest.mark.parametrize("dtype", ALL)
def test_index_add_copy_fill(dtype):
    x = make((5, 4), dtype)
    src = make((3, 4), dtype, 5)
    idx = torch.tensor([4, 1, 4])                              # duplicate accumulates
    same(dev(x).index_add(0, dev(idx), dev(src)), x.index_add(0, idx, src), True)
    uniq = torch.tensor([3, 0, 1])
    same(dev(x).index_copy(0, dev(uniq), dev(src)), x.index_copy(0, uniq, src))
    same(dev(x).index_fill(1, dev(torch.tensor([-1, 0])), 1), x.index_fill(1, torch.tensor([-1, 0]), 1))
    same(dev(x).index_fill(0, dev(torch.tensor([2])), torch.tensor(0)),
         x.index_fill(0, torch.tensor([2]), torch.tensor(0)))


def test_index_add_alpha_and_dims():
    x, src = torch.randn(3, 5, 4), torch.randn(3, 2, 4)
    idx = torch.tensor([4, 4])
    same(dev(x).index_add(1, dev(idx), dev(src), alpha=2.5), x.index_add(1, idx, src, alpha=2.5))
    d = dev(x)
    d.index_add_(-1, dev(torch.tensor([0, 3, 0])), dev(torch.randn(3, 5, 3).fill_(1)))
    same(d, x.index_add(-1, torch.tensor([0, 3, 0]), torch.ones(3, 5, 3)))


# ------------------------------------------------------------ advanced indexing

@pytest.mark.parametrize("dtype", ALL)
def test_advanced_index_get(dtype):
    x = make((4, 5, 6), dtype)
    d = dev(x)
    i = torch.tensor([3, -1, 0, 3])
    j = torch.tensor([[0], [5]])
    same(d[dev(i)], x[i])                                      # negative wraps
    same(d[:, dev(i % 5)], x[:, i % 5])
    same(d[dev(i), :, dev(j)], x[i, :, j])                     # broadcast, split dims
    same(d[i], x[i])                                           # CPU index tensor
    mask = make((4, 5), torch.bool, 7)
    same(d[dev(mask)], x[mask])                                # bool mask -> nonzero
    same(d[dev(mask[0]).unsqueeze(0).expand(4, 5)], x[mask[0].unsqueeze(0).expand(4, 5)])
    same(d[dev(torch.tensor([], dtype=torch.long))], x[torch.tensor([], dtype=torch.long)])
    same(d.transpose(0, 2)[dev(i % 4)], x.transpose(0, 2)[i % 4])


@pytest.mark.parametrize("dtype", ALL)
def test_index_put(dtype):
    x = make((5, 4), dtype)
    v = make((3, 4), dtype, 9)
    i = torch.tensor([4, -5, 2])
    d = dev(x)
    d[dev(i)] = dev(v)
    e = x.clone()
    e[i] = v
    same(d, e)
    d[dev(i), dev(torch.tensor([0, 1, 2]))] = dev(v[:, 0])
    e[i, torch.tensor([0, 1, 2])] = v[:, 0]
    same(d, e)
    mask = make((5, 4), torch.bool, 11)
    d[dev(mask)] = dev(torch.tensor(1).to(dtype))              # masked_fill dispatch
    e[mask] = torch.tensor(1).to(dtype)
    same(d, e)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int32, torch.int64, torch.bool])
def test_index_put_accumulate_duplicates(dtype):
    x = make((6, 3), dtype)
    v = make((5, 3), dtype, 12)
    i = torch.tensor([1, 1, -1, 5, 1])
    got = dev(x).index_put_((dev(i),), dev(v), accumulate=True)
    same(got, x.clone().index_put_((i,), v, accumulate=True))
    if dtype != torch.bool:
        d = dev(x)
        d[dev(torch.tensor([0, 2]))] += dev(v[:2])
        e = x.clone()
        e[torch.tensor([0, 2])] += v[:2]
        same(d, e)


# ------------------------------------------------------------------ masked

@pytest.mark.parametrize("dtype", ALL)
def test_masked_fill_scatter_select(dtype):
    x = make((4, 5), dtype)
    mask = make((4, 5), torch.bool, 13)
    same(dev(x).masked_fill(dev(mask), 1), x.masked_fill(mask, 1))
    same(dev(x).masked_fill(dev(mask[0]), torch.tensor(0)), x.masked_fill(mask[0], torch.tensor(0)))  # broadcast mask, 0-dim value
    same(dev(x).masked_fill(dev(mask), dev(torch.tensor(1))), x.masked_fill(mask, torch.tensor(1)))
    d = dev(x).t()
    d.masked_fill_(dev(mask).t(), 0)
    same(d, x.t().masked_fill(mask.t(), 0))
    src = make((30,), dtype, 14)
    same(dev(x).masked_scatter(dev(mask), dev(src)), x.masked_scatter(mask, src))
    same(torch.masked_select(dev(x), dev(mask)), torch.masked_select(x, mask))
    same(torch.masked_select(dev(x).t(), dev(mask[:, 0])), torch.masked_select(x.t(), mask[:, 0]))


@pytest.mark.parametrize("dtype", ALL)
def test_nonzero_argwhere(dtype):
    x = make((3, 4, 5), dtype)
    x.view(-1)[::3] = 0
    same(torch.nonzero(dev(x)), torch.nonzero(x))
    same(torch.nonzero(dev(x).transpose(0, 2)), torch.nonzero(x.transpose(0, 2)))
    same(torch.argwhere(dev(x)), torch.argwhere(x))
    same(torch.nonzero(dev(x), as_tuple=True)[1], torch.nonzero(x, as_tuple=True)[1])
    same(torch.nonzero(dev(torch.zeros(0, 3, dtype=dtype))), torch.nonzero(torch.zeros(0, 3, dtype=dtype)))
    same(torch.nonzero(dev(torch.tensor(1).to(dtype))), torch.nonzero(torch.tensor(1).to(dtype)))
    big = torch.rand(100000) > 0.7
    same(torch.nonzero(dev(big)), torch.nonzero(big))


@pytest.mark.parametrize("dtype", SOME)
def test_take_put(dtype):
    x = make((4, 5), dtype)
    idx = torch.tensor([[0, -1], [7, 19]])
    same(torch.take(dev(x), dev(idx)), torch.take(x, idx))
    same(torch.take(dev(x).t(), dev(idx)), torch.take(x.t(), idx))
    src = make((2, 2), dtype, 15)
    same(dev(x).put_(dev(idx), dev(src)), x.clone().put_(idx, src))
    dup = torch.tensor([3, 3, -2])
    s3 = make((3,), dtype, 16)
    same(dev(x).put_(dev(dup), dev(s3), accumulate=True), x.clone().put_(dup, s3, accumulate=True))


# ---------------------------------------------------------------- embedding

def test_embedding_forward_backward():
    w = torch.randn(10, 4, requires_grad=True)
    wd = dev(w.detach()).requires_grad_()
    idx = torch.tensor([[1, 2, 1], [9, 0, 1]])
    for pad, freq in [(None, False), (1, False), (None, True), (2, True)]:
        out = torch.nn.functional.embedding(idx, w, padding_idx=pad, scale_grad_by_freq=freq)
        outd = torch.nn.functional.embedding(dev(idx), wd, padding_idx=pad, scale_grad_by_freq=freq)
        same(outd, out.detach())
        g = torch.randn_like(out)
        out.backward(g)
        outd.backward(dev(g))
        same(wd.grad, w.grad)
        w.grad = None
        wd.grad = None


# ---------------------------------------------------------------- autograd

def test_autograd_vs_cpu():
    x = torch.randn(5, 6, requires_grad=True)
    xd = dev(x.detach()).requires_grad_()
    idx = torch.tensor([[0, 5, 5], [1, 1, 2]])
    i1 = torch.tensor([4, 0, 4])
    mask = torch.rand(5, 6) > 0.5
    fns = [
        lambda t, d: torch.gather(t, 1, d(idx)),
        lambda t, d: torch.index_select(t, 0, d(i1)),
        lambda t, d: t[d(i1), 1:],
        lambda t, d: t[d(mask)],
        lambda t, d: t.masked_fill(d(mask), 2.0),
    ]
    for fn in fns:
        x.grad = None
        xd.grad = None
        y = fn(x, lambda t: t)
        yd = fn(xd, dev)
        same(yd, y.detach())
        g = torch.randn_like(y)
        y.backward(g)
        yd.backward(dev(g))
        same(xd.grad, x.grad)


# ------------------------------------------------------------------ errors

def test_out_of_range_raises_at_sync_and_device_keeps_working():
    x = dev(torch.arange(5.0))
    with pytest.raises(RuntimeError, match="index 7 is out of bounds for dimension 0 with size 5"):
        torch.gather(x, 0, dev(torch.tensor([1, 7])))
        torch.neuron.synchronize()
    same(x + 1, torch.arange(5.0) + 1)
    with pytest.raises(RuntimeError, match="index -6 is out of bounds"):
        torch.index_select(x, 0, dev(torch.tensor([-6])))
        torch.neuron.synchronize()
    with pytest.raises(RuntimeError, match="index 5 is out of bounds for dimension 0 with size 5"):
        x[dev(torch.tensor([5]))].cpu()
    with pytest.raises(RuntimeError, match="index 9 is out of bounds"):
        x.index_put_((dev(torch.tensor([9])),), dev(torch.tensor(1.0)), accumulate=True)
        torch.neuron.synchronize()
    with pytest.raises(RuntimeError, match="index 5 is out of bounds"):
        dev(torch.zeros(5)).scatter_add_(0, dev(torch.tensor([5])), dev(torch.ones(1)))
        torch.neuron.synchronize()
    same(x, torch.arange(5.0))                                 # nothing was written
    same(torch.gather(x, 0, dev(torch.tensor([4, 0]))), torch.tensor([4.0, 0.0]))


def test_errors_like_cpu():
    x = dev(torch.randn(3, 4))
    with pytest.raises(RuntimeError, match="Index tensor must have the same number of dimensions"):
        torch.gather(x, 1, dev(torch.zeros(3, dtype=torch.long)))
    with pytest.raises(RuntimeError, match="Expected self.dtype to be equal to src.dtype"):
        x.scatter(0, dev(torch.zeros(1, 4, dtype=torch.long)), dev(torch.ones(1, 4, dtype=torch.float64)))
    with pytest.raises(IndexError, match="too many indices"):
        x[dev(torch.tensor([0])), dev(torch.tensor([0])), dev(torch.tensor([0]))]
    with pytest.raises(RuntimeError, match="same device"):
        x.scatter(0, dev(torch.zeros(1, 4, dtype=torch.long)), torch.ones(1, 4))   # CPU src
    with pytest.raises(RuntimeError, match="same device"):
        x.index_add(0, torch.tensor([0]), dev(torch.ones(1, 4)))                  # CPU index
    d = dev(torch.zeros(3))
    d.index_put_((dev(torch.tensor([1, 1])),), torch.tensor(2.0), accumulate=True)  # CPU 0-dim value
    same(d, torch.tensor([0.0, 4.0, 0.0]))
    with pytest.raises(RuntimeError, match="same device"):
        x.masked_fill(torch.tensor(True), 1.0)                                     # CPU mask
    with pytest.raises(RuntimeError, match="boolean masks"):
        x.masked_fill_(dev(torch.ones(3, 4, dtype=torch.int64)), 1)


def test_complex_falls_back():
    x = torch.randn(3, 4, dtype=torch.complex64)
    i = torch.tensor([2, 0])
    m = torch.rand(3, 4) > 0.5
    with fallback_mode("silent"):
        same(dev(x).index_add(0, dev(i), dev(x[:2])), x.index_add(0, i, x[:2]))
        same(dev(x).index_copy(0, dev(i), dev(x[:2])), x.index_copy(0, i, x[:2]))
        same(torch.gather(dev(x), 0, dev(i.view(2, 1))), torch.gather(x, 0, i.view(2, 1)))
        same(dev(x).scatter_add(0, dev(i.view(2, 1)), dev(x)), x.scatter_add(0, i.view(2, 1), x))
        same(dev(x).masked_fill(dev(m), 1j), x.masked_fill(m, 1j))
        same(torch.nonzero(dev(x)), torch.nonzero(x))
        same(torch.masked_select(dev(x), dev(m)), torch.masked_select(x, m))
        d = dev(x)
        d[dev(i)] = dev(x[:2])
        e = x.clone()
        e[i] = x[:2]
        same(d, e)
        same(torch.index_select(dev(x), 0, dev(torch.tensor([2, 0]))), torch.index_select(x, 0, torch.tensor([2, 0])))
        same(dev(x)[dev(torch.tensor([1]))], x[torch.tensor([1])])
    torch_neuronx._C.reset_fallback_stats()


def test_accumulation_does_not_depend_on_thread_count():
    from conftest import check_python
    code = """
        import torch, torch_neuronx
        g = torch.Generator().manual_seed(1)
        src = torch.randn(8, 20000, generator=g)
        idx = torch.randint(0, 7, (8, 20000), generator=g)
        a = torch.zeros(8, 7, device="neuron").scatter_add_(1, idx.to("neuron"), src.to("neuron"))
        flat = torch.randint(0, 50, (60000,), generator=g)
        b = torch.zeros(50, device="neuron").index_put_((flat.to("neuron"),), src.view(-1)[:60000].to("neuron"), accumulate=True)
        c = torch.zeros(50, device="neuron").index_add_(0, flat.to("neuron"), src.view(-1)[:60000].to("neuron"))
        print(a.cpu().double().sum().item().hex(), b.cpu().double().sum().item().hex(), c.cpu().double().sum().item().hex())
    """
    one = check_python(code, env={"TORCHNEURON_NUM_THREADS": "1"})
    many = check_python(code, env={"TORCHNEURON_NUM_THREADS": "8"})
    assert one == many and one.strip()


def test_out_variants_non_contiguous_and_zero_dim():
    x = torch.randn(6, 5)
    idx = torch.tensor([4, 0, 2])
    out = dev(torch.empty(5, 3)).t()                           # non-contiguous out of the right size
    torch.index_select(dev(x), 0, dev(idx), out=out)
    same(out, torch.index_select(x, 0, idx))
    gi = torch.randint(0, 6, (3, 5))
    out = dev(torch.empty(5, 3)).t()
    torch.gather(dev(x), 0, dev(gi), out=out)
    same(out, torch.gather(x, 0, gi))
    m = torch.randn(5, 6) > 0
    res = torch.empty(0, device=DEV)
    torch.masked_select(dev(x), dev(m).t(), out=res)
    same(res, torch.masked_select(x, m.t()))
    nz = torch.empty(0, dtype=torch.long, device=DEV)
    torch.nonzero(dev(m), out=nz)
    same(nz, torch.nonzero(m))
    s = torch.tensor(1.5)
    same(dev(s).masked_fill(dev(torch.tensor(True)), 0), s.masked_fill(torch.tensor(True), 0))
    d = dev(torch.zeros(3))
    d[dev(torch.tensor(1))] = 5                                # 0-dim index
    same(d, torch.tensor([0.0, 5.0, 0.0]))
    same(dev(x)[dev(torch.tensor(-1))], x[torch.tensor(-1)])


def test_large_advanced_index_and_put():
    x = torch.randn(300, 400)
    i = torch.randint(-300, 300, (500, 60))
    j = torch.randint(-400, 400, (60,))
    same(dev(x)[dev(i), dev(j)], x[i, j])                      # parallel path, broadcast indices
    v = torch.randn(500, 60)
    got = dev(x).index_put_((dev(i), dev(j)), dev(v), accumulate=True)
    torch.testing.assert_close(got.cpu(), x.clone().index_put_((i, j), v, accumulate=True))


def test_more_index_tensors_than_the_kernel_takes_fall_back():
    x = torch.randn(*([2] * 7))
    idx = [torch.tensor([1, 0])] * 7
    with fallback_mode("silent"):
        same(dev(x)[tuple(dev(t) for t in idx)], x[tuple(idx)])
    torch_neuronx._C.reset_fallback_stats()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int32, torch.int64])
@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_index_reduce(dtype, reduce, include_self):
    x = make((5, 4), dtype)
    src = make((6, 4), dtype, 21)
    if reduce == "prod" and dtype.is_floating_point:
        src = src.sign() + (src == 0).to(dtype)
    idx = torch.tensor([4, 0, 4, 1, 4, -0])
    got = dev(x).index_reduce(0, dev(idx), dev(src), reduce, include_self=include_self)
    same(got, x.index_reduce(0, idx, src, reduce, include_self=include_self))
    got = dev(x).t().index_reduce_(1, dev(idx), dev(src).t(), reduce, include_self=include_self)
    same(got, x.t().clone().index_reduce_(1, idx, src.t(), reduce, include_self=include_self))
