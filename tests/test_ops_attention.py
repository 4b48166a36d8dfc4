"""scaled_dot_product_attention on neuron: the fused attention kernel
(ops_attention.cpp, kernels/src/attention/attention*.c) against torch's CPU SDPA,
outputs and q/k/v (and additive-mask) gradients, with the CPU fallback
forbidden, and the SDPA backend restricted to OVERRIDEABLE so that the math
composite cannot stand in for the kernel."""
import math

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import torch_neuronx  # noqa: F401
from torch_neuronx._fallback import fallback_mode, fallback_stats, reset_fallback_stats

DEV = "neuron"
TOL = {torch.float32: dict(atol=2e-5, rtol=2e-4), torch.float64: dict(atol=1e-10, rtol=1e-9),
       torch.bfloat16: dict(atol=3e-2, rtol=3e-2), torch.float16: dict(atol=4e-3, rtol=4e-3)}


@pytest.fixture(autouse=True)
def native():
    reset_fallback_stats()
    with fallback_mode("error"):
        yield
    assert not fallback_stats()


def fused():
    return sdpa_kernel([SDPBackend.OVERRIDEABLE])


def make(shape, dtype, transposed=False):
    """A CPU tensor of `shape` (B, H, S, D), stored (B, S, H, D) if transposed."""
    if transposed and len(shape) == 4:
        b, h, s, d = shape
        return torch.randn(b, s, h, d).to(dtype).transpose(1, 2)
    return torch.randn(shape).to(dtype)


def run_both(q, k, v, dtype, grad=True, **kw):
    """SDPA on neuron (fused only) and on the CPU (in float64 for 16-bit
    inputs' reference, else in the input dtype); returns both outputs and
    both sets of gradients."""
    ref_dtype = dtype if dtype in (torch.float32, torch.float64) else torch.float64
    mask = kw.pop("attn_mask", None)
    cpu_in = [t.detach().to(ref_dtype).requires_grad_(grad) for t in (q, k, v)]
    dev_in = [t.detach().to(DEV).requires_grad_(grad) for t in (q, k, v)]
    cpu_mask = dev_mask = None
    if mask is not None:
        cpu_mask = mask.detach().to(ref_dtype if mask.is_floating_point() else torch.bool)
        dev_mask = mask.detach().to(DEV)
        if mask.requires_grad:
            cpu_mask.requires_grad_(True)
            dev_mask.requires_grad_(True)
    ref = F.scaled_dot_product_attention(*cpu_in, attn_mask=cpu_mask, **kw)
    with fused():
        out = F.scaled_dot_product_attention(*dev_in, attn_mask=dev_mask, **kw)
    assert out.device.type == DEV and out.dtype == dtype and out.shape == ref.shape
    if grad:
        if out.numel() and q.numel() and k.numel():  # empty inputs take an ATen shortcut
            assert "FusedAttentionOverrideable" in out.grad_fn.name(), out.grad_fn.name()
        g = torch.randn(ref.shape, dtype=torch.float64)
        ref.backward(g.to(ref.dtype))
        out.backward(g.to(dtype).to(DEV))
    tol = TOL[dtype]
    torch.testing.assert_close(out.cpu().to(ref.dtype), ref, **tol)
    if grad:
        gtol = {k: v * 4 for k, v in tol.items()}
        for a, b in zip(dev_in, cpu_in):
            assert a.grad is not None and a.grad.device.type == DEV and a.grad.shape == b.shape
            torch.testing.assert_close(a.grad.cpu().to(ref.dtype), b.grad, **gtol)
        if mask is not None and mask.requires_grad:
            torch.testing.assert_close(dev_mask.grad.cpu().to(ref.dtype), cpu_mask.grad, **gtol)
    return out


CASES = [  # B, Hq, Hkv, L, S, D, Dv
    (1, 1, 1, 1, 1, 8, 8),
    (2, 3, 3, 70, 131, 16, 16),
    (1, 2, 2, 64, 64, 64, 64),
    (2, 2, 2, 65, 40, 24, 40),
    (1, 1, 1, 17, 33, 256, 256),
    (1, 4, 4, 129, 70, 80, 72),
]


