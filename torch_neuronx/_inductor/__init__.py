"""torch.compile for neuron: Inductor's C++ kernel codegen on this device.

Nothing here is imported by ``import torch``: Dynamo and Inductor cost
seconds to import, and autoload must stay fast.  Registration is lazy and
happens by itself (``trigger.py``):

- when ``torch._dynamo`` is imported, ``register_dynamo()`` adds the Dynamo
  device interface (Dynamo may trace ``torch.neuron`` streams/events);
- when Inductor first registers its device backends
  (``init_backend_registration``, before lowering and before the cache key),
  it asks ``torch.neuron`` for ``Scheduling``; that lookup runs
  ``register()`` and then reports the attribute as absent, so Inductor's own
  automatic registration of a renamed PrivateUse1 backend (which would
  drop our cache-key pass) never replaces ours;
- ``torch.compile(backend="neuron")`` is found through the
  ``torch_dynamo_backends`` entry point (``backend.py``), which registers too.

Files, one job each: ``trigger.py`` (the lazy hooks), ``device_interface.py``
(Dynamo), ``device_op_overrides.py`` (wrapper snippets), ``wrapper.py`` (the
generated ``call()``), ``scheduling.py`` (kernel codegen), ``kernels.py``
(checks that never throw inside OpenMP regions), ``trampoline.py`` (the C++
around each kernel for a stream launch), ``workarounds.py`` (torch 2.13
bugs), ``cache_key.py`` (what the caches key on), ``runtime.py`` (what
generated code calls), ``backend.py`` (the named Dynamo backend).  The launch
itself is C++: torch_neuronx/csrc/compiled.cpp.
"""
from __future__ import annotations

import threading

_lock = threading.RLock()
_dynamo_registered = False
_registered = False


def register_dynamo() -> None:
    """Registers the neuron DeviceInterface with Dynamo (idempotent)."""
    global _dynamo_registered
    with _lock:
        if _dynamo_registered:
            return
        from torch._dynamo.device_interface import register_interface_for_device

        from torch_neuronx._inductor.device_interface import NeuronInterface

        register_interface_for_device("neuron", NeuronInterface)
        _dynamo_registered = True


def register() -> None:
    """Registers the neuron device backend with Dynamo and Inductor (idempotent)."""
    global _registered
    with _lock:
        if _registered:
            return
        register_dynamo()
        from torch._inductor.codegen.common import (
            register_backend_for_device,
            register_device_op_overrides,
        )

        from torch_neuronx._inductor import workarounds
        from torch_neuronx._inductor.cache_key import NeuronCodegenKey
        from torch_neuronx._inductor.device_op_overrides import NeuronDeviceOpOverrides
        from torch_neuronx._inductor.scheduling import NeuronScheduling
        from torch_neuronx._inductor.wrapper import NeuronWrapperCodegen

        workarounds.install()
        register_device_op_overrides("neuron", NeuronDeviceOpOverrides())
        register_backend_for_device(
            "neuron",
            NeuronScheduling,
            NeuronWrapperCodegen,
            device_custom_pass=NeuronCodegenKey(),
        )
        _registered = True
