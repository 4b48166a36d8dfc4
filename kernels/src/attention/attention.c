/* attention.c — NK_KERNEL_ATTENTION: fused scaled-dot-product attention,
 * forward and backward, as one tiled kernel (flash attention).
 *
 * Design (the why):
 *  - Online softmax over key tiles: each (batch, head, 64-query block) keeps
 *    its 64 x Dv output accumulator, running max and running sum in a
 *    worker-private tile block and streams 64-key tiles of K and V through
 *    it, so memory is O(tile) and the L x S score matrix never exists.  The
 *    forward saves the log-sum-exp per query row (float32, float64 for
 *    float64) for the backward.
 *  - Backward is flash-attention-2 recomputation (P = exp(s - lse); delta =
 *    rowsum(dout * out) comes from the launcher) split in two passes so no
 *    unit ever adds into memory another unit writes: BACKWARD_KV owns a
 *    (batch, kv head, key block) and loops over every query block of every
 *    query head of its group (GQA) accumulating dK, dV in its tiles;
 *    BACKWARD_Q owns a (batch, head, query block) and accumulates dQ (and
 *    writes dbias rows).  Recomputing S/P twice costs 7 tile GEMMs per tile
 *    pair instead of 5, but needs no atomics and no per-thread partial
 *    buffers, and results are deterministic and thread-count independent.
 *  - Every tile is loaded into the compute type (float32, or float64) from
 *    any strides and dtype, so transposed (B, S, H, D) projections, expanded
 *    masks (stride 0) and 16-bit inputs need no copies.  The tile GEMMs are
 *    one 4 x (2 vectors) micro-kernel written with GCC vector extensions and
 *    compiled per ISA (attention_avx2_f32.c, attention_avx512_f32.c, portable
 *    attention_f32.c / attention_f64.c); exp is a vectorised Cephes
 *    polynomial for float32.  The k order of every tile GEMM is fixed, so the
 *    forward and both backward passes compute bit-identical scores.
 *  - Dropout is counter based (Philox4x32-10, one 32-bit word per element of
 *    the virtual L x S matrix), so the backward regenerates exactly the
 *    forward's mask from (seed, offset) whatever the tiling or thread count.
 *  - A query row whose keys are all hidden gets output 0 and lse = +inf (so
 *    its backward P is 0), as ATen's math path (_safe_softmax) gives. */
#include <math.h>
#include <string.h>

#include "attention/attention.h"
#include "common/dtype_convert.h"
#include "common/kernel_entries.h"
#include "neuron_kernels.h"
#include "common/validate.h"

static nk_attn_view view4(const nrt_operand *o) {
  nk_attn_view w;
  w.data = o->data;
  w.dtype = o->dtype;
  for (int d = 0; d < 4; d++) w.st[d] = o->strides[d];
  return w;
}

static int dims_are(const nrt_operand *o, int ndim, const int64_t *sizes) {
  if (o->ndim != ndim) return 0;
  for (int d = 0; d < ndim; d++)
    if (o->sizes[d] != sizes[d]) return 0;
  return 1;
}

static int is_float(int32_t t) { return t == NRT_FLOAT16 || t == NRT_BFLOAT16 || t == NRT_FLOAT32 || t == NRT_FLOAT64; }

/* The backward's stats operand (2, B, Hq, L): lse, then delta
 * (rowsum(dout * out)), as two (B, Hq, L) views. */
static void stats_views(const nrt_operand *st, nk_attn_problem *p) {
  p->lse.data = st->data;
  p->lse.dtype = st->dtype;
  p->delta.data = (char *)st->data + st->strides[0];
  p->delta.dtype = st->dtype;
  for (int d = 0; d < 3; d++) p->lse.st[d] = p->delta.st[d] = st->strides[d + 1];
}

