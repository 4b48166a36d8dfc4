"""Five torch 2.13 Inductor assumptions that do not hold for a C++-codegen
device other than "cpu" or a GPU, and one wrong lowering, worked around for
neuron only.

All are installed once by ``install()``; each wrapper checks that the
device is neuron and otherwise calls the upstream function unchanged, so CPU
and CUDA graphs compile exactly as before.  Line numbers are those of the
installed torch 2.13.0.  Upstream discussion: RFC pytorch/pytorch#189137.

A. Loop re-indexing after fusion assumes SIMD (Triton-style) loop groups
   for every device that is not "cpu".
   ``Scheduler.shared_data_after_inverting_indexing``
   (torch/_inductor/scheduler.py:6717), ``shared_data_after_reordering_loop``
   (:6854) and ``_try_reindex_pointwise_for_reduction`` (:7006) skip CPU nodes
   with ``node.is_cpu()`` (a device-type test), then read ``node.group`` as
   (numel, rnumel) sympy products.  CppScheduling's groups are tuples of
   sizes, so for neuron nodes ``groups[0] * groups[1]`` raised
   ``TypeError: can't multiply sequence by non-int of type 'tuple'``.  The
   wrappers give neuron nodes the answer CPU nodes get ("not applicable"),
   leaving ``config.loop_ordering_after_fusion`` and friends alone for other
   devices.

C. ``torch._inductor.utils.get_current_backend`` (utils.py:4104) answers
   ``config.cuda_backend`` ("triton") for any device it does not know.
   ``CSEProxy._default`` (codegen/common.py:2675) then skips the C++ dtype
   propagation, so C++ variables lack dtypes and dropout/embedding kernels
   fail (``AssertionError`` in ``CppVecKernel.arange``, codegen/cpp.py:3385);
   ``upcast_compute_type`` (utils.py:4133) and ``check_dtype``
   (codegen/common.py:739) take Triton's branches too.  The wrapper answers
   "cpp" for neuron.  It is rebound in every module that imported the
   function by name (utils, codegen.common, scheduler, kernel.mm_common).

E. User streams in a graph (Dynamo traces ``with torch.neuron.stream(s)``)
   need the wrapper's device-guard block: ``codegen_device_guard_enter``
   (codegen/wrapper.py:1831) is what defines ``default_stream`` and the
   ``streamN`` variables, but the scheduler enters it only where
   ``utils.device_need_guard`` (utils.py:3645) holds, i.e. for GPUs, while it
   emits ``with streamN:`` whenever a device is current (scheduler.py:9452):
   ``NameError: name 'stream1' is not defined``.  For neuron the wrapper has
   no other use for a device guard (allocations and launches carry the
   device index), so ``device_need_guard`` holds for neuron exactly when the
   graph has nodes on user streams.  Rebound in utils and scheduler.

F. The ``avg_pool2d_backward`` lowering (lowering.py:6606) divides by
   ``kernel_h * kernel_w`` whenever ``count_include_pad``, but ATen divides
   by the window clipped to the input + padding, which is smaller for the
   windows ``ceil_mode`` adds past the input: ``avg_pool2d(x, 3,
   ceil_mode=True)`` on a 2x2 map has gradient 1/4, the lowering gives 1/9
   (CPU graphs too).  EfficientNet's AvgPool2d(320, ceil_mode=True) made
   every gradient of tests/models' efficientnet 25600x too small.  For
   neuron, that case is the upstream lowering's own extern call
   (``fallback_avg_pool2d_backward``: the device's avg_pool2d_backward
   kernel, not the CPU fallback).

G. The realization heuristics treat every device that is not "cpu" as a GPU.
   ``ir.is_cpu`` (torch/_inductor/ir.py:448, a device-type test) picks the
   CPU's thresholds in ``Pointwise.has_large_inner_fn`` (:1086, 50 ops
   instead of 30), ``StorageBox.has_exceeded_max_reads`` (:10074, 12 reads
   instead of 8) and ``StorageBox.should_realize_on_reuse`` (:10099: a
   result of exp/log/sigmoid/tanh read twice is stored, not recomputed).
   A GPU is memory bound and recomputes; neuron's kernels are C++ on the
   host's cores, where the recomputation costs what it costs the CPU.  The
   softmax from primitives showed it: neuron's kernel computed ``exp``
   twice per element where the CPU's stored it in a per-row local buffer,
   and ran 29% slower single-threaded on the same memory.  The wrapper
   answers True for neuron; ``is_cpu`` has no other caller in torch 2.13.

H. ``lowering.use_two_step_variance`` (torch/_inductor/lowering.py:7079)
   picks the CPU's rule only for ``device.type == "cpu"``: a variance over
   at most ``config.cpp.use_two_step_variance_threshold`` (1024) elements
   is a sum and a sum of squares, vectorised; any other device that is not
   CUDA gets ``unroll_reductions_threshold`` (8), so neuron's LayerNorms
   ran Welford's update per element where the CPU's C++ runs two sums.
   For neuron the wrapper applies the CPU branch (same threshold, same
   "not for a single output" rule).
"""
from __future__ import annotations

import functools
from typing import Any, Callable

