// ops_pool.cpp — pooling and upsampling: max pool 1d/2d/3d with indices,
// avg pool 1d/2d/3d, adaptive avg/max pool 1d/2d/3d, max_unpool 2d/3d,
// upsample nearest / nearest-exact 1d/2d/3d, linear1d, bilinear2d,
// bicubic2d, trilinear3d; forward and backward.
//
// The CPU impls of these structured ops call their DispatchStubs with kCPU
// hard-coded, so the stubs' PrivateUse1 slots would never be reached: the
// impls here sit on ATen's own meta classes (checks, error messages, output
// shape and memory format are ATen's) and launch NK_KERNEL_POOL /
// NK_KERNEL_POOL_SCATTER / NK_KERNEL_UPSAMPLE(_BACKWARD).  The ops ATen
// does not structure (max_pool3d_with_indices, adaptive avg pool, unpool)
// repeat the CPU templates' checks with their messages.  Every tensor is
// handed to the kernels as a 5-d (N, C, D, H, W) view (unsqueezed dims,
// so channels_last is only strides and nothing is copied).
// 1-d pools and F.max_pool1d/2d reach these through ATen's composites
// (max_pool2d_with_indices, avg_pool2d, _adaptive_avg_pool2d,
// adaptive_max_pool2d); interpolate(mode="area") is _adaptive_avg_pool*.
#include <ATen/TensorUtils.h>
#include <ATen/native/Pool.h>
#include <ATen/native/Resize.h>
#include <ATen/native/UpSample.h>
#include <ATen/ops/adaptive_max_pool2d_backward_meta.h>
#include <ATen/ops/adaptive_max_pool2d_meta.h>
#include <ATen/ops/adaptive_max_pool3d_backward_meta.h>
#include <ATen/ops/adaptive_max_pool3d_meta.h>
#include <ATen/ops/avg_pool2d_backward_meta.h>
#include <ATen/ops/avg_pool2d_meta.h>
#include <ATen/ops/avg_pool3d_backward_meta.h>
#include <ATen/ops/avg_pool3d_meta.h>
#include <ATen/ops/max_pool2d_with_indices_backward_meta.h>
#include <ATen/ops/max_pool2d_with_indices_meta.h>
#include <ATen/ops/upsample_bicubic2d_backward_meta.h>
#include <ATen/ops/upsample_bicubic2d_meta.h>
#include <ATen/ops/upsample_bilinear2d_backward_meta.h>
#include <ATen/ops/upsample_bilinear2d_meta.h>
#include <ATen/ops/upsample_linear1d_backward_meta.h>
#include <ATen/ops/upsample_linear1d_meta.h>
#include <ATen/ops/upsample_nearest1d_backward_meta.h>
#include <ATen/ops/upsample_nearest1d_meta.h>
#include <ATen/ops/upsample_nearest2d_backward_meta.h>
#include <ATen/ops/upsample_nearest2d_meta.h>
#include <ATen/ops/upsample_nearest3d_backward_meta.h>
#include <ATen/ops/upsample_nearest3d_meta.h>
#include <ATen/ops/_upsample_nearest_exact1d_backward_meta.h>
#include <ATen/ops/_upsample_nearest_exact1d_meta.h>
#include <ATen/ops/_upsample_nearest_exact2d_backward_meta.h>
#include <ATen/ops/_upsample_nearest_exact2d_meta.h>
#include <ATen/ops/_upsample_nearest_exact3d_backward_meta.h>
#include <ATen/ops/_upsample_nearest_exact3d_meta.h>
#include <ATen/ops/upsample_trilinear3d_backward_meta.h>
#include <ATen/ops/upsample_trilinear3d_meta.h>
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

using at::IntArrayRef;
using at::Tensor;
using structured::Functional;
using structured::Out;

// ---- shared helpers ---------------------------------------------------------

// t (with nd spatial dims, with or without the batch dim) as (N, C, D, H, W).
Tensor as5d(const Tensor& t, int nd) {
  Tensor v = t;
  if (v.dim() == nd + 1) v = v.unsqueeze(0);
  while (v.dim() < 5) v = v.unsqueeze(2);
  return v;
}

bool is_floating(const Tensor& t) { return at::isFloatingType(t.scalar_type()); }

void check_dtype(bool ok, const char* name, const Tensor& t) {
  TORCH_CHECK_NOT_IMPLEMENTED(ok, "\"", name, "\" not implemented for '", toString(t.scalar_type()), "'");
}

bool pool_int_ok(const Tensor& t) {  // max pool: every real dtype but bool
  return t.scalar_type() != at::kBool;
}

struct Window {
  int64_t k[3] = {1, 1, 1}, s[3] = {1, 1, 1}, p[3] = {0, 0, 0}, d[3] = {1, 1, 1};
};

// ATen's defaults: a single int repeats, an empty stride is the kernel.
Window window_of(int nd, IntArrayRef kernel, IntArrayRef stride, IntArrayRef padding, IntArrayRef dilation) {
  Window w;
  for (int i = 0; i < nd; ++i) {
    const int k = 3 - nd + i;
    w.k[k] = kernel.size() == 1 ? kernel[0] : kernel[i];
    w.s[k] = stride.empty() ? w.k[k] : (stride.size() == 1 ? stride[0] : stride[i]);
    w.p[k] = padding.size() == 1 ? padding[0] : padding[i];
    if (!dilation.empty()) w.d[k] = dilation.size() == 1 ? dilation[0] : dilation[i];
  }
  return w;
}

void fill_window(nk_pool_params* p, const Window& w) {
  for (int k = 0; k < 3; ++k) {
    p->kernel[k] = w.k[k];
    p->stride[k] = w.s[k];
    p->pad[k] = w.p[k];
    p->dilation[k] = w.d[k];
  }
}

