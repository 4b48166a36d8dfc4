/* binary_ops.h — the binary ops' math, one small function per compute class.
 *
 * The public op (nk_binary_op + alpha) is lowered once per task to an
 * nk_binop: sub becomes add with -alpha (as ATen's sub_kernel does), and add
 * with alpha == 1 gets its own kind so the common case is a plain add.
 * Scaled add is fma(alpha, b, a), what ATen's vectorised loop computes.
 * Integers wrap (computed in uint64, no signed-overflow UB); bool add is
 * logical or, bool mul logical and.  To add an op: a kind here, a case in
 * each function below, its lowering in binary.c, and a vector case in the
 * binary_<isa>_<dtype>.c files if it should be vectorised. */
#ifndef NK_BINARY_OPS_H
#define NK_BINARY_OPS_H

#include <math.h>

#include "common/dtype_convert.h"

typedef enum nk_binop {
  NK_BINOP_ADD,  /* a + b          */
  NK_BINOP_AXPY, /* a + alpha * b  */
  NK_BINOP_MUL,
  NK_BINOP_DIV,  /* floating classes only */
  NK_BINOP_COUNT
} nk_binop;

/* alpha in every class, converted once per task */
typedef struct nk_alpha {
  float f32;
  double f64;
  int64_t i64;
  bool b;
} nk_alpha;

NK_INLINE float nk_binop_f32(nk_binop k, float a, float b, const nk_alpha *al) {
  switch (k) {
  case NK_BINOP_ADD: return a + b;
  case NK_BINOP_AXPY: return fmaf(al->f32, b, a);
  case NK_BINOP_MUL: return a * b;
  default: return a / b;
  }
}

NK_INLINE double nk_binop_f64(nk_binop k, double a, double b, const nk_alpha *al) {
  switch (k) {
  case NK_BINOP_ADD: return a + b;
  case NK_BINOP_AXPY: return fma(al->f64, b, a);
  case NK_BINOP_MUL: return a * b;
  default: return a / b;
  }
}

NK_INLINE int64_t nk_binop_i64(nk_binop k, int64_t a, int64_t b, const nk_alpha *al) {
  uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
  switch (k) {
  case NK_BINOP_ADD: return (int64_t)(ua + ub);
  case NK_BINOP_AXPY: return (int64_t)(ua + (uint64_t)al->i64 * ub);
  default: return (int64_t)(ua * ub); /* MUL; DIV is refused for integers */
  }
}

NK_INLINE bool nk_binop_bool(nk_binop k, bool a, bool b, const nk_alpha *al) {
  switch (k) {
  case NK_BINOP_ADD: return a || b;
  case NK_BINOP_AXPY: return a || (al->b && b);
  default: return a && b; /* MUL; SUB and DIV are refused for bool */
  }
}

#endif /* NK_BINARY_OPS_H */
