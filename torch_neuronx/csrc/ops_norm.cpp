// ops_norm.cpp — normalisation on neuron: layer norm, RMS norm, batch norm,
// group norm, forward and backward (NK_KERNEL_NORM, NK_KERNEL_NORM_BACKWARD;
// the math and its decisions are in kernels/src/norm/norm.c).
//
// ATen's CPU and CUDA implementations of native_layer_norm, _fused_rms_norm
// and the batch-norm family are device specific, so each gets a function
// here that follows the CPU one: ATen's own input checks where ATen exports
// them (_check_layer_norm_inputs, _check_rms_norm_inputs_symint), the CPU's
// output dtypes (float32 statistics for a 16-bit input with float32
// parameters, the input's dtype otherwise), its mixed-dtype messages, and
// its shapes (layer-norm stats keep the normalised dims as 1s; eval batch
// norm saves empty stats).  native_group_norm(_backward) are one shared
// CPU/CUDA function that calls GroupNormKernel/GroupNormBackwardKernel, so
// those are registered as they are and the stubs' PrivateUse1 slots filled.
// instance_norm, local_response_norm, layer_norm, batch_norm, group_norm and
// _native_batch_norm_legit_no_training / _batch_norm_no_update are composite
// and become native through these.  rms_norm is composite too, but on any
// device but cuda/xpu/mps it would run as eight elementwise ops, so it is
// registered (PrivateUse1 and AutogradPrivateUse1) to call _fused_rms_norm,
// whose autograd formula then calls _fused_rms_norm_backward (ours).
#include <ATen/ATen.h>
#include <ATen/native/layer_norm.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <array>
#include <limits>
#include <optional>
#include <tuple>

#include "fallback.h"
#include "launch.h"
#include "norm_glue.h"
#include "ops.h"
#include "structured.h"

