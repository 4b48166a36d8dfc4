"""Interleaved vectors for float32 pointwise kernels (AVX2).

Inductor's CPU code generation vectorises a loop by one SIMD vector per
iteration (``TilingSelect.select_tiling``, torch/_inductor/codegen/cpp.py:3934
in torch 2.13: the tiling factor is ``pick_vec_isa().nelements(dtype)``).
A pointwise kernel whose per-element chain is long is then bound by the
chain's latency, not by the core's throughput: the out-of-order window holds
fewer than two iterations.  Measured on Zen 3 (AVX2, one thread) with the
generated source of bench/compile.py's pointwise chain (sigmoid, where,
tanh, sqrt, rsqrt, exp, clamp over 2^20 floats), compiled with Inductor's own
command line: 4.34 ms as generated, 3.27 ms with two vectors' statements
interleaved per iteration, 2.60 ms with four; the same outputs.

So for neuron kernels a float32 pointwise loop is tiled by ``WIDEN`` vectors:
Inductor then computes in ``at::vec::VectorizedN<float, WIDEN>``, whose every
operation is WIDEN independent vector operations written one after another
(the same machinery its bfloat16 loops use, ``VectorizedN<float, 2>`` on
AVX2), and the device's vector math has ``VectorizedN`` overloads
(vec_math.py).  Each lane computes exactly what it computed before, so the
results keep their bits.

A float32 sum, max or min over such a loop is widened too: its accumulator
becomes WIDEN vectors, so the exp of a softmax's sum pass (a chain of ~30
dependent instructions per vector, feeding one accumulator) overlaps four
ways like a pointwise loop.  Max and min keep their bits (the order of a
max does not matter); a sum adds its elements in 4 * 8 lanes instead of 8,
one more fixed order of the kind the ISA already chooses (AVX-512 sums in
16 lanes), deterministic and independent of the thread count.  Measured on
Zen 3 (AVX2, 2 threads, compiled neuron, paired in one process): softmax
from primitives over 1024 x 1024 floats 0.666 -> 0.599 ms, RMSNorm over
128 x 1024 0.098 -> 0.093 ms; LayerNorm and logsumexp from primitives within
1% (memory and per-call costs dominate there).

Only loops that are plainly elementwise (or such reductions) are widened:
float32 values (and bool masks) only, contiguous or broadcast accesses, no
other reduction, no index
arithmetic, no masked sub-blocks, no random numbers or bounds checks, and a
tiled (inner) range of at least ``MIN_RANGE`` elements: 8 iterations of the
widened loop, so that its tail (up to 4 vectors, masked) stays a small part
of the loop; rows of a transformer's hidden size (256, 768, ...) qualify.
Only at AVX2, where it was measured; AVX-512's loops keep Inductor's factor
until someone measures them there.
"""
from __future__ import annotations

import contextlib

import torch
from torch._inductor import cpu_vec_isa
from torch._inductor.codegen import cpp as inductor_cpp
from torch._inductor.codegen.cpp_utils import _get_dtype_from_loopbodies, _get_loop_body
from torch._inductor.virtualized import V

WIDEN = 4
MIN_RANGE = 256

# LoopBody node targets that a widened loop must not contain (their
# vectorised forms carry index vectors, masks or state per vector).
_NOT_ELEMENTWISE = ("index_expr", "value_expr", "indirect_indexing", "scan", "sort", "bucketize",
                    "load_seed", "rand", "randn", "randint64", "check_bounds", "device_assert_async")
_ELEMENT_DTYPES = (torch.float32, torch.bool)
_REDUCTIONS = ("sum", "max", "min")


def _widenable_reduction(dtype, src_dtype, reduction_type) -> bool:
    """A float32 sum, max or min: its vector accumulator becomes WIDEN
    accumulators (``reduction_acc_type_vec`` follows the tiling factor) and
    ``vec_reduce_all<float, WIDEN>`` combines them at the end.  Argmax/argmin
    and Welford carry index or count vectors per accumulator, and a bool
    max/min accumulates in masks: those keep upstream's factor."""
    return dtype == src_dtype == torch.float32 and reduction_type in _REDUCTIONS


def _plainly_elementwise(fn_list, var_sizes_list) -> bool:
    bodies = _get_loop_body(fn_list)
    if any(dt not in _ELEMENT_DTYPES for dt in _get_dtype_from_loopbodies(bodies)):
        return False
    for body in bodies:
        for block in [body.root_block, *body.subblocks.values()]:
            for node in block.graph.nodes:
                target = node.target
                if node.op != "call_method":
                    continue
                if target in _NOT_ELEMENTWISE or target.startswith("masked_subblock"):
                    return False
                if target == "reduction" and not _widenable_reduction(*node.args[1:4]):
                    return False
    return True


def _widenable(factors, indices, stats, fn_list, var_sizes_list) -> bool:
    """Upstream's choice is one float32 vector along one contiguous loop
    variable, at AVX2, over at least MIN_RANGE elements of a plainly
    elementwise loop."""
    isa = cpu_vec_isa.pick_vec_isa()
    if (len(indices) != 1 or not isinstance(isa, cpu_vec_isa.VecAVX2)
            or factors[0] != isa.nelements(torch.float)
            or stats.non_contig_indexing_op_counter):
        return False
    loop = tuple(var_sizes_list[0][0]) + tuple(var_sizes_list[0][1])  # pointwise, then reduction vars
    index = indices[0] if indices[0] >= 0 else indices[0] + len(loop)
    return (0 <= index < len(loop)
            and V.graph.sizevars.optimization_hint(loop[index], fallback=0) >= MIN_RANGE
            and _plainly_elementwise(fn_list, var_sizes_list))


class NeuronTilingSelect(inductor_cpp.TilingSelect):
    def select_tiling(self, fn_list, var_sizes_list):
        factors, indices, stats = super().select_tiling(fn_list, var_sizes_list)
        if _widenable(factors, indices, stats, fn_list, var_sizes_list):
            factors = [factors[0] * WIDEN]
        return factors, indices, stats


@contextlib.contextmanager
def widened_pointwise_tiling():
    """CppKernelProxy.codegen_functions builds its TilingSelect by the module
    global's name (cpp.py:4519); for a neuron kernel that name is ours."""
    upstream = inductor_cpp.TilingSelect
    inductor_cpp.TilingSelect = NeuronTilingSelect
    try:
        yield
    finally:
        inductor_cpp.TilingSelect = upstream
