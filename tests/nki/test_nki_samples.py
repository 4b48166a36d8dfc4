"""Every sample kernel of examples/nki against torch on the CPU (float32 and
bfloat16, regular and ragged shapes), run compiled on neuron tensors; and
compiled against the simulator."""
import pytest
import torch
import torch.nn.functional as F
from nki_testutil import tol

from torch_neuronx import nki

DTYPES = [torch.float32, torch.bfloat16]
neuron = torch.device("neuron")


def _rand(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype)


def _check(out, ref, dtype):
    assert out.device.type == "neuron"
    assert out.dtype == dtype
    torch.testing.assert_close(out.cpu().float(), ref.float(), **tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(256, 1024), (300, 1100)])
def test_tensor_add(dtype, shape):
    from tensor_add import nki_tensor_add

    a, b = _rand(*shape, dtype=dtype), _rand(*shape, dtype=dtype, seed=1)
    _check(nki_tensor_add(a.to(neuron), b.to(neuron)), a.float() + b.float(), dtype)


def _rms_ref(a, g, eps=0.0):
    a = a.float()
    return a * torch.rsqrt(a.pow(2).mean(1, keepdim=True) + eps) * g.float()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(256, 512), (300, 700)])
def test_rmsnorm(dtype, shape):
    from rmsnorm import nki_rmsnorm_kernel

    a, g = _rand(*shape, dtype=dtype), _rand(shape[1], dtype=dtype, seed=1)
    _check(nki_rmsnorm_kernel(a.to(neuron), g.to(neuron)), _rms_ref(a, g), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(256, 512), (300, 700)])
def test_softmax(dtype, shape):
    from softmax import nki_softmax_kernel

    a = _rand(*shape, dtype=dtype) * 3
    _check(nki_softmax_kernel(a.to(neuron)), a.float().softmax(1), dtype)


@pytest.mark.parametrize("version", ["v1", "v2"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(256, 512), (300, 700)])
def test_layernorm(version, dtype, shape):
    import layernorm

    k = getattr(layernorm, f"nki_layernorm_kernel_{version}")
    a = _rand(*shape, dtype=dtype) + 0.5
    g, b = _rand(shape[1], dtype=dtype, seed=1), _rand(shape[1], dtype=dtype, seed=2)
    ref = F.layer_norm(a.float(), shape[1:], g.float(), b.float(), 1e-5)
    out = k(a.to(neuron), 1e-5, g.to(neuron), b.to(neuron))
    if dtype == torch.bfloat16:  # (x - mean) is rounded to bf16 before scaling
        torch.testing.assert_close(out.cpu().float(), ref, atol=8e-2, rtol=4e-2)
    else:
        _check(out, ref, dtype)


@pytest.mark.parametrize("name", ["nki_matmul_tiled_", "nki_matmul_hoist_load_"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_matmul_beta2(name, dtype):
    import matmul

    k = getattr(matmul, name)
    lhsT, rhs = _rand(256, 256, dtype=dtype), _rand(256, 1024, dtype=dtype, seed=1)
    ref = lhsT.float().T @ rhs.float()
    out = k(lhsT.to(neuron), rhs.to(neuron))
    torch.testing.assert_close(out.cpu().float(), ref, **(
        dict(atol=1e-3, rtol=1e-4) if dtype == torch.float32 else dict(atol=0.25, rtol=2e-2)))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kmn", [(256, 256, 1024), (128, 200, 700)])
def test_matmul_beta1_ragged(dtype, kmn):
    from matmul import nki_matmul_tiled_beta1

    K, M, N = kmn
    lhsT, rhs = _rand(K, M, dtype=dtype), _rand(K, N, dtype=dtype, seed=1)
    out = nki_matmul_tiled_beta1(lhsT.to(neuron), rhs.to(neuron))
    torch.testing.assert_close(out.cpu().float(), lhsT.float().T @ rhs.float(), **(
        dict(atol=1e-3, rtol=1e-4) if dtype == torch.float32 else dict(atol=0.25, rtol=2e-2)))


def _attn_args(B, H, S, D, dtype):
    q, k, v = (_rand(B, H, S, D, dtype=dtype, seed=i) for i in range(3))
    return q, k, v, (q.transpose(2, 3).contiguous(), k.transpose(2, 3).contiguous(), v)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("S", [512, 600])
def test_flash_attention(causal, dtype, S):
    from flash_attention import flash_fwd

    B, H, D = 1, 2, 64
    q, k, v, args = _attn_args(B, H, S, D, dtype)
    ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
    out = flash_fwd[B, H](*(a.to(neuron) for a in args), causal=causal)
    assert out.shape == (B, H, S, D)
    torch.testing.assert_close(out.cpu().float(), ref, **(
        dict(atol=2e-5, rtol=1e-4) if dtype == torch.float32 else dict(atol=3e-2, rtol=3e-2)))


def _cases():
    """One call of every sample: (name, kernel, grid, args, kwargs)."""
    import flash_attention
    import layernorm
    import matmul
    import rmsnorm
    import softmax
    import tensor_add

    a = _rand(300, 700)
    g, b = _rand(700, seed=1), _rand(700, seed=2)
    *_, attn = _attn_args(1, 2, 600, 64, torch.float32)
    return [
        ("tensor_add", tensor_add.nki_tensor_add_kernel_, (3, 2), (a, _rand(300, 700, seed=3)), {}),
        ("rmsnorm", rmsnorm.nki_rmsnorm_kernel, (1,), (a, g), {}),
        ("rmsnorm_backward", rmsnorm.nki_rmsnorm_backward_kernel, (1,),
         (a[:, :500].contiguous(), g[:500].contiguous(), _rand(300, 500, seed=4)), {}),
        ("softmax", softmax.nki_softmax_kernel, (1,), (a,), {}),
        ("layernorm_v1", layernorm.nki_layernorm_kernel_v1, (1,), (a, 1e-5, g, b), {}),
        ("layernorm_v2", layernorm.nki_layernorm_kernel_v2, (1,), (a, 1e-5, g, b), {}),
        ("matmul_tiled", matmul.nki_matmul_tiled_, (1,), (_rand(128, 256), _rand(128, 512)), {}),
        ("matmul_hoist", matmul.nki_matmul_hoist_load_, (1,),
         (_rand(256, 128), _rand(256, 1024)), {}),
        ("matmul_beta1", matmul.nki_matmul_tiled_beta1, (1,), (_rand(128, 200), _rand(128, 700)),
         {}),
        ("flash", flash_attention.flash_fwd, (1, 2), attn, {}),
        ("flash_causal", flash_attention.flash_fwd, (1, 2), attn, {"causal": True}),
    ]


@pytest.mark.parametrize("case", range(11))
def test_compiled_matches_simulated(case):
    name, k, grid, args, kwargs = _cases()[case]
    sim = nki.simulate(k)[grid](*args, **kwargs)
    comp = k[grid](*(x.to(neuron) if isinstance(x, torch.Tensor) else x for x in args),
                   **kwargs)
    sim = sim if isinstance(sim, tuple) else (sim,)
    comp = comp if isinstance(comp, tuple) else (comp,)
    for s, c in zip(sim, comp):
        assert not s.isnan().any(), f"{name}: the simulator read memory nobody wrote"
        torch.testing.assert_close(c.cpu(), s, atol=1e-4, rtol=1e-4, msg=name)