@pytest.mark.parametrize("shape", CASES)
@pytest.mark.parametrize("causal", [False, True])
def test_forward_backward_float32(shape, causal):
    B, Hq, Hkv, L, S, D, Dv = shape
    q, k, v = make((B, Hq, L, D), torch.float32), make((B, Hkv, S, D), torch.float32), make((B, Hkv, S, Dv), torch.float32)
    run_both(q, k, v, torch.float32, is_causal=causal)


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("causal", [False, True])
def test_dtypes(dtype, causal):
    q, k, v = make((2, 2, 70, 32), dtype), make((2, 2, 90, 32), dtype), make((2, 2, 90, 48), dtype)
    run_both(q, k, v, dtype, is_causal=causal)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_transposed_projection_layout(dtype):
    # q/k/v as views of a (B, S, H, D) projection, the usual transformer layout
    q, k, v = (make((2, 4, 77, 32), dtype, transposed=True) for _ in range(3))
    assert not q.is_contiguous()
    out = run_both(q, k, v, dtype, is_causal=True)
    assert out.transpose(1, 2).is_contiguous()  # the output keeps the query's layout


def test_strided_views_and_scale():
    base = torch.randn(2, 3, 50, 40)
    q = base[:, :, ::2, :16]                  # row stride 2, partial head dim
    k = torch.randn(2, 3, 16, 60).transpose(-1, -2)  # head dim not innermost
    v = torch.randn(2, 3, 60, 24)[:, :, :, ::2]       # column stride 2
    run_both(q, k, v, torch.float32, scale=0.3)
    run_both(q, k, v, torch.float32, scale=-1.5)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gqa(causal, dtype):
    q, k, v = make((2, 8, 40, 32), dtype), make((2, 2, 50, 32), dtype), make((2, 2, 50, 16), dtype)
    run_both(q, k, v, dtype, is_causal=causal, enable_gqa=True)


@pytest.mark.parametrize("mshape", [(70, 90), (1, 70, 90), (2, 1, 70, 90), (2, 3, 70, 90), (1, 3, 1, 90)])
def test_bool_mask_broadcast(mshape):
    q, k, v = make((2, 3, 70, 16), torch.float32), make((2, 3, 90, 16), torch.float32), make((2, 3, 90, 16), torch.float32)
    mask = torch.rand(mshape) > 0.3
    run_both(q, k, v, torch.float32, attn_mask=mask)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_additive_mask_with_grad(dtype):
    q, k, v = make((2, 2, 33, 16), dtype), make((2, 2, 65, 16), dtype), make((2, 2, 65, 16), dtype)
    mask = torch.randn(2, 1, 33, 65).to(dtype).requires_grad_(True)
    run_both(q, k, v, dtype, attn_mask=mask)


def test_fully_masked_rows_give_zeros_like_cpu():
    q, k, v = make((1, 2, 6, 8), torch.float32), make((1, 2, 9, 8), torch.float32), make((1, 2, 9, 8), torch.float32)
    mask = torch.rand(6, 9) > 0.5
    mask[2] = False
    out = run_both(q, k, v, torch.float32, attn_mask=mask)
    assert (out[:, :, 2].cpu() == 0).all()
    fmask = torch.zeros(6, 9)
    fmask[4] = float("-inf")
    run_both(q, k, v, torch.float32, attn_mask=fmask)


def test_unbatched_3d_and_empty():
    q, k, v = make((2, 20, 8), torch.float32), make((2, 30, 8), torch.float32), make((2, 30, 8), torch.float32)
    run_both(q, k, v, torch.float32)
    run_both(make((1, 2, 0, 8), torch.float32), make((1, 2, 5, 8), torch.float32), make((1, 2, 5, 8), torch.float32),
             torch.float32)
    run_both(make((1, 2, 4, 8), torch.float32), make((1, 2, 0, 8), torch.float32), make((1, 2, 0, 8), torch.float32),
             torch.float32)


def test_fused_choice():
    q = torch.randn(1, 2, 4, 8, device=DEV)
    k3 = torch.randn(1, 3, 4, 8, device=DEV)
    k1 = torch.randn(1, 1, 4, 8, device=DEV)
    overrideable, math_ = SDPBackend.OVERRIDEABLE.value, SDPBackend.MATH.value
    assert torch._fused_sdp_choice(q, q, q) == overrideable
    assert torch._fused_sdp_choice(q, k1, k1, enable_gqa=True) == overrideable
    # what the kernel does not take goes to the math composite (and its errors)
    assert torch._fused_sdp_choice(q, k1, k1) == math_
    assert torch._fused_sdp_choice(q, k3, k3, enable_gqa=True) == math_
    assert torch._fused_sdp_choice(q.double(), q, q) == math_
    mask = torch.ones(4, 4, dtype=torch.bool, device=DEV)
    assert torch._fused_sdp_choice(q, q, q, attn_mask=mask, is_causal=True) == math_
    with pytest.raises(RuntimeError):
        F.scaled_dot_product_attention(q, q, q, attn_mask=mask, is_causal=True)


