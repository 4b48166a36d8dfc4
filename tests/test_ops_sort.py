"""The sort family on neuron vs the CPU (ops_sort.cpp): sort/argsort/msort,
topk, searchsorted/bucketize, unique/unique_consecutive, and the random ops
multinomial, bernoulli with a tensor p and native_dropout.  Everything runs
in fallback_mode("error"), so a silent CPU fallback fails the test."""
import pytest
import torch

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


def only_other_families_fall_back(fn, mine):
    """Runs fn with fallbacks allowed (autograd formulas use ops of other
    families, e.g. scatter, sum) and checks none of `mine` fell back."""
    torch_neuronx._C.reset_fallback_stats()
    with fallback_mode("silent"):
        fn()
    stats = torch_neuronx._C.fallback_stats()
    assert not [op for op in stats if op.split(".")[0].removeprefix("aten::") in mine], stats


def same(actual, expected, **kw):
    assert actual.device.type == "neuron", actual.device
    torch.testing.assert_close(actual.cpu(), expected, equal_nan=True, **kw)


def sample(shape, dtype, nan=True, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    x = torch.randint(-6, 7, shape, generator=g)  # many duplicates
    if dtype == torch.uint8:
        x = x.abs()
    if dtype.is_floating_point:
        x = x.to(dtype) / 2
        if nan and x.numel():
            x.view(-1)[::7] = float("nan")
            x.view(-1)[1::11] = -0.0
        return x
    return x.to(dtype)


# ---- sort ------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("descending", [False, True])
def test_sort_stable_matches_cpu(dtype, descending):
    x = sample((5, 37), dtype)
    for dim in (0, 1, -1):
        v, i = torch.sort(x.to(D), dim=dim, descending=descending, stable=True)
        ev, ei = torch.sort(x, dim=dim, descending=descending, stable=True)
        same(v, ev)
        same(i, ei)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bfloat16])
def test_sort_noncontiguous_empty_scalar_out(dtype):
    x = sample((6, 4, 5), dtype)
    xt = x.transpose(0, 2)
    v, i = torch.sort(x.to(D).transpose(0, 2), dim=1)
    ev, ei = torch.sort(xt, dim=1, stable=True)
    same(v, ev)
    same(i, ei)
    # unstable sort: values equal the CPU's, indices point at equal values
    v, i = torch.sort(x.to(D), dim=0, descending=True)
    ev, _ = torch.sort(x, dim=0, descending=True)
    same(v, ev)
    torch.testing.assert_close(torch.gather(x, 0, i.cpu()), ev, equal_nan=True)
    # empty and 0-dim
    e = torch.empty(0, 3, dtype=dtype)
    same(torch.sort(e.to(D), dim=0)[0], e)
    s = torch.tensor(3, dtype=dtype)
    v, i = torch.sort(s.to(D))
    same(v, s)
    same(i, torch.tensor(0))
    # out=
    vo = torch.empty(0, dtype=dtype, device=D)
    io = torch.empty(0, dtype=torch.long, device=D)
    torch.sort(x.to(D), dim=2, stable=True, out=(vo, io))
    ev, ei = torch.sort(x, dim=2, stable=True)
    same(vo, ev)
    same(io, ei)


def test_sort_nan_ordering_and_argsort_msort():
    x = torch.tensor([3.0, float("nan"), -1.0, float("inf"), -float("inf"), 3.0, float("nan"), 0.0])
    for desc in (False, True):
        v, i = torch.sort(x.to(D), descending=desc, stable=True)
        ev, ei = torch.sort(x, descending=desc, stable=True)
        same(v, ev)
        same(i, ei)
    same(torch.argsort(x.to(D), stable=True), torch.argsort(x, stable=True))
    same(torch.msort(x.to(D)), torch.msort(x))


def test_sort_long_slices_and_many_slices():
    x = torch.randn(3, 20000)
    v, i = torch.sort(x.to(D), dim=1)
    ev, ei = torch.sort(x, dim=1)  # float32 randn has duplicates: the CPU's tie order
    same(v, ev)
    same(i, ei)
    y = torch.randint(0, 1000, (5000, 9))
    v, i = torch.sort(y.to(D), dim=1, stable=True)
    ev, ei = torch.sort(y, dim=1, stable=True)
    same(v, ev)
    same(i, ei)


