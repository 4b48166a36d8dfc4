"""Which (OpInfo, dtype) pairs exist, and what op_db itself says about
comparing each of them with the CPU (upstream's test_compare_cpu)."""
import functools

import torch
from torch.testing._internal.common_device_type import (onlyCUDA, precisionOverride,
                                                            toleranceOverride)
from torch.testing._internal.opinfo.core import DecorateInfo

# The dtypes the device is held to, in the column order of docs/ops.md.
DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16,
          torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8,
          torch.bool)
DTYPE_NAMES = {dtype: str(dtype).removeprefix("torch.") for dtype in DTYPES}
DTYPE_BY_NAME = {name: dtype for dtype, name in DTYPE_NAMES.items()}

# The upstream test whose skips and tolerance overrides apply to a
# device-versus-CPU comparison.
_UPSTREAM_TEST = ("TestCommon", "test_compare_cpu")


@functools.cache
def op_db():
    """op_db by OpInfo.full_name ("name" or "name.variant"), in op_db order.
    Imported lazily: the import costs seconds."""
    from torch.testing._internal.common_methods_invocations import op_db as ops
    by_name = {op.full_name: op for op in ops}
    if len(by_name) != len(ops):
        raise RuntimeError("op_db has two OpInfos with the same full_name")
    return by_name


def find_op(name):
    try:
        return op_db()[name]
    except KeyError:
        raise KeyError(f"no OpInfo named {name!r} in op_db") from None


def dtypes_of(op):
    """The dtypes of DTYPES that `op` supports on the CPU, in DTYPES order;
    none for the few OpInfos upstream tests on CUDA alone (jiterator ops:
    they have no CPU reference to compare with)."""
    if onlyCUDA in op.decorators:
        return []
    supported = op.supported_dtypes("cpu")
    return [dtype for dtype in DTYPES if dtype in supported]


def all_pairs(names=None, dtypes=DTYPES):
    """(full_name, dtype) for every selected op and every dtype of `dtypes`
    it supports on the CPU."""
    ops = op_db() if names is None else {name: find_op(name) for name in names}
    return [(name, dtype) for name, op in ops.items()
            for dtype in dtypes_of(op) if dtype in dtypes]


def tests_gradients(op, dtype):
    return op.supports_autograd and dtype in op.supported_backward_dtypes("cpu")


def _upstream_decorators(op, dtype):
    # op.decorators mixes DecorateInfo rules with bare decorators that apply
    # to every test.  device_type=None in a rule means every device; a rule
    # naming cuda, xpu or mps is about that backend, not about the comparison.
    for info in op.decorators:
        if not isinstance(info, DecorateInfo):
            yield info
        elif info.is_active(*_UPSTREAM_TEST, None, dtype, {}):
            yield from info.decorators


def _skip_reason(decorator):
    """The reason given to unittest.skip(reason), or None for any other
    decorator (the reason lives in the closure of the decorator it returns)."""
    if getattr(decorator, "__qualname__", "") != "skip.<locals>.decorator":
        return None
    cells = decorator.__closure__ or ()
    reasons = [c.cell_contents for c in cells if isinstance(c.cell_contents, str)]
    return reasons[0] if reasons else "skipped upstream"


def _unrepeatable(op):
    """Why two devices cannot agree on the op's values, or None.  op_db marks
    uninitialised outputs with has_nondeterministic_output and random ops by
    wrapping them in wrapper_set_seed -- which makes them repeatable on one
    generator, not across the CPU's and a device's."""
    if op.has_nondeterministic_output:
        return "uninitialised output"
    code = getattr(op.op, "__code__", None)
    if code is not None and "wrapper_set_seed" in code.co_names:
        return "random output"
    return None


@functools.cache
def comparison_policy(name, dtype):
    """How to compare `name` in `dtype` with the CPU, from what op_db says:
    (values_reason, tolerance).  values_reason is None when values are
    compared, else why only metadata (structure, shapes, dtypes) can be --
    the outputs are random, uninitialised or undefined.  tolerance is the
    op's toleranceOverride (atol, rtol) for this comparison, or None."""
    op = find_op(name)
    values_reason, atol, rtol = _unrepeatable(op), 0.0, 0.0
    for decorator in _upstream_decorators(op, dtype):
        reason = _skip_reason(decorator)
        if reason is not None:
            values_reason = reason
        elif isinstance(decorator, toleranceOverride) and dtype in decorator.d:
            atol = max(atol, decorator.d[dtype].atol)
            rtol = max(rtol, decorator.d[dtype].rtol)
        elif isinstance(decorator, precisionOverride) and dtype in decorator.d:
            atol = max(atol, decorator.d[dtype])
        # unittest.expectedFailure: upstream's own CPU/GPU differences, and
        # anything else: not about values -- compare anyway.
    return values_reason, ((atol, rtol) if atol or rtol else None)


# The representative slice that `make test` runs (tests/test_conformance_slice.py):
# a few OpInfos of every family, chosen to finish in about a minute.
SLICE = (
    # unary and activation
    "abs", "neg", "exp", "log", "sqrt", "sin", "sigmoid", "nn.functional.relu",
    "nn.functional.gelu",
    # binary, comparison, selection, type promotion
    "add", "mul", "div.no_rounding_mode", "pow", "maximum", "eq", "where",
    # reductions, scans, normalised exponentials
    "sum", "mean", "amax", "argmax", "var", "cumsum", "softmax", "log_softmax",
    # layout and copies
    "clone", "cat", "reshape", "transpose", "expand", "contiguous",
    # factories and random
    "zeros_like", "full_like", "arange", "nn.functional.dropout",
    # indexing
    "index_select", "gather", "scatter_add", "masked_fill", "index_put",
    "nn.functional.embedding",
    # sort
    "sort", "topk",
    # GEMM, conv, normalisation, pooling, attention, losses
    "mm", "bmm", "addmm", "nn.functional.linear", "nn.functional.conv2d",
    "nn.functional.layer_norm", "nn.functional.batch_norm",
    "nn.functional.max_pool2d", "nn.functional.avg_pool2d",
    "nn.functional.scaled_dot_product_attention", "nn.functional.cross_entropy",
    "nn.functional.mse_loss",
)
