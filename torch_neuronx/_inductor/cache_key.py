"""What Inductor's caches must know about this backend's code generation.

The FX graph cache and the AOTAutograd cache key a compiled graph by its
graph, inputs and Inductor config, but not by the code of a registered
device backend: after a change to the wrapper or the kernel trampoline a
warm cache would hand back code the new backend no longer generates.  The
one hook the key has for a backend is ``device_custom_pass``: the
``custom_backend_passes`` of every registered device are hashed by their
``uuid()`` (``torch/_inductor/codecache.py:1542``, ``FxGraphHashDetails``;
``AOTAutogradCacheDetails`` inherits it).  The pass itself is never run
(``get_custom_backend_pass_for_device`` has no caller in torch 2.13).

The kernels' OpenMP thread count is baked into the generated C, and Inductor
keys it only for graphs with CPU tensors (``_may_generate_cpu_cpp_code``,
``codecache.py:1337``), so it is part of the key here too.  So is the vector
ISA the kernels are generated for (``cpu_vec_isa.pick_vec_isa()``, which
follows ATEN_CPU_CAPABILITY): the FX graph key does not hold it, and a graph
cached under AVX-512 and loaded under an AVX2 cap crashed in its kernels.
And so is a hash of the vector math pasted into the kernels (vec_math.py),
which lives in the kernel library's headers, not in this package's Python.
"""
from __future__ import annotations

from torch._inductor.custom_graph_pass import CustomGraphModulePass

# Bump on any change to what torch_neuronx/_inductor generates (wrapper lines,
# kernel prologue, trampoline, launch protocol).
CODEGEN_VERSION = "neuron-codegen-18"


def kernel_threads() -> int:
    """OpenMP threads of a compiled kernel: the compute pool's size, so a
    compiled kernel uses the cores an eager kernel would (not more)."""
    from torch_neuronx import _C

    return _C._compute_threads()


class NeuronCodegenKey(CustomGraphModulePass):
    """Never run; its uuid() is this backend's part of the cache key."""

    def __call__(self, gm):  # pragma: no cover - upstream never calls it
        return gm

    def uuid(self) -> str:
        from torch._inductor.cpu_vec_isa import pick_vec_isa

        from torch_neuronx._inductor import vec_math

        return (f"{CODEGEN_VERSION};threads={kernel_threads()};isa={pick_vec_isa()};"
                f"math={vec_math.digest()}")
