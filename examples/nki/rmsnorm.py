"""RMSNorm (NKI's rmsnorm tutorial, Beta 1 dialect): 128 rows per tile, the
ragged last tile masked."""
import math

from torch_neuronx import nki
import torch_neuronx.nki.language as nl


@nki.jit
def nki_rmsnorm_kernel(a_tensor, g_tensor, eps=0.0):
  # out = a / RMS(a) * g, RMS over the free (2nd) dimension
  out_tensor = nl.ndarray(a_tensor.shape, dtype=a_tensor.dtype, buffer=nl.shared_hbm)
  assert a_tensor.shape[1] == g_tensor.shape[0]

  ix, iw, iy = nl.mgrid[0:128, 0:1, 0:a_tensor.shape[1]]
  num_rows = a_tensor.shape[0]

  # the weight is loaded once and reused by every row tile
  g_tile = nl.load(g_tensor.reshape((1, g_tensor.shape[0]))[iw, iy])

  for i in nl.affine_range(math.ceil(a_tensor.shape[0] / 128)):
    a_tile = nl.load(a_tensor[i * 128 + ix, iy], mask=(i * 128 + ix < num_rows))

    in_square = nl.square(a_tile)
    square_sum = nl.sum(in_square, axis=[1])
    mean = square_sum / a_tensor.shape[1]
    rms_reciprocal = nl.rsqrt(mean + eps)

    out_tile = nl.multiply(a_tile, rms_reciprocal)
    g_bcast = g_tile.broadcast_to((128, g_tensor.shape[0]))
    out_tile[...] = nl.multiply(out_tile, g_bcast, mask=(i * 128 + ix < num_rows))

    nl.store(out_tensor[i * 128 + ix, iy], value=out_tile, mask=(i * 128 + ix < num_rows))

  return out_tensor


@nki.jit
def nki_rmsnorm_backward_kernel(a_tensor, g_tensor, dy_tensor, eps=0.0):
  """Gradients of nki_rmsnorm_kernel: with r = rsqrt(mean(a^2) + eps) and
  xhat = a * r, dx = r * (dy*g - xhat * mean(dy*g*xhat)) per row and
  dg = sum over rows of dy * xhat, summed by the tensor engine
  (ones^T @ (dy * xhat)) into one PSUM bank across the row tiles."""
  N, D = a_tensor.shape
  assert D <= nl.tile_size.gemm_moving_fmax
  dx_tensor = nl.ndarray((N, D), dtype=a_tensor.dtype, buffer=nl.shared_hbm)
  dg_tensor = nl.ndarray((D,), dtype=g_tensor.dtype, buffer=nl.shared_hbm)

  ix, iw, iy = nl.mgrid[0:128, 0:1, 0:D]
  g_tile = nl.load(g_tensor.reshape((1, D))[iw, iy])
  ones = nl.full((128, 1), 1.0, dtype=nl.float32)
  dg_psum = nl.zeros((1, D), dtype=nl.float32, buffer=nl.psum)

  for i in nl.sequential_range(math.ceil(N / 128)):
    rows = (i * 128 + ix < N)
    a_tile = nl.load(a_tensor[i * 128 + ix, iy], mask=rows)
    dy_tile = nl.load(dy_tensor[i * 128 + ix, iy], mask=rows)

    r = nl.rsqrt(nl.mean(nl.square(a_tile), axis=[1]) + eps)
    xhat = nl.multiply(a_tile, r)
    dyg = nl.multiply(dy_tile, g_tile.broadcast_to((128, D)))
    c = nl.mean(nl.multiply(dyg, xhat), axis=[1])
    dx = nl.multiply(nl.subtract(dyg, nl.multiply(xhat, c)), r)
    nl.store(dx_tensor[i * 128 + ix, iy], value=dx, mask=rows)

    # rows past N must add nothing to dg
    prod = nl.zeros((128, D), dtype=nl.float32)
    prod[...] = nl.multiply(dy_tile, xhat, mask=rows)
    dg_psum += nl.matmul(ones, prod, transpose_x=True)

  dg = nl.copy(dg_psum, dtype=g_tensor.dtype)
  nl.store(dg_tensor.reshape((1, D))[iw, iy], value=dg)
  return dx_tensor, dg_tensor
