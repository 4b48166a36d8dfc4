"""The losses on neuron (ops_loss.cpp, kernels/src/loss/loss.c) against torch on
the CPU: values and gradients over dtypes, reductions, class weights,
ignore_index, label smoothing, probability targets, 1-d/2-d/N-d inputs,
non-contiguous inputs, out= variants and the error paths.  The whole file
runs with the fallback in "error" mode, so every passing test proves the
op native."""
import pytest
import torch
import torch.nn.functional as F

import torch_neuronx  # noqa: F401
from torch_neuronx._fallback import fallback_mode, fallback_stats, reset_fallback_stats

DEV = "neuron"
FLOATS = [torch.float32, torch.float64, torch.bfloat16, torch.float16]
REDUCTIONS = ["none", "mean", "sum"]


@pytest.fixture(autouse=True)
def native():
    with fallback_mode("error"):
        yield


def tol(dtype):
    if dtype == torch.bfloat16:
        return dict(rtol=2e-2, atol=2e-2)
    if dtype == torch.float16:
        return dict(rtol=2e-3, atol=2e-3)
    return {}


def check(fn, *cpu_args, dtype=torch.float32, grad_args=(0,), **kw):
    """fn(*args) on neuron and on the CPU: values and the gradients of the
    arguments listed in grad_args (floating tensors)."""
    cpu = [a.detach().clone().requires_grad_(i in grad_args) if isinstance(a, torch.Tensor) and
           a.is_floating_point() else a for i, a in enumerate(cpu_args)]
    dev = [a.detach().to(DEV).requires_grad_(i in grad_args) if isinstance(a, torch.Tensor) and
           a.is_floating_point() else (a.to(DEV) if isinstance(a, torch.Tensor) else a)
           for i, a in enumerate(cpu_args)]
    dev_kw = {k: v.to(DEV) if isinstance(v, torch.Tensor) else v for k, v in kw.items()}
    want = fn(*cpu, **kw)
    got = fn(*dev, **dev_kw)
    assert got.device.type == "neuron"
    torch.testing.assert_close(got.cpu(), want, equal_nan=True, **tol(dtype))
    if any(i < len(cpu) and isinstance(cpu[i], torch.Tensor) and cpu[i].requires_grad for i in grad_args):
        g = torch.randn_like(want)
        want.backward(g)
        got.backward(g.to(DEV))
        for i in grad_args:
            if isinstance(cpu[i], torch.Tensor) and cpu[i].requires_grad:
                torch.testing.assert_close(dev[i].grad.cpu(), cpu[i].grad, equal_nan=True, **tol(dtype))
    return got


# ---------------------------------------------------------------- pointwise

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_mse_l1_smooth_l1_huber(dtype, reduction):
    x = torch.randn(7, 9).to(dtype)
    y = torch.randn(7, 9).to(dtype)
    check(F.mse_loss, x, y, dtype=dtype, grad_args=(0, 1), reduction=reduction)
    check(F.l1_loss, x, y, dtype=dtype, grad_args=(0, 1), reduction=reduction)
    for beta in (1.0, 0.3, 0.0):
        check(F.smooth_l1_loss, x, y, dtype=dtype, grad_args=(0, 1), reduction=reduction, beta=beta)
    for delta in (1.0, 0.4, 2.5):
        check(F.huber_loss, x, y, dtype=dtype, grad_args=(0, 1), reduction=reduction, delta=delta)


def test_pointwise_noncontiguous_broadcast_and_empty():
    x = torch.randn(9, 7).t()
    y = torch.randn(7, 9)[:, ::1]
    for f in (F.mse_loss, F.smooth_l1_loss, F.huber_loss):
        check(f, x, y, grad_args=(0, 1))
        check(f, x, y, grad_args=(0, 1), reduction="none")
        check(f, torch.randn(0, 3), torch.randn(0, 3), reduction="sum")
        check(f, torch.tensor(0.5), torch.tensor(-1.0), grad_args=(0, 1))
    # broadcast target (warns on the CPU too)
    with pytest.warns(UserWarning):
        check(F.mse_loss, torch.randn(4, 5), torch.randn(5), grad_args=(0, 1))


