"""nki.language (nl): tiles, memory, index expressions and the tile math the
canonical NKI kernels use, in both published dialects.  Every call records
tile IR through trace.py; nothing here computes (except in nki.simulate,
where the interpreter runs each op as it is recorded)."""
from __future__ import annotations

import builtins
import math

import torch

from . import trace as T
from .ir import Aff, full_dom, view
from .trace import Idx, Pred, Ref, ctx, ds, fail  # noqa: F401  (ds is public API)

# ----------------------------------------------------------------- dtypes and buffers
float32 = tfloat32 = torch.float32
bfloat16 = torch.bfloat16
float16 = torch.float16
float64 = torch.float64
int32 = torch.int32
int16 = torch.int16
int8 = torch.int8
uint8 = torch.uint8
int64 = torch.int64
bool_ = torch.bool


class _Buffer(str):
    pass


hbm = _Buffer("hbm")
shared_hbm = _Buffer("shared_hbm")
private_hbm = _Buffer("private_hbm")
sbuf = _Buffer("sbuf")
psum = _Buffer("psum")
_HBM = ("hbm", "shared_hbm", "private_hbm")


class tile_size:
    pmax = 128
    psum_fmax = 512
    gemm_stationary_fmax = 128
    gemm_moving_fmax = 512
    bn_stats_fmax = 512
    psum_min = 1
    total_available_sbuf_size = T.SBUF_PARTITION_BYTES


def par_dim(n):
    """Marks the partition dimension of a shape; dimension 0 always is."""
    return int(n)


def _dtype(dt):
    if dt is None:
        return None
    if isinstance(dt, torch.dtype):
        return dt
    name = getattr(dt, "__name__", None) or getattr(dt, "name", None) or str(dt)
    table = {"float32": float32, "bfloat16": bfloat16, "float16": float16, "int32": int32,
             "int8": int8, "uint8": uint8, "int16": int16, "float64": float64, "bool": bool_,
             "bool_": bool_, "int64": int64}
    if name not in table:
        fail(f"unsupported dtype {dt!r}")
    return table[name]


# ----------------------------------------------------------------- index expressions


def arange(*args):
    r = builtins.range(*args)
    if r.step != 1:
        fail("nl.arange takes a unit step")
    return T.Idx(r.start, {T.Axis(len(r), 0): 1})


class _MGrid:
    def __getitem__(self, key):
        key = key if isinstance(key, tuple) else (key,)
        out = []
        for slot, k in enumerate(key):
            start = 0 if k.start is None else k.start
            out.append(T.Idx(start, {T.Axis(k.stop - start, slot): 1}))
        return out if len(out) > 1 else out[0]


mgrid = _MGrid()


def program_id(axis):
    c = ctx()
    if axis >= len(c.grid):
        return 0
    if c.eager:
        return c.pids[axis]
    return _Pid(0, [(f"p{axis}", 1)])


def num_programs(axes=None):
    g = ctx().grid
    if axes is None:
        return math.prod(g)
    return g[axes] if axes < len(g) else 1


def program_ndim():
    return len(ctx().grid)


class _Pid(Aff):
    """A program id while tracing: usable in index arithmetic, not in Python
    control flow (one trace serves every program of the grid)."""

    def _ctl(self, *_):
        fail("nl.program_id() is symbolic while tracing: use it in indices and masks, "
             "not in Python control flow")

    __bool__ = __index__ = __int__ = __lt__ = __le__ = __gt__ = __ge__ = _ctl

    def __add__(self, o):
        if isinstance(o, Idx):
            return o + self
        return _Pid.wrap(Aff.__add__(self, o))

    __radd__ = __add__

    def __sub__(self, o):
        if isinstance(o, Idx):
            return -o + self
        return _Pid.wrap(Aff.__sub__(self, o))

    def __rsub__(self, o):
        return _Pid.wrap(Aff.__rsub__(self, o))

    def __mul__(self, o):
        if isinstance(o, Idx):
            return o * self
        return _Pid.wrap(Aff.__mul__(self, o))

    __rmul__ = __mul__

    def __neg__(self):
        return _Pid.wrap(Aff.__neg__(self))

    def __hash__(self):
        return Aff.__hash__(self)

    def __eq__(self, o):
        return Aff.__eq__(self, o)

    @staticmethod
    def wrap(a):
        if a is NotImplemented or a.is_const():
            return a if a is NotImplemented else a.c
        return _Pid(a.c, a.terms)


# ----------------------------------------------------------------- loops


