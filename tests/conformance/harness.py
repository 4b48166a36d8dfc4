"""One (OpInfo, dtype) pair, run on a device and on the CPU, and its verdict.

The comparison imitates upstream's TestCommon.test_compare_cpu (test_ops.py):
the op's function variant on the same sample inputs on both devices, each
result passed through the sample's output_process_fn_grad, compared with
atol = rtol = 1e-3 raised to the op's toleranceOverride -- and, because this
harness runs every dtype rather than one, never below assert_close's default
for the dtype (bfloat16 needs 1.6e-2).  Integral and bool results are exact.
Where op_db skips that test (random, uninitialised or undefined outputs) only
the structure, shapes and dtypes are compared.  Ops with autograd also have
the gradients of the sum of their outputs compared, input by input.

Where ATen's own CPU kernel for a 16-bit pair depends on the machine and the
one this machine gets rounds intermediates (reference.py), the device is held
to the float64 truth instead: the op in float64 on the same samples, rounded
to the dtype -- and the CPU's own result must miss it, or the entry is stale.

Samples are made on the CPU (seeded, so every run sees the same ones) and
copied to the device with their strides; what op_db makes on the CPU
whatever the device (tensor_split's indices) stays there.  Only the op and
its backward run under the fallback mode and count towards its verdict:
moving samples and results is the harness's work.

Verdicts: "native" (correct with no CPU fallback), "fallback" (correct only
through the fallback), "fails" (wrong or raising even with the fallback).
"""
import contextlib
import dataclasses
import time
import warnings

import torch
from torch.utils._pytree import tree_flatten, tree_unflatten

from . import catalog, reference

NATIVE, FALLBACK, FAILS = "native", "fallback", "fails"
MODES = ("native", "fallback", "both")

_COMPARE_TOLERANCE = 1e-3  # upstream's test_compare_cpu atol and rtol
_REASON_CHARS = 240


@dataclasses.dataclass
class Verdict:
    op: str
    dtype: str
    status: str
    reason: str = ""
    fallback_ops: list = dataclasses.field(default_factory=list)
    samples: int = 0          # samples compared on the device
    gradients: bool = False   # whether gradients were compared too
    values: bool = True       # False: metadata only (see module docstring)
    reference: str = "cpu"    # or "float64 truth: <why>" (reference.py)
    seconds: float = 0.0


class Mismatch(AssertionError):
    """The device's result differs from the CPU's."""


class _Fallback:
    """torch_neuronx's fallback switch and counters.  Any other device (the CPU,
    while the harness is checked against itself) has no fallback."""

    def __init__(self, device_type):
        self._control = None
        if device_type == "neuron":
            from torch_neuronx import _fallback
            self._control = _fallback

    def mode(self, mode):
        if self._control is None:
            return contextlib.nullcontext()
        return self._control.fallback_mode(mode)

    def reset(self):
        if self._control is not None:
            self._control.reset_fallback_stats()

    @contextlib.contextmanager
    def counting(self, mode, device_type, hit):
        """Runs the block under fallback `mode`, synchronised at its end (a
        kernel's asynchronous error surfaces there), adding the ops that fell
        back inside it to the set `hit`."""
        self.reset()
        try:
            with self.mode(mode):
                yield
                _synchronize(device_type)
        finally:
            hit.update(self.ops_hit())

    def ops_hit(self):
        """Sorted names of the ops that fell back since the last reset."""
        if self._control is None:
            return []
        return sorted(op for op, count in self._control.fallback_stats().items() if count)


def _synchronize(device_type):
    module = torch.get_device_module(device_type)
    if hasattr(module, "synchronize"):
        module.synchronize()


def _copy_tensor(tensor, device):
    """A leaf copy of `tensor` on `device` with the same sizes and strides (so
    non-contiguous samples stay non-contiguous) and the same requires_grad."""
    with torch.no_grad():
        source = tensor.detach()
        try:
            copy = torch.empty_strided(source.size(), source.stride(),
                                       dtype=source.dtype, device=device)
            copy.copy_(source)
        except RuntimeError:
            # Overlapping layouts (expanded inputs) cannot be written to.
            copy = source.to(device, copy=True)
    return copy.requires_grad_(tensor.requires_grad)


def _names_cpu(leaf):
    if isinstance(leaf, torch.Tensor):
        return leaf.device.type == "cpu"
    if isinstance(leaf, (str, torch.device)):
        try:
            return torch.device(leaf).type == "cpu"
        except (RuntimeError, ValueError):
            return False  # a string that is not a device
    return False