// NK_KERNEL_POOL: out (and indices for the max modes) <- pool of in.
void launch_pool(nk_pool_mode mode, int nd, const Tensor& in, const Tensor& out, const Tensor* indices,
                 const Window& w, bool count_include_pad, std::optional<int64_t> divisor, const char* name) {
  if (out.numel() == 0) return;
  const bool is_max = mode == NK_POOL_MAX || mode == NK_POOL_ADAPTIVE_MAX;
  Task task(NK_KERNEL_POOL, name, is_max ? 3 : 2);
  describe_or_fail(as5d(out, nd), task.operand(0), name);
  if (is_max) describe_or_fail(as5d(*indices, nd), task.operand(1), name);
  describe_or_fail(as5d(in, nd), task.operand(is_max ? 2 : 1), name);
  auto* p = task.params<nk_pool_params>();
  p->mode = mode;
  p->count_include_pad = count_include_pad;
  p->divisor_override = divisor.value_or(0);
  p->nd = nd;
  fill_window(p, w);
  launch(out.device().index(), task);
}

// NK_KERNEL_POOL_SCATTER: dst (overwritten) <- scatter of src.
void launch_scatter(nk_pool_mode mode, int nd, const Tensor& dst, const Tensor& src, const Tensor* indices,
                    const Window& w, bool count_include_pad, std::optional<int64_t> divisor, const char* name) {
  if (dst.numel() == 0) return;
  if (src.numel() == 0) {
    const_cast<Tensor&>(dst).zero_();
    return;
  }
  const bool has_idx = indices != nullptr;
  Task task(NK_KERNEL_POOL_SCATTER, name, has_idx ? 3 : 2);
  describe_or_fail(as5d(dst, nd), task.operand(0), name);
  describe_or_fail(as5d(src, nd), task.operand(1), name);
  if (has_idx) describe_or_fail(as5d(*indices, nd), task.operand(2), name);
  auto* p = task.params<nk_pool_params>();
  p->mode = mode;
  p->count_include_pad = count_include_pad;
  p->divisor_override = divisor.value_or(0);
  p->nd = nd;
  fill_window(p, w);
  launch(dst.device().index(), task);
}

// ---- max pool 2d ------------------------------------------------------------------

void max_pool2d_impl(const Tensor& self, IntArrayRef kernel, IntArrayRef stride, IntArrayRef padding,
                     IntArrayRef dilation, const Tensor& out, const Tensor& indices) {
  check_dtype(pool_int_ok(self), "max_pool2d", self);
  launch_pool(NK_POOL_MAX, 2, self, out, &indices, window_of(2, kernel, stride, padding, dilation), false,
              std::nullopt, "aten::max_pool2d_with_indices");
}

std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& self, IntArrayRef kernel, IntArrayRef stride,
                                                   IntArrayRef padding, IntArrayRef dilation, bool ceil_mode) {
  check_dtype(is_native_dtype(self.scalar_type()), "max_pool2d", self);
  Functional<at::meta::structured_max_pool2d_with_indices, 2> op;
  op.meta(self, kernel, stride, padding, dilation, ceil_mode);
  max_pool2d_impl(self, kernel, stride, padding, dilation, op.output(0), op.output(1));
  return {std::move(op.outputs_[0]), std::move(op.outputs_[1])};
}

std::tuple<Tensor&, Tensor&> max_pool2d_with_indices_out(const Tensor& self, IntArrayRef kernel, IntArrayRef stride,
                                                         IntArrayRef padding, IntArrayRef dilation, bool ceil_mode,
                                                         Tensor& out, Tensor& indices) {
  Out<at::meta::structured_max_pool2d_with_indices, 2> op(out, indices);
  op.meta(self, kernel, stride, padding, dilation, ceil_mode);
  max_pool2d_impl(self, kernel, stride, padding, dilation, op.output(0), op.output(1));
  op.copy_back();
  return {out, indices};
}

struct MaxPool2dBackwardOp : at::meta::structured_max_pool2d_with_indices_backward {
  void impl(const Tensor& grad_output, const Tensor& /*self*/, IntArrayRef kernel, IntArrayRef stride,
            IntArrayRef padding, IntArrayRef dilation, bool /*ceil_mode*/, const Tensor& indices,
            const Tensor& grad_input) {
    check_dtype(is_floating(grad_output), "max_pool2d_with_indices_backward", grad_output);
    launch_scatter(NK_POOL_MAX, 2, grad_input, grad_output, &indices, window_of(2, kernel, stride, padding, dilation),
                   false, std::nullopt, "aten::max_pool2d_with_indices_backward");
  }
};

// ---- max pool 3d (not structured in ATen: the CPU template's checks) ---------------

struct Pool3dShape {
  int64_t nbatch, nslices, it, ih, iw, ot, oh, ow;
  Window w;
};