def _range(parallel):
    def r(*args, **_kw):
        rr = builtins.range(*args)
        c = ctx()
        if rr.start == 0 and rr.step == 1:
            return c.loop(len(rr), parallel)
        return (rr.start + i * rr.step for i in c.loop(len(rr), parallel))
    return r


affine_range = _range(True)
sequential_range = _range(False)
static_range = _range(False)
range = _range(None)  # noqa: A001  (Beta 2's plain range; parallelism is analysed)


def device_print(prefix, x):
    if ctx().eager:
        print(prefix, x)


# ----------------------------------------------------------------- memory


def ndarray(shape, dtype, buffer=None, name="", **_kw):
    dtype = _dtype(dtype)
    shape = tuple(int(s) for s in (shape if isinstance(shape, (tuple, list)) else (shape,)))
    buffer = sbuf if buffer is None else buffer
    c = ctx()
    if str(buffer) in _HBM:
        strides, acc = [], 1
        for s in reversed(shape):
            strides.append(acc)
            acc *= s
        return c.new_arg(shape, dtype, tuple(reversed(strides)), "out", name)
    if str(buffer) not in ("sbuf", "psum"):
        fail(f"unknown buffer {buffer!r}")
    return c.new_tile(shape, dtype, str(buffer))


def zeros(shape, dtype, buffer=None, **kw):
    return full(shape, 0.0, dtype, buffer, **kw)


def ones(shape, dtype, buffer=None, **kw):
    return full(shape, 1.0, dtype, buffer, **kw)


def full(shape, fill_value, dtype, buffer=None, **kw):
    t = ndarray(shape, dtype, buffer, **kw)
    _emit_ew(t, ("c", float(fill_value)), [], None)
    return t


def empty_like(x, dtype=None, buffer=None, **kw):
    return ndarray(x.shape, dtype or x.dtype, buffer, **kw)


def zeros_like(x, dtype=None, buffer=None, **kw):
    return zeros(x.shape, dtype or x.dtype, buffer, **kw)


def _promote(refs):
    dts = [r.dtype for r in refs]
    if not dts:
        return float32
    if float32 in dts or any(not d.is_floating_point for d in dts) and any(
            d.is_floating_point for d in dts):
        return float32
    return dts[0]


def _bview(r, shape):
    """r broadcast to shape, NKI style: partition dims aligned, missing free
    dims appended as 1, size-1 dims read with stride 0."""
    _, sp, st, dt, off, rs, rst = r.v
    rs, rst = list(rs), list(rst)
    if len(rs) > len(shape):
        if all(s == 1 for s in rs[len(shape):]):
            rs, rst = rs[:len(shape)], rst[:len(shape)]
        else:
            fail(f"cannot broadcast shape {tuple(r.shape)} to {tuple(shape)}")
    rs += [1] * (len(shape) - len(rs))
    rst += [0] * (len(shape) - len(rst))
    for d, (a, b) in enumerate(zip(rs, shape)):
        if a == b:
            continue
        if a != 1:
            fail(f"cannot broadcast shape {tuple(r.shape)} to {tuple(shape)}")
        rst[d] = 0
    return view(sp, st, dt, off, shape, rst)


def _bshape(shapes):
    n = builtins.max(len(s) for s in shapes)
    out = []
    for d in builtins.range(n):
        sizes = {s[d] if d < len(s) else 1 for s in shapes}
        sizes.discard(1)
        if len(sizes) > 1:
            fail(f"shapes {[tuple(s) for s in shapes]} do not broadcast")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def _src(r, what="operand"):
    if not isinstance(r, Ref):
        fail(f"{what} must be a tile, got {type(r).__name__}")
    c = ctx()
    if r.space == "arg":
        fail(f"{what} is in HBM: compute ops read on-chip tiles (nl.load it first)")
    info = c.tiles[r.v[2]]
    if info.get("moved"):
        fail("this temporary was written in place (`psum += nl.matmul(...)` or "
             "`t[...] = nl.op(...)`) and cannot be read again")
    c.read_tiles = getattr(c, "read_tiles", set())
    return r


def _check(r, dom, what):
    T.check_ref(r, dom, what)


