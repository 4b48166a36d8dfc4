// ops_matmul.cpp — the matrix products on the GEMM kernel: mm, bmm, addmm,
// baddbmm, addmv, dot/vdot (real dtypes), addbmm; matmul, linear, mv,
// outer, einsum... are composites of these.
//
// ATen's meta functions (at::meta::structured_mm, ...) do every check and
// allocate the output; the impls here, one per op family, only describe
// the operands as batched 3-d matrices (a vector is a 1-column or 1-row
// matrix, a missing batch is a batch of one with stride 0) and launch
// NK_KERNEL_GEMM.  No operand is ever copied to make it contiguous: the
// kernel's packing absorbs any strides.  addmm/baddbmm/addmv with beta != 0
// and an output other than self hand the broadcast self to the kernel as its
// addend (out = alpha * a @ b + beta * c), which adds it tile by tile; only
// a self that overlaps the output (or differs from it in dtype or device)
// is first copied into the output and accumulated with beta.
#include <ATen/MemoryOverlap.h>
#include <ATen/ops/addbmm_native.h>
#include <ATen/ops/addmm_meta.h>
#include <ATen/ops/addmv_meta.h>
#include <ATen/ops/baddbmm_meta.h>
#include <ATen/ops/bmm_meta.h>
#include <ATen/ops/mm_meta.h>
#include <torch/library.h>

#include "launch.h"
#include "ops.h"
#include "structured.h"

namespace torch_neuronx {
namespace {

// t (ndim <= 3) as a (batch, rows, cols) operand: a matrix gets a batch of
// one, a vector becomes a column (as_column) or a row, a scalar 1 x 1.
nrt_operand as_batched(const at::Tensor& t, bool as_column = true) {
  nrt_operand op{};
  TORCH_INTERNAL_ASSERT(describe(t, &op), "matmul operand not native");
  const int64_t es = static_cast<int64_t>(t.itemsize());
  int64_t sizes[3] = {1, 1, 1}, strides[3] = {0, 0, 0};
  const int nd = op.ndim;
  for (int d = 0; d < nd; ++d) {
    sizes[3 - nd + d] = op.sizes[d];
    strides[3 - nd + d] = op.strides[d];
  }
  if (nd == 1 && as_column) {  // (n) -> (1, n, 1)
    sizes[1] = op.sizes[0];
    strides[1] = op.strides[0];
    sizes[2] = 1;
    strides[2] = es;
  }
  op.ndim = 3;
  for (int d = 0; d < 3; ++d) {
    op.sizes[d] = sizes[d];
    op.strides[d] = strides[d];
  }
  return op;
}

void check_dtype(const at::Tensor& t, const char* op) {
  // The CPU's message for dtypes its BLAS path lacks.
  TORCH_CHECK(t.scalar_type() != at::kBool, "\"", op, "\" not implemented for 'Bool'");
}

// The dtype checks the meta functions leave to the CPU/CUDA impls, with
// their messages.
void check_same_dtype_mm(const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "expected m1 and m2 to have the same dtype, but got: ",
              a.dtype(), " != ", b.dtype());
}
void check_same_dtype_bmm(const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "expected scalar type ", a.scalar_type(),
              " but found ", b.scalar_type());
}

// out <- alpha * a @ b + beta * out (out, a, b already 3-d operands), or
// + beta * *c when an addend is given.
void launch_gemm(const at::Tensor& out, const nrt_operand& o, const nrt_operand& a,
                 const nrt_operand& b, const c10::Scalar& alpha, const c10::Scalar& beta,
                 const char* name, const nrt_operand* c = nullptr) {
  if (out.numel() == 0) return;
  Task task(NK_KERNEL_GEMM, name, c ? 4 : 3);
  *task.operand(0) = o;
  *task.operand(1) = a;
  *task.operand(2) = b;
  if (c) *task.operand(3) = *c;
  auto* p = task.params<nk_gemm_params>();
  p->alpha = scalar_for_compute(alpha, out.scalar_type());
  p->beta = scalar_for_compute(beta, out.scalar_type());
  launch(out.device().index(), task);
}

bool is_zero(const c10::Scalar& s) { return s.isIntegral(true) ? s.toLong() == 0 : s.toDouble() == 0; }

// result <- beta * self + alpha * (a @ b), self broadcast to result.
void accumulate(const at::Tensor& result, const at::Tensor& self, const nrt_operand& o,
                const nrt_operand& a, const nrt_operand& b, const c10::Scalar& beta,
                const c10::Scalar& alpha, const char* name) {
  check_dtype(result, name);
  const bool zero_beta = is_zero(beta);
  if (!zero_beta && !result.is_same(self) && result.numel() != 0) {
    if (self.scalar_type() == result.scalar_type() && self.device() == result.device() &&
        at::get_overlap_status(result, self) == at::MemOverlapStatus::No) {
      const nrt_operand c = as_batched(self.expand(result.sizes()));
      launch_gemm(result, o, a, b, alpha, beta, name, &c);
      return;
    }
    copy_on_device(result, self);
  }
  launch_gemm(result, o, a, b, alpha, zero_beta ? c10::Scalar(0) : beta, name);
}

