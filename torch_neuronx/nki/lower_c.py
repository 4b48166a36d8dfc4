"""Tile IR (rolled, allocated) -> one C translation unit with explicit loops.

Shapes, strides and addresses are constants (a kernel is traced per
signature), so gcc sees fixed trip counts and unit strides and vectorises the
inner loops; `omp simd` lets it reassociate reductions.  Every index was
bounds-checked at trace time for the whole grid (trace.check_ref), so the C
has no run-time checks.  Entry points: nki_init (function pointers),
nki_run (returns an error string or NULL) and neuron_entry (compiled.cpp's
trampoline protocol: one slot per argument, throws on failure).
"""
from __future__ import annotations

import math

import torch

from .ir import Aff, eval_bound

_CT = {torch.float32: ("float", "f32"), torch.bfloat16: ("uint16_t", "bf16"),
       torch.float16: ("uint16_t", "f16"), torch.int32: ("int32_t", "i32"),
       torch.int8: ("int8_t", "i8"), torch.int16: ("int16_t", "i16"),
       torch.uint8: ("uint8_t", "u8"),
       torch.bool: ("uint8_t", "b8"), torch.float64: ("double", "f64"),
       torch.int64: ("int64_t", "i64")}  # the last two in HBM only


def ctype(dt):
    if dt not in _CT:
        raise NotImplementedError(f"dtype {dt} is not supported by compiled NKI kernels")
    return _CT[dt]


def aff(a):
    a = Aff.of(a)
    parts = [str(a.c)] if a.c or not a.terms else []
    for s, k in a.terms:
        parts.append(s if k == 1 else f"{k}*{s}")
    return "(" + " + ".join(parts) + ")" if len(parts) > 1 else parts[0]


def flit(x):
    if math.isnan(x):
        return "NAN"
    if math.isinf(x):
        return "INFINITY" if x > 0 else "(-INFINITY)"
    return repr(float(x)) + "f"


def bound(b, lo):
    try:
        return str(eval_bound(b, {}, lo))
    except KeyError:
        pass
    v = aff(b[1])
    for num, d in b[2]:
        t = f"nki_cdiv({aff(num)}, {d})"
        v = f"nki_imax({v}, {t})" if lo else f"nki_imin({v}, {t})"
    return v


_FN1 = {"copy": "{}", "exp": "nki_exp({})", "log": "nki_log({})", "tanh": "nki_tanh({})",
        "sigmoid": "nki_sigmoid({})", "relu": "nki_relu({})", "gelu": "nki_gelu({})",
        "gelu_apprx_tanh": "nki_gelu_tanh({})", "silu": "nki_silu({})",
        "rsqrt": "(1.0f / sqrtf({}))", "sqrt": "sqrtf({})", "square": "({0} * {0})",
        "reciprocal": "(1.0f / {})", "abs": "fabsf({})", "negative": "(-{})",
        "sign": "nki_sign({})", "erf": "nki_erf({})", "sin": "sinf({})", "cos": "cosf({})"}
_FN2 = {"add": "({} + {})", "subtract": "({} - {})", "multiply": "({} * {})",
        "divide": "({} / {})", "maximum": "nki_max({}, {})", "minimum": "nki_min({}, {})",
        "power": "powf({}, {})", "greater": "(float)({} > {})", "less": "(float)({} < {})",
        "greater_equal": "(float)({} >= {})", "less_equal": "(float)({} <= {})",
        "equal": "(float)({} == {})", "not_equal": "(float)({} != {})",
        "logical_and": "(float)(({} != 0.0f) & ({} != 0.0f))",
        "logical_or": "(float)(({} != 0.0f) | ({} != 0.0f))"}


def expr(e):
    k = e[0]
    if k == "in":
        return f"v{e[1]}"
    if k == "c":
        return flit(e[1])
    if k == "lin":
        return "(float)(" + " + ".join([aff(e[1])] + [f"{c}*x{d}" for d, c in e[2]]) + ")"
    if k == "pred":
        return "(float)(" + " && ".join(f"({expr(l)} {op} 0.0f)" for l, op in e[1]) + ")"
    if k == "where":
        return f"({expr(e[1])} != 0.0f ? {expr(e[2])} : {expr(e[3])})"
    if k == "round":  # a fused producer's rounding to its tile dtype
        return f"nki_round_{ctype(e[1])[1]}({expr(e[2])})"
    if k in _FN1:
        return _FN1[k].format(expr(e[1]))
    return _FN2[k].format(expr(e[1]), expr(e[2]))