def cpu_pinned(op, dtype, requires_grad):
    """For each sample op_db makes, the positions (in the flattened input,
    args and kwargs) of the tensors and device arguments that are on the CPU
    whatever the device the samples are for -- tensor_split's indices, to()'s
    explicit "cpu".  Learnt by making the samples for the meta device (cheap:
    no data); None where a sample function cannot do that."""
    try:
        torch.manual_seed(0)
        samples = list(op.sample_inputs("meta", dtype, requires_grad=requires_grad))
    except Exception:  # noqa: BLE001 -- data-dependent sample functions
        return None
    pinned = []
    for sample in samples:
        leaves, spec = tree_flatten((sample.input, sample.args, sample.kwargs))
        pinned.append((spec, frozenset(i for i, leaf in enumerate(leaves) if _names_cpu(leaf))))
    return pinned


def move_sample(sample, device, pinned=None):
    """The sample with every tensor in its (nested) input, args and kwargs
    copied to `device`, and every device argument naming the CPU retargeted
    to it -- except at the `pinned` positions (see cpu_pinned)."""
    leaves, spec = tree_flatten((sample.input, sample.args, sample.kwargs))
    pinned_spec, keep = pinned or (spec, frozenset())
    if pinned_spec != spec:
        keep = frozenset()  # the meta samples differ in shape: no knowledge
    moved = []
    for index, leaf in enumerate(leaves):
        target = "cpu" if index in keep else device
        if isinstance(leaf, torch.Tensor):
            leaf = _copy_tensor(leaf, target)
        elif _names_cpu(leaf) and index not in keep:
            leaf = device if isinstance(leaf, str) else torch.device(device)
        moved.append(leaf)
    input, args, kwargs = tree_unflatten(moved, spec)
    return sample.__class__(input, args=args, kwargs=kwargs,
                            output_process_fn_grad=sample.output_process_fn_grad,
                            name=sample.name)


def _run(op, sample):
    result = op(sample.input, *sample.args, **sample.kwargs)
    return sample.output_process_fn_grad(result)


def _gradient_inputs(sample):
    leaves, _ = tree_flatten((sample.input, sample.args, sample.kwargs))
    return [t for t in leaves if isinstance(t, torch.Tensor) and t.requires_grad]


def _backward_seeds(outputs, inputs):
    """(differentiable outputs, ones like them on `device`), or None when
    there is nothing to differentiate.  Seeding the backward with ones gives
    the gradients of the sum of the outputs without computing that sum: the
    harness's own ops (sum and its backward) stay out of the op's count."""
    leaves, _ = tree_flatten(outputs)
    outs = [t for t in leaves if isinstance(t, torch.Tensor) and t.requires_grad]
    if not outs or not inputs:
        return None
    return outs, [_copy_tensor(torch.ones(out.shape, dtype=out.dtype), out.device)
                  for out in outs]


def _gradients(seeds, inputs):
    """Gradients w.r.t. `inputs` (None for one the outputs do not use)."""
    outs, ones = seeds
    return torch.autograd.grad(outs, inputs, ones, allow_unused=True)


def _tolerance(dtype, override):
    if not (dtype.is_floating_point or dtype.is_complex):
        return {"atol": 0.0, "rtol": 0.0}
    rtol, atol = torch.testing._comparison.default_tolerances(dtype)
    floor_atol, floor_rtol = override or (0.0, 0.0)
    return {"atol": max(atol, _COMPARE_TOLERANCE, floor_atol),
            "rtol": max(rtol, _COMPARE_TOLERANCE, floor_rtol)}


def _first_lines(text, count=1):
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return "; ".join(lines[:count])


def _compare_leaf(actual, expected, device_type, values, tolerance, where):
    if not isinstance(expected, torch.Tensor):
        if values and isinstance(expected, (bool, int, float, complex)):
            torch.testing.assert_close(actual, expected, equal_nan=True,
                                       msg=lambda m: f"{where}: {_first_lines(m, 3)}")
        elif values and actual != expected:
            raise Mismatch(f"{where}: {actual!r} != {expected!r}")
        return
    if not isinstance(actual, torch.Tensor):
        raise Mismatch(f"{where}: got {type(actual).__name__}, expected a tensor")
    if device_type is not None and actual.device.type != device_type:
        raise Mismatch(f"{where}: result on {actual.device}, expected {device_type}")
    if actual.requires_grad != expected.requires_grad:
        raise Mismatch(f"{where}: requires_grad {actual.requires_grad}, "
                       f"expected {expected.requires_grad}")
    if actual.dtype != expected.dtype or actual.shape != expected.shape:
        raise Mismatch(f"{where}: {actual.dtype}{list(actual.shape)}, "
                       f"expected {expected.dtype}{list(expected.shape)}")
    if values:
        torch.testing.assert_close(
            actual.detach().cpu(), expected.detach(), equal_nan=True,
            check_device=False, check_stride=False,
            msg=lambda m: f"{where}: {_first_lines(m, 4)}",
            **_tolerance(expected.dtype, tolerance))


