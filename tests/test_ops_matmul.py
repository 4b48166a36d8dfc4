"""Matrix products on the GEMM kernel (ops_matmul.cpp) against the CPU:
mm, bmm, addmm, baddbmm, addmv, addbmm, dot/vdot and the composites built on
them (matmul with broadcasting, linear, mv, outer, einsum), over dtypes,
sizes around the block sizes, transposed/sliced/expanded views, alpha/beta,
in-place and out=, autograd -- all with the fallback as an error."""
import pytest
import torch

from conftest import assert_same

FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INTS = [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8]


def tol(dtype, k):
    """Tolerance for a dot product of length k of values in [-1, 1]."""
    eps = {torch.float32: 1e-6, torch.float64: 1e-13, torch.float16: 1e-3,
           torch.bfloat16: 8e-3}[dtype]
    return dict(atol=eps * (k + 4) * 4, rtol=eps * 16)


def rand(*shape, dtype=torch.float32, gen=None):
    if dtype.is_floating_point:
        return (torch.rand(*shape, generator=gen) * 2 - 1).to(dtype)
    return torch.randint(0, 5, shape, generator=gen).to(dtype)


def expected(fn, *cpu_args, dtype):
    """The CPU result; float16/bfloat16 computed in float32 and rounded once,
    as the device (and ATen's mkldnn path) does."""
    if dtype in (torch.float16, torch.bfloat16):
        return fn(*[a.float() if isinstance(a, torch.Tensor) else a for a in cpu_args]).to(dtype)
    return fn(*cpu_args)


@pytest.mark.parametrize("dtype", FLOATS + INTS)
@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (6, 16, 8), (7, 17, 13), (97, 33, 257),
                                   (0, 3, 4), (3, 0, 4), (3, 4, 0)])
def test_mm(native, dtype, m, n, k):
    g = torch.Generator().manual_seed(m * 100 + n * 10 + k)
    a, b = rand(m, k, dtype=dtype, gen=g), rand(k, n, dtype=dtype, gen=g)
    want = expected(torch.mm, a, b, dtype=dtype)
    kw = tol(dtype, k) if dtype.is_floating_point else {}
    assert_same(torch.mm(a.to("neuron"), b.to("neuron")), want, **kw)


@pytest.mark.parametrize("layout", ["t_a", "t_b", "t_both", "sliced", "expanded"])
def test_mm_views(native, layout):
    g = torch.Generator().manual_seed(1)
    base_a, base_b = rand(40, 30, gen=g), rand(30, 50, gen=g)
    views = {
        "t_a": (lambda a, b: (a.t().contiguous().t(), b)),
        "t_b": (lambda a, b: (a, b.t().contiguous().t())),
        "t_both": (lambda a, b: (a.t().contiguous().t(), b.t().contiguous().t())),
        "sliced": (lambda a, b: (a[::2, 1::2], b[1::2, ::3])),
        "expanded": (lambda a, b: (a[:, :1].expand(40, 30), b[:1].expand(30, 50))),
    }[layout]
    a, b = views(base_a, base_b)
    da, db = views(base_a.to("neuron"), base_b.to("neuron"))
    assert_same(da @ db, a @ b, **tol(torch.float32, 30))


def test_bmm_baddbmm_addbmm(native):
    g = torch.Generator().manual_seed(2)
    a, b, c = rand(4, 5, 7, gen=g), rand(4, 7, 3, gen=g), rand(5, 3, gen=g)
    d = [t.to("neuron") for t in (a, b, c)]
    kw = tol(torch.float32, 7 * 4)
    assert_same(torch.bmm(d[0], d[1]), torch.bmm(a, b), **kw)
    assert_same(torch.baddbmm(d[2], d[0], d[1], beta=0.5, alpha=2), torch.baddbmm(c, a, b, beta=0.5, alpha=2), **kw)
    assert_same(torch.addbmm(d[2], d[0], d[1], beta=-1, alpha=0.5), torch.addbmm(c, a, b, beta=-1, alpha=0.5), **kw)
    # batch-transposed operands
    assert_same(torch.bmm(d[0].transpose(0, 1).contiguous().transpose(0, 1), d[1]), torch.bmm(a, b), **kw)


