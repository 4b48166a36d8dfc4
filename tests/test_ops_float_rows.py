"""float16/bfloat16 elementwise ops and float casts on their fast paths
(nd_iter.h's float-rows adapter, half_rows.h's vectorised conversions,
binary's fused AVX-512 16-bit loop), compared with the same ops on the CPU:
contiguous, broadcast (row and scalar, Python numbers and 0-dim tensors),
lengths across the vector widths and the adapter's 1024-element chunks,
in-place, out=, transposed and strided operands, special values.  The
arithmetic ops and the casts must match the CPU bit for bit (both compute in
float32 and round once); transcendental unary ops within the default
tolerance.  Every test runs inside fallback_mode("error") (the op must be
native).  The C test tests/c/test_kernels_float_rows.c runs the same paths
per ISA."""
import pytest
import torch

import torch_neuronx  # noqa: F401
from torch_neuronx._fallback import fallback_mode

HALVES = [torch.bfloat16, torch.float16]
LENGTHS = [1, 15, 17, 33, 1023, 1025, 2065, 8 * 128 + 7]


@pytest.fixture(autouse=True)
def native():
    with fallback_mode("error"):
        yield


def exact(actual, expected, fma=False):
    """bit for bit; fma: a scaled add, fused on neuron (one rounding in
    float32), mul then add in ATen's scalar tail: within a 16-bit ulp"""
    assert actual.device.type == "neuron"
    if fma:
        eps = torch.finfo(expected.dtype).eps
        scale = expected.float().abs().nan_to_num(0, 0, 0).max().item()
        return torch.testing.assert_close(actual.cpu(), expected, rtol=eps, atol=eps * scale,
                                          equal_nan=True)
    assert actual.dtype == expected.dtype
    torch.testing.assert_close(actual.cpu(), expected, rtol=0, atol=0, equal_nan=True)


def close(actual, expected):
    assert actual.device.type == "neuron"
    torch.testing.assert_close(actual.cpu(), expected, equal_nan=True)


def sample(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g) * 3
    flat = x.view(-1)
    if flat.numel() > 20:  # a few specials
        flat[3], flat[7], flat[11], flat[13] = float("nan"), float("inf"), -float("inf"), 1e-6
    return x.to(dtype)


BINARY = {
    "add": lambda a, b: a + b,
    "sub_alpha": lambda a, b: torch.sub(a, b, alpha=0.75),
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
}


@pytest.mark.parametrize("dtype", HALVES)
@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("op", list(BINARY))
def test_binary_contiguous(dtype, n, op):
    a, b = sample(n, dtype, 1), sample(n, dtype, 2)
    exact(BINARY[op](a.to("neuron"), b.to("neuron")), BINARY[op](a, b), fma=op == "sub_alpha")


@pytest.mark.parametrize("dtype", HALVES)
@pytest.mark.parametrize("scalar", [0.5, 0.1, 3, -2.25])
@pytest.mark.parametrize("op", list(BINARY))
def test_binary_python_scalar(dtype, scalar, op):
    a = sample((3, 1029), dtype, 3)
    d = a.to("neuron")
    # ATen's CPU adds a scalar the 16-bit type cannot hold (0.1) rounded to
    # that type first; neuron adds it as float32 (as it multiplies): one
    # 16-bit ulp apart at most
    loose = op == "sub_alpha" or (op in ("add", "sub_alpha") and torch.tensor(scalar, dtype=dtype).item() != scalar)
    exact(BINARY[op](d, scalar), BINARY[op](a, scalar), fma=loose)
    exact(BINARY[op](scalar, d), BINARY[op](scalar, a), fma=loose)


@pytest.mark.parametrize("dtype", HALVES)
def test_binary_zero_dim_and_row_broadcast(dtype):
    a = sample((4, 5, 1031), dtype, 4)
    bias, s = sample(1031, dtype, 5), torch.tensor(1.7, dtype=dtype)
    col = sample((4, 5, 1), dtype, 6)
    d = a.to("neuron")
    exact(d + bias.to("neuron"), a + bias)
    exact(d * s.to("neuron"), a * s)
    exact(d * s, a * s)  # 0-dim CPU scalar tensor
    exact(d / col.to("neuron"), a / col)
    exact(bias.to("neuron") - d, bias - a)