def compare(actual, expected, device_type, values=True, tolerance=None, what="output"):
    """Raises Mismatch/AssertionError when `actual` (on the device) is not
    `expected` (on the CPU): same nesting, tensors on `device_type` (None: on
    any device), same dtypes and shapes, and (when `values`) close values."""
    actual_leaves, actual_spec = tree_flatten(actual)
    expected_leaves, expected_spec = tree_flatten(expected)
    if actual_spec != expected_spec:
        raise Mismatch(f"{what}: structure {_first_lines(actual_spec)} "
                       f"!= {_first_lines(expected_spec)}")
    single = len(expected_leaves) == 1
    for index, (a, e) in enumerate(zip(actual_leaves, expected_leaves)):
        where = what if single else f"{what}[{index}]"
        _compare_leaf(a, e, device_type, values, tolerance, where)


@dataclasses.dataclass
class _Case:
    """A sample with its CPU results, computed once for every device run."""
    index: int
    sample: object          # the pristine sample, on the CPU
    expected: object
    expected_grads: object  # None: gradients are not compared
    pinned: object          # see cpu_pinned
    asks_for_cpu: bool      # a device argument stays "cpu": so may the results
    cpu_off: str = None     # held to the float64 truth: where the CPU's own result misses it


def _asks_for_cpu(sample, pinned):
    if pinned is None:
        return False
    leaves, spec = tree_flatten((sample.input, sample.args, sample.kwargs))
    pinned_spec, keep = pinned
    return spec == pinned_spec and any(not isinstance(leaves[i], torch.Tensor) for i in keep)


def _cpu_grads(expected, cpu_sample, with_grads):
    if not with_grads:
        return None
    try:
        inputs = _gradient_inputs(cpu_sample)
        seeds = _backward_seeds(expected, inputs)
        return None if seeds is None else _gradients(seeds, inputs)
    except Exception:
        return None


def _widened(sample, dtype):
    """The CPU sample with every `dtype` tensor widened (exactly) to float64."""
    def widen(leaf):
        if isinstance(leaf, torch.Tensor) and leaf.dtype == dtype:
            return leaf.detach().double().requires_grad_(leaf.requires_grad)
        return leaf
    leaves, spec = tree_flatten((sample.input, sample.args, sample.kwargs))
    input, args, kwargs = tree_unflatten([widen(leaf) for leaf in leaves], spec)
    return sample.__class__(input, args=args, kwargs=kwargs,
                            output_process_fn_grad=sample.output_process_fn_grad,
                            name=sample.name)


def _rounded(results, dtype):
    """float64 tensors among `results` rounded to `dtype` (requires_grad kept)."""
    leaves, spec = tree_flatten(results)
    return tree_unflatten([leaf.to(dtype) if isinstance(leaf, torch.Tensor)
                           and leaf.dtype == torch.float64 else leaf
                           for leaf in leaves], spec)


def _float64_truth(op, sample, dtype, with_grads):
    """(outputs, gradients) of the op in float64 on the sample, rounded to dtype."""
    wide = _widened(move_sample(sample, "cpu"), dtype)
    outputs = _run(op, wide)
    grads = _cpu_grads(outputs, wide, with_grads)
    return _rounded(outputs, dtype), None if grads is None else _rounded(list(grads), dtype)


def _cpu_cases(op, dtype, with_grads, max_samples, truth=False, tolerance=None):
    """The samples with their CPU results -- or, with `truth`, their float64
    truth, each case noting where the CPU's own result misses it (compared
    at `tolerance`, as the device will be)."""
    torch.manual_seed(0)
    samples = list(op.sample_inputs("cpu", dtype, requires_grad=with_grads))
    pinned = cpu_pinned(op, dtype, with_grads)
    if pinned is None or len(pinned) != len(samples):
        pinned = [None] * len(samples)
    cases = []
    for index, sample in enumerate(samples[:max_samples]):
        cpu = move_sample(sample, "cpu")
        try:
            expected = _run(op, cpu)
        except Exception:
            continue  # the CPU rejects this sample: nothing to hold the device to
        grads = _cpu_grads(expected, cpu, with_grads)
        case = _Case(index, sample, expected, grads, pinned[index],
                     _asks_for_cpu(sample, pinned[index]))
        if truth:
            case.expected, case.expected_grads = _float64_truth(op, sample, dtype,
                                                                grads is not None)
            case.cpu_off = ""
            try:
                _compare_case(case, expected, grads, None, True, tolerance)
            except AssertionError as error:
                case.cpu_off = _reason(error)
        cases.append(case)
    return cases


def _run_on(op, sample, device):
    """The op's results for a sample already on `device`.  A sample with no
    tensor and no device= (a factory's, like arange(2)) runs with the device
    as the default device."""
    leaves, _ = tree_flatten((sample.input, sample.args, sample.kwargs))
    factory_default = not any(isinstance(leaf, torch.Tensor) for leaf in leaves) \
        and "device" not in sample.kwargs
    with torch.device(device) if factory_default else contextlib.nullcontext():
        return _run(op, sample)