def test_sort_autograd():
    x = torch.randn(4, 6, dtype=torch.float64, requires_grad=True)
    xd = x.detach().to(D).requires_grad_()
    g = torch.randn(4, 6, dtype=torch.float64)
    torch.sort(x, dim=1)[0].backward(g)
    only_other_families_fall_back(lambda: torch.sort(xd, dim=1)[0].backward(g.to(D)), ["sort"])
    same(xd.grad, x.grad)


def test_sort_errors_match_cpu():
    x = torch.randn(3, 4)
    with pytest.raises(IndexError, match="Dimension out of range"):
        torch.sort(x.to(D), dim=2)


# ---- topk ------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS + INTS)  # the CPU has no bool topk
def test_topk_matches_cpu(dtype):
    g = torch.Generator().manual_seed(1)
    x = torch.randperm(120, generator=g).reshape(8, 15)  # distinct: ties are unspecified
    x = x.to(dtype)
    for largest in (True, False):
        for dim, k in ((1, 4), (0, 3), (-1, 15), (1, 0)):
            v, i = torch.topk(x.to(D), k, dim=dim, largest=largest)
            ev, ei = torch.topk(x, k, dim=dim, largest=largest)
            same(v, ev)
            same(i, ei)


def test_topk_nan_noncontiguous_out_scalar_autograd():
    x = torch.tensor([[1.0, float("nan"), 5.0, -2.0], [0.0, 7.0, float("nan"), 3.0]])
    for largest in (True, False):
        v, i = torch.topk(x.to(D), 2, largest=largest)
        ev, ei = torch.topk(x, 2, largest=largest)
        same(v, ev)
        same(i, ei)
    y = torch.randn(10, 7)
    v, i = torch.topk(y.to(D).t(), 3, dim=1)
    ev, ei = torch.topk(y.t(), 3, dim=1)
    same(v, ev)
    same(i, ei)
    vo, io = torch.empty(0, device=D), torch.empty(0, dtype=torch.long, device=D)
    torch.topk(y.to(D), 2, dim=0, out=(vo, io))
    same(vo, torch.topk(y, 2, dim=0)[0])
    v, i = torch.topk(torch.tensor(2.5).to(D), 1)
    same(v, torch.tensor(2.5))
    with pytest.raises(RuntimeError, match="selected index k out of range"):
        torch.topk(y.to(D), 8, dim=1)
    a = torch.randn(5, 6, dtype=torch.float64, requires_grad=True)
    ad = a.detach().to(D).requires_grad_()
    torch.topk(a, 3)[0].sum().backward()
    only_other_families_fall_back(lambda: torch.topk(ad, 3)[0].sum().backward(), ["topk"])
    same(ad.grad, a.grad)


# ---- searchsorted / bucketize ---------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16,
                                   torch.int32, torch.int64, torch.int8, torch.uint8])
def test_searchsorted_matches_cpu(dtype):
    b = torch.sort(sample((20,), dtype, nan=False))[0]
    v = sample((4, 6), dtype, nan=False, seed=3)
    for right in (False, True):
        same(torch.searchsorted(b.to(D), v.to(D), right=right), torch.searchsorted(b, v, right=right))
        same(torch.bucketize(v.to(D), b.to(D), right=right), torch.bucketize(v, b, right=right))
    same(torch.searchsorted(b.to(D), v.to(D), side="right", out_int32=True),
         torch.searchsorted(b, v, side="right", out_int32=True))
    # per-row boundaries
    rb = torch.sort(sample((4, 9), dtype, nan=False, seed=5), dim=1)[0]
    same(torch.searchsorted(rb.to(D), v.to(D)), torch.searchsorted(rb, v))


