"""The tracer: runs an NKI kernel's Python body once with proxy objects and
records tile IR (ir.py).  The same front end runs eagerly for nki.simulate:
then every recorded op is executed at once by the interpreter (interp.py) on
CPU tensors, so `print(tile)` shows values.

Loops unroll as Python runs them (NKI Beta 2's rule, so lists built across
iterations work); nl.*_range and `range` in the kernel's globals mark where
iterations start, so reroll.py can fold them back into loops.  Program ids
are symbols (never Python ints) while tracing: one trace serves the grid.
"""
from __future__ import annotations

import itertools
import os
import sys
import threading

import torch

from .ir import Aff, ceildiv, full_dom, view

_HERE = os.path.dirname(os.path.abspath(__file__))
_state = threading.local()

PMAX = 128
SBUF_PARTITION_BYTES = 192 * 1024
PSUM_PARTITION_BYTES = 16 * 1024
PSUM_BANK_BYTES = 2 * 1024


class NKIError(Exception):
    """A kernel broke a rule of the language or the hardware; the message
    starts with the kernel's file:line."""


def ctx():
    c = getattr(_state, "ctx", None)
    if c is None:
        raise NKIError("NKI language calls are only valid inside an @nki.jit kernel")
    return c


def user_loc():
    """file:line of the innermost frame outside this package (the kernel's)."""
    f = sys._getframe(1)
    while f is not None and os.path.dirname(os.path.abspath(f.f_code.co_filename)) == _HERE:
        f = f.f_back
    if f is None:
        return "<kernel>"
    return f"{f.f_code.co_filename}:{f.f_lineno}"


def fail(msg, exc=NKIError):
    raise exc(f"{user_loc()}: {msg}")


# ----------------------------------------------------------------- index expressions


class Axis:
    """One arange/mgrid dimension: a free iteration index of size n.  slot is
    its position in the expression that made it (mgrid's dim, or the
    arange's non-None position), used when a mask names no operand's axis."""

    _ids = itertools.count()

    def __init__(self, n, slot):
        self.n, self.slot, self.id = int(n), slot, next(Axis._ids)


class Idx:
    """off + sum(coef * axis): an index expression over arange/mgrid axes."""

    def __init__(self, off, axes):
        self.off = Aff.of(off)
        self.axes = {a: k for a, k in axes.items() if k != 0}

    @staticmethod
    def of(x):
        if isinstance(x, Idx):
            return x
        return Idx(_aff(x), {})

    def __add__(self, o):
        o = Idx.of(o)
        d = dict(self.axes)
        for a, k in o.axes.items():
            d[a] = d.get(a, 0) + k
        return Idx(self.off + o.off, d)

    __radd__ = __add__

    def __neg__(self):
        return Idx(-self.off, {a: -k for a, k in self.axes.items()})

    def __sub__(self, o):
        return self + (-Idx.of(o))

    def __rsub__(self, o):
        return Idx.of(o) - self

    def __mul__(self, k):
        if isinstance(k, Idx):
            if k.axes and self.axes:
                fail("the product of two index expressions is not affine")
            if not k.axes:
                k = k.off
            else:
                return k * self.off
        k = _aff(k)
        if not k.is_const():
            if self.axes:
                fail("an index expression times a program id is not affine")
            return Idx(self.off * k, {})
        return Idx(self.off * k.c, {a: c * k.c for a, c in self.axes.items()})

    __rmul__ = __mul__

    def __getitem__(self, key):  # nl.arange(n)[:, None] / [None, :]
        if len(self.axes) != 1:
            fail("only a plain nl.arange can be indexed with None")
        key = key if isinstance(key, tuple) else (key,)
        (a,) = self.axes
        slots = [i for i, k in enumerate(key) if k is not None]
        if len(slots) != 1:
            fail("nl.arange(n)[...] takes one ':' and Nones")
        a.slot = slots[0]
        return self

    def _cmp(self, o, op):
        return Pred([(self - Idx.of(o), op)])

    def __lt__(self, o):
        return self._cmp(o, "<")

    def __le__(self, o):
        return self._cmp(o, "<=")

    def __gt__(self, o):
        return self._cmp(o, ">")

    def __ge__(self, o):
        return self._cmp(o, ">=")

    def __eq__(self, o):
        return self._cmp(o, "==")

    __hash__ = object.__hash__


class Pred:
    """A conjunction of (Idx op 0): masks and affine_select predicates."""

    def __init__(self, terms):
        self.terms = terms

    def __and__(self, o):
        return Pred(self.terms + o.terms)

    __rand__ = __and__


