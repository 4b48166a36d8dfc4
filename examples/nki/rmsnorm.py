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
