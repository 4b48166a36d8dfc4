"""Cache hints for the large buffers of torch.compile's kernels on neuron.

Two things a vector kernel over a buffer larger than the caches does badly
as Inductor writes it, and the eager kernels do not:

**Non-temporal stores.**  The eager kernels write a result of at least
NK_STREAM_STORE_BYTES (4 MiB, kernels/src/common/stream_store.h) with
non-temporal stores: a result that large leaves the private caches anyway,
and skipping the read-for-ownership of each output line saves a third of a
one-input, one-output pass's traffic.  Inductor's kernels always store with
``storeu``.  So a full-vector float32 store with unit stride into a graph
buffer of at least LARGE_BYTES (its size hint when dynamic) is emitted as
``neuron_cache::store(v, p)``: a streaming store when ``p`` is aligned to
the vector's width, ``storeu`` otherwise.  Tails, masked stores, other
dtypes, scatters and accumulating stores stay upstream's.  The bits stored
are the same; only the cache policy differs.

**The next row, prefetched.**  A row reduction over the innermost dim
(softmax, LayerNorm, RMSNorm, log_softmax written from primitives) runs per
row: a pass that reads the row from memory (max, mean), passes over the row
in L1 (exp and sum), a pass that writes.  The hardware prefetchers do not
cross a 4 KiB page, so each row's first pass starts with a cold stream and
the memory sits idle during the others: read, compute and write add up
instead of overlapping (softmax over 4096 x 1024 floats took 3.4 ms where
its memory traffic alone needs ~1.6 and its compute ~1).  So where the
tiled loop is the kernel's first reduction variable and the last one, each
vector load from a large graph buffer with unit stride along it, and a
constant stride along the row variable outside it, also prefetches the same
elements of the next row (``neuron_cache::prefetch``, the address computed
in integers: the last row's next row is past the buffer, and a prefetch
never faults).  Rows longer than PREFETCH_ROW_BYTES are left to the
hardware (their stream is long enough to train on).

Ordering of the stores: non-temporal stores are weakly ordered, so each
thread must fence its own before another reads the lines.  The compute-pool
team that runs the kernel's OpenMP regions (omp_team.py) issues ``sfence``
when a member finishes its share of a region and before a barrier; the
entry point does after the kernel returns (trampoline.py).  A kernel that
keeps libgomp (a construct omp_team does not implement) has no such hook,
so there ``neuron_cache::store`` is ``storeu`` (NEURON_TEAM_FENCES is
defined by omp_team's source only).
"""
from __future__ import annotations

import sympy
import torch
from torch._inductor.codegen.cpp_utils import cexpr_index
from torch._inductor.utils import IndentedBuffer
from torch._inductor.virtualized import V

# The eager kernels' NK_STREAM_STORE_BYTES: one policy for both paths.
LARGE_BYTES = 4 << 20
# A row whose next one is prefetched: at most this long (the L1 holds two).
PREFETCH_ROW_BYTES = 16 << 10

SOURCE = r"""
// torch_neuronx: cache hints for large buffers (torch_neuronx/_inductor/cache_hints.py).
#include <immintrin.h>
namespace neuron_cache {
inline void store(const at::vec::Vectorized<float>& v, float* p) {
#if defined(NEURON_TEAM_FENCES) && defined(CPU_CAPABILITY_AVX512)
  if ((reinterpret_cast<uintptr_t>(p) & 63) == 0) { _mm512_stream_ps(p, v); return; }
#elif defined(NEURON_TEAM_FENCES) && defined(CPU_CAPABILITY_AVX2)
  if ((reinterpret_cast<uintptr_t>(p) & 31) == 0) { _mm256_stream_ps(p, v); return; }
#endif
  v.store(p);
}
template <int N>
inline void store(const at::vec::VectorizedN<float, N>& v, float* p) {
  for (int i = 0; i < N; ++i) store(v[i], p + i * at::vec::Vectorized<float>::size());
}
// The cache lines of bytes [base + offset * sizeof(T), + Bytes), wherever they are.
template <int Bytes, typename T>
inline void prefetch(const T* base, int64_t offset) {
  const uintptr_t p = reinterpret_cast<uintptr_t>(base) + static_cast<uintptr_t>(offset) * sizeof(T);
  for (int i = 0; i < Bytes; i += 64) _mm_prefetch(reinterpret_cast<const char*>(p + i), _MM_HINT_T0);
}
}  // namespace neuron_cache
"""


