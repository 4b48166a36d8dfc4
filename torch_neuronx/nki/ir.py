"""The tile IR: what a traced NKI kernel is, between the Python front end and
the back ends (C lowering, interpreter).

Everything structural is an immutable tuple, and the only numbers that may
differ between two iterations of a loop are `Aff` leaves (integer affine
expressions).  That is what makes re-rolling generic: two iterations are the
same loop body when their `signature`s match, and each Aff leaf position is
then fitted as affine in the loop index (or read from a table).

Ops (tuples, first field the kind):
  ("ew",  loc, dst, dom, expr, srcs)    dst[x] = expr(srcs[k][x] ...): copies, math,
                                        iota, selects; expr is a tuple tree
  ("red", loc, dst, dom, expr, srcs, op, axes, scale)
                                        dst[p] = scale * (op over axes of expr(...))
  ("mm",  loc, dst, dom, stationary, moving, acc)
                                        dst[M,N] (+)= stationary[K,M]^T @ moving[K,N]
  ("tr",  loc, dst, dom, src)           dst[f, p] = src[p, f]
  ("alloc", loc, tile_id, space, nbytes)   a tile comes alive (removed by allocation)
  ("loop", loop_id, parallel, iterations)  a marked Python loop, unrolled (the trace)
  ("for", var, count, body, parallel)      a rolled loop (after reroll; count an Aff)
A view is ("v", space, storage, dtype, offset, shape, strides): space "arg"
(storage = argument index), "tile" (storage = tile id, before allocation),
"sbuf"/"psum" (storage = byte offset Aff, after allocation).  offset and
strides are in elements.  A domain `dom` is a tuple of (lo, hi) bounds per
dim of dst: ("b", base, terms) = clamp of base by ceil-divided Aff terms.
"""
from __future__ import annotations


class Aff:
    """c + sum(coef * sym).  Symbols: "p0".."p2" (program ids), "i<n>" (rolled
    loop variables), "T<n>[i<m>]" (a table of ints indexed by a loop)."""

    __slots__ = ("c", "terms", "_h")

    def __init__(self, c=0, terms=()):
        self.c = int(c)
        self.terms = tuple(sorted((s, int(k)) for s, k in terms if k != 0))
        self._h = None

    @staticmethod
    def of(x):
        return x if isinstance(x, Aff) else Aff(int(x))

    def is_const(self):
        return not self.terms

    def syms(self):
        return [s for s, _ in self.terms]

    def __add__(self, o):
        o = Aff.of(o)
        d = dict(self.terms)
        for s, k in o.terms:
            d[s] = d.get(s, 0) + k
        return Aff(self.c + o.c, d.items())

    __radd__ = __add__

    def __neg__(self):
        return Aff(-self.c, [(s, -k) for s, k in self.terms])

    def __sub__(self, o):
        return self + (-Aff.of(o))

    def __rsub__(self, o):
        return Aff.of(o) - self

    def __mul__(self, k):
        if isinstance(k, Aff):
            if k.is_const():
                k = k.c
            elif self.is_const():
                return k * self.c
            else:
                raise TypeError("product of two program-id/loop dependent indices is not affine")
        if not isinstance(k, int):
            return NotImplemented
        return Aff(self.c * k, [(s, c * k) for s, c in self.terms])

    __rmul__ = __mul__

    def eval(self, env):
        v = self.c
        for s, k in self.terms:
            v += k * env[s]
        return v

    def __eq__(self, o):
        return isinstance(o, Aff) and self.c == o.c and self.terms == o.terms

    def __hash__(self):
        if self._h is None:
            self._h = hash((self.c, self.terms))
        return self._h

    def __repr__(self):
        parts = [str(self.c)] if self.c or not self.terms else []
        parts += [f"{k}*{s}" if k != 1 else s for s, k in self.terms]
        return "+".join(parts)


def view(space, storage, dtype, offset, shape, strides):
    return ("v", space, storage, dtype, Aff.of(offset), tuple(shape), tuple(strides))


def full_dom(shape):
    return tuple((("b", Aff(0), ()), ("b", Aff(n), ())) for n in shape)


def signature(x):
    """x with every Aff replaced by its symbol set (a hashable skeleton)."""
    if isinstance(x, Aff):
        # which symbols appear is not structure: reroll reconciles them
        return "A"
    if isinstance(x, tuple):
        return tuple(signature(e) for e in x)
    if isinstance(x, list):
        return ("L",) + tuple(signature(e) for e in x)
    return x


def leaves(x, out):
    """Appends x's Aff leaves, in a fixed order, to out."""
    if isinstance(x, Aff):
        out.append(x)
    elif isinstance(x, (tuple, list)):
        for e in x:
            leaves(e, out)
    return out


def rebuild(x, it):
    """x with its Aff leaves replaced, in order, by the items of iterator it."""
    if isinstance(x, Aff):
        return next(it)
    if isinstance(x, tuple):
        return tuple(rebuild(e, it) for e in x)
    if isinstance(x, list):
        return [rebuild(e, it) for e in x]
    return x


def op_views(op):
    """(written view, [read views]) of a compute op."""
    k = op[0]
    if k in ("ew", "red"):
        return op[2], list(op[5])
    if k == "mm":
        return op[2], [op[4], op[5]] + ([op[2]] if op[6] else [])
    if k == "tr":
        return op[2], [op[4]]
    return None, []


def ceildiv(a, b):
    return -((-a) // b)


def eval_bound(b, env, lo):
    """A domain bound: base clamped (max for lo, min for hi) by ceil(num/d) terms."""
    v = b[1].eval(env)
    for num, d in b[2]:
        t = ceildiv(num.eval(env), d)
        v = max(v, t) if lo else min(v, t)
    return v
