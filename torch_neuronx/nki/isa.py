"""nki.isa (nisa): the engines' instructions.  Each call accepts both
dialects: Beta 1 returns a new tile (`t = nisa.exp...(data)`), Beta 2 writes
its `dst` (first positional argument or dst=) and returns it."""
from __future__ import annotations

import numpy as np

from . import language as nl
from . import trace as T
from .trace import Ref, ctx, fail

# Engines (accepted and ignored: one CPU runs them all).
tensor_engine, vector_engine, scalar_engine, gpsimd_engine, unknown_engine = range(5)

_NP = {"add": "add", "subtract": "subtract", "multiply": "multiply", "divide": "divide",
       "true_divide": "divide", "maximum": "maximum", "minimum": "minimum", "max": "maximum",
       "amax": "maximum", "min": "minimum", "amin": "minimum", "power": "power",
       "greater": "greater", "less": "less", "greater_equal": "greater_equal",
       "less_equal": "less_equal", "equal": "equal", "not_equal": "not_equal",
       "exp": "exp", "log": "log", "tanh": "tanh", "sqrt": "sqrt", "abs": "abs",
       "absolute": "abs", "negative": "negative", "square": "square",
       "reciprocal": "reciprocal", "sign": "sign", "logical_and": "logical_and",
       "logical_or": "logical_or", "sum": "add", "copy": "copy", "identity": "copy",
       "bypass": "copy", "sin": "sin", "cos": "cos"}


def opname(f):
    if f is None:
        return None
    n = getattr(f, "_nki_op", None) or getattr(f, "__name__", None)
    if n in _NP:
        return _NP[n]
    if n in ("sigmoid", "relu", "gelu", "silu", "rsqrt", "gelu_apprx_tanh", "erf"):
        return n
    fail(f"unsupported ALU/activation function {f!r}")


def _dst(args, kw, n_beta1):
    """(dst or None, remaining positional args): Beta 2 passes dst first."""
    if "dst" in kw:
        return kw.pop("dst"), list(args)
    if len(args) > n_beta1 and isinstance(args[0], Ref) and isinstance(args[1], Ref):
        return args[0], list(args[1:])
    return None, list(args)


def _kw(rest, kw, names, defaults):
    vals = dict(zip(names, rest))
    for n, d in zip(names, defaults):
        vals.setdefault(n, kw.pop(n, d))
    return [vals[n] for n in names]


# ----------------------------------------------------------------- data movement


def dma_copy(*args, **kw):
    vals = dict(zip(["dst", "src"], args))
    vals.update({k: kw[k] for k in ("dst", "src") if k in kw})
    nl._copy_into(vals["dst"], vals["src"], kw.get("mask"))
    return vals["dst"]


def tensor_copy(*args, **kw):
    dst, rest = _dst(args, kw, 1)
    src, dtype, mask = _kw(rest, kw, ["src", "dtype", "mask"], [None, None, None])
    if dst is None:
        return nl.copy(src, dtype=dtype, mask=mask)
    nl._copy_into(dst, src, mask)
    return dst


def memset(*args, **kw):
    if args and isinstance(args[0], Ref) or isinstance(kw.get("dst"), Ref):
        dst = kw.pop("dst") if "dst" in kw else args[0]
        value, = _kw(list(args[1:]), kw, ["value"], [0.0])
        nl._emit_ew(dst, ("c", float(value)), [], kw.get("mask"))
        return dst
    shape, value, dtype = _kw(list(args), kw, ["shape", "value", "dtype"], [None, 0.0, None])
    return nl.full(shape, value, dtype)


def iota(*args, **kw):
    dst, rest = _dst(args, kw, 1)
    expr, dtype = _kw(rest, kw, ["expr", "dtype"], [None, nl.int32])
    expr = T.Idx.of(expr)
    dims = {}
    for ax, c in expr.axes.items():
        dims[ax.slot] = ax
    nd = max(dims) + 1 if dims else 1
    shape = tuple(dims[d].n if d in dims else 1 for d in range(nd))
    if len(shape) == 1:
        shape = shape + (1,)
    lin = ("lin", expr.off, tuple((ax.slot, c) for ax, c in expr.axes.items()))
    if dst is None:
        dst = ctx().new_tile(shape, nl._dtype(dtype), "sbuf")
    nl._emit_ew(dst, lin, [], kw.get("mask"))
    return dst


