"""Kernel code generation for neuron: Inductor's C++ codegen (CppScheduling).

Device memory is host addressable, so the CPU backend's kernels (raw
pointers in, OpenMP loops) run on neuron tensors unchanged.  What differs:

- ``define_kernel`` wraps each kernel for a stream launch (trampoline.py)
  and loads it through ``runtime.load_kernel`` instead of
  ``async_compile.cpp_pybinding``: the kernel becomes a runtime task, not a
  Python call;
- the kernel classes' checks do not throw inside OpenMP regions (kernels.py);
- the OpenMP thread count is set for neuron kernels only: the compute pool's
  size (``cache_key.kernel_threads``), so a compiled kernel uses the cores an
  eager kernel would, independent of ``torch.get_num_threads()``, and it is
  part of the cache key.
"""
from __future__ import annotations

import functools

from torch._inductor import config
from torch._inductor.codegen.cpp import CppScheduling
from torch._inductor.utils import IndentedBuffer, Placeholder, get_fused_kernel_name
from torch._inductor.virtualized import V

from torch_neuronx._inductor.cache_key import kernel_threads
from torch_neuronx._inductor.kernels import NeuronCppKernelProxy
from torch_neuronx._inductor.trampoline import wrap_source


def _with_threads(method):
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        with config.patch({"cpp.threads": kernel_threads()}):
            return method(self, *args, **kwargs)

    return wrapper


class NeuronScheduling(CppScheduling):
    kernel_proxy_cls = NeuronCppKernelProxy

    # Every entry point that reads config.cpp.threads (KernelGroup,
    # CppKernel.codegen_loops, WorkSharing) runs under the patch.
    __init__ = _with_threads(CppScheduling.__init__)
    codegen_node = _with_threads(CppScheduling.codegen_node)
    codegen_template = _with_threads(CppScheduling.codegen_template)
    flush = _with_threads(CppScheduling.flush)
    reset_kernel_group = _with_threads(CppScheduling.reset_kernel_group)

    def ready_to_flush(self) -> bool:
        # CppScheduling gathers consecutive nodes into one kernel and writes
        # its call at flush time.  Scheduler.codegen (torch/_inductor/
        # scheduler.py:9420-9528) flushes before an extern call only when
        # the extern has a device, and writes stream contexts per node; so in
        # a graph with user streams the kernel call landed outside its stream
        # context, and a device-less extern (streams.record_event) wrote the
        # `del` of the pending kernel's inputs before the kernel's call
        # (UnboundLocalError).  In such graphs each kernel is written at once.
        if self._emit_each_kernel_at_once():
            return True
        return super().ready_to_flush()

    def _emit_each_kernel_at_once(self) -> bool:
        cached = getattr(self, "_each_kernel_at_once", None)
        if cached is None:
            scheduler = self.scheduler
            cached = scheduler is not None and (
                scheduler._has_multi_stream_nodes()
                or any(node.is_extern() and node.get_device() is None
                       for node in scheduler.nodes))
            self._each_kernel_at_once = cached
        return cached

    def define_kernel(self, src_code, nodes, kernel_args=None):
        """CppScheduling.define_kernel (torch/_inductor/codegen/cpp.py:5658)
        without its cpp_wrapper branch, emitting
        ``name = neuron_load_kernel(async_compile, name, arg_types, source)``
        where upstream hard-codes ``async_compile.cpp_pybinding(...)``."""
        wrapper = V.graph.wrapper_code
        if src_code in wrapper.src_to_kernel:
            return wrapper.src_to_kernel[src_code]
        fused_name = (
            get_fused_kernel_name(nodes, config.cpp.descriptive_names)
            if config.cpp.descriptive_names
            else ""
        )
        kernel_name = "_".join(["cpp", fused_name, wrapper.next_kernel_suffix()])
        wrapper.src_to_kernel[src_code] = kernel_name
        src_code = src_code.replace(str(Placeholder.KERNEL_NAME), "kernel")
        src_code = src_code.replace(str(Placeholder.DESCRIPTIVE_NAME), kernel_name)
        src_code = src_code.replace("#pragma CMT", "//")
        args = self.kernel_group.args if kernel_args is None else kernel_args
        _, _, arg_types = args.cpp_argdefs()
        code = IndentedBuffer()
        code.writeline(
            f"neuron_load_kernel(async_compile, {kernel_name!r}, {arg_types!r}, r'''")
        code.splice(wrap_source(src_code, arg_types), strip=True)
        code.writeline("''')")
        wrapper.define_kernel(kernel_name, code.getvalue(), gpu=False)
        return kernel_name
