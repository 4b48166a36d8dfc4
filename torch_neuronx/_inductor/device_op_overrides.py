"""The snippets Inductor's Python wrapper writes for neuron (DeviceOpOverrides).

``GraphLowering.init_wrapper_code`` looks the device up in a plain dict
(``torch/_inductor/codegen/common.py`` ``get_device_op_overrides``), so a
device without an entry fails with ``KeyError: 'neuron'``.  The C++-wrapper
snippets are not given: this backend has no cpp_wrapper yet.
"""
from __future__ import annotations

from torch._inductor.codegen.common import DeviceOpOverrides


class NeuronDeviceOpOverrides(DeviceOpOverrides):
    def import_get_raw_stream_as(self, name: str) -> str:
        return f"from torch_neuronx._C import _current_raw_stream as {name}"

    def set_device(self, device_idx: int) -> str:
        return f"torch.neuron.set_device({device_idx})"

    def synchronize(self) -> str:
        return "torch.neuron.synchronize()"

    def device_guard(self, device_idx: int) -> str:
        return f"torch.neuron.device({device_idx})"

    def current_stream(self) -> str:
        return "torch.neuron.current_stream()"

    def cpp_kernel_type(self) -> str:
        return "void*"
