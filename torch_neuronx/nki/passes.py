"""Passes between the trace and the C lowering:
  parallel_loops  which top-level loops may run their iterations at once;
  allocate        SBUF/PSUM addresses by liveness, with NKI's capacity limits;
  reroll          unrolled iterations folded back into C loops.
"""
from __future__ import annotations

import torch

from .ir import Aff, leaves, op_views, rebuild, signature
from .trace import (NKIError, PSUM_BANK_BYTES, PSUM_PARTITION_BYTES,
                    SBUF_PARTITION_BYTES)


def _walk(items):
    for it in items:
        if it[0] == "loop":
            for body in it[3]:
                yield from _walk(body)
        else:
            yield it


# ----------------------------------------------------------------- parallel loops


def _extent(v):
    """Element interval [lo, hi] a view of an argument covers (program 0)."""
    env = {"p0": 0, "p1": 0, "p2": 0}
    off = v[4].eval(env)
    lo = hi = off
    for n, s in zip(v[5], v[6]):
        if n == 0:
            return None
        if s > 0:
            hi += (n - 1) * s
        else:
            lo += (n - 1) * s
    return lo, hi


def parallel_loops(root):
    """Marks a top-level loop parallel (its 3rd field True) when its iterations
    are independent: no tile from outside is written inside, no tile from an
    iteration is used by another or after the loop, no argument written
    inside is read inside, and iterations write disjoint argument ranges.
    affine_range promises this; plain range (Beta 2) gets it checked too."""
    out = []
    for idx, it in enumerate(root):
        if it[0] != "loop":
            out.append(it)
            continue
        par = it[2] is not False and len(it[3]) > 1 and _independent(it, root[idx + 1:])
        out.append(("loop", it[1], par, [_serial(b) for b in it[3]]))
    return out


def _serial(items):
    """Nested loops run serially (inside a parallel loop or a program): only
    analysed top-level loops may be parallel, even once an outer loop that
    did not re-roll leaves them at the top."""
    return [("loop", it[1], False, [_serial(b) for b in it[3]]) if it[0] == "loop" else it
            for it in items]


def _independent(loop, after):
    owner = {}
    written_args, read_args, spans = set(), set(), []
    for k, body in enumerate(loop[3]):
        span = []
        for op in _walk(body):
            if op[0] == "alloc":
                owner[op[2]] = k
                continue
            dst, srcs = op_views(op)
            if dst[1] == "tile" and owner.get(dst[2], -1) != k:
                return False  # writes a tile of another iteration or from before
            for v in srcs:
                if v[1] == "tile" and owner.get(v[2], k) != k:
                    return False  # reads another iteration's tile
            if dst[1] == "arg":
                written_args.add(dst[2])
                e = _extent(dst)
                if e is None:
                    continue
                span.append((dst[2],) + e)
            for v in srcs:
                if v[1] == "arg":
                    read_args.add(v[2])
        spans.append(span)
    if written_args & read_args:
        return False
    for op in _walk(after):
        if op[0] == "alloc":
            continue
        dst, srcs = op_views(op)
        if any(v[1] == "tile" and v[2] in owner for v in [dst] + srcs):
            return False
    by_arg = {}
    for k, span in enumerate(spans):
        for a, lo, hi in span:
            by_arg.setdefault(a, []).append((lo, hi, k))
    for ivs in by_arg.values():
        ivs.sort()
        for (l1, h1, k1), (l2, h2, k2) in zip(ivs, ivs[1:]):
            if k1 != k2 and l2 <= h1:
                return False
    return True


# ----------------------------------------------------------------- allocation


