"""Inductor's C++ kernel classes, with checks that cannot end the process.

Upstream, a failed check in a generated CPU kernel throws (``TORCH_CHECK`` for
an indirect index out of bounds, ``CppKernel.indirect_assert``,
torch/_inductor/codegen/cpp.py:3603 and codegen/common.py:2371;
``device_assert_async``, cpp.py:2216).  Those lines sit inside the kernel's
``#pragma omp parallel`` loops, and an exception that leaves an OpenMP region
calls ``std::terminate``: ``x[i]`` with a bad index in a compiled CPU graph
kills the process (checked on torch 2.13).  On neuron a bad index must become
a stream error like any kernel's, with the process alive.

So for neuron kernels a check never throws.  It records the first failure
(``neuron_task::fail``, trampoline.py), and the trampoline throws it after the
kernel has returned.  An indirect index that fails its bounds check is also
replaced by 0 before the access that follows, so the kernel stays inside its
buffers for the rest of the launch (the launch fails anyway; the outputs of a
failed launch are unspecified, as on any device).

The vector kernels also compute exp, tanh, erf, log, sin, ... with the
device's vector math instead of ATen's SLEEF calls (vec_math.py).

The classes are plugged in through ``CppKernelProxy.kernel_cls`` /
``vec_kernel_cls`` / ``tile2d_kernel_cls``, the extension points Inductor
provides for this (cpp.py:4166-4175).
"""
from __future__ import annotations

import sympy
from torch._inductor.codegen.cpp import (
    CppKernel,
    CppKernelProxy,
    CppTile2DKernel,
    CppTile2DOverrides,
    CppVecKernel,
)
from torch.utils._sympy.functions import Where
from torch.utils._sympy.symbol import SymT, symbol_is_type

from torch_neuronx._inductor.cache_hints import CacheHints
from torch_neuronx._inductor.tiling import widened_pointwise_tiling
from torch_neuronx._inductor.vec_math import NeuronCppVecOverrides


class _NonThrowingChecks:
    # The C++ variable a running check_bounds guards, if it can be clamped.
    _neuron_guarded: str | None = None

    @property
    def assert_function(self) -> str:
        # Used by indirect_assert as "<assert_function>(cond, msg)".
        if self._neuron_guarded is not None:
            return f"neuron_task::index_guard({self._neuron_guarded})"
        return "neuron_task::check"

    # A direct index expression's in-bounds form (see check_bounds).
    _neuron_direct_guards: dict | None = None

    def check_bounds(self, expr: sympy.Expr, size: sympy.Expr, lower: bool, upper: bool):
        # An indirect index (CSEProxy.indirect_indexing, codegen/common.py:2862)
        # is one CSE variable, the C++ variable the access's index uses:
        # setting it to 0 keeps the access inside the buffer.  (Index 0 of an
        # empty dimension too: the launch passes an empty tensor as a scratch
        # block covering index 0, compiled.cpp.)  A direct index expression
        # (index_propagation.py:376: an index Inductor rewrote into loop
        # variables and sizes, as `x[torch.arange(n) * k] = v` becomes
        # `out[k*x0]`) has no variable to clamp: the accesses that use it
        # (load/store below) get it as `cond ? expr : 0` instead, so a failed
        # check still never reaches outside the buffer.
        guard = None
        if isinstance(expr, sympy.Symbol) and symbol_is_type(expr, SymT.TMP):
            guard = str(expr)
        elif lower or upper:
            conds = ([sympy.Le(0, expr)] if lower else []) + ([sympy.Lt(expr, size)] if upper else [])
            guards = dict(self._neuron_direct_guards or {})
            guards[expr] = Where(sympy.And(*conds), expr, sympy.S.Zero)
            self._neuron_direct_guards = guards
        previous, self._neuron_guarded = self._neuron_guarded, guard
        try:
            return super().check_bounds(expr, size, lower, upper)  # type: ignore[misc]
        finally:
            self._neuron_guarded = previous

    def _neuron_guarded_index(self, index):
        if self._neuron_direct_guards and isinstance(index, sympy.Expr):
            return index.xreplace(self._neuron_direct_guards)
        return index

    def load(self, name, index):
        return super().load(name, self._neuron_guarded_index(index))  # type: ignore[misc]

    def store(self, name, index, value, mode=None):
        return super().store(name, self._neuron_guarded_index(index), value, mode)  # type: ignore[misc]

    def store_reduction(self, name, index, value):
        return super().store_reduction(name, self._neuron_guarded_index(index), value)  # type: ignore[misc]

    def device_assert_async(self, cond, msg):
        self.compute.writeline(f'neuron_task::check({cond}, "{msg}");')  # type: ignore[attr-defined]


# Upstream asks some questions of these classes by identity, and the answers
# must be the ones it gets for its own classes:
# - a tile2d kernel is a vec kernel (CppTile2DKernel(CppVecKernel)):
#   aggregate_reduction_buffers asserts isinstance(main loop kernel,
#   vec_kernel_cls) (cpp.py:4746), which a tile2d main loop failed
#   (AssertionError in vit, swin, convnext, ... backward graphs);
# - the scalar kernel is `type(self) is CppKernel` in codegen_conditions
#   (cpp.py:2690, which then narrows the condition on an inner variable the
#   kernel covers whole to that variable's first step), which no subclass is.


class NeuronCppKernel(_NonThrowingChecks, CppKernel):
    def codegen_conditions(self, *args, **kwargs):
        # The scalar kernel's conditions, as upstream writes them for
        # CppKernel: asked while this object is one (same layout, no state).
        self.__class__ = CppKernel
        try:
            return CppKernel.codegen_conditions(self, *args, **kwargs)
        finally:
            self.__class__ = NeuronCppKernel


class NeuronCppVecKernel(_NonThrowingChecks, CacheHints, CppVecKernel):
    overrides = NeuronCppVecOverrides  # type: ignore[assignment]


class NeuronCppTile2DOverrides(NeuronCppVecOverrides, CppTile2DOverrides):
    # The tile's index_expr/value_expr (upstream's __new__ leaves both as
    # class attributes), the device's math.
    pass


class NeuronCppTile2DKernel(CppTile2DKernel, NeuronCppVecKernel):
    # MRO: CppTile2DKernel, NeuronCppVecKernel, _NonThrowingChecks,
    # CppVecKernel: the tile's own methods, then the checks (it defines none
    # of check_bounds, assert_function, device_assert_async).
    overrides = NeuronCppTile2DOverrides  # type: ignore[assignment]


class NeuronCppKernelProxy(CppKernelProxy):
    kernel_cls = NeuronCppKernel
    vec_kernel_cls = NeuronCppVecKernel
    tile2d_kernel_cls = NeuronCppTile2DKernel

    def codegen_functions(self, fn_list, var_sizes_list):
        # float32 pointwise loops several vectors wide (tiling.py)
        with widened_pointwise_tiling():
            return super().codegen_functions(fn_list, var_sizes_list)
