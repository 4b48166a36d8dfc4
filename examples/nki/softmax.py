"""Row softmax (NKI's softmax tutorial, Beta 1 dialect)."""
import math

from torch_neuronx import nki
import torch_neuronx.nki.language as nl


@nki.jit
def nki_softmax_kernel(a_tensor):
  # softmax(x) = exp(x - max(x)) / sum(exp(x - max(x))) along the free dim
  out_tensor = nl.ndarray(a_tensor.shape, dtype=a_tensor.dtype, buffer=nl.shared_hbm)

  ix, iy = nl.mgrid[0:128, 0:a_tensor.shape[1]]
  num_rows = a_tensor.shape[0]

  for i in nl.affine_range(math.ceil(a_tensor.shape[0] / 128)):
    a_tile = nl.load(a_tensor[i * 128 + ix, iy], mask=(i * 128 + ix < num_rows))

    # subtract the row max for numerical stability
    max_vals = nl.max(a_tile, axis=[1], keepdims=True, mask=(i * 128 + ix < num_rows))
    shifted = nl.subtract(a_tile, max_vals, mask=(i * 128 + ix < num_rows))

    numerator = nl.exp(shifted)
    denominator = nl.sum(numerator, axis=[1])
    sm = numerator / denominator

    nl.store(out_tensor[i * 128 + ix, iy], value=sm, mask=(i * 128 + ix < num_rows))

  return out_tensor