def test_pointwise_out_and_mixed_dtypes():
    x, y = torch.randn(5, 4), torch.randn(5, 4, dtype=torch.float64)
    out = torch.empty(5, 4, dtype=torch.float64, device=DEV)
    torch._C._nn.mse_loss(x.to(DEV), y.to(DEV), 0, out=out)
    torch.testing.assert_close(out.cpu(), torch._C._nn.mse_loss(x, y, 0))
    out = torch.empty((), device=DEV)
    torch._C._nn.huber_loss(x.to(DEV), y.float().to(DEV), 1, 0.5, out=out)
    torch.testing.assert_close(out.cpu(), F.huber_loss(x, y.float(), delta=0.5))


def test_pointwise_integer_inputs_raise():
    a = torch.arange(6, device=DEV)
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        torch._C._nn.mse_loss(a, a)


# ---------------------------------------------------- binary cross entropy

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_binary_cross_entropy(dtype, reduction):
    x = torch.rand(6, 5).clamp(0.02, 0.98).to(dtype)
    y = torch.rand(6, 5).to(dtype)
    w = (torch.rand(5) + 0.5).to(dtype)
    check(F.binary_cross_entropy, x, y, dtype=dtype, reduction=reduction)
    check(F.binary_cross_entropy, x, y, w, dtype=dtype, reduction=reduction)
    # saturated inputs: log clamps at -100
    check(F.binary_cross_entropy, torch.tensor([0.0, 1.0, 0.5]).to(dtype), torch.tensor([1.0, 0.0, 0.5]).to(dtype),
          dtype=dtype, grad_args=(), reduction=reduction)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_binary_cross_entropy_with_logits(reduction):
    x, y = torch.randn(6, 5), torch.rand(6, 5)
    check(F.binary_cross_entropy_with_logits, x, y, torch.rand(5), grad_args=(0, 1), reduction=reduction)
    check(F.binary_cross_entropy_with_logits, x, y, None, grad_args=(0, 1), reduction=reduction,
          pos_weight=torch.rand(5) + 0.5)


def test_binary_cross_entropy_checks_range():
    x = torch.tensor([0.5, 1.5], device=DEV)
    with pytest.raises(RuntimeError, match="all elements of input should be between 0 and 1"):
        F.binary_cross_entropy(x, torch.ones(2, device=DEV))
        torch.neuron.synchronize()
    torch.neuron.synchronize()  # the stream is usable again


def test_binary_cross_entropy_noncontiguous():
    x = torch.rand(5, 6).t()
    y = torch.rand(6, 5)
    check(F.binary_cross_entropy, x, y, torch.rand(6, 1), reduction="none")
    check(F.binary_cross_entropy, x, y)


# ---------------------------------------------------------------- nll_loss

def logp(shape, dtype):
    return torch.randn(*shape).log_softmax(0 if len(shape) == 1 else 1).to(dtype)


def targets(shape, n_classes, ignore=None):
    t = torch.randint(0, n_classes, shape)
    if ignore is not None:
        t[torch.rand(shape) < 0.3] = ignore
    return t


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("shape", [(8, 5), (5,), (2, 5, 3, 4), (3, 5, 7), (2, 4, 2, 3, 2)])
def test_nll_loss(dtype, reduction, weighted, shape):
    x = logp(shape, dtype)
    C = shape[0] if len(shape) == 1 else shape[1]
    tshape = () if len(shape) == 1 else (shape[0],) + shape[2:]
    w = (torch.rand(C) + 0.5).to(dtype) if weighted else None
    for ignore in (-100, 1):
        t = targets(tshape, C, ignore if ignore >= 0 else None)
        check(F.nll_loss, x, t, w, dtype=dtype, reduction=reduction, ignore_index=ignore)


def test_nll_loss_float32_reduction_bitwise():
    """The reduced forward replays the CPU's cascade sum: equal bits."""
    x, t = logp((5000, 7), torch.float32), targets((5000,), 7, -100)
    w = torch.rand(7) + 0.5
    for red in ("mean", "sum"):
        assert torch.equal(F.nll_loss(x.to(DEV), t.to(DEV), w.to(DEV), reduction=red).cpu(),
                           F.nll_loss(x, t, w, reduction=red))
    x4, t4 = logp((2, 3, 40, 50), torch.float32), targets((2, 40, 50), 3, -100)
    assert torch.equal(F.nll_loss(x4.to(DEV), t4.to(DEV)).cpu(), F.nll_loss(x4, t4))