namespace torch_neuronx {
namespace {

using at::Tensor;
using OptTensor = std::optional<Tensor>;
using Tensor3 = std::tuple<Tensor, Tensor, Tensor>;

const Tensor& value_or_undef(const OptTensor& t) {
  static const Tensor undefined;
  return t.has_value() ? *t : undefined;
}

// ---- operands ---------------------------------------------------------------

// An optional operand: an undefined (or empty) tensor is an empty one (None).
void describe_opt(const Tensor& t, nrt_operand* o) {
  if (!t.defined() || t.numel() == 0) {
    o->data = nullptr;
    o->dtype = NRT_FLOAT32;
    o->ndim = 1;
    o->sizes[0] = 0;
    o->strides[0] = 4;
    return;
  }
  describe_or_fail(t, o, "normalisation");
}

// A per-row / per-channel / per-weight vector (any shape; contiguous).
void describe_vec(const Tensor& t, nrt_operand* o) {
  if (!t.defined() || t.numel() == 0) return describe_opt(t, o);
  TORCH_INTERNAL_ASSERT(t.is_contiguous());
  describe_flat(t, native_dtype(t.scalar_type()), o);
}

// A contiguous tensor as [R, L].
void describe_rows(const Tensor& t, int64_t R, int64_t L, nrt_operand* o) {
  if (!t.defined()) return describe_opt(t, o);
  TORCH_INTERNAL_ASSERT(t.is_contiguous() && t.numel() == R * L);
  const int64_t es = static_cast<int64_t>(t.itemsize());
  o->data = const_cast<void*>(t.const_data_ptr());
  o->dtype = native_dtype(t.scalar_type());
  o->ndim = 2;
  o->sizes[0] = R;
  o->sizes[1] = L;
  o->strides[0] = L * es;
  o->strides[1] = es;
}

// (N, C, *spatial) as [N, C, S] when the spatial dims flatten to one stride.
bool describe_channels(const Tensor& t, nrt_operand* o) {
  if (!t.defined()) {
    describe_opt(t, o);
    return true;
  }
  const int64_t es = static_cast<int64_t>(t.itemsize());
  int64_t S = 1, inner = -1;  // inner stride in elements, -1 = unset
  for (int64_t d = t.dim() - 1; d >= 2; --d) {
    if (t.size(d) == 1) continue;
    if (inner != -1 && t.stride(d) != inner * S) return false;
    if (inner == -1) inner = t.stride(d);
    S *= t.size(d);
  }
  o->data = const_cast<void*>(t.const_data_ptr());
  o->dtype = native_dtype(t.scalar_type());
  o->ndim = 3;
  o->sizes[0] = t.size(0);
  o->sizes[1] = t.dim() > 1 ? t.size(1) : 1;
  o->sizes[2] = S;
  o->strides[0] = t.stride(0) * es;
  o->strides[1] = (t.dim() > 1 ? t.stride(1) : 1) * es;
  o->strides[2] = (inner == -1 ? 1 : inner) * es;
  return true;
}

nk_norm_params* norm_params(Task& task, nk_norm_kind kind, double eps) {
  auto* p = task.params<nk_norm_params>();
  p->kind = kind;
  p->eps = eps;
  return p;
}

// ---- dtypes: ATen's CPU rules -----------------------------------------------

bool is_reduced(c10::ScalarType t) { return t == at::kBFloat16 || t == at::kHalf; }

// The CPU's mixed-type rule: a 16-bit input with float32 parameters keeps its
// statistics in float32; otherwise every parameter has the input's dtype.
template <class... T>
bool check_mixed(const Tensor& input, const T&... params) {
  c10::ScalarType ptype = c10::ScalarType::Undefined;
  ([&](const Tensor& p) {
    if (p.defined() && ptype == c10::ScalarType::Undefined) ptype = p.scalar_type();
  }(params), ...);
  const bool mixed = is_reduced(input.scalar_type()) && ptype == at::kFloat;
  ([&](const Tensor& p) {
    if (!p.defined()) return;
    if (mixed) {
      TORCH_CHECK(p.scalar_type() == at::kFloat,
                  "mixed dtype (CPU): expect parameter to have scalar type of Float");
    } else {
      TORCH_CHECK(p.scalar_type() == input.scalar_type(),
                  "mixed dtype (CPU): all inputs must share same datatype.");
    }
  }(params), ...);
  return mixed;
}

c10::ScalarType stat_dtype(const Tensor& input, bool mixed) {
  return mixed ? at::kFloat : input.scalar_type();
}

bool floating_args() { return true; }
template <class... T>
bool floating_args(const Tensor& t, const T&... rest) {
  return (!t.defined() || (is_native_dtype(t.scalar_type()) && at::isFloatingType(t.scalar_type()))) &&
         floating_args(rest...);
}

// The whole call on the CPU (every result), for dtypes the device lacks.
torch::jit::Stack on_cpu(const char* name, const char* overload, torch::jit::Stack args) {
  const c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow(name, overload);
  cpu_fallback(op, &args);
  return args;
}

Tensor3 tuple3(const torch::jit::Stack& s) {
  auto t = [&](int i) { return s[i].isNone() ? Tensor() : s[i].toTensor(); };
  return {t(0), t(1), t(2)};
}

// ---- layer norm ---------------------------------------------------------------

std::vector<int64_t> stat_shape(const Tensor& input, int64_t axis) {
  std::vector<int64_t> shape;
  for (int64_t i = 0; i < input.dim(); ++i) shape.push_back(i < axis ? input.size(i) : 1);
  return shape;
}

Tensor3 native_layer_norm(const Tensor& input, c10::IntArrayRef normalized_shape,
                          const OptTensor& weight_opt, const OptTensor& bias_opt, double eps) {
  const Tensor& weight = value_or_undef(weight_opt);
  const Tensor& bias = value_or_undef(bias_opt);
  if (!floating_args(input, weight, bias)) {
    return tuple3(on_cpu("aten::native_layer_norm", "",
                         {input, normalized_shape.vec(), weight_opt, bias_opt, eps}));
  }
  auto [M, N] = at::native::_check_layer_norm_inputs(input, normalized_shape, weight, bias);
  const bool mixed = check_mixed(input, weight, bias);
  c10::DeviceGuard guard(input.device());
  Tensor X = input.contiguous();
  Tensor W = weight.defined() ? weight.contiguous() : weight;
  Tensor B = bias.defined() ? bias.contiguous() : bias;
  Tensor Y = at::empty_like(X, at::MemoryFormat::Contiguous);
  Tensor mean = at::empty({M}, X.options().dtype(stat_dtype(X, mixed)));
  Tensor rstd = at::empty({M}, X.options().dtype(stat_dtype(X, mixed)));
  if (M > 0) {
    norm::launch_rows_forward("aten::native_layer_norm", NK_NORM_LAYER, Y, mean, rstd, X, W, B, M, N,
                              eps, 1, 1);
  }
  const int64_t axis = input.dim() - static_cast<int64_t>(normalized_shape.size());
  const auto shape = stat_shape(input, axis);
  return {Y, mean.view(shape), rstd.view(shape)};
}

Tensor3 native_layer_norm_backward(const Tensor& dY, const Tensor& input,
                                   c10::IntArrayRef normalized_shape, const Tensor& mean,
                                   const Tensor& rstd, const OptTensor& weight_opt,
                                   const OptTensor& bias_opt, std::array<bool, 3> mask) {
  const Tensor& weight = value_or_undef(weight_opt);
  const Tensor& bias = value_or_undef(bias_opt);
  if (!floating_args(dY, input, mean, rstd, weight, bias)) {
    return tuple3(on_cpu("aten::native_layer_norm_backward", "",
                         {dY, input, normalized_shape.vec(), mean, rstd, weight_opt, bias_opt,
                          c10::List<bool>({mask[0], mask[1], mask[2]})}));
  }
  auto [M, N] = at::native::_check_layer_norm_inputs(input, normalized_shape, weight, bias);
  c10::DeviceGuard guard(input.device());
  Tensor X = input.contiguous(), G = dY.contiguous();
  Tensor W = weight.defined() ? weight.contiguous() : weight;
  Tensor B = bias.defined() ? bias.contiguous() : bias;
  Tensor dX, dW, dB;
  if (mask[0]) dX = at::empty_like(X, at::MemoryFormat::Contiguous);
  if (mask[1] && W.defined()) dW = M > 0 ? at::empty_like(W, at::MemoryFormat::Contiguous) : at::zeros_like(W);
  if (mask[2] && B.defined()) dB = M > 0 ? at::empty_like(B, at::MemoryFormat::Contiguous) : at::zeros_like(B);
  if (M > 0 && (dX.defined() || dW.defined() || dB.defined())) {
    norm::launch_rows_backward("aten::native_layer_norm_backward", NK_NORM_LAYER, dX, dW, dB, G, X,
                         mean.contiguous(), rstd.contiguous(), W, M, N, 1, 1);
  }
  return {dX, dW, dB};
}

// ---- RMS norm -------------------------------------------------------------------

std::tuple<Tensor, Tensor> fused_rms_norm(const Tensor& input, c10::IntArrayRef normalized_shape,
                                          const OptTensor& weight_opt, std::optional<double> eps) {
  const Tensor& weight = value_or_undef(weight_opt);
  if (!floating_args(input, weight)) {
    auto s = on_cpu("aten::_fused_rms_norm", "", {input, normalized_shape.vec(), weight_opt, eps});
    return {s[0].toTensor(), s[1].toTensor()};
  }
  at::native::_check_rms_norm_inputs_symint(input, c10::fromIntArrayRefSlow(normalized_shape), weight);
  const int64_t axis = input.dim() - static_cast<int64_t>(normalized_shape.size());
  const int64_t M = c10::multiply_integers(input.sizes().begin(), input.sizes().begin() + axis);
  const int64_t N = c10::multiply_integers(input.sizes().begin() + axis, input.sizes().end());
  const bool dbl = input.scalar_type() == at::kDouble;
  const double e = eps.has_value() ? *eps
                   : dbl           ? std::numeric_limits<double>::epsilon()
                                   : static_cast<double>(std::numeric_limits<float>::epsilon());
  c10::DeviceGuard guard(input.device());
  Tensor X = input.contiguous();
  Tensor W = weight.defined() ? weight.contiguous() : weight;
  Tensor Y = at::empty_like(X, at::MemoryFormat::Contiguous);
  // the statistics in the op-math type, as the composite and CUDA return them
  Tensor rstd = at::empty({M}, X.options().dtype(dbl ? at::kDouble : at::kFloat));
  if (M > 0) {
    norm::launch_rows_forward("aten::_fused_rms_norm", NK_NORM_RMS, Y, Tensor(), rstd, X, W, Tensor(),
                              M, N, e, 1, 1);
  }
  return {Y, rstd.view(stat_shape(input, axis))};
}

std::tuple<Tensor, Tensor> fused_rms_norm_backward(const Tensor& dY, const Tensor& input,
                                                   c10::IntArrayRef normalized_shape,
                                                   const Tensor& rstd, const OptTensor& weight_opt,
                                                   std::array<bool, 2> mask) {
  const Tensor& weight = value_or_undef(weight_opt);
  if (!floating_args(dY, input, rstd, weight)) {
    auto s = on_cpu("aten::_fused_rms_norm_backward", "",
                    {dY, input, normalized_shape.vec(), rstd, weight_opt,
                     c10::List<bool>({mask[0], mask[1]})});
    return {s[0].isNone() ? Tensor() : s[0].toTensor(), s[1].isNone() ? Tensor() : s[1].toTensor()};
  }
  at::native::_check_rms_norm_inputs_symint(input, c10::fromIntArrayRefSlow(normalized_shape), weight);
  const int64_t axis = input.dim() - static_cast<int64_t>(normalized_shape.size());
  const int64_t M = c10::multiply_integers(input.sizes().begin(), input.sizes().begin() + axis);
  const int64_t N = c10::multiply_integers(input.sizes().begin() + axis, input.sizes().end());
  c10::DeviceGuard guard(input.device());
  Tensor X = input.contiguous(), G = dY.contiguous();
  Tensor W = weight.defined() ? weight.contiguous() : weight;
  Tensor dX, dW;
  if (mask[0]) dX = at::empty_like(X, at::MemoryFormat::Contiguous);
  if (mask[1] && W.defined()) dW = M > 0 ? at::empty_like(W, at::MemoryFormat::Contiguous) : at::zeros_like(W);
  if (M > 0 && (dX.defined() || dW.defined())) {
    norm::launch_rows_backward("aten::_fused_rms_norm_backward", NK_NORM_RMS, dX, dW, Tensor(), G, X,
                         Tensor(), rstd.contiguous(), W, M, N, 1, 1);
  }
  return {dX, dW};
}

// rms_norm -> _fused_rms_norm (through autograd when called above it).
Tensor rms_norm(const Tensor& input, c10::IntArrayRef normalized_shape, const OptTensor& weight,
                std::optional<double> eps) {
  return std::get<0>(at::_fused_rms_norm(input, normalized_shape, weight, eps));
}

// ---- batch norm --------------------------------------------------------------------

// input with its spatial dims flattened into one stride, copied if it cannot be
Tensor channels_view(const Tensor& t, nrt_operand* o) {
  if (describe_channels(t, o)) return t;
  Tensor c = t.contiguous();
  TORCH_INTERNAL_ASSERT(describe_channels(c, o));
  return c;
}

// out, save_mean, save_invstd written; running stats updated in place.
void batch_norm_into(const Tensor& input, const Tensor& weight, const Tensor& bias,
                     const Tensor& running_mean, const Tensor& running_var, bool train,
                     double momentum, double eps, const Tensor& out, const Tensor& save_mean,
                     const Tensor& save_invstd) {
  if (input.numel() == 0) return;
  Task task(NK_KERNEL_NORM, "aten::native_batch_norm", 8);
  Tensor X = channels_view(input, task.operand(3));
  Tensor Y = out;
  if (!describe_channels(Y, task.operand(0)) || Y.sizes() != X.sizes()) {
    TORCH_INTERNAL_ASSERT(false, "batch_norm: output layout");
  }
  // the output layout must walk like the input's; ATen gives it the input's
  describe_vec(save_mean, task.operand(1));
  describe_vec(save_invstd, task.operand(2));
  const Tensor W = weight.defined() ? weight.contiguous() : weight;
  const Tensor B = bias.defined() ? bias.contiguous() : bias;
  describe_vec(W, task.operand(4));
  describe_vec(B, task.operand(5));
  Tensor rm = running_mean, rv = running_var;
  Tensor rmc = rm.defined() && !rm.is_contiguous() ? rm.contiguous() : rm;
  Tensor rvc = rv.defined() && !rv.is_contiguous() ? rv.contiguous() : rv;
  describe_opt(rmc, task.operand(6));
  describe_opt(rvc, task.operand(7));
  auto* p = norm_params(task, NK_NORM_BATCH, eps);
  p->training = train;
  p->momentum = momentum;
  launch(input.device().index(), task);
  if (train && rm.defined() && !rmc.is_same(rm)) rm.copy_(rmc);
  if (train && rv.defined() && !rvc.is_same(rv)) rv.copy_(rvc);
}

Tensor3 batch_norm_impl(const Tensor& input, const Tensor& weight, const Tensor& bias,
                        const Tensor& running_mean, const Tensor& running_var, bool train,
                        double momentum, double eps) {
  TORCH_CHECK(input.dim() >= 2, "batch_norm: expected input with at least 2 dims, got ", input.dim());
  const bool mixed = check_mixed(input, weight, bias, running_mean, running_var);
  const int64_t C = input.size(1);
  auto check_vec = [&](const Tensor& t, const char* what) {
    TORCH_CHECK(!t.defined() || t.numel() == C, "batch_norm: expected ", what, " to have ", C,
                " elements, got ", t.numel());
  };
  check_vec(weight, "weight");
  check_vec(bias, "bias");
  check_vec(running_mean, "running_mean");
  check_vec(running_var, "running_var");
  TORCH_CHECK(train || (running_mean.defined() && running_var.defined()),
              "running_mean and running_var must be defined in evaluation mode");
  if (train) {
    TORCH_CHECK(input.numel() > 0, "input tensor must have at least one element, but got input_sizes = ",
                input.sizes());
  }
  c10::DeviceGuard guard(input.device());
  // the output keeps the input's layout (channels_last stays channels_last)
  Tensor X = input;
  nrt_operand probe;
  if (!describe_channels(X, &probe)) X = input.contiguous(input.suggest_memory_format());
  if (!describe_channels(X, &probe)) X = input.contiguous();
  Tensor out = at::empty_like(X, X.suggest_memory_format());
  if (!describe_channels(out, &probe) || !out.strides().equals(X.strides())) {
    X = input.contiguous();
    out = at::empty_like(X, at::MemoryFormat::Contiguous);
  }
  const auto dtype = stat_dtype(input, mixed);
  Tensor save_mean = at::empty({train ? C : 0}, input.options().dtype(dtype));
  Tensor save_invstd = at::empty({train ? C : 0}, input.options().dtype(dtype));
  batch_norm_into(X, weight, bias, running_mean, running_var, train, momentum, eps, out, save_mean,
                  save_invstd);
  return {out, save_mean, save_invstd};
}

Tensor3 native_batch_norm(const Tensor& input, const OptTensor& weight, const OptTensor& bias,
                          const OptTensor& running_mean, const OptTensor& running_var, bool train,
                          double momentum, double eps) {
  if (!floating_args(input, value_or_undef(weight), value_or_undef(bias), value_or_undef(running_mean),
                     value_or_undef(running_var))) {
    return tuple3(on_cpu("aten::native_batch_norm", "",
                         {input, weight, bias, running_mean, running_var, train, momentum, eps}));
  }
  return batch_norm_impl(input, value_or_undef(weight), value_or_undef(bias),
                         value_or_undef(running_mean), value_or_undef(running_var), train, momentum,
                         eps);
}

Tensor3 native_batch_norm_legit(const Tensor& input, const OptTensor& weight, const OptTensor& bias,
                                Tensor& running_mean, Tensor& running_var, bool train,
                                double momentum, double eps) {
  if (!floating_args(input, value_or_undef(weight), value_or_undef(bias), running_mean, running_var)) {
    return tuple3(on_cpu("aten::_native_batch_norm_legit", "",
                         {input, weight, bias, running_mean, running_var, train, momentum, eps}));
  }
  return batch_norm_impl(input, value_or_undef(weight), value_or_undef(bias), running_mean,
                         running_var, train, momentum, eps);
}

Tensor3 native_batch_norm_legit_no_stats(const Tensor& input, const OptTensor& weight,
                                         const OptTensor& bias, bool train, double momentum,
                                         double eps) {
  if (!floating_args(input, value_or_undef(weight), value_or_undef(bias))) {
    return tuple3(on_cpu("aten::_native_batch_norm_legit", "no_stats",
                         {input, weight, bias, train, momentum, eps}));
  }
  return batch_norm_impl(input, value_or_undef(weight), value_or_undef(bias), Tensor(), Tensor(),
                         train, momentum, eps);
}

std::tuple<Tensor, Tensor, Tensor, Tensor> batch_norm_with_update(
    const Tensor& input, const OptTensor& weight, const OptTensor& bias, Tensor& running_mean,
    Tensor& running_var, double momentum, double eps) {
  if (!floating_args(input, value_or_undef(weight), value_or_undef(bias), running_mean, running_var)) {
    auto s = on_cpu("aten::_batch_norm_with_update", "",
                    {input, weight, bias, running_mean, running_var, momentum, eps});
    return {s[0].toTensor(), s[1].toTensor(), s[2].toTensor(), s[3].toTensor()};
  }
  auto [out, mean, invstd] = batch_norm_impl(input, value_or_undef(weight), value_or_undef(bias),
                                             running_mean, running_var, true, momentum, eps);
  // the CPU's reserve: an empty byte tensor
  Tensor reserve = at::empty({0}, input.options().dtype(at::kByte));
  return {out, mean, invstd, reserve};
}

// CompositeExplicitAutograd in ATen, but its body calls batch_norm_cpu
// directly: eval-mode statistics (batch statistics when none are given).
std::tuple<Tensor, Tensor, Tensor, Tensor> batch_norm_no_update(
    const Tensor& input, const OptTensor& weight, const OptTensor& bias, const OptTensor& running_mean,
    const OptTensor& running_var, double momentum, double eps) {
  const Tensor& rm = value_or_undef(running_mean);
  const Tensor& rv = value_or_undef(running_var);
  if (!floating_args(input, value_or_undef(weight), value_or_undef(bias), rm, rv)) {
    auto s = on_cpu("aten::_batch_norm_no_update", "",
                    {input, weight, bias, running_mean, running_var, momentum, eps});
    return {s[0].toTensor(), s[1].toTensor(), s[2].toTensor(), s[3].toTensor()};
  }
  const bool train = !(rm.defined() && rv.defined());
  auto [out, mean, invstd] = batch_norm_impl(input, value_or_undef(weight), value_or_undef(bias),
                                             train ? Tensor() : rm, train ? Tensor() : rv, train,
                                             momentum, eps);
  return {out, mean, invstd, at::empty({0}, input.options().dtype(at::kByte))};
}

Tensor3 batch_norm_backward_impl(const Tensor& dY, const Tensor& input, const Tensor& weight,
                                 const Tensor& running_mean, const Tensor& running_var,
                                 const Tensor& save_mean, const Tensor& save_invstd, bool train,
                                 double eps, std::array<bool, 3> mask) {
  const Tensor& mean = train ? save_mean : running_mean;
  const Tensor& stat = train ? save_invstd : running_var;
  TORCH_CHECK(mean.defined() && stat.defined(),
              train ? "batch_norm_backward: save_mean and save_invstd must be defined in training mode"
                    : "batch_norm_backward: running_mean and running_var must be defined in evaluation mode");
  c10::DeviceGuard guard(input.device());
  const int64_t C = input.size(1);
  Tensor dX, dW, dB;
  // dweight/dbias take the weight's dtype (float32 for a mixed 16-bit input)
  const auto wdtype = weight.defined() ? weight.scalar_type() : stat_dtype(input, mean.scalar_type() == at::kFloat && is_reduced(input.scalar_type()));
  if (mask[1]) dW = at::empty({C}, input.options().dtype(wdtype));
  if (mask[2]) dB = at::empty({C}, input.options().dtype(wdtype));
  Task task(NK_KERNEL_NORM_BACKWARD, "aten::native_batch_norm_backward", 8);
  Tensor X = channels_view(input, task.operand(4));
  // any strides walk (an expanded dY too); dY is copied only if its spatial
  // dims do not flatten
  Tensor G = channels_view(dY, task.operand(3));
  if (mask[0]) {
    dX = at::empty_like(X, X.suggest_memory_format());
    TORCH_INTERNAL_ASSERT(describe_channels(dX, task.operand(0)));
  } else {
    describe_opt(Tensor(), task.operand(0));
  }
  if (input.numel() == 0) {
    if (dW.defined()) dW.zero_();
    if (dB.defined()) dB.zero_();
    return {dX, dW, dB};
  }
  describe_vec(dW, task.operand(1));
  describe_vec(dB, task.operand(2));
  const Tensor mc = mean.contiguous(), sc = stat.contiguous();
  const Tensor W = weight.defined() ? weight.contiguous() : weight;
  describe_vec(mc, task.operand(5));
  describe_vec(sc, task.operand(6));
  describe_vec(W, task.operand(7));
  auto* p = norm_params(task, NK_NORM_BATCH, eps);
  p->training = train;
  launch(input.device().index(), task);
  return {dX, dW, dB};
}

Tensor3 native_batch_norm_backward(const Tensor& dY, const Tensor& input, const OptTensor& weight,
                                   const OptTensor& running_mean, const OptTensor& running_var,
                                   const OptTensor& save_mean, const OptTensor& save_invstd,
                                   bool train, double eps, std::array<bool, 3> mask) {
  if (!floating_args(dY, input, value_or_undef(weight), value_or_undef(running_mean),
                     value_or_undef(running_var), value_or_undef(save_mean),
                     value_or_undef(save_invstd))) {
    return tuple3(on_cpu("aten::native_batch_norm_backward", "",
                         {dY, input, weight, running_mean, running_var, save_mean, save_invstd, train,
                          eps, c10::List<bool>({mask[0], mask[1], mask[2]})}));
  }
  return batch_norm_backward_impl(dY, input, value_or_undef(weight), value_or_undef(running_mean),
                                  value_or_undef(running_var), value_or_undef(save_mean),
                                  value_or_undef(save_invstd), train, eps, mask);
}

Tensor3 batch_norm_backward(const Tensor& dY, const Tensor& input, const Tensor& weight,
                            const OptTensor& running_mean, const OptTensor& running_var,
                            const OptTensor& save_mean, const OptTensor& save_var, bool update,
                            double eps, std::array<bool, 3> mask, const Tensor& reserve) {
  if (!floating_args(dY, input, weight, value_or_undef(running_mean), value_or_undef(running_var),
                     value_or_undef(save_mean), value_or_undef(save_var))) {
    return tuple3(on_cpu("aten::batch_norm_backward", "",
                         {dY, input, weight, running_mean, running_var, save_mean, save_var, update,
                          eps, c10::List<bool>({mask[0], mask[1], mask[2]}), reserve}));
  }
  // the CPU's _new_batch_norm_backward_cpu: train = update
  return batch_norm_backward_impl(dY, input, weight, value_or_undef(running_mean),
                                  value_or_undef(running_var), value_or_undef(save_mean),
                                  value_or_undef(save_var), update, eps, mask);
}

}  // namespace

namespace norm {

// The row-kind backward: dx, dweight, dbias of [M, N] rows.
void launch_rows_backward(const char* name, nk_norm_kind kind, const Tensor& dX, const Tensor& dW,
                          const Tensor& dB, const Tensor& dY, const Tensor& X, const Tensor& mean,
                          const Tensor& rstd, const Tensor& W, int64_t M, int64_t N, int64_t groups,
                          int64_t hw) {
  Task task(NK_KERNEL_NORM_BACKWARD, name, 8);
  describe_rows(dX, M, N, task.operand(0));
  describe_vec(dW, task.operand(1));
  describe_vec(dB, task.operand(2));
  describe_rows(dY, M, N, task.operand(3));
  describe_rows(X, M, N, task.operand(4));
  describe_vec(mean, task.operand(5));
  describe_vec(rstd, task.operand(6));
  describe_vec(W, task.operand(7));
  auto* p = norm_params(task, kind, 0.0);
  p->groups = groups;
  p->hw = hw;
  launch(X.device().index(), task);
}

void launch_rows_forward(const char* name, nk_norm_kind kind, const Tensor& Y, const Tensor& mean,
                         const Tensor& rstd, const Tensor& X, const Tensor& W, const Tensor& B,
                         int64_t R, int64_t L, double eps, int64_t groups, int64_t hw) {
  Task task(NK_KERNEL_NORM, name, 6);
  describe_rows(Y, R, L, task.operand(0));
  describe_vec(mean, task.operand(1));
  describe_vec(rstd, task.operand(2));
  describe_rows(X, R, L, task.operand(3));
  describe_vec(W, task.operand(4));
  describe_vec(B, task.operand(5));
  auto* p = norm_params(task, kind, eps);
  p->groups = groups;
  p->hw = hw;
  launch(X.device().index(), task);
}

}  // namespace norm

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_layer_norm", TORCH_FN(native_layer_norm));
  m.impl("native_layer_norm_backward", TORCH_FN(native_layer_norm_backward));
  m.impl("_fused_rms_norm", TORCH_FN(fused_rms_norm));
  m.impl("_fused_rms_norm_backward", TORCH_FN(fused_rms_norm_backward));
  m.impl("rms_norm", TORCH_FN(rms_norm));
  m.impl("native_batch_norm", TORCH_FN(native_batch_norm));
  m.impl("_native_batch_norm_legit", TORCH_FN(native_batch_norm_legit));
  m.impl("_native_batch_norm_legit.no_stats", TORCH_FN(native_batch_norm_legit_no_stats));
  m.impl("_batch_norm_with_update", TORCH_FN(batch_norm_with_update));
  m.impl("_batch_norm_no_update", TORCH_FN(batch_norm_no_update));
  m.impl("native_batch_norm_backward", TORCH_FN(native_batch_norm_backward));
  m.impl("batch_norm_backward", TORCH_FN(batch_norm_backward));
}

// rms_norm is CompositeImplicitAutograd: with a PrivateUse1 kernel of its own
// the autograd key needs one too, which calls _fused_rms_norm through its
// autograd formula.
TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("rms_norm", TORCH_FN(rms_norm));
}

}  // namespace torch_neuronx
