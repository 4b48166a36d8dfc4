// ops_loss.cpp — the losses on neuron: mse_loss, smooth_l1_loss, huber_loss
// (forward and backward), binary_cross_entropy (+ backward), nll_loss,
// nll_loss2d and multi_margin_loss (forward and backward).  cross_entropy, l1_loss, kl_div,
// binary_cross_entropy_with_logits, soft_margin/margin_ranking/
// hinge_embedding/poisson_nll/gaussian_nll/triplet_margin/cosine_embedding
// are composites of ops that are native, so they need nothing here.
//
// How each is made native:
//  - mse/smooth_l1/huber: ATen's own code (the structured mse_loss.out and
//    smooth_l1_loss.out, the shared CPU/CUDA huber_loss, *_backward_out)
//    builds the TensorIterator and calls a DispatchStub; our stubs launch
//    NK_KERNEL_LOSS_POINTWISE on it.  Reductions are ATen's at::mean/at::sum,
//    i.e. the reduce family's kernels.
//  - binary_cross_entropy: the CPU implementation is device specific; ours
//    is the same steps (a TensorIterator over the squeezed operands, mul_ by
//    the weight, mean/sum) with the elementwise part on the device.
//  - nll_loss_forward/backward: ATen's meta (checks, output shapes) with our
//    impl; nll_loss2d_*: our functions with the CPU's checks and messages.
//    Both launch NK_KERNEL_NLL_LOSS on [N, C, H, W] views (1-d and 2-d
//    inputs get stride-0 dims).  The CPU reads tensors as scalar_t /
//    int64_t; we raise its errors for other dtypes rather than convert.
//    An out-of-range target fails the task: "Target 7 is out of bounds.",
//    raised at the next synchronisation (as CUDA's device assert, where the
//    CPU raises IndexError at once).
#include <ATen/TensorIterator.h>
#include <ATen/core/Reduction.h>
#include <ATen/native/BinaryOps.h>
#include <ATen/native/LossMulti.h>
#include <ATen/native/PointwiseOps.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/huber_loss_backward_native.h>
#include <ATen/ops/huber_loss_native.h>
#include <ATen/ops/mse_loss_backward_native.h>
#include <ATen/ops/mse_loss_native.h>
#include <ATen/ops/nll_loss_backward_meta.h>
#include <ATen/ops/nll_loss_forward_meta.h>
#include <ATen/ops/smooth_l1_loss_backward_native.h>
#include <ATen/ops/smooth_l1_loss_native.h>
#include <torch/library.h>

#include <optional>
#include <tuple>
#include <vector>

#include "fallback.h"
#include "launch.h"
#include "ops.h"
#include "structured.h"