Pool3dShape max_pool3d_check(const Tensor& input, IntArrayRef kernel_size, IntArrayRef stride, IntArrayRef padding,
                             IntArrayRef dilation, bool ceil_mode, const char* fn) {
  TORCH_CHECK(kernel_size.size() == 1 || kernel_size.size() == 3,
              "max_pool3d: kernel_size must either be a single int, or a tuple of three ints")
  TORCH_CHECK(stride.empty() || stride.size() == 1 || stride.size() == 3,
              "max_pool3d: stride must either be omitted, a single int, or a tuple of three ints")
  TORCH_CHECK(padding.size() == 1 || padding.size() == 3,
              "max_pool3d: padding must either be a single int, or a tuple of three ints");
  TORCH_CHECK(dilation.size() == 1 || dilation.size() == 3,
              "max_pool3d: dilation must be either a single int, or a tuple of three ints");
  const auto memory_format = input.suggest_memory_format();
  if (memory_format == at::MemoryFormat::ChannelsLast3d) {
    TORCH_CHECK(input.ndimension() == 5, "non-empty 5D (batch mode) tensor expected for input with channels_last_3d layout");
  } else if (memory_format == at::MemoryFormat::Contiguous) {
    TORCH_CHECK((input.ndimension() == 4 || input.ndimension() == 5),
                "non-empty 4D or 5D (batch mode) tensor expected for input");
  } else {
    TORCH_CHECK(false, "Unsupport memory format. Supports only ChannelsLast3d, Contiguous");
  }
  Pool3dShape s;
  s.w = window_of(3, kernel_size, stride, padding, dilation);
  const int64_t n = input.dim();
  s.nbatch = n == 5 ? input.size(0) : 1;
  s.nslices = input.size(-4);
  s.it = input.size(-3);
  s.ih = input.size(-2);
  s.iw = input.size(-1);
  s.ot = at::native::pooling_output_shape<int64_t>(s.it, s.w.k[0], s.w.p[0], s.w.s[0], s.w.d[0], ceil_mode);
  s.oh = at::native::pooling_output_shape<int64_t>(s.ih, s.w.k[1], s.w.p[1], s.w.s[1], s.w.d[1], ceil_mode);
  s.ow = at::native::pooling_output_shape<int64_t>(s.iw, s.w.k[2], s.w.p[2], s.w.s[2], s.w.d[2], ceil_mode);
  at::native::pool3d_shape_check(input, s.nslices, s.w.k[0], s.w.k[1], s.w.k[2], s.w.s[0], s.w.s[1], s.w.s[2],
                                 s.w.p[0], s.w.p[1], s.w.p[2], s.w.d[0], s.w.d[1], s.w.d[2], s.it, s.ih, s.iw,
                                 s.ot, s.oh, s.ow, fn);
  return s;
}

std::tuple<Tensor&, Tensor&> max_pool3d_with_indices_out(const Tensor& input, IntArrayRef kernel, IntArrayRef stride,
                                                         IntArrayRef padding, IntArrayRef dilation, bool ceil_mode,
                                                         Tensor& output, Tensor& indices) {
  Pool3dShape s = max_pool3d_check(input, kernel, stride, padding, dilation, ceil_mode,
                                   "max_pool3d_with_indices_out_cpu_template()");
  if (!is_native_dtype(input.scalar_type()) || !is_native_dtype(output.scalar_type())) {
    run_on_cpu("aten::max_pool3d_with_indices", "out",
               {input, kernel.vec(), stride.vec(), padding.vec(), dilation.vec(), ceil_mode, output, indices});
    return {output, indices};
  }
  check_dtype(pool_int_ok(input), "max_pool3d_cpu", input);
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "Expected out tensor to have dtype ", input.scalar_type(),
              ", but got ", output.scalar_type(), " instead");
  TORCH_CHECK(indices.scalar_type() == at::kLong, "Expected indices tensor to have dtype Long, but got ",
              indices.scalar_type());
  if (input.dim() == 4) {
    output.resize_({s.nslices, s.ot, s.oh, s.ow});
    indices.resize_({s.nslices, s.ot, s.oh, s.ow});
  } else {
    const auto mf = input.suggest_memory_format();
    output.resize_({s.nbatch, s.nslices, s.ot, s.oh, s.ow}, mf);
    indices.resize_({s.nbatch, s.nslices, s.ot, s.oh, s.ow}, mf);
  }
  launch_pool(NK_POOL_MAX, 3, input, output, &indices, s.w, false, std::nullopt, "aten::max_pool3d_with_indices");
  return {output, indices};
}

std::tuple<Tensor, Tensor> max_pool3d_with_indices(const Tensor& input, IntArrayRef kernel, IntArrayRef stride,
                                                   IntArrayRef padding, IntArrayRef dilation, bool ceil_mode) {
  check_dtype(is_native_dtype(input.scalar_type()), "max_pool3d_cpu", input);
  Tensor out = at::empty({0}, input.options());
  Tensor idx = at::empty({0}, input.options().dtype(at::kLong));
  max_pool3d_with_indices_out(input, kernel, stride, padding, dilation, ceil_mode, out, idx);
  return {out, idx};
}

Tensor& max_pool3d_with_indices_backward_out(const Tensor& grad_output, const Tensor& input, IntArrayRef kernel,
                                             IntArrayRef stride, IntArrayRef padding, IntArrayRef dilation,
                                             bool ceil_mode, const Tensor& indices, Tensor& grad_input) {
  const char* fn = "max_pool3d_with_indices_backward_out_cpu_template()";
  Pool3dShape s = max_pool3d_check(input, kernel, stride, padding, dilation, ceil_mode, fn);
  at::native::max_pool3d_backward_shape_check(input, grad_output, indices, s.nslices, s.w.k[0], s.w.k[1], s.w.k[2],
                                              s.w.s[0], s.w.s[1], s.w.s[2], s.w.p[0], s.w.p[1], s.w.p[2], s.w.d[0],
                                              s.w.d[1], s.w.d[2], s.it, s.ih, s.iw, grad_output.size(-3),
                                              grad_output.size(-2), grad_output.size(-1), fn);
  if (!is_native_dtype(grad_output.scalar_type()) || !is_native_dtype(grad_input.scalar_type())) {
    run_on_cpu("aten::max_pool3d_with_indices_backward", "grad_input",
               {grad_output, input, kernel.vec(), stride.vec(), padding.vec(), dilation.vec(), ceil_mode, indices,
                grad_input});
    return grad_input;
  }
  check_dtype(is_floating(grad_output), "max_pool3d_with_indices_backward", grad_output);
  TORCH_CHECK(indices.scalar_type() == at::kLong, "max_pool3d_with_indices_backward: indices must be int64");
  grad_input.resize_(input.sizes(), input.suggest_memory_format());
  launch_scatter(NK_POOL_MAX, 3, grad_input, grad_output, &indices, s.w, false, std::nullopt,
                 "aten::max_pool3d_with_indices_backward");
  return grad_input;
}

