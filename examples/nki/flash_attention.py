"""Flash-attention forward (after NKI's flash_fwd): q, k [B, H, d, S]
(d on the partitions), v and the output [B, H, S, d].  A grid over (batch,
head); per 128-query tile a sequential pass over 512-key tiles keeps the
running max and sum, so the S x S score matrix never exists.  Causal masking
and the ragged key tail go through affine_select."""
import math

import numpy as np

from torch_neuronx import nki
import torch_neuronx.nki.isa as nisa
import torch_neuronx.nki.language as nl


@nki.jit
def flash_fwd(q, k, v, softmax_scale=None, causal=False):
  b_id = nl.program_id(0)
  h_id = nl.program_id(1)
  B, H, d, seqlen = q.shape
  assert d <= nl.tile_size.pmax, "head dim must fit the partitions"
  softmax_scale = softmax_scale or 1.0 / math.sqrt(d)

  o = nl.ndarray((B, H, seqlen, d), dtype=q.dtype, buffer=nl.shared_hbm)

  Q_TILE = 128  # queries per tile: the PSUM rows
  KV_TILE = 512  # keys per tile: one PSUM bank of float32
  i_d, i_q = nl.mgrid[0:d, 0:Q_TILE]
  i_dk, i_k = nl.mgrid[0:d, 0:KV_TILE]
  i_kv, i_dv = nl.mgrid[0:128, 0:d]
  i_p, i_f = nl.mgrid[0:Q_TILE, 0:KV_TILE]
  i_op, i_od = nl.mgrid[0:Q_TILE, 0:d]

  for i in nl.affine_range(math.ceil(seqlen / Q_TILE)):
    q_tile = nl.load(q[b_id, h_id, i_d, i * Q_TILE + i_q], mask=(i * Q_TILE + i_q < seqlen))

    m = nl.full((Q_TILE, 1), -np.inf, dtype=nl.float32)  # running row max
    l = nl.zeros((Q_TILE, 1), dtype=nl.float32)  # running row sum
    acc = nl.zeros((Q_TILE, d), dtype=nl.float32)

    kv_end = min(seqlen, (i + 1) * Q_TILE) if causal else seqlen
    for j in nl.sequential_range(math.ceil(kv_end / KV_TILE)):
      k_tile = nl.load(k[b_id, h_id, i_dk, j * KV_TILE + i_k],
                       mask=(j * KV_TILE + i_k < seqlen))
      qk = nisa.nc_matmul(q_tile, k_tile)  # [Q_TILE, KV_TILE] in PSUM
      s = nisa.tensor_scalar(qk, np.multiply, softmax_scale)

      valid = (j * KV_TILE + i_f < seqlen)
      if causal:
        valid = valid & (i * Q_TILE + i_p - j * KV_TILE - i_f >= 0)
      s = nisa.affine_select(pred=valid, on_true_tile=s, on_false_value=-np.inf)

      m_new = nl.maximum(m, nl.max(s, axis=1, keepdims=True))
      p = nisa.activation(np.exp, data=s, bias=nl.negative(m_new), dtype=q.dtype)
      alpha = nl.exp(m - m_new)
      l = l * alpha + nl.sum(p, axis=1, keepdims=True, dtype=nl.float32)

      pv = nl.zeros((Q_TILE, d), dtype=nl.float32, buffer=nl.psum)
      for c in nl.affine_range(KV_TILE // 128):
        p_t = nisa.nc_transpose(p[:, c * 128:(c + 1) * 128])  # [keys, queries]
        v_tile = nl.zeros((128, d), dtype=v.dtype)  # the ragged tail reads as 0
        nisa.dma_copy(dst=v_tile, src=v[b_id, h_id, j * KV_TILE + c * 128 + i_kv, i_dv],
                      mask=(j * KV_TILE + c * 128 + i_kv < seqlen))
        pv += nisa.nc_matmul(p_t, v_tile)

      acc = acc * alpha + pv
      m = m_new

    out = nl.divide(acc, l, dtype=q.dtype)
    nl.store(o[b_id, h_id, i * Q_TILE + i_op, i_od], value=out,
             mask=(i * Q_TILE + i_op < seqlen))

  return o