namespace torch_neuronx {
namespace {

using at::Tensor;

// ---- pointwise losses (stubs) ----------------------------------------------

const char* loss_name(nk_loss_op op) {
  switch (op) {
    case NK_LOSS_MSE: return "mse_loss";
    case NK_LOSS_SMOOTH_L1: return "smooth_l1_loss";
    case NK_LOSS_HUBER: return "huber_loss";
    case NK_LOSS_BCE: return "binary_cross_entropy";
    case NK_LOSS_MSE_BW: return "mse_loss_backward";
    case NK_LOSS_SMOOTH_L1_BW: return "smooth_l1_loss_backward";
    case NK_LOSS_HUBER_BW: return "huber_loss_backward";
    case NK_LOSS_BCE_BW: return "binary_cross_entropy_backward";
    default: return "loss";
  }
}

// The CPU kernels dispatch on the output's dtype (iter.dtype(0)).
void launch_loss_pointwise(at::TensorIteratorBase& iter, nk_loss_op op, double p0 = 0, double p1 = 0) {
  const auto dtype = iter.dtype(0);
  TORCH_CHECK_NOT_IMPLEMENTED(c10::isFloatingType(dtype) && is_native_dtype(dtype), "\"",
                              loss_name(op), "_neuron\" not implemented for '", c10::toString(dtype), "'");
  if (iter.numel() == 0) return;
  Task task(NK_KERNEL_LOSS_POINTWISE, loss_name(op), iter.ntensors());
  std::vector<Tensor> keep;
  TORCH_CHECK(describe_operands(iter, &task.t, &keep), loss_name(op),
              ": an operand has a dtype the neuron device lacks");
  auto* p = task.params<nk_loss_pointwise_params>();
  p->op = op;
  p->compute = native_dtype(dtype);
  p->p0 = p0;
  p->p1 = p1;
  launch(iter.device(0).index(), task);
}

}  // namespace

void mse_kernel(at::TensorIteratorBase& iter) { launch_loss_pointwise(iter, NK_LOSS_MSE); }
void mse_backward_kernel(at::TensorIterator& iter, const c10::Scalar& norm) {
  launch_loss_pointwise(iter, NK_LOSS_MSE_BW, norm.to<double>());
}
void smooth_l1_kernel(at::TensorIteratorBase& iter, double beta) {
  launch_loss_pointwise(iter, NK_LOSS_SMOOTH_L1, beta);
}
void smooth_l1_backward_kernel(at::TensorIterator& iter, const c10::Scalar& norm, double beta) {
  launch_loss_pointwise(iter, NK_LOSS_SMOOTH_L1_BW, norm.to<double>(), beta);
}
void huber_kernel(at::TensorIterator& iter, double delta) { launch_loss_pointwise(iter, NK_LOSS_HUBER, delta); }
void huber_backward_kernel(at::TensorIterator& iter, const c10::Scalar& norm, double delta) {
  launch_loss_pointwise(iter, NK_LOSS_HUBER_BW, norm.to<double>(), delta);
}

namespace {

void check_same_device(std::initializer_list<const Tensor*> ts) {
  const Tensor* first = nullptr;
  for (const Tensor* t : ts) {
    if (!t->defined()) continue;
    if (!first) {
      first = t;
    } else {
      TORCH_CHECK(t->device() == first->device(),
                  "Expected all tensors to be on the same device, but found at least two devices, ",
                  first->device(), " and ", t->device(), "!");
    }
  }
}

// ---- binary_cross_entropy ----------------------------------------------------

Tensor& bce_out(const Tensor& input, const Tensor& target, const std::optional<Tensor>& weight_opt,
                int64_t reduction, Tensor& loss) {
  if (!structured::all_native(input, target, weight_opt, loss)) {
    run_on_cpu("aten::binary_cross_entropy", "out", {input, target, weight_opt, reduction, loss});
    return loss;
  }
  const Tensor weight = weight_opt.value_or(Tensor());
  check_same_device({&input, &target, &weight, &loss});
  Tensor loss_squeezed = at::squeeze(loss);
  auto iter = at::TensorIteratorConfig()
                  .add_output(loss_squeezed)
                  .add_owned_const_input(at::squeeze(input))
                  .add_owned_const_input(at::squeeze(target))
                  .build();
  launch_loss_pointwise(iter, NK_LOSS_BCE);
  if (weight.defined()) loss.mul_(weight);
  if (reduction != at::Reduction::None) {
    Tensor reduced = reduction == at::Reduction::Mean ? loss.mean() : loss.sum();
    loss.resize_as_(reduced).copy_(reduced);
  }
  return loss;
}

Tensor bce(const Tensor& input, const Tensor& target, const std::optional<Tensor>& weight,
           int64_t reduction) {
  if (!structured::all_native(input, target, weight)) {
    return run_on_cpu("aten::binary_cross_entropy", "", {input, target, weight, reduction}).toTensor();
  }
  Tensor loss = at::empty_like(input);
  return bce_out(input, target, weight, reduction, loss);
}

Tensor& bce_backward_out(const Tensor& grad, const Tensor& input, const Tensor& target,
                         const std::optional<Tensor>& weight_opt, int64_t reduction, Tensor& grad_input) {
  if (!structured::all_native(grad, input, target, weight_opt, grad_input)) {
    run_on_cpu("aten::binary_cross_entropy_backward", "grad_input",
               {grad, input, target, weight_opt, reduction, grad_input});
    return grad_input;
  }
  const Tensor weight = weight_opt.value_or(Tensor());
  check_same_device({&grad, &input, &target, &weight, &grad_input});
  Tensor grad_input_squeezed = at::squeeze(grad_input);
  auto iter = at::TensorIteratorConfig()
                  .add_output(grad_input_squeezed)
                  .add_owned_const_input(at::squeeze(input))
                  .add_owned_const_input(at::squeeze(target))
                  .add_owned_const_input(at::squeeze(grad))
                  .build();
  launch_loss_pointwise(iter, NK_LOSS_BCE_BW);
  if (weight.defined()) grad_input.mul_(weight);
  if (reduction == at::Reduction::Mean) grad_input.div_(input.numel());
  return grad_input;
}

Tensor bce_backward(const Tensor& grad, const Tensor& input, const Tensor& target,
                    const std::optional<Tensor>& weight, int64_t reduction) {
  if (!structured::all_native(grad, input, target, weight)) {
    return run_on_cpu("aten::binary_cross_entropy_backward", "", {grad, input, target, weight, reduction})
        .toTensor();
  }
  Tensor grad_input = at::empty_like(input);
  return bce_backward_out(grad, input, target, weight, reduction, grad_input);
}

// ---- nll_loss / nll_loss2d -----------------------------------------------------

// t as an operand of the given sizes and element strides.
void describe_as(const Tensor& t, std::initializer_list<int64_t> sizes,
                 std::initializer_list<int64_t> strides, nrt_operand* out) {
  describe_or_fail(t, out, "nll_loss");
  out->ndim = static_cast<int32_t>(sizes.size());
  const int64_t es = static_cast<int64_t>(t.element_size());
  int i = 0;
  for (int64_t s : sizes) out->sizes[i++] = s;
  i = 0;
  for (int64_t s : strides) out->strides[i++] = s * es;
}

// The [N, C, H, W] view of a 1-d, 2-d or 4-d input.
void describe_nchw(const Tensor& t, nrt_operand* out) {
  if (t.dim() == 1) return describe_as(t, {1, t.size(0), 1, 1}, {0, t.stride(0), 0, 0}, out);
  if (t.dim() == 2) return describe_as(t, {t.size(0), t.size(1), 1, 1}, {t.stride(0), t.stride(1), 0, 0}, out);
  describe_as(t, {t.size(0), t.size(1), t.size(2), t.size(3)},
              {t.stride(0), t.stride(1), t.stride(2), t.stride(3)}, out);
}

// The [N, H, W] view of a per-position tensor (0-d, 1-d or 3-d).
void describe_nhw(const Tensor& t, nrt_operand* out) {
  if (t.dim() == 0) return describe_as(t, {1, 1, 1}, {0, 0, 0}, out);
  if (t.dim() == 1) return describe_as(t, {t.size(0), 1, 1}, {t.stride(0), 0, 0}, out);
  describe_as(t, {t.size(0), t.size(1), t.size(2)}, {t.stride(0), t.stride(1), t.stride(2)}, out);
}

// A one-element tensor as a 0-dim operand.
void describe_scalar(const Tensor& t, nrt_operand* out) { describe_as(t, {}, {}, out); }

// The errors of the CPU's data_ptr<scalar_t>() / accessor<int64_t>().
void expect_dtype(const Tensor& t, c10::ScalarType want) {
  if (!t.defined()) return;
  TORCH_CHECK(t.scalar_type() == want, "expected scalar type ", c10::toString(want), " but found ",
              c10::toString(t.scalar_type()));
}

void check_nll_dtypes(const char* frame, const Tensor& input, const Tensor& target, bool allow_byte,
                      std::initializer_list<const Tensor*> same) {
  const auto dtype = input.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(c10::isFloatingType(dtype) && is_native_dtype(dtype), "\"", frame,
                              "\" not implemented for '", c10::toString(dtype), "'");
  const auto tdt = target.scalar_type();
  TORCH_CHECK(tdt == at::kLong || tdt == at::kByte, "expected target dtype to be Long or Byte, but got ",
              c10::toString(tdt));
  if (!allow_byte) expect_dtype(target, at::kLong);
  for (const Tensor* t : same) expect_dtype(*t, dtype);
}

// Effective reduction for the kernel: a 1-d input goes through the CPU's
// reducing branch even with reduction none (one element, total_weight set).
int kernel_reduction(const Tensor& input, int64_t reduction) {
  if (input.dim() == 1 && reduction == at::Reduction::None) return at::Reduction::Sum;
  return static_cast<int>(reduction);
}

void launch_nll_forward(const Tensor& input, const Tensor& target, const Tensor& weight, int64_t reduction,
                        int64_t ignore_index, const Tensor& output, const Tensor& total_weight) {
  check_same_device({&input, &target, &weight, &output, &total_weight});
  const int red = kernel_reduction(input, reduction);
  Task task(NK_KERNEL_NLL_LOSS, input.dim() == 4 ? "aten::nll_loss2d_forward" : "aten::nll_loss_forward",
            weight.defined() ? 5 : 4);
  if (red == at::Reduction::None) {
    describe_nhw(output, task.operand(0));
  } else {
    describe_scalar(output, task.operand(0));
  }
  describe_scalar(total_weight, task.operand(1));
  describe_nchw(input, task.operand(2));
  describe_nhw(target, task.operand(3));
  if (weight.defined()) describe_as(weight, {weight.numel()}, {weight.dim() == 1 ? weight.stride(0) : 1}, task.operand(4));
  auto* p = task.params<nk_nll_loss_params>();
  p->backward = 0;
  p->reduction = red;
  p->ignore_index = ignore_index;
  launch(input.device().index(), task);
}

void launch_nll_backward(const Tensor& grad_output, const Tensor& input, const Tensor& target,
                         const Tensor& weight, int64_t reduction, int64_t ignore_index,
                         const Tensor& total_weight, const Tensor& grad_input) {
  check_same_device({&grad_output, &input, &target, &weight, &total_weight, &grad_input});
  const int red = kernel_reduction(input, reduction);
  Task task(NK_KERNEL_NLL_LOSS, input.dim() == 4 ? "aten::nll_loss2d_backward" : "aten::nll_loss_backward",
            weight.defined() ? 5 : 4);
  describe_nchw(grad_input, task.operand(0));
  if (red == at::Reduction::None) {
    describe_nhw(grad_output, task.operand(1));
  } else {
    describe_scalar(grad_output, task.operand(1));
  }
  describe_nhw(target, task.operand(2));
  describe_scalar(total_weight, task.operand(3));
  if (weight.defined()) describe_as(weight, {weight.numel()}, {weight.dim() == 1 ? weight.stride(0) : 1}, task.operand(4));
  auto* p = task.params<nk_nll_loss_params>();
  p->backward = 1;
  p->reduction = red;
  p->ignore_index = ignore_index;
  launch(input.device().index(), task);
}

// nll_loss_forward: ATen's meta, our impl.
struct NllForward : at::meta::structured_nll_loss_forward {
  void impl(const Tensor& self, const Tensor& target, at::OptionalTensorRef weight_opt, int64_t reduction,
            int64_t ignore_index, const Tensor& output, const Tensor& total_weight) {
    const Tensor& weight = weight_opt.getTensorRef();
    check_nll_dtypes("nll_loss_out_frame", self, target, true, {&weight});
    launch_nll_forward(self, target, weight, reduction, ignore_index, output, total_weight);
  }
};

struct NllBackward : at::meta::structured_nll_loss_backward {
  void impl(const Tensor& grad_output, const Tensor& self, const Tensor& target, at::OptionalTensorRef weight_opt,
            int64_t reduction, int64_t ignore_index, const Tensor& total_weight, const Tensor& grad_input) {
    const Tensor& weight = weight_opt.getTensorRef();
    check_nll_dtypes("nll_loss_backward_out_frame", self, target, true, {&weight, &grad_output, &total_weight});
    if (reduction == at::Reduction::None && self.dim() == 2) {
      // the CPU walks grad_output per row; with reduction it reads one value
    } else {
      TORCH_CHECK(grad_output.numel() == 1, "Expected a single element grad_output tensor, but got: ",
                  grad_output.sizes());
    }
    launch_nll_backward(grad_output, self, target, weight, reduction, ignore_index, total_weight, grad_input);
  }
};

at::OptionalTensorRef ref(const std::optional<Tensor>& t) {
  return t && t->defined() ? at::OptionalTensorRef(*t) : at::OptionalTensorRef();
}

std::tuple<Tensor, Tensor> nll_loss_forward(const Tensor& self, const Tensor& target,
                                            const std::optional<Tensor>& weight, int64_t reduction,
                                            int64_t ignore_index) {
  if (!structured::all_native(self, target, weight)) {
    auto t = run_on_cpu("aten::nll_loss_forward", "", {self, target, weight, reduction, ignore_index}).toTuple();
    return {t->elements()[0].toTensor(), t->elements()[1].toTensor()};
  }
  structured::Functional<NllForward, 2> op;
  op.meta(self, target, ref(weight), reduction, ignore_index);
  op.impl(self, target, ref(weight), reduction, ignore_index, op.output(0), op.output(1));
  return {std::move(op.outputs_[0]), std::move(op.outputs_[1])};
}

std::tuple<Tensor&, Tensor&> nll_loss_forward_out(const Tensor& self, const Tensor& target,
                                                  const std::optional<Tensor>& weight, int64_t reduction,
                                                  int64_t ignore_index, Tensor& output, Tensor& total_weight) {
  if (!structured::all_native(self, target, weight, output, total_weight)) {
    run_on_cpu("aten::nll_loss_forward", "output",
               {self, target, weight, reduction, ignore_index, output, total_weight});
    return {output, total_weight};
  }
  structured::Out<NllForward, 2> op(output, total_weight);
  op.meta(self, target, ref(weight), reduction, ignore_index);
  op.impl(self, target, ref(weight), reduction, ignore_index, op.output(0), op.output(1));
  op.copy_back();
  return {output, total_weight};
}

Tensor nll_loss_backward(const Tensor& grad_output, const Tensor& self, const Tensor& target,
                         const std::optional<Tensor>& weight, int64_t reduction, int64_t ignore_index,
                         const Tensor& total_weight) {
  if (!structured::all_native(grad_output, self, target, weight, total_weight)) {
    return run_on_cpu("aten::nll_loss_backward", "",
                      {grad_output, self, target, weight, reduction, ignore_index, total_weight})
        .toTensor();
  }
  structured::Functional<NllBackward, 1> op;
  op.meta(grad_output, self, target, ref(weight), reduction, ignore_index, total_weight);
  op.impl(grad_output, self, target, ref(weight), reduction, ignore_index, total_weight, op.output(0));
  return std::move(op.outputs_[0]);
}

Tensor& nll_loss_backward_out(const Tensor& grad_output, const Tensor& self, const Tensor& target,
                              const std::optional<Tensor>& weight, int64_t reduction, int64_t ignore_index,
                              const Tensor& total_weight, Tensor& grad_input) {
  if (!structured::all_native(grad_output, self, target, weight, total_weight, grad_input)) {
    run_on_cpu("aten::nll_loss_backward", "grad_input",
               {grad_output, self, target, weight, reduction, ignore_index, total_weight, grad_input});
    return grad_input;
  }
  structured::Out<NllBackward, 1> op(grad_input);
  op.meta(grad_output, self, target, ref(weight), reduction, ignore_index, total_weight);
  op.impl(grad_output, self, target, ref(weight), reduction, ignore_index, total_weight, op.output(0));
  op.copy_back();
  return grad_input;
}

// nll_loss2d: the CPU's checks (LossNLL2d.cpp), our kernel.
void check_inputs_nll_loss2d(const Tensor& input, const Tensor& target, const Tensor& weight) {
  TORCH_CHECK(target.dim() == 3,
              "only batches of spatial targets supported (3D tensors)"
              " but got targets of dimension: ",
              target.dim());
  TORCH_CHECK(input.dim() == 4,
              "only batches of spatial inputs supported (4D tensors), "
              "but got input of dimension: ",
              input.dim());
  TORCH_CHECK(!weight.defined() || weight.numel() == input.size(1),
              "weight tensor should be defined either for all or no classes");
  TORCH_CHECK(input.size(0) == target.size(0) && input.size(2) == target.size(1) &&
                  input.size(3) == target.size(2),
              "size mismatch (got input: ", input.sizes(), " , target: ", target.sizes());
}

std::tuple<Tensor&, Tensor&> nll_loss2d_forward_out(const Tensor& self, const Tensor& target,
                                                    const std::optional<Tensor>& weight_opt, int64_t reduction,
                                                    int64_t ignore_index, Tensor& output, Tensor& total_weight) {
  if (!structured::all_native(self, target, weight_opt, output, total_weight)) {
    run_on_cpu("aten::nll_loss2d_forward", "output",
               {self, target, weight_opt, reduction, ignore_index, output, total_weight});
    return {output, total_weight};
  }
  const Tensor weight = weight_opt.value_or(Tensor());
  check_inputs_nll_loss2d(self, target, weight);
  check_nll_dtypes("nll_loss2d_forward_out_frame", self, target, false, {&weight, &output, &total_weight});
  total_weight.resize_({});
  if (reduction == at::Reduction::None) {
    at::native::resize_output(output, {self.size(0), self.size(2), self.size(3)});
  } else {
    at::native::resize_output(output, {});
  }
  launch_nll_forward(self, target, weight, reduction, ignore_index, output, total_weight);
  return {output, total_weight};
}

std::tuple<Tensor, Tensor> nll_loss2d_forward(const Tensor& self, const Tensor& target,
                                              const std::optional<Tensor>& weight, int64_t reduction,
                                              int64_t ignore_index) {
  if (!structured::all_native(self, target, weight)) {
    auto t = run_on_cpu("aten::nll_loss2d_forward", "", {self, target, weight, reduction, ignore_index}).toTuple();
    return {t->elements()[0].toTensor(), t->elements()[1].toTensor()};
  }
  Tensor output = at::empty({0}, self.options());
  Tensor total_weight = at::empty({0}, self.options());
  nll_loss2d_forward_out(self, target, weight, reduction, ignore_index, output, total_weight);
  return {output, total_weight};
}

Tensor& nll_loss2d_backward_out(const Tensor& grad_output, const Tensor& self, const Tensor& target,
                                const std::optional<Tensor>& weight_opt, int64_t reduction, int64_t ignore_index,
                                const Tensor& total_weight, Tensor& grad_input) {
  if (!structured::all_native(grad_output, self, target, weight_opt, total_weight, grad_input)) {
    run_on_cpu("aten::nll_loss2d_backward", "grad_input",
               {grad_output, self, target, weight_opt, reduction, ignore_index, total_weight, grad_input});
    return grad_input;
  }
  const Tensor weight = weight_opt.value_or(Tensor());
  check_inputs_nll_loss2d(self, target, weight);
  grad_input.resize_as_(self);
  TORCH_CHECK(grad_input.is_contiguous(), "grad_input must be contiguous");
  TORCH_CHECK(total_weight.numel() == 1, "expected total_weight to be a single element tensor, got: ",
              total_weight.sizes(), " (", total_weight.numel(), " elements)");
  check_nll_dtypes("nll_loss2d_backward_out_frame", self, target, false,
                   {&weight, &grad_output, &total_weight, &grad_input});
  if (reduction == at::Reduction::None) {
    TORCH_CHECK(grad_output.dim() == 3,
                "grad_output must have same dimension as target (3) but got dimension: ", grad_output.sizes());
    TORCH_CHECK(grad_output.size(0) == target.size(0) && grad_output.size(1) == target.size(1) &&
                    grad_output.size(2) == target.size(2),
                "size mismatch (got grad_output: ", grad_output.sizes(), " target: ", target.sizes());
  } else {
    TORCH_CHECK(grad_output.dim() <= 1 && grad_output.numel() == 1,
                "Expected a single element grad_output tensor, but got: ", grad_output.sizes());
  }
  launch_nll_backward(grad_output, self, target, weight, reduction, ignore_index, total_weight, grad_input);
  return grad_input;
}

Tensor nll_loss2d_backward(const Tensor& grad_output, const Tensor& self, const Tensor& target,
                           const std::optional<Tensor>& weight, int64_t reduction, int64_t ignore_index,
                           const Tensor& total_weight) {
  if (!structured::all_native(grad_output, self, target, weight, total_weight)) {
    return run_on_cpu("aten::nll_loss2d_backward", "",
                      {grad_output, self, target, weight, reduction, ignore_index, total_weight})
        .toTensor();
  }
  Tensor grad_input = at::empty_like(self, at::MemoryFormat::Contiguous);
  return nll_loss2d_backward_out(grad_output, self, target, weight, reduction, ignore_index, total_weight,
                                 grad_input);
}

// ---- multi_margin_loss: the CPU's checks (LossMultiMargin.cpp), our kernel ----

void check_multi_margin(const char* frame, const Tensor& input, const Tensor& target, const c10::Scalar& p,
                        const std::optional<Tensor>& weight, int64_t* nframe, int64_t* dim) {
  TORCH_CHECK_VALUE(p.toInt() == 1 || p.toInt() == 2, "only p == 1 and p == 2 supported");
  at::native::multi_margin_loss_shape_check(*nframe, *dim, input.dim(), input, target, weight);
  const auto dtype = input.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(dtype == at::kFloat || dtype == at::kDouble, "\"", frame,
                              "\" not implemented for '", c10::toString(dtype), "'");
  expect_dtype(target, at::kLong);
  if (weight) expect_dtype(*weight, dtype);
}

void describe_frames(const Tensor& t, int64_t nframe, int64_t dim, nrt_operand* out) {
  if (t.dim() == 2) return describe_as(t, {nframe, dim}, {t.stride(0), t.stride(1)}, out);
  describe_as(t, {1, dim}, {0, t.dim() == 1 ? t.stride(0) : 0}, out);
}

void describe_rows(const Tensor& t, int64_t nframe, nrt_operand* out) {
  if (t.dim() == 0) return describe_as(t, {1}, {0}, out);
  describe_as(t, {nframe}, {t.stride(0)}, out);
}

void set_multi_margin_params(Task& task, bool backward, int64_t reduction, const c10::Scalar& p,
                             const c10::Scalar& margin) {
  auto* prm = task.params<nk_multi_margin_params>();
  prm->backward = backward;
  prm->reduction = static_cast<int32_t>(reduction);
  prm->p = static_cast<int32_t>(p.toInt());
  prm->margin = margin.to<double>();
}

Tensor& multi_margin_loss_out(const Tensor& input, const Tensor& target, const c10::Scalar& p,
                              const c10::Scalar& margin, const std::optional<Tensor>& weight_opt,
                              int64_t reduction, Tensor& output) {
  if (!structured::all_native(input, target, weight_opt, output)) {
    run_on_cpu("aten::multi_margin_loss", "out", {input, target, p, margin, weight_opt, reduction, output});
    return output;
  }
  int64_t nframe = 0, dim = 0;
  check_multi_margin("multi_margin_loss_cpu_kernel", input, target, p, weight_opt, &nframe, &dim);
  const Tensor weight = weight_opt.value_or(Tensor());
  check_same_device({&input, &target, &weight, &output});
  const bool rows = reduction == at::Reduction::None && target.dim() > 0;
  if (rows) {
    output.resize_({nframe});
  } else {
    output.resize_({});
  }
  if (input.numel() == 0) return output;
  expect_dtype(output, input.scalar_type());
  Task task(NK_KERNEL_MULTI_MARGIN, "aten::multi_margin_loss", weight.defined() ? 4 : 3);
  if (rows) {
    describe_rows(output, nframe, task.operand(0));
  } else {
    describe_as(output, {}, {}, task.operand(0));
  }
  describe_frames(input, nframe, dim, task.operand(1));
  describe_rows(target, nframe, task.operand(2));
  if (weight.defined()) describe_as(weight, {dim}, {weight.dim() == 1 ? weight.stride(0) : 0}, task.operand(3));
  set_multi_margin_params(task, false, rows ? 0 : (reduction == 0 ? 2 : reduction), p, margin);
  launch(input.device().index(), task);
  return output;
}

Tensor multi_margin_loss(const Tensor& input, const Tensor& target, const c10::Scalar& p,
                         const c10::Scalar& margin, const std::optional<Tensor>& weight, int64_t reduction) {
  if (!structured::all_native(input, target, weight)) {
    return run_on_cpu("aten::multi_margin_loss", "", {input, target, p, margin, weight, reduction}).toTensor();
  }
  Tensor output = at::empty({0}, input.options());
  return multi_margin_loss_out(input, target, p, margin, weight, reduction, output);
}

Tensor& multi_margin_loss_backward_out(const Tensor& grad_output, const Tensor& input, const Tensor& target,
                                       const c10::Scalar& p, const c10::Scalar& margin,
                                       const std::optional<Tensor>& weight_opt, int64_t reduction,
                                       Tensor& grad_input) {
  if (!structured::all_native(grad_output, input, target, weight_opt, grad_input)) {
    run_on_cpu("aten::multi_margin_loss_backward", "grad_input",
               {grad_output, input, target, p, margin, weight_opt, reduction, grad_input});
    return grad_input;
  }
  int64_t nframe = 0, dim = 0;
  check_multi_margin("multi_margin_loss_backward_cpu_kernel", input, target, p, weight_opt, &nframe, &dim);
  const Tensor weight = weight_opt.value_or(Tensor());
  check_same_device({&grad_output, &input, &target, &weight, &grad_input});
  grad_input.resize_as_(input);
  TORCH_CHECK(grad_input.is_contiguous(), "grad_input must be contiguous");
  if (input.numel() == 0) return grad_input;
  expect_dtype(grad_input, input.scalar_type());
  expect_dtype(grad_output, input.scalar_type());
  const bool scalar_grad = reduction != at::Reduction::None || grad_output.dim() == 0;
  TORCH_CHECK(scalar_grad ? grad_output.numel() == 1 : grad_output.numel() == nframe,
              "multi_margin_loss_backward: grad_output has ", grad_output.numel(), " elements");
  Task task(NK_KERNEL_MULTI_MARGIN, "aten::multi_margin_loss_backward", weight.defined() ? 5 : 4);
  describe_frames(grad_input, nframe, dim, task.operand(0));
  if (scalar_grad) {
    describe_as(grad_output, {}, {}, task.operand(1));
  } else {
    describe_rows(grad_output, nframe, task.operand(1));
  }
  describe_frames(input, nframe, dim, task.operand(2));
  describe_rows(target, nframe, task.operand(3));
  if (weight.defined()) describe_as(weight, {dim}, {weight.dim() == 1 ? weight.stride(0) : 0}, task.operand(4));
  // the kernel's reduction: mean (g = 1 / (F * D)), none with per-row
  // grad_output, else sum (g = 1 / D, one grad_output value)
  const int32_t red = reduction == at::Reduction::Mean ? 1 : scalar_grad ? 2 : 0;
  set_multi_margin_params(task, true, red, p, margin);
  launch(input.device().index(), task);
  return grad_input;
}

Tensor multi_margin_loss_backward(const Tensor& grad_output, const Tensor& input, const Tensor& target,
                                  const c10::Scalar& p, const c10::Scalar& margin,
                                  const std::optional<Tensor>& weight, int64_t reduction) {
  if (!structured::all_native(grad_output, input, target, weight)) {
    return run_on_cpu("aten::multi_margin_loss_backward", "",
                      {grad_output, input, target, p, margin, weight, reduction})
        .toTensor();
  }
  Tensor grad_input = at::empty({0}, input.options());
  return multi_margin_loss_backward_out(grad_output, input, target, p, margin, weight, reduction, grad_input);
}

using T = const Tensor&;
using structured::Shared;
using structured::Structured;
namespace an = at::native;

void register_ops(torch::Library& m) {
  // structured, ATen's impl; our stubs
  Structured<an::structured_mse_loss_out, T, T, int64_t>::register_ops(m, "mse_loss", nullptr, "mse_loss.out");
  Structured<an::structured_smooth_l1_loss_out, T, T, int64_t, double>::register_ops(
      m, "smooth_l1_loss", nullptr, "smooth_l1_loss.out");
  // shared CPU/CUDA functions; our stubs
  Shared<an::mse_loss_backward>::register_op(m, "mse_loss_backward");
  Shared<an::mse_loss_backward_out>::register_op(m, "mse_loss_backward.grad_input");
  Shared<an::smooth_l1_loss_backward_out>::register_op(m, "smooth_l1_loss_backward.grad_input");
  Shared<an::huber_loss>::register_op(m, "huber_loss");
  Shared<an::huber_loss_out>::register_op(m, "huber_loss.out");
  Shared<an::huber_loss_backward_out>::register_op(m, "huber_loss_backward.out");
  // device-specific on the CPU: ours
  m.impl("binary_cross_entropy", TORCH_FN(bce));
  m.impl("binary_cross_entropy.out", TORCH_FN(bce_out));
  m.impl("binary_cross_entropy_backward", TORCH_FN(bce_backward));
  m.impl("binary_cross_entropy_backward.grad_input", TORCH_FN(bce_backward_out));
  m.impl("nll_loss_forward", TORCH_FN(nll_loss_forward));
  m.impl("nll_loss_forward.output", TORCH_FN(nll_loss_forward_out));
  m.impl("nll_loss_backward", TORCH_FN(nll_loss_backward));
  m.impl("nll_loss_backward.grad_input", TORCH_FN(nll_loss_backward_out));
  m.impl("nll_loss2d_forward", TORCH_FN(nll_loss2d_forward));
  m.impl("nll_loss2d_forward.output", TORCH_FN(nll_loss2d_forward_out));
  m.impl("nll_loss2d_backward", TORCH_FN(nll_loss2d_backward));
  m.impl("nll_loss2d_backward.grad_input", TORCH_FN(nll_loss2d_backward_out));
  m.impl("multi_margin_loss", TORCH_FN(multi_margin_loss));
  m.impl("multi_margin_loss.out", TORCH_FN(multi_margin_loss_out));
  m.impl("multi_margin_loss_backward", TORCH_FN(multi_margin_loss_backward));
  m.impl("multi_margin_loss_backward.grad_input", TORCH_FN(multi_margin_loss_backward_out));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { register_ops(m); }

}  // namespace torch_neuronx

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(mse_stub, &torch_neuronx::mse_kernel)
REGISTER_PRIVATEUSE1_DISPATCH(mse_backward_stub, &torch_neuronx::mse_backward_kernel)
REGISTER_PRIVATEUSE1_DISPATCH(smooth_l1_stub, &torch_neuronx::smooth_l1_kernel)
REGISTER_PRIVATEUSE1_DISPATCH(smooth_l1_backward_stub, &torch_neuronx::smooth_l1_backward_kernel)
REGISTER_PRIVATEUSE1_DISPATCH(huber_stub, &torch_neuronx::huber_kernel)
REGISTER_PRIVATEUSE1_DISPATCH(huber_backward_stub, &torch_neuronx::huber_backward_kernel)
}  // namespace at::native
