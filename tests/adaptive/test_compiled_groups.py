"""Adaptive eager's compiled groups (runtime/src/fusion_jit.c): a group whose
ops all have a vector expression runs as one generated loop, intermediates
in registers; its results are unfused execution's, bit for bit.

The tests build in sync mode into a fresh cache, so every group here is
compiled before it runs; the counters prove it (groups_compiled)."""

import math
import os
import subprocess
import sys

import pytest
import torch

import torch_neuronx
from torch_neuronx import _C
from torch_neuronx import adaptive

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import programs  # noqa: E402
from test_adaptive import FUSES, assert_same, run_modes  # noqa: E402

SYNC, DEFAULT = 2, -1
# the generated code needs a vector prelude (AVX2 or AVX-512); with
# TORCHNEURON_ISA=portable groups run their row loops only
COMPILES = FUSES and torch_neuronx.kernel_isa() != "portable"


@pytest.fixture
def compiled(tmp_path):
    adaptive._configure_compiled_groups(str(tmp_path))
    _C._set_fusion_jit_mode(SYNC)
    yield tmp_path
    _C._set_fusion_jit_mode(DEFAULT)
    adaptive._configure_compiled_groups()
    torch_neuronx.set_adaptive_eager(True)


def _i16(u):
    return u - 0x10000 if u >= 0x8000 else u


PAYLOAD_NANS = {torch.bfloat16: [_i16(u) for u in (0x7FC1, 0xFFE5, 0x7F81, 0xFF80 | 0x11)],
                torch.float16: [_i16(u) for u in (0x7E01, 0xFE55, 0x7C01, 0xFD00)]}


def inputs(*shapes, special=False, dtype=torch.float32):
    g = torch.Generator().manual_seed(7)
    out = []
    for shape in shapes:
        t = torch.randn(shape, generator=g) * 3
        if special:  # NaN, +-inf, +-0, subnormals, huge values, in place
            flat = t.view(-1)
            vals = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1e-40,
                                 -3e-39, 88.5, -104.0, 1e30, 0.0])
            vals[-1] = vals[0].neg()  # a NaN with its sign bit set
            flat[: vals.numel() * 37: 37] = vals[: flat[: vals.numel() * 37: 37].numel()]
        t = t.to(dtype)
        if special and dtype in PAYLOAD_NANS:  # NaNs with payloads, quiet and signalling
            bits = torch.tensor(PAYLOAD_NANS[dtype], dtype=torch.int16).view(dtype)
            t.view(-1)[5: 5 + 41 * bits.numel(): 41] = bits
        out.append(t.to("neuron"))
    return out


def gelu_primitives(x):
    k = math.sqrt(2 / math.pi)
    return [(x * 0.5) * ((((x * x) * x * 0.044715 + x) * k).tanh() + 1)]


def layernorm_primitives(x, w, b):
    mean = x.mean(-1, keepdim=True)
    xc = x - mean
    var = (xc * xc).mean(-1, keepdim=True)
    return [mean, var, xc / (var + 1e-5).sqrt() * w + b]


# (name, inputs, program): each program returns the values compared
CASES = [
    ("gelu_tail", lambda: inputs((1 << 16) + 7), gelu_primitives),
    ("chain", lambda: inputs(1 << 16), lambda x: [((x * 1.5 + 0.25).sigmoid() * x - 0.5).relu()]),
    ("chain_special", lambda: inputs(1 << 16, special=True),
     lambda x: [((x * 1.5 + 0.25).sigmoid() * x - 0.5).relu()]),
    ("transcendentals", lambda: inputs(40000, 40000),
     lambda x, y: [((x.exp() + y.log1p()) / (y.erf() - x.atan())).sin() * x.abs().sqrt()]),
    ("transcendentals_special", lambda: inputs(40000, 40000, special=True),
     lambda x, y: [((x.exp() + y.log1p()) / (y.erf() - x.atan())).sin() * x.sqrt()]),
    ("tensors_and_division", lambda: inputs(50001, 50001, 50001),
     lambda x, a, b: [(x * a + b) / (a * a + 1), x - b]),
    ("row_broadcast", lambda: inputs((300, 1), (300, 700)),
     lambda m, x: [((x - m) * (m + 2)).tanh() * x]),
    ("in_place", lambda: inputs(1 << 16, 1 << 16),
     lambda m, g: [m.mul_(0.9).add_(g, alpha=0.1).sigmoid_().mul_(g), m]),
    # a reduction sink after compiled members: it reduces a dead
    # intermediate kept in its tile scratch, or a stored value
    ("sink", lambda: inputs((64, 1023), special=True),
     lambda x: [((x * 1.5 - 0.25).sigmoid() * x).sum(-1)]),
    ("sink_layernorm", lambda: inputs((256, 1000), (1000,), (1000,)), layernorm_primitives),
    ("sink_stored", lambda: inputs((40, 2048), (40, 2048)),
     lambda x, y: [y.mul_(x).add_(1.5), y.amax(-1), x]),
]


F = torch.nn.functional
# every unary op with a vector body (kernels/src/elementwise/unary_simd.h, NK_UNARY_VEC_OPS)
UNARY = [torch.exp, torch.exp2, torch.expm1, torch.log, torch.log2, torch.log10, torch.log1p,
         torch.erf, torch.erfc, torch.sin, torch.cos, torch.atan, torch.sigmoid, F.silu, torch.tanh,
         F.gelu, lambda t: F.gelu(t, approximate="tanh"), torch.relu, F.logsigmoid, torch.abs,
         torch.neg, torch.sqrt, torch.rsqrt, torch.reciprocal]
