// ops_tail.cpp — the long tail: ops that each fell back to the CPU for one
// missing piece.
//
//  - Stubs of ATen's shared CPU/CUDA functions, on NK_KERNEL_TAIL_POINTWISE:
//    glu_stub (glu is structured), prelu_stub / prelu_backward_stub
//    (_prelu_kernel[_backward] are shared functions), renorm_scale_factor_stub
//    (renorm is structured: linalg_vector_norm, this factor, mul),
//    frexp_stub (frexp_out is shared), cross_stub (linalg_cross is
//    structured).  unfold_backward_stub runs NK_KERNEL_UNFOLD_BACKWARD.
//  - glu_backward is device-specific in ATen; ours is the CPU's
//    glu_backward_cpu_out (its checks, its TensorIterator over the halves)
//    launching the kernel's GLU_BACKWARD op.
//  - Compositions of native ops, as ATen's own code for the other devices:
//    channel_shuffle (shared; its math_channel_shuffle is view/permute),
//    _efficientzerotensor (a ZeroTensor on neuron, as CUDA's), normal with
//    tensor mean/std (ATen's normal_impl templates over our normal_),
//    rrelu_with_noise (uniform_ noise where x <= 0, then a multiplication;
//    eval mode is leaky_relu with the mean slope, as ATen's CPU).
// A dtype the device lacks (complex, ...) goes to the CPU fallback.
#include <ATen/ExpandUtils.h>
#include <ATen/TensorIterator.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Activation.h>
#include <ATen/native/Cross.h>
#include <ATen/native/Distance.h>
#include <ATen/native/Histogram.h>
#include <ATen/native/TensorCompare.h>
#include <ATen/native/DistributionTemplates.h>
#include <ATen/native/Normalization.h>
#include <ATen/native/TensorFactories.h>
#include <ATen/native/UnaryOps.h>
#include <ATen/native/UnfoldBackward.h>
#include <ATen/ops/_prelu_kernel_backward_native.h>
#include <ATen/ops/_prelu_kernel_native.h>
#include <ATen/ops/_cdist_backward_native.h>
#include <ATen/ops/_cdist_forward_native.h>
#include <ATen/ops/_pdist_backward_native.h>
#include <ATen/ops/_pdist_forward_native.h>
#include <ATen/ops/_embedding_bag_backward_native.h>
#include <ATen/ops/channel_shuffle_native.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/frexp_native.h>
#include <ATen/ops/_histogramdd_bin_edges_native.h>
#include <ATen/ops/_histogramdd_from_bin_cts_native.h>
#include <ATen/ops/_histogramdd_from_bin_tensors_native.h>
#include <ATen/ops/aminmax.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/histc_native.h>
#include <ATen/ops/histogram_native.h>
#include <ATen/ops/isin_native.h>
#include <ATen/ops/nonzero.h>
#include <ATen/ops/searchsorted.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/glu_native.h>
#include <ATen/ops/leaky_relu.h>
#include <ATen/ops/linalg_cross_native.h>
#include <ATen/ops/renorm_native.h>
#include <ATen/ops/unfold_backward_native.h>
#include <ATen/ops/where.h>
#include <ATen/Dispatch.h>
#include <ATen/EmptyTensor.h>
#include <c10/core/DefaultDtype.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/library.h>

#include <tuple>
#include <vector>

#include "fallback.h"
#include "generator.h"
#include "launch.h"
#include "ops.h"
#include "structured.h"

