"""Matrix products on the GEMM kernel (ops_matmul.cpp) against the CPU:
mm, bmm, addmm, baddbmm, addmv, addbmm, dot/vdot and the composites built on
them (matmul with broadcasting, linear, mv, outer, einsum), over dtypes,
sizes around the block sizes, transposed/sliced/expanded views, alpha/beta,
in-place and out=, autograd -- all with the fallback as an error."""
import pytest
import torch
import torch_neuronx

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


# Sizes around the engine's edges: 0, 1, primes, the micro-tiles (MR 12/6,
# NR 32/16) and the default cache blocks of a 32 KiB L1 / 1 MiB L2 machine
# (KC ~192, MC ~672); the C tests cross every block edge with forced small
# blocks.
SWEEP_DIMS = [0, 1, 2, 5, 11, 12, 13, 31, 33, 64, 97, 191, 193, 257, 385]


@pytest.mark.parametrize("dtype", FLOATS)
def test_random_sweep(native, dtype):
    g = torch.Generator().manual_seed(7 + FLOATS.index(dtype))
    for it in range(14):
        m, n, k = (SWEEP_DIMS[int(i)] for i in torch.randint(0, len(SWEEP_DIMS), (3,), generator=g))
        if it == 0:
            m, n, k = 673, 7, 193  # across MC and KC at once
        layout = int(torch.randint(0, 4, (1,), generator=g))
        a = rand(m, k, dtype=dtype, gen=g)
        b = rand(k, n, dtype=dtype, gen=g)
        da, db = a.to("neuron"), b.to("neuron")
        if layout & 1:  # transposed storage
            da = da.t().contiguous().t()
        if layout & 2:  # sliced: every other column of a wider matrix
            db = torch.stack([db, db], -1).flatten(-2)[:, ::2]
        want = expected(torch.mm, a, b, dtype=dtype)
        assert_same(da @ db, want, **tol(dtype, k))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_matmul_shapes(native, dtype):
    """matmul's dispatch: vector x matrix, matrix x vector, batched with
    broadcasting on either side, tall and skinny."""
    g = torch.Generator().manual_seed(8)
    shapes = [((300,), (300, 7)), ((7, 300), (300,)), ((2, 1, 9, 40), (3, 40, 17)),
              ((40,), (4, 40, 5)), ((4, 9, 40), (40,)), ((1000, 3), (3, 2)), ((2, 500), (500, 600)),
              ((5, 64, 64), (5, 64, 64)), ((257,), (257,))]
    for sa, sb in shapes:
        a, b = rand(*sa, dtype=dtype, gen=g), rand(*sb, dtype=dtype, gen=g)
        want = expected(torch.matmul, a, b, dtype=dtype)
        assert_same(a.to("neuron") @ b.to("neuron"), want, **tol(dtype, sa[-1]))


def test_batched_many_small_and_large(native):
    """Batches of small products (split by batch entry) and a batch of large
    ones (split inside each product) agree with the CPU."""
    g = torch.Generator().manual_seed(9)
    for shape_a, shape_b in [((64, 8, 9), (64, 9, 10)), ((3, 130, 200), (3, 200, 150))]:
        a, b = rand(*shape_a, gen=g), rand(*shape_b, gen=g)
        assert_same(torch.bmm(a.to("neuron"), b.to("neuron")), torch.bmm(a, b), **tol(torch.float32, shape_a[-1]))


OPS = {
    "mm": (lambda a, b, c: a @ b, [(6, 5), (5, 4), None]),
    "bmm": (lambda a, b, c: torch.bmm(a, b), [(3, 6, 5), (3, 5, 4), None]),
    "addmm": (lambda a, b, c: torch.addmm(c, a, b, beta=0.5, alpha=2), [(6, 5), (5, 4), (4,)]),
    "addbmm": (lambda a, b, c: torch.addbmm(c, a, b), [(3, 6, 5), (3, 5, 4), (6, 4)]),
    "baddbmm": (lambda a, b, c: torch.baddbmm(c, a, b, alpha=0.5), [(3, 6, 5), (3, 5, 4), (6, 4)]),
    "mv": (lambda a, b, c: torch.mv(a, b), [(6, 5), (5,), None]),
    "addmv": (lambda a, b, c: torch.addmv(c, a, b, beta=2), [(6, 5), (5,), (6,)]),
    "dot": (lambda a, b, c: torch.dot(a, b), [(7,), (7,), None]),
    "vdot": (lambda a, b, c: torch.vdot(a, b), [(7,), (7,), None]),
    "outer": (lambda a, b, c: torch.outer(a, b), [(7,), (4,), None]),
    "linear": (lambda a, b, c: torch.nn.functional.linear(a, b, c), [(2, 6, 5), (4, 5), (4,)]),
    "matmul": (lambda a, b, c: torch.matmul(a, b), [(2, 1, 6, 5), (3, 5, 4), None]),
    "matmul_vec": (lambda a, b, c: torch.matmul(a, b), [(5,), (2, 5, 4), None]),
    "einsum": (lambda a, b, c: torch.einsum("bij,jk->bik", a, b), [(2, 6, 5), (5, 4), None]),
}


