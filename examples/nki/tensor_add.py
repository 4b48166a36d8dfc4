"""SPMD tensor addition (NKI's tensor_add tutorial, Beta 1 dialect): a grid of
programs, each adding one [128, 512] tile; masks make ragged edges legal."""
from torch_neuronx import nki
import torch_neuronx.nki.language as nl


@nki.jit
def nki_tensor_add_kernel_(a_input, b_input):
  """NKI kernel to compute element-wise addition of two input tensors."""
  # Create output tensor shared between all SPMD instances as result tensor
  c_output = nl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=nl.shared_hbm)

  # Calculate tile offsets based on current 'program'
  offset_i_x = nl.program_id(0) * 128
  offset_i_y = nl.program_id(1) * 512

  # Generate tensor indices to index tensors a and b
  ix_, iy_ = nl.mgrid[0:128, 0:512]
  ix = offset_i_x + ix_
  iy = offset_i_y + iy_
  mask = (ix < a_input.shape[0]) & (iy < a_input.shape[1])

  # Load input data from device memory (HBM) to on-chip memory (SBUF)
  a_tile = nl.load(a_input[ix, iy], mask=mask)
  b_tile = nl.load(b_input[ix, iy], mask=mask)

  # compute a + b
  c_tile = a_tile + b_tile

  # store the addition results back to device memory (c_output)
  nl.store(c_output[ix, iy], value=c_tile, mask=mask)

  # Transfer the ownership of `c_output` to the caller
  return c_output


def nki_tensor_add(a_input, b_input):
  """Launches one program per [128, 512] tile (ragged edges masked)."""
  grid_x = (a_input.shape[0] + 127) // 128
  grid_y = (a_input.shape[1] + 511) // 512
  return nki_tensor_add_kernel_[grid_x, grid_y](a_input, b_input)
