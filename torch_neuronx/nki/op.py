"""nki.op: an NKI-calling function as a torch.library custom op.

    @nki.op("mylib::rmsnorm", mutates_args=())
    def rmsnorm(a: torch.Tensor, g: torch.Tensor, eps: float) -> torch.Tensor:
        return rmsnorm_kernel(a, g, eps)
    rmsnorm.register_autograd(backward, setup_context=setup)

The op runs on neuron and on CPU tensors (the same compiled library, on the
calling thread).  Its fake (meta) implementation is the same function: with
fake tensors a kernel is traced, not launched, and its outputs are made from
the trace's shapes (kernel.py), so the op sits in torch.compile graphs as one
node.  A backward that launches kernels must itself call nki.op ops: a bare
kernel launch is not an op, so a traced graph (AOTAutograd) would not hold it;
kernel.py refuses fake tensors outside an nki.op for that reason.  A kernel
that writes an argument the op did not declare in mutates_args raises
(checked on every call against the trace's writes).
"""
from __future__ import annotations

import contextlib
import threading

import torch

_active = threading.local()


def guarded_storages():
    """Storages (data pointers) the running op must not write, or None."""
    return getattr(_active, "guard", None)


@contextlib.contextmanager
def _guard(name, args, mutable):
    prev = getattr(_active, "guard", None)
    ptrs = {}
    for arg_name, a in args:
        if isinstance(a, torch.Tensor) and arg_name not in mutable and \
                not _is_fake(a) and a.numel():
            ptrs[a.untyped_storage().data_ptr()] = arg_name
    _active.guard = (name, ptrs)
    try:
        yield
    finally:
        _active.guard = prev


def in_fake_impl():
    return getattr(_active, "fake", False)


def _fake(fn):
    def impl(*args, **kwargs):
        prev = in_fake_impl()
        _active.fake = True
        try:
            return fn(*args, **kwargs)
        finally:
            _active.fake = prev
    return impl


def _is_fake(t):
    from torch._subclasses.fake_tensor import is_fake

    return is_fake(t)


def nki_op(name, mutates_args=(), device_types=("neuron", "cpu"), schema=None):
    if isinstance(mutates_args, str) and mutates_args != "unknown":
        mutates_args = (mutates_args,)
    mutable = set(mutates_args) if mutates_args != "unknown" else None

    def deco(fn):
        import inspect

        params = list(inspect.signature(fn).parameters)

        def checked(*args, **kwargs):
            named = list(zip(params, args)) + list(kwargs.items())
            if mutable is None:
                return fn(*args, **kwargs)
            with _guard(name, named, mutable):
                return fn(*args, **kwargs)

        checked.__signature__ = inspect.signature(fn)
        checked.__name__ = fn.__name__
        checked.__doc__ = fn.__doc__
        checked.__annotations__ = fn.__annotations__
        op = torch.library.custom_op(name, checked, mutates_args=mutates_args,
                                     device_types=device_types, schema=schema)
        op.register_fake(_fake(fn))
        return op

    return deco