Tensor max_pool3d_with_indices_backward(const Tensor& grad_output, const Tensor& input, IntArrayRef kernel,
                                        IntArrayRef stride, IntArrayRef padding, IntArrayRef dilation,
                                        bool ceil_mode, const Tensor& indices) {
  Tensor grad_input = at::empty({0}, grad_output.options());
  max_pool3d_with_indices_backward_out(grad_output, input, kernel, stride, padding, dilation, ceil_mode, indices,
                                       grad_input);
  return grad_input;
}

// ---- avg pool -------------------------------------------------------------------------

bool avg_ok(const Tensor& t) { return is_floating(t) || t.scalar_type() == at::kLong; }

void avg_pool2d_impl(const Tensor& input, int64_t kH, int64_t kW, int64_t dH, int64_t dW, int64_t padH,
                     int64_t padW, bool count_include_pad, std::optional<int64_t> divisor, const Tensor& out) {
  check_dtype(avg_ok(input), "avg_pool2d", input);
  Window w;
  w.k[1] = kH; w.k[2] = kW; w.s[1] = dH; w.s[2] = dW; w.p[1] = padH; w.p[2] = padW;
  launch_pool(NK_POOL_AVG, 2, input, out, nullptr, w, count_include_pad, divisor, "aten::avg_pool2d");
}

Tensor avg_pool2d(const Tensor& self, IntArrayRef k, IntArrayRef s, IntArrayRef p, bool ceil_mode,
                  bool count_include_pad, std::optional<int64_t> divisor) {
  if (!is_native_dtype(self.scalar_type()))
    return run_on_cpu("aten::avg_pool2d", "", {self, k.vec(), s.vec(), p.vec(), ceil_mode, count_include_pad, divisor}).toTensor();
  Functional<at::meta::structured_avg_pool2d, 1> op;
  auto pre = op.meta(self, k, s, p, ceil_mode, count_include_pad, divisor);
  avg_pool2d_impl(self, pre.kH, pre.kW, pre.dH, pre.dW, pre.padH, pre.padW, count_include_pad, divisor, op.output(0));
  return std::move(op.outputs_[0]);
}

Tensor& avg_pool2d_out(const Tensor& self, IntArrayRef k, IntArrayRef s, IntArrayRef p, bool ceil_mode,
                       bool count_include_pad, std::optional<int64_t> divisor, Tensor& out) {
  if (!is_native_dtype(self.scalar_type()) || !is_native_dtype(out.scalar_type())) {
    run_on_cpu("aten::avg_pool2d", "out", {self, k.vec(), s.vec(), p.vec(), ceil_mode, count_include_pad, divisor, out});
    return out;
  }
  Out<at::meta::structured_avg_pool2d, 1> op(out);
  auto pre = op.meta(self, k, s, p, ceil_mode, count_include_pad, divisor);
  avg_pool2d_impl(self, pre.kH, pre.kW, pre.dH, pre.dW, pre.padH, pre.padW, count_include_pad, divisor, op.output(0));
  op.copy_back();
  return out;
}

template <class Meta, int ND>
struct AvgPoolBackwardOp : Meta {
  void impl(const Tensor& grad_output, const Tensor& /*self*/, IntArrayRef k, IntArrayRef s, IntArrayRef p,
            bool /*ceil_mode*/, bool count_include_pad, std::optional<int64_t> divisor, const Tensor& grad_input) {
    check_dtype(avg_ok(grad_output), ND == 2 ? "avg_pool2d_backward_out_frame" : "avg_pool3d_backward_out_frame",
                grad_output);
    launch_scatter(NK_POOL_AVG, ND, grad_input, grad_output, nullptr, window_of(ND, k, s, p, {}),
                   count_include_pad, divisor, ND == 2 ? "aten::avg_pool2d_backward" : "aten::avg_pool3d_backward");
  }
};

struct AvgPool3dOp : at::meta::structured_avg_pool3d {
  void impl(const Tensor& input, IntArrayRef k, IntArrayRef s, IntArrayRef p, bool /*ceil_mode*/,
            bool count_include_pad, std::optional<int64_t> divisor, const Tensor& out) {
    check_dtype(avg_ok(input), "avg_pool3d_out_frame", input);
    launch_pool(NK_POOL_AVG, 3, input, out, nullptr, window_of(3, k, s, p, {}), count_include_pad, divisor,
                "aten::avg_pool3d");
  }
};

// ---- adaptive avg pool (not structured: the CPU templates' checks) --------------------

