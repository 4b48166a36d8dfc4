// ops_movement.cpp — data movement: cat (and so stack/hstack/vstack), flip,
// roll, tril/triu (functional, in-place, out=) and the reflection /
// replication pads (1d, 2d, 3d, forward and backward).
//
// cat is ATen's structured op with a precompute struct: its meta does the
// checks, type promotion and output shape, and the impl here is one COPY
// launch per non-empty input into a narrowed view of the output (the copy
// kernel already casts, strides and splits work over the pool; a dedicated
// kernel would save only the per-input launch).  flip is one COPY whose
// source operand has negative strides in the flipped dims (the kernels take
// any byte strides).  roll is ATen's own formulation (narrow + cat).
// tril/triu launch NK_KERNEL_TRIANGLE after ATen's structured meta, and the
// pads NK_KERNEL_PAD after the structured metas (reflection_pad2d is not
// structured in ATen: its checks are repeated here with ATen's messages).
#include <ATen/WrapDimUtilsMulti.h>
#include <ATen/native/Padding.h>
#include <ATen/native/TensorShape.h>
#include <ATen/native/TensorTransformations.h>
#include <ATen/ops/cat_meta.h>
#include <ATen/ops/reflection_pad1d_backward_meta.h>
#include <ATen/ops/reflection_pad1d_meta.h>
#include <ATen/ops/reflection_pad3d_backward_meta.h>
#include <ATen/ops/reflection_pad3d_meta.h>
#include <ATen/ops/replication_pad1d_backward_meta.h>
#include <ATen/ops/replication_pad1d_meta.h>
#include <ATen/ops/replication_pad2d_meta.h>
#include <ATen/ops/replication_pad3d_meta.h>
#include <ATen/ops/tril_meta.h>
#include <ATen/ops/triu_meta.h>
#include <torch/library.h>

#include <type_traits>
#include <vector>

#include "fallback.h"
#include "launch.h"
#include "ops.h"
#include "structured.h"

