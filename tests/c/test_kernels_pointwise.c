/* The pointwise kernel: every op in its compute classes, mixed and wrapped
 * scalar operands (rounded/wrapped to the compute dtype on load), bool
 * outputs of predicates, contiguous, broadcast, transposed, strided, 0-dim,
 * empty and pool-split layouts; against a reference written here (double
 * and __int128 math, then ATen's conversions); integer division by zero,
 * INT64_MIN / -1, shifts past the width, integer pow with negative
 * exponents, nextafter in 16-bit formats, and the validation failures. */
#define _POSIX_C_SOURCE 200809L
#include "test_kernels_util.h"

typedef struct pcase {
  nk_pointwise_op op;
  nrt_dtype out, compute, in[3];
  nk_scalar s0, s1;
} pcase;

static int n_inputs(nk_pointwise_op op) {
  if (op >= NK_PW_WHERE) return 3;
  if (op >= NK_PW_POW_SCALAR) return 1;
  return 2;
}

static int is_predicate(nk_pointwise_op op) { return op >= NK_PW_EQ && op <= NK_PW_LOGICAL_XOR; }

/* sign-extending wrap of v to integral dtype t */
static int64_t wrap_to(nrt_dtype t, uint64_t v) {
  int bits = 8 * (int)tk_size(t);
  if (t == NRT_BOOL) return v != 0;
  if (bits == 64) return (int64_t)v;
  v &= (1ull << bits) - 1;
  if (t != NRT_UINT8 && v >= (1ull << (bits - 1))) return (int64_t)(v - (1ull << bits));
  return (int64_t)v;
}

/* v as the compute dtype holds it (what ATen's cast to the common dtype gives) */
static tk_value to_compute(nrt_dtype c, tk_value v) {
  if (c == NRT_BOOL) return (tk_value){1, v.is_int ? v.i != 0 : (v.f != 0 || isnan(v.f)), 0};
  if (tk_is_integral(c)) {
    int64_t i = v.is_int ? v.i : (int64_t)trunc(v.f);
    return (tk_value){1, wrap_to(c, (uint64_t)i), 0};
  }
  double f = v.is_int ? (double)v.i : v.f;
  if (c != NRT_FLOAT64) f = (float)f; /* double -> half goes through float */
  return tk_stored(c, (tk_value){0, 0, f});
}

