"""Normalisation on neuron (ops_norm.cpp, ops_norm_group.cpp, kernels/src/norm/norm.c)
against torch on the CPU: layer_norm, rms_norm, batch_norm (training with
running stats, eval, no stats), group_norm, instance_norm, local_response_norm
and the native_* / _native_batch_norm_legit / _batch_norm_with_update ops
they lower to: outputs, saved statistics (values, dtypes, shapes), running
stats, and the input/weight/bias gradients, over float32/float64/bfloat16/
float16 (16-bit inputs also with float32 parameters), contiguous,
channels_last and non-contiguous inputs, optional weight/bias, empty
batches, and the CPU's error messages.  Everything runs inside
fallback_mode("error"), so a fallback to the CPU fails the test."""
import pytest
import torch
import torch.nn.functional as F

import torch_neuronx
from torch_neuronx._fallback import fallback_mode

D = "neuron"
FLOATS = [torch.float32, torch.float64, torch.bfloat16, torch.float16]


@pytest.fixture(autouse=True)
def native():
    torch_neuronx._C.reset_fallback_stats()
    with fallback_mode("error"):
        yield
    assert dict(torch_neuronx._C.fallback_stats()) == {}


def tol(dtype):
    if not dtype.is_floating_point:
        return dict(rtol=0, atol=0)
    return {torch.bfloat16: dict(rtol=4e-2, atol=4e-2), torch.float16: dict(rtol=5e-3, atol=5e-3),
            torch.float32: dict(rtol=2e-5, atol=2e-5), torch.float64: dict(rtol=1e-10, atol=1e-10)}[dtype]


def same(actual, expected, dtype=None, scale=1.0):
    if expected is None:
        assert actual is None
        return
    assert actual.device.type == "neuron", actual.device
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    t = tol(dtype or expected.dtype)
    torch.testing.assert_close(actual.cpu(), expected, equal_nan=True,
                               rtol=t["rtol"] * scale, atol=t["atol"] * scale)


def leaf(t, dev):
    return t.detach().to(dev).requires_grad_(t.requires_grad)


def run_both(fn, *tensors, backward=True, dtype=None, scale=1.0, grad_scale=4.0):
    """fn on CPU tensors and on neuron copies; compares outputs and grads."""
    cpu_in = [t.detach().clone().requires_grad_(t.is_floating_point() and backward) if t is not None else None
              for t in tensors]
    dev_in = [leaf(t, D) if t is not None else None for t in cpu_in]
    out_c = fn(*cpu_in)
    out_d = fn(*dev_in)
    same(out_d, out_c, dtype, scale)
    if backward:
        g = torch.randn_like(out_c)
        out_c.backward(g)
        out_d.backward(g.to(D))
        for a, b in zip(dev_in, cpu_in):
            if b is not None and b.requires_grad:
                same(a.grad, b.grad, dtype, grad_scale * scale)
    return dev_in, cpu_in


# ------------------------------------------------------------------ layer norm

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,norm", [((4, 10), (10,)), ((2, 3, 17), (3, 17)), ((5, 64), (64,)),
                                        ((1, 1), (1,))])
@pytest.mark.parametrize("affine", ["both", "weight", "none"])
def test_layer_norm(dtype, shape, norm, affine):
    x = torch.randn(shape, dtype=dtype) * 3 + 1
    w = torch.randn(norm, dtype=dtype) if affine != "none" else None
    b = torch.randn(norm, dtype=dtype) if affine == "both" else None
    run_both(lambda x, w, b: F.layer_norm(x, norm, w, b, eps=1e-5), x, w, b)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_layer_norm_mixed_dtypes_and_stats(dtype):
    x = torch.randn(6, 32, dtype=dtype)
    w, b = torch.randn(32), torch.randn(32)
    yc, mc, rc = torch.native_layer_norm(x, [32], w, b, 1e-5)
    yd, md, rd = torch.native_layer_norm(x.to(D), [32], w.to(D), b.to(D), 1e-5)
    same(yd, yc, dtype)
    same(md, mc, torch.float32)
    same(rd, rc, torch.float32)
    assert md.dtype == torch.float32 and md.shape == (6, 1)
    run_both(lambda x, w, b: F.layer_norm(x, [32], w, b), x, w, b, dtype=dtype)