def test_addmm_alpha_beta_inplace_out(native):
    g = torch.Generator().manual_seed(3)
    c, a, b = rand(5, 6, gen=g), rand(5, 4, gen=g), rand(4, 6, gen=g)
    dc, da, db = c.to("neuron"), a.to("neuron"), b.to("neuron")
    kw = tol(torch.float32, 4)
    assert_same(torch.addmm(dc, da, db, beta=0.5, alpha=-2), torch.addmm(c, a, b, beta=0.5, alpha=-2), **kw)
    bias = rand(6, gen=g)
    assert_same(torch.addmm(bias.to("neuron"), da, db), torch.addmm(bias, a, b), **kw)  # broadcast self
    nan_self = torch.full((5, 6), float("nan"))
    assert_same(torch.addmm(nan_self.to("neuron"), da, db, beta=0), torch.addmm(nan_self, a, b, beta=0), **kw)
    out = torch.empty(0, device="neuron")
    torch.addmm(dc, da, db, out=out)
    assert_same(out, torch.addmm(c, a, b), **kw)
    dc.addmm_(da, db, alpha=3)
    assert_same(dc, c.addmm(a, b, alpha=3), **kw)
    o = torch.empty(6, 5, device="neuron").t()  # a transposed out is written in place
    torch.mm(da, db, out=o)
    assert_same(o, a @ b, **kw)


def test_vectors(native):
    g = torch.Generator().manual_seed(4)
    m, v, w, y = rand(7, 5, gen=g), rand(5, gen=g), rand(5, gen=g), rand(7, gen=g)
    d = {k: t.to("neuron") for k, t in dict(m=m, v=v, w=w, y=y).items()}
    kw = tol(torch.float64, 5) | dict(atol=1e-5, rtol=1e-5)
    assert_same(torch.mv(d["m"], d["v"]), torch.mv(m, v), **kw)
    assert_same(torch.addmv(d["y"], d["m"], d["v"], beta=2, alpha=0.5), torch.addmv(y, m, v, beta=2, alpha=0.5), **kw)
    assert_same(torch.dot(d["v"], d["w"]), torch.dot(v, w), **kw)
    assert_same(torch.vdot(d["v"], d["w"]), torch.vdot(v, w), **kw)
    assert_same(d["v"][:4:2] @ d["w"][1::2], v[:4:2] @ w[1::2], **kw)
    assert_same(torch.outer(d["v"], d["y"]), torch.outer(v, y), **kw)
    i = torch.arange(6)
    assert_same(torch.dot(i.to("neuron"), i.to("neuron")), torch.dot(i, i))


def test_matmul_broadcasting_and_linear(native):
    g = torch.Generator().manual_seed(5)
    x, w, bias = rand(2, 3, 8, 16, gen=g), rand(24, 16, gen=g), rand(24, gen=g)
    dx, dw, db = x.to("neuron"), w.to("neuron"), bias.to("neuron")
    kw = tol(torch.float32, 16)
    assert_same(torch.nn.functional.linear(dx, dw, db), torch.nn.functional.linear(x, w, bias), **kw)
    y = rand(3, 16, 5, gen=g)
    assert_same(dx @ y.to("neuron"), x @ y, **kw)
    assert_same(torch.einsum("bij,bjk->bik", dx[0], y.to("neuron")), torch.einsum("bij,bjk->bik", x[0], y), **kw)


def test_autograd(native):
    g = torch.Generator().manual_seed(6)
    x, w = rand(8, 16, gen=g), rand(4, 16, gen=g)
    grads = []
    for device in ("cpu", "neuron"):
        xd = x.detach().to(device).requires_grad_()
        wd = w.detach().to(device).requires_grad_()
        y = torch.nn.functional.linear(xd, wd)
        (y * y).sum().backward()
        grads.append((xd.grad, wd.grad))
    torch.testing.assert_close(grads[1][0].cpu(), grads[0][0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(grads[1][1].cpu(), grads[0][1], atol=1e-5, rtol=1e-5)


def test_errors_match_cpu():
    a, b, d = torch.randn(2, 3), torch.randn(4, 5), torch.randn(3, 2).double()
    cases = [(torch.mm, (a, b)), (torch.mm, (a, d)), (torch.bmm, (a[None], d[None])),
             (torch.addmm, (a[:, :2], a, d)), (torch.baddbmm, (a[None, :, :2], a[None], d[None])),
             (torch.addmv, (a[:, 0], a, d[:, 0]))]
    for fn, args in cases:
        with pytest.raises(RuntimeError) as cpu_err:
            fn(*args)
        with pytest.raises(RuntimeError) as dev_err:
            fn(*[t.to("neuron") for t in args])
        assert str(dev_err.value).split("\n")[0] == str(cpu_err.value).split("\n")[0]
    with pytest.raises(RuntimeError, match="1D tensors expected"):
        torch.dot(a.to("neuron"), a[0].to("neuron"))
    with pytest.raises(RuntimeError, match="not implemented for 'Bool'"):
        torch.mm(torch.ones(2, 2, dtype=torch.bool, device="neuron"),
                 torch.ones(2, 2, dtype=torch.bool, device="neuron"))


def test_complex_falls_back_correctly():
    a = torch.randn(3, 3, dtype=torch.complex64)
    assert_same(torch.mm(a.to("neuron"), a.to("neuron")), a @ a, atol=1e-5, rtol=1e-5)