@pytest.mark.parametrize("op", sorted(OPS))
def test_forward_backward_native(op):
    """Forward and backward of each product with the fallback as an error
    (every ATen op the autograd formulas call is native too)."""
    fn, shapes = OPS[op]
    g = torch.Generator().manual_seed(10)
    inputs = [rand(*s, gen=g) if s else None for s in shapes]
    results = []
    for device in ("cpu", "neuron"):
        args = [x.detach().to(device).requires_grad_() if x is not None else None for x in inputs]
        ctx = torch_neuronx._fallback.fallback_mode("error") if device == "neuron" else _nullcontext()
        with ctx:
            y = fn(*args)
            (y * torch.arange(y.numel(), device=device).reshape(y.shape).to(y.dtype).cos()).sum().backward()
        results.append((y.detach().cpu(), [a.grad.cpu() if a is not None else None for a in args]))
    torch.testing.assert_close(results[1][0], results[0][0], atol=1e-5, rtol=1e-5)
    for got, want in zip(results[1][1], results[0][1]):
        if want is not None:
            torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def _nullcontext():
    import contextlib
    return contextlib.nullcontext()


def test_bias_epilogue_linear_3d(native):
    """linear with bias on 3-d input (addmm on the flattened rows) and an
    addmm whose self is a row, a column and a scalar."""
    g = torch.Generator().manual_seed(11)
    x, w, b = rand(3, 50, 70, gen=g), rand(40, 70, gen=g), rand(40, gen=g)
    assert_same(torch.nn.functional.linear(x.to("neuron"), w.to("neuron"), b.to("neuron")),
                torch.nn.functional.linear(x, w, b), **tol(torch.float32, 70))
    a, m2 = rand(50, 70, gen=g), rand(70, 40, gen=g)
    for self_ in (rand(40, gen=g), rand(50, 1, gen=g), rand(1, gen=g)):
        assert_same(torch.addmm(self_.to("neuron"), a.to("neuron"), m2.to("neuron"), beta=0.5),
                    torch.addmm(self_, a, m2, beta=0.5), **tol(torch.float32, 70))


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64])
def test_addend_operand_paths(native, dtype):
    """addmm/baddbmm/addmv hand a broadcast self to the kernel as its addend
    (out = alpha a b + beta c): Linear-with-bias shapes for every dtype
    (bfloat16/float16 through the workspace store, floats through the tile
    epilogue), a transposed output and a broadcast batched self."""
    g = torch.Generator().manual_seed(5)
    x, w, b = rand(70, 45, dtype=dtype, gen=g), rand(33, 45, dtype=dtype, gen=g), rand(33, dtype=dtype, gen=g)
    kw = tol(dtype, 45) if dtype.is_floating_point else {}
    fn = lambda x, w, b: torch.addmm(b, x, w.t(), beta=2 if not dtype.is_floating_point else 0.5)
    assert_same(fn(x.to("neuron"), w.to("neuron"), b.to("neuron")), expected(fn, x, w, b, dtype=dtype), **kw)
    out_t = torch.empty(33, 70, dtype=dtype).t()
    dout_t = torch.empty(33, 70, dtype=dtype, device="neuron").t()
    torch.addmm(b, x, w.t(), out=out_t)
    torch.addmm(b.to("neuron"), x.to("neuron"), w.t().to("neuron"), out=dout_t)
    assert_same(dout_t, out_t, **kw)
    bb = rand(3, 1, 33, dtype=dtype, gen=g)
    xs, ws = rand(3, 20, 45, dtype=dtype, gen=g), rand(3, 45, 33, dtype=dtype, gen=g)
    fn3 = lambda bb, xs, ws: torch.baddbmm(bb, xs, ws)
    assert_same(fn3(bb.to("neuron"), xs.to("neuron"), ws.to("neuron")), expected(fn3, bb, xs, ws, dtype=dtype), **kw)


def test_addend_other_dtype_self():
    """A float64 self with float32 matrices (out= in float32): the CPU's
    behaviour, whatever it is, on neuron."""
    a, m2, s = torch.rand(8, 5), torch.rand(5, 6), torch.rand(6, dtype=torch.float64)
    try:
        want = torch.addmm(s, a, m2, out=torch.empty(8, 6))
    except RuntimeError as e:
        with pytest.raises(RuntimeError, match=str(e).split("\n")[0][:40]):
            torch.addmm(s.to("neuron"), a.to("neuron"), m2.to("neuron"), out=torch.empty(8, 6, device="neuron"))
        return
    got = torch.addmm(s.to("neuron"), a.to("neuron"), m2.to("neuron"), out=torch.empty(8, 6, device="neuron"))
    assert_same(got, want)