def test_layer_norm_noncontiguous_and_stats_shape():
    x = torch.randn(8, 6, 5).transpose(0, 2)  # (5, 6, 8) non-contiguous
    run_both(lambda x: F.layer_norm(x, (6, 8)), x)
    y, m, r = torch.native_layer_norm(x.to(D), [6, 8], None, None, 1e-5)
    assert m.shape == (5, 1, 1) and r.shape == (5, 1, 1)
    _, mc, rc = torch.native_layer_norm(x, [6, 8], None, None, 1e-5)
    same(m, mc)
    same(r, rc)


def test_layer_norm_empty():
    for shape, norm in [((0, 4), [4]), ((3, 0), [0])]:
        x = torch.randn(shape)
        for a, b in zip(torch.native_layer_norm(x.to(D), norm, None, None, 1e-5),
                        torch.native_layer_norm(x, norm, None, None, 1e-5)):
            same(a, b)
    x = torch.randn(0, 4, requires_grad=True)
    w = torch.randn(4, requires_grad=True)
    xd, wd = leaf(x, D), leaf(w, D)
    F.layer_norm(xd, [4], wd).sum().backward()
    same(wd.grad, torch.zeros(4))


def test_layer_norm_errors():
    x = torch.randn(2, 5)
    for args in [([4], None, None), ([5], torch.randn(4), None), ([5], None, torch.randn(3))]:
        with pytest.raises(RuntimeError) as cpu_err:
            torch.native_layer_norm(x, args[0], args[1], args[2], 1e-5)
        with pytest.raises(RuntimeError) as dev_err:
            torch.native_layer_norm(x.to(D), args[0], *(a.to(D) if a is not None else None for a in args[1:]), 1e-5)
        assert str(dev_err.value).split("\n")[0] == str(cpu_err.value).split("\n")[0]
    with pytest.raises(RuntimeError, match="mixed dtype"):
        torch.native_layer_norm(x.double().to(D), [5], torch.randn(5, device=D), None, 1e-5)


def test_layer_norm_large_offset_is_stable():
    x = torch.randn(4, 256, dtype=torch.float64) + 1e4
    # float32 keeps the mean to an ulp of 1e4 (1e-3), as ATen's float32 CPU
    # code does; a one-pass sum of squares would lose everything here
    same(F.layer_norm(x.float().to(D), [256]), F.layer_norm(x, [256]).float(), scale=200)