def _emit_ew(dst, expr, srcs, mask, kind="ew"):
    """dst[...] = expr over srcs (Refs broadcast to dst's shape)."""
    c = ctx()
    if dst.space == "tile" and any(isinstance(s, Ref) and s.v[1:3] == dst.v[1:3] and
                                   s.v != dst.v for s in srcs):
        # dst overlaps a source through another view (a shift): the sources
        # are read whole first, as on hardware, through a temporary
        tmp = c.new_tile(dst.shape, dst.dtype, "sbuf")
        _emit_ew(tmp, expr, srcs, mask, kind)
        srcs, expr = [tmp], ("in", 0)
    dom = T.domain(dst, mask, srcs)
    _check(dst, dom, "store" if dst.space == "arg" else "write")
    views = []
    for s in srcs:
        if s.shape == dst.shape:
            _check(s, dom, "load" if s.space == "arg" else "read")
        else:
            _check(s, full_dom(s.shape), "read")
        views.append(_bview(s, dst.shape))
        if s.space == "arg":
            c.read_args.add(s.v[2])
    if dst.space == "arg":
        c.written_args.setdefault(dst.v[2], T.user_loc())
    else:
        c.tiles[dst.v[2]]["written"] = True
    c.emit(("ew", T.user_loc(), dst.v, dom, expr, tuple(views)))


def _operands(args):
    refs, expr_args = [], []
    for a in args:
        if isinstance(a, Ref):
            _src(a)
            expr_args.append(("in", len(refs)))
            refs.append(a)
        elif isinstance(a, (int, float, bool)):
            expr_args.append(("c", float(a)))
        elif isinstance(a, Aff):  # a program id expression, known at run time
            expr_args.append(("lin", a, ()))
        elif hasattr(a, "item") and getattr(a, "ndim", 1) == 0:
            expr_args.append(("c", float(a.item())))
        else:
            fail(f"operand must be a tile or a number, got {type(a).__name__}")
    return refs, expr_args


def _apply(name, args, dtype=None, mask=None, dst=None, build=None):
    """A new tile (or dst) = name(args...), computed in float32, rounded to
    the tile's dtype once."""
    refs, eargs = _operands(args)
    if not refs and dst is None:
        return _PY[name](*[e[1] for e in eargs])
    expr = build(*eargs) if build else (name,) + tuple(eargs)
    shape = _bshape([r.shape for r in refs]) if refs else dst.shape
    if dst is None:
        dst = ctx().new_tile(shape, _dtype(dtype) or _promote(refs), "sbuf")
    elif _bshape([shape, dst.shape]) != tuple(dst.shape):
        fail(f"result of shape {shape} does not fit dst {tuple(dst.shape)}")
    _emit_ew(dst, expr, refs, mask)
    return dst


_PY = {
    "add": lambda a, b: a + b, "subtract": lambda a, b: a - b,
    "multiply": lambda a, b: a * b, "divide": lambda a, b: a / b,
    "maximum": max, "minimum": min, "power": lambda a, b: a ** b,
    "exp": math.exp, "log": math.log, "tanh": math.tanh, "sqrt": math.sqrt,
    "rsqrt": lambda a: 1 / math.sqrt(a), "square": lambda a: a * a,
    "reciprocal": lambda a: 1 / a, "abs": abs, "negative": lambda a: -a,
    "sigmoid": lambda a: 1 / (1 + math.exp(-a)), "relu": lambda a: max(a, 0.0),
    "copy": lambda a: a,
}


def _mk(name, arity):
    if arity == 1:
        def f(x, dtype=None, mask=None, **_kw):
            return _apply(name, [x], dtype, mask)
    else:
        def f(x, y, dtype=None, mask=None, **_kw):
            return _apply(name, [x, y], dtype, mask)
    f.__name__ = name
    f._nki_op = name
    return f


for _n in ("add", "subtract", "multiply", "divide", "maximum", "minimum", "power",
           "greater", "less", "greater_equal", "less_equal", "equal", "not_equal",
           "logical_and", "logical_or"):
    globals()[_n] = _mk(_n, 2)
for _n in ("exp", "log", "tanh", "sigmoid", "relu", "gelu", "silu", "rsqrt", "sqrt",
           "square", "reciprocal", "abs", "negative", "sign", "gelu_apprx_tanh", "erf",
           "sin", "cos"):
    globals()[_n] = _mk(_n, 1)
del _n


def copy(x, dtype=None, mask=None, **_kw):
    return _apply("copy", [x], dtype, mask)


def where(condition, x, y, dtype=None, mask=None, **_kw):
    return _apply("where", [condition, x, y], dtype, mask)


def broadcast_to(x, shape):
    shape = tuple(int(s) for s in shape)
    _src(x)
    return Ref(_bview(x, shape), name=x.name)


# ----------------------------------------------------------------- memory movement