def test_searchsorted_sorter_scalar_nan_noncontig_out():
    b = torch.tensor([5.0, 1.0, 3.0, float("nan"), 2.0])
    sorter = torch.argsort(b)
    v = torch.tensor([[0.0, 2.0, 3.5, float("nan")], [9.0, 1.0, -1.0, 5.0]])
    same(torch.searchsorted(b.to(D), v.to(D), sorter=sorter.to(D)), torch.searchsorted(b, v, sorter=sorter))
    same(torch.searchsorted(b.to(D), v.to(D), sorter=sorter.to(D), right=True),
         torch.searchsorted(b, v, sorter=sorter, right=True))
    sb = torch.sort(b)[0]
    same(torch.searchsorted(sb.to(D), 2.0), torch.searchsorted(sb, 2.0))
    same(torch.bucketize(3, sb.to(D)), torch.bucketize(3, sb))
    same(torch.searchsorted(sb.to(D), v.to(D).t()), torch.searchsorted(sb, v.t()))
    out = torch.empty(4, 2, dtype=torch.long, device=D).t()
    torch.searchsorted(sb.to(D), v.to(D), out=out)
    same(out, torch.searchsorted(sb, v))
    # mixed dtypes promote
    same(torch.searchsorted(sb.to(D), torch.tensor([1, 4]).to(D)), torch.searchsorted(sb, torch.tensor([1, 4])))
    same(torch.searchsorted(sb.to(D), torch.empty(0).to(D)), torch.searchsorted(sb, torch.empty(0)))
    with pytest.raises(RuntimeError, match="side can only be"):
        torch.searchsorted(sb.to(D), v.to(D), side="middle")
    with pytest.raises(RuntimeError, match="boundaries tensor must be 1 dimension"):
        torch.bucketize(v.to(D), v.to(D))
    bad = torch.tensor([0, 1, 2, 3, 7])
    with pytest.raises(RuntimeError, match="sorter index out of range"):
        torch.searchsorted(b.to(D), v.to(D), sorter=bad.to(D)).cpu()


# ---- unique ----------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ALL)
def test_unique_matches_cpu(dtype):
    x = sample((6, 7), dtype, nan=False)
    for inv in (False, True):
        for counts in (False, True):
            got = torch.unique(x.to(D), return_inverse=inv, return_counts=counts)
            exp = torch.unique(x, return_inverse=inv, return_counts=counts)
            if not isinstance(got, tuple):
                got, exp = (got,), (exp,)
            for a, e in zip(got, exp):
                same(a, e)
            got = torch.unique_consecutive(x.to(D), return_inverse=inv, return_counts=counts)
            exp = torch.unique_consecutive(x, return_inverse=inv, return_counts=counts)
            if not isinstance(got, tuple):
                got, exp = (got,), (exp,)
            for a, e in zip(got, exp):
                same(a, e)


def test_unique_nan_empty_scalar_noncontiguous():
    x = torch.tensor([2.0, float("nan"), 2.0, -0.0, 0.0, float("nan"), 1.0])
    for a, e in zip(torch.unique(x.to(D), return_inverse=True, return_counts=True),
                    torch.unique(x, return_inverse=True, return_counts=True)):
        same(a, e)
    for a, e in zip(torch.unique_consecutive(x.to(D), return_inverse=True, return_counts=True),
                    torch.unique_consecutive(x, return_inverse=True, return_counts=True)):
        same(a, e)
    e = torch.empty(0, 3)
    for a, b in zip(torch.unique(e.to(D), return_inverse=True, return_counts=True),
                    torch.unique(e, return_inverse=True, return_counts=True)):
        same(a, b)
    s = torch.tensor(4)
    for a, b in zip(torch.unique(s.to(D), return_inverse=True, return_counts=True),
                    torch.unique(s, return_inverse=True, return_counts=True)):
        same(a, b)
    y = torch.randint(0, 5, (8, 6)).t()
    for a, b in zip(torch.unique(y.to(D).t().t(), return_inverse=True),
                    torch.unique(y, return_inverse=True)):
        same(a, b)
    same(torch.unique_consecutive(y[:, 0].to(D), dim=0), torch.unique_consecutive(y[:, 0], dim=0))


# ---- random ----------------------------------------------------------------------