@pytest.mark.parametrize("kind", ["layer", "rms", "group"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_large_outputs_stream_the_same_values(kind, dtype):
    # Outputs of 4 MiB and more are computed row by row in a buffer and
    # streamed to memory (common/stream_store.h): rows of 1003 elements start
    # at every alignment, so the unaligned head, the streamed body and the
    # tail all run; the values are the in-place path's, so the CPU's.
    rows = (4 << 20) // (1003 * dtype.itemsize) + 3
    g = torch.Generator().manual_seed(7)
    if kind == "group":
        x = torch.randn(rows // 4, 4 * 17, 59, generator=g, dtype=dtype)
        w, b = torch.randn(68, generator=g, dtype=dtype), torch.randn(68, generator=g, dtype=dtype)
        f = lambda t, w, b: F.group_norm(t, 4, w, b)  # noqa: E731
    else:
        x = torch.randn(rows, 1003, generator=g, dtype=dtype)
        w, b = torch.randn(1003, generator=g, dtype=dtype), torch.randn(1003, generator=g, dtype=dtype)
        f = ((lambda t, w, b: F.layer_norm(t, [1003], w, b)) if kind == "layer"
             else (lambda t, w, b: F.rms_norm(t, [1003], w)))
    assert x.numel() * dtype.itemsize >= 4 << 20
    same(f(x.to(D), w.to(D), b.to(D)), f(x, w, b))


# -------------------------------------------------------------------- rms norm

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("with_weight", [True, False])
@pytest.mark.parametrize("eps", [None, 1e-6])
def test_rms_norm(dtype, with_weight, eps):
    x = torch.randn(5, 3, 24, dtype=dtype)
    w = torch.randn(3, 24, dtype=dtype) if with_weight else None
    run_both(lambda x, w: F.rms_norm(x, (3, 24), w, eps), x, w, scale=2)


def test_rms_norm_is_fused_and_mixed_weight():
    torch_neuronx._C.reset_fallback_stats()
    x = torch.randn(4, 16, dtype=torch.bfloat16)
    w = torch.randn(16)
    run_both(lambda x, w: F.rms_norm(x, [16], w), x, w, dtype=torch.bfloat16)
    y, r = torch._fused_rms_norm(x.to(D), [16], w.to(D), 1e-6)
    assert y.dtype == torch.bfloat16 and r.dtype == torch.float32 and r.shape == (4, 1)
    ref = (x.float().pow(2).mean(-1, keepdim=True) + 1e-6).rsqrt()
    same(r, ref)
    with torch.inference_mode():
        same(F.rms_norm(x.to(D), [16], w.to(D)), F.rms_norm(x, [16], w), torch.bfloat16)


def test_rms_norm_double_backward():
    x = torch.randn(3, 8, dtype=torch.float64, requires_grad=True)
    w = torch.randn(8, dtype=torch.float64, requires_grad=True)
    def f(x, w):
        y = F.rms_norm(x, [8], w)
        (g,) = torch.autograd.grad(y.pow(2).sum(), x, create_graph=True)
        return g
    with fallback_mode("silent"):  # the double backward is composite; only values matter here
        run_both(f, x, w)
    torch_neuronx._C.reset_fallback_stats()


# ------------------------------------------------------------------ batch norm

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(4, 3), (4, 3, 5), (2, 4, 3, 5), (2, 3, 2, 2, 3)])
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm(dtype, shape, training):
    C = shape[1]
    x = torch.randn(shape, dtype=dtype) * 2 + 0.5
    w, b = torch.randn(C, dtype=dtype), torch.randn(C, dtype=dtype)
    rm, rv = torch.randn(C, dtype=dtype), torch.rand(C, dtype=dtype) + 0.5
    rmd, rvd = rm.to(D), rv.to(D)
    run_both(lambda x, w, b: F.batch_norm(x, rm if x.device.type == "cpu" else rmd,
                                          rv if x.device.type == "cpu" else rvd, w, b,
                                          training=training, momentum=0.2, eps=1e-4),
             x, w, b, scale=2)
    same(rmd, rm, dtype)
    same(rvd, rv, dtype)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_mixed(dtype, training):
    x = torch.randn(3, 4, 5, dtype=dtype)
    w, b, rm, rv = torch.randn(4), torch.randn(4), torch.randn(4), torch.rand(4) + 0.5
    dev = [t.to(D) for t in (x, w, b, rm, rv)]
    outs_c = torch.native_batch_norm(x, w, b, rm, rv, training, 0.1, 1e-5)
    outs_d = torch.native_batch_norm(*dev, training, 0.1, 1e-5)
    for a, e in zip(outs_d, outs_c):
        same(a, e, dtype)
    same(dev[3], rm)
    same(dev[4], rv)
    g = torch.randn_like(x)
    gc = torch.ops.aten.native_batch_norm_backward(g, x, w, rm, rv, outs_c[1], outs_c[2], training, 1e-5,
                                          [True, True, True])
    gd = torch.ops.aten.native_batch_norm_backward(g.to(D), dev[0], dev[1], dev[3], dev[4], outs_d[1],
                                          outs_d[2], training, 1e-5, [True, True, True])
    for a, e in zip(gd, gc):
        same(a, e, dtype, scale=4)


def test_batch_norm_channels_last_and_noncontiguous():
    for x in [torch.randn(2, 5, 4, 3).to(memory_format=torch.channels_last),
              torch.randn(3, 4, 6, 5).transpose(2, 3),
              torch.randn(4, 6, 3, 3)[:, ::2]]:
        dev_in, _ = run_both(lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
                             x, torch.randn(x.shape[1]), torch.randn(x.shape[1]))
    x = torch.randn(2, 5, 4, 3).to(memory_format=torch.channels_last)
    y = torch.native_batch_norm(x.to(D), None, None, None, None, True, 0.1, 1e-5)[0]
    assert y.is_contiguous(memory_format=torch.channels_last)


def test_batch_norm_modules_and_stats():
    for m in [torch.nn.BatchNorm1d(6), torch.nn.BatchNorm2d(6), torch.nn.BatchNorm3d(6)]:
        md = type(m)(6).to(D)
        md.load_state_dict(m.state_dict())
        shape = {torch.nn.BatchNorm1d: (4, 6, 7), torch.nn.BatchNorm2d: (4, 6, 3, 3),
                 torch.nn.BatchNorm3d: (2, 6, 2, 3, 2)}[type(m)]
        for step in range(2):
            x = torch.randn(shape)
            same(md(x.to(D)), m(x))
        same(md.running_mean, m.running_mean)
        same(md.running_var, m.running_var)
        assert md.num_batches_tracked.item() == m.num_batches_tracked.item()
        m.eval(), md.eval()
        x = torch.randn(shape)
        same(md(x.to(D)), m(x))


def test_batch_norm_legit_variants():
    x = torch.randn(4, 3, 5)
    w, b, rm, rv = torch.randn(3), torch.randn(3), torch.randn(3), torch.rand(3) + 0.5
    rmd, rvd = rm.to(D), rv.to(D)
    for train in [True, False]:
        c = torch._native_batch_norm_legit(x, w, b, rm, rv, train, 0.1, 1e-5)
        d = torch._native_batch_norm_legit(x.to(D), w.to(D), b.to(D), rmd, rvd, train, 0.1, 1e-5)
        for a, e in zip(d, c):
            same(a, e)
        same(rmd, rm)
        same(rvd, rv)
    c = torch._native_batch_norm_legit(x, w, b, True, 0.1, 1e-5)
    d = torch._native_batch_norm_legit(x.to(D), w.to(D), b.to(D), True, 0.1, 1e-5)
    for a, e in zip(d, c):
        same(a, e)
    c = torch._native_batch_norm_legit_no_training(x, w, b, rm, rv, 0.1, 1e-5)
    d = torch._native_batch_norm_legit_no_training(x.to(D), w.to(D), b.to(D), rmd, rvd, 0.1, 1e-5)
    for a, e in zip(d, c):
        same(a, e)
    c = torch.ops.aten._batch_norm_with_update(x, w, b, rm, rv, 0.1, 1e-5)
    d = torch.ops.aten._batch_norm_with_update(x.to(D), w.to(D), b.to(D), rmd, rvd, 0.1, 1e-5)
    for a, e in zip(d, c):
        same(a, e)
    same(rmd, rm)
    same(rvd, rv)
    g = torch.randn_like(x)
    gc = torch.ops.aten.batch_norm_backward(g, x, w, rm, rv, c[1], c[2], True, 1e-5,
                                            [True, True, True], c[3])
    gd = torch.ops.aten.batch_norm_backward(g.to(D), x.to(D), w.to(D), rmd, rvd, d[1], d[2], True,
                                            1e-5, [True, True, True], d[3])
    for a, e in zip(gd, gc):
        same(a, e, scale=4)
    c = torch.ops.aten._batch_norm_no_update(x, w, b, rm, rv, 0.1, 1e-5)
    d = torch.ops.aten._batch_norm_no_update(x.to(D), w.to(D), b.to(D), rmd, rvd, 0.1, 1e-5)
    same(d[0], c[0])


def test_batch_norm_empty_and_errors():
    x = torch.randn(0, 3, 4)
    rm, rv = torch.zeros(3), torch.ones(3)
    for a, e in zip(torch.native_batch_norm(x.to(D), None, None, rm.to(D), rv.to(D), False, 0.1, 1e-5),
                    torch.native_batch_norm(x, None, None, rm, rv, False, 0.1, 1e-5)):
        same(a, e)
    with pytest.raises(RuntimeError, match="input tensor must have at least one element"):
        torch.native_batch_norm(x.to(D), None, None, rm.to(D), rv.to(D), True, 0.1, 1e-5)
    with pytest.raises(RuntimeError, match="running_mean and running_var must be defined"):
        torch.native_batch_norm(torch.randn(2, 3, device=D), None, None, None, None, False, 0.1, 1e-5)
    with pytest.raises(RuntimeError, match="mixed dtype"):
        torch.native_batch_norm(torch.randn(2, 3, device=D, dtype=torch.float64),
                                torch.randn(3, device=D), None, None, None, True, 0.1, 1e-5)
    with pytest.raises(ValueError, match="Expected more than 1 value per channel"):
        F.batch_norm(torch.randn(1, 3, device=D), None, None, training=True)


# ------------------------------------------------------------------ group norm

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,groups", [((2, 6, 5), 3), ((3, 4, 2, 3), 2), ((2, 8), 4), ((1, 6, 7), 1),
                                          ((2, 6, 3, 4), 6)])