def uses(src: str) -> bool:
    """Whether a kernel's source uses a hint (then it gets SOURCE)."""
    return "neuron_cache::" in src


def _large_graph_buffer(name: str) -> bool:
    try:
        numel, dtype = V.graph.get_numel(name), V.graph.get_dtype(name)
    except KeyError:  # not a graph buffer (a kernel's local buffer)
        return False
    numel = V.graph.sizevars.optimization_hint(numel, fallback=0)
    return numel * dtype.itemsize >= LARGE_BYTES


class CacheHints:
    """Mixin for the vector kernel (CppVecKernel's load/store lines)."""

    _neuron_stream_target: str | None = None
    _neuron_prefetched: set | None = None

    # ------------------------------------------------------------ prefetch
    def _neuron_next_row_stride(self, name: str, index: sympy.Expr) -> sympy.Expr | None:
        """The element distance to the same load in the next row, if this
        load should prefetch it."""
        depth, tiled, itervars = self.reduction_depth, self.tiling_idx, self.itervars  # type: ignore[attr-defined]
        if (self.tail_size is not None or not depth  # type: ignore[attr-defined]
                or not tiled == depth == len(itervars) - 1 or not _large_graph_buffer(name)):
            return None
        dtype = V.graph.get_dtype(name)
        # call_ranges: the graph's sizes (ranges name the kernel's size arguments, ks0, ...)
        row = V.graph.sizevars.optimization_hint(self.call_ranges[tiled], fallback=0)  # type: ignore[attr-defined]
        if not 0 < row * dtype.itemsize <= PREFETCH_ROW_BYTES:
            return None
        if self._try_get_const_stride(index, itervars[tiled]) != 1:  # type: ignore[attr-defined]
            return None
        outer = itervars[depth - 1]
        # affine in the row variable: a constant, or a size symbol (dynamic shapes)
        step = sympy.expand(index.subs(outer, outer + 1) - index)
        if step == 0 or step.free_symbols & set(itervars):
            return None
        return step

    def load(self, name, index):
        value = super().load(name, index)  # type: ignore[misc]
        index = self.rename_indexing(index)  # type: ignore[attr-defined]
        key = (name, index)
        if self._neuron_prefetched is None:
            self._neuron_prefetched = set()
        if key not in self._neuron_prefetched:
            self._neuron_prefetched.add(key)
            step = self._neuron_next_row_stride(name, index)
            if step is not None:
                nbytes = self.tiling_factor * V.graph.get_dtype(name).itemsize  # type: ignore[attr-defined]
                var = self.args.input(name)  # type: ignore[attr-defined]
                self.loads.writeline(  # type: ignore[attr-defined]
                    f"neuron_cache::prefetch<{nbytes}>({var}, {cexpr_index(index + step)});")
        return value

    # -------------------------------------------------- non-temporal stores
    def store(self, name, index, value, mode=None):
        previous = self._neuron_stream_target
        self._neuron_stream_target = name if mode is None and _large_graph_buffer(name) else None
        try:
            return super().store(name, index, value, mode)  # type: ignore[misc]
        finally:
            self._neuron_stream_target = previous

    def _get_store_line(self, value, var, index, dtype, accu_store=False):
        # Upstream writes "{value}.store({var} + {index});" for exactly these
        # (cpp.py:3008-3017); every other store is its own.
        if (self._neuron_stream_target is not None and not accu_store and dtype == torch.float32
                and self.tail_size is None  # type: ignore[attr-defined]
                and self._try_get_const_stride(index, self.itervars[self.tiling_idx]) == 1):  # type: ignore[attr-defined]
            code = IndentedBuffer()
            code.writeline(f"neuron_cache::store({value}, {var} + {cexpr_index(index)});")
            return code
        return super()._get_store_line(value, var, index, dtype, accu_store)  # type: ignore[misc]