def _aff(x):
    if isinstance(x, Aff):
        return x
    if isinstance(x, bool) or not isinstance(x, int):
        if hasattr(x, "__index__"):
            return Aff(x.__index__())
        fail(f"index must be an int, a program id or an index expression, got {type(x).__name__}")
    return Aff(x)


class ds:
    """nl.ds(start, size): a dynamic slice of static size."""

    def __init__(self, start, size):
        self.start, self.size = start, int(size)


# ----------------------------------------------------------------- refs (views)


class Ref:
    """A view of HBM or of a tile.  v is the IR view; axes maps each dim to the
    Axis that indexed it (or None); checks are the base dims' index ranges
    (base size, start, coef, access dim) verified against each op's domain."""

    __array_priority__ = 1000  # numpy scalars defer to our operators

    def __init__(self, v, axes=None, checks=(), name=""):
        self.v = v
        self.axes = tuple(axes) if axes is not None else (None,) * len(v[5])
        self.checks = tuple(checks)
        self.name = name

    @property
    def space(self):
        return self.v[1]

    @property
    def shape(self):
        return self.v[5]

    @property
    def dtype(self):
        return self.v[3]

    @property
    def ndim(self):
        return len(self.v[5])

    @property
    def buffer(self):
        return "hbm" if self.space == "arg" else ctx().tiles[self.v[2]]["space"]

    def is_tile(self):
        return self.space == "tile"

    # indexing
    def __getitem__(self, key):
        return index(self, key)

    def __setitem__(self, key, value):
        # a temporary (t[...] = nl.op(..., mask=m)) is written in place, as
        # NKI's compiler does: elements the mask skips keep their values.
        # CPython counts 3 references to an unnamed argument here (a named
        # one has 4); a miscount only turns the copy into an in-place write
        # whose source then refuses to be read again (a clear error).
        temporary = sys.getrefcount(value) <= 3
        from . import language as nl

        dst = index(self, key)
        if not (temporary and isinstance(value, Ref) and nl._retarget(dst, value)):
            nl._copy_into(dst, value, None)

    def reshape(self, shape):
        shape = tuple(int(s) for s in shape)
        if self.space != "arg":
            fail("reshape is for HBM tensors")
        n = 1
        for s in self.shape:
            n *= s
        m = 1
        for s in shape:
            m *= s
        if n != m:
            fail(f"cannot reshape {self.shape} to {shape}")
        # contiguous only: strides must be row-major
        expect = 1
        for s, k in zip(reversed(self.shape), reversed(self.v[6])):
            if s != 1 and k != expect:
                fail("reshape needs a contiguous tensor")
            expect *= s
        strides, acc = [], 1
        for s in reversed(shape):
            strides.append(acc)
            acc *= s
        v = view("arg", self.v[2], self.dtype, self.v[4], shape, tuple(reversed(strides)))
        return Ref(v, name=self.name)

    def broadcast_to(self, shape):
        from . import language as nl

        return nl.broadcast_to(self, shape)

    def __repr__(self):
        c = ctx()
        if c.eager:
            from .interp import read_view

            return f"Tile{self.shape}[{self.dtype}]\n{read_view(c, self.v)}"
        return f"<{self.buffer} tile {self.shape} {self.dtype}>"

    # arithmetic (language.py's functions)
    def _bin(self, o, name, rev=False):
        from . import language as nl

        f = getattr(nl, name)
        return f(o, self) if rev else f(self, o)

    def __add__(self, o):
        return self._bin(o, "add")

    def __radd__(self, o):
        return self._bin(o, "add", True)

    def __sub__(self, o):
        return self._bin(o, "subtract")

    def __rsub__(self, o):
        return self._bin(o, "subtract", True)

    def __mul__(self, o):
        return self._bin(o, "multiply")

    def __rmul__(self, o):
        return self._bin(o, "multiply", True)

    def __truediv__(self, o):
        return self._bin(o, "divide")

    def __rtruediv__(self, o):
        return self._bin(o, "divide", True)

    def __neg__(self):
        from . import language as nl

        return nl.negative(self)

    def __pow__(self, o):
        return self._bin(o, "power")

    def __gt__(self, o):
        return self._bin(o, "greater")

    def __lt__(self, o):
        return self._bin(o, "less")

    def __ge__(self, o):
        return self._bin(o, "greater_equal")

    def __le__(self, o):
        return self._bin(o, "less_equal")

    def _inplace(self, o, name):
        from . import language as nl

        nl._update(self, o, name)
        return self

    def __iadd__(self, o):
        return self._inplace(o, "add")

    def __isub__(self, o):
        return self._inplace(o, "subtract")

    def __imul__(self, o):
        return self._inplace(o, "multiply")

    def __itruediv__(self, o):
        return self._inplace(o, "divide")