def test_nll_loss_noncontiguous_and_uint8_targets():
    x = logp((7, 6), torch.float32).t().contiguous().t()  # column-major
    t = targets((6,), 7)[None].expand(2, 6)[1]
    x = torch.randn(6, 7).log_softmax(1).t().contiguous().t()
    check(F.nll_loss, x, t, reduction="none")
    check(F.nll_loss, x, t)
    xs = logp((2, 3, 4, 5), torch.float32).permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2)
    # values only: the CPU's own nll_loss2d backward rejects this channels-last
    # layout ("grad_input must be contiguous"), so there is no CPU gradient to compare
    check(F.nll_loss, xs, targets((2, 4, 5), 3), grad_args=(), reduction="none")
    xb = logp((4, 6), torch.float32)
    tb = targets((4,), 6).to(torch.uint8)
    want = torch.ops.aten.nll_loss_forward(xb, tb, None, 1, -100)
    got = torch.ops.aten.nll_loss_forward(xb.to(DEV), tb.to(DEV), None, 1, -100)
    torch.testing.assert_close(got[0].cpu(), want[0])
    torch.testing.assert_close(got[1].cpu(), want[1])


def test_nll_loss_total_weight_and_out():
    x, t, w = logp((6, 4), torch.float32), targets((6,), 4, 2), torch.rand(4) + 0.5
    for red in (0, 1, 2):
        want = torch.ops.aten.nll_loss_forward(x, t, w, red, 2)
        got = torch.ops.aten.nll_loss_forward(x.to(DEV), t.to(DEV), w.to(DEV), red, 2)
        torch.testing.assert_close(got[0].cpu(), want[0])
        torch.testing.assert_close(got[1].cpu(), want[1])
        out, tw = torch.empty(0, device=DEV), torch.empty(0, device=DEV)
        torch.ops.aten.nll_loss_forward.output(x.to(DEV), t.to(DEV), w.to(DEV), red, 2, output=out, total_weight=tw)
        torch.testing.assert_close(out.cpu(), want[0])
        go = torch.randn(want[0].shape)
        gw = torch.ops.aten.nll_loss_backward(go, x, t, w, red, 2, want[1])
        gi = torch.empty(0, device=DEV)
        torch.ops.aten.nll_loss_backward.grad_input(go.to(DEV), x.to(DEV), t.to(DEV), w.to(DEV), red, 2,
                                                    want[1].to(DEV), grad_input=gi)
        torch.testing.assert_close(gi.cpu(), gw)
    # nll_loss2d's own schemas
    x4, t4 = logp((2, 3, 4, 5), torch.float32), targets((2, 4, 5), 3, 0)
    for red in (0, 1, 2):
        want = torch.ops.aten.nll_loss2d_forward(x4, t4, w[:3], red, 0)
        got = torch.ops.aten.nll_loss2d_forward(x4.to(DEV), t4.to(DEV), w[:3].to(DEV), red, 0)
        torch.testing.assert_close(got[0].cpu(), want[0])
        torch.testing.assert_close(got[1].cpu(), want[1])
        go = torch.randn(want[0].shape)
        gw = torch.ops.aten.nll_loss2d_backward(go, x4, t4, w[:3], red, 0, want[1])
        gd = torch.ops.aten.nll_loss2d_backward(go.to(DEV), x4.to(DEV), t4.to(DEV), w[:3].to(DEV), red, 0,
                                                want[1].to(DEV))
        torch.testing.assert_close(gd.cpu(), gw)


def test_nll_loss_empty_and_all_ignored():
    for red in REDUCTIONS:
        check(F.nll_loss, torch.randn(0, 4), torch.zeros(0, dtype=torch.long), reduction=red)
        check(F.nll_loss, torch.randn(3, 4), torch.full((3,), -100), reduction=red)


