"""torch.compile on neuron (torch_neuronx/_inductor): Inductor's C++ kernels
run as tasks on neuron streams.  Every result is compared with CPU eager;
graphs run with the CPU fallback in error mode (the `native` fixture), so a
compiled graph that fell back to the CPU would fail.

Compiles are slow on small machines, so tests share compiled functions where
the behaviour under test allows it (module-scoped fixtures), and the
Inductor cache is one directory per run of this module.
"""
import copy
import os
import re
import time
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch._dynamo.utils import counters
from torch._inductor.utils import run_and_get_code
from torch.profiler import ProfilerActivity, profile

import torch_neuronx
from conftest import assert_same

GRAD_TOL = dict(rtol=1e-4, atol=1e-4)


@pytest.fixture(scope="module", autouse=True)
def _inductor_cache_dir(tmp_path_factory):
    """A fresh Inductor cache for this module (no state from earlier runs)."""
    old = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(tmp_path_factory.mktemp("inductor"))
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()
    if old is None:
        os.environ.pop("TORCHINDUCTOR_CACHE_DIR")
    else:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = old


def neuron_copy(module):
    return copy.deepcopy(module).to("neuron")


def kernels_in(code):
    """The generated C++ kernels' names launched in a wrapper's code."""
    return re.findall(r"neuron_launch\((cpp_\w+), ", code)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(32, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x))).log_softmax(-1)


@pytest.fixture(scope="module")
def mlp():
    """(cpu module, neuron copy, the neuron copy compiled with the default backend)."""
    torch.manual_seed(0)
    cpu = MLP()
    dev = neuron_copy(cpu)
    return cpu, dev, torch.compile(dev)


def test_registration_is_lazy_and_complete():
    from torch._dynamo.device_interface import get_interface_for_device
    from torch._inductor.codegen.common import get_scheduling_for_device

    torch.compile(lambda x: x + 1)(torch.ones(2, device="neuron"))
    from torch_neuronx._inductor.device_interface import NeuronInterface
    from torch_neuronx._inductor.scheduling import NeuronScheduling

    assert get_interface_for_device("neuron") is NeuronInterface
    assert get_scheduling_for_device("neuron") is NeuronScheduling
    assert "neuron" in torch._dynamo.list_backends()
    # The device module still says "absent" to Inductor's probe.
    assert not hasattr(torch.neuron, "Scheduling")
    props = NeuronInterface.Worker.get_device_properties("neuron:1")
    assert props.name == torch.neuron.get_device_properties(1).name


def test_mlp_forward_backward(mlp, native):
    cpu, dev, compiled = mlp
    x = torch.randn(16, 32)
    target = torch.randint(0, 10, (16,))
    ref = F.nll_loss(cpu(x), target)
    ref.backward()
    dev.zero_grad()
    loss = F.nll_loss(compiled(x.to("neuron")), target.to("neuron"))
    loss.backward()
    assert_same(loss.detach(), ref.detach())
    for (name, p), q in zip(dev.named_parameters(), cpu.parameters()):
        assert_same(p.grad, q.grad, **GRAD_TOL), name
    cpu.zero_grad()


def test_generated_code_launches_on_the_stream_with_the_pool_threads():
    f = torch.compile(lambda x, y: torch.tanh(x) * y + x.sum(-1, keepdim=True))
    x = torch.randn(1024, 1024, device="neuron")  # large enough to run in parallel
    y = torch.randn(1024, 1024, device="neuron")
    out, (code,) = run_and_get_code(f, x, y)
    assert_same(out, torch.tanh(x.cpu()) * y.cpu() + x.cpu().sum(-1, keepdim=True), **GRAD_TOL)
    assert kernels_in(code)
    assert "empty_strided_neuron(" in code
    # no host-side waits in the wrapper
    assert "synchronize" not in code and "neuron_sync" not in code
    threads = torch_neuronx._C._compute_threads()
    if threads > 1:
        assert f"#pragma omp parallel num_threads({threads})" in code
    else:
        assert "#pragma omp parallel" not in code


def test_reduction_over_a_transposed_operand(native):
    """A tile2d (transposing) kernel as the main loop of a reduction over the
    outer loop: Inductor asserts that it is a vec kernel (cpp.py:4746), so
    the neuron tile2d class must be one (kernels.py); vit's backward failed."""
    from torch_neuronx._inductor.kernels import NeuronCppKernelProxy as proxy

    assert issubclass(proxy.tile2d_kernel_cls, proxy.vec_kernel_cls)
    f = lambda x, y: (x.t() * y).sum(0)  # noqa: E731
    x, y = torch.randn(64, 48), torch.randn(48, 64)
    out, (code,) = run_and_get_code(torch.compile(f), x.to("neuron"), y.to("neuron"))
    assert "transpose_mxn" in code  # the tile2d path ran
    assert_same(out, f(x, y), **GRAD_TOL)