template <int ND>
struct AdaptiveAvg {
  static const char* fname() { return ND == 2 ? "adaptive_avg_pool2d" : "adaptive_avg_pool3d"; }
  static Tensor& out(const Tensor& input, IntArrayRef output_size, Tensor& output) {
    TORCH_CHECK(output_size.size() == ND, fname(), ": output_size must be ", ND);
    const int64_t ndim = input.dim();
    if (ND == 2) {
      TORCH_CHECK((ndim == 3 || ndim == 4), "adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got ", input.sizes());
    }
    for (int64_t i = 1; i < ndim; ++i) {
      TORCH_CHECK(input.size(i) > 0, fname(), "(): Expected input to have non-zero size for non-batch dimensions, "
                  "but input has sizes ", input.sizes(), " with dimension ", i, " being empty");
    }
    if (ND == 3) {
      TORCH_CHECK((ndim == 4 || ndim == 5), "adaptive_avg_pool3d(): Expected 4D or 5D tensor, but got ", input.sizes());
    }
    TORCH_CHECK(input.dtype() == output.dtype(), "expected dtype ", input.dtype(), " for `output` but got dtype ",
                output.dtype());
    if (!is_native_dtype(input.scalar_type())) {
      run_on_cpu(ND == 2 ? "aten::adaptive_avg_pool2d" : "aten::adaptive_avg_pool3d", "out",
                 {input, output_size.vec(), output});
      return output;
    }
    check_dtype(is_floating(input), fname(), input);
    std::vector<int64_t> sizes(input.sizes().begin(), input.sizes().end() - ND);
    for (int64_t v : output_size) sizes.push_back(v);
    if (ndim == ND + 2) {
      output.resize_(sizes, input.suggest_memory_format());
    } else {
      output.resize_(sizes);
    }
    launch_pool(NK_POOL_ADAPTIVE_AVG, ND, input, output, nullptr, Window{}, false, std::nullopt,
                ND == 2 ? "aten::_adaptive_avg_pool2d" : "aten::_adaptive_avg_pool3d");
    return output;
  }
  static Tensor functional(const Tensor& input, IntArrayRef output_size) {
    if (!is_native_dtype(input.scalar_type()))
      return run_on_cpu(ND == 2 ? "aten::_adaptive_avg_pool2d" : "aten::_adaptive_avg_pool3d", "",
                        {input, output_size.vec()}).toTensor();
    Tensor output = at::empty({0}, input.options());
    out(input, output_size, output);
    return output;
  }
  static Tensor& backward_out(const Tensor& grad_output, const Tensor& input, Tensor& grad_input) {
    const int64_t ndim = grad_output.dim();
    for (int64_t i = 1; i < ndim; ++i) {
      TORCH_CHECK(grad_output.size(i) > 0,
                  ND == 2 ? "adaptive_avg_pool2d_backward" : "adaptive_avg_pool3d_backward",
                  "(): Expected grad_output to have non-zero size for non-batch dimensions, but grad_output has sizes ",
                  grad_output.sizes(), " with dimension ", i, " being empty");
    }
    TORCH_CHECK((ndim == ND + 1 || ndim == ND + 2), fname(), "_backward(): Expected ", ND + 1, "D or ", ND + 2,
                "D tensor, but got ", grad_output.sizes());
    TORCH_CHECK(input.dtype() == grad_output.dtype(), "expected dtype ", input.dtype(),
                " for `grad_output` but got dtype ", grad_output.dtype());
    TORCH_CHECK(input.dtype() == grad_input.dtype(), "expected dtype ", input.dtype(),
                " for `grad_input` but got dtype ", grad_input.dtype());
    if (!is_native_dtype(input.scalar_type())) {
      run_on_cpu("aten::adaptive_avg_pool3d_backward", "grad_input", {grad_output, input, grad_input});
      return grad_input;
    }
    check_dtype(is_floating(input), ND == 2 ? "adaptive_avg_pool2d_backward_cpu" : "adaptive_avg_pool3d_backward_cpu",
                input);
    grad_input.resize_(input.sizes(), input.suggest_memory_format());
    launch_scatter(NK_POOL_ADAPTIVE_AVG, ND, grad_input, grad_output, nullptr, Window{}, false, std::nullopt,
                   ND == 2 ? "aten::_adaptive_avg_pool2d_backward" : "aten::_adaptive_avg_pool3d_backward");
    return grad_input;
  }
  static Tensor backward(const Tensor& grad_output, const Tensor& input) {
    if (!is_native_dtype(input.scalar_type()))
      return run_on_cpu(ND == 2 ? "aten::_adaptive_avg_pool2d_backward" : "aten::_adaptive_avg_pool3d_backward", "",
                        {grad_output, input}).toTensor();
    Tensor grad_input = at::empty({0}, input.options());
    backward_out(grad_output, input, grad_input);
    return grad_input;
  }
};

// ---- adaptive max pool (structured, two outputs) --------------------------------------

template <class Meta, int ND>
struct AdaptiveMax {
  static const char* name() { return ND == 2 ? "aten::adaptive_max_pool2d" : "aten::adaptive_max_pool3d"; }
  static void impl(const Tensor& input, const Tensor& out, const Tensor& indices) {
    check_dtype(is_floating(input), ND == 2 ? "adaptive_max_pool2d" : "adaptive_max_pool3d_cpu", input);
    launch_pool(NK_POOL_ADAPTIVE_MAX, ND, input, out, &indices, Window{}, false, std::nullopt, name());
  }
  static std::tuple<Tensor, Tensor> functional(const Tensor& input, IntArrayRef output_size) {
    check_dtype(is_native_dtype(input.scalar_type()), ND == 2 ? "adaptive_max_pool2d" : "adaptive_max_pool3d_cpu", input);
    Functional<Meta, 2> op;
    op.meta(input, output_size);
    impl(input, op.output(0), op.output(1));
    return {std::move(op.outputs_[0]), std::move(op.outputs_[1])};
  }
  static std::tuple<Tensor&, Tensor&> out(const Tensor& input, IntArrayRef output_size, Tensor& out,
                                          Tensor& indices) {
    Out<Meta, 2> op(out, indices);
    op.meta(input, output_size);
    impl(input, op.output(0), op.output(1));
    op.copy_back();
    return {out, indices};
  }
};

template <class Meta, int ND>
struct AdaptiveMaxBackwardOp : Meta {
  void impl(const Tensor& grad_output, const Tensor& /*self*/, const Tensor& indices, const Tensor& grad_input) {
    check_dtype(is_floating(grad_output), ND == 2 ? "adaptive_max_pool2d_backward" : "adaptive_max_pool3d_backward",
                grad_output);
    launch_scatter(NK_POOL_ADAPTIVE_MAX, ND, grad_input, grad_output, &indices, Window{}, false, std::nullopt,
                   ND == 2 ? "aten::adaptive_max_pool2d_backward" : "aten::adaptive_max_pool3d_backward");
  }
};

// ---- max_unpool (not structured: the CPU's checks) --------------------------------------