int nk_attention_kernel(const nrt_task *task, nrt_exec_ctx *ctx) {
  const nk_attention_params *prm = (const nk_attention_params *)task->params;
  if (prm->mode < 0 || prm->mode >= NK_ATTENTION_MODE_COUNT) {
    nrt_exec_fail(ctx, "attention: bad mode %d", (int)prm->mode);
    return -1;
  }
  const int fwd = prm->mode == NK_ATTENTION_FORWARD, fused = prm->mode == NK_ATTENTION_BACKWARD;
  const int base = fwd ? 5 : fused ? 8 : 7, qi = fwd ? 2 : fused ? 4 : 3;
  if (nk_check_operands(task, ctx, "attention", base + (prm->has_mask ? 1 : 0))) return -1;
  const nrt_operand *ops = task->operands;
  const nrt_operand *q = &ops[qi], *k = &ops[qi + 1], *v = &ops[qi + 2];
  if (q->ndim != 4 || k->ndim != 4 || v->ndim != 4) {
    nrt_exec_fail(ctx, "attention: q, k, v must be 4-d (batch, heads, seq, dim)");
    return -1;
  }
  nk_attn_problem p;
  memset(&p, 0, sizeof p);
  p.mode = prm->mode;
  p.causal = prm->causal != 0;
  p.B = q->sizes[0];
  p.Hq = q->sizes[1];
  p.L = q->sizes[2];
  p.D = q->sizes[3];
  p.Hkv = k->sizes[1];
  p.S = k->sizes[2];
  p.Dv = v->sizes[3];
  p.scale = prm->scale;
  p.dropout_p = prm->dropout_p;
  p.seed = prm->seed;
  p.offset = prm->offset;
  const int64_t ksz[4] = {p.B, p.Hkv, p.S, p.D}, vsz[4] = {p.B, p.Hkv, p.S, p.Dv};
  const int64_t osz[4] = {p.B, p.Hq, p.L, p.Dv}, qsz[4] = {p.B, p.Hq, p.L, p.D};
  const int64_t msz[4] = {p.B, p.Hq, p.L, p.S}, lsz[3] = {p.B, p.Hq, p.L};
  const int64_t ssz[4] = {2, p.B, p.Hq, p.L};
  if (!dims_are(k, 4, ksz) || !dims_are(v, 4, vsz) || p.Hkv <= 0 || p.Hq % p.Hkv != 0) {
    nrt_exec_fail(ctx, "attention: key/value shapes do not match the query's (heads must divide)");
    return -1;
  }
  if (!is_float(q->dtype) || !is_float(k->dtype) || !is_float(v->dtype)) {
    nrt_exec_fail(ctx, "attention: q, k, v must be floating");
    return -1;
  }
  if (!(p.dropout_p >= 0 && p.dropout_p <= 1)) {
    nrt_exec_fail(ctx, "attention: dropout probability %g is not in [0, 1]", p.dropout_p);
    return -1;
  }
  p.q = view4(q);
  p.k = view4(k);
  p.v = view4(v);
  const nrt_operand *mask = prm->has_mask ? &ops[base] : NULL;
  if (mask) {
    if (!dims_are(mask, 4, msz) || !(is_float(mask->dtype) || mask->dtype == NRT_BOOL)) {
      nrt_exec_fail(ctx, "attention: the mask must be (B, Hq, L, S), floating or bool");
      return -1;
    }
    p.mask = view4(mask);
  }
  if (fwd) {
    if (!dims_are(&ops[0], 4, osz) || !dims_are(&ops[1], 3, lsz) || !is_float(ops[0].dtype) ||
        !is_float(ops[1].dtype)) {
      nrt_exec_fail(ctx, "attention: out must be (B, Hq, L, Dv) and lse (B, Hq, L), floating");
      return -1;
    }
    p.o = view4(&ops[0]);
    p.lse.data = ops[1].data;
    p.lse.dtype = ops[1].dtype;
    for (int d = 0; d < 3; d++) p.lse.st[d] = ops[1].strides[d];
  } else if (fused) {
    const nrt_operand *st = &ops[7];
    if (prm->has_mask || !dims_are(&ops[0], 4, qsz) || !dims_are(&ops[1], 4, ksz) || !dims_are(&ops[2], 4, vsz) ||
        !dims_are(&ops[3], 4, osz) || !dims_are(st, 4, ssz) || !is_float(ops[0].dtype) || !is_float(ops[1].dtype) ||
        !is_float(ops[2].dtype) || !is_float(ops[3].dtype) || !is_float(st->dtype)) {
      nrt_exec_fail(ctx, "attention: one-pass backward: dq/dk/dv must have the q/k/v shapes, dout (B, Hq, L, Dv), "
                         "stats (2, B, Hq, L), and no mask");
      return -1;
    }
    p.dq = view4(&ops[0]);
    p.dk = view4(&ops[1]);
    p.dv = view4(&ops[2]);
    p.dout = view4(&ops[3]);
    stats_views(st, &p);
  } else {
    const nrt_operand *st = &ops[6];
    if (!dims_are(&ops[2], 4, osz) || !dims_are(st, 4, ssz) || !is_float(ops[2].dtype) || !is_float(st->dtype)) {
      nrt_exec_fail(ctx, "attention: dout must be (B, Hq, L, Dv) and stats (2, B, Hq, L), floating");
      return -1;
    }
    p.dout = view4(&ops[2]);
    stats_views(st, &p);
    if (prm->mode == NK_ATTENTION_BACKWARD_KV) {
      if (!dims_are(&ops[0], 4, ksz) || !dims_are(&ops[1], 4, vsz) || !is_float(ops[0].dtype) ||
          !is_float(ops[1].dtype)) {
        nrt_exec_fail(ctx, "attention: dk/dv must have the key/value shapes");
        return -1;
      }
      p.dk = view4(&ops[0]);
      p.dv = view4(&ops[1]);
    } else {
      if (!dims_are(&ops[0], 4, qsz) || !is_float(ops[0].dtype)) {
        nrt_exec_fail(ctx, "attention: dq must have the query's shape");
        return -1;
      }
      p.dq = view4(&ops[0]);
      if (prm->has_dbias) {
        if (!dims_are(&ops[1], 4, msz) || !is_float(ops[1].dtype)) {
          nrt_exec_fail(ctx, "attention: dbias must be (B, Hq, L, S), floating");
          return -1;
        }
        p.dbias = view4(&ops[1]);
      }
    }
  }
  /* nothing to compute (an empty output), or nothing to read */
  if (p.B == 0 || p.Hq == 0 || (fwd && p.L == 0)) return 0;
  if (prm->mode == NK_ATTENTION_BACKWARD_KV && p.S == 0) return 0;
  if (prm->mode == NK_ATTENTION_BACKWARD_Q && p.L == 0) return 0;
  if (fused && p.L == 0 && p.S == 0) return 0;

  nk_attn_fn fn = nk_attention_portable_f32;
  if (q->dtype == NRT_FLOAT64) {
    fn = nk_attention_portable_f64;
  } else {
    const nk_isa isa = nk_cpu_isa();
    if (isa == NK_ISA_AVX512) fn = nk_attention_avx512_f32;
    else if (isa == NK_ISA_AVX2) fn = nk_attention_avx2_f32;
  }
  return fn(&p, ctx);
}