def index(ref, key):
    if not isinstance(key, tuple):
        key = (key,)
    nd = ref.ndim
    if any(k is Ellipsis for k in key):
        i = next(i for i, k in enumerate(key) if k is Ellipsis)
        fill = nd - (len(key) - 1)
        key = key[:i] + (slice(None),) * fill + key[i + 1:]
    if len(key) > nd:
        fail(f"{len(key)} indices for a {nd}-d {'tensor' if ref.space == 'arg' else 'tile'}")
    key = key + (slice(None),) * (nd - len(key))
    _, space, storage, dtype, off, shape, strides = ref.v
    off = Aff.of(off)
    nshape, nstrides, naxes, checks = [], [], [], []
    prev = {c[3]: c for c in ref.checks}
    for d, k in enumerate(key):
        n, st = shape[d], strides[d]
        if isinstance(k, ds):
            k = slice(k.start, _aff(k.start) + k.size)
        if isinstance(k, slice):
            if k.step not in (None, 1):
                step = int(k.step)
            else:
                step = 1
            a = _aff(0 if k.start is None else k.start)
            b = _aff(n if k.stop is None else k.stop)
            size = b - a
            if not size.is_const():
                fail("a slice's size must be static")
            cnt = max(0, ceildiv(size.c, step))
            off = off + a * st
            checks.append((n, a, step, len(nshape), ref.axes[d]))
            nshape.append(cnt)
            nstrides.append(st * step)
            naxes.append(ref.axes[d])
        elif isinstance(k, Idx):
            if len(k.axes) > 1:
                fail("an index may use one arange/mgrid axis")
            off = off + k.off * st
            if k.axes:
                ((ax, coef),) = k.axes.items()
                checks.append((n, k.off, coef, len(nshape), ax))
                nshape.append(ax.n)
                nstrides.append(st * coef)
                naxes.append(ax)
            else:
                checks.append((n, k.off, 0, None, None))
        else:
            a = _aff(k)
            off = off + a * st
            checks.append((n, a, 0, None, None))
    v = view(space, storage, dtype, off, nshape, nstrides)
    return Ref(v, naxes, [c[:4] for c in checks], ref.name)


# ----------------------------------------------------------------- the trace context


class Ctx:
    """One trace (or one eager program run) of a kernel."""

    def __init__(self, fn, eager=False, pids=None, grid=(1,)):
        self.fn = fn
        self.eager = eager
        self.grid = grid
        self.pids = pids  # concrete ids when eager
        self.root = []
        self.stack = [self.root]
        self.tiles = {}  # id -> {"shape","dtype","space","loc", "written"}
        self.args = []  # per HBM argument: dict(shape, dtype, strides, role, name)
        self.written_args = {}  # argument index -> file:line of its first write
        self.read_args = set()
        self.tile_ids = itertools.count()
        self.loop_ids = itertools.count()
        self.store = {}  # eager: tile id -> tensor, arg index -> tensor

    # recording
    def emit(self, op):
        self.stack[-1].append(op)
        if self.eager:
            from .interp import run_op

            run_op(op, self.store, {})

    def new_tile(self, shape, dtype, space, init=None):
        shape = tuple(int(s) for s in shape)
        if not shape:
            shape = (1,)
        if dtype in (torch.float64, torch.int64):
            fail(f"{dtype} tiles do not exist on-chip (NKI's dtypes are 32 bits or less)")
        if shape[0] > PMAX:
            fail(f"partition dimension {shape[0]} exceeds nl.tile_size.pmax ({PMAX})")
        if any(s <= 0 for s in shape):
            fail(f"tile shape {shape} has an empty dimension")
        tid = next(self.tile_ids)
        nbytes = _free_bytes(shape, dtype)
        if space == "psum":
            if nbytes > PSUM_BANK_BYTES:
                fail(f"a PSUM tile holds at most {PSUM_BANK_BYTES} bytes per partition "
                     f"(one bank, 512 float32), this one {nbytes}")
        elif nbytes > SBUF_PARTITION_BYTES:
            fail(f"a tile of {nbytes} bytes per partition exceeds SBUF's {SBUF_PARTITION_BYTES}")
        self.tiles[tid] = {"shape": shape, "dtype": dtype, "space": space,
                           "loc": user_loc(), "written": False}
        self.stack[-1].append(("alloc", user_loc(), tid, space, nbytes))
        if self.eager:
            t = torch.full(shape, float("nan")) if dtype.is_floating_point else \
                torch.full(shape, -0x7fff_ffff if dtype != torch.bool else 0)
            self.store[tid] = t.to(dtype).reshape(-1)
        strides, acc = [], 1
        for s in reversed(shape):
            strides.append(acc)
            acc *= s
        return Ref(view("tile", tid, dtype, 0, shape, tuple(reversed(strides))))

    def new_arg(self, shape, dtype, strides, role, name=""):
        i = len(self.args)
        self.args.append({"shape": tuple(shape), "dtype": dtype, "strides": tuple(strides),
                          "role": role, "name": name})
        return Ref(view("arg", i, dtype, 0, shape, strides), name=name)

    # loops
    def loop(self, n, parallel):
        lid = next(self.loop_ids)
        node = ("loop", lid, parallel, [])
        self.stack[-1].append(node)
        for i in range(n):
            body = []
            node[3].append(body)
            self.stack.append(body)
            try:
                yield i
            finally:
                self.stack.pop()