class Lowering:
    def __init__(self, name, args, grid, sbuf, psum, tables):
        self.name, self.args, self.grid = name, args, tuple(grid) + (1,) * (3 - len(grid))
        self.sbuf, self.psum, self.tables = sbuf, psum, tables
        self.funcs = []
        self.nloop = 0

    def ptr(self, v):
        t, _ = ctype(v[3])
        if v[1] == "arg":
            return f"(({t} *)(uintptr_t)A[{v[2]}])"
        base = "S" if v[1] == "sbuf" else "Q"
        return f"(({t} *)({base} + {aff(v[2])}))"

    @staticmethod
    def index(v, dims):
        parts = [aff(v[4])]
        for d, s in zip(dims, v[6]):
            if s:
                parts.append(f"x{d}*{s}" if s != 1 else f"x{d}")
        return " + ".join(parts)

    def domain(self, dom, out):
        nonempty = []
        for d, (lo, hi) in enumerate(dom):
            out.append(f"const int64_t l{d} = {bound(lo, True)}, h{d} = {bound(hi, False)};")
            nonempty.append(f"l{d} < h{d}")
        return " && ".join(nonempty) or "1"

    def op(self, op, out):
        out.append(f"/* {op[1]} */ {{")
        body = []
        getattr(self, "op_" + op[0])(op, body)
        out.extend("  " + x for x in body)
        out.append("}")

    def op_ew(self, op, out):
        _, _, dst, dom, e, srcs = op
        cond = self.domain(dom, out)
        nd = len(dom)
        out.append(f"if ({cond}) {{")
        for d in range(nd):
            if d == nd - 1:
                out.extend(self.prefetch(srcs, nd))
                out.append("#pragma omp simd")
            out.append(f"for (int64_t x{d} = l{d}; x{d} < h{d}; x{d}++)")
            if d == nd - 2:
                out.append("{")
        out.append("{")
        for k, s in enumerate(srcs):
            out.append(f"  const float v{k} = NKI_LD_{ctype(s[3])[1]}(&{self.ptr(s)}"
                       f"[{self.index(s, range(nd))}]);")
        out.append(f"  NKI_ST_{ctype(dst[3])[1]}(&{self.ptr(dst)}[{self.index(dst, range(nd))}], "
                   f"{expr(e)});")
        out.append("}}" + ("}" if nd >= 2 else ""))

    def prefetch(self, srcs, nd):
        """Rows of HBM sources two outer iterations ahead: tiles read short
        runs (a [128, 512] bfloat16 tile: 1 KiB per row, rows far apart),
        too short for the hardware prefetcher to follow."""
        if nd < 2:
            return []
        lines = []
        for s in srcs:
            if s[1] != "arg" or s[6][-1] != 1 or s[6][-2] == 0:
                continue
            row = s[5][-1] * s[3].itemsize
            if row < 64:
                continue
            ahead = {d: (f"x{d} + 2" if d == nd - 2 else f"x{d}") for d in range(nd)}
            idx = " + ".join([aff(s[4])] + [f"({ahead[d]})*{st}" for d, st in
                                            enumerate(s[6][:-1]) if st] + [f"l{nd - 1}"])
            lines.append(f"for (int64_t pf = 0; pf < {row}; pf += 64) "
                         f"__builtin_prefetch((const char *)&{self.ptr(s)}[{idx}] + pf);")
        return lines

    def op_red(self, op, out):
        _, _, dst, dom, e, srcs, rop, axes, scale = op
        cond = self.domain(dom, out)
        nd = len(dom)
        kept = [d for d in range(nd) if d not in axes]
        init = {"sum": "0.0f", "max": "(-INFINITY)", "min": "INFINITY"}[rop]
        step = {"sum": "acc += r;", "max": "acc = r > acc ? r : acc;",
                "min": "acc = r < acc ? r : acc;"}[rop]
        red = {"sum": "+", "max": "max", "min": "min"}[rop]
        out.append(f"if ({cond}) {{")
        for d in kept:
            out.append(f"for (int64_t x{d} = l{d}; x{d} < h{d}; x{d}++)")
        out.append("{")
        out.append(f"  float acc = {init};")
        for d in axes:
            if d == axes[-1]:
                out.append(f"  #pragma omp simd reduction({red}:acc)")
            out.append(f"  for (int64_t x{d} = l{d}; x{d} < h{d}; x{d}++)")
        out.append("  {")
        for k, s in enumerate(srcs):
            out.append(f"    const float v{k} = NKI_LD_{ctype(s[3])[1]}(&{self.ptr(s)}"
                       f"[{self.index(s, range(nd))}]);")
        out.append(f"    const float r = {expr(e)};")
        out.append(f"    {step}")
        out.append("  }")
        sc = "" if scale == 1.0 else f" * {flit(scale)}"
        out.append(f"  NKI_ST_{ctype(dst[3])[1]}(&{self.ptr(dst)}[{self.index(dst, range(nd))}], "
                   f"acc{sc});")
        out.append("}}")

    def op_mm(self, op, out):
        _, _, dst, _, st, mv, acc = op
        K, M = st[5]
        N = mv[5][1]
        ls, lm = ctype(st[3])[1], ctype(mv[3])[1]
        out.append(f"nki_matmul<nki_ld_{ls}, nki_ld_{lm}>({self.ptr(dst)} + {aff(dst[4])}, "
                   f"{dst[6][0]}, {self.ptr(st)} + {aff(st[4])}, {st[6][0]}, "
                   f"{self.ptr(mv)} + {aff(mv[4])}, {mv[6][0]}, {K}, {M}, {N}, {int(acc)});")

    def op_tr(self, op, out):
        _, _, dst, _, src = op
        F, P = dst[5]
        out.append(f"for (int64_t x0 = 0; x0 < {F}; x0++)")
        out.append("#pragma omp simd")
        out.append(f"for (int64_t x1 = 0; x1 < {P}; x1++)")
        sv = f"{self.ptr(src)}[{aff(src[4])} + x1*{src[6][0]} + x0*{src[6][1]}]"
        out.append(f"  NKI_ST_{ctype(dst[3])[1]}(&{self.ptr(dst)}[{self.index(dst, (0, 1))}], "
                   f"NKI_LD_{ctype(src[3])[1]}(&{sv}));")

    def block(self, items, out, top):
        for it in items:
            if it[0] != "for":
                self.op(it, out)
                continue
            _, var, count, body, parallel = it
            if parallel and top:
                fn = f"loop{self.nloop}"
                self.nloop += 1
                inner = []
                self.block(body, inner, False)
                self.funcs.append(self.loop_fn(fn, var, inner))
                out.append(f"nki_pfor({aff(count)}, 1, {fn}, E);")
                out.append("if (E->err) return;")
            else:
                out.append(f"for (int64_t {var} = 0; {var} < {aff(count)}; {var}++) {{")
                inner = []
                self.block(body, inner, False)
                out.extend("  " + x for x in inner)
                out.append("}")

    PROLOGUE = ("  char *S = E->S, *Q = E->Q; const uint64_t *A = E->A;\n"
                "  const int64_t p0 = E->p0, p1 = E->p1, p2 = E->p2;\n"
                "  (void)S; (void)Q; (void)A; (void)p0; (void)p1; (void)p2;\n")

    def loop_fn(self, fn, var, inner):
        return (f"static void {fn}(void *arg, int64_t b, int64_t e, int w) {{\n"
                "  nki_env *P = (nki_env *)arg, L = *P, *E = &L;\n  (void)w;\n"
                f"  if (!nki_scratch(E, {self.sbuf}, {self.psum})) {{ P->err = E->err; return; }}\n"
                f"  if (E->S != P->S) memcpy(E->S, P->S, {self.sbuf + self.psum});\n"
                + self.PROLOGUE +
                f"  for (int64_t {var} = b; {var} < e; {var}++) {{\n"
                + "".join("    " + x + "\n" for x in inner) +
                "  }\n}\n")

    def source(self, root):
        prog = []
        self.block(root, prog, True)
        g0, g1, g2 = self.grid
        G = g0 * g1 * g2
        tabs = "".join(f"static const int64_t T{i}[] = {{{', '.join(map(str, v))}}};\n"
                       for i, v in enumerate(self.tables.values))
        name = self.name.replace('"', "'")
        return (
            f'/* NKI kernel {name}: generated by torch_neuronx/nki/lower_c.py */\n'
            '#include "nki_rt.h"\n#include <string>\n' + tabs + "\n"
            + "static void program(nki_env *E);\n"
            + "".join(self.funcs) +
            "static void program(nki_env *E) {\n" + self.PROLOGUE
            + "".join("  " + x + "\n" for x in prog) + "}\n\n"
            "static void grid_chunk(void *arg, int64_t b, int64_t e, int w) {\n"
            "  nki_env *P = (nki_env *)arg, L = *P;\n  (void)w;\n"
            f"  if (!nki_scratch(&L, {self.sbuf}, {self.psum})) {{ P->err = L.err; return; }}\n"
            "  for (int64_t g = b; g < e; g++) {\n"
            f"    L.p0 = g / {g1 * g2}; L.p1 = (g / {g2}) % {g1}; L.p2 = g % {g2};\n"
            "    program(&L);\n    if (L.err) { P->err = L.err; return; }\n  }\n}\n\n"
            'extern "C" const char *nki_run(const uint64_t *A) {\n'
            "  nki_env E;\n  memset(&E, 0, sizeof E);\n  E.A = A;\n"
            f"  if ({G} == 1) {{\n    if (nki_scratch(&E, {self.sbuf}, {self.psum})) program(&E);\n"
            "    return E.err;\n  }\n"
            f"  nki_pfor({G}, 1, grid_chunk, &E);\n  return E.err;\n}}\n\n"
            'extern "C" void neuron_entry(const uint64_t *slots) {\n'
            "  const char *err = nki_run(slots);\n"
            f'  if (err) throw std::runtime_error(std::string("{name}: ") + err);\n}}\n')
