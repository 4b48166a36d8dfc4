"""Lazy registration hooks, installed by ``import torch_neuronx`` (autoload).

Importing this module must stay cheap: it imports neither Dynamo nor
Inductor.  Two hooks, each a no-op until the piece it serves is in use:

- an import hook: once ``torch._dynamo`` has finished importing, the neuron
  Dynamo device interface is registered (``register_dynamo``);
- ``inductor_attribute(name)``: ``torch.neuron.__getattr__`` forwards the
  names Inductor's ``init_backend_registration`` asks the device module for
  (``torch/_inductor/codegen/common.py:597-620``); the first lookup registers
  the whole backend, and the answer is always "absent", so Inductor's
  automatic registration (which has no cache-key pass) is skipped.
"""
from __future__ import annotations

from torch_neuronx._import_hook import after_import

_DYNAMO = "torch._dynamo"

INDUCTOR_ATTRIBUTES = frozenset(
    {"Scheduling", "PythonWrapperCodegen", "CppWrapperCodegen", "WrapperFxCodegen"}
)


def inductor_attribute(name: str) -> None:
    """Called for a missing ``torch.neuron`` attribute that Inductor probes."""
    from torch_neuronx import _inductor

    _inductor.register()


def install() -> None:
    """Registers now if Dynamo is already imported, else when it is."""
    def register(_module) -> None:
        from torch_neuronx import _inductor

        _inductor.register_dynamo()

    after_import(_DYNAMO, register)
