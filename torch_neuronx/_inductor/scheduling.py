"""Kernel code generation for neuron: Inductor's C++ (CppScheduling) codegen.

Device memory is host addressable, so the CPU backend's kernels (raw
pointers in, OpenMP loops) run on neuron tensors unchanged.  What differs:

- the OpenMP thread count is set for neuron kernels only (the compute
  pool's size, ``cache_key.kernel_threads``), so it does not depend on
  ``torch.get_num_threads()`` and is part of the cache key.
"""
from __future__ import annotations

import functools

from torch._inductor import config
from torch._inductor.codegen.cpp import CppScheduling

from torch_neuronx._inductor.cache_key import kernel_threads


def _with_threads(method):
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        with config.patch({"cpp.threads": kernel_threads()}):
            return method(self, *args, **kwargs)

    return wrapper


class NeuronScheduling(CppScheduling):
    # Every entry point that reads config.cpp.threads (KernelGroup,
    # CppKernel.codegen_loops, WorkSharing) runs under the patch.
    __init__ = _with_threads(CppScheduling.__init__)
    codegen_node = _with_threads(CppScheduling.codegen_node)
    codegen_template = _with_threads(CppScheduling.codegen_template)
    flush = _with_threads(CppScheduling.flush)
    reset_kernel_group = _with_threads(CppScheduling.reset_kernel_group)