static __int128 floor_div(__int128 a, __int128 b) {
  __int128 q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

/* an intermediate in ATen's op-math type: float below float64 */
static double op_round(nrt_dtype t, double v) { return t == NRT_FLOAT64 ? v : (float)v; }

/* The reference result in the compute class; *exact is cleared for results
 * that may differ from the kernel's float math in the last bits. */
static tk_value reference(const pcase *c, tk_value a, tk_value b, tk_value w, int *exact) {
  const nrt_dtype t = c->compute;
  a = to_compute(t, a), b = to_compute(t, b), w = to_compute(t, w);
  *exact = 1;
  if (tk_is_integral(t)) {
    const __int128 x = a.i, y = b.i, z = w.i;
    const int bits = 8 * (int)tk_size(t);
    __int128 r = 0;
    switch (c->op) {
    case NK_PW_POW: case NK_PW_POW_SCALAR: {
      int64_t e = c->op == NK_PW_POW ? b.i : c->s0.i;
      if (e < 0) r = x == 1 ? 1 : x == -1 ? (e % 2 ? -1 : 1) : 0;
      else { uint64_t p = 1; for (int64_t k = 0; k < e; k++) p *= (uint64_t)a.i; r = (int64_t)p; }
      break;
    }
    case NK_PW_REMAINDER: r = x - y * floor_div(x, y); break;
    case NK_PW_FMOD: r = x % y; break;
    case NK_PW_DIV_TRUNC: r = x / y; break;
    case NK_PW_DIV_FLOOR: r = floor_div(x, y); break;
    case NK_PW_MAXIMUM: case NK_PW_FMAX: r = x > y ? x : y; break;
    case NK_PW_MINIMUM: case NK_PW_FMIN: r = x < y ? x : y; break;
    case NK_PW_EQ: r = x == y; break;
    case NK_PW_NE: r = x != y; break;
    case NK_PW_LT: r = x < y; break;
    case NK_PW_LE: r = x <= y; break;
    case NK_PW_GT: r = x > y; break;
    case NK_PW_GE: r = x >= y; break;
    case NK_PW_LOGICAL_AND: r = x && y; break;
    case NK_PW_LOGICAL_OR: r = x || y; break;
    case NK_PW_LOGICAL_XOR: r = !x != !y; break;
    case NK_PW_BITWISE_AND: r = a.i & b.i; break;
    case NK_PW_BITWISE_OR: r = a.i | b.i; break;
    case NK_PW_BITWISE_XOR: r = a.i ^ b.i; break;
    case NK_PW_LSHIFT: r = y < 0 || y >= bits ? 0 : (int64_t)((uint64_t)a.i << y); break;
    case NK_PW_RSHIFT: {
      int lim = t == NRT_UINT8 ? 8 : bits - 1;
      r = y < 0 || y >= lim ? (x < 0 ? -1 : 0) : x >> y;
      break;
    }
    case NK_PW_CLAMP_SCALAR: r = x < c->s0.i ? c->s0.i : x > c->s1.i ? c->s1.i : x;
      if (c->s0.i > c->s1.i) r = c->s1.i;
      break;
    case NK_PW_CLAMP_MIN_SCALAR: r = x < c->s0.i ? c->s0.i : x; break;
    case NK_PW_CLAMP_MAX_SCALAR: r = x > c->s0.i ? c->s0.i : x; break;
    case NK_PW_CLAMP: r = y > z ? z : x < y ? y : x > z ? z : x; break;
    case NK_PW_ADDCMUL: r = (int64_t)((uint64_t)a.i + (uint64_t)c->s0.i * (uint64_t)b.i * (uint64_t)w.i); break;
    case NK_PW_HEAVISIDE: r = x == 0 ? y : x > 0; break;
    case NK_PW_GCD: case NK_PW_LCM: {
      __int128 g = x < 0 ? -x : x, h = y < 0 ? -y : y; /* Euclid on magnitudes */
      while (h != 0) { __int128 t2 = g % h; g = h; h = t2; }
      if (c->op == NK_PW_GCD) { r = g; break; }
      if (g == 0) { r = 0; break; }
      __int128 l = x / g * y;                        /* C++: in int below 32 bits, */
      if (bits >= 32) l = wrap_to(t, (uint64_t)(int64_t)(uint64_t)l); /* else in the dtype */
      r = l < 0 ? -l : l;
      break;
    }
    default: break;
    }
    return (tk_value){1, wrap_to(t, (uint64_t)(int64_t)(uint64_t)r), 0};
  }
  const double x = a.f, y = b.f, z = w.f, s0 = c->s0.f, s1 = c->s1.f;
  const int nan_in = isnan(x) || isnan(y);
  double r = 0;
  switch (c->op) {
  case NK_PW_POW: r = pow(x, y); *exact = 0; break;
  case NK_PW_POW_SCALAR: r = pow(x, s0); *exact = 0; break;
  case NK_PW_REMAINDER: r = fmod(x, y); if (r != 0 && (r < 0) != (y < 0)) r += y; break;
  case NK_PW_FMOD: r = fmod(x, y); break;
  case NK_PW_DIV_TRUNC: r = trunc(x / y); *exact = 0; break;
  case NK_PW_DIV_FLOOR: { /* Python's //: the quotient of x - fmod(x, y), floored */
    double m = fmod(x, y), q = (x - m) / y;
    if (m != 0 && (y < 0) != (m < 0)) q -= 1;
    r = y == 0 ? x / y : q == 0 ? copysign(0, x / y) : q - floor(q) > 0.5 ? floor(q) + 1 : floor(q);
    *exact = 0;
    break;
  }
  case NK_PW_MAXIMUM: r = nan_in ? NAN : fmax(x, y); break;
  case NK_PW_MINIMUM: r = nan_in ? NAN : fmin(x, y); break;
  case NK_PW_FMAX: r = fmax(x, y); break;
  case NK_PW_FMIN: r = fmin(x, y); break;
  case NK_PW_ATAN2: r = atan2(x, y); *exact = 0; break;
  case NK_PW_HYPOT: r = hypot(x, y); *exact = 0; break;
  case NK_PW_COPYSIGN: r = copysign(x, y); break;
  case NK_PW_XLOGY: r = isnan(y) ? NAN : x == 0 ? 0 : x * log(y); *exact = 0; break;
  case NK_PW_EQ: r = x == y; break;
  case NK_PW_NE: r = x != y; break;
  case NK_PW_LT: r = x < y; break;
  case NK_PW_LE: r = x <= y; break;
  case NK_PW_GT: r = x > y; break;
  case NK_PW_GE: r = x >= y; break;
  case NK_PW_LOGICAL_AND: r = x != 0 && y != 0; break;
  case NK_PW_LOGICAL_OR: r = x != 0 || y != 0; break;
  case NK_PW_LOGICAL_XOR: r = (x != 0) != (y != 0); break;
  case NK_PW_LOGADDEXP: /* written around the larger one, or exp overflows */
    r = isinf(x) && x == y ? x : fmax(x, y) + log1p(exp(-fabs(x - y)));
    if (nan_in) r = NAN;
    *exact = 0;
    break;
  case NK_PW_LOGADDEXP2:
    r = isinf(x) && x == y ? x : fmax(x, y) + log1p(exp2(-fabs(x - y))) / log(2);
    if (nan_in) r = NAN;
    *exact = 0;
    break;
  case NK_PW_XLOG1PY: r = isnan(y) ? NAN : x == 0 ? 0 : x * log1p(y); *exact = 0; break;
  case NK_PW_HEAVISIDE: r = x == 0 ? y : x > 0; break;
  case NK_PW_LERP_SCALAR: /* from the nearer end, as ATen */
  case NK_PW_LERP: {
    double wt = c->op == NK_PW_LERP ? z : s0;
    r = fabs(wt) < 0.5 ? x + wt * (y - x) : y - (y - x) * (1 - wt);
    *exact = 0;
    break;
  }
  case NK_PW_CLAMP_SCALAR: r = isnan(x) ? x : fmin(fmax(x, s0), s1); break;
  case NK_PW_CLAMP_MIN_SCALAR: r = isnan(x) ? x : fmax(x, s0); break;
  case NK_PW_CLAMP_MAX_SCALAR: r = isnan(x) ? x : fmin(x, s0); break;
  case NK_PW_CLAMP: r = isnan(x) || isnan(y) || isnan(z) ? NAN : fmin(fmax(x, y), z); break;
  case NK_PW_ADDCMUL: r = x + op_round(t, op_round(t, s0 * y) * z); *exact = 0; break;
  case NK_PW_ADDCDIV: r = x + op_round(t, op_round(t, s0 * y) / z); *exact = 0; break;
  default: break;
  }
  (void)s1;
  return to_compute(t, (tk_value){0, 0, r});
}

static double raw_value(nrt_dtype t, uint64_t raw) {
  switch (t) {
  case NRT_FLOAT16: return tk_f16_value((uint16_t)raw);
  case NRT_BFLOAT16: return tk_bf16_value((uint16_t)raw);
  case NRT_FLOAT32: { float f; memcpy(&f, &raw, 4); return f; }
  case NRT_FLOAT64: { double d; memcpy(&d, &raw, 8); return d; }
  default: return (double)wrap_to(t, raw);
  }
}

/* got matches want: same bytes, both NaN, or (inexact ops) within a few
 * units of the dtype's precision */
static int matches(nrt_dtype t, nrt_dtype compute, uint64_t want, uint64_t got, int exact) {
  if (want == got) return 1;
  double w = raw_value(t, want), g = raw_value(t, got);
  if (isnan(w) && isnan(g)) return 1;
  if (w == g) return 1; /* +0 and -0 */
  if (exact || tk_is_integral(t)) return 0;
  nrt_dtype p = compute < t ? compute : t; /* the coarser of the two */
  double tol = p == NRT_FLOAT64 ? 1e-12 : p == NRT_FLOAT32 ? 1e-5 : 1e-2;
  if (isinf(w) || isinf(g)) return 0;
  return fabs(w - g) <= tol * fmax(1, fabs(w));
}

static const char *const op_names[] = {
    "pow", "remainder", "fmod", "div_trunc", "div_floor", "maximum", "minimum", "fmax", "fmin",
    "atan2", "hypot", "copysign", "xlogy", "nextafter", "eq", "ne", "lt", "le", "gt", "ge",
    "logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor",
    "lshift", "rshift", "lerp_scalar", "logaddexp", "logaddexp2", "xlog1py", "heaviside", "gcd",
    "lcm", "igamma", "igammac", "zeta", "chebyshev_t", "chebyshev_u", "chebyshev_v",
    "chebyshev_w", "shifted_chebyshev_t", "shifted_chebyshev_u", "shifted_chebyshev_v",
    "shifted_chebyshev_w", "hermite_h", "hermite_he", "laguerre_l", "legendre_p", "pow_scalar", "clamp_scalar", "clamp_min_scalar",
    "clamp_max_scalar", "where", "clamp", "lerp", "addcmul", "addcdiv"};
_Static_assert(sizeof op_names / sizeof op_names[0] == NK_PW_OP_COUNT, "a name per op");

/* the values an input of dtype t takes; divisors and exponents avoid the
 * cases the kernel refuses or the reference cannot follow */
static int values_of(nrt_dtype t, int role, const pcase *c, tk_value *out) {
  static const int64_t ints[] = {0, 1, -1, 2, 3, -7, 100, 127, -128, 255, 1000, -32768, 65535,
                                 2147483647, -2147483647 - 1, (1ll << 40) + 3, INT64_MAX, INT64_MIN};
  static const int64_t small[] = {0, 1, 2, 3, 5, 7, 9, 31, 63, -1, -3, 64, 100};
  static const double floats[] = {0, -0.0, 1, -1, 0.5, 3, -2.5, 7, -7.25, 1e30, -1e30, INFINITY,
                                  -INFINITY, NAN, 100, 0.125, 6.5};
  const int divisor = role == 1 && (c->op == NK_PW_REMAINDER || c->op == NK_PW_FMOD ||
                                    c->op == NK_PW_DIV_TRUNC || c->op == NK_PW_DIV_FLOOR);
  const int exponent = role == 1 && c->op == NK_PW_POW;
  int n = 0;
  if (t == NRT_BOOL) {
    out[n++] = (tk_value){1, 0, 0};
    out[n++] = (tk_value){1, 1, 0};
    out[n++] = (tk_value){1, 1, 0};
  } else if (tk_is_integral(t) && (exponent || (role == 1 && (c->op == NK_PW_LSHIFT || c->op == NK_PW_RSHIFT)))) {
    for (size_t k = 0; k < sizeof small / sizeof small[0]; k++)
      if (wrap_to(t, (uint64_t)small[k]) == small[k]) out[n++] = (tk_value){1, small[k], 0};
  } else if (tk_is_integral(t)) {
    for (size_t k = 0; k < sizeof ints / sizeof ints[0]; k++)
      if (wrap_to(t, (uint64_t)ints[k]) == ints[k] &&
          !(divisor && wrap_to(c->compute, (uint64_t)ints[k]) == 0))
        out[n++] = (tk_value){1, ints[k], 0};
  } else {
    for (size_t k = 0; k < sizeof floats / sizeof floats[0]; k++)
      out[n++] = tk_stored(t, (tk_value){0, 0, floats[k]});
  }
  return n;
}

/* strides in elements for out and each input (NULL out: contiguous) */
static int check_case(const pcase *c, int ndim, const int64_t *sizes, const int64_t *so,
                      const int64_t *const *si) {
  const int nin = n_inputs(c->op);
  int64_t contiguous[NRT_MAX_DIMS], step = 1, numel = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    contiguous[d] = step;
    step *= sizes[d];
    numel *= sizes[d];
  }
  const int64_t *st[4] = {so ? so : contiguous, si[0], si[1], si[2]};
  nrt_dtype dt[4] = {c->out, c->in[0], c->in[1], c->in[2]};
  tk_value vals[3][32];
  int nv[3] = {1, 1, 1};
  char *mem[4] = {0};
  nrt_operand ops[4];
  for (int k = 0; k <= nin; k++) {
    int64_t span = 1;
    for (int d = 0; d < ndim; d++) span += (sizes[d] - 1) * st[k][d];
    if (numel == 0) span = 0;
    mem[k] = tk_alloc((size_t)(span * tk_size(dt[k])));
    if (k > 0) {
      nv[k - 1] = values_of(dt[k], k - 1, c, vals[k - 1]);
      for (int64_t j = 0; j < span; j++)
        tk_put(dt[k], mem[k] + j * tk_size(dt[k]), vals[k - 1][(3 * j + k) % nv[k - 1]]);
    }
    ops[k] = tk_operand(mem[k], dt[k], ndim, sizes, st[k]);
  }
  nk_pointwise_params prm = {c->op, c->compute, c->s0, c->s1};
  nrt_task t = tk_task(NK_KERNEL_POINTWISE, nin + 1, ops, &prm, sizeof prm);
  int bad = tk_run(&t) != NRT_SUCCESS;
  if (bad) fprintf(stderr, "  %s failed: %s\n", op_names[c->op], nrt_last_error());
  for (int64_t lin = 0; lin < numel && !bad; lin++) {
    int64_t rest = lin, off[4] = {0, 0, 0, 0};
    for (int d = ndim - 1; d >= 0; d--) {
      for (int k = 0; k <= nin; k++) off[k] += (rest % sizes[d]) * st[k][d];
      rest /= sizes[d];
    }
    tk_value in[3] = {{1, 0, 0}, {1, 0, 0}, {1, 0, 0}};
    for (int k = 1; k <= nin; k++) in[k - 1] = vals[k - 1][(3 * off[k] + k) % nv[k - 1]];
    int exact = 1;
    uint64_t want;
    if (c->op == NK_PW_WHERE) {
      int cond = in[0].is_int ? in[0].i != 0 : (in[0].f != 0 || isnan(in[0].f));
      want = tk_expected(in[cond ? 1 : 2], c->out);
    } else {
      want = tk_expected(reference(c, in[0], in[1], in[2], &exact), c->out);
    }
    uint64_t got = tk_raw(c->out, mem[0] + off[0] * tk_size(c->out));
    if (!matches(c->out, c->compute, want, got, exact)) {
      fprintf(stderr, "  %s(%s, %s, %s) -> %s in %s: [%lld] a=%lld/%g b=%lld/%g c=%lld/%g gave 0x%llx, want 0x%llx\n",
              op_names[c->op], tk_dtype_names[c->in[0]], tk_dtype_names[c->in[1]],
              tk_dtype_names[c->in[2]], tk_dtype_names[c->out], tk_dtype_names[c->compute],
              (long long)lin, (long long)in[0].i, in[0].f, (long long)in[1].i, in[1].f,
              (long long)in[2].i, in[2].f, (unsigned long long)got, (unsigned long long)want);
      bad = 1;
    }
  }
  for (int k = 0; k <= nin; k++) tk_free(mem[k]);
  return !bad;
}