namespace torch_neuronx {
namespace {

using at::Tensor;
using structured::Functional;
using structured::Out;


// ---- cat ----------------------------------------------------------------------

struct CatOp : at::meta::structured_cat {
  void impl(const at::ITensorListRef& tensors, int64_t dim, int64_t /*valid*/, bool, bool, bool,
            at::MemoryFormat, const Tensor& result) {
    if (result.numel() == 0) return;
    int64_t offset = 0;
    for (const Tensor& t : tensors) {
      if (at::native::cat_should_skip_tensor(t)) continue;
      const int64_t size = t.size(dim);
      if (size > 0) copy_on_device(result.narrow(dim, offset, size), t);
      offset += size;
    }
  }
};

torch::jit::Stack list_args(const at::ITensorListRef& tensors, int64_t dim) {
  std::vector<Tensor> v;
  for (const Tensor& t : tensors) v.push_back(t);
  return {c10::IValue(std::move(v)), dim};
}

Tensor cat(const at::ITensorListRef& tensors, int64_t dim) {
  if (!structured::all_native(tensors)) return run_on_cpu("aten::cat", "", list_args(tensors, dim)).toTensor();
  Functional<CatOp, 1> op;
  auto pre = op.meta(tensors, dim);
  op.impl(tensors, pre.dim, pre.valid, pre.all_contiguous, pre.all_same_dtype,
          pre.all_same_sizes_and_stride, pre.memory_format, op.output(0));
  return std::move(op.outputs_[0]);
}

Tensor& cat_out(const at::ITensorListRef& tensors, int64_t dim, Tensor& out) {
  if (!structured::all_native(tensors) || !is_native_dtype(out.scalar_type())) {
    auto args = list_args(tensors, dim);
    args.emplace_back(out);
    run_on_cpu("aten::cat", "out", std::move(args));
    return out;
  }
  Out<CatOp, 1> op(out);
  auto pre = op.meta(tensors, dim);
  op.impl(tensors, pre.dim, pre.valid, pre.all_contiguous, pre.all_same_dtype,
          pre.all_same_sizes_and_stride, pre.memory_format, op.output(0));
  op.copy_back();
  return out;
}

// ---- flip / roll ----------------------------------------------------------------

Tensor flip(const Tensor& self, at::IntArrayRef dims) {
  const int64_t total_dims = self.dim();
  const auto flip_dims = at::dim_list_to_bitset(dims, total_dims);  // wraps, rejects repeats
  if (!is_native_dtype(self.scalar_type())) {
    return run_on_cpu("aten::flip", "", {self, dims.vec()}).toTensor();
  }
  Tensor out = at::empty_like(self, at::MemoryFormat::Preserve);
  if (self.numel() == 0) return out;
  Task task(NK_KERNEL_COPY, "aten::flip", 2);
  describe_or_fail(out, task.operand(0), "flip");
  nrt_operand* in = task.operand(1);
  describe_or_fail(self, in, "flip");
  for (int64_t d = 0; d < total_dims; ++d) {
    if (!flip_dims[d] || in->sizes[d] <= 1) continue;
    in->data = static_cast<char*>(in->data) + (in->sizes[d] - 1) * in->strides[d];
    in->strides[d] = -in->strides[d];
  }
  launch(self.device().index(), task);
  return out;
}

Tensor roll(const Tensor& self, at::IntArrayRef shifts, at::IntArrayRef dims) {
  if (dims.size() != 1 || shifts.size() != 1) return at::native::roll_common(self, shifts, dims);
  if (self.numel() == 0) return self.clone(at::MemoryFormat::Preserve);
  const int64_t dim = at::maybe_wrap_dim(dims[0], self.dim());
  const int64_t size = self.size(dim);
  int64_t start = (size - shifts[0]) % size;
  if (start < 0) start += size;
  return at::cat({self.narrow(dim, start, size - start), self.narrow(dim, 0, start)}, dim);
}

// ---- tril / triu ----------------------------------------------------------------

template <bool Upper>
struct TriangleOp : std::conditional_t<Upper, at::meta::structured_triu, at::meta::structured_tril> {
  void impl(const Tensor& self, int64_t diagonal, const Tensor& result) {
    if (result.numel() == 0) return;
    const char* name = Upper ? "aten::triu" : "aten::tril";
    Task task(NK_KERNEL_TRIANGLE, name, 2);
    describe_or_fail(result, task.operand(0), name);
    describe_or_fail(self, task.operand(1), name);
    auto* p = task.params<nk_triangle_params>();
    p->diagonal = diagonal;
    p->upper = Upper;
    launch(self.device().index(), task);
  }
};

// ---- pads -----------------------------------------------------------------------

// NK_KERNEL_PAD: out <- pad of self over its last nd dims;
// NK_KERNEL_PAD_BACKWARD: out (grad_input, overwritten) <- the pad's
// backward of self (grad_output).  padding as ATen gives it (last dim first:
// left, right, top, bottom, front, back).
void launch_pad(nk_kernel_id kernel, const Tensor& self, const Tensor& out, at::IntArrayRef padding,
                int nd, nk_pad_mode mode, const char* name) {
  if (out.numel() == 0) return;
  Task task(kernel, name, 2);
  describe_or_fail(out, task.operand(0), name);
  describe_or_fail(self, task.operand(1), name);
  auto* p = task.params<nk_pad_params>();
  p->mode = mode;
  p->nd = nd;
  for (int i = 0; i < nd; ++i) p->before[i] = padding[2 * (nd - 1 - i)];
  launch(out.device().index(), task);
}

template <class Meta, int ND, nk_pad_mode Mode>
struct PadBackwardOp : Meta {
  void impl(const Tensor& grad_output, const Tensor& /*self*/, at::IntArrayRef padding,
            const Tensor& grad_input) {
    launch_pad(NK_KERNEL_PAD_BACKWARD, grad_output, grad_input, padding, ND, Mode,
                        Mode == NK_PAD_REFLECT ? "aten::reflection_pad_backward" : "aten::replication_pad_backward");
  }
};

// The backward ops ATen does not structure (reflection_pad2d,
// replication_pad2d/3d): the shape checks of their CPU templates.
template <int ND, nk_pad_mode Mode>
struct PadBackward {
  static const char* name() {
    if (Mode == NK_PAD_REFLECT) return "aten::reflection_pad2d_backward";
    return ND == 2 ? "aten::replication_pad2d_backward" : "aten::replication_pad3d_backward";
  }
  static Tensor& out(const Tensor& grad_output, const Tensor& input, at::IntArrayRef padding,
                     Tensor& grad_input) {
    TORCH_CHECK(padding.size() == 2 * ND, "padding size is expected to be ", 2 * ND, ", but got: ",
                padding.size());
    TORCH_CHECK(grad_output.dim() == input.dim(), "Expected grad_output to have ", input.dim(),
                " dims, but got ", grad_output.dim());
    static const char* const what[3] = {"width", "height", "depth"};
    for (int k = 0; k < ND; ++k) {  // k = 0: the last dim
      const int64_t d = input.dim() - 1 - k;
      const int64_t expected = input.size(d) + padding[2 * k] + padding[2 * k + 1];
      TORCH_CHECK(expected == grad_output.size(d), "gradOutput ", what[k], " unexpected. Expected: ",
                  expected, ", Got: ", grad_output.size(d));
    }
    if (!is_native_dtype(grad_output.scalar_type()) || !is_native_dtype(grad_input.scalar_type())) {
      run_on_cpu(name(), "grad_input", {grad_output, input, padding.vec(), grad_input});
      return grad_input;
    }
    at::native::resize_output(grad_input, input.sizes());
    launch_pad(NK_KERNEL_PAD_BACKWARD, grad_output, grad_input, padding, ND, Mode, name());
    return grad_input;
  }
  static Tensor functional(const Tensor& grad_output, const Tensor& input, at::IntArrayRef padding) {
    Tensor grad_input = at::empty(input.sizes(), grad_output.options());
    out(grad_output, input, padding, grad_input);
    return grad_input;
  }
};

template <class Meta, int ND, nk_pad_mode Mode>
struct PadOp : Meta {
  void impl(const Tensor& self, at::IntArrayRef padding, const Tensor& out) {
    launch_pad(NK_KERNEL_PAD, self, out, padding, ND, Mode, Mode == NK_PAD_REFLECT ? "aten::reflection_pad" : "aten::replication_pad");
  }
};

// ATen's reflection_pad2d_out_template checks (reflection_pad2d has no meta).
Tensor& reflection_pad2d_out(const Tensor& input, at::IntArrayRef padding, Tensor& output) {
  at::native::padding::check_valid_input<2>(input, padding);
  int dim_w = 2, dim_h = 1, dim_slices = 0;
  if (input.dim() == 4) {
    dim_w++;
    dim_h++;
    dim_slices++;
  }
  const int64_t pad_l = padding[0], pad_r = padding[1], pad_t = padding[2], pad_b = padding[3];
  const int64_t nplane = input.size(dim_slices);
  const int64_t input_h = input.size(dim_h), input_w = input.size(dim_w);
  const int64_t output_h = input_h + pad_t + pad_b, output_w = input_w + pad_l + pad_r;
  TORCH_CHECK(pad_l < input_w && pad_r < input_w,
              "Argument #4: Padding size should be less than the corresponding input dimension, but got: padding (",
              pad_l, ", ", pad_r, ") at dimension ", dim_w, " of input ", input.sizes());
  TORCH_CHECK(pad_t < input_h && pad_b < input_h,
              "Argument #6: Padding size should be less than the corresponding input dimension, but got: padding (",
              pad_t, ", ", pad_b, ") at dimension ", dim_h, " of input ", input.sizes());
  TORCH_CHECK(output_w >= 1 || output_h >= 1, "input (H: ", input_h, ", W: ", input_w,
              ") is too small. Calculated output H: ", output_h, " W: ", output_w);
  if (!is_native_dtype(input.scalar_type()) || !is_native_dtype(output.scalar_type())) {
    run_on_cpu("aten::reflection_pad2d", "out", {input, padding.vec(), output});
    return output;
  }
  if (input.dim() == 3) {
    at::native::resize_output(output, {nplane, output_h, output_w});
  } else {
    at::native::resize_output(output, {input.size(0), nplane, output_h, output_w});
  }
  launch_pad(NK_KERNEL_PAD, input, output, padding, 2, NK_PAD_REFLECT, "aten::reflection_pad2d");
  return output;
}

Tensor reflection_pad2d(const Tensor& input, at::IntArrayRef padding) {
  Tensor output = at::empty({0}, input.options());
  reflection_pad2d_out(input, padding, output);
  return output;
}

template <class Op>
void register_pad(torch::Library& m, const char* functional, const char* out) {
  structured::Structured<Op, const Tensor&, at::IntArrayRef>::register_ops(m, functional, nullptr, out);
}

template <class Op>
void register_pad_backward(torch::Library& m, const char* functional, const char* out) {
  structured::Structured<Op, const Tensor&, const Tensor&, at::IntArrayRef>::register_ops(m, functional, nullptr, out);
}

template <int ND, nk_pad_mode Mode>
void register_pad_backward_by_hand(torch::Library& m, const char* functional, const char* out) {
  using B = PadBackward<ND, Mode>;
  m.impl(functional, TORCH_FN(B::functional));
  m.impl(out, TORCH_FN(B::out));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("cat", TORCH_FN(cat));
  m.impl("cat.out", TORCH_FN(cat_out));
  m.impl("flip", TORCH_FN(flip));
  m.impl("roll", TORCH_FN(roll));
  structured::Structured<TriangleOp<false>, const Tensor&, int64_t>::register_ops(m, "tril", "tril_", "tril.out");
  structured::Structured<TriangleOp<true>, const Tensor&, int64_t>::register_ops(m, "triu", "triu_", "triu.out");
  register_pad<PadOp<at::meta::structured_reflection_pad1d, 1, NK_PAD_REFLECT>>(
      m, "reflection_pad1d", "reflection_pad1d.out");
  register_pad<PadOp<at::meta::structured_reflection_pad3d, 3, NK_PAD_REFLECT>>(
      m, "reflection_pad3d", "reflection_pad3d.out");
  register_pad<PadOp<at::meta::structured_replication_pad1d, 1, NK_PAD_REPLICATE>>(
      m, "replication_pad1d", "replication_pad1d.out");
  register_pad<PadOp<at::meta::structured_replication_pad2d, 2, NK_PAD_REPLICATE>>(
      m, "replication_pad2d", "replication_pad2d.out");
  register_pad<PadOp<at::meta::structured_replication_pad3d, 3, NK_PAD_REPLICATE>>(
      m, "replication_pad3d", "replication_pad3d.out");
  m.impl("reflection_pad2d", TORCH_FN(reflection_pad2d));
  m.impl("reflection_pad2d.out", TORCH_FN(reflection_pad2d_out));
  register_pad_backward<PadBackwardOp<at::meta::structured_reflection_pad1d_backward, 1, NK_PAD_REFLECT>>(
      m, "reflection_pad1d_backward", "reflection_pad1d_backward.grad_input");
  register_pad_backward<PadBackwardOp<at::meta::structured_reflection_pad3d_backward, 3, NK_PAD_REFLECT>>(
      m, "reflection_pad3d_backward", "reflection_pad3d_backward.grad_input");
  register_pad_backward<PadBackwardOp<at::meta::structured_replication_pad1d_backward, 1, NK_PAD_REPLICATE>>(
      m, "replication_pad1d_backward", "replication_pad1d_backward.grad_input");
  register_pad_backward_by_hand<2, NK_PAD_REFLECT>(m, "reflection_pad2d_backward",
                                                   "reflection_pad2d_backward.grad_input");
  register_pad_backward_by_hand<2, NK_PAD_REPLICATE>(m, "replication_pad2d_backward",
                                                     "replication_pad2d_backward.grad_input");
  register_pad_backward_by_hand<3, NK_PAD_REPLICATE>(m, "replication_pad3d_backward",
                                                     "replication_pad3d_backward.grad_input");
}

}  // namespace torch_neuronx