@pytest.mark.parametrize("case", ["softmax", "gelu_tanh_reused", "layer_norm_256"])
def test_generated_code_makes_the_cpus_choices(case, native):
    """Inductor's heuristics test for device "cpu" and treat other devices as
    GPUs; neuron's kernels are C++ on the CPU's cores and must get the CPU's
    choices (workarounds.py G, H): a result of exp/tanh read twice is stored,
    not recomputed, and a variance over at most 1024 elements is two sums,
    not Welford's update.  The generated code has as many exp/tanh/Welford
    calls as the CPU's."""
    def softmax(x):
        e = (x - x.amax(-1, keepdim=True)).exp()
        return e / e.sum(-1, keepdim=True)

    def gelu_tanh_reused(x):
        t = (0.79788456 * (x + 0.044715 * x * x * x)).tanh()
        return 0.5 * x * (1 + t) + t.sum(-1, keepdim=True)

    def layer_norm_256(x):
        return F.layer_norm(x, (256,))

    f = {"softmax": softmax, "gelu_tanh_reused": gelu_tanh_reused,
         "layer_norm_256": layer_norm_256}[case]
    x = torch.randn(64, 256)
    with torch._inductor.config.patch(force_disable_caches=True):  # code of this torch_neuronx
        torch._dynamo.reset()
        cpu_out, (cpu_code,) = run_and_get_code(torch.compile(f), x)
        torch._dynamo.reset()
        out, (code,) = run_and_get_code(torch.compile(f), x.to("neuron"))
    # neuron's kernels call the device's exp/tanh where the CPU's call ATen's (vec_math.py)
    for construct, ours in ((r"\.exp\(\)", r"neuron_vec::exp\("), (r"\.tanh\(\)", r"neuron_vec::tanh\("),
                            (r"welford_combine", r"welford_combine")):
        count = len(re.findall(construct, code)) + (len(re.findall(ours, code)) if ours != construct else 0)
        assert count == len(re.findall(construct, cpu_code)), construct
    assert_same(out, cpu_out, **GRAD_TOL)


def _pointwise_chain(x, a, b):
    y = (x * a + b).sigmoid() * x - b
    y = torch.where(y > 0, y, 0.1 * y).tanh() + x.abs().sqrt()
    return (y * y + 1.0).rsqrt() * (a - b).exp().clamp(max=4.0)


def _softmax_primitives(x, w, b):
    e = (x - x.amax(-1, keepdim=True)).exp()
    return e / e.sum(-1, keepdim=True)


def _row_softmax(x, a, b):
    return _softmax_primitives(x, a, b) + a * b


def _compiled_with_widen(f, args, widen, monkeypatch):
    from torch_neuronx._inductor import tiling

    monkeypatch.setattr(tiling, "WIDEN", widen)
    with torch._inductor.config.patch(force_disable_caches=True):
        torch._dynamo.reset()
        out, (code,) = run_and_get_code(torch.compile(f), *[t.to("neuron") for t in args])
    return out, code


@pytest.mark.parametrize("case", ["chain 4101", "chain 1024 rows of 33", "chain broadcast a",
                                  "chain 255", "chain 300 rows of 255", "row softmax"])
def test_pointwise_loops_interleave_vectors(case, native, monkeypatch):
    """At AVX2 a float32 pointwise loop is tiled by tiling.WIDEN vectors
    (VectorizedN<float, 4>: four independent chains per iteration), with the
    bits of the one-vector loop (WIDEN = 1, upstream's factor) and within the
    float32 tolerance of CPU eager; vector tails, a broadcast operand and a
    2-d loop too.  Not widened: a tiled (inner) range of fewer than
    tiling.MIN_RANGE elements, any loop at another ISA.  (The row softmax's
    sum is widened too: test_reductions_accumulate_in_interleaved_vectors.)"""
    from torch._inductor.cpu_vec_isa import VecAVX2, pick_vec_isa

    g = torch.Generator().manual_seed(0)
    shape, f = {"chain 4101": ((4101,), _pointwise_chain),
                "chain 1024 rows of 33": ((1024, 33), _pointwise_chain),
                "chain broadcast a": ((64, 1030), _pointwise_chain),
                "chain 255": ((255,), _pointwise_chain),
                "chain 300 rows of 255": ((300, 255), _pointwise_chain),
                "row softmax": ((64, 1030), _row_softmax)}[case]
    x = torch.randn(shape, generator=g) * 3
    x[..., :6] = torch.tensor([0.0, -0.0, float("inf"), -float("inf"), float("nan"), 1e-40])
    a = torch.randn(shape[-1] if case in ("chain broadcast a", "chain 300 rows of 255") else shape,
                    generator=g)
    b = torch.randn(shape, generator=g)
    # "rows of 33": contiguous operands, one flat loop of 33792 elements;
    # "rows of 255": a broadcast operand, rows shorter than tiling.MIN_RANGE
    widened = isinstance(pick_vec_isa(), VecAVX2) and case not in ("chain 255", "chain 300 rows of 255")
    one, one_code = _compiled_with_widen(f, (x, a, b), 1, monkeypatch)
    out, code = _compiled_with_widen(f, (x, a, b), 4, monkeypatch)
    assert ("VectorizedN<float,4>" in code) == widened, case
    assert "VectorizedN<float,4>" not in one_code
    if case != "row softmax":  # its sum adds in another order (next test)
        assert torch.equal(_bits(out), _bits(one)), case
    assert_same(out, f(x, a, b), atol=1e-5, rtol=1e-5)


_REDUCTIONS = {
    "row sum, tail": (lambda x: x.sum(-1), (64, 1030)),
    "row amax, NaN and inf": (lambda x: x.amax(-1), (64, 1030)),
    "row amin": (lambda x: x.amin(-1), (64, 300)),
    "whole sum, threads split it": (lambda x: x.sum(), ((1 << 20) + 3,)),
    "column sum": (lambda x: x.sum(0), (300, 1030)),
    "long rows (cascade sum)": (lambda x: x.sum(-1), (4, 300000)),
    "RMSNorm": (lambda x: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6), (64, 1030)),
    "max and sum": (lambda x: x.amax(-1) + (x * 2).sum(-1), (64, 1030)),
}