def load(src, mask=None, dtype=None, **_kw):
    if not isinstance(src, Ref):
        fail("nl.load takes an HBM tensor view")
    dst = ctx().new_tile(src.shape or (1,), _dtype(dtype) or src.dtype, "sbuf")
    if not src.shape:
        src = Ref(view(*src.v[1:5], (1,), (0,)), (None,), src.checks)
    _emit_ew(dst, ("in", 0), [src], mask)
    dst.axes = src.axes
    return dst


def store(dst, value, mask=None, **_kw):
    if not isinstance(dst, Ref) or dst.space != "arg":
        fail("nl.store writes to an HBM tensor view")
    _copy_into(dst, value, mask)


def _copy_into(dst, value, mask):
    if isinstance(value, Ref):
        if tuple(value.shape) != tuple(dst.shape) and \
                _bshape([value.shape, dst.shape]) != tuple(dst.shape):
            fail(f"value of shape {tuple(value.shape)} does not match {tuple(dst.shape)}")
        if value.space == "arg" and dst.space == "arg":
            pass  # HBM to HBM: a DMA, allowed
        _emit_ew(dst, ("in", 0), [value], mask)
    else:
        refs, eargs = _operands([value])
        _emit_ew(dst, eargs[0], [], mask)


def _retarget(dst, value):
    """Makes the op that just produced the temporary tile `value` write dst
    instead; False when value is not that op's fresh whole-tile result."""
    c = ctx()
    blk = c.stack[-1]
    if len(blk) < 2 or value.space != "tile" or tuple(dst.shape) != tuple(value.shape):
        return False
    last, alloc = blk[-1], blk[-2]
    if last[0] != "ew" or last[2] != value.v or alloc[0] != "alloc" or alloc[2] != value.v[2]:
        return False
    if any(v[1:3] == dst.v[1:3] and v != dst.v for v in last[5]):
        return False  # it reads dst through another view: keep the copy
    dom = last[3]
    _check(dst, dom, "store" if dst.space == "arg" else "write")
    op = ("ew", last[1], dst.v, dom, last[4], last[5])
    blk[-1] = op
    c.tiles[value.v[2]]["moved"] = True
    if dst.space == "arg":
        c.written_args.setdefault(dst.v[2], T.user_loc())
    else:
        c.tiles[dst.v[2]]["written"] = True
    if c.eager:
        from .interp import run_op

        run_op(op, c.store, {})
    return True


def _update(dst, o, name):
    """dst op= o in place.  psum += nl.matmul(...) accumulates in PSUM."""
    c = ctx()
    if name == "add" and isinstance(o, Ref) and not c.eager and o.space == "tile":
        last = c.stack[-1][-1] if c.stack[-1] else None
        if last and last[0] == "mm" and last[2][2] == o.v[2] and dst.buffer == "psum" \
                and tuple(dst.shape) == tuple(o.shape) and dst.v[5] == o.v[5]:
            acc = c.tiles[dst.v[2]]["written"]
            c.stack[-1][-1] = ("mm", last[1], dst.v, last[3], last[4], last[5], acc)
            c.tiles[o.v[2]]["moved"] = True
            c.tiles[dst.v[2]]["written"] = True
            return
    _apply(name, [dst, o], dst=dst)


# ----------------------------------------------------------------- reductions


def _axes(axis, nd):
    axes = [axis] if isinstance(axis, int) else list(axis)
    axes = sorted(a % nd for a in axes)
    if 0 in axes:
        fail("reductions run over free axes only (axis 0 is the partition dimension)")
    return tuple(axes)


def _reduce(op, x, axis, keepdims=False, dtype=None, mask=None, dst=None, expr=None,
            srcs=None, scale=1.0):
    _src(x)
    nd = len(x.shape)
    axes = _axes(axis, nd)
    shape = tuple(1 if d in axes else s for d, s in enumerate(x.shape))
    if not keepdims:
        shape = tuple(s for d, s in enumerate(x.shape) if d not in axes) or (x.shape[0],)
    c = ctx()
    if dst is None:
        dst = c.new_tile(shape, _dtype(dtype) or x.dtype, "sbuf")
    elif math.prod(dst.shape) != math.prod(shape):
        fail(f"reduction result {shape} does not fit dst {tuple(dst.shape)}")
    # dst seen with x's rank: reduced axes are stride 0
    kept = [d for d in builtins.range(nd) if d not in axes]
    _, sp, st, dt, off, ds_, dst_str = dst.v
    flat_str = []
    kept_str = list(dst_str)
    if len(kept_str) != len(kept):  # keepdims or [P] results: kept dims in order
        kept_str = [s for s, n in zip(dst_str, ds_) if n != 1] if len(dst_str) > len(kept) \
            else kept_str + [0] * (len(kept) - len(kept_str))
        kept_str = (kept_str + [0] * len(kept))[:len(kept)]
    it = iter(kept_str)
    for d in builtins.range(nd):
        flat_str.append(0 if d in axes else next(it))
    dv = view(sp, st, dt, off, x.shape, flat_str)
    dom = T.domain(x, mask, [x])
    _check(x, dom, "read")
    srcs = srcs or [x]
    views = [_bview(s, x.shape) for s in srcs]
    c.tiles[dst.v[2]]["written"] = True
    c.emit(("red", T.user_loc(), dv, dom, expr or ("in", 0), tuple(views), op, axes,
            float(scale)))
    return dst


