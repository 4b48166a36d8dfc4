"""nki.op: custom ops with NKI kernels, under opcheck, autograd (a backward
kernel trains a model) and torch.compile."""
import pytest
import torch

import train_rmsnorm
from train_rmsnorm import rmsnorm

# torch 2.13's autograd_registration_check supports only cpu/cuda/xpu tensors
# (its own "NYI" error); every other opcheck test runs on neuron.
NEURON_UTILS = ("test_schema", "test_faketensor", "test_aot_dispatch_dynamic")


def _args(device, n=200, d=64):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, d, generator=g).to(device).requires_grad_()
    w = torch.randn(d, generator=g).to(device).requires_grad_()
    return x, w, 1e-6


def test_opcheck_cpu():
    torch.library.opcheck(rmsnorm, _args("cpu"))


def test_opcheck_neuron():
    torch.library.opcheck(rmsnorm, _args("neuron"), test_utils=NEURON_UTILS)
    x, w, eps = _args("neuron")
    dy = torch.randn_like(x)
    torch.library.opcheck(train_rmsnorm.rmsnorm_backward, (x.detach(), w.detach(), dy, eps),
                          test_utils=NEURON_UTILS)


def test_gradients_match_torch():
    x, w, eps = _args("neuron", n=300)
    dy = torch.randn(300, 64, device="neuron")
    rmsnorm(x, w, eps).backward(dy)
    xc, wc = x.detach().cpu().requires_grad_(), w.detach().cpu().requires_grad_()
    torch.nn.functional.rms_norm(xc, (64,), wc, eps).backward(dy.cpu())
    torch.testing.assert_close(x.grad.cpu(), xc.grad, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(w.grad.cpu(), wc.grad, atol=1e-4, rtol=1e-4)


def test_training_matches_cpu():
    ours, ref = train_rmsnorm.main()
    assert ours[-1] < 0.2 * ours[0]
    torch.testing.assert_close(torch.tensor(ours), torch.tensor(ref), atol=1e-4, rtol=1e-3)


def test_in_a_compiled_graph():
    x, w, eps = _args("neuron")

    def f(x, w):
        return torch.relu(rmsnorm(x * 2, w, eps)).sum()

    cf = torch.compile(f, fullgraph=True)
    out = cf(x, w)
    out.backward()
    xc, wc = x.detach().cpu().requires_grad_(), w.detach().cpu().requires_grad_()
    ref = torch.relu(torch.nn.functional.rms_norm(xc * 2, (64,), wc, eps)).sum()
    ref.backward()
    torch.testing.assert_close(out.cpu(), ref, atol=1e-3, rtol=1e-4)
    torch.testing.assert_close(x.grad.cpu(), xc.grad, atol=1e-4, rtol=1e-4)


def test_bare_kernel_on_fake_tensors_is_refused():
    from torch._subclasses.fake_tensor import FakeTensorMode

    from rmsnorm import nki_rmsnorm_kernel

    with FakeTensorMode():
        x, w = torch.empty(8, 8), torch.empty(8)
        with pytest.raises(RuntimeError, match="nki.op"):
            nki_rmsnorm_kernel(x, w)