static void check_layouts(const pcase *c) {
  int64_t n1[1] = {1003}, one[1] = {1}, zero[1] = {0}, s3[1] = {3}, s2[1] = {2};
  const int64_t *contig[3] = {one, one, one}, *bcast[3] = {one, zero, one},
                *lead[3] = {zero, one, zero}, *strided[3] = {s3, one, s3};
  CHECK(check_case(c, 1, n1, NULL, contig));
  CHECK(check_case(c, 1, n1, NULL, bcast));  /* tensor op scalar */
  CHECK(check_case(c, 1, n1, NULL, lead));   /* scalar op tensor */
  CHECK(check_case(c, 1, n1, s2, strided));  /* strided out and inputs */
  int64_t n2[2] = {37, 29}, tr[2] = {1, 37}, row[2] = {0, 1}, cont[2] = {29, 1};
  const int64_t *two[3] = {tr, row, cont};
  CHECK(check_case(c, 2, n2, NULL, two)); /* transposed, broadcast row */
  const int64_t *none[3] = {NULL, NULL, NULL};
  CHECK(check_case(c, 0, NULL, NULL, none)); /* 0-dim */
  int64_t empty[2] = {0, 5}, est[2] = {5, 1};
  const int64_t *es[3] = {est, est, est};
  CHECK(check_case(c, 2, empty, NULL, es)); /* 0-size */
}