# ----------------------------------------------------------------- tensor engine


def nc_matmul(*args, **kw):
    dst, rest = _dst(args, kw, 2)
    stationary, moving, acc = _kw(rest, kw, ["stationary", "moving", "accumulate"],
                                  [None, None, None])
    return nl._mm(dst, stationary, moving, acc)


def nc_transpose(*args, **kw):
    dst, rest = _dst(args, kw, 1)
    data, = _kw(rest, kw, ["data"], [None])
    x = nl._transpose(dst, data, "psum" if data.shape[1] * 4 <= T.PSUM_BANK_BYTES else "sbuf")
    return x


# ----------------------------------------------------------------- vector/scalar engines


def _scalar_op(op, a, b, reverse):
    return (op, b, a) if reverse else (op, a, b)


def tensor_scalar(*args, **kw):
    dst, rest = _dst(args, kw, 3)
    data, op0, operand0, reverse0, op1, operand1, reverse1, dtype, mask = _kw(
        rest, kw, ["data", "op0", "operand0", "reverse0", "op1", "operand1", "reverse1",
                   "dtype", "mask"], [None, None, None, False, None, None, False, None, None])
    refs, e = nl._operands([data] + [o for o in (operand0, operand1) if o is not None])
    ins = iter(e[1:])
    expr = _scalar_op(opname(op0), e[0], next(ins), reverse0)
    if op1 is not None:
        expr = _scalar_op(opname(op1), expr, next(ins), reverse1)
    return _ew_into(dst, expr, refs, dtype, mask)


def _ew_into(dst, expr, refs, dtype, mask):
    shape = nl._bshape([r.shape for r in refs])
    if dst is None:
        dst = ctx().new_tile(shape, nl._dtype(dtype) or nl._promote(refs), "sbuf")
    nl._emit_ew(dst, expr, refs, mask)
    return dst


def tensor_tensor(*args, **kw):
    dst, rest = _dst(args, kw, 3)
    data1, data2, op, dtype, mask = _kw(rest, kw, ["data1", "data2", "op", "dtype", "mask"],
                                        [None, None, None, None, None])
    refs, e = nl._operands([data1, data2])
    return _ew_into(dst, (opname(op), e[0], e[1]), refs, dtype, mask)


def _act_expr(op, e, bias, scale):
    x = e[0]
    k = 1
    if isinstance(scale, Ref):
        x = ("multiply", x, e[k])
        k += 1
    elif scale != 1.0:
        x = ("multiply", x, ("c", float(scale)))
    if bias is not None:
        x = ("add", x, e[k])
    return (opname(op), x)


def activation(*args, **kw):
    if args and isinstance(args[0], Ref) or "dst" in kw:
        dst = kw.pop("dst") if "dst" in kw else args[0]
        rest = list(args[1:]) if "dst" not in kw and args and args[0] is dst else list(args)
    else:
        dst, rest = None, list(args)
    op, data, bias, scale, dtype, mask = _kw(rest, kw, ["op", "data", "bias", "scale", "dtype",
                                                        "mask"], [None, None, None, 1.0, None,
                                                                  None])
    operands = [data] + ([scale] if isinstance(scale, Ref) else []) + \
        ([bias] if bias is not None else [])
    refs, e = nl._operands(operands)
    return _ew_into(dst, _act_expr(op, e, bias, scale), refs, dtype, mask)


def activation_reduce(*args, **kw):
    """activation, and its reduction along the free axis into reduce_res."""
    op, data, reduce_op, reduce_res, bias, scale, dtype, mask = _kw(
        list(args), kw, ["op", "data", "reduce_op", "reduce_res", "bias", "scale", "dtype",
                         "mask"], [None, None, np.add, None, None, 1.0, None, None])
    out = activation(op, data, bias=bias, scale=scale, dtype=dtype, mask=mask)
    r = {"add": "sum", "maximum": "max", "minimum": "min"}[opname(reduce_op)]
    nl._reduce(r, out, 1, keepdims=True, dst=reduce_res)
    return out


def tensor_reduce(*args, **kw):
    dst, rest = _dst(args, kw, 3)
    op, data, axis, negate, keepdims, dtype, mask = _kw(
        rest, kw, ["op", "data", "axis", "negate", "keepdims", "dtype", "mask"],
        [None, None, None, False, False, None, None])
    r = {"add": "sum", "maximum": "max", "minimum": "min"}[opname(op)]
    out = nl._reduce(r, data, axis, keepdims, dtype, mask, dst=dst)
    if negate:
        out = nl._apply("negative", [out], dst=out)
    return out