_installed = False


def _is_neuron_node(node: Any) -> bool:
    device = node.get_device()
    return device is not None and device.type == "neuron"


def _skip_for_neuron(method: Callable, not_applicable: Any) -> Callable:
    @functools.wraps(method)
    def wrapper(self, node1, node2, *args, **kwargs):
        if _is_neuron_node(node1) or _is_neuron_node(node2):
            return not_applicable
        return method(self, node1, node2, *args, **kwargs)

    wrapper._neuron_workaround = True  # type: ignore[attr-defined]
    return wrapper


def _install_a() -> None:
    from torch._inductor.scheduler import Scheduler

    # (method, the value upstream returns for CPU nodes)
    for name, not_applicable in (
        ("shared_data_after_inverting_indexing", -1),
        ("shared_data_after_reordering_loop", -1),
        ("_try_reindex_pointwise_for_reduction", False),
    ):
        method = getattr(Scheduler, name)
        if not getattr(method, "_neuron_workaround", False):
            setattr(Scheduler, name, _skip_for_neuron(method, not_applicable))


def _rebind(name: str, make: Callable[[Callable], Callable], *modules: Any) -> None:
    """Replaces function `name` of modules[0] by make(upstream), in every one
    of `modules` that imported it by name; once (a second call finds it marked)."""
    upstream = getattr(modules[0], name)
    if getattr(upstream, "_neuron_workaround", False):
        return
    wrapper = functools.wraps(upstream)(make(upstream))
    wrapper._neuron_workaround = True  # type: ignore[attr-defined]
    for module in modules:
        if getattr(module, name, None) is upstream:
            setattr(module, name, wrapper)


def _install_c() -> None:
    import torch._inductor.codegen.common as common
    import torch._inductor.kernel.mm_common as mm_common
    import torch._inductor.scheduler as scheduler
    import torch._inductor.utils as utils

    def make(upstream: Callable) -> Callable:
        def get_current_backend(device_type: str | None = None) -> str:
            if not device_type:
                from torch._inductor.virtualized import V

                device_type = V.graph.get_current_device_or_throw().type
            if device_type == "neuron":
                return "cpp"
            return upstream(device_type)
        return get_current_backend

    _rebind("get_current_backend", make, utils, common, scheduler, mm_common)


def _install_e() -> None:
    import torch._inductor.scheduler as scheduler
    import torch._inductor.utils as utils

    def make(upstream: Callable) -> Callable:
        def device_need_guard(device: str) -> bool:
            if device == "neuron":
                from torch._inductor.virtualized import V

                graph_scheduler = getattr(V.graph, "scheduler", None)
                return bool(graph_scheduler is not None
                            and graph_scheduler._has_multi_stream_nodes())
            return upstream(device)
        return device_need_guard

    _rebind("device_need_guard", make, utils, scheduler)


def _install_f() -> None:
    import torch
    import torch._inductor.lowering as lowering

    op = torch.ops.aten.avg_pool2d_backward.default
    upstream = lowering.lowerings[op]
    if getattr(upstream, "_neuron_workaround", False):
        return

    @functools.wraps(upstream)
    def avg_pool2d_backward(grad_output, x, kernel_size, stride, padding, ceil_mode,
                            count_include_pad, divisor_override=None):
        args = (grad_output, x, kernel_size, stride, padding, ceil_mode, count_include_pad,
                divisor_override)
        if (ceil_mode and count_include_pad and divisor_override is None
                and _is_neuron_node(grad_output)):
            return lowering.fallback_avg_pool2d_backward(*args)
        return upstream(*args)

    avg_pool2d_backward._neuron_workaround = True  # type: ignore[attr-defined]
    lowering.lowerings[op] = avg_pool2d_backward


def _install_g() -> None:
    import torch._inductor.ir as ir

    def make(upstream: Callable) -> Callable:
        def is_cpu(x: Any) -> bool:
            return upstream(x) or ir.get_device_type(x) == "neuron"
        return is_cpu

    _rebind("is_cpu", make, ir)


def _install_h() -> None:
    import sympy
    import torch._inductor.lowering as lowering
    from torch._inductor import config
    from torch._inductor.utils import sympy_product

    def make(upstream: Callable) -> Callable:
        def use_two_step_variance(x, axis, keepdim, input_dtype):
            if not _is_neuron_node(x):
                return upstream(x, axis, keepdim, input_dtype)
            # upstream's branch for device.type == "cpu"
            axis = lowering._validate_reduction_axis(x, axis)
            kwargs = lowering._make_reduction_inner(
                x, axis=axis, keepdims=keepdim, dtype=None, override_return_dtype=None)
            numel = sympy_product(kwargs["reduction_ranges"])
            if not isinstance(numel, sympy.Integer):
                return False
            return (int(numel) <= config.cpp.use_two_step_variance_threshold
                    and sympy_product(kwargs["ranges"]) != 1)
        return use_two_step_variance

    _rebind("use_two_step_variance", make, lowering)


def install() -> None:
    global _installed
    if not _installed:
        _install_a()
        _install_c()
        _install_e()
        _install_f()
        _install_g()
        _install_h()
        _installed = True
