"""Tiled matrix multiplication (NKI's matmul tutorial).  C = lhsT.T @ rhs with
lhsT [K, M] (the stationary operand delivered transposed), rhs [K, N].
The Beta 2 versions are the tutorial's (nisa.dma_copy / nc_matmul / tensor_copy,
plain slicing); the Beta 1 version accumulates nl.matmul into a PSUM tile and
masks ragged M and N edges."""
import math

from torch_neuronx import nki
import torch_neuronx.nki.isa as nisa
import torch_neuronx.nki.language as nl


@nki.jit
def nki_matmul_tiled_(lhsT, rhs):
  K, M = lhsT.shape
  K_, N = rhs.shape
  assert K == K_, "lhsT and rhs must have the same contraction dimension"

  TILE_M = nl.tile_size.gemm_stationary_fmax  # 128
  TILE_K = nl.tile_size.pmax  # 128
  TILE_N = nl.tile_size.gemm_moving_fmax  # 512
  assert M % TILE_M == 0 and N % TILE_N == 0 and K % TILE_K == 0

  result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)

  for m in nl.affine_range(M // TILE_M):
    for n in nl.affine_range(N // TILE_N):
      res_psum = nl.ndarray((TILE_M, TILE_N), nl.float32, buffer=nl.psum)

      for k in nl.affine_range(K // TILE_K):
        lhsT_tile = nl.ndarray((TILE_K, TILE_M), dtype=lhsT.dtype, buffer=nl.sbuf)
        rhs_tile = nl.ndarray((TILE_K, TILE_N), dtype=rhs.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=lhsT_tile,
                      src=lhsT[k * TILE_K:(k + 1) * TILE_K, m * TILE_M:(m + 1) * TILE_M])
        nisa.dma_copy(dst=rhs_tile,
                      src=rhs[k * TILE_K:(k + 1) * TILE_K, n * TILE_N:(n + 1) * TILE_N])
        # partial sums accumulate in PSUM (the first one overwrites)
        nisa.nc_matmul(dst=res_psum, stationary=lhsT_tile, moving=rhs_tile)

      res_sb = nl.ndarray(res_psum.shape, dtype=result.dtype, buffer=nl.sbuf)
      nisa.tensor_copy(dst=res_sb, src=res_psum)
      nisa.dma_copy(dst=result[m * TILE_M:(m + 1) * TILE_M, n * TILE_N:(n + 1) * TILE_N],
                    src=res_sb)

  return result


@nki.jit
def nki_matmul_hoist_load_(lhsT, rhs):
  K, M = lhsT.shape
  K_, N = rhs.shape
  assert K == K_, "lhsT and rhs must have the same contraction dimension"

  TILE_M = nl.tile_size.gemm_stationary_fmax  # 128
  TILE_K = nl.tile_size.pmax  # 128
  TILE_N = nl.tile_size.gemm_moving_fmax  # 512
  assert M % TILE_M == 0 and N % TILE_N == 0 and K % TILE_K == 0

  result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)

  for m in nl.affine_range(M // TILE_M):
    # a whole column of lhsT tiles, loaded once per m
    lhsT_tiles = []
    for k in nl.affine_range(K // TILE_K):
      lhsT_tile = nl.ndarray(shape=(TILE_K, TILE_M), dtype=lhsT.dtype, buffer=nl.sbuf)
      nisa.dma_copy(dst=lhsT_tile,
                    src=lhsT[k * TILE_K:(k + 1) * TILE_K, m * TILE_M:(m + 1) * TILE_M])
      lhsT_tiles.append(lhsT_tile)

    for n in nl.affine_range(N // TILE_N):
      rhs_tiles = []
      for k in nl.affine_range(K // TILE_K):
        rhs_tile = nl.ndarray(shape=(TILE_K, TILE_N), dtype=rhs.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=rhs_tile,
                      src=rhs[k * TILE_K:(k + 1) * TILE_K, n * TILE_N:(n + 1) * TILE_N])
        rhs_tiles.append(rhs_tile)

      res_psum = nl.ndarray(shape=(TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum)
      for k in nl.affine_range(K // TILE_K):
        nisa.nc_matmul(dst=res_psum, stationary=lhsT_tiles[k], moving=rhs_tiles[k])

      res_sb = nl.ndarray(shape=(TILE_M, TILE_N), dtype=result.dtype, buffer=nl.sbuf)
      nisa.tensor_copy(dst=res_sb, src=res_psum)
      nisa.dma_copy(dst=result[m * TILE_M:(m + 1) * TILE_M, n * TILE_N:(n + 1) * TILE_N],
                    src=res_sb)

  return result


@nki.jit
def nki_matmul_tiled_beta1(lhsT, rhs):
  """Beta 1: nl.load / nl.matmul(transpose_x=True) / +=; M and N may be ragged
  (masked), K a multiple of 128."""
  K, M = lhsT.shape
  K_, N = rhs.shape
  assert K == K_ and K % 128 == 0

  result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
  i_k, i_m = nl.mgrid[0:128, 0:128]
  i_kn, i_n = nl.mgrid[0:128, 0:512]
  i_rm, i_rn = nl.mgrid[0:128, 0:512]

  for m in nl.affine_range(math.ceil(M / 128)):
    for n in nl.affine_range(math.ceil(N / 512)):
      res_psum = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
      for k in nl.affine_range(K // 128):
        lhsT_tile = nl.load(lhsT[k * 128 + i_k, m * 128 + i_m], mask=(m * 128 + i_m < M))
        rhs_tile = nl.load(rhs[k * 128 + i_kn, n * 512 + i_n], mask=(n * 512 + i_n < N))
        res_psum += nl.matmul(lhsT_tile, rhs_tile, transpose_x=True)

      res_sb = nl.copy(res_psum, dtype=result.dtype)
      nl.store(result[m * 128 + i_rm, n * 512 + i_rn], value=res_sb,
               mask=(m * 128 + i_rm < M) & (n * 512 + i_rn < N))

  return result