template <int ND>
struct Unpool {
  static Tensor& out(const Tensor& self, const Tensor& indices, IntArrayRef output_size, IntArrayRef stride,
                     IntArrayRef padding, Tensor& output) {
    const char* name = ND == 2 ? "max_unpooling2d_forward_out_cpu()" : "max_unpooling3d_forward_out_cpu()";
    TORCH_CHECK(indices.scalar_type() == at::kLong, "elements in indices should be type int64 but got: ",
                indices.scalar_type());
    if (ND == 2) {
      TORCH_CHECK(output_size.size() == 2, "There should be exactly two elements (height, width) in output_size, but got ",
                  output_size.size(), " elements.");
      TORCH_CHECK((self.dim() == 3 || self.dim() == 4),
                  "Input to max_unpooling2d should be a 3d or 4d Tensor, but got a tensor with ", self.dim(),
                  " dimensions.");
    } else {
      TORCH_CHECK(output_size.size() == 3, "There should be exactly three elements (depth, height, width) in output_size, but got: ",
                  output_size.size(), " elements.");
      TORCH_CHECK(stride.size() == 3, "There should be exactly three elements (depth, height, width) in stride, but got: ",
                  stride.size(), " elements.");
      TORCH_CHECK(padding.size() == 3, "There should be exactly three elements (depth, height, width) in padding, but got: ",
                  padding.size(), " elements.");
      TORCH_CHECK((self.dim() == 4 || self.dim() == 5),
                  "Input to max_unpooling3d should be a 4d or 5d Tensor, but got a tensor with ", self.dim(),
                  " dimensions.");
      TORCH_CHECK(stride[0] > 0 && stride[1] > 0 && stride[2] > 0,
                  "strides should be greater than zero, but got stride: ", stride);
    }
    TORCH_CHECK(self.sizes() == indices.sizes(), "Expected shape of indices to be same as that of the input tensor (",
                self.sizes(), ") but got indices tensor with shape: ", indices.sizes());
    for (int64_t i = 1; i < self.dim(); ++i) {
      TORCH_CHECK(self.size(i) > 0, name, ": Expected input to have non-zero size for non-batch dimensions, but got ",
                  self.sizes(), " with dimension ", i, " being empty.");
    }
    TORCH_CHECK(output.scalar_type() == self.scalar_type(), "Expected out tensor to have dtype ", self.scalar_type(),
                ", but got ", output.scalar_type(), " instead");
    if (!is_native_dtype(self.scalar_type())) {
      if (ND == 2) run_on_cpu("aten::max_unpool2d", "out", {self, indices, output_size.vec(), output});
      else run_on_cpu("aten::max_unpool3d", "out", {self, indices, output_size.vec(), stride.vec(), padding.vec(), output});
      return output;
    }
    check_dtype(pool_int_ok(self), ND == 2 ? "max_unpool2d" : "max_unpool3d", self);
    std::vector<int64_t> sizes(self.sizes().begin(), self.sizes().end() - ND);
    for (int64_t v : output_size) sizes.push_back(v);
    if (self.dim() == ND + 2) {
      output.resize_(sizes, self.suggest_memory_format());
    } else {
      output.resize_(sizes);
    }
    if (output.numel() == 0) return output;
    if (self.numel() == 0) {
      output.zero_();
      return output;
    }
    // src = self (small), dst = output (big); indices index the output plane.
    const char* tname = ND == 2 ? "aten::max_unpool2d" : "aten::max_unpool3d";
    Task task(NK_KERNEL_POOL_SCATTER, tname, 3);
    describe_or_fail(as5d(output, ND), task.operand(0), tname);
    describe_or_fail(as5d(self, ND), task.operand(1), tname);
    describe_or_fail(as5d(indices, ND), task.operand(2), tname);
    auto* p = task.params<nk_pool_params>();
    p->mode = NK_POOL_UNPOOL;
    p->nd = ND;
    launch(output.device().index(), task);
    return output;
  }
  static Tensor& out2(const Tensor& self, const Tensor& indices, IntArrayRef output_size, Tensor& output) {
    return out(self, indices, output_size, {}, {}, output);
  }
  static Tensor functional2(const Tensor& self, const Tensor& indices, IntArrayRef output_size) {
    Tensor output = at::empty({0}, self.options());
    out(self, indices, output_size, {}, {}, output);
    return output;
  }
  static Tensor functional3(const Tensor& self, const Tensor& indices, IntArrayRef output_size, IntArrayRef stride,
                            IntArrayRef padding) {
    Tensor output = at::empty({0}, self.options());
    out(self, indices, output_size, stride, padding, output);
    return output;
  }
};

// ---- upsampling ------------------------------------------------------------------------

// The arguments of one upsample impl, whatever its arity: the first tensor
// (input or grad_output), the last (the output), align_corners and the
// optional scales in order (d, h, w restricted to the op's dims).
struct UpArgs {
  const Tensor* first = nullptr;
  const Tensor* last = nullptr;
  bool align = false;
  std::vector<std::optional<double>> scales;
};
template <class T>
void collect(UpArgs& u, const T& x) {
  if constexpr (std::is_same_v<T, Tensor>) {
    if (!u.first) u.first = &x;
    u.last = &x;
  } else if constexpr (std::is_same_v<T, bool>) {
    u.align = x;
  } else if constexpr (std::is_same_v<T, std::optional<double>>) {
    u.scales.push_back(x);
  }
}