def _compare_case(case, actual, grads, device_type, values, tolerance):
    where = f"sample {case.index}" + ("" if case.cpu_off is None else " (float64 truth)")
    output_device = None if case.asks_for_cpu else device_type
    compare(actual, case.expected, output_device, values, tolerance, f"{where} output")
    if case.expected_grads is not None:
        if grads is None:
            raise Mismatch(f"{where}: no differentiable output on the device")
        compare(list(grads), list(case.expected_grads), device_type, values,
                tolerance, f"{where} grad")


def _reason(error):
    text = _first_lines(error) or "(no message)"
    if not isinstance(error, AssertionError):
        text = f"{type(error).__name__}: {text}"
    return text[:_REASON_CHARS]


def _device_run(op, cases, device, fallback, fallback_mode, values, tolerance):
    """(error or None, ops that fell back) for every case on the device.  Only
    the op and its backward run under `fallback_mode` and count: moving the
    inputs there and the results back is the harness's work, not the op's."""
    device_type = torch.device(device).type
    hit, error = set(), None
    for case in cases:
        try:
            sample = move_sample(case.sample, device, case.pinned)
            with fallback.counting(fallback_mode, device_type, hit):
                actual = _run_on(op, sample, device)
            grads = seeds = None
            if case.expected_grads is not None:
                inputs = _gradient_inputs(sample)
                seeds = _backward_seeds(actual, inputs)
            if seeds is not None:
                with fallback.counting(fallback_mode, device_type, hit):
                    grads = _gradients(seeds, inputs)
            _compare_case(case, actual, grads, device_type, values, tolerance)
        except Exception as caught:  # noqa: BLE001 -- every failure is a verdict
            error = caught
            break
    try:
        _synchronize(device_type)  # an asynchronous error must not leak into the next run
    except Exception as caught:  # noqa: BLE001
        error = error or caught
    return error, sorted(hit)


def check(op, dtype, device, mode="both", max_samples=None):
    """The Verdict of OpInfo `op` (or its full name) in `dtype` on `device`
    against the CPU.

    mode "native": fallback as error; passes only if no op fell back.
    mode "fallback": fallback on; "native" if it passed with no op falling back.
    mode "both": native first, then with the fallback if that failed."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
    start = time.perf_counter()
    op = catalog.find_op(op) if isinstance(op, str) else op
    values_reason, tolerance = catalog.comparison_policy(op.full_name, dtype)
    deviation = reference.active(op.full_name, catalog.DTYPE_NAMES[dtype])
    verdict = Verdict(op.full_name, catalog.DTYPE_NAMES[dtype], FAILS,
                      gradients=catalog.tests_gradients(op, dtype),
                      values=values_reason is None,
                      reference="cpu" if deviation is None
                      else f"float64 truth: {deviation.reason}")
    fallback = _Fallback(torch.device(device).type)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            cases = _cpu_cases(op, dtype, verdict.gradients, max_samples,
                               deviation is not None, tolerance)
        except Exception as error:  # noqa: BLE001
            verdict.reason = f"sample inputs: {_reason(error)}"
            cases = None
        if cases == []:
            verdict.reason = "no sample input runs on the CPU"
        elif cases and deviation is not None and not any(c.cpu_off for c in cases):
            verdict.reason = ("stale tests/conformance/reference.py entry: the CPU's own "
                              "result matches the float64 truth here, although "
                              + deviation.condition)[:_REASON_CHARS]
        elif cases:
            verdict.samples = len(cases)
            verdict.gradients = any(c.expected_grads is not None for c in cases)
            _judge(verdict, op, cases, device, fallback, mode, values_reason, tolerance)
    verdict.seconds = round(time.perf_counter() - start, 3)
    return verdict


def _judge(verdict, op, cases, device, fallback, mode, values_reason, tolerance):
    values = values_reason is None
    native_error = None
    if mode in ("native", "both"):
        error, hit = _device_run(op, cases, device, fallback, "error", values, tolerance)
        if error is None and not hit:
            verdict.status = NATIVE
            return
        native_error = _reason(error) if error else f"fell back: {', '.join(hit)}"
        if mode == "native":
            verdict.fallback_ops, verdict.reason = hit, native_error
            return
    error, hit = _device_run(op, cases, device, fallback, "silent", values, tolerance)
    verdict.fallback_ops = hit
    if error is not None:
        verdict.reason = _reason(error)
    elif hit or native_error:
        # The native run's error says what is missing (or, with no op
        # falling back, what only goes wrong with the fallback as error).
        verdict.status, verdict.reason = FALLBACK, native_error or ""
    else:
        verdict.status = NATIVE