def _free_bytes(shape, dtype):
    n = 1
    for s in shape[1:]:
        n *= s
    return n * dtype.itemsize


class tracing:
    def __init__(self, c):
        self.c = c

    def __enter__(self):
        self.prev = getattr(_state, "ctx", None)
        _state.ctx = self.c
        return self.c

    def __exit__(self, *exc):
        _state.ctx = self.prev


# ----------------------------------------------------------------- domains and checks


def domain(dst, mask, refs=()):
    """The op's iteration domain over dst's shape, clipped by mask."""
    dom = [list(b) for b in full_dom(dst.shape)]
    if mask is None:
        return tuple(tuple(b) for b in dom)
    if not isinstance(mask, Pred):
        fail("mask must be a comparison of index expressions")
    for e, op in mask.terms:
        if len(e.axes) != 1:
            fail("a mask term must use exactly one arange/mgrid axis")
        ((ax, c),) = e.axes.items()
        d = None
        for r in (dst,) + tuple(refs):
            if isinstance(r, Ref) and ax in r.axes and r.shape == dst.shape:
                d = r.axes.index(ax)
                break
        if d is None:
            d = ax.slot if ax.slot is not None and ax.slot < len(dst.shape) else None
            if d is None or dst.shape[d] != ax.n:
                fail("mask uses an axis that indexes none of the operands")
        r = -e.off  # c*ax (op) r
        if op == "==":
            fail("equality masks are not supported; use two inequalities")
        if c < 0:
            c, r = -c, -r
            op = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}[op]
        lo, hi = dom[d]
        if op == "<":
            hi = ("b", hi[1], hi[2] + ((r, c),))
        elif op == "<=":
            hi = ("b", hi[1], hi[2] + ((r + 1, c),))
        elif op == ">":
            lo = ("b", lo[1], lo[2] + ((r + 1, c),))
        else:
            lo = ("b", lo[1], lo[2] + ((r, c),))
        dom[d] = [lo, hi]
    return tuple(tuple(b) for b in dom)


def pid_envs(c):
    """Every program-id assignment of the grid (for static bounds checks)."""
    if c.eager:
        return [{f"p{i}": v for i, v in enumerate(c.pids)}]
    return [{f"p{i}": v for i, v in enumerate(p)}
            for p in itertools.product(*(range(g) for g in c.grid))]


def check_ref(ref, dom, what):
    """Every index ref reaches under dom must lie inside its base dims."""
    from .ir import eval_bound

    if not ref.checks:
        return
    c = ctx()
    envs = None
    for n, start, coef, d, *_ in ref.checks:
        syms = set(start.syms())
        if d is not None:
            for b in dom[d]:
                syms.update(b[1].syms())
                for num, _ in b[2]:
                    syms.update(num.syms())
        cases = [{}] if not syms else (envs or pid_envs(c))
        if syms and envs is None:
            envs = cases
        for env in _extremes(cases, syms):
            s = start.eval(env)
            if d is None:
                lo = hi = s
            else:
                a, b = eval_bound(dom[d][0], env, True), eval_bound(dom[d][1], env, False)
                if a >= b:
                    continue
                lo, hi = (s + coef * a, s + coef * (b - 1))
                lo, hi = min(lo, hi), max(lo, hi)
            if lo < 0 or hi >= n:
                where = f" (program {tuple(env[k] for k in sorted(env))})" if env else ""
                fail(f"{what} out of bounds: index {lo}..{hi} of a dimension of size {n}"
                     f"{where}; use a mask for ragged tails", IndexError)


def _extremes(cases, syms):
    if len(cases) <= 4096:
        return cases
    # affine in the ids: the box's corners bound it (masks clip only inward)
    keys = sorted(syms)
    corners = []
    for env in cases:
        if all(env[k] in (0, max(e[k] for e in (cases[0], cases[-1]))) for k in keys):
            corners.append(env)
    return corners or cases[:1] + cases[-1:]