@pytest.mark.parametrize("case", list(_REDUCTIONS))
def test_reductions_accumulate_in_interleaved_vectors(case, native, monkeypatch):
    """At AVX2 a float32 sum/max/min's loop is tiled by tiling.WIDEN vectors
    and accumulates in VectorizedN<float, 4>: row, whole-tensor (per-thread
    accumulators), column and cascade-summed reductions, vector tails.  Max
    and min keep the one-vector loop's bits; a sum adds in another fixed
    order, within the float32 tolerance of a float64 reference as the
    one-vector loop is."""
    from torch._inductor.cpu_vec_isa import VecAVX2, pick_vec_isa

    f, shape = _REDUCTIONS[case]
    x = torch.randn(shape, generator=torch.Generator().manual_seed(0)) * 3
    if "NaN" in case:
        x[3, 700], x[5, 1029], x[6, 0] = float("nan"), float("inf"), -float("inf")
    one, one_code = _compiled_with_widen(f, (x,), 1, monkeypatch)
    out, code = _compiled_with_widen(f, (x,), 4, monkeypatch)
    assert ("VectorizedN<float,4> tmp_acc" in code) == isinstance(pick_vec_isa(), VecAVX2), case
    assert "VectorizedN<float,4>" not in one_code
    if "sum" not in case and case != "RMSNorm":
        assert torch.equal(_bits(out), _bits(one)), case
    expected = f(x.double())
    tol = dict(atol=1e-5 * x.shape[-1] ** 0.5 * 3, rtol=1e-5) if "sum" in case else dict(atol=1e-5, rtol=1e-5)
    assert_same(out.double(), expected, **tol)
    assert_same(one.double(), expected, **tol)


def _layer_norm_primitives(x, w, b):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) * torch.rsqrt(var + 1e-5) * w + b


# name -> (function of (x, w, b), x's shape, streamed store expected, prefetch expected)
_CACHE_HINTS = {
    # rows of 1003 floats: the row starts fall on every 4-byte offset mod 32,
    # so the aligned (streamed) and unaligned (storeu) stores alternate
    "softmax 1100x1003": (_softmax_primitives, (1100, 1003), True, True),
    "layer_norm 1100x1003": (_layer_norm_primitives, (1100, 1003), True, True),
    "pointwise 2^20+5": (lambda x, w, b: _pointwise_chain(x, x, x), ((1 << 20) + 5,), True, False),
    "input with an offset": (lambda x, w, b: _softmax_primitives(x[1:], w, b), (1101, 1003), True, True),
    "rows of 8000 (not prefetched)": (_softmax_primitives, (140, 8000), True, False),
    "small (no hints)": (_softmax_primitives, (64, 1030), False, False),
}


@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("case", list(_CACHE_HINTS))
def test_large_buffers_stream_stores_and_prefetch_rows(case, dynamic, native, monkeypatch):
    """A kernel writes a float32 output of at least cache_hints.LARGE_BYTES
    with non-temporal stores (aligned full vectors; unaligned ones and tails
    stay storeu), and a row reduction over a large input prefetches the next
    row of it; the bits are those of the same kernel without hints, and
    within the float32 tolerance of CPU eager.  dynamic=True decides by the
    size hint."""
    from torch._inductor.cpu_vec_isa import VecAVX2, VecAVX512, pick_vec_isa

    from torch_neuronx._inductor import cache_hints

    f, shape, streams, prefetches = _CACHE_HINTS[case]
    g = torch.Generator().manual_seed(0)
    x, w, b = torch.randn(shape, generator=g) * 3, torch.randn(shape[-1], generator=g), torch.randn(shape[-1], generator=g)
    x[..., 5] = float("nan")
    args = [t.to("neuron") for t in (x, w, b)]

    def compiled(large_bytes):
        monkeypatch.setattr(cache_hints, "LARGE_BYTES", large_bytes)
        with torch._inductor.config.patch(force_disable_caches=True):
            torch._dynamo.reset()
            return run_and_get_code(torch.compile(f, dynamic=dynamic), *args)

    plain, (plain_code,) = compiled(1 << 62)
    out, (code,) = compiled(4 << 20)
    vector = isinstance(pick_vec_isa(), (VecAVX2, VecAVX512))
    assert ("neuron_cache::store(" in code) == (streams and vector), case
    assert ("neuron_cache::prefetch<" in code) == (prefetches and vector), case
    assert "neuron_cache::" not in plain_code
    assert torch.equal(_bits(out), _bits(plain)), case
    assert_same(out, f(x, w, b), atol=1e-5, rtol=1e-5)


VEC_MATH = [torch.exp, torch.exp2, torch.expm1, torch.log, torch.log2, torch.log10, torch.log1p,
            torch.erf, torch.erfc, torch.sin, torch.cos, torch.atan, torch.tanh, torch.sigmoid]


def _bits(t):
    """int32 bits of a float32 tensor with every NaN as one pattern (a NaN's
    sign and payload are not results)."""
    t = t.cpu()
    return torch.where(t.isnan(), torch.tensor(float("nan")), t).view(torch.int32)


