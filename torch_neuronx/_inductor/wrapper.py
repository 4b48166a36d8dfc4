"""Inductor's Python wrapper (the generated ``call()``) for neuron graphs.

The upstream ``PythonWrapperCodegen`` is reused whole; three methods change:

- ``create``: the base returns a plain ``PythonWrapperCodegen``
  (torch/_inductor/codegen/wrapper.py:1369), which would drop the rest.
- ``_generate_kernel_call_helper``: the base raises ``device neuron nyi``
  for a non-Triton kernel on any device but cpu/mps/cuda/xpu (wrapper.py:3500).
- ``make_allocation``: the fast allocators exist only for cpu/cuda/xpu/mtia;
  other devices get ``empty_strided(..., device='neuron')`` without an index
  (wrapper.py:3791), which allocates on the *current* device: a graph on
  neuron:1 put its buffers on neuron:0.  Inductor emits no device guard for
  a non-GPU device (``device_need_guard``), so the index must be explicit.
"""
from __future__ import annotations

from torch._inductor.codegen.wrapper import PythonWrapperCodegen, SubgraphPythonWrapperCodegen
from torch._inductor.virtualized import V


class _NeuronWrapperMixin:
    def write_header(self) -> None:
        super().write_header()  # type: ignore[misc]
        self.imports.splice(  # type: ignore[attr-defined]
            "from torch_neuronx._inductor.runtime import sync_stream as neuron_sync",
            strip=True,
        )

    def _generate_kernel_call_helper(self, kernel_name, call_args, *, device=None,
                                     triton=True, **kwargs):
        device = device or V.graph.get_current_device_or_throw()
        if device.type != "neuron" or triton:
            return super()._generate_kernel_call_helper(  # type: ignore[misc]
                kernel_name, call_args, device=device, triton=triton, **kwargs)
        # Phase 1: wait for the device's queued work, then run on this thread.
        self.writeline(f"neuron_sync({device.index})")  # type: ignore[attr-defined]
        self.writeline(self.wrap_kernel_call(kernel_name, call_args))  # type: ignore[attr-defined]

    def make_allocation(self, name, device, dtype, shape, stride, allocation_shape=None,
                        is_pinned=False):
        line = super().make_allocation(  # type: ignore[misc]
            name, device, dtype, shape, stride, allocation_shape, is_pinned)
        if device.type == "neuron":
            line = line.replace("device='neuron'", f"device='neuron:{device.index}'")
        return line


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