/* every op in every compute dtype it is defined for, operands of that dtype */
static void test_same_dtype(void) {
  for (int op = 0; op < NK_PW_OP_COUNT; op++) {
    if (op == NK_PW_NEXTAFTER) continue; /* its own test */
    if (op >= NK_PW_IGAMMA && op <= NK_PW_LEGENDRE_P) continue; /* test_kernels_special.c */
    for (nrt_dtype t = 0; t < NRT_DTYPE_COUNT; t++) {
      const int floating = t >= NRT_FLOAT16, integral = t != NRT_BOOL && !floating;
      const int float_only = (op >= NK_PW_ATAN2 && op <= NK_PW_XLOGY) || op == NK_PW_LERP ||
                             (op >= NK_PW_LERP_SCALAR && op <= NK_PW_XLOG1PY) || op == NK_PW_ADDCDIV;
      const int int_only = op == NK_PW_GCD || op == NK_PW_LCM;
      const int bits = op >= NK_PW_BITWISE_AND && op <= NK_PW_RSHIFT;
      const int shift = op == NK_PW_LSHIFT || op == NK_PW_RSHIFT;
      const int any_dtype = (op >= NK_PW_MAXIMUM && op <= NK_PW_FMIN) ||
                            (op >= NK_PW_EQ && op <= NK_PW_LOGICAL_XOR) || op == NK_PW_WHERE ||
                            op == NK_PW_HEAVISIDE;
      if (float_only && !floating) continue;
      if (int_only && !integral) continue;
      if (bits && (floating || (shift && t == NRT_BOOL))) continue;
      if (t == NRT_BOOL && !bits && !any_dtype) continue;
      pcase c = {op, is_predicate(op) ? NRT_BOOL : t, t, {t, t, t}, {0.5, 2}, {3.0, 7}};
      if (op == NK_PW_WHERE) c.in[0] = NRT_BOOL;
      if (op == NK_PW_POW_SCALAR) c.s0 = floating ? (nk_scalar){3, 3} : (nk_scalar){5, 5};
      if (op == NK_PW_CLAMP_SCALAR) c.s0 = (nk_scalar){-2.5, -2}, c.s1 = (nk_scalar){6.5, 100};
      if (op == NK_PW_CLAMP_MIN_SCALAR || op == NK_PW_CLAMP_MAX_SCALAR) c.s0 = (nk_scalar){0.5, 3};
      check_layouts(&c);
    }
  }
}