@pytest.mark.parametrize("n", [1013, 16 * 64 + 7])
def test_vector_math_is_the_devices(n, native):
    """Compiled kernels compute exp, tanh, erf, log, sin, ... with the
    device's vector math, not ATen's SLEEF calls (vec_math.py): the code
    calls neuron_vec::<fn>, and the results are the eager neuron op's bits
    (same algorithms, both built without FMA contraction), within the float32
    tolerance of the CPU's, special values included; vector tails too."""
    special = torch.tensor([0.0, -0.0, float("inf"), -float("inf"), float("nan"), 1e-40, -1e-40,
                            0.5, -0.5, 0.625, -0.625, 88.5, -88.5, 100.0, -100.0, 200.0, -200.0,
                            1e6, -1e6, 2.0 ** 17 + 1, -1.0, -2.0])
    x = torch.cat([special, torch.randn(n - len(special), generator=torch.Generator().manual_seed(0)) * 4])
    with torch._inductor.config.patch(force_disable_caches=True):
        torch._dynamo.reset()
        outs, (code,) = run_and_get_code(torch.compile(lambda t: [f(t) for f in VEC_MATH]), x.to("neuron"))
    for f, out in zip(VEC_MATH, outs):
        assert f"neuron_vec::{f.__name__}(" in code, f.__name__
        assert torch.equal(_bits(out), _bits(f(x.to("neuron")))), f.__name__
        expected = f(x)
        assert_same(out, expected, atol=1e-6, rtol=4e-6)  # erfc: 3.4 ulp
        finite = ~expected.isnan()
        assert torch.equal(out.cpu()[finite].signbit(), expected[finite].signbit()), f.__name__


def test_vector_math_keeps_upstream_for_other_dtypes(native):
    """float64 vectors keep ATen's methods (the device's math is float32);
    bfloat16 is computed in float32 vectors by Inductor, so it takes ours
    (and rounds once, as Inductor on the CPU does: compared with that)."""
    x = torch.randn(300, dtype=torch.float64)
    f = lambda t: t.exp() + t.tanh()  # noqa: E731
    with torch._inductor.config.patch(force_disable_caches=True):
        torch._dynamo.reset()
        out, (code,) = run_and_get_code(torch.compile(f), x.to("neuron"))
        assert "neuron_vec" not in code and ".exp()" in code
        assert_same(out, f(x))
        torch._dynamo.reset()
        xb = x.to(torch.bfloat16)
        out, (code,) = run_and_get_code(torch.compile(f), xb.to("neuron"))
        assert "neuron_vec::exp(" in code
        torch._dynamo.reset()
        assert_same(out, torch.compile(f)(xb))


def test_avg_pool_ceil_mode_gradient(native):
    """ceil_mode windows past the input divide by their clipped size, as
    ATen's (workarounds.py F: Inductor's lowering divides by kernel area)."""
    f = lambda x: F.avg_pool2d(x, 3, ceil_mode=True)  # noqa: E731
    x = torch.randn(2, 3, 5, 5)
    x.requires_grad_(True)
    f(x).sum().backward()
    dev = x.detach().to("neuron").requires_grad_(True)
    out = torch.compile(f)(dev)
    out.sum().backward()
    assert_same(out.detach(), f(x).detach(), **GRAD_TOL)
    assert_same(dev.grad, x.grad, **GRAD_TOL)


def test_conv_batchnorm_training(native):
    torch.manual_seed(1)
    cpu = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                        nn.Conv2d(8, 4, 3, stride=2), nn.Flatten(), nn.Linear(4 * 3 * 3, 5))
    dev = neuron_copy(cpu)
    compiled = torch.compile(dev)
    for step in range(2):
        x = torch.randn(4, 3, 8, 8)
        ref = cpu(x)
        ref.square().mean().backward()
        out = compiled(x.to("neuron"))
        out.square().mean().backward()
        assert_same(out.detach(), ref.detach(), **GRAD_TOL)
    for (name, p), q in zip(dev.named_parameters(), cpu.parameters()):
        assert_same(p.grad, q.grad, **GRAD_TOL), name
    # batch norm's running statistics are mutated inside the graph
    assert_same(dev[1].running_mean, cpu[1].running_mean, **GRAD_TOL)
    assert_same(dev[1].running_var, cpu[1].running_var, **GRAD_TOL)
    assert int(dev[1].num_batches_tracked) == 2
    # inference: layout optimisation may make convolution inputs channels-last
    cpu.eval()
    dev.eval()
    with torch.no_grad():
        x = torch.randn(2, 3, 8, 8)
        assert_same(torch.compile(dev)(x.to("neuron")), cpu(x), **GRAD_TOL)


def test_sdpa_forward_backward(native):
    torch.manual_seed(2)
    q, k, v = (torch.randn(2, 4, 24, 16, requires_grad=True) for _ in range(3))

    def attn(q, k, v):
        return F.scaled_dot_product_attention(q * 1.5, k, v, is_causal=True).relu()

    ref = attn(q, k, v)
    ref.sum().backward()
    qd, kd, vd = (t.detach().to("neuron").requires_grad_() for t in (q, k, v))
    out = torch.compile(attn)(qd, kd, vd)
    out.sum().backward()
    assert_same(out.detach(), ref.detach(), **GRAD_TOL)
    for got, want in ((qd, q), (kd, k), (vd, v)):
        assert_same(got.grad, want.grad, **GRAD_TOL)


def test_embedding_and_dropout(native):
    torch.manual_seed(3)
    emb = nn.Embedding(50, 16)
    dev = neuron_copy(emb)
    idx = torch.randint(0, 50, (6, 7))

    def f(e, i):
        return F.dropout(e(i), p=0.5, training=True)

    compiled = torch.compile(f)
    out = compiled(dev, idx.to("neuron"))
    out.sum().backward()
    rows = emb(idx).detach()
    kept = out.detach().cpu() != 0
    # dropout: about half kept, the kept values scaled by 2, the rest 0
    assert 0.35 < kept.float().mean().item() < 0.65
    torch.testing.assert_close(out.detach().cpu()[kept], 2 * rows[kept])
    # the backward uses the forward's mask: each row's gradient counts its kept uses, x2
    grad = torch.zeros(50, 16).index_put_((idx,), 2 * kept.float(), accumulate=True)
    assert_same(dev.weight.grad, grad)
    # a new draw next call
    assert not torch.equal(compiled(dev, idx.to("neuron")).detach().cpu() != 0, kept)