# NaN meets NaN in the adds and multiplies (with both signs): their operand
# order is fixed (binary_vec_op.h), so the NaN returned is unfused execution's
CASES += [(f"unary_{i}", lambda: inputs(3 * 4096 + 5, 3 * 4096 + 5, special=True),
           lambda x, y, f=f: [(f(x) * x + y) * f(y) - f(x + y)]) for i, f in enumerate(UNARY)]



def half(dtype, shapes_special):
    shapes, special = shapes_special
    return lambda: inputs(*shapes, special=special, dtype=dtype)


# 16-bit members round after every op, in registers (jit_prelude.h): ties,
# NaNs of both signs (c10's bfloat16 NaN is 0x7FC0, float16 keeps the sign),
# subnormals, values that overflow float16
HALF_PROGRAMS = [
    ("chain", ((1 << 16) + 5,), True, lambda x: [((x * 1.5 + 0.25).sigmoid() * x - 0.5).relu()]),
    ("gelu", ((1 << 14) + 3,), True, gelu_primitives),
    ("tensors_and_division", (50001, 50001, 50001), True,
     lambda x, a, b: [(x * a + b) / (a * a + 1), x - b]),
    ("row_broadcast", ((300, 1), (300, 700)), False, lambda m, x: [((x - m) * (m + 2)).tanh() * x]),
    ("in_place", (1 << 16, 1 << 16), True,
     lambda m, g: [m.mul_(0.9).add_(g, alpha=0.1).sigmoid_().mul_(g), m]),
    ("addcmul_addcdiv", (40000, 40000, 40000), True,
     lambda a, b, c: [torch.addcmul(a, b, c, value=0.3).addcdiv(b, c.abs() + 1, value=-2.0) * a]),
    ("sink", ((64, 1000),), True, lambda x: [((x * 1.5 + 0.25).sigmoid() * x).sum(-1)]),
    ("unary", (3 * 4096 + 5, 3 * 4096 + 5), True,
     lambda x, y: [f(x) * y + f(y) for f in (torch.exp, torch.tanh, torch.sqrt, torch.neg, torch.abs, torch.sin)]),
]
for dt in (torch.bfloat16, torch.float16):
    CASES += [(f"{str(dt)[6:]}_{name}", half(dt, (shapes, special)), prog)
              for name, shapes, special, prog in HALF_PROGRAMS]


@pytest.mark.parametrize("name,make,program", CASES, ids=[c[0] for c in CASES])
def test_compiled_group_is_bitwise_unfused(compiled, name, make, program):
    def run():
        args = make()
        torch.neuron._sleep(30_000_000)  # a busy stream: the program queues behind it
        vals = program(*args)
        torch.neuron.synchronize()
        return [v.cpu() for v in vals]
    torch_neuronx.reset_adaptive_eager_stats()
    results, _ = run_modes(run)
    assert_same(results)
    stats = torch_neuronx.adaptive_eager_stats()
    if COMPILES:
        # built here, or earlier in this process (the same code is loaded once)
        assert stats["groups_compiled"] >= 1 and stats["group_build_failures"] == 0, stats


def test_groups_without_expressions_keep_row_loops(compiled):
    """float64 and a transposed operand are not compiled (float32 and
    16-bit dense rows only), and still fuse in row mode."""
    def run():
        x, y = inputs((512, 256), (256, 512))
        torch.neuron._sleep(30_000_000)
        d = x.double()
        out = [((d * 1.5 + 0.25).sigmoid() * d).relu(), ((x * 2 + y.t()).tanh() + 1) * x]
        torch.neuron.synchronize()
        return [v.cpu() for v in out]
    results, _ = run_modes(run)
    assert_same(results)
    torch_neuronx.reset_adaptive_eager_stats()
    run()
    stats = torch_neuronx.adaptive_eager_stats()
    if FUSES:
        assert stats["groups_in_rows"] >= 1 and stats["groups_compiled"] == 0, stats


@pytest.mark.parametrize("seed", range(0, 40, 2))
def test_random_programs_compiled(compiled, seed):
    inputs_, steps, side = programs.draw(seed)
    results, _ = run_modes(lambda: programs.run(inputs_, steps, side))
    assert_same(results)


CACHE_SCRIPT = """
import math, torch, torch_neuronx
x = torch.randn((1 << 16) + 3, device="neuron")
torch.neuron._sleep(30_000_000)
y = (x * 0.5) * ((((x * x) * x * 0.044715 + x) * math.sqrt(2 / math.pi)).tanh() + 1)
y.cpu()
s = torch_neuronx.adaptive_eager_stats()
print(s["groups_compiled"], s["group_builds"])
"""


def test_second_process_reuses_the_cache(tmp_path):
    env = dict(os.environ, TORCHNEURON_FUSION_CACHE=str(tmp_path), TORCHNEURON_FUSION_COMPILE="sync")
    runs = []
    for _ in range(2):
        r = subprocess.run([sys.executable, "-c", CACHE_SCRIPT], env=env, capture_output=True,
                           text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        runs.append([int(v) for v in r.stdout.split()])
    if COMPILES:
        assert runs[0] == [1, 1] and runs[1] == [1, 0], runs  # built once, then loaded
    off = subprocess.run([sys.executable, "-c", CACHE_SCRIPT], capture_output=True, text=True,
                         env=dict(env, TORCHNEURON_FUSION_COMPILE="0"), timeout=300)
    assert off.returncode == 0 and off.stdout.split() == ["0", "0"], off.stderr