def allocate(root, tiles):
    """Gives every tile an address (bytes per partition) in SBUF or PSUM:
    first fit, freed after its last use; raises NKIError naming the kernel's
    line when NKI's capacities are exceeded.  Returns (tree, sbuf_bytes,
    psum_bytes) with tile views rewritten to ("sbuf"|"psum", address)."""
    last = {}
    for n, op in enumerate(_walk(root)):
        if op[0] == "alloc":
            last.setdefault(op[2], n)
            continue
        dst, srcs = op_views(op)
        for v in [dst] + srcs:
            if v[1] == "tile":
                last[v[2]] = n
    frees = {}
    for tid, n in last.items():
        frees.setdefault(n, []).append(tid)
    arenas = {"sbuf": _Arena(SBUF_PARTITION_BYTES, 64), "psum": _Arena(PSUM_PARTITION_BYTES,
                                                                       PSUM_BANK_BYTES)}
    addr = {}
    for n, op in enumerate(_walk(root)):
        if op[0] == "alloc":
            _, loc, tid, space, nbytes = op
            a = arenas[space].take(nbytes)
            if a is None:
                what = "SBUF" if space == "sbuf" else "PSUM (8 banks of 2 KiB)"
                raise NKIError(f"{loc}: {what} overflow: a tile of {nbytes} bytes per "
                               f"partition does not fit next to {arenas[space].live()} "
                               f"live bytes per partition")
            addr[tid] = (space, a, nbytes)
        for tid in frees.get(n, ()):
            if tid in addr:
                arenas[addr[tid][0]].give(addr[tid][1], addr[tid][2])

    def fix_view(x):
        if isinstance(x, tuple):
            if len(x) == 7 and x[0] == "v" and x[1] == "tile":
                space, a, _ = addr[x[2]]
                return ("v", space, Aff(a * 128)) + x[3:]
            return tuple(fix_view(e) for e in x)
        return x

    def fix(items):
        out = []
        for it in items:
            if it[0] == "loop":
                out.append(("loop", it[1], it[2], [fix(b) for b in it[3]]))
            elif it[0] != "alloc":
                out.append(fix_view(it))
        return out

    return fix(root), arenas["sbuf"].high * 128, arenas["psum"].high * 128