def mask_of(seed, B, H, L, S, p):
    """The dropout mask the kernel draws for (B, H, L, S) after seeding:
    uniform attention (q = 0) over an identity value matrix puts
    keep / (1 - p) / S at out[b, h, i, j]."""
    q = torch.zeros(B, H, L, 8, device=DEV)
    k = torch.randn(B, H, S, 8).to(DEV)
    v = torch.eye(S, device=DEV).expand(B, H, S, S)
    torch.manual_seed(seed)
    with fused():
        out = F.scaled_dot_product_attention(q, k, v, dropout_p=p).cpu()
    scaled = out * S * (1 - p)
    keep = scaled > 0.5
    torch.testing.assert_close(scaled, keep.float(), atol=1e-4, rtol=0)
    return keep


@pytest.mark.parametrize("B", [2, 6])  # the one-pass backward: 6 x 3 heads, 2 x 3 in 2 key chunks
def test_dropout_deterministic_keep_rate_and_backward_matches_mask(B):
    H, L, S, D, p = 3, 40, 70, 16, 0.3
    keep = mask_of(123, B, H, L, S, p)
    assert torch.equal(keep, mask_of(123, B, H, L, S, p))  # same seed, same mask
    assert not torch.equal(keep, mask_of(124, B, H, L, S, p))
    rate = keep.float().mean().item()
    assert abs(rate - (1 - p)) < 0.02, rate
    # the same seed and shapes draw the same mask whatever the values: compare
    # forward and all gradients with the CPU math path given that mask
    q, k, v = torch.randn(B, H, L, D), torch.randn(B, H, S, D), torch.randn(B, H, S, D)
    cpu_in = [t.clone().requires_grad_(True) for t in (q, k, v)]
    dev_in = [t.to(DEV).requires_grad_(True) for t in (q, k, v)]
    ref, _ = torch.ops.aten._scaled_dot_product_attention_math(*cpu_in, None, p, False, keep)
    torch.manual_seed(123)
    with fused():
        out = F.scaled_dot_product_attention(*dev_in, dropout_p=p)
    torch.testing.assert_close(out.cpu(), ref, atol=2e-5, rtol=2e-4)
    g = torch.randn(ref.shape)
    ref.backward(g)
    out.backward(g.to(DEV))
    for a, b in zip(dev_in, cpu_in):
        torch.testing.assert_close(a.grad.cpu(), b.grad, atol=1e-4, rtol=1e-3)


@pytest.mark.parametrize("B", [1, 8])  # 8 x 2 kv heads: the one-pass backward; 1 x 2: two passes
def test_dropout_causal_gqa_backward_matches_mask(B):
    H, L, S, D, p = 4, 33, 33, 8, 0.5
    keep = mask_of(7, B, H, L, S, p)
    q, k, v = torch.randn(B, H, L, D), torch.randn(B, 2, S, D), torch.randn(B, 2, S, D)
    cpu_in = [t.clone().requires_grad_(True) for t in (q, k, v)]
    dev_in = [t.to(DEV).requires_grad_(True) for t in (q, k, v)]
    ref, _ = torch.ops.aten._scaled_dot_product_attention_math(*cpu_in, None, p, True, keep, enable_gqa=True)
    torch.manual_seed(7)
    with fused():
        out = F.scaled_dot_product_attention(*dev_in, dropout_p=p, is_causal=True, enable_gqa=True)
    torch.testing.assert_close(out.cpu(), ref, atol=2e-5, rtol=2e-4)
    g = torch.randn(ref.shape)
    ref.backward(g)
    out.backward(g.to(DEV))
    for a, b in zip(dev_in, cpu_in):
        torch.testing.assert_close(a.grad.cpu(), b.grad, atol=1e-4, rtol=1e-3)