@pytest.mark.parametrize("affine", [True, False])
def test_group_norm(dtype, shape, groups, affine):
    C = shape[1]
    x = torch.randn(shape, dtype=dtype) * 2 + 1
    w = torch.randn(C, dtype=dtype) if affine else None
    b = torch.randn(C, dtype=dtype) if affine else None
    run_both(lambda x, w, b: F.group_norm(x, groups, w, b), x, w, b, scale=2)


def test_group_norm_mixed_channels_last_and_stats():
    x = torch.randn(2, 6, 3, 4, dtype=torch.bfloat16)
    w, b = torch.randn(6), torch.randn(6)
    c = torch.native_group_norm(x, w, b, 2, 6, 12, 3, 1e-5)
    d = torch.native_group_norm(x.to(D), w.to(D), b.to(D), 2, 6, 12, 3, 1e-5)
    for a, e in zip(d, c):
        same(a, e, torch.bfloat16)
    assert d[1].dtype == torch.float32 and d[1].shape == (2, 3)
    xc = torch.randn(2, 6, 3, 4).to(memory_format=torch.channels_last)
    run_both(lambda x, w, b: F.group_norm(x, 3, w, b), xc, torch.randn(6), torch.randn(6))


def test_group_norm_errors():
    with pytest.raises(RuntimeError) as cpu_err:
        F.group_norm(torch.randn(2, 6, 3), 4)
    with pytest.raises(RuntimeError) as dev_err:
        F.group_norm(torch.randn(2, 6, 3, device=D), 4)
    assert str(dev_err.value).split("\n")[0] == str(cpu_err.value).split("\n")[0]


