"""What the generated wrapper module calls at run time.

``load_kernel`` runs when the wrapper module is loaded (compiled or from the
cache); the per-call entry points are C functions of torch_neuronx._C:
``_neuron_launch`` (queue a kernel on the current stream) and
``_empty_strided_neuron`` (allocate).
"""
from __future__ import annotations

import ctypes
import functools
import warnings
from typing import Any

from torch_neuronx import _C


def launch_handle(lib: Any, name: str, kinds: list) -> Any:
    """The launch handle of a loaded kernel library (ctypes): its entry point,
    bound to the compute pool's teams when it has their functions."""
    entry = ctypes.cast(lib.neuron_entry, ctypes.c_void_p).value
    try:  # absent when the kernel keeps libgomp (omp_team.supports)
        bind = ctypes.cast(lib.neuron_bind_team, ctypes.c_void_p).value
    except AttributeError:
        bind = 0
    return _C._compiled_kernel(entry, name, kinds, bind)


def load_kernel(async_compile: Any, name: str, arg_types: list[str], source: str) -> Any:
    """Compiles (or finds in Inductor's cache) a kernel library and returns its
    launch handle, or a future of it when Inductor compiles in parallel
    (``async_compile.wait(globals())`` resolves it, as for its own kernels)."""
    from torch._inductor.async_compile import get_compile_threads
    from torch._inductor.codecache import LambdaFuture

    from torch_neuronx._inductor.trampoline import arg_kinds

    kinds = arg_kinds(arg_types)

    def handle(lib: Any) -> Any:
        return launch_handle(lib, name, kinds)

    # Device type "cpu": full optimisation (another device type would build
    # at -O1, torch/_inductor/codecache.py:3738).
    cache = kernel_code_cache()
    if get_compile_threads() <= 1:
        return handle(cache.load(source))
    get_result = cache.load_async(source, submit_fn=async_compile.submit)
    return LambdaFuture(lambda: handle(get_result()))


@functools.cache
def kernel_code_cache() -> Any:
    """Inductor's CppCodeCache (ctypes libraries), built the way Inductor builds
    its CPU kernels (CppPythonBindingsCodeCache, codecache.py:3887): with
    cpp_prefix.h precompiled (``_get_uncompiled_header``; CppCodeCache has
    none: the same kernel source and flags took 2.2 s in g++ without it,
    0.7-0.9 s with it) and that class's compile flags."""
    from torch._inductor.codecache import CppCodeCache, _get_cpp_prefix_header
    from torch._inductor.utils import clear_on_fresh_cache

    @clear_on_fresh_cache
    class NeuronKernelCodeCache(CppCodeCache):
        cache: dict[str, Any] = {}
        cache_clear = staticmethod(cache.clear)
        cpp_compile_command_flags = {"include_pytorch": False, "shared": True}

        @classmethod
        def _get_uncompiled_header(cls, device: str) -> str | None:
            return _get_cpp_prefix_header(device)

    return NeuronKernelCodeCache


def warn_no_cudagraphs() -> None:
    warnings.warn(
        "torch.compile on neuron: CUDA-graph capture (mode='reduce-overhead', also part of "
        "mode='max-autotune') is not implemented for the neuron device yet; the graph runs as "
        "an ordinary compiled graph, with the mode's other options applied.",
        UserWarning,
        stacklevel=2,
    )
