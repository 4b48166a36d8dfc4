"""What the generated wrapper module calls at run time.

``load_kernel`` runs when the wrapper module is loaded (compiled or from the
cache); the per-call entry points are C functions of torch_neuronx._C:
``_neuron_launch`` (queue a kernel on the current stream) and
``_empty_strided_neuron`` (allocate).
"""
from __future__ import annotations

import ctypes
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
    from torch._inductor.codecache import CppCodeCache, LambdaFuture

    from torch_neuronx._inductor.trampoline import arg_kinds

    kinds = arg_kinds(arg_types)

    def handle(lib: Any) -> Any:
        return launch_handle(lib, name, kinds)

    # CppCodeCache (ctypes, device type "cpu": full optimisation; another
    # device type would build at -O1, torch/_inductor/codecache.py:3738).
    if get_compile_threads() <= 1:
        return handle(CppCodeCache.load(source))
    get_result = CppCodeCache.load_async(source, submit_fn=async_compile.submit)
    return LambdaFuture(lambda: handle(get_result()))


def warn_no_cudagraphs() -> None:
    warnings.warn(
        "torch.compile on neuron: CUDA-graph capture (mode='reduce-overhead', also part of "
        "mode='max-autotune') is not implemented for the neuron device yet; the graph runs as "
        "an ordinary compiled graph, with the mode's other options applied.",
        UserWarning,
        stacklevel=2,
    )