# ---------------------------------------------------- composites made native

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_instance_norm(dtype):
    x = torch.randn(3, 4, 5, 6, dtype=dtype)
    run_both(lambda x, w, b: F.instance_norm(x, weight=w, bias=b), x, torch.randn(4, dtype=dtype),
             torch.randn(4, dtype=dtype))
    rm, rv = torch.zeros(4, dtype=dtype), torch.ones(4, dtype=dtype)
    rmd, rvd = rm.to(D), rv.to(D)
    run_both(lambda x: F.instance_norm(x, rm if x.device.type == "cpu" else rmd,
                                       rv if x.device.type == "cpu" else rvd, use_input_stats=True), x)
    same(rmd, rm, dtype)
    same(rvd, rv, dtype)


def test_local_response_norm():
    x = torch.randn(2, 6, 5, 5)
    with fallback_mode("silent"):  # its avg_pool3d belongs to the pooling family
        run_both(lambda x: F.local_response_norm(x, 3), x)
    stats = dict(torch_neuronx._C.fallback_stats())
    assert set(stats) <= {"aten::avg_pool3d.out", "aten::avg_pool3d_backward.grad_input",
                          "aten::avg_pool3d", "aten::avg_pool3d_backward"}, stats
    torch_neuronx._C.reset_fallback_stats()


