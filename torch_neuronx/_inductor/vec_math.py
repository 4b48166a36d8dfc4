"""The device's float32 vector math in torch.compile's kernels on neuron.

Inductor's C++ vector kernels compute exp, tanh, erf, log, sin, ... with
ATen's ``at::vec::Vectorized<float>`` methods (``CppVecOverrides``,
torch/_inductor/codegen/cpp.py:1138), which call SLEEF's 1-ulp routines:
on the CPU they cost 3-5x the device's own vector bodies for exp and tanh
(the eager unary kernels', kernels/src/elementwise/unary_simd_impl.h).  A
compiled kernel on neuron computes these functions with the device's code
instead, so a compiled graph gets the speed the eager ops already have:

- the headers that hold that code (kernels/src/common/simd_*_f32.h: the
  ISA's vector macros, exp, the activations built on it, log, erf, sin/cos/
  atan) are installed with the package and pasted into each kernel's source
  that uses them, inside ``namespace neuron_vec::impl``.  Pasting, not an
  ``#include``: the headers include each other by paths relative to the
  source tree, and the kernel's source text is what Inductor's compile cache
  keys by, so a change to the math recompiles;
- ``neuron_vec::<fn>(Vectorized<float>)`` wraps them (and VectorizedN<float,
  N>, lane group by lane group); the macros are undefined after use, so
  nothing of them leaks into Inductor's code;
- ``NeuronCppVecOverrides`` emits ``neuron_vec::<fn>(x)`` for a vector
  float32 operand and leaves every other case (scalars, float64, integer
  vectors) to upstream's code.

Accuracy: the eager ops' (about 1 ulp for exp, 1-1.6 for the others, erfc up
to 3.4 and atan 2.3, checked by tests/c/test_kernels_unary_ulp.c) where
SLEEF's are within 1.0; both are inside the float32 tolerances that compiled
graphs are held to.  Special values (NaN, +-inf, +-0, subnormals) are the
eager ops'.
"""
from __future__ import annotations

import functools
import hashlib
import os
import re

from torch._inductor.codegen.cpp import CppVecOverrides
from torch._inductor.codegen.cpp_utils import CppCSEVariable

import torch

# The ISA's vector macros, by the macro Inductor's build defines for the ISA
# it generates for (cpu_vec_isa: VecAMX is an AVX-512), then the math in
# dependency order (each header after those it includes).
_ISA_HEADERS = (("CPU_CAPABILITY_AVX512", "simd_avx512_f32.h"),
                ("CPU_CAPABILITY_AVX2", "simd_avx2_f32.h"))
_MATH_HEADERS = ("simd_exp_f32.h", "simd_act_f32.h", "simd_log_f32.h", "simd_erf_f32.h",
                 "simd_trig_f32.h")

# Inductor op name -> the header's vector function.
FUNCTIONS = {
    "exp": "vexp", "exp2": "vexp2", "expm1": "vexpm1",
    "log": "vlog", "log2": "vlog2", "log10": "vlog10", "log1p": "vlog1p",
    "erf": "verf", "erfc": "verfc",
    "sin": "vsin", "cos": "vcos", "atan": "vatan",
    "tanh": "vtanh", "sigmoid": "vsigmoid",
}


def header_dir() -> str:
    """Where the package installed the headers (beside torch_neuronx._C)."""
    from torch_neuronx import _C

    return os.path.join(os.path.dirname(_C.__file__), "include", "vec_math")


def _read(name: str) -> str:
    path = os.path.join(header_dir(), name)
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:  # a broken install, not a user error
        raise RuntimeError(f"torch_neuronx: vector math header missing ({path}); "
                           "reinstall the package") from e


def _split(text: str) -> tuple[list[str], str]:
    """(its system #includes, the rest without #include lines)."""
    system, body = [], []
    for line in text.splitlines():
        if line.startswith("#include <"):
            system.append(line)
        elif not line.startswith("#include"):
            body.append(line)
    return system, "\n".join(body)


@functools.cache
def source() -> str:
    """The C++ that defines neuron_vec::<fn> for this ISA's Vectorized<float>."""
    texts = {name: _split(_read(name))
             for name in [h for _, h in _ISA_HEADERS] + list(_MATH_HEADERS)}
    system = sorted({line for inc, _ in texts.values() for line in inc})
    macros = sorted({m for _, body in texts.values()
                     for m in re.findall(r"^#define (\w+)", body, flags=re.M)})
    isa_blocks = [f"#{'if' if i == 0 else 'elif'} defined({macro})\n{texts[h][1]}"
                  for i, (macro, h) in enumerate(_ISA_HEADERS)]
    wrappers = "\n".join(
        f"inline VecF {fn}(const VecF& x) {{ return VecF(impl::{v}(x)); }}\n"
        f"template <int N> inline at::vec::VectorizedN<float, N> {fn}("
        f"const at::vec::VectorizedN<float, N>& x) {{\n"
        f"  at::vec::VectorizedN<float, N> r;\n"
        f"  for (int i = 0; i < N; ++i) r[i] = {fn}(x[i]);\n"
        f"  return r;\n}}"
        for fn, v in FUNCTIONS.items())
    return "\n".join([
        "// torch_neuronx: the device's float32 vector math (torch_neuronx/_inductor/vec_math.py)",
        *system,
        "#if " + " || ".join(f"defined({macro})" for macro, _ in _ISA_HEADERS),
        "namespace neuron_vec {",
        "namespace impl {",
        *isa_blocks,
        "#endif",
        *(texts[name][1] for name in _MATH_HEADERS),
        "}  // namespace impl",
        *(f"#undef {m}" for m in macros),
        "using VecF = at::vec::Vectorized<float>;",
        wrappers,
        "}  // namespace neuron_vec",
        "#endif",
    ])


@functools.cache
def digest() -> str:
    """A hash of the math, for the FX graph cache's key (cache_key.py)."""
    return hashlib.sha256(source().encode()).hexdigest()[:16]


def uses(src: str) -> bool:
    """Whether a kernel's source calls the math (then it gets source())."""
    return "neuron_vec::" in src


@functools.cache
def _vector_isa_supported() -> bool:
    """Whether the ISA Inductor generates for has headers here."""
    from torch._inductor.cpu_vec_isa import pick_vec_isa

    built = pick_vec_isa().build_macro()
    return any(macro in built for macro, _ in _ISA_HEADERS)


def _ours(name: str, upstream):
    fn = f"neuron_vec::{name}"

    def op(x, *args, **kwargs):
        if (not args and not kwargs and isinstance(x, CppCSEVariable) and x.is_vec
                and x.dtype == torch.float32 and _vector_isa_supported()):
            return f"{fn}({x})"
        return upstream(x, *args, **kwargs)

    return op


class NeuronCppVecOverrides(CppVecOverrides):
    """CppVecOverrides with the device's math for float32 vectors.

    Upstream's ``__new__`` replaces each of its static methods by an instance
    attribute that broadcasts scalars and falls back to the scalar op; ours
    wrap those attributes, so every case we do not take is upstream's."""

    def __new__(cls, *args, **kwargs):
        self = super().__new__(cls, *args, **kwargs)
        for name in FUNCTIONS:
            setattr(self, name, _ours(name, getattr(self, name)))
        return self
