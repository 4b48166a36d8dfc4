// ops_conv.cpp — convolution on NK_KERNEL_CONV: conv1d/2d/3d and
// conv_transpose1d/2d/3d forward and backward, and im2col/col2im
// (nn.functional.unfold/fold).
//
// ATen's route for a PrivateUse1 device: conv*d / conv_transpose*d are
// CompositeImplicit over at::convolution -> at::_convolution, which runs
// every shape check (check_shape_forward: the messages CPU and CUDA give)
// and then select_conv_backend picks ConvBackend::Overrideable for an
// unknown device, calling convolution_overrideable; autograd's
// convolution_backward picks the same and calls
// convolution_backward_overrideable.  Those two are all we register for
// the convolutions.  Zero-batch / zero-channel inputs take ATen's Empty
// backend (composites of native ops) before reaching us.
//
// Transposed convolution reuses the kernel's three modes: its forward is
// the input gradient of the convolution it transposes, its input gradient
// is that convolution's forward, its weight gradient the weight gradient
// with input and grad_output swapped.  grad_bias is a native sum.
// Outputs are allocated in the memory format the inputs suggest (channels
// last in, channels last out), as the CPU does.  Dtypes other than the
// float ones (integers: the CPU's own "not implemented" error) go to the
// CPU.
#include <ATen/native/ConvUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/native/im2col_shape_check.h>
#include <ATen/ops/convolution.h>
#include <ATen/ops/convolution_backward.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/sum.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <sstream>
#include <string>

#include "fallback.h"
#include "launch.h"
#include "ops.h"