@pytest.mark.parametrize("dtype", HALVES)
def test_binary_strided_inplace_out(dtype):
    a, b = sample((64, 70), dtype, 7), sample((70, 64), dtype, 8)
    da, db = a.to("neuron"), b.to("neuron")
    exact(da * db.t(), a * b.t())           # transposed operand
    exact(da[:, ::3] + db.t()[:, ::3], a[:, ::3] + b.t()[:, ::3])
    ca, cd = a.clone(), da.clone()
    ca.mul_(0.5).add_(b.t(), alpha=2)
    cd.mul_(0.5).add_(db.t(), alpha=2)
    exact(cd, ca, fma=True)
    ct, dt = b.t().clone(), db.t().clone()  # in place into a strided view
    ct[:, ::2].div_(a[:, ::2])
    dt[:, ::2].div_(da[:, ::2])
    exact(dt, ct)
    out_c = torch.empty(64, 70, dtype=dtype)
    out_d = torch.empty(64, 70, dtype=dtype, device="neuron")
    torch.mul(a, b.t(), out=out_c)
    torch.mul(da, db.t(), out=out_d)
    exact(out_d, out_c)


@pytest.mark.parametrize("dtype", HALVES)
def test_binary_mixed_float32(dtype):
    """autocast's mixed case: a float32 and a 16-bit operand, float32 out"""
    a, b = sample((5, 1030), torch.float32, 9), sample((5, 1030), dtype, 10)
    exact(a.to("neuron") * b.to("neuron"), a * b)
    exact(b.to("neuron") + a.to("neuron"), b + a)
    exact(b.to("neuron").t() - a.to("neuron").t(), b.t() - a.t())


UNARY = {
    "tanh": torch.tanh,
    "exp": torch.exp,
    "gelu": torch.nn.functional.gelu,
    "gelu_tanh": lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
    "silu": torch.nn.functional.silu,
    "sigmoid": torch.sigmoid,
    "neg": torch.neg,
    "pow3": lambda x: torch.pow(x, 3.0),
    "maximum0": lambda x: torch.clamp(x, min=0.1),
}


@pytest.mark.parametrize("dtype", HALVES)
@pytest.mark.parametrize("op", list(UNARY))
def test_unary_layouts(dtype, op):
    f = UNARY[op]
    # no infinities: ATen's vector gelu gives gelu(inf) = nan, neuron inf
    x = sample((6, 1031), dtype, 11).nan_to_num(nan=float("nan"), posinf=30, neginf=-30)
    d = x.to("neuron")
    close(f(d), f(x))
    close(f(d.t()), f(x.t()))        # transposed
    close(f(d[:, 1::3]), f(x[:, 1::3]))  # strided
    for n in (1, 17, 1025):
        close(f(d.view(-1)[:n]), f(x.view(-1)[:n]))


@pytest.mark.parametrize("dtype", HALVES)
def test_unary_inplace_and_backward(dtype):
    x = sample((3, 1100), dtype, 12)
    c, d = x.clone(), x.to("neuron")
    c.tanh_()
    d.tanh_()
    close(d, c)
    xc = x.clone().requires_grad_()
    xd = x.to("neuron").requires_grad_()
    g = sample((3, 1100), dtype, 13)
    torch.nn.functional.gelu(xc, approximate="tanh").backward(g)
    torch.nn.functional.gelu(xd, approximate="tanh").backward(g.to("neuron"))
    close(xd.grad, xc.grad)


CASTS = [(torch.float32, torch.bfloat16), (torch.bfloat16, torch.float32),
         (torch.float32, torch.float16), (torch.float16, torch.float32),
         (torch.bfloat16, torch.float16), (torch.float16, torch.bfloat16)]


@pytest.mark.parametrize("src,dst", CASTS)
def test_casts(src, dst):
    x = sample((129, 257), torch.float32, 14)
    x.view(-1)[20] = 70000.0  # float16 overflow
    x.view(-1)[21] = 2.0 ** -20  # float16 subnormal
    x.view(-1)[22] = -0.0
    x = x.to(src)
    d = x.to("neuron")
    exact(d.to(dst), x.to(dst))
    exact(d.t().contiguous().to(dst), x.t().contiguous().to(dst))
    exact(d.t().to(dst, memory_format=torch.contiguous_format),
          x.t().to(dst, memory_format=torch.contiguous_format))  # transposed read
    exact(d[:, ::2].to(dst), x[:, ::2].to(dst))
    for n in (1, 7, 17, 1025):
        exact(d.view(-1)[:n].to(dst), x.view(-1)[:n].to(dst))
    out_c, out_d = torch.zeros(257, 129, dtype=dst), torch.zeros(257, 129, dtype=dst, device="neuron")
    out_c.t().copy_(x)
    out_d.t().copy_(d)  # transposed write
    exact(out_d, out_c)