namespace torch_neuronx {
namespace {

using at::Tensor;

// One NK_KERNEL_TAIL_POINTWISE launch over a built iterator.
void launch_tail(at::TensorIteratorBase& iter, nk_tail_op op, const char* name, c10::ScalarType compute,
                 double scalar = 0, int32_t dim = 0) {
  TORCH_CHECK_NOT_IMPLEMENTED(c10::isFloatingType(compute) || op == NK_TAIL_CROSS, "\"", name + 6,
                              "_neuron\" not implemented for '", c10::toString(compute), "'");
  if (iter.numel() == 0) return;
  Task task(NK_KERNEL_TAIL_POINTWISE, name, iter.ntensors());
  std::vector<Tensor> keep;
  TORCH_CHECK(describe_operands(iter, &task.t, &keep), name,
              ": the neuron device cannot describe these operands (dtype or more than ", NRT_MAX_DIMS,
              " dims)");
  auto* p = task.params<nk_tail_pointwise_params>();
  p->op = op;
  p->compute = native_dtype(compute);
  p->dim = dim;
  p->scalar = scalar;
  launch(iter.device(0).index(), task);
}

}  // namespace

namespace stubs {

void glu_kernel(at::TensorIteratorBase& iter) {
  launch_tail(iter, NK_TAIL_GLU, "aten::glu", iter.common_dtype());
}
void prelu_kernel(at::TensorIterator& iter) {
  launch_tail(iter, NK_TAIL_PRELU, "aten::_prelu_kernel", iter.common_dtype());
}
void prelu_backward_kernel(at::TensorIterator& iter) {
  launch_tail(iter, NK_TAIL_PRELU_BACKWARD, "aten::_prelu_kernel_backward", iter.common_dtype());
}
void renorm_scale_factor_kernel(at::TensorIteratorBase& iter, double maxnorm) {
  launch_tail(iter, NK_TAIL_RENORM_FACTOR, "aten::renorm", iter.common_dtype(), maxnorm);
}
void frexp_kernel(at::TensorIteratorBase& iter) {
  launch_tail(iter, NK_TAIL_FREXP, "aten::frexp", iter.input_dtype(0));
}

// ATen gives the three tensors broadcast to one shape; one launch over them
// as elementwise operands (the kernel steps along dim itself).
void cross_kernel(const Tensor& result, const Tensor& a, const Tensor& b, const int64_t dim) {
  if (result.numel() == 0) return;
  TORCH_CHECK(a.sizes() == result.sizes() && b.sizes() == result.sizes(),
              "linalg.cross: internal error, operands of different shapes");
  const char* name = "aten::linalg_cross";
  Task task(NK_KERNEL_TAIL_POINTWISE, name, 3);
  describe_or_fail(result, task.operand(0), name);
  describe_or_fail(a, task.operand(1), name);
  describe_or_fail(b, task.operand(2), name);
  auto* p = task.params<nk_tail_pointwise_params>();
  p->op = NK_TAIL_CROSS;
  p->compute = native_dtype(result.scalar_type() == at::kBool ? at::kLong : result.scalar_type());
  p->dim = static_cast<int32_t>(dim);
  launch(result.device().index(), task);
}

// grad_in (input-shaped, zeros) <- the sum of grad's windows over each
// element.  A 0-dim input unfolds to one window of size <= 1: viewed as 1-d.
void unfold_backward_kernel(Tensor& grad_in, const Tensor& grad, int64_t dim, int64_t size, int64_t step) {
  if (grad_in.numel() == 0) return;
  Tensor out = grad_in.dim() == 0 ? grad_in.view({1}) : grad_in;
  Tensor g = grad_in.dim() == 0 ? grad.reshape({1, grad.numel()}) : grad;
  dim = at::maybe_wrap_dim(dim, out.dim());
  const char* name = "aten::unfold_backward";
  Task task(NK_KERNEL_UNFOLD_BACKWARD, name, 2);
  describe_or_fail(out, task.operand(0), name);
  describe_or_fail(g, task.operand(1), name);
  auto* p = task.params<nk_unfold_backward_params>();
  p->dim = static_cast<int32_t>(dim);
  p->size = size;
  p->step = step;
  launch(out.device().index(), task);
}

// ATen's histogramdd_out_cpu_template around NK_KERNEL_HISTOGRAM: input as
// rows of D coordinates, every dim's edges in one tensor, then density's
// normalisation by native ops.
void histogram_launch(const Tensor& self, const std::optional<Tensor>& weight, bool density, Tensor& hist,
                      const at::TensorList& bin_edges, nk_histogram_algorithm algorithm) {
  TORCH_CHECK_NOT_IMPLEMENTED(c10::isFloatingType(self.scalar_type()), "\"histogram_cpu\" not implemented for '",
                              c10::toString(self.scalar_type()), "'");
  const int64_t D = self.size(-1);
  if (D == 0) return;
  TORCH_CHECK(D <= NK_HISTOGRAM_MAX_DIMS, "histogramdd on neuron: at most ", NK_HISTOGRAM_MAX_DIMS,
              " dimensions, got ", D);
  const int64_t M = self.numel() / D;
  Tensor in = self.reshape({M, D});
  std::vector<Tensor> flat;
  for (const Tensor& e : bin_edges) flat.push_back(e.reshape({-1}));
  Tensor edges = at::cat(flat, 0);
  Tensor w = weight.has_value() ? weight->reshape({M}) : Tensor();
  const char* name = "aten::histogram";
  Task task(NK_KERNEL_HISTOGRAM, name, w.defined() ? 4 : 3);
  describe_or_fail(hist, task.operand(0), name);
  describe_or_fail(in, task.operand(1), name);
  describe_or_fail(edges, task.operand(2), name);
  if (w.defined()) describe_or_fail(w, task.operand(3), name);
  auto* p = task.params<nk_histogram_params>();
  p->algorithm = algorithm;
  p->dims = static_cast<int32_t>(D);
  for (int64_t d = 0; d < D; d++) p->n_edges[d] = bin_edges[d].numel();
  launch(hist.device().index(), task);
  if (density) {
    hist.div_(hist.sum());
    for (int64_t d = 0; d < D; d++) {
      std::vector<int64_t> shape(D, 1);
      Tensor lengths = bin_edges[d].diff();
      shape[d] = lengths.numel();
      hist.div_(lengths.reshape(shape));
    }
  }
}

void histogramdd_kernel(const Tensor& self, const std::optional<Tensor>& weight, bool density, Tensor& hist,
                        const at::TensorList& bin_edges) {
  histogram_launch(self, weight, density, hist, bin_edges, NK_HISTOGRAM_BINARY_SEARCH);
}
void histogramdd_linear_kernel(const Tensor& self, const std::optional<Tensor>& weight, bool density,
                               Tensor& hist, const at::TensorList& bin_edges, bool local_search) {
  histogram_launch(self, weight, density, hist, bin_edges,
                   local_search ? NK_HISTOGRAM_LINEAR_LOCAL_SEARCH : NK_HISTOGRAM_LINEAR);
}
// The outer edges from the data: aminmax over the rows (float/double only,
// as ATen's CPU).
void histogram_select_outer_bin_edges(const Tensor& input, const int64_t N, std::vector<double>& leftmost,
                                      std::vector<double>& rightmost) {
  const auto t = input.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(t == at::kFloat || t == at::kDouble, "\"histogramdd\" not implemented for '",
                              c10::toString(t), "'");
  auto [mn, mx] = at::aminmax(input, 0);
  Tensor lo = mn.to(at::kDouble).cpu(), hi = mx.to(at::kDouble).cpu();
  for (int64_t d = 0; d < N; d++) {
    leftmost[d] = lo.data_ptr<double>()[d];
    rightmost[d] = hi.data_ptr<double>()[d];
  }
}

// ATen's CPU default isin: each element against every test element (the
// structured impl takes this path only for few test elements), as native
// comparisons: eq over a broadcast [..., 1] x [m], any along the last dim.
void isin_default_kernel(const Tensor& elements, const Tensor& test_elements, bool invert, const Tensor& out) {
  const auto common = at::result_type(elements, test_elements);
  Tensor e = elements.to(common).unsqueeze(-1);
  Tensor t = test_elements.to(common).reshape({-1});
  Tensor hit = at::eq(e, t).any(-1);
  if (invert) hit = hit.logical_not();
  Tensor(out).copy_(hit);
}

// cdist / pdist: ATen's shared functions hand over contiguous 3-d (cdist:
// batch, rows, coordinates) or 2-d (pdist) tensors; one NK_KERNEL_DIST
// launch each.  float32/float64 only, as ATen's CPU kernels.
void launch_dist(nk_dist_op op, double p, std::initializer_list<Tensor> operands, const char* name) {
  const auto t = operands.begin()->scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(t == at::kFloat || t == at::kDouble, "\"", name + 6,
                              "\" not implemented for '", c10::toString(t), "'");
  Task task(NK_KERNEL_DIST, name, static_cast<int32_t>(operands.size()));
  int k = 0;
  for (const Tensor& x : operands) describe_or_fail(x, task.operand(k++), name);
  auto* prm = task.params<nk_dist_params>();
  prm->op = op;
  prm->p = p;
  launch(operands.begin()->device().index(), task);
}

// (ATen calls these only with every size nonzero; batch dims are flattened
// here whatever their number.)
void cdist_kernel(Tensor& result, const Tensor& x1, const Tensor& x2, const double p) {
  const int64_t r1 = x1.size(-2), m = x1.size(-1), r2 = x2.size(-2), b = x1.numel() / (r1 * m);
  launch_dist(NK_DIST_CDIST, p, {result.view({b, r1, r2}), x1.reshape({b, r1, m}), x2.reshape({b, r2, m})},
              "aten::_cdist_forward");
}
void cdist_backward_kernel(Tensor& grad_x1, const Tensor& grad, const Tensor& x1, const Tensor& x2, const double p,
                           const Tensor& dist) {
  const int64_t r1 = x1.size(-2), m = x1.size(-1), r2 = x2.size(-2), b = x1.numel() / (r1 * m);
  launch_dist(NK_DIST_CDIST_BACKWARD, p,
              {grad_x1.view({b, r1, m}), grad.reshape({b, r1, r2}), x1.reshape({b, r1, m}), x2.reshape({b, r2, m}),
               dist.reshape({b, r1, r2})},
              "aten::_cdist_backward");
}
void pdist_forward_kernel(Tensor& result, const Tensor& self, const double p) {
  launch_dist(NK_DIST_PDIST, p, {result, self}, "aten::_pdist_forward");
}
void pdist_backward_kernel(Tensor& result, const Tensor& grad, const Tensor& self, const double p, const Tensor& dist) {
  launch_dist(NK_DIST_PDIST_BACKWARD, p, {result, grad, self, dist}, "aten::_pdist_backward");
}

}  // namespace stubs

namespace {

// ATen's glu_backward_cpu_out: its checks and iterator (outputs: the two
// halves of grad_input; inputs: the two halves of self, grad_output).
Tensor& glu_backward_out(const Tensor& grad_output, const Tensor& input, int64_t dim, Tensor& grad_input) {
  if (!structured::all_native(grad_output, input, grad_input)) {
    run_on_cpu("aten::glu_backward", "grad_input", {grad_output, input, dim, grad_input});
    return grad_input;
  }
  TORCH_CHECK(input.dim() > 0, "glu does not support 0-dimensional tensors");
  const int64_t wrap_dim = at::maybe_wrap_dim(dim, input.dim());
  const int64_t nIn = input.size(wrap_dim);
  TORCH_CHECK(nIn % 2 == 0, "Halving dimension must be even, but dimension ", wrap_dim, " is size ", nIn);
  grad_input.resize_as_(input);
  const int64_t inputSize = nIn / 2;
  Tensor firstHalf = input.narrow(wrap_dim, 0, inputSize);
  Tensor secondHalf = input.narrow(wrap_dim, inputSize, inputSize);
  Tensor gradInputfirstHalf = grad_input.narrow(wrap_dim, 0, inputSize);
  Tensor gradInputsecondHalf = grad_input.narrow(wrap_dim, inputSize, inputSize);
  auto iter = at::TensorIteratorConfig()
                  .add_output(gradInputfirstHalf)
                  .add_output(gradInputsecondHalf)
                  .add_const_input(firstHalf)
                  .add_const_input(secondHalf)
                  .add_const_input(grad_output)
                  .build();
  launch_tail(iter, NK_TAIL_GLU_BACKWARD, "aten::glu_backward", iter.common_dtype());
  return grad_input;
}

Tensor glu_backward(const Tensor& grad_output, const Tensor& input, int64_t dim) {
  if (!structured::all_native(grad_output, input)) {
    return run_on_cpu("aten::glu_backward", "", {grad_output, input, dim}).toTensor();
  }
  Tensor grad_input = at::empty({0}, input.options());
  return glu_backward_out(grad_output, input, dim, grad_input);
}

// frexp_out returns a tuple: guarded by hand (floating dtypes are all
// native; anything else gets ATen's own error from frexp_out).
std::tuple<Tensor&, Tensor&> frexp_out(const Tensor& self, Tensor& mantissa, Tensor& exponent) {
  return at::native::frexp_out(self, mantissa, exponent);
}

Tensor prelu_kernel(const Tensor& self, const Tensor& weight) {
  if (!structured::all_native(self, weight)) {
    return run_on_cpu("aten::_prelu_kernel", "", {self, weight}).toTensor();
  }
  return at::native::_prelu_kernel(self, weight);
}

std::tuple<Tensor, Tensor> prelu_kernel_backward(const Tensor& grad, const Tensor& self, const Tensor& weight) {
  if (!structured::all_native(grad, self, weight)) {
    const c10::OperatorHandle op =
        c10::Dispatcher::singleton().findSchemaOrThrow("aten::_prelu_kernel_backward", "");
    torch::jit::Stack stack{grad, self, weight};
    cpu_fallback(op, &stack);
    return {stack[0].toTensor(), stack[1].toTensor()};
  }
  return at::native::_prelu_kernel_backward(grad, self, weight);
}

// ZeroTensor on neuron, as _efficientzerotensor_cuda: no storage is read;
// ops on it materialise zeros through the ZeroTensor fallback.
Tensor efficientzerotensor(at::IntArrayRef size, std::optional<at::ScalarType> dtype,
                           std::optional<at::Layout> layout, std::optional<at::Device> device,
                           std::optional<bool> pin_memory) {
  (void)layout;
  (void)pin_memory;
  c10::Device dev = device.value_or(c10::Device(c10::DeviceType::PrivateUse1));
  if (!dev.has_index()) dev = c10::Device(dev.type(), c10::impl::getDeviceGuardImpl(dev.type())->getDevice().index());
  at::native::ZeroTensorAllocator allocator(dev);
  const auto dtype_ = dtype.value_or(c10::get_default_dtype_as_scalartype());
  const auto zero_ks = c10::DispatchKeySet(c10::DispatchKey::PrivateUse1) |
                       c10::DispatchKeySet(c10::DispatchKey::ZeroTensor);
  return at::detail::empty_generic(size, &allocator, zero_ks, dtype_, std::nullopt);
}

// normal with tensor mean and/or std: ATen's templates (checks, shapes,
// normal_(0, std) then mul/add) over the dispatcher's normal_, which is ours.
template <typename RNG>
struct NormalViaDispatch {
  void operator()(Tensor& self, double mean, double std, std::optional<at::Generator> gen) {
    self.normal_(mean, std, std::move(gen));
  }
};
using Gen = NeuronGeneratorImpl;
namespace tpl = at::native::templates;

Tensor normal_tensor_float(const Tensor& mean, double std, std::optional<at::Generator> gen) {
  return tpl::normal_impl<NormalViaDispatch, Gen>(mean, std, std::move(gen));
}
Tensor normal_float_tensor(double mean, const Tensor& std, std::optional<at::Generator> gen) {
  return tpl::normal_impl<NormalViaDispatch, Gen>(mean, std, std::move(gen));
}
Tensor normal_tensor_tensor(const Tensor& mean, const Tensor& std, std::optional<at::Generator> gen) {
  return tpl::normal_impl<NormalViaDispatch, Gen>(mean, std, std::move(gen));
}
Tensor& normal_tensor_float_out(const Tensor& mean, double std, std::optional<at::Generator> gen, Tensor& out) {
  return tpl::normal_out_impl<NormalViaDispatch, Gen>(out, mean, std, std::move(gen));
}
Tensor& normal_float_tensor_out(double mean, const Tensor& std, std::optional<at::Generator> gen, Tensor& out) {
  return tpl::normal_out_impl<NormalViaDispatch, Gen>(out, mean, std, std::move(gen));
}
Tensor& normal_tensor_tensor_out(const Tensor& mean, const Tensor& std, std::optional<at::Generator> gen,
                                 Tensor& out) {
  return tpl::normal_out_impl<NormalViaDispatch, Gen>(out, mean, std, std::move(gen));
}

// ATen's rrelu_with_noise_out_cpu: in training, each x <= 0 is scaled by a
// uniform sample in [lower, upper) that is also stored in noise (1 where
// x > 0); in eval mode leaky_relu with slope (lower + upper) / 2.
Tensor& neuron_rrelu_with_noise_out(const Tensor& self, Tensor& noise, const c10::Scalar& lower,
                             const c10::Scalar& upper, bool training, std::optional<at::Generator> gen,
                             Tensor& output) {
  if (!structured::all_native(self, noise, output)) {
    run_on_cpu("aten::rrelu_with_noise", "out", {self, noise, lower, upper, training, gen, output});
    return output;
  }
  TORCH_CHECK(self.sym_sizes() == noise.sym_sizes(), "noise tensor shape must match self tensor shape. Got self.shape = ",
              self.sym_sizes(), " noise.shape = ", noise.sym_sizes());
  at::native::resize_output(output, self.sizes());
  if (self.numel() == 0) return output;
  if (training) {
    Tensor r = at::empty_like(self, at::MemoryFormat::Contiguous);
    r.uniform_(lower.toDouble(), upper.toDouble(), std::move(gen));
    Tensor slope = at::where(self.le(0), r, at::ones_like(r));
    noise.copy_(slope);
    output.copy_(self.mul(slope));
  } else {
    const c10::Scalar negative_slope = (lower.toDouble() + upper.toDouble()) / 2;
    output.copy_(at::leaky_relu(self, negative_slope));
  }
  return output;
}

Tensor neuron_rrelu_with_noise(const Tensor& self, Tensor& noise, const c10::Scalar& lower, const c10::Scalar& upper,
                        bool training, std::optional<at::Generator> gen) {
  Tensor output = at::empty_like(self, at::MemoryFormat::Contiguous);
  return neuron_rrelu_with_noise_out(self, noise, lower, upper, training, std::move(gen), output);
}

Tensor& neuron_rrelu_with_noise_(Tensor& self, Tensor& noise, const c10::Scalar& lower, const c10::Scalar& upper,
                          bool training, std::optional<at::Generator> gen) {
  Tensor output = neuron_rrelu_with_noise(self, noise, lower, upper, training, std::move(gen));
  self.copy_(output);
  return self;
}

// ATen's repeat_interleave_cpu: checks, the total from the cumulative sum
// (one read back, unless output_size is given, as CUDA), then output j is
// the first i with cumsum[i] > j (searchsorted, right).
Tensor repeat_interleave_tensor(const Tensor& repeats, std::optional<int64_t> output_size) {
  TORCH_CHECK(repeats.dim() == 1, "repeat_interleave only accept 1D vector as repeat");
  TORCH_CHECK(repeats.scalar_type() == at::kLong || repeats.scalar_type() == at::kInt,
              "repeats has to be Long or Int tensor");
  if (repeats.size(0) == 0) return at::empty_like(repeats, at::MemoryFormat::Contiguous);
  Tensor cumsum = repeats.cumsum(0, at::kLong);
  int64_t total;
  if (output_size.has_value()) {
    total = *output_size;
  } else {
    total = cumsum[-1].item<int64_t>();
    TORCH_CHECK(repeats.ge(0).all().item<bool>(), "repeats can not be negative");
  }
  TORCH_CHECK(total >= 0, "repeat_interleave: output size ", total, " is negative");
  Tensor idx = at::arange(total, repeats.options().dtype(at::kLong));
  return at::searchsorted(cumsum, idx, /*out_int32=*/repeats.scalar_type() == at::kInt, /*right=*/true);
}

// ATen's nonzero_static: the first `size` rows of nonzero, padded with
// fill_value.
Tensor& nonzero_static_out(const Tensor& self, int64_t size, int64_t fill_value, Tensor& out) {
  if (!structured::all_native(self)) {
    run_on_cpu("aten::nonzero_static", "out", {self, size, fill_value, out});
    return out;
  }
  TORCH_CHECK(size >= 0, "nonzero_static: 'size' must be an non-negative integer");
  TORCH_CHECK(out.scalar_type() == at::kLong, "nonzero_static: Expected out tensor to have scalar type Long but got scalar type",
              out.scalar_type());
  const int64_t nd = self.dim();
  Tensor nz = at::nonzero(self);
  at::native::resize_output(out, {size, nd});
  const int64_t k = std::min(nz.size(0), size);
  if (k > 0) out.narrow(0, 0, k).copy_(nz.narrow(0, 0, k));
  if (size > k) out.narrow(0, k, size - k).fill_(fill_value);
  return out;
}
Tensor nonzero_static(const Tensor& self, int64_t size, int64_t fill_value) {
  if (!structured::all_native(self)) {
    return run_on_cpu("aten::nonzero_static", "", {self, size, fill_value}).toTensor();
  }
  Tensor out = at::empty({0}, self.options().dtype(at::kLong));
  return nonzero_static_out(self, size, fill_value, out);
}

// ATen's CPU logspace_out: the exponents' start, end and step in the
// output dtype's terms (integral outputs use a float base), the powers on
// the device (NK_KERNEL_LOGSPACE).
Tensor& logspace_out(const c10::Scalar& start, const c10::Scalar& end, int64_t steps, double base, Tensor& result) {
  TORCH_CHECK(steps >= 0, "number of steps must be non-negative");
  if (!is_native_dtype(result.scalar_type())) {
    run_on_cpu("aten::logspace", "out", {start, end, steps, base, result});
    return result;
  }
  if (result.numel() != steps) result.resize_({steps});
  if (steps == 0) return result;
  if (result.dim() != 1 || !result.is_contiguous()) {
    // like ATen CPU: fill a contiguous 1-d buffer, copy it in result's logical order
    Tensor tmp = at::empty({steps}, result.options());
    logspace_out(start, end, steps, base, tmp);
    result.copy_(tmp.view(result.sizes()));
    return result;
  }
  if (steps == 1) {
    result.fill_(std::pow(base, start.to<double>()));
    return result;
  }
  nk_logspace_params prm{};
  prm.steps = steps;
  const auto t = result.scalar_type();
  if (c10::isIntegralType(t, /*includeBool=*/false)) {
    AT_DISPATCH_INTEGRAL_TYPES(t, "logspace_neuron", [&] {
      const scalar_t s = start.to<scalar_t>(), e = end.to<scalar_t>();
      prm.base = static_cast<float>(base);
      prm.start = static_cast<double>(s);
      prm.end = static_cast<double>(e);
      prm.step = static_cast<double>(e - s) / static_cast<double>(steps - 1);
    });
  } else {
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, t, "logspace_cpu", [&] {
      const scalar_t s = start.to<scalar_t>(), e = end.to<scalar_t>();
      prm.base = base;
      prm.start = static_cast<double>(s);
      prm.end = static_cast<double>(e);
      prm.step = static_cast<double>(e - s) / static_cast<double>(steps - 1);
    });
  }
  const char* name = "aten::logspace";
  Task task(NK_KERNEL_LOGSPACE, name, 1);
  describe_or_fail(result, task.operand(0), name);
  *task.params<nk_logspace_params>() = prm;
  launch(result.device().index(), task);
  return result;
}

// ---- embedding_bag: ATen's _embedding_bag_cpu checks, NK_KERNEL_EMBEDDING_BAG ----

using EmbagResult = std::tuple<Tensor, Tensor, Tensor, Tensor>;

EmbagResult embedding_bag_forward(const Tensor& weight, const Tensor& indices_, const Tensor& offsets_,
                                  bool scale_grad_by_freq, int64_t mode, bool sparse,
                                  const std::optional<Tensor>& per_sample_weights, bool include_last_offset,
                                  int64_t padding_idx, const char* schema) {
  if (!structured::all_native(weight, indices_, offsets_, per_sample_weights)) {
    const c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow(schema, "");
    torch::jit::Stack stack{weight, indices_, offsets_, scale_grad_by_freq, mode, sparse, per_sample_weights,
                            include_last_offset, padding_idx};
    cpu_fallback(op, &stack);
    return {stack[0].toTensor(), stack[1].toTensor(), stack[2].toTensor(), stack[3].toTensor()};
  }
  TORCH_CHECK(indices_.dim() == 1 || indices_.dim() == 2, "input has to be a 1D or 2D Tensor, but got Tensor of dimension ",
              indices_.dim());
  if (indices_.dim() == 1) {
    TORCH_CHECK(offsets_.dim() == 1, "offsets has to be a 1D Tensor, but got Tensor of dimension ", offsets_.dim());
  }
  TORCH_CHECK(weight.dim() == 2, "weight has to be a 2D Tensor, but got Tensor of dimension ", weight.dim());
  const auto it = indices_.scalar_type(), ot = offsets_.scalar_type();
  TORCH_CHECK(it == at::kLong || it == at::kInt, "embedding_bag: expected indices to be Long or Int, got ", it);
  TORCH_CHECK(ot == at::kLong || ot == at::kInt, "embedding_bag: expected offsets to be Long or Int, got ", ot);
  TORCH_CHECK(c10::isFloatingType(weight.scalar_type()), "embedding_bag: expected weight to be floating, got ",
              weight.scalar_type());
  TORCH_CHECK(mode >= 0 && mode <= 2, "embedding_bag: mode must be 0 (sum), 1 (mean) or 2 (max), got ", mode);
  Tensor indices = indices_, offsets = offsets_;
  if (indices.dim() == 2) {
    offsets = at::arange(0, indices.numel(), indices.size(1), indices.options());
    indices = indices.reshape({-1});
  }
  if (indices.scalar_type() != offsets.scalar_type()) {
    indices = indices.to(at::kLong);
    offsets = offsets.to(at::kLong);
  }
  Tensor psw;
  if (per_sample_weights.has_value() && per_sample_weights->defined()) {
    psw = *per_sample_weights;
    TORCH_CHECK(mode == 0, "embedding_bag: per_sample_weights only supported with mode='sum'");
    TORCH_CHECK(psw.scalar_type() == weight.scalar_type(), "embedding_bag: expected per_sample_weights to have dtype ",
                weight.scalar_type(), ", got ", psw.scalar_type());
    TORCH_CHECK(psw.dim() == 1, "embedding_bag: per_sample_weights has to be 1D");
    TORCH_CHECK(psw.numel() == indices.numel(), "embedding_bag: expected per_sample_weights.numel() (", psw.numel(),
                " to be the same as indices.numel() (", indices.numel(), ")");
  }
  if (include_last_offset) {
    TORCH_CHECK(offsets.size(0) >= 1, "include_last_offset: number of offset should be at least 1");
  }
  if (offsets.size(0) > 0) {
    Tensor ends = at::stack({offsets[0], offsets[-1]}).to(at::kLong).cpu();
    const int64_t first = ends.data_ptr<int64_t>()[0], last = ends.data_ptr<int64_t>()[1];
    TORCH_CHECK(first == 0, "offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start from "
                "position 0. However, got ", first);
    TORCH_CHECK(last <= indices.size(0), "offsets[-1] can not be greater than input's length ", indices.size(0),
                ", but got offsets[-1] of ", last);
  }
  const int64_t bags = offsets.size(0) - (include_last_offset ? 1 : 0), D = weight.size(1);
  const auto lopt = indices.options().dtype(at::kLong);
  Tensor output = at::empty({bags, D}, weight.options());
  Tensor offset2bag = at::empty({indices.size(0)}, lopt);
  Tensor bag_size = at::empty({bags}, lopt);
  Tensor max_indices = mode == 2 ? at::empty({bags, D}, lopt) : at::zeros({bags}, lopt);
  if (bags > 0 || indices.numel() > 0) {
    const char* name = "aten::_embedding_bag";
    Task task(NK_KERNEL_EMBEDDING_BAG, name, psw.defined() ? 8 : 7);
    int k = 0;
    for (const Tensor& t : {output, offset2bag, bag_size, max_indices, weight, indices, offsets}) {
      describe_or_fail(t, task.operand(k++), name);
    }
    if (psw.defined()) describe_or_fail(psw, task.operand(k++), name);
    auto* p = task.params<nk_embedding_bag_params>();
    p->op = NK_EMBAG_FORWARD;
    p->mode = static_cast<int32_t>(mode);
    p->include_last_offset = include_last_offset;
    p->padding_idx = padding_idx;
    launch(weight.device().index(), task);
  }
  (void)scale_grad_by_freq;
  (void)sparse;
  return {output, offset2bag, bag_size, max_indices};
}

EmbagResult embedding_bag(const Tensor& weight, const Tensor& indices, const Tensor& offsets, bool scale_grad_by_freq,
                          int64_t mode, bool sparse, const std::optional<Tensor>& psw, bool include_last_offset,
                          int64_t padding_idx) {
  return embedding_bag_forward(weight, indices, offsets, scale_grad_by_freq, mode, sparse, psw, include_last_offset,
                               padding_idx, "aten::_embedding_bag");
}
EmbagResult embedding_bag_forward_only(const Tensor& weight, const Tensor& indices, const Tensor& offsets,
                                       bool scale_grad_by_freq, int64_t mode, bool sparse,
                                       const std::optional<Tensor>& psw, bool include_last_offset, int64_t padding_idx) {
  return embedding_bag_forward(weight, indices, offsets, scale_grad_by_freq, mode, sparse, psw, include_last_offset,
                               padding_idx, "aten::_embedding_bag_forward_only");
}

Tensor embedding_bag_dense_backward(const Tensor& grad, const Tensor& indices, const Tensor& offset2bag,
                                    const Tensor& bag_size, const Tensor& maximum_indices, int64_t num_weights,
                                    bool scale_grad_by_freq, int64_t mode, const std::optional<Tensor>& psw_opt,
                                    int64_t padding_idx) {
  if (!structured::all_native(grad, indices, offset2bag, bag_size, maximum_indices, psw_opt)) {
    return run_on_cpu("aten::_embedding_bag_dense_backward", "",
                      {grad, indices, offset2bag, bag_size, maximum_indices, num_weights, scale_grad_by_freq, mode,
                       psw_opt, padding_idx})
        .toTensor();
  }
  Tensor grad_weight = at::empty({num_weights, grad.size(1)}, grad.options());
  if (grad_weight.numel() == 0) return grad_weight;
  const char* name = "aten::_embedding_bag_dense_backward";
  const bool has_psw = psw_opt.has_value() && psw_opt->defined();
  Tensor o2b = offset2bag.to(at::kLong), bs = bag_size.to(at::kLong);
  Tensor mi = mode == 2 ? maximum_indices.to(at::kLong) : at::zeros({grad.size(0), grad.size(1)}, o2b.options());
  Task task(NK_KERNEL_EMBEDDING_BAG, name, has_psw ? 7 : 6);
  int k = 0;
  for (const Tensor& t : {grad_weight, grad, indices, o2b, bs, mi}) describe_or_fail(t, task.operand(k++), name);
  if (has_psw) describe_or_fail(*psw_opt, task.operand(k++), name);
  auto* p = task.params<nk_embedding_bag_params>();
  p->op = NK_EMBAG_DENSE_BACKWARD;
  p->mode = static_cast<int32_t>(mode);
  p->scale_grad_by_freq = scale_grad_by_freq;
  p->padding_idx = padding_idx;
  launch(grad.device().index(), task);
  return grad_weight;
}

// ATen's make_offset2bag: each index's bag from the offsets.
Tensor offset2bag_from(const Tensor& offsets, int64_t n) {
  Tensor o2b = at::zeros({n + 1}, offsets.options().dtype(at::kLong));
  o2b.index_add_(0, offsets.to(at::kLong), at::ones({offsets.size(0)}, o2b.options()));
  o2b[0] -= 1;
  return o2b.cumsum(0).narrow(0, 0, n);
}

Tensor embedding_bag_psw_backward(const Tensor& grad, const Tensor& weight, const Tensor& indices,
                                  const Tensor& offsets, const Tensor& offset2bag, int64_t mode, int64_t padding_idx) {
  if (!structured::all_native(grad, weight, indices, offsets, offset2bag)) {
    return run_on_cpu("aten::_embedding_bag_per_sample_weights_backward", "",
                      {grad, weight, indices, offsets, offset2bag, mode, padding_idx})
        .toTensor();
  }
  TORCH_CHECK(mode == 0, "embedding_bag_backward: per_sample_weights only supported for mode='sum'");
  TORCH_CHECK(grad.dim() == 2 && weight.dim() == 2 && grad.size(1) == weight.size(1),
              "embedding_bag_backward: grad and weight must be 2-D with one embedding size");
  const int64_t n = indices.numel();
  Tensor idx = indices.reshape({-1});
  Tensor o2b = offset2bag.numel() == 0 && n > 0 ? offset2bag_from(offsets, n) : offset2bag.to(at::kLong);
  Tensor out = at::empty({n}, grad.options());
  if (n == 0) return out;
  const char* name = "aten::_embedding_bag_per_sample_weights_backward";
  Task task(NK_KERNEL_EMBEDDING_BAG, name, 5);
  int k = 0;
  for (const Tensor& t : {out, grad, weight, idx, o2b}) describe_or_fail(t, task.operand(k++), name);
  auto* p = task.params<nk_embedding_bag_params>();
  p->op = NK_EMBAG_PSW_BACKWARD;
  p->mode = 0;
  p->padding_idx = padding_idx;
  launch(grad.device().index(), task);
  return out;
}

// histc: floating dtypes are ATen's CPU function (its checks, its bin
// formula, through histogramdd_linear_stub).  Integer dtypes are CUDA's
// (_histc_cuda: ATen's CPU histc is floating-only, and transformers' MoE
// layers count tokens per expert with histc on int32 everywhere but
// cpu/mps): bounds converted to int64, min == max takes the data's range,
// an empty range widens by one each side, the counts have the input's dtype;
// NK_KERNEL_HISTOGRAM's INTEGER mode counts.
using HistcShared = structured::Shared<&at::native::histogram_histc>;
using HistcOutShared = structured::Shared<&at::native::histogram_histc_out>;

Tensor histc_integer(const Tensor& self, int64_t bins, const c10::Scalar& min, const c10::Scalar& max) {
  TORCH_CHECK_NOT_IMPLEMENTED(self.scalar_type() != at::kBool, "\"histc\" not implemented for 'Bool'");
  TORCH_CHECK(bins > 0, "bins must be > 0");
  Tensor out = at::zeros({bins}, self.options());
  int64_t lo = min.to<int64_t>(), hi = max.to<int64_t>();
  if (lo == hi && self.numel() > 0) {
    auto [mn, mx] = at::aminmax(self);
    lo = mn.to(at::kLong).item<int64_t>();
    hi = mx.to(at::kLong).item<int64_t>();
  }
  if (lo == hi) {  // wraps like CUDA's int64 arithmetic, without UB
    lo = static_cast<int64_t>(static_cast<uint64_t>(lo) - 1);
    hi = static_cast<int64_t>(static_cast<uint64_t>(hi) + 1);
  }
  TORCH_CHECK(lo < hi, "max must be larger than min");
  if (self.numel() == 0) return out;
  Tensor edges = at::tensor({lo, hi}, at::TensorOptions().dtype(at::kLong)).to(self.device());
  Tensor in = self.reshape({-1, 1});
  const char* name = "aten::histc";
  Task task(NK_KERNEL_HISTOGRAM, name, 3);
  describe_or_fail(out, task.operand(0), name);
  describe_or_fail(in, task.operand(1), name);
  describe_or_fail(edges, task.operand(2), name);
  auto* p = task.params<nk_histogram_params>();
  p->algorithm = NK_HISTOGRAM_INTEGER;
  p->dims = 1;
  p->n_edges[0] = bins + 1;
  launch(self.device().index(), task);
  return out;
}

Tensor histc(const Tensor& self, int64_t bins, const c10::Scalar& min, const c10::Scalar& max) {
  if (c10::isIntegralType(self.scalar_type(), /*includeBool=*/true)) return histc_integer(self, bins, min, max);
  return HistcShared::call(self, bins, min, max);
}

Tensor& histc_out(const Tensor& self, int64_t bins, const c10::Scalar& min, const c10::Scalar& max, Tensor& out) {
  if (!c10::isIntegralType(self.scalar_type(), /*includeBool=*/true)) {
    return HistcOutShared::call(self, bins, min, max, out);
  }
  Tensor r = histc_integer(self, bins, min, max);
  at::native::resize_output(out, r.sizes());
  out.copy_(r);
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  namespace st = structured;
  using T = const Tensor&;
  using S = const c10::Scalar&;
  st::Structured<at::native::structured_glu_out, T, int64_t>::register_ops(m, "glu", nullptr, "glu.out");
  st::Structured<at::native::structured_renorm_out, T, S, int64_t, S>::register_ops(m, "renorm", "renorm_",
                                                                                   "renorm.out");
  st::Structured<at::native::structured_linalg_cross_out, T, T, int64_t>::register_ops(m, "linalg_cross", nullptr,
                                                                                       "linalg_cross.out");
  m.impl("glu_backward", TORCH_FN(glu_backward));
  m.impl("glu_backward.grad_input", TORCH_FN(glu_backward_out));
  m.impl("frexp.Tensor_out", TORCH_FN(frexp_out));
  m.impl("_prelu_kernel", TORCH_FN(prelu_kernel));
  m.impl("_prelu_kernel_backward", TORCH_FN(prelu_kernel_backward));
  st::Shared<&at::native::unfold_backward>::register_op(m, "unfold_backward");
  st::Shared<&at::native::channel_shuffle>::register_op(m, "channel_shuffle");
  m.impl("_efficientzerotensor", TORCH_FN(efficientzerotensor));
  m.impl("normal.Tensor_float", TORCH_FN(normal_tensor_float));
  m.impl("normal.float_Tensor", TORCH_FN(normal_float_tensor));
  m.impl("normal.Tensor_Tensor", TORCH_FN(normal_tensor_tensor));
  m.impl("normal.Tensor_float_out", TORCH_FN(normal_tensor_float_out));
  m.impl("normal.float_Tensor_out", TORCH_FN(normal_float_tensor_out));
  m.impl("normal.Tensor_Tensor_out", TORCH_FN(normal_tensor_tensor_out));
  m.impl("rrelu_with_noise", TORCH_FN(neuron_rrelu_with_noise));
  m.impl("rrelu_with_noise_", TORCH_FN(neuron_rrelu_with_noise_));
  m.impl("rrelu_with_noise.out", TORCH_FN(neuron_rrelu_with_noise_out));
  st::Structured<at::native::structured_isin_Tensor_Tensor_out, T, T, bool, bool>::register_ops(
      m, "isin.Tensor_Tensor", nullptr, "isin.Tensor_Tensor_out");
  m.impl("repeat_interleave.Tensor", TORCH_FN(repeat_interleave_tensor));
  m.impl("nonzero_static", TORCH_FN(nonzero_static));
  m.impl("nonzero_static.out", TORCH_FN(nonzero_static_out));
  m.impl("logspace.out", TORCH_FN(logspace_out));
  m.impl("_embedding_bag", TORCH_FN(embedding_bag));
  m.impl("_embedding_bag_forward_only", TORCH_FN(embedding_bag_forward_only));
  m.impl("_embedding_bag_backward", TORCH_FN(at::native::_embedding_bag_backward_symint));
  m.impl("_embedding_bag_dense_backward", TORCH_FN(embedding_bag_dense_backward));
  m.impl("_embedding_bag_per_sample_weights_backward", TORCH_FN(embedding_bag_psw_backward));
  st::Shared<&at::native::_cdist_forward>::register_op(m, "_cdist_forward");
  st::Shared<&at::native::_cdist_backward>::register_op(m, "_cdist_backward");
  st::Shared<&at::native::_pdist_forward>::register_op(m, "_pdist_forward");
  st::Shared<&at::native::_pdist_backward>::register_op(m, "_pdist_backward");
  // the histogram family: ATen's CPU functions reach only the three stubs
  HistcShared::name().emplace("histc");  // its CPU fallback's schema
  HistcOutShared::name().emplace("histc.out");
  m.impl("histc", TORCH_FN(histc));
  m.impl("histc.out", TORCH_FN(histc_out));
  using HistBins = std::tuple<Tensor, Tensor> (*)(const Tensor&, const Tensor&, const std::optional<Tensor>&, bool);
  using HistCt = std::tuple<Tensor, Tensor> (*)(const Tensor&, int64_t, std::optional<at::ArrayRef<double>>,
                                                const std::optional<Tensor>&, bool);
  m.impl("histogram.bins_tensor", TORCH_FN(static_cast<HistBins>(&at::native::histogram)));
  m.impl("histogram.bin_ct", TORCH_FN(static_cast<HistCt>(&at::native::histogram)));
  using HistBinsOut = std::tuple<Tensor&, Tensor&> (*)(const Tensor&, const Tensor&, const std::optional<Tensor>&,
                                                        bool, Tensor&, Tensor&);
  using HistCtOut = std::tuple<Tensor&, Tensor&> (*)(const Tensor&, int64_t, std::optional<at::ArrayRef<double>>,
                                                      const std::optional<Tensor>&, bool, Tensor&, Tensor&);
  m.impl("histogram.bins_tensor_out", TORCH_FN(static_cast<HistBinsOut>(&at::native::histogram_out)));
  m.impl("histogram.bin_ct_out", TORCH_FN(static_cast<HistCtOut>(&at::native::histogram_out)));
  m.impl("_histogramdd_bin_edges", TORCH_FN(at::native::histogramdd_bin_edges));
  using DdCts = Tensor (*)(const Tensor&, at::IntArrayRef, std::optional<at::ArrayRef<double>>,
                           const std::optional<Tensor>&, bool);
  using DdTensors = Tensor (*)(const Tensor&, at::TensorList, const std::optional<Tensor>&, bool);
  m.impl("_histogramdd_from_bin_cts", TORCH_FN(static_cast<DdCts>(&at::native::_histogramdd)));
  m.impl("_histogramdd_from_bin_tensors", TORCH_FN(static_cast<DdTensors>(&at::native::_histogramdd)));
}

}  // namespace torch_neuronx

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(glu_stub, &torch_neuronx::stubs::glu_kernel)
REGISTER_PRIVATEUSE1_DISPATCH(prelu_stub, &torch_neuronx::stubs::prelu_kernel)
REGISTER_PRIVATEUSE1_DISPATCH(prelu_backward_stub, &torch_neuronx::stubs::prelu_backward_kernel)
REGISTER_PRIVATEUSE1_DISPATCH(renorm_scale_factor_stub, &torch_neuronx::stubs::renorm_scale_factor_kernel)
REGISTER_PRIVATEUSE1_DISPATCH(frexp_stub, &torch_neuronx::stubs::frexp_kernel)
REGISTER_PRIVATEUSE1_DISPATCH(cross_stub, &torch_neuronx::stubs::cross_kernel)
REGISTER_PRIVATEUSE1_DISPATCH(unfold_backward_stub, &torch_neuronx::stubs::unfold_backward_kernel)
REGISTER_PRIVATEUSE1_DISPATCH(histogramdd_stub, &torch_neuronx::stubs::histogramdd_kernel)
REGISTER_PRIVATEUSE1_DISPATCH(histogramdd_linear_stub, &torch_neuronx::stubs::histogramdd_linear_kernel)
REGISTER_PRIVATEUSE1_DISPATCH(histogram_select_outer_bin_edges_stub,
                              &torch_neuronx::stubs::histogram_select_outer_bin_edges)
REGISTER_PRIVATEUSE1_DISPATCH(isin_default_stub, &torch_neuronx::stubs::isin_default_kernel)
REGISTER_PRIVATEUSE1_DISPATCH(cdist_stub, &torch_neuronx::stubs::cdist_kernel)
REGISTER_PRIVATEUSE1_DISPATCH(cdist_backward_stub, &torch_neuronx::stubs::cdist_backward_kernel)
REGISTER_PRIVATEUSE1_DISPATCH(pdist_forward_stub, &torch_neuronx::stubs::pdist_forward_kernel)
REGISTER_PRIVATEUSE1_DISPATCH(pdist_backward_stub, &torch_neuronx::stubs::pdist_backward_kernel)
}  // namespace at::native