namespace torch_neuronx {
namespace {

using at::IntArrayRef;
using at::Tensor;

bool conv_dtype(const Tensor& t) {
  const auto s = t.scalar_type();
  return s == at::kFloat || s == at::kDouble || s == at::kHalf || s == at::kBFloat16;
}

void launch_conv(nk_conv_mode mode, int nd, IntArrayRef stride, IntArrayRef padding,
                 IntArrayRef dilation, int64_t groups, IntArrayRef kernel,
                 std::initializer_list<Tensor> ops, const char* name) {
  Task task(NK_KERNEL_CONV, name, static_cast<int32_t>(ops.size()));
  int i = 0;
  c10::DeviceIndex device = 0;
  for (const Tensor& t : ops) {
    describe_or_fail(t, task.operand(i++), name);
    device = t.device().index();
  }
  auto* p = task.params<nk_conv_params>();
  p->mode = mode;
  p->nd = nd;
  p->groups = groups;
  for (int d = 0; d < nd; ++d) {
    p->stride[d] = stride[d];
    p->padding[d] = padding[d];
    p->dilation[d] = dilation[d];
    p->kernel[d] = kernel.empty() ? 1 : kernel[d];
  }
  launch(device, task);
}

void check_same_type(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias) {
  // The CPU's wording.
  TORCH_CHECK(input.scalar_type() == weight.scalar_type(), "expected scalar type ",
              input.scalar_type(), " but found ", weight.scalar_type());
  TORCH_CHECK(!bias || !bias->defined() || input.scalar_type() == bias->scalar_type(),
              "Input type (", input.dtype(), ") and bias type (", bias->dtype(),
              ") should be the same");
}

// The CPU's slow_conv_transpose{2,3}d shape check (1-d runs as 2-d there).
void check_output_padding(int nd, IntArrayRef output_padding, IntArrayRef stride,
                          IntArrayRef dilation) {
  bool ok = true;
  for (int d = 0; d < nd; ++d)
    ok = ok && (output_padding[d] < stride[d] || output_padding[d] < dilation[d]);
  if (ok) return;
  static const char* const names[3] = {"depth", "height", "width"};
  std::ostringstream msg;
  msg << "output padding must be smaller than either stride or dilation, but got";
  const int shown = nd == 1 ? 2 : nd;
  auto part = [&](const char* what, IntArrayRef v, int64_t pad1) {
    for (int d = 0; d < shown; ++d) {
      const int64_t value = nd == 1 ? (d == 0 ? pad1 : v[0]) : v[d];
      msg << (d == 0 && std::string(what) == "output_padding" ? " " : " ") << what << "_"
          << names[3 - shown + d] << ": " << value;
    }
  };
  part("output_padding", output_padding, 0);
  part("stride", stride, 1);
  part("dilation", dilation, 1);
  TORCH_CHECK(false, msg.str());
}

// The memory format of the output and of the input/weight gradients: the one
// ATen predicts for this backend (ConvBackend::Overrideable), which is what
// fake tensors report (torch/_subclasses/fake_impls.py conv(), via
// torch._C._conv_determine_backend_memory_format).  torch.compile allocates
// and checks (assert_size_stride) by that prediction, so an eager result in
// any other layout made compiled graphs with convolutions fail.
at::MemoryFormat conv_format(const Tensor& input, const Tensor& weight) {
  return at::native::_determine_backend_memory_format(input, weight,
                                                     at::native::ConvBackend::Overrideable);
}

Tensor empty_conv(IntArrayRef sizes, const Tensor& like, at::MemoryFormat mf) {
  return at::empty(sizes, like.options().memory_format(mf));
}

Tensor convolution_neuron(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
                          IntArrayRef stride, IntArrayRef padding, IntArrayRef dilation,
                          bool transposed, IntArrayRef output_padding, int64_t groups) {
  if (!conv_dtype(input) || !conv_dtype(weight) || (bias && bias->defined() && !conv_dtype(*bias))) {
    return run_on_cpu("aten::convolution", "",
                      {input, weight, bias, stride.vec(), padding.vec(), dilation.vec(), transposed,
                       output_padding.vec(), groups})
        .toTensor();
  }
  check_same_type(input, weight, bias);
  c10::DeviceGuard guard(input.device());
  const int nd = static_cast<int>(input.dim()) - 2;
  TORCH_CHECK(nd >= 1 && nd <= 3, "convolution on neuron: expected 3-, 4- or 5-d input, got ",
              input.dim(), "-d");
  const auto mf = conv_format(input, weight);
  const bool has_bias = bias && bias->defined();
  if (!transposed) {
    Tensor out = empty_conv(at::native::conv_output_size(input.sizes(), weight.sizes(), padding,
                                                         stride, dilation),
                            input, mf);
    if (out.numel() == 0) return out;
    if (has_bias)
      launch_conv(NK_CONV_FORWARD, nd, stride, padding, dilation, groups, {}, {out, input, weight, *bias},
                  "aten::convolution");
    else
      launch_conv(NK_CONV_FORWARD, nd, stride, padding, dilation, groups, {}, {out, input, weight},
                  "aten::convolution");
    return out;
  }
  check_output_padding(nd, output_padding, stride, dilation);
  Tensor out = empty_conv(at::native::conv_input_size(input.sizes(), weight.sizes(), padding,
                                                      output_padding, stride, dilation, groups),
                          input, mf);
  if (out.numel() == 0) return out;
  launch_conv(NK_CONV_BACKWARD_INPUT, nd, stride, padding, dilation, groups, {}, {out, input, weight},
              "aten::convolution");
  if (has_bias) out.add_(at::native::reshape_bias(out.dim(), *bias));
  return out;
}

std::tuple<Tensor, Tensor, Tensor> convolution_backward_neuron(
    const Tensor& grad_output, const Tensor& input, const Tensor& weight, IntArrayRef stride,
    IntArrayRef padding, IntArrayRef dilation, bool transposed, IntArrayRef output_padding,
    int64_t groups, std::array<bool, 3> mask) {
  if (!conv_dtype(input) || !conv_dtype(weight) || !conv_dtype(grad_output)) {
    // Not reached by float autograd; the CPU computes what it can (copies
    // through the CPU, as the fallback would).
    std::vector<int64_t> bias_sizes{weight.size(transposed ? 1 : 0) * (transposed ? groups : 1)};
    auto r = at::convolution_backward(grad_output.cpu(), input.cpu(), weight.cpu(), bias_sizes,
                                      stride, padding, dilation, transposed, output_padding, groups,
                                      mask);
    auto back = [&](const Tensor& t) { return t.defined() ? t.to(input.device()) : t; };
    return {back(std::get<0>(r)), back(std::get<1>(r)), back(std::get<2>(r))};
  }
  TORCH_CHECK(grad_output.scalar_type() == input.scalar_type(),
              "convolution_backward on neuron: grad_output dtype ", grad_output.scalar_type(),
              " differs from the input's ", input.scalar_type());
  check_same_type(input, weight, std::nullopt);
  c10::DeviceGuard guard(input.device());
  const int nd = static_cast<int>(input.dim()) - 2;
  const auto mf = conv_format(input, weight);
  Tensor gi, gw, gb;
  if (mask[0]) {
    gi = empty_conv(input.sizes(), input, mf);
    if (gi.numel() != 0) {
      if (!transposed)
        launch_conv(NK_CONV_BACKWARD_INPUT, nd, stride, padding, dilation, groups, {},
                    {gi, grad_output, weight}, "aten::convolution_backward");
      else
        launch_conv(NK_CONV_FORWARD, nd, stride, padding, dilation, groups, {},
                    {gi, grad_output, weight}, "aten::convolution_backward");
    }
  }
  if (mask[1]) {
    gw = empty_conv(weight.sizes(), weight, mf);
    if (gw.numel() != 0) {
      if (!transposed)
        launch_conv(NK_CONV_BACKWARD_WEIGHT, nd, stride, padding, dilation, groups, {},
                    {gw, grad_output, input}, "aten::convolution_backward");
      else
        launch_conv(NK_CONV_BACKWARD_WEIGHT, nd, stride, padding, dilation, groups, {},
                    {gw, input, grad_output}, "aten::convolution_backward");
    }
  }
  if (mask[2]) {
    std::vector<int64_t> dims{0};
    for (int64_t d = 2; d < grad_output.dim(); ++d) dims.push_back(d);
    gb = at::sum(grad_output, dims);
  }
  return {gi, gw, gb};
}

// ---------------------------------------------------------------- im2col

void check_pair(IntArrayRef a, const char* what) {
  TORCH_CHECK(a.size() == 2, "It is expected ", what, " equals to 2, but got size ", a.size());
}

Tensor& im2col_out_neuron(const Tensor& input_, IntArrayRef kernel_size, IntArrayRef dilation,
                          IntArrayRef padding, IntArrayRef stride, Tensor& output) {
  check_pair(kernel_size, "kernel_size");
  check_pair(dilation, "dilation");
  check_pair(padding, "padding");
  check_pair(stride, "stride");
  at::native::im2col_shape_check(input_, Tensor(), kernel_size[0], kernel_size[1], dilation[0],
                                 dilation[1], padding[0], padding[1], stride[0], stride[1]);
  Tensor input = input_;
  const bool batched = input.dim() != 3;
  if (!batched) input = input.unsqueeze(0);
  const int64_t n = input.size(0), c = input.size(1), h = input.size(2), w = input.size(3);
  const int64_t oh = (h + 2 * padding[0] - (dilation[0] * (kernel_size[0] - 1) + 1)) / stride[0] + 1;
  const int64_t ow = (w + 2 * padding[1] - (dilation[1] * (kernel_size[1] - 1) + 1)) / stride[1] + 1;
  const int64_t planes = c * kernel_size[0] * kernel_size[1], length = oh * ow;
  if (!conv_dtype(input) || input.scalar_type() != output.scalar_type()) {
    Tensor r = run_on_cpu("aten::im2col", "",
                          {input_, kernel_size.vec(), dilation.vec(), padding.vec(), stride.vec()})
                   .toTensor();
    at::native::resize_output(output, r.sizes());
    copy_on_device(output, r);
    return output;
  }
  at::native::resize_output(output, {n, planes, length});
  c10::DeviceGuard guard(input.device());
  if (output.numel() != 0)
    launch_conv(NK_CONV_IM2COL, 2, stride, padding, dilation, 1, kernel_size, {output, input},
                "aten::im2col");
  if (!batched) output.squeeze_(0);
  return output;
}

Tensor im2col_neuron(const Tensor& input, IntArrayRef kernel_size, IntArrayRef dilation,
                     IntArrayRef padding, IntArrayRef stride) {
  Tensor out = at::empty({0}, input.options());
  im2col_out_neuron(input, kernel_size, dilation, padding, stride, out);
  return out;
}

Tensor& col2im_out_neuron(const Tensor& input_, IntArrayRef output_size, IntArrayRef kernel_size,
                          IntArrayRef dilation, IntArrayRef padding, IntArrayRef stride,
                          Tensor& output) {
  check_pair(output_size, "output_size");
  check_pair(kernel_size, "kernel_size");
  check_pair(dilation, "dilation");
  check_pair(padding, "padding");
  check_pair(stride, "stride");
  at::native::col2im_shape_check(input_, Tensor(), output_size[0], output_size[1], kernel_size[0],
                                 kernel_size[1], dilation[0], dilation[1], padding[0], padding[1],
                                 stride[0], stride[1]);
  Tensor input = input_;
  const bool batched = input.dim() != 2;
  if (!batched) input = input.unsqueeze(0);
  const int64_t n = input.size(0);
  const int64_t c = input.size(1) / (kernel_size[0] * kernel_size[1]);
  if (!conv_dtype(input) || input.scalar_type() != output.scalar_type()) {
    Tensor r = run_on_cpu("aten::col2im", "",
                          {input_, output_size.vec(), kernel_size.vec(), dilation.vec(),
                           padding.vec(), stride.vec()})
                   .toTensor();
    at::native::resize_output(output, r.sizes());
    copy_on_device(output, r);
    return output;
  }
  at::native::resize_output(output, {n, c, output_size[0], output_size[1]});
  c10::DeviceGuard guard(input.device());
  if (output.numel() != 0)
    launch_conv(NK_CONV_COL2IM, 2, stride, padding, dilation, 1, kernel_size, {output, input},
                "aten::col2im");
  if (!batched) output.squeeze_(0);
  return output;
}

Tensor col2im_neuron(const Tensor& input, IntArrayRef output_size, IntArrayRef kernel_size,
                     IntArrayRef dilation, IntArrayRef padding, IntArrayRef stride) {
  Tensor out = at::empty({0}, input.options());
  col2im_out_neuron(input, output_size, kernel_size, dilation, padding, stride, out);
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_overrideable", TORCH_FN(convolution_neuron));
  m.impl("convolution_backward_overrideable", TORCH_FN(convolution_backward_neuron));
  m.impl("im2col", TORCH_FN(im2col_neuron));
  m.impl("im2col.out", TORCH_FN(im2col_out_neuron));
  m.impl("col2im", TORCH_FN(col2im_neuron));
  m.impl("col2im.out", TORCH_FN(col2im_out_neuron));
}

}  // namespace torch_neuronx