def test_dynamic_shapes_compile_once(native):
    counters.clear()

    def f(x, w):
        return (x @ w).softmax(-1) * x.sum(-1, keepdim=True)

    compiled = torch.compile(f, dynamic=True)
    w = torch.randn(8, 8)
    for n in (3, 7, 19, 64):
        x = torch.randn(n, 8)
        assert_same(compiled(x.to("neuron"), w.to("neuron")), f(x, w), **GRAD_TOL)
    assert counters["stats"]["unique_graphs"] == 1


def test_graph_on_second_device(native):
    torch.manual_seed(4)
    cpu = MLP()
    dev = copy.deepcopy(cpu).to("neuron:1")
    x = torch.randn(5, 32)
    compiled = torch.compile(dev)
    compiled(x.to("neuron:1"))
    torch.neuron.synchronize(1)
    before = torch.neuron.memory_allocated(0)
    out = compiled(x.to("neuron:1"))
    assert out.device == torch.device("neuron", 1)
    # every intermediate buffer was on neuron:1 too
    assert torch.neuron.memory_allocated(0) == before
    assert torch.neuron.current_device() == 0
    assert_same(out, cpu(x), **GRAD_TOL)


def busy_stream(rounds=6):
    """A stream with long eager work queued (matmuls) and a (64, 256) result
    of it; the caller makes another stream wait on the returned event."""
    a = torch.randn(1024, 1024, device="neuron")
    torch.neuron.synchronize()
    s2 = torch.neuron.Stream()
    done = torch.neuron.Event()
    with torch.neuron.stream(s2):
        big = a
        for _ in range(rounds):
            big = big @ a / 32
        y = big[:64, :256] * 1.0
        done.record(s2)
    return y, done


def test_two_streams_with_events_and_no_added_sync(native):
    f = torch.compile(lambda x: (x * 2 + 1).relu().sum(-1))
    f(torch.randn(64, 256, device="neuron"))  # compile
    s1 = torch.neuron.Stream()
    y, done = busy_stream()
    with torch.neuron.stream(s1):
        s1.wait_event(done)
        t0 = time.perf_counter()
        out = f(y)  # compiled kernel queued behind s2's work
        returned_after = time.perf_counter() - t0
        pending = not s1.query()
        z = out + 1  # eager work after compiled work on s1
    s1.synchronize()
    if torch.neuron.is_launch_blocking():  # every launch waits for its task
        assert not pending
    else:
        assert pending, f"the compiled call waited for the device ({returned_after:.3f} s)"
    expected = (y.cpu() * 2 + 1).relu().sum(-1)
    assert_same(out, expected, **GRAD_TOL)
    assert_same(z, expected + 1, **GRAD_TOL)


def test_user_streams_and_events_inside_a_graph(native):
    # Dynamo traces stream contexts, events and torch.neuron.current_stream
    # into the graph (fullgraph); the kernels run on the streams the code names.
    def f(x, side, event):
        y = x.sin()
        event.record()
        with torch.neuron.stream(side):
            side.wait_event(event)
            z = y.cos() * 2
        torch.neuron.current_stream().wait_stream(side)  # as torch.cuda's: no graph break
        return z + y

    compiled = torch.compile(f, fullgraph=True)
    x = torch.randn(64, 256, device="neuron")
    out, (code,) = run_and_get_code(compiled, x, torch.neuron.Stream(), torch.neuron.Event())
    assert_same(out, x.cpu().sin().cos() * 2 + x.cpu().sin(), **GRAD_TOL)
    assert "streams.wait_event" in code and "with stream1:" in code
    # every kernel is launched inside the block of its stream, the cos on
    # the side stream
    lines = code.splitlines()

    def enclosing_block(i):
        indent = len(lines[i]) - len(lines[i].lstrip())
        return next(line.strip() for line in reversed(lines[:i])
                    if line.strip() and len(line) - len(line.lstrip()) < indent)

    launches = {line.strip(): enclosing_block(i) for i, line in enumerate(lines)
                if line.strip().startswith("neuron_launch(")}
    assert len(launches) == 3, launches
    assert set(launches.values()) == {"with default_stream:", "with stream1:"}, launches
    assert [b for k, b in launches.items() if "cpp_fused_cos" in k] == ["with stream1:"]


def test_cpu_scalar_inputs_are_read_at_launch(native):
    f = torch.compile(lambda x, scale: x * scale + 1)
    scale = torch.tensor(3.0)  # a 0-dim CPU tensor: Inductor reads it in the device kernel
    f(torch.ones(64, 256, device="neuron"), scale)
    s1 = torch.neuron.Stream()
    y, done = busy_stream()
    with torch.neuron.stream(s1):
        s1.wait_event(done)
        out = f(y, scale)
        scale.fill_(100.0)  # the host moves on while the kernel waits
    s1.synchronize()
    assert_same(out, y.cpu() * 3 + 1, **GRAD_TOL)


def test_compiled_optimizer_step(native):
    torch.manual_seed(6)
    cpu = nn.Linear(16, 4)
    dev = neuron_copy(cpu)
    opt_cpu = torch.optim.AdamW(cpu.parameters(), lr=1e-2)
    opt_dev = torch.optim.AdamW(dev.parameters(), lr=1e-2)  # step counts stay on the CPU
    step = torch.compile(opt_dev.step)
    for _ in range(3):
        x = torch.randn(8, 16)
        cpu(x).square().sum().backward()
        opt_cpu.step()
        opt_cpu.zero_grad()
        dev(x.to("neuron")).square().sum().backward()
        step()
        opt_dev.zero_grad()
    assert_same(dev.weight.detach(), cpu.weight.detach(), **GRAD_TOL)
    assert_same(dev.bias.detach(), cpu.bias.detach(), **GRAD_TOL)


