"""nki.op: custom ops with NKI kernels, under opcheck, autograd (a backward
kernel trains a model) and torch.compile."""
import pytest
import nki_testutil  # noqa: F401  (examples/nki on sys.path)
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


def _sample_ops():
    """Every sample kernel as a custom op (registered once per process)."""
    from torch_neuronx import nki
    import flash_attention
    import layernorm
    import matmul
    import softmax
    import tensor_add

    @nki.op("nki_tests::tensor_add", mutates_args=())
    def add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return tensor_add.nki_tensor_add(a, b)

    @nki.op("nki_tests::softmax", mutates_args=())
    def sm(a: torch.Tensor) -> torch.Tensor:
        return softmax.nki_softmax_kernel(a)

    @nki.op("nki_tests::layernorm", mutates_args=())
    def ln(a: torch.Tensor, g: torch.Tensor, b: torch.Tensor, eps: float) -> torch.Tensor:
        return layernorm.nki_layernorm_kernel_v2(a, eps, g, b)

    @nki.op("nki_tests::matmul", mutates_args=())
    def mm(lhsT: torch.Tensor, rhs: torch.Tensor) -> torch.Tensor:
        return matmul.nki_matmul_tiled_beta1(lhsT, rhs)

    @nki.op("nki_tests::flash_fwd", mutates_args=())
    def attn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
        return flash_attention.flash_fwd[q.shape[0], q.shape[1]](q, k, v, causal=causal)

    g = torch.Generator().manual_seed(0)

    def r(*s):
        return torch.randn(*s, generator=g)

    return [(add, lambda: (r(200, 600), r(200, 600))),
            (sm, lambda: (r(200, 300),)),
            (ln, lambda: (r(200, 300), r(300), r(300), 1e-5)),
            (mm, lambda: (r(128, 200), r(128, 300))),
            (attn, lambda: (r(1, 2, 64, 300), r(1, 2, 64, 300), r(1, 2, 300, 64), True))]


_OPS = []


@pytest.mark.parametrize("device", ["cpu", "neuron"])
@pytest.mark.parametrize("case", range(5))
def test_opcheck_samples(device, case):
    if not _OPS:
        _OPS.extend(_sample_ops())
    op, make = _OPS[case]
    args = tuple(a.to(device) if isinstance(a, torch.Tensor) else a for a in make())
    if device == "cpu":
        torch.library.opcheck(op, args)
    else:
        torch.library.opcheck(op, args, test_utils=NEURON_UTILS)