@pytest.mark.parametrize("shape,tshape", [((4, 5), (4,)), ((5,), ()), ((2, 5, 3, 2), (2, 3, 2)), ((2, 5, 3), (2, 3))])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_nll_loss_bad_target_raises(shape, tshape, reduction):
    x = torch.randn(*shape, device=DEV).log_softmax(0 if len(shape) == 1 else 1)
    t = torch.zeros(tshape, dtype=torch.long)
    t.view(-1)[-1] = 5
    with pytest.raises(Exception, match="Target 5 is out of bounds."):
        F.nll_loss(x, t.to(DEV), reduction=reduction)
        torch.neuron.synchronize()
    t.view(-1)[-1] = -3
    with pytest.raises(Exception, match="Target -3 is out of bounds."):
        F.nll_loss(x, t.to(DEV), reduction=reduction).cpu()
    torch.neuron.synchronize()
    # the backward checks too (the CPU does not, in mode none)
    x.requires_grad_()
    t.view(-1)[-1] = 0
    loss = F.nll_loss(x, t.to(DEV), reduction=reduction)
    go = torch.ones_like(loss)
    t.view(-1)[-1] = 9
    fn = torch.ops.aten.nll_loss2d_backward if len(shape) == 4 else torch.ops.aten.nll_loss_backward
    if len(shape) in (1, 2):
        tw = torch.ops.aten.nll_loss_forward(x.detach(), torch.zeros(tshape, dtype=torch.long, device=DEV), None,
                                             {"none": 0, "mean": 1, "sum": 2}[reduction], -100)[1]
        with pytest.raises(Exception, match="Target 9 is out of bounds."):
            fn(go, x.detach(), t.to(DEV), None, {"none": 0, "mean": 1, "sum": 2}[reduction], -100, tw).cpu()
    torch.neuron.synchronize()


def test_nll_loss_errors_match_cpu():
    x, t = torch.randn(3, 4), torch.tensor([0, 1, 2])
    cases = [
        lambda d: F.nll_loss(x.to(d), t.to(torch.int32).to(d)),
        lambda d: F.nll_loss(x.to(d), t.to(d), weight=torch.ones(4, dtype=torch.float64, device=d)),
        lambda d: F.nll_loss(x.to(d), t.to(d), weight=torch.ones(3, device=d)),
        lambda d: F.nll_loss(x.to(d), t[:2].to(d)),
        lambda d: torch.ops.aten.nll_loss2d_forward(torch.randn(2, 3, 4, 5, device=d),
                                                    torch.zeros(2, 4, 5, dtype=torch.uint8, device=d), None, 1, -100),
        lambda d: torch.ops.aten.nll_loss2d_forward(torch.randn(2, 3, 4, 5, device=d),
                                                    torch.zeros(2, 4, 4, dtype=torch.long, device=d), None, 1, -100),
    ]
    for case in cases:
        with pytest.raises(Exception) as cpu_err:
            case("cpu")
        with pytest.raises(type(cpu_err.value)) as dev_err:
            case(DEV)
        assert str(dev_err.value).split("\n")[0] == str(cpu_err.value).split("\n")[0]


# ------------------------------------------------------- multi_margin_loss

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_multi_margin_loss(dtype, reduction):
    x = torch.randn(7, 5).to(dtype)
    t = torch.randint(0, 5, (7,))
    w = (torch.rand(5) + 0.5).to(dtype)
    for p in (1, 2):
        check(F.multi_margin_loss, x, t, p, 0.7, None, dtype=dtype, reduction=reduction)
        check(F.multi_margin_loss, x, t, p, 1.0, w, dtype=dtype, reduction=reduction)
    check(F.multi_margin_loss, torch.randn(5, 7).to(dtype).t(), t, dtype=dtype, reduction=reduction)
    check(F.multi_margin_loss, torch.randn(5).to(dtype), torch.tensor(3), dtype=dtype, reduction=reduction)
    check(F.multi_margin_loss, torch.randn(5).to(dtype), torch.tensor([3]), dtype=dtype, reduction=reduction)