def affine_select(*args, **kw):
    dst, rest = _dst(args, kw, 3)
    pred, on_true, on_false, dtype, mask = _kw(
        rest, kw, ["pred", "on_true_tile", "on_false_value", "dtype", "mask"],
        [None, None, None, None, None])
    if not isinstance(pred, T.Pred):
        fail("affine_select's predicate compares affine index expressions")
    terms = []
    for e, op in pred.terms:
        lin = ("lin", e.off, tuple((ax.slot, c) for ax, c in e.axes.items()))
        terms.append((lin, op))
    refs, e = nl._operands([on_true, on_false])
    expr = ("where", ("pred", tuple(terms)), e[0], e[1])
    return _ew_into(dst, expr, refs, dtype, mask)


def select(*args, **kw):
    dst, rest = _dst(args, kw, 3)
    pred, on_true, on_false, dtype, mask = _kw(
        rest, kw, ["pred", "on_true", "on_false", "dtype", "mask"], [None] * 5)
    refs, e = nl._operands([pred, on_true, on_false])
    return _ew_into(dst, ("where", e[0], e[1], e[2]), refs, dtype, mask)


# ----------------------------------------------------------------- batch-norm statistics
# bn_stats writes 6 values per partition and bn_aggr combines groups of them;
# the layout is ours (NKI leaves it opaque): [count, mean, M2, 0, 0, 0], with
# M2 the sum of squared deviations, combined by Chan's parallel update.


def bn_stats(*args, **kw):
    dst, rest = _dst(args, kw, 1)
    data, dtype, mask = _kw(rest, kw, ["data", "dtype", "mask"], [None, nl.float32, None])
    nl._src(data)
    if len(data.shape) != 2:
        fail("bn_stats takes a [P, F] tile")
    if data.shape[1] > nl.tile_size.bn_stats_fmax:
        fail(f"bn_stats reads at most {nl.tile_size.bn_stats_fmax} elements per partition")
    c = ctx()
    P = data.shape[0]
    if dst is None:
        dst = c.new_tile((P, 6), nl._dtype(dtype) or nl.float32, "sbuf")
    # the count honours the mask: a reduction of ones over the same domain
    col = [dst[:, k:k + 1] for k in range(6)]
    nl._reduce("sum", data, 1, keepdims=True, mask=mask, dst=col[0], expr=("c", 1.0))
    total = nl._reduce("sum", data, 1, keepdims=True, mask=mask, dtype=nl.float32)
    nl._apply("divide", [total, col[0]], dst=col[1])
    nl._reduce("sum", data, 1, keepdims=True, mask=mask, dst=col[2],
               expr=("square", ("subtract", ("in", 0), ("in", 1))),
               srcs=[data, col[1]])
    for k in range(3, 6):
        nl._emit_ew(col[k], ("c", 0.0), [], None)
    return dst


def bn_aggr(*args, **kw):
    dst, rest = _dst(args, kw, 1)
    data, dtype = _kw(rest, kw, ["data", "dtype"], [None, nl.float32])
    nl._src(data)
    if len(data.shape) != 2 or data.shape[1] % 6:
        fail("bn_aggr takes [P, 6 * k] bn_stats results")
    c = ctx()
    P = data.shape[0]
    if dst is None:
        dst = c.new_tile((P, 2), nl._dtype(dtype) or nl.float32, "sbuf")
    n, mean, m2 = (data[:, k::6] for k in range(3))
    count = nl._reduce("sum", n, 1, keepdims=True, dtype=nl.float32)
    weighted = nl._reduce("sum", n, 1, keepdims=True, dtype=nl.float32,
                          expr=("multiply", ("in", 0), ("in", 1)), srcs=[n, mean])
    nl._apply("divide", [weighted, count], dst=dst[:, 0:1])
    mu = dst[:, 0:1]
    spread = nl._reduce("sum", n, 1, keepdims=True, dtype=nl.float32,
                        expr=("add", ("in", 2),
                              ("multiply", ("in", 0),
                               ("square", ("subtract", ("in", 1), ("in", 3))))),
                        srcs=[n, mean, m2, mu])
    nl._apply("divide", [spread, count], dst=dst[:, 1:2])
    return dst
