"""The C++ a neuron kernel library adds around Inductor's kernel.

Inductor's C++ kernel is ``extern "C" void kernel(<typed args>)``.  A neuron
launch is a runtime task whose executor (torch_neuronx/csrc/compiled.cpp)
knows one signature only, so the library also exports

    extern "C" void neuron_entry(const uint64_t* slots)

which unpacks 8-byte slots (a pointer, an int64, or the bits of a double) into
the kernel's arguments, and (omp_team.py) ``neuron_bind_team``, through
which its OpenMP regions reach the compute pool.  The library links nothing
of torch_neuronx: the runtime exists once in the process, in torch_neuronx._C.

Checks in the kernel (kernels.py) call ``neuron_task::check`` /
``index_guard`` instead of throwing inside OpenMP regions; the first failure
is kept in this library's ``neuron_task`` state and ``neuron_entry`` throws it
once the kernel has returned, where the executor catches it.  One launch of a
library runs at a time (``neuron_entry``'s mutex): that state, and Inductor's
own per-library flag for integer division by zero
(``inductor_cpu_integer_div_error_flag``, torch/csrc/inductor/cpp_prefix.h),
would otherwise be shared by two streams running the same kernel.
"""
from __future__ import annotations

import torch
from torch._inductor.codegen.cpp_utils import DTYPE_TO_CPP

from torch_neuronx import _C
from torch_neuronx._inductor import cache_hints, omp_team, vec_math

# The kernels' C++ element types -> dtypes (the launch checks each tensor).
_CPP_TO_DTYPE = {cpp: dtype for dtype, cpp in DTYPE_TO_CPP.items()}

PROLOGUE = r"""
// torch_neuronx: runs as a task on a neuron stream (torch_neuronx/_inductor/trampoline.py).
#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <immintrin.h>
#include <stdexcept>
namespace neuron_task {
// The first failed check of the running launch (one launch at a time: neuron_entry).
static std::atomic<int> failed{0};
static char message[512];
[[maybe_unused]] static void fail(const char* msg) noexcept {
  int expected = 0;
  if (failed.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
    std::strncpy(message, msg, sizeof message - 1);
    message[sizeof message - 1] = '\0';
  }
}
// check(cond, msg): records a failure; never throws (it runs inside OpenMP regions).
struct Check {
  void operator()(bool ok, const char* msg) const noexcept {
    if (C10_UNLIKELY(!ok)) fail(msg);
  }
};
[[maybe_unused]] static constexpr Check check{};
// index_guard(var)(cond, msg): as check, and a failed index becomes 0, so the
// access it feeds stays inside the buffer.
template <typename T>
struct IndexGuard {
  T& var;
  void operator()(bool ok, const char* msg) const noexcept {
    if (C10_UNLIKELY(!ok)) {
      fail(msg);
      var = T(0);
    }
  }
};
template <typename T>
IndexGuard<T> index_guard(T& var) { return IndexGuard<T>{var}; }
static inline double as_double(uint64_t bits) {
  double v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}
}  // namespace neuron_task
"""

_INCLUDE = "#include <torch/csrc/inductor/cpp_prefix.h>"


def _slot(i: int, arg_type: str) -> tuple[str, tuple[torch.dtype, bool] | int]:
    """(C++ expression for argument i, its kind for the launch check)."""
    t = arg_type.strip()
    if t.endswith("*"):
        element = t[:-1].strip()
        if element.startswith("const "):
            element = element[len("const "):].strip()
        dtype = _CPP_TO_DTYPE.get(element)
        if dtype is None:
            raise NotImplementedError(f"neuron: kernel argument of C++ type {arg_type!r}")
        writable = not t.startswith("const ")
        return f"reinterpret_cast<{t}>(static_cast<uintptr_t>(a[{i}]))", (dtype, writable)
    if t in ("const int64_t", "int64_t"):
        return f"static_cast<int64_t>(a[{i}])", _C._compiled_slot_int
    if t in ("const float", "float", "const double", "double"):
        return f"neuron_task::as_double(a[{i}])", _C._compiled_slot_float
    raise NotImplementedError(f"neuron: kernel argument of C++ type {arg_type!r}")


def arg_kinds(arg_types: list[str]) -> list[tuple[torch.dtype, bool] | int]:
    """Per argument: (the tensor's dtype, whether the kernel writes it), or
    the int/float slot markers of _C."""
    return [_slot(i, t)[1] for i, t in enumerate(arg_types)]


def wrap_source(src: str, arg_types: list[str]) -> str:
    """Inductor's kernel source with the prologue, the OpenMP team functions
    where the kernel's constructs allow (omp_team.py), the vector math where
    it calls it (vec_math.py), and the entry point."""
    if _INCLUDE not in src:
        raise AssertionError("neuron: unexpected kernel source (no cpp_prefix.h include)")
    prologue = PROLOGUE + (omp_team.SOURCE if omp_team.supports(src) else "")
    if vec_math.uses(src):
        prologue += vec_math.source() + "\n"
    if cache_hints.uses(src):
        prologue += cache_hints.SOURCE
    src = src.replace(_INCLUDE, _INCLUDE + "\n" + prologue, 1)
    args = ",\n         ".join(_slot(i, t)[0] for i, t in enumerate(arg_types))
    entry = f"""
extern "C" __attribute__((visibility("default"))) void neuron_entry(const uint64_t* a) {{
  static std::mutex lock;
  std::lock_guard<std::mutex> hold(lock);
  neuron_task::failed.store(0, std::memory_order_relaxed);
  kernel({args});
  _mm_sfence();  // the calling thread's non-temporal stores (cache_hints.py)
  if (neuron_task::failed.load(std::memory_order_acquire)) {{
    throw std::runtime_error(neuron_task::message);
  }}
}}
"""
    return src.rstrip() + "\n" + entry
