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

import importlib.abc
import importlib.util
import sys

_DYNAMO = "torch._dynamo"

INDUCTOR_ATTRIBUTES = frozenset(
    {"Scheduling", "PythonWrapperCodegen", "CppWrapperCodegen", "WrapperFxCodegen"}
)


def inductor_attribute(name: str) -> None:
    """Called for a missing ``torch.neuron`` attribute that Inductor probes."""
    from torch_neuronx import _inductor

    _inductor.register()


class _Loader(importlib.abc.Loader):
    """Runs torch._dynamo's own loader, then registers the device interface."""

    def __init__(self, loader: importlib.abc.Loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module) -> None:
        self._loader.exec_module(module)
        # Points the module back at the real loader (get_source, reload).
        module.__loader__ = self._loader
        if module.__spec__ is not None:
            module.__spec__.loader = self._loader
        from torch_neuronx import _inductor

        _inductor.register_dynamo()

    def __getattr__(self, name):
        return getattr(self._loader, name)


class _DynamoFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname != _DYNAMO:
            return None
        # One shot: the first import of torch._dynamo is the one that matters.
        _remove_finder()
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _Loader(spec.loader)
        return spec


_finder = _DynamoFinder()


def _remove_finder() -> None:
    try:
        sys.meta_path.remove(_finder)
    except ValueError:
        pass


def install() -> None:
    """Registers now if Dynamo is already imported, else when it is."""
    if _DYNAMO in sys.modules:
        from torch_neuronx import _inductor

        _inductor.register_dynamo()
    elif _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)