def test_autocast_bfloat16(mlp, native):
    cpu, dev, _ = mlp
    x = torch.randn(8, 32)
    compiled = torch.compile(lambda m, x: m(x))
    with torch.autocast("neuron", dtype=torch.bfloat16):
        out = compiled(dev, x.to("neuron"))
        eager = dev(x.to("neuron"))
    # neuron autocasts with CUDA's op lists (log_softmax in float32), the CPU
    # with its own: the dtypes are eager neuron's, the values the CPU's
    # within bfloat16's precision.
    assert out.dtype == eager.dtype == torch.float32
    assert_same(out.detach(), cpu(x).detach(), rtol=3e-2, atol=3e-2)
    with torch.autocast("neuron", dtype=torch.bfloat16):
        mm = torch.compile(lambda a, b: a @ b + 1)(x.to("neuron"), x.to("neuron").T)
    assert mm.dtype == torch.bfloat16


def test_graph_breaks_and_compiler_disable(native):
    counters.clear()
    eager_calls = []

    @torch.compiler.disable
    def eager_part(x):
        eager_calls.append(torch.compiler.is_compiling())
        return x * 3

    def f(x):
        y = x.sin() + 1
        torch._dynamo.graph_break()
        z = eager_part(y)
        return z.cos() * 2

    x = torch.randn(32, 8)
    out = torch.compile(f)(x.to("neuron"))
    assert_same(out, ((x.sin() + 1) * 3).cos() * 2, **GRAD_TOL)
    assert eager_calls == [False]
    assert counters["stats"]["unique_graphs"] == 2


def test_recompiles_on_new_shape_and_dtype(native):
    counters.clear()
    f = torch.compile(lambda x: x.exp() - x * x, dynamic=False)
    for shape, dtype in (((4, 4), torch.float32), ((4, 4), torch.float32),
                         ((6, 3), torch.float32), ((4, 4), torch.float64)):
        x = torch.randn(shape, dtype=dtype)
        assert_same(f(x.to("neuron")), x.exp() - x * x)
    assert counters["stats"]["unique_graphs"] == 3
    # automatic dynamic shapes: the second size recompiles once, dynamically
    counters.clear()
    g = torch.compile(lambda x: x.exp() - x * x)
    for n in (4, 6, 9, 13):
        x = torch.randn(n, 3)
        assert_same(g(x.to("neuron")), x.exp() - x * x)
    assert counters["stats"]["unique_graphs"] == 2


def test_backend_neuron_and_modes(native):
    torch.manual_seed(5)
    cpu = MLP()
    x = torch.randn(4, 32)
    ref = cpu(x)
    dev = neuron_copy(cpu)
    assert_same(torch.compile(dev, backend="neuron")(x.to("neuron")), ref, **GRAD_TOL)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the default mode warns about nothing
        assert_same(torch.compile(neuron_copy(cpu), backend="neuron", mode="default")(
            x.to("neuron")), ref, **GRAD_TOL)
    with pytest.warns(UserWarning, match="CUDA-graph capture"):
        out = torch.compile(neuron_copy(cpu), mode="max-autotune")(x.to("neuron"))
    assert_same(out, ref, **GRAD_TOL)
    for backend in ("neuron", "inductor"):
        with pytest.warns(UserWarning, match="mode='reduce-overhead'.*not implemented"):
            out = torch.compile(neuron_copy(cpu), backend=backend,
                                mode="reduce-overhead")(x.to("neuron"))
        assert_same(out, ref, **GRAD_TOL)
    with pytest.raises(RuntimeError, match="Unrecognized mode"):
        torch.compile(neuron_copy(cpu), backend="neuron", mode="fastest")(x.to("neuron"))


