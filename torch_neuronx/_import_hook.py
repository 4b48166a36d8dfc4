"""Run a function once a module has been imported, without importing it.

torch_neuronx adapts two modules it must not import itself at autoload
(Dynamo costs seconds; transformers may not be used at all):
``torch._dynamo`` (the device interface, ``_inductor/trigger.py``) and
``transformers.trainer`` (``_hf_trainer.py``).  ``after_import(name, fn)``
calls ``fn(module)`` now if the module is loaded, else right after its first
import, through a one-shot meta-path finder that delegates the import itself
to the real finders and loader.
"""
from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from typing import Callable


class _Loader(importlib.abc.Loader):
    """Runs the real loader, then the callback on the new module."""

    def __init__(self, loader: importlib.abc.Loader, callback: Callable):
        self._loader, self._callback = loader, callback

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module) -> None:
        self._loader.exec_module(module)
        # Points the module back at the real loader (get_source, reload).
        module.__loader__ = self._loader
        if module.__spec__ is not None:
            module.__spec__.loader = self._loader
        self._callback(module)

    def __getattr__(self, name):
        return getattr(self._loader, name)


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, name: str, callback: Callable):
        self.name, self.callback = name, callback

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)  # one shot, and out of the way of find_spec below
        spec = importlib.util.find_spec(fullname)
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader, self.callback)
        return spec


def after_import(name: str, callback: Callable) -> None:
    if name in sys.modules:
        callback(sys.modules[name])
    elif not any(isinstance(f, _Finder) and f.name == name for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder(name, callback))