def test_multinomial_distribution_and_determinism():
    p = torch.tensor([[0.1, 0.0, 0.6, 0.3], [0.0, 0.0, 1.0, 0.0]])
    torch.manual_seed(0)
    s = torch.multinomial(p.to(D), 20000, replacement=True)
    torch.manual_seed(0)
    s2 = torch.multinomial(p.to(D), 20000, replacement=True)
    assert s.device.type == "neuron" and s.dtype == torch.long and s.shape == (2, 20000)
    assert torch.equal(s.cpu(), s2.cpu())
    freq = torch.bincount(s[0].cpu(), minlength=4).double() / 20000
    torch.testing.assert_close(freq, torch.tensor([0.1, 0.0, 0.6, 0.3], dtype=torch.float64), atol=0.02, rtol=0)
    assert bool((s[1].cpu() == 2).all())
    w = torch.multinomial(p[0].to(D), 3)
    assert sorted(w.cpu().tolist()) == [0, 2, 3]
    one = torch.multinomial(torch.tensor([0.0, 2.0, 0.0], dtype=torch.float64).to(D), 1)
    assert one.cpu().tolist() == [1]
    out = torch.empty(0, dtype=torch.long, device=D)
    torch.multinomial(p.to(D), 2, out=out)
    assert out.shape == (2, 2)
    with pytest.raises(RuntimeError, match="cannot sample n_sample > prob_dist"):
        torch.multinomial(p.to(D), 5)
    with pytest.raises(RuntimeError, match="element < 0"):
        torch.multinomial(torch.tensor([0.5, -1.0]).to(D), 1).cpu()


def test_bernoulli_tensor_p():
    p = torch.rand(200, 100)
    p[0] = 0
    p[1] = 1
    torch.manual_seed(3)
    a = torch.bernoulli(p.to(D))
    torch.manual_seed(3)
    b = torch.empty(200, 100, dtype=torch.float16, device=D).bernoulli_(p.to(D))
    assert a.dtype == torch.float32
    assert torch.equal(a.cpu(), b.cpu().float())
    assert bool((a[0].cpu() == 0).all()) and bool((a[1].cpu() == 1).all())
    assert abs(a.cpu().mean().item() - p.mean().item()) < 0.02
    c = torch.empty(3, 4, device=D, dtype=torch.bool).bernoulli_(torch.tensor(1.0).to(D))
    assert bool(c.cpu().all())
    with pytest.raises(RuntimeError, match="p_in >= 0"):
        torch.bernoulli(torch.tensor([0.5, 2.0]).to(D)).cpu()


def test_dropout_mask_and_backward():
    x = torch.randn(300, 200, device=D, requires_grad=True)
    torch.manual_seed(5)
    y = torch.nn.functional.dropout(x, 0.25, training=True)
    torch.manual_seed(5)
    y2 = torch.nn.functional.dropout(x, 0.25, training=True)
    assert torch.equal(y.detach().cpu(), y2.detach().cpu())
    kept = (y.detach().cpu() != 0)
    assert abs(kept.float().mean().item() - 0.75) < 0.02
    torch.testing.assert_close(y.detach().cpu()[kept], (x.detach().cpu() / 0.75)[kept])
    y.backward(torch.ones_like(y))
    torch.testing.assert_close(x.grad.cpu(), kept.float() / 0.75)
    out, mask = torch.native_dropout(x.detach(), 0.5, True)
    assert mask.dtype == torch.bool and out.device.type == "neuron"
    out, mask = torch.native_dropout(x.detach(), 0.5, False)
    assert bool(mask.cpu().all())
    same(out, x.detach().cpu())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.uint8, torch.bool])
def test_unique_dim_matches_cpu(dtype):
    g = torch.Generator().manual_seed(2)
    x = torch.randint(0, 2, (6, 3, 4), generator=g).to(dtype)
    x[3] = x[1]  # duplicate slices along dim 0
    for dim in (0, 1, -1):
        for fn in (lambda t: torch.unique(t, dim=dim, return_inverse=True, return_counts=True),
                   lambda t: torch.unique_consecutive(t, dim=dim, return_inverse=True, return_counts=True)):
            for a, e in zip(fn(x.to(D)), fn(x)):
                same(a, e)
    same(torch.unique(x.to(D).transpose(0, 2), dim=1), torch.unique(x.transpose(0, 2), dim=1))
    e = torch.empty(0, 3, dtype=dtype)
    for a, b in zip(torch.unique(e.to(D), dim=0, return_inverse=True, return_counts=True),
                    torch.unique(e, dim=0, return_inverse=True, return_counts=True)):
        same(a, b)
    with pytest.raises(RuntimeError, match="aren't selected"):
        torch.unique(e.to(D), dim=1)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.int8, torch.uint8, torch.bool,
                                   torch.float32])
