"""Ops made native for the Hugging Face models (torch_neuronx/csrc/ops_models.cpp):
weight normalisation (_weight_norm_interface and its backward), neuron vs CPU,
with the fallback in error mode to prove the path is native."""
import pytest
import torch

from conftest import assert_same

CASES = [  # (v shape, dim)
    ((4, 3, 5), 0),
    ((4, 3, 5), 2),
    ((6, 7), 0),
    ((6, 7), 1),
    ((16, 4, 8), 2),  # wav2vec2's positional conv: weight_norm(dim=2)
    ((5,), 0),
]


def make(shape, dim, dtype):
    gen = torch.Generator().manual_seed(0)
    v = torch.randn(shape, generator=gen).to(dtype)
    g_shape = [1] * len(shape)
    g_shape[dim] = shape[dim]
    g = (torch.rand(g_shape, generator=gen) + 0.5).to(dtype)
    return v, g


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
@pytest.mark.parametrize("shape,dim", CASES)
def test_weight_norm_forward_backward(native, shape, dim, dtype):
    v, g = make(shape, dim, dtype)
    tol = {} if dtype in (torch.float32, torch.float64) else dict(atol=1e-2, rtol=1e-2)
    # The interface itself: w and the norms (float32 norms for bfloat16 g).
    w_ref, n_ref = torch._weight_norm_interface(v, g, dim)
    w, n = torch._weight_norm_interface(v.to("neuron"), g.to("neuron"), dim)
    assert_same(w, w_ref, **tol)
    assert_same(n, n_ref, **tol)
    # Through autograd (torch._weight_norm uses the interface for dim 0 / last).
    vs = [v.clone().requires_grad_(), v.to("neuron").requires_grad_()]
    gs = [g.clone().requires_grad_(), g.to("neuron").requires_grad_()]
    dy = torch.randn(shape, generator=torch.Generator().manual_seed(1)).to(dtype)
    outs = [torch._weight_norm(vv, gg, dim) for vv, gg in zip(vs, gs)]
    outs[0].backward(dy)
    outs[1].backward(dy.to("neuron"))
    assert_same(outs[1].detach(), outs[0].detach(), **tol)
    assert_same(vs[1].grad, vs[0].grad, **tol)
    assert_same(gs[1].grad, gs[0].grad, **tol)


def test_weight_norm_parametrization_conv(native):
    torch.manual_seed(0)
    conv = torch.nn.Conv1d(8, 8, 5, padding=2, groups=2)
    conv = torch.nn.utils.parametrizations.weight_norm(conv, name="weight", dim=2)
    dev = torch.nn.utils.parametrizations.weight_norm(
        torch.nn.Conv1d(8, 8, 5, padding=2, groups=2), name="weight", dim=2)
    dev.load_state_dict(conv.state_dict())
    dev.to("neuron")
    x = torch.randn(2, 8, 20)
    conv(x).square().sum().backward()
    dev(x.to("neuron")).square().sum().backward()
    for (name, p), q in zip(conv.named_parameters(), dev.parameters()):
        assert_same(q.grad, p.grad, rtol=1e-4, atol=1e-5)


def test_weight_norm_errors():
    v, g = make((4, 3, 5), 1, torch.float32)
    for dim in (1, -1):  # the CPU's rule: 0 or v.dim() - 1, not wrapped
        with pytest.raises(RuntimeError, match="first or last dim"):
            torch._weight_norm_interface(v.to("neuron"), g.to("neuron"), dim)
    # torch._weight_norm takes any dim (a composition for the others).
    ref = torch._weight_norm(v, g, 1)
    assert_same(torch._weight_norm(v.to("neuron"), g.to("neuron"), 1), ref)