template <class Meta, nk_upsample_mode Mode, int ND, bool Backward>
struct UpsampleOp : Meta {
  template <class... A>
  void impl(const A&... a) {
    UpArgs u;
    (collect(u, a), ...);
    const Tensor& src = *u.first;
    const Tensor& dst = *u.last;
    const bool nearest = Mode == NK_UPSAMPLE_NEAREST || Mode == NK_UPSAMPLE_NEAREST_EXACT;
    const bool ok = is_floating(src) || (nearest && !Backward && src.scalar_type() == at::kByte);
    check_dtype(ok, name(), src);
    if (dst.numel() == 0) return;
    if (src.numel() == 0) {  // backward of an empty output
      const_cast<Tensor&>(dst).zero_();
      return;
    }
    Task task(Backward ? NK_KERNEL_UPSAMPLE_BACKWARD : NK_KERNEL_UPSAMPLE, name(), 2);
    describe_or_fail(as5d(dst, ND), task.operand(0), name());
    describe_or_fail(as5d(src, ND), task.operand(1), name());
    auto* p = task.params<nk_upsample_params>();
    p->mode = Mode;
    p->nd = ND;
    p->align_corners = u.align;
    for (size_t i = 0; i < u.scales.size() && i < ND; ++i) {
      const int k = 3 - ND + static_cast<int>(i);
      p->has_scale[k] = u.scales[i].has_value();
      p->scale[k] = u.scales[i].value_or(0.0);
    }
    launch(dst.device().index(), task);
  }
  static const char* name() {
    static const char* const names[2][4][3] = {
        {{"aten::upsample_nearest1d", "aten::upsample_nearest2d", "aten::upsample_nearest3d"},
         {"aten::_upsample_nearest_exact1d", "aten::_upsample_nearest_exact2d", "aten::_upsample_nearest_exact3d"},
         {"aten::upsample_linear1d", "aten::upsample_bilinear2d", "aten::upsample_trilinear3d"},
         {"aten::upsample_bicubic2d", "aten::upsample_bicubic2d", "aten::upsample_bicubic2d"}},
        {{"aten::upsample_nearest1d_backward", "aten::upsample_nearest2d_backward", "aten::upsample_nearest3d_backward"},
         {"aten::_upsample_nearest_exact1d_backward", "aten::_upsample_nearest_exact2d_backward",
          "aten::_upsample_nearest_exact3d_backward"},
         {"aten::upsample_linear1d_backward", "aten::upsample_bilinear2d_backward", "aten::upsample_trilinear3d_backward"},
         {"aten::upsample_bicubic2d_backward", "aten::upsample_bicubic2d_backward", "aten::upsample_bicubic2d_backward"}}};
    return names[Backward][Mode][ND - 1];
  }
};

using OptD = std::optional<double>;
using Sz = at::ArrayRef<int64_t>;

