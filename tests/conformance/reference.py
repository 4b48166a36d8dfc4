"""(OpInfo, dtype) pairs whose CPU result depends on the CPU's own instruction
set, and the float64 truth the device is held to where the CPU's kernel is the
one that is off.

ATen's CPU chooses its kernels by what the machine (and oneDNN, which
ONEDNN_MAX_CPU_ISA caps) supports.  For a few 16-bit ops one of the choices
rounds intermediates to the 16-bit type, so on the machines that get it the
CPU's result is further from the exact one than the device's -- by more than
the comparison's tolerance -- while elsewhere it is correctly rounded.  Each
entry names the pair, the condition under which ATen takes that kernel (read
from ATen itself, never from a guess about the CPU), and why it is off.

Where an entry's condition holds, the harness holds the device to the truth
instead of the CPU: the op run on the CPU in float64 on the same samples (the
16-bit inputs widened exactly), each result rounded to the dtype, compared at
the usual tolerance.  It also requires the CPU's own 16-bit result to miss
that truth on at least one sample, as a strict xfail would: an entry whose
condition no longer bites fails as stale.  Everywhere else the CPU is the
reference, unchanged."""
import dataclasses

import torch


@dataclasses.dataclass(frozen=True)
class Deviation:
    condition: str   # when ATen takes the kernel that is off, in words
    holds: object    # () -> bool: whether it does in this process
    reason: str      # what that kernel does


def _onednn_lacks_bfloat16():
    return not torch.ops.mkldnn._is_mkldnn_bf16_supported()


def _onednn_lacks_float16():
    return not torch.ops.mkldnn._is_mkldnn_fp16_supported()


# ATen's Slow2d / SlowDilated2d convolutions (thnn_conv2d,
# slow_conv_dilated2d), the CPU's choice for a 16-bit conv1d or conv2d when
# oneDNN has no kernel for the dtype, round to the dtype between GEMMs: the input
# gradient is W^T dy stored as 16-bit columns, which unfolded2d_acc then adds
# into the image in the 16-bit type (ATen/native/cpu/Unfold2d.cpp:
# *dst = *dst + src[...] with scalar_t the dtype), and the weight gradient
# adds each sample's GEMM into a 16-bit accumulator.  Emulating both that way
# reproduces the CPU's results bit for bit (sample 8's input gradient; the
# weight gradients of all 13 four-d samples), so the CPU's error comes from
# those roundings, before a cancelling sum.
_SLOW2D = ("without oneDNN for the dtype ATen's CPU runs the convolution as Slow2d/SlowDilated2d, "
           "which round the gradients' intermediates to it (16-bit columns summed in "
           "16 bits by Unfold2d.cpp's unfolded2d_acc; a 16-bit weight-gradient "
           "accumulator); the device accumulates in float32 and rounds once")

DEVIATIONS = {
    # torch 2.13's op_db samples, ONEDNN_MAX_CPU_ISA=AVX2: the CPU's values
    # are off the correctly rounded result in 938 of 8366 (up to 128 ulp;
    # sample 8's input gradient at (0, 0, 1, 2): 3.0625 + -2.875 = 0.1875 in
    # bfloat16 columns, the truth 0.1796875, 8 ulp), the device's in none, at
    # every TORCHNEURON_ISA and thread count.
    ("nn.functional.conv2d", "bfloat16"): Deviation(
        "oneDNN has no bfloat16 (no AVX-512: AVX2-only x86, or ONEDNN_MAX_CPU_ISA "
        "below AVX512_CORE; torch.ops.mkldnn._is_mkldnn_bf16_supported() is False)",
        _onednn_lacks_bfloat16, _SLOW2D),
    # The same with float16, where oneDNN needs AVX512_FP16 or AMX-FP16 (not on
    # Zen 4, say): 999 of 8366 values off, up to 64 ulp (sample 2's weight
    # gradient first past the tolerance); the device's: none.
    ("nn.functional.conv2d", "float16"): Deviation(
        "oneDNN has no float16 (no AVX512_FP16/AMX-FP16, or ONEDNN_MAX_CPU_ISA below "
        "AVX512_CORE_FP16; torch.ops.mkldnn._is_mkldnn_fp16_supported() is False)",
        _onednn_lacks_float16, _SLOW2D),
    # conv1d runs as conv2d there: 15 of 504 values off, up to 48 ulp in
    # float16 and 16 in bfloat16 (sample 2's weight gradient first past the
    # tolerance), the device's: none.  (conv3d's Slow3d rounds the same way,
    # but op_db's samples stay within the tolerance: no entry.)
    ("nn.functional.conv1d", "bfloat16"): Deviation(
        "oneDNN has no bfloat16", _onednn_lacks_bfloat16, _SLOW2D),
    ("nn.functional.conv1d", "float16"): Deviation(
        "oneDNN has no float16", _onednn_lacks_float16, _SLOW2D),
}


def active(name, dtype_name, deviations=None):
    """The Deviation of (name, dtype) whose condition holds here, or None."""
    deviation = (DEVIATIONS if deviations is None else deviations).get((name, dtype_name))
    return deviation if deviation is not None and deviation.holds() else None
