"""Dynamo's view of the neuron device (torch._dynamo.device_interface).

Inductor asks this interface for the current device (``decode_device`` adds an
index to a bare ``neuron``), for device properties (recorded before the
compile workers fork, ``async_compile.caching_device_properties``), and Dynamo
for the Stream/Event classes it may trace.  Everything forwards to
``torch.neuron``.
"""
from __future__ import annotations

from typing import Any

import torch
from torch._dynamo.device_interface import DeviceInterface, caching_worker_current_devices
from torch._dynamo.device_interface import caching_worker_device_properties

from torch_neuronx import _C
from torch_neuronx import neuron as _neuron


def _index(device: Any) -> int:
    if device is None:
        return NeuronInterface.Worker.current_device()
    return _neuron._device_index(device)


class NeuronInterface(DeviceInterface):
    device = _neuron.device  # type: ignore[assignment]
    # torch.neuron.Stream subclasses torch.Stream.  torch.neuron.Event is a
    # factory of plain torch.Event objects: torch.Event's C methods
    # (elapsed_time, Stream.record_event) reject subclasses, so a subclass
    # here would trace but fail at run time.
    Stream = _neuron.Stream  # type: ignore[assignment]
    Event = _neuron.Event  # type: ignore[assignment]

    class Worker:
        """What compile workers may ask without touching the runtime: the
        parent records the properties before forking (the runtime's worker
        threads do not survive fork)."""

        @staticmethod
        def set_device(device: int) -> None:
            caching_worker_current_devices["neuron"] = device

        @staticmethod
        def current_device() -> int:
            if "neuron" in caching_worker_current_devices:
                return caching_worker_current_devices["neuron"]
            return _neuron.current_device()

        @staticmethod
        def get_device_properties(device: Any = None) -> Any:
            if "neuron" not in caching_worker_device_properties:
                caching_worker_device_properties["neuron"] = [
                    _neuron.get_device_properties(i) for i in range(_neuron.device_count())
                ]
            return caching_worker_device_properties["neuron"][_index(device)]

    current_device = staticmethod(_neuron.current_device)
    set_device = staticmethod(_neuron.set_device)
    device_count = staticmethod(_neuron.device_count)
    stream = staticmethod(_neuron.stream)  # type: ignore[assignment]
    current_stream = staticmethod(_neuron.current_stream)
    set_stream = staticmethod(_neuron.set_stream)  # type: ignore[assignment]
    synchronize = staticmethod(_neuron.synchronize)
    get_device_properties = staticmethod(_neuron.get_device_properties)  # type: ignore[assignment]
    memory_allocated = staticmethod(_neuron.memory_allocated)
    is_bf16_supported = staticmethod(_neuron.is_bf16_supported)  # type: ignore[arg-type]

    @staticmethod
    def is_available() -> bool:
        return _neuron.is_available()

    @staticmethod
    def exchange_device(device: int) -> int:
        prev = _neuron.current_device()
        if device != prev:
            _neuron.set_device(device)
        return prev

    @staticmethod
    def maybe_exchange_device(device: int) -> int:
        return NeuronInterface.exchange_device(device) if device >= 0 else -1

    @staticmethod
    def _set_stream_by_id(stream_id: int, device_index: int, device_type: int) -> None:
        _neuron.set_stream(_neuron.Stream(stream_id=stream_id, device_index=device_index,
                                          device_type=device_type))

    @staticmethod
    def get_raw_stream(device_idx: int) -> int:
        """The current stream of the device as the runtime's nrt_stream*."""
        return _C._current_raw_stream(device_idx)

    @staticmethod
    def get_compute_capability(device: Any = None) -> int:
        major, minor = _neuron.get_device_capability(device)
        return major * 10 + minor

    @staticmethod
    def is_triton_capable(device: Any = None) -> bool:
        return False
