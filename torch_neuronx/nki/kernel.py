"""@nki.jit kernels: trace once per signature, build, launch.

A signature is (grid, each tensor's dtype/shape/strides/device type, every
other argument's value).  A launch on neuron tensors allocates the outputs
and queues one task on the current stream (compiled.cpp's _neuron_launch):
nothing waits.  CPU tensors run the same library on the calling thread.
"""
from __future__ import annotations

import os
import types

import torch

from . import build, interp, language as nl, passes
from .lower_c import Lowering
from .op import guarded_storages, in_fake_impl
from .trace import Ctx, NKIError, Ref, tracing


class Trace:
    """What one trace produced: the tree, the arguments and the outputs."""

    def __init__(self, fn, grid, args, kwargs, eager=False, pids=None, store=None):
        c = Ctx(fn, eager, pids, grid)
        if store is not None:
            c.store = store
        self.n_inputs = 0
        call_args = []
        for i, a in enumerate(args):
            if isinstance(a, torch.Tensor):
                # int(): symbolic sizes (torch.compile's dynamic shapes) are
                # specialised; an NKI kernel is traced per concrete shape
                ref = c.new_arg(tuple(int(s) for s in a.shape), a.dtype,
                                tuple(int(s) for s in a.stride()), "in", f"arg{i}")
                if eager:
                    c.store[("a", len(c.args) - 1)] = a
                call_args.append(ref)
                self.n_inputs += 1
            else:
                call_args.append(a)
        if any(isinstance(v, torch.Tensor) for v in kwargs.values()):
            raise TypeError("pass tensors to an NKI kernel positionally")
        f = _with_range(fn)
        with tracing(c):
            result = f(*call_args, **kwargs)
        self.ctx = c
        self.grid = grid
        self.root, self.tiles = c.root, c.tiles
        self.args = c.args
        self.result = _result_spec(result)
        self.written_inputs = sorted(i for i in c.written_args if i < self.n_inputs)


def _with_range(fn):
    """fn with `range` in its globals marking loop iterations (Beta 2's loops
    are Python's range; the marks let reroll fold them back)."""
    if "range" in fn.__globals__ or not isinstance(fn, types.FunctionType):
        return fn
    g = dict(fn.__globals__)
    g["range"] = nl.range
    f = types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__, fn.__closure__)
    f.__kwdefaults__ = fn.__kwdefaults__
    return f


def _result_spec(r):
    if r is None:
        return None
    if isinstance(r, Ref):
        if r.space != "arg":
            raise NKIError(f"{r.name}: a kernel returns HBM tensors, not on-chip tiles")
        return r.v[2]
    if isinstance(r, (tuple, list)):
        return tuple(_result_spec(x) for x in r)
    raise NKIError(f"a kernel returns HBM tensors (or a tuple of them), got {type(r).__name__}")


def _build_result(spec, tensors):
    if spec is None:
        return None
    if isinstance(spec, int):
        return tensors[spec]
    return tuple(_build_result(s, tensors) for s in spec)


class Compiled:
    """One signature's build: the trace, the library (or None: executor) and
    the launch handle."""

    def __init__(self, name, trace):
        self.name, self.trace = name, trace
        self.outs = [(a["shape"], a["strides"], a["dtype"]) for a in trace.args
                     if a["role"] == "out"]
        root = passes.parallel_loops(passes.fuse(trace.root))
        root, sbuf, psum = passes.allocate(root, trace.tiles)
        tables = passes.Tables()
        rolled = passes.reroll(root, tables)
        self.source = Lowering(name, trace.args, trace.grid, sbuf, psum, tables).source(rolled)
        self.lib = self.handle = None
        if build.compiler() is not None:
            self.lib = build.Library(build.compile_source(self.source))
            from torch_neuronx import _C

            kinds = [(a["dtype"], i in trace.ctx.written_args or a["role"] == "out")
                     for i, a in enumerate(trace.args)]
            self.handle = _C._compiled_kernel(self.lib.entry, name, kinds)

    def run(self, tensors, device):
        if self.lib is None:
            return self._execute(tensors)
        if device.type == "cpu":
            err = self.lib.run([t.data_ptr() for t in tensors])
            if err:
                raise RuntimeError(f"{self.name}: {err}")
            return
        from torch_neuronx import _C

        if torch.autograd.profiler._is_profiler_enabled:
            # a CPU-side range too, so key_averages() attaches the device task to it
            with torch.profiler.record_function(self.name):
                _C._neuron_launch(self.handle, device.index or 0, *tensors)
            return
        _C._neuron_launch(self.handle, device.index or 0, *tensors)

    def _execute(self, tensors):
        """No compiler: the interpreter over the trace, synchronously."""
        cpu = [t.cpu() if t.device.type != "cpu" else t for t in tensors]
        interp.run_program_grid(self.trace, cpu)
        for i, (t, c) in enumerate(zip(tensors, cpu)):
            if t is not c and (i in self.trace.ctx.written_args):
                t.copy_(c)


def is_fake(t):
    from torch._subclasses.fake_tensor import is_fake as f

    return f(t)


def _sig(a):
    if isinstance(a, torch.Tensor):
        if type(a) is torch.Tensor:  # the common case, cheap (dispatch time)
            return (a.dtype, a.shape, a.stride(), a.device.type)
        return (a.dtype, tuple(int(s) for s in a.shape), tuple(int(s) for s in a.stride()),
                a.device.type)
    if isinstance(a, (list, tuple)):
        return (type(a).__name__,) + tuple(_sig(x) for x in a)
    if isinstance(a, float):
        return ("f", a)
    return a


