"""Inductor's Python wrapper (the generated ``call()``) for neuron graphs.

The upstream ``PythonWrapperCodegen`` is reused whole; these methods change:

- ``create``: the base returns a plain ``PythonWrapperCodegen``
  (torch/_inductor/codegen/wrapper.py:1369), which would drop the rest.
- ``_generate_kernel_call_helper``: the base raises ``device neuron nyi``
  for a non-Triton kernel on any device but cpu/mps/cuda/xpu
  (wrapper.py:3500).  Here a kernel call becomes
  ``neuron_launch(kernel, device_index, *args)``: a task on the device's
  current stream, in order with eager work, with no synchronisation
  (torch_neuronx/csrc/compiled.cpp).
- ``make_allocation``: the fast allocators exist only for cpu/cuda/xpu/mtia;
  other devices get ``empty_strided(..., device='neuron')`` without an index
  (wrapper.py:3791), which allocates on the *current* device, so a graph on
  neuron:1 put its buffers on neuron:0 (Inductor emits no device guard for a
  non-GPU device, ``device_need_guard``).  Here:
  ``empty_strided_neuron(size, stride, dtype, index)``, a C function.
- ``write_header``: imports those, and warns at load time when the graph was
  compiled for CUDA graphs (``triton.cudagraphs``), which neuron lacks; the
  warning is in the generated module, so a warm cache hit warns too.
"""
from __future__ import annotations

from torch._inductor import config
from torch._inductor.codegen.wrapper import PythonWrapperCodegen, SubgraphPythonWrapperCodegen
from torch._inductor.virtualized import V


class _NeuronWrapperMixin:
    def write_header(self) -> None:
        super().write_header()  # type: ignore[misc]
        self.imports.splice(  # type: ignore[attr-defined]
            """
            from torch_neuronx._C import _neuron_launch as neuron_launch
            from torch_neuronx._C import _empty_strided_neuron as empty_strided_neuron
            from torch_neuronx._inductor.runtime import load_kernel as neuron_load_kernel
            """,
            strip=True,
        )
        if config.triton.cudagraphs:
            self.imports.splice(  # type: ignore[attr-defined]
                """
                from torch_neuronx._inductor.runtime import warn_no_cudagraphs
                warn_no_cudagraphs()
                """,
                strip=True,
            )

    def _generate_kernel_call_helper(self, kernel_name, call_args, *, device=None,
                                     triton=True, **kwargs):
        device = device or V.graph.get_current_device_or_throw()
        if device.type != "neuron" or triton:
            return super()._generate_kernel_call_helper(  # type: ignore[misc]
                kernel_name, call_args, device=device, triton=triton, **kwargs)
        args = "".join(f", {a}" for a in call_args)
        self.writeline(f"neuron_launch({kernel_name}, {device.index}{args})")  # type: ignore[attr-defined]

    def make_allocation(self, name, device, dtype, shape, stride, allocation_shape=None,
                        is_pinned=False):
        if device.type != "neuron" or config.test_configs.track_memory_lifecycle:
            return super().make_allocation(  # type: ignore[misc]
                name, device, dtype, shape, stride, allocation_shape, is_pinned)
        if allocation_shape is None:
            allocation_shape = shape
        codegen_shape = self.codegen_python_shape_tuple(shape)  # type: ignore[attr-defined]
        codegen_allocation_shape = self.codegen_python_shape_tuple(allocation_shape)  # type: ignore[attr-defined]
        codegen_stride = self.codegen_python_shape_tuple(stride)  # type: ignore[attr-defined]
        out = (f"{name} = empty_strided_neuron({codegen_allocation_shape}, {codegen_stride}, "
               f"{dtype}, {device.index})")
        if codegen_shape != codegen_allocation_shape:
            # as upstream: the allocation is larger than the view
            out += f".as_strided({codegen_shape}, {codegen_stride})"
        return out


class NeuronSubgraphWrapperCodegen(_NeuronWrapperMixin, SubgraphPythonWrapperCodegen):
    """Subgraphs (control flow, graph partitions) launch kernels the same way."""


class NeuronWrapperCodegen(_NeuronWrapperMixin, PythonWrapperCodegen):
    @staticmethod
    def create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures=None):
        if is_subgraph:
            assert subgraph_name is not None and parent_wrapper is not None
            return NeuronSubgraphWrapperCodegen(subgraph_name, parent_wrapper,
                                                partition_signatures)
        return NeuronWrapperCodegen()