def test_error_in_generated_kernel_is_a_stream_error():
    f = torch.compile(lambda x, i: x[i] * 2)
    x = torch.randn(100, 64, device="neuron")
    good = torch.randint(0, 100, (4096,), device="neuron")
    assert_same(f(x, good), x.cpu()[good.cpu()] * 2)
    bad = good.clone()
    bad[1234] = 100  # one past the end
    blocking = torch.neuron.is_launch_blocking()
    if blocking:  # TORCHNEURON_LAUNCH_BLOCKING=1: the launch reports it
        with pytest.raises(RuntimeError, match=r"cpp_fused\w*: index out of bounds"):
            f(x, bad)
    else:
        f(x, bad)  # queued: the error comes at the next synchronisation
        with pytest.raises(RuntimeError, match=r"cpp_fused\w*: index out of bounds"):
            torch.neuron.synchronize()
    # the stream and the process keep working
    assert_same(f(x, good), x.cpu()[good.cpu()] * 2)
    # a C++ exception from generated code (integer division by zero) too
    g = torch.compile(lambda a, b: a // b + 1)
    a = torch.arange(1, 65, device="neuron")
    b = torch.ones(64, dtype=torch.long, device="neuron")
    b[7] = 0
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        g(a, b).cpu()
    b[7] = 2
    assert_same(g(a, b), a.cpu() // b.cpu() + 1)


def test_out_of_bounds_direct_index_never_leaves_the_buffer():
    """Inductor rewrites `x[torch.arange(4) * k] = v` into a store at `k*x0`
    (a direct index: no variable to clamp).  A bad k is an error at the next
    synchronisation, and the store never lands outside x: here x is the
    first 8 elements of a larger block, whose other elements must stay 0."""
    def put(x, v, k):
        x[torch.arange(4, device=x.device) * k] = v
        return x

    f = torch.compile(put, dynamic=True)
    block = torch.zeros(4096, device="neuron")
    v = torch.ones(4, device="neuron")
    assert_same(f(block[:8], v, 2), torch.tensor([1.0, 0, 1, 0, 1, 0, 1, 0]))
    block.zero_()
    with pytest.raises(RuntimeError, match=r"cpp_fused\w*: index out of bounds"):
        f(block[:8], v, 1000)  # elements 1000, 2000, 3000 of block without the guard
        torch.neuron.synchronize()
    assert int(torch.count_nonzero(block[8:]).cpu()) == 0
    assert_same(f(block[:8], v, 1), torch.tensor([1.0, 1, 1, 1, 0, 0, 0, 0]))


def test_memory_stats_move(mlp):
    _, dev, compiled = mlp
    x = torch.randn(64, 32, device="neuron")
    with torch.no_grad():
        compiled(x)
        torch.neuron.synchronize()
        torch.neuron.reset_peak_memory_stats()
        stats = torch.neuron.memory_stats()
        out = compiled(x)
        after = torch.neuron.memory_stats()
    assert after["allocation.all.allocated"] > stats["allocation.all.allocated"]
    assert after["allocated_bytes.all.current"] >= stats["allocated_bytes.all.current"] + out.nbytes
    assert torch.neuron.max_memory_allocated() >= stats["allocated_bytes.all.current"] + out.nbytes


def test_profiler_shows_compiled_kernels(mlp):
    _, _, compiled = mlp
    x = torch.randn(64, 32, device="neuron")
    with torch.no_grad():
        compiled(x)
        torch.neuron.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
            compiled(x)
            torch.neuron.synchronize()
    names = {e.name for e in prof.events()
             if e.device_type == torch.autograd.DeviceType.PrivateUse1}
    assert any(re.search(r"cpp_fused_\w+", n) for n in names), names


def hand_written_kernel(name, arg_types, body):
    """A launch handle for a kernel written here, wrapped as generated ones are."""
    from torch._inductor.codecache import CppCodeCache

    from torch_neuronx._inductor.runtime import launch_handle
    from torch_neuronx._inductor.trampoline import arg_kinds, wrap_source

    params = ", ".join(f"{t} a{i}" for i, t in enumerate(arg_types))
    src = ("#include <torch/csrc/inductor/cpp_prefix.h>\n"
           f'extern "C" void kernel({params}) {{ {body} }}\n')
    lib = CppCodeCache.load(wrap_source(src, arg_types))
    return launch_handle(lib, name, arg_kinds(arg_types))


def test_openmp_regions_are_compute_pool_teams():
    """A kernel's OpenMP constructs (parallel, for, single, barrier, the
    thread number and count) run on the compute pool's threads: every
    iteration once, each `single` once, barriers hold, per-thread buffers
    combine, and the team is the pool's size (torch_neuronx/_inductor/
    omp_team.py)."""
    threads = torch_neuronx._C._compute_threads()
    kernel = hand_written_kernel(
        "test_team", ["int64_t*", "const int64_t"],
        """
        int64_t* out = a0;  // [size, singles, total, items[n]], then per-thread partials
        #pragma omp parallel num_threads(4)
        {
            int tid = omp_get_thread_num();
            int64_t local = 0;
            #pragma omp single
            { out[0] = omp_get_num_threads(); }
            #pragma omp for
            for (int64_t i = 0; i < a1; ++i) { out[3 + i] += 2 * i + 1; local += i; }
            out[3 + a1 + tid] = local;
            #pragma omp barrier
            #pragma omp single
            {
                for (int t = 0; t < omp_get_num_threads(); ++t) out[2] += out[3 + a1 + t];
            }
            #pragma omp single nowait
            { __atomic_fetch_add(&out[1], 1, __ATOMIC_RELAXED); }
            #pragma omp single
            { __atomic_fetch_add(&out[1], 1, __ATOMIC_RELAXED); }
        }
        """)
    n = 20007  # 160 KiB of int64: past the size below which a launch runs alone
    sizes = []
    for _ in range(30):
        out = torch.zeros(3 + n + 4, dtype=torch.int64, device="neuron")
        torch_neuronx._C._neuron_launch(kernel, 0, out, n)
        got = out.cpu()
        size = int(got[0])
        sizes.append(size)
        assert 1 <= size <= min(4, threads)
        assert int(got[1]) == 2  # each single ran once
        assert int(got[2]) == n * (n - 1) // 2
        assert torch.equal(got[3:3 + n], 2 * torch.arange(n) + 1)
    if threads > 1:  # the pool's helper joins (it may miss a few)
        assert max(sizes) == min(4, threads), sizes
    # Below 128 KiB (the largest tensor of the launch) the regions run on the
    # executing thread alone: a team's waits cost more than such work
    # (compiled.cpp, kTeamMinBytes); the constructs still hold.
    n = 2000
    for _ in range(10):
        out = torch.zeros(3 + n + 4, dtype=torch.int64, device="neuron")
        torch_neuronx._C._neuron_launch(kernel, 0, out, n)
        got = out.cpu()
        assert int(got[0]) == 1 and int(got[1]) == 2 and int(got[2]) == n * (n - 1) // 2
        assert torch.equal(got[3:3 + n], 2 * torch.arange(n) + 1)


def test_compiled_kernels_do_not_use_libgomp():
    """The generated kernel libraries bind no OpenMP runtime symbol: their
    regions cannot start a thread team beside the compute pool."""
    import shutil
    import subprocess

    from torch._inductor.codecache import CppCodeCache

    def f(x):
        return (x - x.amax(-1, keepdim=True)).exp().sum(-1)

    x = torch.randn(256, 512)
    assert_same(torch.compile(f)(x.to("neuron")), f(x), rtol=1e-5, atol=1e-5)
    nm = shutil.which("nm")
    assert nm is not None, "binutils (nm) comes with the C compiler Inductor needs"
    team_libs = 0
    for load in CppCodeCache.cache.values():
        lib = load()
        if not hasattr(lib, "neuron_bind_team"):
            continue
        team_libs += 1
        undefined = subprocess.run([nm, "-D", "--undefined-only", lib._name], check=True,
                                   capture_output=True, text=True).stdout
        assert not re.search(r"\b(GOMP_|omp_)", undefined), (lib._name, undefined)
    assert team_libs > 0


def test_launch_protocol_and_bad_launches():
    launch = torch_neuronx._C._neuron_launch
    axpy = hand_written_kernel(
        "test_axpy", ["const float*", "float*", "const int64_t", "const float"],
        "for (int64_t i = 0; i < a2; ++i) a1[i] = a3 * a0[i] + a1[i];")
    x = torch.arange(8.0, device="neuron")
    out = torch.ones(8, device="neuron")
    launch(axpy, 0, x, out, 8, 0.5)
    assert_same(out, 0.5 * torch.arange(8.0) + 1)
    with pytest.raises(TypeError, match="test_axpy takes 4 arguments, got 3"):
        launch(axpy, 0, x, out, 8)
    with pytest.raises(TypeError, match="argument 1 must be Float, got Long"):
        launch(axpy, 0, x, out.long(), 8, 0.5)
    with pytest.raises(ValueError, match="argument 0 must be on neuron:0, got cpu"):
        launch(axpy, 0, x.cpu(), out, 8, 0.5)
    with pytest.raises(ValueError, match="must be on neuron:1"):
        launch(axpy, 1, x, out, 8, 0.5)
    with pytest.raises(TypeError, match="argument 0 must be a tensor"):
        launch(axpy, 0, 3, out, 8, 0.5)
    # a 0-dim CPU tensor is accepted as an input the kernel reads, never written
    store = hand_written_kernel("test_store", ["const float*", "float*"], "a1[0] = a0[0];")
    one = torch.zeros(1, device="neuron")
    launch(store, 0, torch.tensor(7.0), one)
    assert one.item() == 7.0
    with pytest.raises(ValueError, match="argument 1 must be on neuron:0, got cpu"):
        launch(store, 0, torch.tensor(7.0), torch.tensor(0.0))
    with pytest.raises(ValueError, match="argument 0 must be on neuron:0, got cpu"):
        launch(store, 0, torch.ones(1), one)  # 1-dim
    with pytest.raises(TypeError, match="argument 2 must be an int"):
        launch(axpy, 0, x, out, 8.0, 0.5)
    with pytest.raises(TypeError, match="argument 3 must be a float"):
        launch(axpy, 0, x, out, 8, "0.5")
    with pytest.raises(OverflowError):
        launch(axpy, 0, x, out, 2**70, 0.5)
    with pytest.raises(TypeError, match="compiled kernel handle"):
        launch(object(), 0, x, out, 8, 0.5)
    with pytest.raises(RuntimeError, match="Invalid device index"):
        launch(axpy, 5, x, out, 8, 0.5)
    assert_same(out, 0.5 * torch.arange(8.0) + 1)  # no bad call ran
    # more arguments than the task's inline slots: a heap block
    n = 40
    total = hand_written_kernel(
        "test_many", ["int64_t*"] + ["const int64_t"] * n,
        " ".join(f"a0[0] += a{i};" for i in range(1, n + 1)))
    acc = torch.zeros(1, dtype=torch.long, device="neuron")
    launch(total, 0, acc, *range(n))
    assert acc.item() == sum(range(n))
    # a kernel that throws fails its task, not the process
    throws = hand_written_kernel("test_throws", ["float*"], "throw 42;")
    with pytest.raises(RuntimeError, match="test_throws: .*not a std::exception"):
        launch(throws, 0, out)  # raises here with TORCHNEURON_LAUNCH_BLOCKING=1
        torch.neuron.synchronize()
    # the allocator fast path
    empty = torch_neuronx._C._empty_strided_neuron((2, 3), (1, 2), torch.float16, 1)
    assert empty.device == torch.device("neuron", 1) and empty.stride() == (1, 2)
    assert empty.dtype == torch.float16
    with pytest.raises(RuntimeError):
        torch_neuronx._C._empty_strided_neuron((2, -3), (3, 1), torch.float32, 0)
    with pytest.raises(TypeError):
        torch_neuronx._C._empty_strided_neuron((2, 3), (3, 1), "float", 0)


def test_unknown_openmp_constructs_keep_libgomp():
    """Only the constructs omp_team.py implements get its definitions; any
    other keeps the kernel on libgomp rather than on a partial emulation."""
    from torch_neuronx._inductor.omp_team import supports

    assert supports("#pragma omp parallel num_threads(2)\n  #pragma omp for collapse(2)\n"
                    "#pragma omp for simd simdlen(16)\n#pragma omp single\n#pragma omp barrier\n"
                    "#pragma omp for schedule(static, 1) nowait\n#pragma omp simd simdlen(8)\n")
    for construct in ("for schedule(dynamic)", "critical", "atomic", "task", "parallel for",
                      "for reduction(+:x)", "single copyprivate(x)"):
        assert not supports(f"#pragma omp parallel\n#pragma omp {construct}\n"), construct