struct Mm : at::meta::structured_mm {
  void impl(const at::Tensor& self, const at::Tensor& mat2, const at::Tensor& out) {
    check_same_dtype_mm(self, mat2);
    check_dtype(out, "addmm_impl_cpu_");
    launch_gemm(out, as_batched(out), as_batched(self), as_batched(mat2), 1, 0, "aten::mm");
  }
};

struct Bmm : at::meta::structured_bmm {
  void impl(const at::Tensor& self, const at::Tensor& mat2, const at::Tensor& out) {
    check_same_dtype_bmm(self, mat2);
    check_dtype(out, "bmm");
    launch_gemm(out, as_batched(out), as_batched(self), as_batched(mat2), 1, 0, "aten::bmm");
  }
};

struct Addmm : at::meta::structured_addmm {
  void impl(const at::Tensor& self, const at::Tensor& m1, const at::Tensor& m2,
            const c10::Scalar& beta, const c10::Scalar& alpha, const at::Tensor& out) {
    check_same_dtype_mm(m1, m2);
    accumulate(out, self, as_batched(out), as_batched(m1), as_batched(m2), beta, alpha,
               "addmm_impl_cpu_");
  }
};

struct Baddbmm : at::meta::structured_baddbmm {
  void impl(const at::Tensor& self, const at::Tensor& b1, const at::Tensor& b2,
            const c10::Scalar& beta, const c10::Scalar& alpha, const at::Tensor& out) {
    check_same_dtype_bmm(b1, b2);
    accumulate(out, self, as_batched(out), as_batched(b1), as_batched(b2), beta, alpha,
               "baddbmm");
  }
};

struct Addmv : at::meta::structured_addmv {
  void impl(const at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec,
            const c10::Scalar& beta, const c10::Scalar& alpha, const at::Tensor& out) {
    accumulate(out, self, as_batched(out), as_batched(mat), as_batched(vec), beta, alpha,
               "addmv_impl_cpu");
  }
};

// dot/vdot of real vectors: a 1 x 1 product of a row and a column.
at::Tensor dot_neuron(const at::Tensor& self, const at::Tensor& other) {
  if (!is_native_dtype(self.scalar_type()) || !is_native_dtype(other.scalar_type())) {
    return run_on_cpu("aten::dot", "", {self, other}).toTensor();
  }
  TORCH_CHECK(self.dim() == 1 && other.dim() == 1, "1D tensors expected, but got ", self.dim(),
              "D and ", other.dim(), "D tensors");
  TORCH_CHECK(self.scalar_type() == other.scalar_type(),
              "dot : expected both vectors to have same dtype, but found ", self.scalar_type(),
              " and ", other.scalar_type());
  TORCH_CHECK(self.numel() == other.numel(), "inconsistent tensor size, expected tensor [",
              self.numel(), "] and src [", other.numel(),
              "] to have the same number of elements, but got ", self.numel(), " and ",
              other.numel(), " elements respectively");
  TORCH_CHECK(self.device() == other.device(), "Expected all tensors to be on the same device, "
              "but found at least two devices, ", self.device(), " and ", other.device(), "!");
  check_dtype(self, "dot");
  at::Tensor out = empty_neuron({}, self.scalar_type(), self.device());
  launch_gemm(out, as_batched(out), as_batched(self, /*as_column=*/false), as_batched(other), 1, 0,
              "aten::dot");
  return out;
}

at::Tensor vdot_neuron(const at::Tensor& self, const at::Tensor& other) {
  if (self.is_complex() || other.is_complex()) {
    return run_on_cpu("aten::vdot", "", {self, other}).toTensor();
  }
  return dot_neuron(self, other);
}

using T = const at::Tensor&;
using S = const c10::Scalar&;

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  structured::Structured<Mm, T, T>::register_ops(m, "mm", nullptr, "mm.out");
  structured::Structured<Bmm, T, T>::register_ops(m, "bmm", nullptr, "bmm.out");
  structured::Structured<Addmm, T, T, T, S, S>::register_ops(m, "addmm", "addmm_", "addmm.out");
  structured::Structured<Baddbmm, T, T, T, S, S>::register_ops(m, "baddbmm", "baddbmm_",
                                                                "baddbmm.out");
  structured::Structured<Addmv, T, T, T, S, S>::register_ops(m, "addmv", "addmv_", "addmv.out");
  m.impl("dot", TORCH_FN(dot_neuron));
  m.impl("vdot", TORCH_FN(vdot_neuron));
  // addbmm is generic ATen code over addmm_ (one per batch entry).
  m.impl("addbmm", TORCH_FN(at::native::addbmm));
  m.impl("addbmm_", TORCH_FN(at::native::addbmm_));
  m.impl("addbmm.out", TORCH_FN(at::native::addbmm_out));
}

}  // namespace torch_neuronx