def test_unstable_sort_ties_match_cpu(dtype):
    """stable=False orders equal keys as the CPU's std::sort does."""
    g = torch.Generator().manual_seed(4)
    x = (torch.randn(8000, generator=g) * 3).to(dtype)
    if dtype.is_floating_point:
        x[::97] = float("nan")
    for desc in (False, True):
        same(torch.argsort(x.to(D), descending=desc), torch.argsort(x, descending=desc))
    y = x[:3000].reshape(30, 100)
    v, i = torch.sort(y.to(D), dim=1)
    ev, ei = torch.sort(y, dim=1)
    same(v, ev)
    same(i, ei)


def test_random_ops_do_not_depend_on_thread_count():
    """dropout masks, bernoulli(p) and multinomial depend on the seed only."""
    from conftest import run_python
    code = """
        import torch, torch_neuronx
        torch.manual_seed(11)
        x = torch.ones(300, 500, device="neuron")
        _, mask = torch.native_dropout(x, 0.3, True)
        b = torch.bernoulli(torch.rand(200, 300).to("neuron"))
        m = torch.multinomial(torch.rand(64, 50).to("neuron"), 20)
        r = torch.multinomial(torch.rand(64, 50).to("neuron"), 200, replacement=True)
        s = torch.sort(torch.randint(0, 5, (40, 3000)).to("neuron"), dim=1)[1]
        print(int(mask.cpu().sum()), hash(tuple(b.cpu().flatten().tolist())),
              hash(tuple(m.cpu().flatten().tolist())), hash(tuple(r.cpu().flatten().tolist())),
              hash(tuple(s.cpu().flatten().tolist())))
    """
    outs = []
    for threads in ("1", "4"):
        p = run_python(code, env={"TORCHNEURON_NUM_THREADS": threads, "PYTHONHASHSEED": "0"})
        assert p.returncode == 0, p.stderr
        outs.append(p.stdout.strip())
    assert outs[0] == outs[1]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16,
                                   torch.int64, torch.int8, torch.uint8])
def test_kthvalue_median_match_cpu(dtype):
    """Ties resolve to the CPU's index (its quickselect replayed, or the
    median's (value, index) order); a NaN makes the median NaN."""
    x = sample((7, 31), dtype, nan=False)
    for dim, k in ((1, 1), (1, 16), (-1, 31), (0, 4)):
        for keepdim in (False, True):
            v, i = torch.kthvalue(x.to(D), k, dim, keepdim)
            ev, ei = torch.kthvalue(x, k, dim, keepdim)
            same(v, ev)
            same(i, ei)
    for dim in (0, 1):
        for keepdim in (False, True):
            v, i = torch.median(x.to(D), dim, keepdim)
            ev, ei = torch.median(x, dim, keepdim)
            same(v, ev)
            same(i, ei)
    same(torch.median(x.to(D)), torch.median(x))
    same(torch.median(x.to(D).t(), 0)[1], torch.median(x.t(), 0)[1])
    if dtype.is_floating_point:
        y = sample((5, 9), dtype)  # with NaNs
        for a, e in zip(torch.median(y.to(D), 1), torch.median(y, 1)):
            same(a, e)
        same(torch.median(y.to(D)), torch.median(y))
    s = torch.tensor(3, dtype=dtype)
    for a, e in zip(torch.kthvalue(s.to(D), 1), torch.kthvalue(s, 1)):
        same(a, e)
    with pytest.raises(RuntimeError, match="out of range"):
        torch.kthvalue(x.to(D), 40, 1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.int8, torch.uint8, torch.bool])
def test_mode_matches_cpu(dtype):
    x = sample((6, 40), dtype, nan=False)
    for dim in (0, 1, -1):
        for keepdim in (False, True):
            v, i = torch.mode(x.to(D), dim, keepdim)
            ev, ei = torch.mode(x, dim, keepdim)
            same(v, ev)
            same(i, ei)
    same(torch.mode(x.to(D).t(), 1)[1], torch.mode(x.t(), 1)[1])
    s = torch.tensor(2, dtype=dtype)
    for a, e in zip(torch.mode(s.to(D)), torch.mode(s)):
        same(a, e)