class _Arena:
    def __init__(self, cap, align):
        self.cap, self.align, self.free, self.high = cap, align, [(0, cap)], 0

    def take(self, n):
        n = -(-n // self.align) * self.align
        for i, (a, size) in enumerate(self.free):
            if size >= n:
                self.free[i] = (a + n, size - n)
                if self.free[i][1] == 0:
                    del self.free[i]
                self.high = max(self.high, a + n)
                return a
        return None

    def give(self, a, n):
        n = -(-n // self.align) * self.align
        self.free.append((a, n))
        self.free.sort()
        merged = []
        for s, z in self.free:
            if merged and merged[-1][0] + merged[-1][1] == s:
                merged[-1] = (merged[-1][0], merged[-1][1] + z)
            else:
                merged.append((s, z))
        self.free = merged

    def live(self):
        return self.cap - sum(z for _, z in self.free)


# ----------------------------------------------------------------- re-rolling


class Tables:
    """Integer tables of rolled loops (values no affine fit explains)."""

    def __init__(self):
        self.ids, self.values = {}, []

    def get(self, vals):
        vals = tuple(vals)
        if vals not in self.ids:
            self.ids[vals] = len(self.values)
            self.values.append(vals)
        return self.ids[vals]


def reroll(root, tables, depth=0):
    """The tree with each marked loop rolled: ("for", var, count, body,
    parallel).  Iterations roll when their signatures match; a first
    iteration that differs (a PSUM tile's overwriting first matmul) is kept
    in front; anything else stays unrolled."""
    out = []
    for it in root:
        if it[0] == "loop":
            out.extend(_roll_loop(it, tables, depth))
        else:
            out.append(it)
    return out


def _roll_loop(node, tables, depth):
    _, lid, parallel, iters = node
    bodies = [reroll(b, tables, depth + 1) for b in iters]
    if not bodies:
        return []
    # named by depth, so the same inner loop matches across outer iterations;
    # the trip count is a leaf, so loops whose count depends on an outer
    # index (causal attention's key loop) still roll
    var = f"i{depth}"
    r = _fit(bodies, var, tables)
    if r is not None:
        return [("for", var, Aff(len(bodies)), r, bool(parallel) and len(bodies) > 1)]
    if len(bodies) > 2:
        r = _fit(bodies[1:], var, tables)
        if r is not None:
            return bodies[0] + [("for", var, Aff(len(bodies) - 1), r, False)]
    return [x for b in bodies for x in b]


def _fit(bodies, var, tables):
    if len(bodies) == 1:
        return bodies[0]
    sig = signature(bodies[0])
    if any(signature(b) != sig for b in bodies[1:]):
        return None
    cols = list(zip(*(leaves(b, []) for b in bodies)))
    fitted = []
    for col in cols:
        terms = _merge_tables(col, var, tables)
        if terms is None:
            return None
        cs = [a.c for a in col]
        d = cs[1] - cs[0]
        if all(cs[k] == cs[0] + d * k for k in range(len(cs))):
            fitted.append(Aff(cs[0], terms + ((var, d),)))
        else:
            t = tables.get(cs)
            fitted.append(Aff(0, terms + ((f"T{t}[{var}]", 1),)))
    return rebuild(bodies[0], iter(fitted))


def _merge_tables(col, var, tables):
    """The symbolic terms for a column of Affs (one per iteration) as terms
    of the rolled loop; None if they cannot be reconciled.  Equal terms stay;
    a table whose contents differ per iteration becomes one table of the
    concatenated values (indexed by len * var + the old index); any other
    coefficient that differs per iteration comes from a table: T[var] * sym."""
    first = col[0].terms
    if all(len(a.terms) == len(first) for a in col):
        out = _merge_positional(col, var, tables)
        if out is not None:
            return out
    syms = []
    for a in col:
        for sym, _ in a.terms:
            if sym not in syms:
                syms.append(sym)
    out = []
    for sym in syms:
        coefs = [dict(a.terms).get(sym, 0) for a in col]
        if all(c == coefs[0] for c in coefs):
            out.append((sym, coefs[0]))
        else:
            out.append((f"T{tables.get(coefs)}[{var}]*{sym}", 1))
    return tuple(out)


def _merge_positional(col, var, tables):
    first = col[0].terms
    out = []
    for j, (sym, k) in enumerate(first):
        syms = [a.terms[j][0] for a in col]
        if any(a.terms[j][1] != k for a in col):
            return None
        if all(s == sym for s in syms):
            out.append((sym, k))
            continue
        if sym[0] != "T" or "*" in sym:
            return None
        if any(s[0] != "T" or "*" in s for s in syms):
            return None
        ids = [int(s[1:s.index("[")]) for s in syms]
        idx = sym[sym.index("[") + 1:-1]
        vals = [tables.values[i] for i in ids]
        if any(s[s.index("["):] != sym[sym.index("["):] for s in syms) or \
                len({len(v) for v in vals}) != 1:
            return None
        t = tables.get([x for v in vals for x in v])
        out.append((f"T{t}[{len(vals[0])}*{var}+{idx}]", k))
    return tuple(out)


# ----------------------------------------------------------------- fusion


def fuse(root):
    """Inlines an elementwise op into its only consumer in the same block:
    load -> math -> store chains become one loop from HBM to HBM, and a
    tile's producer is computed inside the reduction that reads it.  The
    producer's dtype rounding is kept (a "round" node), its domain clips the
    consumer's, and nothing either reads may be written in between."""
    readers, writers = {}, {}
    for op in _walk(root):
        if op[0] == "alloc":
            continue
        dst, srcs = op_views(op)
        if dst[1] == "tile":
            writers[dst[2]] = writers.get(dst[2], 0) + 1
        for v in srcs:
            if v[1] == "tile":
                readers[v[2]] = readers.get(v[2], 0) + 1
    return _fuse_block(root, readers, writers)


def _fuse_block(items, readers, writers):
    items = [("loop", it[1], it[2], [_fuse_block(b, readers, writers) for b in it[3]])
             if it[0] == "loop" else it for it in items]
    out = list(items)
    for i, p in enumerate(out):
        if p is None or p[0] != "ew" or p[2][1] != "tile":
            continue
        t = p[2][2]
        if readers.get(t) != 1 or writers.get(t) != 1:
            continue
        for j in range(i + 1, len(out)):
            c = out[j]
            if c is None:
                continue
            if c[0] in ("ew", "red") and any(v[1] == "tile" and v[2] == t for v in c[5]):
                fused = _inline(p, c)
                if fused is not None:
                    out[i], out[j] = None, fused
                break
            if _touches(c, p):
                break
    return [x for x in out if x is not None]


def _touches(op, p):
    """Does op (between producer p and its consumer) write what p reads or
    writes, or read what p writes?"""
    inner = list(_walk([op]))
    pw = (p[2][1], p[2][2])
    pr = {(v[1], v[2]) for v in p[5]}
    for o in inner:
        if o[0] == "alloc":
            continue
        dst, srcs = op_views(o)
        if (dst[1], dst[2]) in pr | {pw} or any((v[1], v[2]) == pw for v in srcs):
            return True
    return False


def _inline(p, c):
    _, _, pdst, pdom, pexpr, psrcs = p
    srcs = list(c[5])
    if any(v != pdst for v in srcs if v[1] == "tile" and v[2] == pdst[2]):
        return None  # read through another view (broadcast, slice)
    cdst = c[2]
    if any((v[1], v[2]) == (cdst[1], cdst[2]) and v != cdst for v in psrcs):
        return None
    if len(c[3]) != len(pdom):
        return None
    ks = {k for k, v in enumerate(srcs) if v[1] == "tile" and v[2] == pdst[2]}
    if (pdst[3] != torch.float32 and not _exact(pexpr, psrcs, pdst[3])
            and not _stored_as_is(c, ks, pdst[3])):
        pexpr = ("round", pdst[3], pexpr)
    base = len(srcs)
    shifted = _shift(pexpr, base)
    expr = _subst(c[4], ks, shifted)
    srcs = srcs + list(psrcs)
    expr, srcs = _compact(expr, srcs)
    dom = tuple((("b", lo1[1], lo1[2] + ((lo2[1], 1),) + lo2[2]),
                 ("b", hi1[1], hi1[2] + ((hi2[1], 1),) + hi2[2]))
                for (lo1, hi1), (lo2, hi2) in zip(c[3], pdom))
    return (c[0], c[1], c[2], dom, expr, tuple(srcs)) + tuple(c[6:])


def _exact(e, srcs, dt):
    """Is expression e exactly representable in dt without rounding: one
    input of that very dtype (a load's copy into a tile)?  Then the round
    node is the identity and is left out (a bfloat16 tensor_add rounded
    each loaded value again: 0.36x of the copy bandwidth, target 0.7)."""
    return e[0] == "in" and srcs[e[1]][3] == dt


def _stored_as_is(c, ks, dt):
    """Does consumer c only copy the producer's tile into a destination of
    the same 16-bit float dtype?  Its store then rounds as the round node
    would, and round to nearest even is idempotent (integer roundings are
    not: their float round trip may move large values), so the node is
    left out: a 16-bit load -> math -> store chain rounds once."""
    return (c[0] == "ew" and c[4][0] == "in" and c[4][1] in ks and c[2][3] == dt
            and dt in (torch.bfloat16, torch.float16))


def _map(e, f):
    if e[0] == "in":
        return f(e)
    if e[0] in ("c", "lin"):
        return e
    if e[0] == "pred":
        return e
    if e[0] == "round":
        return ("round", e[1], _map(e[2], f))
    return (e[0],) + tuple(_map(x, f) for x in e[1:])


def _shift(e, base):
    return _map(e, lambda x: ("in", x[1] + base))


def _subst(e, ks, repl):
    return _map(e, lambda x: repl if x[1] in ks else x)


def _compact(expr, srcs):
    used = []
    _map(expr, lambda x: used.append(x[1]) or x)
    keep = sorted(set(used))
    new = {k: i for i, k in enumerate(keep)}
    return _map(expr, lambda x: ("in", new[x[1]])), [srcs[k] for k in keep]


