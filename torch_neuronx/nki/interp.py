"""The interpreter: runs tile IR op by op on CPU tensors.  It is nki.simulate
(each op as the kernel's Python records it, so print shows values; new tiles
start as NaN) and the executor for machines without a C compiler (the
recorded trace, once per program).  Math is float32, rounded to the tile's
dtype on write, as the compiled kernels do."""
from __future__ import annotations

import itertools
import math

import torch
import torch.nn.functional as F

from .ir import eval_bound


def _base(store, v):
    key = v[2] if v[1] == "tile" else ("a", v[2])
    return store[key]


def _strided(store, v, env, sl=None):
    """v as a strided tensor; with sl, only that region (never reaching
    outside it: a masked view's full extent may leave its tensor)."""
    base = _base(store, v)
    off = v[4].eval(env)
    shape = v[5]
    if sl is not None:
        off += sum(s.start * st for s, st in zip(sl, v[6]))
        shape = [s.stop - s.start for s in sl]
    return base.as_strided(shape, v[6], base.storage_offset() + off)


def read_view(c, v):
    return _strided(c.store, v, {}).clone()


def _slices(dom, env):
    out = []
    for lo, hi in dom:
        a, b = eval_bound(lo, env, True), eval_bound(hi, env, False)
        out.append(slice(a, max(a, b)))
    return tuple(out)


_UNARY = {
    "copy": lambda x: x, "exp": torch.exp, "log": torch.log, "tanh": torch.tanh,
    "sigmoid": torch.sigmoid, "relu": torch.relu, "gelu": F.gelu,
    "gelu_apprx_tanh": lambda x: F.gelu(x, approximate="tanh"), "silu": F.silu,
    "rsqrt": torch.rsqrt, "sqrt": torch.sqrt, "square": torch.square,
    "reciprocal": torch.reciprocal, "abs": torch.abs, "negative": torch.neg,
    "sign": torch.sign, "erf": torch.erf, "sin": torch.sin, "cos": torch.cos,
}
_BINARY = {
    "add": torch.add, "subtract": torch.sub, "multiply": torch.mul, "divide": torch.div,
    "maximum": torch.maximum, "minimum": torch.minimum, "power": torch.pow,
    "greater": torch.gt, "less": torch.lt, "greater_equal": torch.ge,
    "less_equal": torch.le, "equal": torch.eq, "not_equal": torch.ne,
    "logical_and": lambda a, b: (a != 0) & (b != 0),
    "logical_or": lambda a, b: (a != 0) | (b != 0),
}
_CMP = {"<": torch.lt, "<=": torch.le, ">": torch.gt, ">=": torch.ge, "==": torch.eq}


def _coords(sl, d):
    shape = [1] * len(sl)
    shape[d] = sl[d].stop - sl[d].start
    return torch.arange(sl[d].start, sl[d].stop, dtype=torch.float32).reshape(shape)


def eval_expr(e, ins, sl, env):
    k = e[0]
    if k == "in":
        return ins[e[1]]
    if k == "c":
        return torch.tensor(e[1], dtype=torch.float32)
    if k == "lin":  # off + sum coef * coordinate
        v = torch.tensor(float(e[1].eval(env)))
        for d, c in e[2]:
            v = v + c * _coords(sl, d)
        return v
    if k == "pred":  # all(lin op 0)
        out = None
        for lin, op in e[1]:
            t = _CMP[op](eval_expr(lin, ins, sl, env), 0)
            out = t if out is None else out & t
        return out.float()
    if k == "round":
        return eval_expr(e[2], ins, sl, env).to(e[1]).float()
    if k == "where":
        c, a, b = (eval_expr(x, ins, sl, env) for x in e[1:])
        return torch.where(c != 0, a, b)
    args = [eval_expr(x, ins, sl, env) for x in e[1:]]
    if k in _UNARY:
        return _UNARY[k](args[0])
    return _BINARY[k](*args).float()


def run_op(op, store, env):
    k = op[0]
    if k == "alloc":
        return
    if k == "ew":
        _, _, dst, dom, expr, srcs = op
        sl = _slices(dom, env)
        if any(s.stop <= s.start for s in sl):
            return
        ins = [_strided(store, s, env, sl).float() for s in srcs]
        d = _strided(store, dst, env, sl)
        r = eval_expr(expr, ins, sl, env)
        d.copy_(torch.broadcast_to(r, d.shape).to(d.dtype))
    elif k == "red":
        _, _, dst, dom, expr, srcs, rop, axes, scale = op
        sl = _slices(dom, env)
        if any(s.stop <= s.start for s in sl):
            return
        ins = [_strided(store, s, env, sl).float() for s in srcs]
        r = torch.broadcast_to(eval_expr(expr, ins, sl, env), ins[0].shape if ins else ())
        if rop == "sum":
            r = r.sum(dim=axes, keepdim=True) * scale
        else:
            r = r.amax(dim=axes, keepdim=True) if rop == "max" else r.amin(dim=axes, keepdim=True)
        d = _strided(store, dst, env, tuple(slice(0, 1) if i in axes else s
                                            for i, s in enumerate(sl)))
        d.copy_(r.to(d.dtype))
    elif k == "mm":
        _, _, dst, _, st, mv, acc = op
        d = _strided(store, dst, env)
        r = _strided(store, st, env).float().T @ _strided(store, mv, env).float()
        d.copy_(d + r if acc else r)
    elif k == "tr":
        _, _, dst, _, src = op
        _strided(store, dst, env).copy_(_strided(store, src, env).T.to(dst[3]))
    else:
        raise AssertionError(k)


def run_tree(items, store, env):
    """Runs a traced block (ops and unrolled "loop" nodes) for one program."""
    for it in items:
        if it[0] == "loop":
            for body in it[3]:
                run_tree(body, store, env)
        elif it[0] == "alloc":
            _, _, tid, space, _ = it
            if tid not in store:
                store[tid] = None
        else:
            run_op(it, store, env)


def run_program_grid(trace, tensors):
    """The table-driven executor: every program of trace.grid over tensors
    (CPU), tiles as fresh CPU tensors."""
    store = {("a", i): t for i, t in enumerate(tensors)}
    for tid, info in trace.tiles.items():
        store[tid] = torch.empty(math.prod(info["shape"]), dtype=info["dtype"])
    for pid in itertools.product(*(range(g) for g in trace.grid)):
        env = {f"p{i}": v for i, v in enumerate(pid)}
        run_tree(trace.root, store, env)