/* inputs of other dtypes than the compute dtype: ATen's promotions and its
 * wrapped scalars, which are cast to the compute dtype first */
static void test_mixed(void) {
  const pcase cases[] = {
      {NK_PW_REMAINDER, NRT_FLOAT32, NRT_FLOAT32, {NRT_INT32, NRT_FLOAT32}, {0, 0}, {0, 0}},
      {NK_PW_DIV_FLOOR, NRT_INT8, NRT_INT8, {NRT_INT8, NRT_INT64}, {0, 0}, {0, 0}},   /* wrapped int */
      {NK_PW_MAXIMUM, NRT_FLOAT16, NRT_FLOAT16, {NRT_FLOAT16, NRT_FLOAT64}, {0, 0}, {0, 0}}, /* rounds to half */
      {NK_PW_LT, NRT_BOOL, NRT_INT16, {NRT_UINT8, NRT_INT16}, {0, 0}, {0, 0}},
      {NK_PW_EQ, NRT_FLOAT32, NRT_FLOAT64, {NRT_FLOAT32, NRT_FLOAT64}, {0, 0}, {0, 0}}, /* eq(out=float) */
      {NK_PW_LOGICAL_AND, NRT_BOOL, NRT_BFLOAT16, {NRT_BFLOAT16, NRT_BOOL}, {0, 0}, {0, 0}},
      {NK_PW_LOGICAL_XOR, NRT_INT32, NRT_FLOAT32, {NRT_FLOAT32, NRT_INT64}, {0, 0}, {0, 0}},
      {NK_PW_BITWISE_XOR, NRT_INT64, NRT_INT32, {NRT_INT8, NRT_INT32}, {0, 0}, {0, 0}},
      {NK_PW_LSHIFT, NRT_INT16, NRT_INT16, {NRT_INT16, NRT_INT64}, {0, 0}, {0, 0}},
      {NK_PW_RSHIFT, NRT_UINT8, NRT_UINT8, {NRT_UINT8, NRT_INT64}, {0, 0}, {0, 0}},
      {NK_PW_POW, NRT_FLOAT64, NRT_FLOAT32, {NRT_FLOAT32, NRT_INT32}, {0, 0}, {0, 0}}, /* out wider */
      {NK_PW_WHERE, NRT_FLOAT32, NRT_FLOAT32, {NRT_UINT8, NRT_FLOAT32, NRT_INT64}, {0, 0}, {0, 0}},
      {NK_PW_WHERE, NRT_INT16, NRT_INT16, {NRT_UINT8, NRT_INT16, NRT_INT16}, {0, 0}, {0, 0}},
      {NK_PW_WHERE, NRT_BFLOAT16, NRT_BFLOAT16, {NRT_FLOAT32, NRT_BFLOAT16, NRT_BFLOAT16}, {0, 0}, {0, 0}},
      {NK_PW_CLAMP, NRT_FLOAT32, NRT_FLOAT32, {NRT_FLOAT32, NRT_INT64, NRT_FLOAT64}, {0, 0}, {0, 0}},
      {NK_PW_ADDCMUL, NRT_BFLOAT16, NRT_BFLOAT16, {NRT_BFLOAT16, NRT_BFLOAT16, NRT_FLOAT64}, {-0.5, 0}, {0, 0}},
      {NK_PW_ATAN2, NRT_FLOAT32, NRT_FLOAT32, {NRT_INT64, NRT_FLOAT16}, {0, 0}, {0, 0}},
      {NK_PW_MINIMUM, NRT_INT64, NRT_BOOL, {NRT_BOOL, NRT_BOOL}, {0, 0}, {0, 0}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_layouts(&cases[i]);
}

/* sizes that the pool splits */
static void test_parallel(void) {
  int64_t n[1] = {(1 << 20) + 3}, one[1] = {1}, zero[1] = {0};
  const int64_t *contig[3] = {one, one, one}, *bcast[3] = {one, zero, one};
  pcase c = {NK_PW_GT, NRT_BOOL, NRT_FLOAT32, {NRT_FLOAT32, NRT_FLOAT32}, {0, 0}, {0, 0}};
  CHECK(check_case(&c, 1, n, NULL, contig));
  c = (pcase){NK_PW_REMAINDER, NRT_INT32, NRT_INT32, {NRT_INT32, NRT_INT32}, {0, 0}, {0, 0}};
  CHECK(check_case(&c, 1, n, NULL, bcast));
  c = (pcase){NK_PW_WHERE, NRT_FLOAT64, NRT_FLOAT64, {NRT_BOOL, NRT_FLOAT64, NRT_FLOAT64}, {0, 0}, {0, 0}};
  CHECK(check_case(&c, 1, n, NULL, contig));
}

static nrt_status run_i64(nk_pointwise_op op, nrt_dtype t, const int64_t *a, const int64_t *b,
                          int64_t *o, int n) {
  char *ma = tk_alloc(8 * (size_t)n), *mb = tk_alloc(8 * (size_t)n), *mo = tk_alloc(8 * (size_t)n);
  for (int i = 0; i < n; i++) {
    tk_put(t, ma + i * tk_size(t), (tk_value){1, a[i], 0});
    tk_put(t, mb + i * tk_size(t), (tk_value){1, b[i], 0});
  }
  nrt_operand ops[3] = {tk_vector(mo, t, n), tk_vector(ma, t, n), tk_vector(mb, t, n)};
  nk_pointwise_params prm = {op, t, {0, 0}, {0, 0}};
  nrt_task task = tk_task(NK_KERNEL_POINTWISE, 3, ops, &prm, sizeof prm);
  nrt_status s = tk_run(&task);
  for (int i = 0; i < n; i++) o[i] = wrap_to(t, tk_raw(t, mo + i * tk_size(t)));
  tk_free(ma), tk_free(mb), tk_free(mo);
  return s;
}

static void test_integer_edges(void) {
  int64_t o[4];
  const int64_t a[4] = {INT64_MIN, INT64_MIN, 7, -7}, m1[4] = {-1, -1, -1, 2};
  CHECK_OK(run_i64(NK_PW_DIV_TRUNC, NRT_INT64, a, m1, o, 4));
  CHECK(o[0] == INT64_MIN && o[2] == -7 && o[3] == -3);
  CHECK_OK(run_i64(NK_PW_DIV_FLOOR, NRT_INT64, a, m1, o, 4));
  CHECK(o[0] == INT64_MIN && o[3] == -4);
  CHECK_OK(run_i64(NK_PW_REMAINDER, NRT_INT64, a, m1, o, 4));
  CHECK(o[0] == 0 && o[3] == 1);
  CHECK_OK(run_i64(NK_PW_FMOD, NRT_INT64, a, m1, o, 4));
  CHECK(o[0] == 0 && o[3] == -1);
  const int64_t i32[2] = {INT32_MIN, 5}, d32[2] = {-1, 2};
  CHECK_OK(run_i64(NK_PW_DIV_TRUNC, NRT_INT32, i32, d32, o, 2));
  CHECK(o[0] == INT32_MIN && o[1] == 2);
  /* by zero: the task fails, naming it as ATen's CPU does */
  const int64_t x[2] = {5, 6}, z[2] = {1, 0};
  for (nk_pointwise_op op = NK_PW_REMAINDER; op <= NK_PW_DIV_FLOOR; op++) {
    CHECK(run_i64(op, NRT_INT32, x, z, o, 2) != NRT_SUCCESS);
    CHECK(strstr(nrt_last_error(), "ZeroDivisionError") != NULL);
  }
  CHECK_OK(run_i64(NK_PW_DIV_TRUNC, NRT_INT32, x, x, o, 2)); /* the stream goes on */
  /* shifts past the width: 0 for <<, the sign for >> */
  const int64_t v[4] = {-5, 5, -5, 1}, sh[4] = {8, 8, -1, 7};
  CHECK_OK(run_i64(NK_PW_LSHIFT, NRT_INT8, v, sh, o, 4));
  CHECK(o[0] == 0 && o[1] == 0 && o[2] == 0 && o[3] == -128);
  CHECK_OK(run_i64(NK_PW_RSHIFT, NRT_INT8, v, sh, o, 4));
  CHECK(o[0] == -1 && o[1] == 0 && o[2] == -1 && o[3] == 0);
  /* integer pow with negative exponents (ATen's powi) */
  const int64_t base[4] = {1, -1, -1, 2}, ex[4] = {-5, -3, -4, -1};
  CHECK_OK(run_i64(NK_PW_POW, NRT_INT64, base, ex, o, 4));
  CHECK(o[0] == 1 && o[1] == -1 && o[2] == 1 && o[3] == 0);
}

static float next16(nrt_dtype t, float from, float to) {
  uint16_t *m = tk_alloc(6);
  m[1] = t == NRT_FLOAT16 ? tk_f16_bits(from) : tk_bf16_bits(from);
  m[2] = t == NRT_FLOAT16 ? tk_f16_bits(to) : tk_bf16_bits(to);
  nrt_operand ops[3] = {tk_vector(m, t, 1), tk_vector(m + 1, t, 1), tk_vector(m + 2, t, 1)};
  nk_pointwise_params prm = {NK_PW_NEXTAFTER, t, {0, 0}, {0, 0}};
  nrt_task task = tk_task(NK_KERNEL_POINTWISE, 3, ops, &prm, sizeof prm);
  CHECK_OK(tk_run(&task));
  double r = t == NRT_FLOAT16 ? tk_f16_value(m[0]) : tk_bf16_value(m[0]);
  tk_free(m);
  return (float)r;
}

static void test_nextafter(void) {
  float *m = tk_alloc(24);
  m[3] = 1, m[4] = 0, m[5] = -0.0f;
  m[6] = 2, m[7] = -1, m[8] = 1;
  nrt_operand ops[3] = {tk_vector(m, NRT_FLOAT32, 3), tk_vector(m + 3, NRT_FLOAT32, 3),
                        tk_vector(m + 6, NRT_FLOAT32, 3)};
  nk_pointwise_params prm = {NK_PW_NEXTAFTER, NRT_FLOAT32, {0, 0}, {0, 0}};
  nrt_task task = tk_task(NK_KERNEL_POINTWISE, 3, ops, &prm, sizeof prm);
  CHECK_OK(tk_run(&task));
  CHECK(m[0] == 1 + 0x1p-23f && m[1] == -0x1p-149f && m[2] == 0x1p-149f);
  tk_free(m);
  CHECK(next16(NRT_FLOAT16, 1, 2) == 1 + 0x1p-10f);
  CHECK(next16(NRT_FLOAT16, 1, 0) == 1 - 0x1p-11f);
  CHECK(next16(NRT_FLOAT16, 0, -1) == -0x1p-24f);
  CHECK(next16(NRT_BFLOAT16, 1, 2) == 1 + 0x1p-7f);
  CHECK(next16(NRT_BFLOAT16, -1, 0) == -1 + 0x1p-8f);
  CHECK(isnan(next16(NRT_BFLOAT16, NAN, 0)));
}

static void test_validation(void) {
  float *buf = tk_alloc(64);
  nrt_operand ops[4] = {tk_vector(buf, NRT_FLOAT32, 4), tk_vector(buf + 4, NRT_FLOAT32, 4),
                        tk_vector(buf + 8, NRT_FLOAT32, 4), tk_vector(buf + 12, NRT_FLOAT32, 4)};
  nk_pointwise_params prm = {NK_PW_EQ, NRT_FLOAT32, {0, 0}, {0, 0}};
  nrt_task t = tk_task(NK_KERNEL_POINTWISE, 4, ops, &prm, sizeof prm);
  CHECK(tk_fails_with(&t, "pointwise eq: 4 operands, expected 3"));
  t = tk_task(NK_KERNEL_POINTWISE, 1, ops, &prm, sizeof prm);
  CHECK(tk_fails_with(&t, "1 operands, expected 2 to 4"));
  prm.op = NK_PW_OP_COUNT;
  t = tk_task(NK_KERNEL_POINTWISE, 3, ops, &prm, sizeof prm);
  CHECK(tk_fails_with(&t, "invalid op"));
  prm = (nk_pointwise_params){NK_PW_LT, 42, {0, 0}, {0, 0}};
  t = tk_task(NK_KERNEL_POINTWISE, 3, ops, &prm, sizeof prm);
  CHECK(tk_fails_with(&t, "invalid compute dtype 42"));
  prm = (nk_pointwise_params){NK_PW_BITWISE_AND, NRT_FLOAT32, {0, 0}, {0, 0}};
  t = tk_task(NK_KERNEL_POINTWISE, 3, ops, &prm, sizeof prm);
  CHECK(tk_fails_with(&t, "bitwise_and: not defined for compute dtype"));
  prm = (nk_pointwise_params){NK_PW_ATAN2, NRT_INT32, {0, 0}, {0, 0}};
  t = tk_task(NK_KERNEL_POINTWISE, 3, ops, &prm, sizeof prm);
  CHECK(tk_fails_with(&t, "atan2: not defined"));
  prm = (nk_pointwise_params){NK_PW_LSHIFT, NRT_BOOL, {0, 0}, {0, 0}};
  t = tk_task(NK_KERNEL_POINTWISE, 3, ops, &prm, sizeof prm);
  CHECK(tk_fails_with(&t, "lshift: not defined"));
  prm = (nk_pointwise_params){NK_PW_MAXIMUM, NRT_FLOAT32, {0, 0}, {0, 0}};
  ops[2].sizes[0] = 3;
  t = tk_task(NK_KERNEL_POINTWISE, 3, ops, &prm, sizeof prm);
  CHECK(tk_fails_with(&t, "operand 2's shape differs"));
  ops[2].sizes[0] = 4;
  ops[1].dtype = 77;
  t = tk_task(NK_KERNEL_POINTWISE, 3, ops, &prm, sizeof prm);
  CHECK(tk_fails_with(&t, "operand 1 has invalid dtype 77"));
  tk_free(buf);
}

/* float32 addcmul/addcdiv rows take the ISA's vector body (tk_main runs
 * this file at each ISA level) and its scalar tail: every element must be
 * the float expression a + (v * b) * c, a + (v * b) / c, bit for bit. */
static void test_addc_vector_bits(void) {
  enum { N = 67 };
  float *a = tk_alloc(4 * N), *b = tk_alloc(4 * N), *c = tk_alloc(4 * N), *o = tk_alloc(4 * N);
  for (int i = 0; i < N; i++) {
    a[i] = (float)(i % 11) * 0.37f - 1.9f;
    b[i] = (float)(i % 7) * 1.13f - 3.3f;
    c[i] = (float)(i % 5) * 0.71f + 0.2f;
  }
  const float v = -0.3f;
  for (int div = 0; div <= 1; div++) {
    nrt_operand ops[4] = {tk_vector(o, NRT_FLOAT32, N), tk_vector(a, NRT_FLOAT32, N),
                          tk_vector(b, NRT_FLOAT32, N), tk_vector(c, NRT_FLOAT32, N)};
    nk_pointwise_params prm = {div ? NK_PW_ADDCDIV : NK_PW_ADDCMUL, NRT_FLOAT32, {0, 0}, {0, 0}};
    prm.s0.f = v;
    nrt_task task = tk_task(NK_KERNEL_POINTWISE, 4, ops, &prm, sizeof prm);
    CHECK(tk_run(&task) == NRT_SUCCESS);
    int same = 1;
    for (int i = 0; i < N; i++) {
      const float want = div ? a[i] + v * b[i] / c[i] : a[i] + v * b[i] * c[i];
      same &= memcmp(&want, &o[i], 4) == 0;
    }
    CHECK(same);
  }
  tk_free(a), tk_free(b), tk_free(c), tk_free(o);
}

/* lerp on dense float32 rows (the vector body, pointwise_simd_impl.h):
 * the bits of the scalar form, one fma from the nearer end, for weights
 * at and around +-0.5, 0, 1, beyond, infinite and NaN, ends that are
 * infinite, NaN or far apart; a tensor weight and a scalar one; rows of
 * 67 (vector tails). */
static void test_lerp_vector_bits(void) {
  enum { N = 67 };
  static const float wv[] = {0.0f, -0.0f, 0.5f, -0.5f, 0.49999997f, 0.50000006f, 1.0f, 0.3f,
                             -2.5f, 7.0f, INFINITY, -INFINITY, NAN, 1e-30f};
  static const float ev[] = {1.5f, -3.25f, INFINITY, -INFINITY, NAN, 0.0f, -0.0f, 1e30f, -1e-30f, 3e38f};
  float *a = tk_alloc(4 * N), *b = tk_alloc(4 * N), *w = tk_alloc(4 * N), *o = tk_alloc(4 * N);
  for (int i = 0; i < N; i++) {
    a[i] = ev[i % 10];
    b[i] = ev[(i * 3 + 1) % 10] * (i % 4 == 0 ? 1 : 0.75f);
    w[i] = wv[i % 14];
  }
  for (int scalar = 0; scalar <= 1; scalar++)
    for (int k = 0; k < (scalar ? 14 : 1); k++) {
      nrt_operand ops[4] = {tk_vector(o, NRT_FLOAT32, N), tk_vector(a, NRT_FLOAT32, N),
                            tk_vector(b, NRT_FLOAT32, N), tk_vector(w, NRT_FLOAT32, N)};
      nk_pointwise_params prm = {scalar ? NK_PW_LERP_SCALAR : NK_PW_LERP, NRT_FLOAT32, {0, 0}, {0, 0}};
      prm.s0.f = wv[k];
      nrt_task task = tk_task(NK_KERNEL_POINTWISE, scalar ? 3 : 4, ops, &prm, sizeof prm);
      CHECK(tk_run(&task) == NRT_SUCCESS);
      int64_t bad = 0;
      for (int i = 0; i < N; i++) {
        const float t = scalar ? wv[k] : w[i], d = b[i] - a[i];
        const float want = fabsf(t) < 0.5f ? fmaf(t, d, a[i]) : fmaf(t - 1.0f, d, b[i]);
        bad += !(memcmp(&want, &o[i], 4) == 0 || (isnan(want) && isnan(o[i])));
      }
      if (bad) fprintf(stderr, "  lerp %s weight %d: %lld differ\n", scalar ? "scalar" : "tensor", k, (long long)bad);
      CHECK(bad == 0);
    }
  tk_free(a), tk_free(b), tk_free(w), tk_free(o);
}

/* Binary ops over bool masks (pointwise.c, bool_rows): every op that takes
 * bool compute, b dense or broadcast, bytes whose truth is 1 but whose
 * value is not (2, 255: a bool view of other bytes), rows of 301. */
static void test_bool_rows(void) {
  enum { N = 301 };
  static const nk_pointwise_op ops_b[] = {NK_PW_BITWISE_AND, NK_PW_LOGICAL_AND, NK_PW_MINIMUM,
                                          NK_PW_BITWISE_OR, NK_PW_LOGICAL_OR, NK_PW_MAXIMUM,
                                          NK_PW_BITWISE_XOR, NK_PW_LOGICAL_XOR, NK_PW_NE, NK_PW_EQ,
                                          NK_PW_LT, NK_PW_LE, NK_PW_GT, NK_PW_GE};
  static const unsigned char bytes[4] = {0, 1, 2, 255};
  unsigned char *a = tk_alloc(N), *b = tk_alloc(N), *o = tk_alloc(N);
  for (int i = 0; i < N; i++) a[i] = bytes[i % 4], b[i] = bytes[(i / 4) % 4];
  for (size_t k = 0; k < sizeof ops_b / sizeof ops_b[0]; k++)
    for (int bcast = 0; bcast < 2; bcast++) {
      int64_t n = N, zero = 0;
      nrt_operand ops[3] = {tk_vector(o, NRT_BOOL, N), tk_vector(a, NRT_BOOL, N),
                            bcast ? tk_operand(b + 7, NRT_BOOL, 1, &n, &zero) : tk_vector(b, NRT_BOOL, N)};
      nk_pointwise_params prm = {ops_b[k], NRT_BOOL, {0, 0}, {0, 0}};
      nrt_task task = tk_task(NK_KERNEL_POINTWISE, 3, ops, &prm, sizeof prm);
      CHECK(tk_run(&task) == NRT_SUCCESS);
      int bad = 0;
      for (int i = 0; i < N; i++) {
        const int x = a[i] != 0, y = (bcast ? b[7] : b[i]) != 0;
        int want;
        switch (ops_b[k]) {
        case NK_PW_BITWISE_AND: case NK_PW_LOGICAL_AND: case NK_PW_MINIMUM: want = x && y; break;
        case NK_PW_BITWISE_OR: case NK_PW_LOGICAL_OR: case NK_PW_MAXIMUM: want = x || y; break;
        case NK_PW_EQ: want = x == y; break;
        case NK_PW_LT: want = x < y; break;
        case NK_PW_LE: want = x <= y; break;
        case NK_PW_GT: want = x > y; break;
        case NK_PW_GE: want = x >= y; break;
        default: want = x != y; break; /* the xors, ne */
        }
        bad += o[i] != want;
      }
      if (bad) fprintf(stderr, "  bool op %d bcast %d: %d wrong\n", (int)ops_b[k], bcast, bad);
      CHECK(bad == 0);
    }
  tk_free(a), tk_free(b), tk_free(o);
}

static void tests(void) {
  test_addc_vector_bits();
  test_bool_rows();
  test_lerp_vector_bits();
  test_same_dtype();
  test_mixed();
  test_parallel();
  test_integer_edges();
  test_nextafter();
  test_validation();
}

int main(void) { return tk_main(tests, __FILE__); }