def test_results_do_not_depend_on_layout_of_work():
    # a big enough case to be split over the pool; run twice, same bits
    x = torch.randn(512, 700, device=D)
    w = torch.randn(700, device=D, requires_grad=True)
    y1 = F.layer_norm(x, [700], w)
    y2 = F.layer_norm(x, [700], w)
    assert torch.equal(y1.cpu(), y2.cpu())
    (g1,) = torch.autograd.grad(y1.sum(), w)
    (g2,) = torch.autograd.grad(y2.sum(), w)
    assert torch.equal(g1.cpu(), g2.cpu())


_THREADS_SCRIPT = r"""
import hashlib, sys, torch, torch.nn.functional as F
import torch_neuronx  # noqa: F401
h = hashlib.sha256()
g = torch.Generator().manual_seed(0)
# batch norm: one chunk per channel, chunked (few channels; > 65536 per
# channel), short planes, channels_last, bfloat16; group and layer norm
cases = [((32, 16, 16, 16), torch.float32, None), ((64, 2, 16, 16), torch.float32, None),
         ((3, 2, 160, 160), torch.float32, None), ((10, 3, 50, 60), torch.bfloat16, None),
         ((64, 6, 7, 7), torch.float32, torch.channels_last), ((300, 5, 3), torch.float32, None)]
for shape, dt, fmt in cases:
    x = (torch.randn(shape, generator=g) * 3 + 2).to(dt)
    dy = torch.randn(shape, generator=g).to(dt)
    if fmt is not None:
        x, dy = x.contiguous(memory_format=fmt), dy.contiguous(memory_format=fmt)
    C = shape[1]
    w, b = torch.randn(C, generator=g).to(dt), torch.randn(C, generator=g).to(dt)
    xd, wd, bd = (t.to("neuron").requires_grad_() for t in (x, w, b))
    rm, rv = torch.zeros(C, device="neuron", dtype=dt), torch.ones(C, device="neuron", dtype=dt)
    y = F.batch_norm(xd, rm, rv, wd, bd, training=True)
    outs = [y, rm, rv, *torch.autograd.grad(y, (xd, wd, bd), dy.to("neuron"))]
    if len(shape) == 4 and C % 2 == 0:
        y = F.group_norm(xd, 2, wd, bd)
        outs += [y, *torch.autograd.grad(y, (xd, wd, bd), dy.to("neuron"))]
    for t in outs:
        h.update(t.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
print(h.hexdigest())
"""


def test_results_do_not_depend_on_thread_count():
    # this process's pool (the core count) against 1 and 3 threads, the two
    # subprocesses at once (their start-up is most of the time)
    import os
    import subprocess
    import sys
    procs = {n: subprocess.Popen([sys.executable, "-c", _THREADS_SCRIPT], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True,
                                 env=dict(os.environ, TORCHNEURON_NUM_THREADS=str(n)))
             for n in (1, 3)}
    digests = {"here": None}
    import contextlib
    import io
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(_THREADS_SCRIPT, {"__name__": "norm_threads"})
    digests["here"] = out.getvalue().strip().splitlines()[-1]
    for n, p in procs.items():
        stdout, stderr = p.communicate(timeout=300)
        assert p.returncode == 0, stderr
        digests[n] = stdout.strip().splitlines()[-1]
    assert len(set(digests.values())) == 1, digests


@pytest.mark.parametrize("shape", [(64, 2, 16, 16), (10, 3, 50, 60), (300, 5, 3), (2000, 3),
                                   (8, 512, 7, 7)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_batch_norm_chunked_and_short_planes(shape, dtype):
    # few channels (split into sample chunks), > 65536 elements a channel,
    # many short planes (run tails), BatchNorm1d's (N, C)
    x = (torch.randn(shape) * 3 + 2).to(dtype)
    C = shape[1]
    w, b = torch.randn(C, dtype=dtype), torch.randn(C, dtype=dtype)
    rm_c, rv_c = torch.zeros(C, dtype=dtype), torch.ones(C, dtype=dtype)
    rm_d, rv_d = rm_c.to(D), rv_c.to(D)
    run_both(lambda x, w, b: F.batch_norm(x, rm_d if x.device.type == D else rm_c,
                                          rv_d if x.device.type == D else rv_c, w, b, training=True),
             x, w, b, dtype=dtype)
    same(rm_d, rm_c, dtype)
    same(rv_d, rv_c, dtype)
