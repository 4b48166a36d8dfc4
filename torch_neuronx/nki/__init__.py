"""torch_neuronx.nki: NKI (the Neuron Kernel Interface) on the neuron device.

Kernels written for AWS's NKI run with their import lines changed:
    from torch_neuronx import nki
    import torch_neuronx.nki.language as nl
    import torch_neuronx.nki.isa as nisa
Both published dialects are accepted (docs/nki.md).  @nki.jit traces a
kernel once per signature into tile IR (trace.py, ir.py), lowers it to C
(passes.py, lower_c.py), compiles and caches it (build.py) and launches it
as one task on the current neuron stream (kernel.py); nki.simulate runs it
op by op on CPU tensors (interp.py); nki.op registers it with torch.library
(op.py).
"""
from __future__ import annotations

import statistics
import time

from . import isa, language  # noqa: F401
from .kernel import Kernel
from .trace import NKIError  # noqa: F401


def jit(fn=None, *, mode="auto", **_options):
    """@nki.jit / @nki.jit(mode=...): a Kernel; kernel(...) or kernel[grid](...)."""
    if fn is None:
        return lambda f: jit(f, mode=mode)
    return fn if isinstance(fn, Kernel) else Kernel(fn, mode)


def simulate(kernel, *args, **kwargs):
    """nki.simulate(kernel)(...) runs kernel in the simulator; the old form
    nki.simulate_kernel(kernel, *args) (and simulate(kernel, *args)) too."""
    k = Kernel(getattr(kernel, "fn", kernel), "simulate")
    if args or kwargs:
        return k(*args, **kwargs)
    return k


def simulate_kernel(kernel, *args, **kwargs):
    return simulate(kernel)(*args, **kwargs)


class _Benchmarked:
    def __init__(self, kernel, warmup, iters):
        self.kernel, self.warmup, self.iters = kernel, warmup, iters
        self.times_us = []

    def __call__(self, *args, **kwargs):
        import torch

        k = self.kernel if isinstance(self.kernel, Kernel) else jit(self.kernel)
        out = None
        for i in range(self.warmup + self.iters):
            t0 = time.perf_counter()
            out = k(*args, **kwargs)
            if torch.neuron.is_available():
                torch.neuron.synchronize()
            if i >= self.warmup:
                self.times_us.append((time.perf_counter() - t0) * 1e6)
        return out

    @property
    def benchmark_result(self):
        return self

    @property
    def nc_latency(self):
        return self

    def get_latency_percentile(self, p):
        xs = sorted(self.times_us)
        return xs[min(len(xs) - 1, int(len(xs) * p / 100))]

    @property
    def median_us(self):
        return statistics.median(self.times_us)


def benchmark(kernel=None, warmup=2, iters=10, **_options):
    """nki.benchmark(kernel)(...): runs it warmup + iters times (synchronising
    each time) and keeps the latencies (benchmark_result.nc_latency)."""
    if kernel is None:
        return lambda k: _Benchmarked(k, warmup, iters)
    return _Benchmarked(kernel, warmup, iters)


def op(name, *, mutates_args=(), **kwargs):
    """@nki.op("lib::name", mutates_args=...): a torch.library custom op
    (op.py)."""
    from .op import nki_op

    return nki_op(name, mutates_args=mutates_args, **kwargs)


def install_aliases():
    """Opt-in: makes `import nki`, `import neuronxcc.nki` (and their
    .language / .isa) resolve to these modules when the real packages are
    absent, so a kernel file runs with no edit at all.  Returns the roots
    it aliased."""
    import importlib.util
    import sys
    import types

    from . import isa as _isa, language as _nl

    def real(name):  # a namespace package (a folder named nki) is not NKI
        if name in sys.modules:
            return True
        spec = importlib.util.find_spec(name)
        return spec is not None and spec.origin not in (None, "namespace")

    me = sys.modules[__name__]
    aliased = []
    for root in ("nki", "neuronxcc.nki"):
        if real(root.split(".")[0]):
            continue
        aliased.append(root)
        if root == "neuronxcc.nki":
            sys.modules["neuronxcc"] = types.ModuleType("neuronxcc")
            sys.modules["neuronxcc"].nki = me
        sys.modules[root] = me
        sys.modules[root + ".language"] = _nl
        sys.modules[root + ".isa"] = _isa
    return aliased