def sum(x, axis, dtype=None, keepdims=False, mask=None, **_kw):  # noqa: A001
    return _reduce("sum", x, axis, keepdims, dtype, mask)


def max(x, axis, dtype=None, keepdims=False, mask=None, **_kw):  # noqa: A001
    return _reduce("max", x, axis, keepdims, dtype, mask)


def min(x, axis, dtype=None, keepdims=False, mask=None, **_kw):  # noqa: A001
    return _reduce("min", x, axis, keepdims, dtype, mask)


def mean(x, axis, dtype=None, keepdims=False, mask=None, **_kw):
    n = math.prod(x.shape[a] for a in _axes(axis, len(x.shape)))
    return _reduce("sum", x, axis, keepdims, dtype, mask, scale=1.0 / n)


# ----------------------------------------------------------------- tensor engine


def _mm(dst, stationary, moving, acc):
    _src(stationary, "stationary")
    _src(moving, "moving")
    if len(stationary.shape) != 2 or len(moving.shape) != 2:
        fail("matmul operands are 2-d tiles [K, M] and [K, N]")
    K, M = stationary.shape
    K2, N = moving.shape
    if K != K2:
        fail(f"contraction (partition) dims differ: stationary {K}, moving {K2}")
    if K > tile_size.pmax or M > tile_size.gemm_stationary_fmax:
        fail(f"stationary tile [{K}, {M}] exceeds [128, 128]")
    if N > tile_size.gemm_moving_fmax:
        fail(f"moving tile [{K}, {N}] exceeds [128, 512]")
    for r in (stationary, moving):
        if r.v[6][-1] != 1 or r.v[6][0] == 0:
            fail("matmul operands must be tiles with unit stride along the free dim "
                 "(copy a broadcast or strided view first)")
    c = ctx()
    if dst is None:
        dst = c.new_tile((M, N), float32, "psum")
    else:
        if dst.buffer != "psum":
            fail("nc_matmul writes to a PSUM tile")
        if tuple(dst.shape) != (M, N):
            fail(f"nc_matmul dst must be [{M}, {N}], got {tuple(dst.shape)}")
        if dst.dtype != float32 or dst.v[6][-1] != 1:
            fail("nc_matmul dst must be a float32 PSUM tile with unit free stride")
    if acc is None:
        acc = c.tiles[dst.v[2]]["written"]
    c.tiles[dst.v[2]]["written"] = True
    c.emit(("mm", T.user_loc(), dst.v, full_dom((M, N)), stationary.v, moving.v, bool(acc)))
    return dst


def matmul(x, y, transpose_x=False, mask=None, **_kw):
    """x @ y into a new float32 PSUM tile; with transpose_x, x is given as
    [K, M] (the stationary layout), otherwise as [M, K]."""
    stationary = x if transpose_x else transpose(x)
    return _mm(None, stationary, y, False)


def _transpose(dst, x, space):
    _src(x)
    if len(x.shape) != 2:
        fail("transpose takes a 2-d tile")
    P, F = x.shape
    if F > tile_size.pmax:
        fail(f"transpose of [{P}, {F}]: the free size becomes the partition dim (<= 128)")
    c = ctx()
    if dst is None:
        dst = c.new_tile((F, P), x.dtype if space == "sbuf" else x.dtype, space)
    elif tuple(dst.shape) != (F, P):
        fail(f"transpose dst must be [{F}, {P}]")
    c.tiles[dst.v[2]]["written"] = True
    c.emit(("tr", T.user_loc(), dst.v, full_dom((F, P)), x.v))
    return dst


def transpose(x, dtype=None, mask=None, **_kw):
    return _transpose(None, x, "sbuf")