def test_multi_margin_loss_errors_match_cpu():
    x = torch.randn(3, 4)
    cases = [
        lambda d: F.multi_margin_loss(x.to(d), torch.tensor([0, 1, 4], device=d)).cpu(),
        lambda d: F.multi_margin_loss(x.to(d), torch.tensor([0, 1, 2], device=d), p=3),
        lambda d: F.multi_margin_loss(x.to(d), torch.tensor([0, 1], device=d)),
        lambda d: F.multi_margin_loss(x.to(d).bfloat16(), torch.tensor([0, 1, 2], device=d)),
    ]
    for case in cases:
        with pytest.raises(Exception) as cpu_err:
            case("cpu")
        with pytest.raises(type(cpu_err.value)) as dev_err:
            case(DEV)
        # device-side errors arrive asynchronously, wrapped ("NEURON error: aten::op: ... (NRT_...)")
        assert str(cpu_err.value).split("\n")[0] in str(dev_err.value).split("\n")[0]
    torch.neuron.synchronize()


# ----------------------------------------------------------- cross_entropy

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy(dtype, reduction):
    x = torch.randn(8, 6).to(dtype)
    t = targets((8,), 6, -100)
    w = (torch.rand(6) + 0.5).to(dtype)
    check(F.cross_entropy, x, t, dtype=dtype, reduction=reduction)
    check(F.cross_entropy, x, t, w, dtype=dtype, reduction=reduction, label_smoothing=0.15)
    check(F.cross_entropy, x, torch.rand(8, 6).softmax(1).to(dtype), dtype=dtype, reduction=reduction,
          label_smoothing=0.1)
    x4 = torch.randn(2, 6, 3, 4).to(dtype)
    check(F.cross_entropy, x4, targets((2, 3, 4), 6, 2), w, dtype=dtype, reduction=reduction, ignore_index=2)


# ------------------------------------------------------------- composites

def test_composite_losses_native():
    a, b = torch.randn(6, 5), torch.randn(6, 5)
    s = torch.randn(6, 5).sign()
    check(F.kl_div, a.log_softmax(1), b.softmax(1), grad_args=(0,), reduction="batchmean")
    check(F.kl_div, a.log_softmax(1), b.log_softmax(1), grad_args=(0, 1), reduction="sum", log_target=True)
    check(F.soft_margin_loss, a, s)
    check(F.margin_ranking_loss, a, b, s, grad_args=(0, 1), margin=0.2)
    check(F.hinge_embedding_loss, a, s, margin=0.5)
    check(F.poisson_nll_loss, a, b.abs(), grad_args=(0,))
    check(F.poisson_nll_loss, a.abs() + 0.1, b.abs() * 3, grad_args=(0,), log_input=False, full=True)
    check(F.gaussian_nll_loss, a, b, torch.rand(6, 5) + 0.1, grad_args=(0, 1, 2))
    check(F.triplet_margin_loss, a, b, torch.randn(6, 5), grad_args=(0, 1, 2))
    check(F.cosine_embedding_loss, a, b, torch.randn(6).sign(), grad_args=(0, 1))


def test_native_without_fallback():
    """Every loss above, forward and backward, with the fallback counted."""
    with fallback_mode("silent"):
        reset_fallback_stats()
        x = torch.randn(8, 5, device=DEV, requires_grad=True)
        t = torch.randint(0, 5, (8,), device=DEV)
        y = torch.randn(8, 5, device=DEV)
        p = torch.rand(8, 5, device=DEV).clamp(0.05, 0.95).requires_grad_()
        x4 = torch.randn(2, 5, 3, 4, device=DEV, requires_grad=True)
        losses = [F.cross_entropy(x, t), F.cross_entropy(x, t, label_smoothing=0.1),
                  F.cross_entropy(x4, torch.randint(0, 5, (2, 3, 4), device=DEV)),
                  F.mse_loss(x, y), F.l1_loss(x, y), F.smooth_l1_loss(x, y), F.huber_loss(x, y),
                  F.binary_cross_entropy(p, y.sigmoid()),
                  F.binary_cross_entropy_with_logits(x, y.sigmoid(), pos_weight=torch.rand(5, device=DEV)),
                  F.multi_margin_loss(x, t)]
        sum(loss for loss in losses).backward()
        torch.neuron.synchronize()
        assert fallback_stats() == {}