template <class Op, class... Rest>
void reg(torch::Library& m, const char* functional, const char* out) {
  structured::Structured<Op, const Tensor&, Rest...>::register_ops(m, functional, nullptr, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  // max pool
  m.impl("max_pool2d_with_indices", TORCH_FN(max_pool2d_with_indices));
  m.impl("max_pool2d_with_indices.out", TORCH_FN(max_pool2d_with_indices_out));
  reg<MaxPool2dBackwardOp, const Tensor&, IntArrayRef, IntArrayRef, IntArrayRef, IntArrayRef, bool, const Tensor&>(
      m, "max_pool2d_with_indices_backward", "max_pool2d_with_indices_backward.grad_input");
  m.impl("max_pool3d_with_indices", TORCH_FN(max_pool3d_with_indices));
  m.impl("max_pool3d_with_indices.out", TORCH_FN(max_pool3d_with_indices_out));
  m.impl("max_pool3d_with_indices_backward", TORCH_FN(max_pool3d_with_indices_backward));
  m.impl("max_pool3d_with_indices_backward.grad_input", TORCH_FN(max_pool3d_with_indices_backward_out));
  // avg pool
  m.impl("avg_pool2d", TORCH_FN(avg_pool2d));
  m.impl("avg_pool2d.out", TORCH_FN(avg_pool2d_out));
  reg<AvgPoolBackwardOp<at::meta::structured_avg_pool2d_backward, 2>, const Tensor&, IntArrayRef, IntArrayRef,
      IntArrayRef, bool, bool, std::optional<int64_t>>(m, "avg_pool2d_backward", "avg_pool2d_backward.grad_input");
  reg<AvgPool3dOp, IntArrayRef, IntArrayRef, IntArrayRef, bool, bool, std::optional<int64_t>>(m, "avg_pool3d",
                                                                                               "avg_pool3d.out");
  reg<AvgPoolBackwardOp<at::meta::structured_avg_pool3d_backward, 3>, const Tensor&, IntArrayRef, IntArrayRef,
      IntArrayRef, bool, bool, std::optional<int64_t>>(m, "avg_pool3d_backward", "avg_pool3d_backward.grad_input");
  // adaptive avg pool
  m.impl("_adaptive_avg_pool2d", TORCH_FN(AdaptiveAvg<2>::functional));
  m.impl("adaptive_avg_pool2d.out", TORCH_FN(AdaptiveAvg<2>::out));
  m.impl("_adaptive_avg_pool2d_backward", TORCH_FN(AdaptiveAvg<2>::backward));
  m.impl("_adaptive_avg_pool3d", TORCH_FN(AdaptiveAvg<3>::functional));
  m.impl("adaptive_avg_pool3d.out", TORCH_FN(AdaptiveAvg<3>::out));
  m.impl("_adaptive_avg_pool3d_backward", TORCH_FN(AdaptiveAvg<3>::backward));
  m.impl("adaptive_avg_pool3d_backward.grad_input", TORCH_FN(AdaptiveAvg<3>::backward_out));
  // adaptive max pool
  using AM2 = AdaptiveMax<at::meta::structured_adaptive_max_pool2d, 2>;
  using AM3 = AdaptiveMax<at::meta::structured_adaptive_max_pool3d, 3>;
  m.impl("adaptive_max_pool2d", TORCH_FN(AM2::functional));
  m.impl("adaptive_max_pool2d.out", TORCH_FN(AM2::out));
  m.impl("adaptive_max_pool3d", TORCH_FN(AM3::functional));
  m.impl("adaptive_max_pool3d.out", TORCH_FN(AM3::out));
  reg<AdaptiveMaxBackwardOp<at::meta::structured_adaptive_max_pool2d_backward, 2>, const Tensor&, const Tensor&>(
      m, "adaptive_max_pool2d_backward", "adaptive_max_pool2d_backward.grad_input");
  reg<AdaptiveMaxBackwardOp<at::meta::structured_adaptive_max_pool3d_backward, 3>, const Tensor&, const Tensor&>(
      m, "adaptive_max_pool3d_backward", "adaptive_max_pool3d_backward.grad_input");
  // max_unpool
  m.impl("max_unpool2d", TORCH_FN(Unpool<2>::functional2));
  m.impl("max_unpool2d.out", TORCH_FN(Unpool<2>::out2));
  m.impl("max_unpool3d", TORCH_FN(Unpool<3>::functional3));
  m.impl("max_unpool3d.out", TORCH_FN(Unpool<3>::out));
  // upsample forward
  reg<UpsampleOp<at::meta::structured_upsample_nearest1d, NK_UPSAMPLE_NEAREST, 1, false>, Sz, OptD>(
      m, "upsample_nearest1d", "upsample_nearest1d.out");
  reg<UpsampleOp<at::meta::structured_upsample_nearest2d, NK_UPSAMPLE_NEAREST, 2, false>, Sz, OptD, OptD>(
      m, "upsample_nearest2d", "upsample_nearest2d.out");
  reg<UpsampleOp<at::meta::structured_upsample_nearest3d, NK_UPSAMPLE_NEAREST, 3, false>, Sz, OptD, OptD, OptD>(
      m, "upsample_nearest3d", "upsample_nearest3d.out");
  reg<UpsampleOp<at::meta::structured__upsample_nearest_exact1d, NK_UPSAMPLE_NEAREST_EXACT, 1, false>, Sz, OptD>(
      m, "_upsample_nearest_exact1d", "_upsample_nearest_exact1d.out");
  reg<UpsampleOp<at::meta::structured__upsample_nearest_exact2d, NK_UPSAMPLE_NEAREST_EXACT, 2, false>, Sz, OptD, OptD>(
      m, "_upsample_nearest_exact2d", "_upsample_nearest_exact2d.out");
  reg<UpsampleOp<at::meta::structured__upsample_nearest_exact3d, NK_UPSAMPLE_NEAREST_EXACT, 3, false>, Sz, OptD, OptD,
      OptD>(m, "_upsample_nearest_exact3d", "_upsample_nearest_exact3d.out");
  reg<UpsampleOp<at::meta::structured_upsample_linear1d, NK_UPSAMPLE_LINEAR, 1, false>, Sz, bool, OptD>(
      m, "upsample_linear1d", "upsample_linear1d.out");
  reg<UpsampleOp<at::meta::structured_upsample_bilinear2d, NK_UPSAMPLE_LINEAR, 2, false>, Sz, bool, OptD, OptD>(
      m, "upsample_bilinear2d", "upsample_bilinear2d.out");
  reg<UpsampleOp<at::meta::structured_upsample_trilinear3d, NK_UPSAMPLE_LINEAR, 3, false>, Sz, bool, OptD, OptD, OptD>(
      m, "upsample_trilinear3d", "upsample_trilinear3d.out");
  reg<UpsampleOp<at::meta::structured_upsample_bicubic2d, NK_UPSAMPLE_CUBIC, 2, false>, Sz, bool, OptD, OptD>(
      m, "upsample_bicubic2d", "upsample_bicubic2d.out");
  // upsample backward
  reg<UpsampleOp<at::meta::structured_upsample_nearest1d_backward, NK_UPSAMPLE_NEAREST, 1, true>, Sz, Sz, OptD>(
      m, "upsample_nearest1d_backward", "upsample_nearest1d_backward.grad_input");
  reg<UpsampleOp<at::meta::structured_upsample_nearest2d_backward, NK_UPSAMPLE_NEAREST, 2, true>, Sz, Sz, OptD, OptD>(
      m, "upsample_nearest2d_backward", "upsample_nearest2d_backward.grad_input");
  reg<UpsampleOp<at::meta::structured_upsample_nearest3d_backward, NK_UPSAMPLE_NEAREST, 3, true>, Sz, Sz, OptD, OptD,
      OptD>(m, "upsample_nearest3d_backward", "upsample_nearest3d_backward.grad_input");
  reg<UpsampleOp<at::meta::structured__upsample_nearest_exact1d_backward, NK_UPSAMPLE_NEAREST_EXACT, 1, true>, Sz, Sz,
      OptD>(m, "_upsample_nearest_exact1d_backward", "_upsample_nearest_exact1d_backward.grad_input");
  reg<UpsampleOp<at::meta::structured__upsample_nearest_exact2d_backward, NK_UPSAMPLE_NEAREST_EXACT, 2, true>, Sz, Sz,
      OptD, OptD>(m, "_upsample_nearest_exact2d_backward", "_upsample_nearest_exact2d_backward.grad_input");
  reg<UpsampleOp<at::meta::structured__upsample_nearest_exact3d_backward, NK_UPSAMPLE_NEAREST_EXACT, 3, true>, Sz, Sz,
      OptD, OptD, OptD>(m, "_upsample_nearest_exact3d_backward", "_upsample_nearest_exact3d_backward.grad_input");
  reg<UpsampleOp<at::meta::structured_upsample_linear1d_backward, NK_UPSAMPLE_LINEAR, 1, true>, Sz, Sz, bool, OptD>(
      m, "upsample_linear1d_backward", "upsample_linear1d_backward.grad_input");
  reg<UpsampleOp<at::meta::structured_upsample_bilinear2d_backward, NK_UPSAMPLE_LINEAR, 2, true>, Sz, Sz, bool, OptD,
      OptD>(m, "upsample_bilinear2d_backward", "upsample_bilinear2d_backward.grad_input");
  reg<UpsampleOp<at::meta::structured_upsample_trilinear3d_backward, NK_UPSAMPLE_LINEAR, 3, true>, Sz, Sz, bool, OptD,
      OptD, OptD>(m, "upsample_trilinear3d_backward", "upsample_trilinear3d_backward.grad_input");
  reg<UpsampleOp<at::meta::structured_upsample_bicubic2d_backward, NK_UPSAMPLE_CUBIC, 2, true>, Sz, Sz, bool, OptD,
      OptD>(m, "upsample_bicubic2d_backward", "upsample_bicubic2d_backward.grad_input");
}

}  // namespace torch_neuronx