class Kernel:
    """@nki.jit: call it, or launch a grid with kernel[g0, g1](...)."""

    def __init__(self, fn, mode="auto"):
        self.fn, self.mode = fn, mode
        self.__name__ = getattr(fn, "__name__", "kernel")
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn
        self.cache = {}

    def __getitem__(self, grid):
        grid = tuple(int(g) for g in (grid if isinstance(grid, tuple) else (grid,)))
        if not 1 <= len(grid) <= 3 or any(g < 1 for g in grid):
            raise ValueError(f"{self.__name__}: a grid has 1 to 3 positive sizes, got {grid}")
        return lambda *a, **kw: self._call(grid, a, kw)

    def __call__(self, *args, **kwargs):
        return self._call((1,), args, kwargs)

    def trace(self, grid, args, kwargs):
        return Trace(self.fn, grid, args, kwargs)

    def compiled(self, grid, args, kwargs):
        key = (grid, tuple(map(_sig, args)),
               tuple(sorted((k, _sig(v)) for k, v in kwargs.items())) if kwargs else ())
        c = self.cache.get(key)
        if c is None:
            c = self.cache[key] = Compiled(f"nki::{self.__name__}", self.trace(grid, args, kwargs))
        return c

    def _call(self, grid, args, kwargs):
        from .trace import _state

        if getattr(_state, "ctx", None) is not None:  # called from a kernel: inline
            return self.fn(*args, **kwargs)
        if self.mode == "simulate" or os.environ.get("TORCHNEURON_NKI_SIMULATE") == "1":
            return simulate_call(self.fn, grid, args, kwargs)
        inputs = [a for a in args if isinstance(a, torch.Tensor)]
        device = inputs[0].device if inputs else torch.device("cpu")
        for t in inputs:
            if t.device != device:
                raise ValueError(f"{self.__name__}: tensors on {device} and {t.device}")
        fake = any(type(t) is not torch.Tensor and is_fake(t) for t in inputs)
        if fake and not in_fake_impl():
            raise RuntimeError(
                f"{self.__name__}: an NKI kernel called on fake tensors (torch.compile, "
                "AOTAutograd, meta) outside an nki.op would vanish from the traced graph; "
                "wrap the call in an @nki.op")
        c = self.compiled(grid, args, kwargs)
        guard = guarded_storages()
        if guard and not fake:
            for i, loc in c.trace.ctx.written_args.items():
                if i < len(inputs) and inputs[i].untyped_storage().data_ptr() in guard[1]:
                    name = guard[1][inputs[i].untyped_storage().data_ptr()]
                    raise RuntimeError(f"{loc}: {guard[0]}: kernel {self.__name__} writes "
                                       f"argument '{name}', which is not in mutates_args")
        outs = [torch.empty_strided(s, st, dtype=dt, device=device) for s, st, dt in c.outs]
        tensors = inputs + outs
        if not fake:  # fake tensors (torch.compile, meta): the trace gives the outputs
            c.run(tensors, device)
        return _build_result(c.trace.result, tensors)


def simulate_call(fn, grid, args, kwargs):
    """nki.simulate: the kernel's Python runs once per program on CPU copies
    of the tensors, each op executed as it is recorded; tiles and outputs
    start as NaN.  Results go back to the tensors' device."""
    import itertools

    device = next((a.device for a in args if isinstance(a, torch.Tensor)), torch.device("cpu"))
    cpu_args = [a.detach().cpu().clone() if isinstance(a, torch.Tensor) else a for a in args]
    outs, written, result, tensors = [], set(), None, []
    # tile-sized torch ops: one thread (waking an intra-op team per op cost
    # more than the op on a busy machine)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for pid in itertools.product(*(range(g) for g in grid)):
            t = _SimTrace(fn, grid, cpu_args, kwargs, pid, iter(list(outs)), outs)
            written |= t.written
            result, tensors = t.result, t.tensors
    finally:
        torch.set_num_threads(threads)
    k = 0
    with torch.no_grad():
        for a, c in zip(args, cpu_args):
            if isinstance(a, torch.Tensor):
                if k in written:
                    a.copy_(c)
                k += 1
    return _build_result(result, [x.to(device) for x in tensors])


class _SimTrace:
    def __init__(self, fn, grid, args, kwargs, pid, prev_outs, outs):
        from . import trace as T

        c = Ctx(fn, True, pid, grid)
        store = c.store
        tensors = []
        call_args = []
        for i, a in enumerate(args):
            if isinstance(a, torch.Tensor):
                ref = c.new_arg(a.shape, a.dtype, a.stride(), "in", f"arg{i}")
                store[("a", len(c.args) - 1)] = a
                tensors.append(a)
                call_args.append(ref)
            else:
                call_args.append(a)
        orig_new_arg = c.new_arg

        def new_arg(shape, dtype, strides, role, name=""):
            ref = orig_new_arg(shape, dtype, strides, role, name)
            t = next(prev_outs, None)
            if t is None:
                t = torch.full(shape, float("nan")).to(dtype) if dtype.is_floating_point \
                    else torch.zeros(shape, dtype=dtype)
                outs.append(t)
            store[("a", ref.v[2])] = t
            tensors.append(t)
            return ref

        c.new_arg = new_arg
        with T.tracing(c):
            r = _with_range(fn)(*call_args, **kwargs)
        self.result = _result_spec(r)
        self.tensors = tensors
        self.written = set(c.written_args)