# the one-pass backward: 2 x 4 and 4 x 4 (batch, head) units, and 1 x 4 in 2
# key chunks whose dQ partial sums are added in a fixed order
@pytest.mark.parametrize("B", [1, 2, 4])
def test_results_do_not_depend_on_thread_count(B):
    from conftest import run_python
    code = f"""
        import torch, torch.nn.functional as F, torch_neuronx
        torch.manual_seed(0)
        q, k, v = (torch.randn({B}, 4, 150, 32, device="neuron", requires_grad=True) for _ in range(3))
        out = F.scaled_dot_product_attention(q, k, v, dropout_p=0.2, is_causal=True)
        out.sum().backward()
        r = torch.cat([out.flatten(), q.grad.flatten(), k.grad.flatten(), v.grad.flatten()]).detach().cpu()
        import hashlib; print(hashlib.sha256(r.numpy().tobytes()).hexdigest())
    """
    one = run_python(code, env={"TORCHNEURON_NUM_THREADS": "1"})
    many = run_python(code, env={"TORCHNEURON_NUM_THREADS": "4"})
    assert one.returncode == 0 and many.returncode == 0, one.stderr + many.stderr
    assert one.stdout.strip() == many.stdout.strip()


# The one-pass backward (BACKWARD: a unit per (batch, kv head), or per key
# chunk of one) is taken from 8 units on (nk_attention_key_chunks); the
# cases above with few heads and short keys take the two-pass one.  These cover it: the training examples' layouts
# (q/k/v split from one (B, T, 3C) projection), odd lengths, head dims
# 16/64/other, GQA, masks, 16-bit.
ONE_PASS = [  # B, Hq, Hkv, L, S, D, Dv
    (16, 4, 4, 64, 64, 16, 16),     # examples/train_gpt.py
    (4, 4, 4, 128, 128, 64, 64),    # HF GPT-2 (bench/models.py), fewer batches
    (4, 4, 4, 131, 70, 24, 40),     # odd lengths, other head dims
    (2, 8, 8, 200, 200, 32, 32),    # two key and two query blocks
    (4, 8, 4, 45, 77, 40, 16),      # GQA
    (1, 2, 2, 100, 300, 32, 32),    # 2 pairs in 3 key chunks of 2, 2, 1 blocks (dQ partial sums)
    (1, 4, 2, 70, 200, 16, 24),     # GQA in 4 key chunks of one block each
]


# bfloat16 on two of the shapes (the GPT example's and the odd one) is enough
ONE_PASS_CASES = [(s, torch.float32) for s in ONE_PASS] + [(ONE_PASS[0], torch.bfloat16),
                                                           (ONE_PASS[2], torch.bfloat16)]


@pytest.mark.parametrize("shape,dtype", ONE_PASS_CASES)
@pytest.mark.parametrize("causal", [False, True])
def test_one_pass_backward(shape, causal, dtype):
    B, Hq, Hkv, L, S, D, Dv = shape
    q, k, v = make((B, Hq, L, D), dtype, True), make((B, Hkv, S, D), dtype, True), make((B, Hkv, S, Dv), dtype)
    run_both(q, k, v, dtype, is_causal=causal, enable_gqa=Hq != Hkv)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_qkv_split_views_of_one_projection(dtype):
    # as train_gpt.py / GPT-2: a Linear's (B, T, 3C) output split in three,
    # viewed (B, T, H, D) and transposed to (B, H, T, D): strided, no copies
    B, T, H, D = 16, 64, 4, 16
    C = H * D
    qkv = torch.randn(B, T, 3 * C).to(dtype)
    q, k, v = (t.view(B, T, H, D).transpose(1, 2) for t in qkv.split(C, dim=2))
    run_both(q, k, v, dtype, is_causal=True)
    run_both(q, k, v, dtype, is_causal=False)


@pytest.mark.parametrize("mask_dtype", [torch.bool, torch.float32])
def test_many_heads_masks(mask_dtype):  # masks keep the two-pass backward
    B, H, L, S, D = 4, 4, 50, 70, 16
    q, k, v = make((B, H, L, D), torch.float32), make((B, H, S, D), torch.float32), make((B, H, S, D), torch.float32)
    mask = torch.rand(L, S) > 0.3 if mask_dtype == torch.bool else torch.randn(2, 1, L, S).expand(2, 2, L, S).reshape(4, 1, L, S)
    mask = mask.contiguous()
    if mask_dtype == torch.bool:
        mask[3] = False  # a fully hidden row
    run_both(q, k, v, torch.float32, attn_mask=mask)
