// ops_optim.cpp — multi-tensor ops on neuron: torch's _foreach_* ops (what
// torch.optim's foreach=True, clip_grad_norm_/clip_grad_value_ and
// GradScaler use), the fused optimizer steps (_fused_adam_, _fused_adamw_,
// _fused_sgd_, _fused_adagrad_, every overload) and GradScaler's
// _amp_foreach_non_finite_check_and_unscale_ / _amp_update_scale_.
//
// How:
//  - A whole list is ONE launch of NK_KERNEL_FOREACH / NK_KERNEL_FUSED_OPTIM
//    (kernels/src/optim/optim.c).  A task has at most NRT_MAX_OPERANDS (8) operand
//    descriptors, so the tensors travel as a table of nk_tensor_set rows in
//    pinned host memory from the PrivateUse1 CachingHostAllocator; after the
//    launch an event is recorded for the block (record_event), so the
//    allocator does not hand it out again before the task has run, exactly
//    as it does for an asynchronous copy from pinned memory.
//  - Fast route = CUDA's: ATen's can_use_fast_route (same device and dtype,
//    strided, non-overlapping and dense, same sizes and strides per row,
//    scalars that do not promote), plus: neuron tensors of a floating dtype
//    (float16/bfloat16/float32/float64).  Everything else calls ATen's
//    foreach_tensor_*_slow, which runs our per-tensor native ops (integers,
//    complex via their fallback, mixed dtypes/devices, overlapping views).
//    Errors are ATen's: check_foreach_api_restrictions runs first.
//  - Tensor scalars (add.Tensor, mul.Tensor, the amp inv_scale) on the device
//    are read by the kernel in stream order; CPU ones are read here.  The
//    fused steps read state_steps, a device lr, grad_scale and found_inf in
//    the kernel too, so an optimizer step never synchronises.
//  - Fused steps whose lists the fast route does not take go to the CPU
//    fallback (torch.optim groups tensors by device and dtype, so a real
//    optimizer never gets there).
#include <ATen/core/CachingHostAllocator.h>
#include <ATen/native/ForeachUtils.h>
#include <ATen/ops/_foreach_abs_native.h>
#include <ATen/ops/_foreach_add_native.h>
#include <ATen/ops/_foreach_addcdiv_native.h>
#include <ATen/ops/_foreach_addcmul_native.h>
#include <ATen/ops/_foreach_ceil_native.h>
#include <ATen/ops/_foreach_clamp_max_native.h>
#include <ATen/ops/_foreach_clamp_min_native.h>
#include <ATen/ops/_foreach_copy_native.h>
#include <ATen/ops/_foreach_cos_native.h>
#include <ATen/ops/_foreach_div_native.h>
#include <ATen/ops/_foreach_erf_native.h>
#include <ATen/ops/_foreach_erfc_native.h>
#include <ATen/ops/_foreach_exp_native.h>
#include <ATen/ops/_foreach_expm1_native.h>
#include <ATen/ops/_foreach_floor_native.h>
#include <ATen/ops/_foreach_frac_native.h>
#include <ATen/ops/_foreach_lerp_native.h>
#include <ATen/ops/_foreach_log10_native.h>
#include <ATen/ops/_foreach_log1p_native.h>
#include <ATen/ops/_foreach_log2_native.h>
#include <ATen/ops/_foreach_log_native.h>
#include <ATen/ops/_foreach_max_native.h>
#include <ATen/ops/_foreach_maximum_native.h>
#include <ATen/ops/_foreach_minimum_native.h>
#include <ATen/ops/_foreach_mul_native.h>
#include <ATen/ops/_foreach_neg_native.h>
#include <ATen/ops/_foreach_norm_native.h>
#include <ATen/ops/_foreach_pow_native.h>
#include <ATen/ops/_foreach_reciprocal_native.h>
#include <ATen/ops/_foreach_round_native.h>
#include <ATen/ops/_foreach_rsqrt_native.h>
#include <ATen/ops/_foreach_sigmoid_native.h>
#include <ATen/ops/_foreach_sign_native.h>
#include <ATen/ops/_foreach_sin_native.h>
#include <ATen/ops/_foreach_sqrt_native.h>
#include <ATen/ops/_foreach_sub_native.h>
#include <ATen/ops/_foreach_tanh_native.h>
#include <ATen/ops/_foreach_trunc_native.h>
#include <ATen/ops/_foreach_zero_native.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "fallback.h"
#include "launch.h"
#include "neuron_stream.h"
#include "ops.h"

namespace torch_neuronx {
namespace {

using at::Tensor;
using at::TensorList;
using c10::Scalar;
using TensorVec = std::vector<Tensor>;

bool is_fast_dtype(c10::ScalarType t) {
  return t == at::kHalf || t == at::kBFloat16 || t == at::kFloat || t == at::kDouble;
}

// CUDA's can_use_fast_route, for neuron tensors of a floating dtype.
bool fast_route(at::ArrayRef<TensorList> lists, at::ArrayRef<Scalar> scalars = {},
                bool promotes = false) {
  const Tensor& t0 = lists[0][0];
  if (!t0.is_privateuseone() || !is_fast_dtype(t0.scalar_type())) return false;
  for (const Scalar& s : scalars)
    if (s.isComplex()) return false;
  return at::native::can_use_fast_route(lists, scalars, promotes);
}

// ---- the table ---------------------------------------------------------------

// The scalar each row uses.
struct RowScalar {
  int kind = NK_FOREACH_SCALAR_VALUE;
  double value = 0;
  std::vector<double> list;  // NK_FOREACH_SCALAR_LIST
  Tensor tensor;             // NK_FOREACH_SCALAR_TENSOR: a device element

  static RowScalar of(const Scalar& s) {
    RowScalar r;
    r.value = s.toDouble();
    return r;
  }
  static RowScalar of(at::ArrayRef<Scalar> s) {
    RowScalar r;
    r.kind = NK_FOREACH_SCALAR_LIST;
    r.list.reserve(s.size());
    for (const Scalar& x : s) r.list.push_back(x.toDouble());
    return r;
  }
};

// Lists by slot; `numel_slot` is the list whose tensors give each row's size.
struct Lists {
  TensorList slot[NK_FOREACH_SLOTS];
  bool used[NK_FOREACH_SLOTS] = {};
  int numel_slot = 1;
  Lists& set(int k, TensorList l) {
    slot[k] = l;
    used[k] = true;
    return *this;
  }
};

int64_t blocks_of(int64_t numel) { return (numel + NK_FOREACH_BLOCK - 1) / NK_FOREACH_BLOCK; }

// Writes the table, launches `task` (its params already filled except the
// table fields, which `fill` sets), and keeps the table until the task ran.
// scratch: add one double per block after the rows (reductions, found_inf).
template <typename Params>
void launch_lists(Task& task, const Lists& lists, const RowScalar* sc, bool scratch) {
  const TensorList rows = lists.slot[lists.numel_slot];
  const int64_t n = static_cast<int64_t>(rows.size());
  int64_t n_blocks = 0, biggest = 0;
  for (int64_t i = 0; i < n; i++) {
    n_blocks += blocks_of(rows[i].numel());
    if (rows[i].numel() > rows[biggest].numel()) biggest = i;
  }
  const size_t bytes = static_cast<size_t>(n) * sizeof(nk_tensor_set) +
                       (scratch ? static_cast<size_t>(n_blocks) * sizeof(double) : 0);
  at::HostAllocator* host = at::getHostAllocator(at::kPrivateUse1);
  at::DataPtr mem = host->allocate(bytes);
  auto* sets = static_cast<nk_tensor_set*>(mem.get());
  int64_t first = 0;
  for (int64_t i = 0; i < n; i++) {
    nk_tensor_set& s = sets[i];
    for (int k = 0; k < NK_FOREACH_SLOTS; k++)
      s.data[k] = lists.used[k] ? lists.slot[k][i].data_ptr() : nullptr;
    s.numel = rows[i].numel();
    s.first_block = first;
    s.scalar = (sc && sc->kind == NK_FOREACH_SCALAR_LIST) ? sc->list[i] : 0.0;
    first += blocks_of(s.numel);
  }
  Params* p = task.params<Params>();
  p->sets = sets;
  p->n_tensors = n;
  p->n_blocks = n_blocks;
  // operand 0: the table; operand 1: the largest tensor (the work's size)
  nrt_operand* t = task.operand(0);
  t->data = mem.get();
  t->dtype = NRT_UINT8;
  t->ndim = 1;
  t->sizes[0] = static_cast<int64_t>(bytes);
  t->strides[0] = 1;
  const Tensor& big = rows[biggest];
  nrt_operand* w = task.operand(1);
  w->dtype = native_dtype(big.scalar_type());
  w->ndim = 1;
  w->sizes[0] = big.numel();
  w->strides[0] = static_cast<int64_t>(big.element_size());
  w->data = big.numel() > 0 ? big.data_ptr() : nullptr;
  const c10::DeviceIndex dev = big.device().index();
  launch(dev, task);
  host->record_event(mem.get(), mem.get_context(), to_c10_stream(current_stream(dev)));
}

// The task's name by op: the profiler's device task and adaptive eager's
// group names (in the order of nk_foreach_op).
constexpr const char* kForeachNames[] = {
    "aten::_foreach_add",
    "aten::_foreach_sub",
    "aten::_foreach_mul",
    "aten::_foreach_div",
    "aten::_foreach_maximum",
    "aten::_foreach_minimum",
    "aten::_foreach_pow",
    "aten::_foreach_pow",
    "aten::_foreach_addcmul",
    "aten::_foreach_addcdiv",
    "aten::_foreach_lerp",
    "aten::_foreach_copy",
    "aten::_foreach_zero",
    "aten::_foreach_neg",
    "aten::_foreach_abs",
    "aten::_foreach_sqrt",
    "aten::_foreach_rsqrt",
    "aten::_foreach_exp",
    "aten::_foreach_expm1",
    "aten::_foreach_log",
    "aten::_foreach_log1p",
    "aten::_foreach_log2",
    "aten::_foreach_log10",
    "aten::_foreach_reciprocal",
    "aten::_foreach_sign",
    "aten::_foreach_sigmoid",
    "aten::_foreach_tanh",
    "aten::_foreach_sin",
    "aten::_foreach_cos",
    "aten::_foreach_ceil",
    "aten::_foreach_floor",
    "aten::_foreach_round",
    "aten::_foreach_trunc",
    "aten::_foreach_frac",
    "aten::_foreach_erf",
    "aten::_foreach_erfc",
    "aten::_foreach_norm",
    "aten::_foreach_max",
    "aten::_amp_foreach_non_finite_check_and_unscale"};
static_assert(sizeof kForeachNames / sizeof kForeachNames[0] == NK_FOREACH_OP_COUNT,
              "one name per nk_foreach_op");

// One NK_KERNEL_FOREACH launch.
void foreach_launch(int op, const Lists& lists, const RowScalar& sc, double alpha, int b_is_list,
                    void* flag = nullptr) {
  Task task(NK_KERNEL_FOREACH, kForeachNames[op], 2);
  auto* p = task.params<nk_foreach_params>();
  p->op = op;
  p->b_is_list = b_is_list;
  for (int k = 0; k < NK_FOREACH_SLOTS; k++)
    p->dtype[k] = lists.used[k] ? native_dtype(lists.slot[k][0].scalar_type()) : NRT_FLOAT32;
  p->scalar_kind = sc.kind;
  if (sc.kind == NK_FOREACH_SCALAR_TENSOR) {
    p->scalar_ptr = sc.tensor.data_ptr();
    p->scalar_dtype = native_dtype(sc.tensor.scalar_type());
  }
  p->flag_ptr = flag;
  p->alpha = alpha;
  p->scalar = sc.value;
  const bool scratch = op == NK_FOREACH_NORM || op == NK_FOREACH_MAX || op == NK_FOREACH_UNSCALE;
  launch_lists<nk_foreach_params>(task, lists, &sc, scratch);
}

TensorVec outputs_like(TensorList self) {
  TensorVec out;
  out.reserve(self.size());
  for (const Tensor& t : self) out.push_back(at::empty_like(t));
  return out;
}

// out (or self in place) <- op(self, b)
TensorVec binary(int op, TensorList self, const TensorList* other, const RowScalar& sc,
                 double alpha, bool inplace) {
  TensorVec out;
  if (!inplace) out = outputs_like(self);
  Lists l;
  l.set(0, inplace ? self : TensorList(out)).set(1, self);
  if (other) l.set(2, *other);
  foreach_launch(op, l, sc, alpha, other ? 1 : 0);
  return out;
}

// ---- binary ops: Scalar, List, ScalarList, Tensor overloads -----------------

using SlowScalar = TensorVec (*)(TensorList, const Scalar&);
using SlowScalar_ = void (*)(TensorList, const Scalar&);
using SlowList = TensorVec (*)(TensorList, TensorList);
using SlowList_ = void (*)(TensorList, TensorList);
using SlowListAlpha = TensorVec (*)(TensorList, TensorList, const Scalar&);
using SlowListAlpha_ = void (*)(TensorList, TensorList, const Scalar&);
using SlowScalarList = TensorVec (*)(TensorList, at::ArrayRef<Scalar>);
using SlowScalarList_ = void (*)(TensorList, at::ArrayRef<Scalar>);
using SlowTensor = TensorVec (*)(TensorList, const Tensor&);
using SlowTensor_ = void (*)(TensorList, const Tensor&);
using SlowTensorAlpha = TensorVec (*)(TensorList, const Tensor&, const Scalar&);
using SlowTensorAlpha_ = void (*)(TensorList, const Tensor&, const Scalar&);

constexpr bool promotes(int op) { return op == NK_FOREACH_DIV || op == NK_FOREACH_POW; }

template <int OP, SlowScalar SLOW>
TensorVec scalar_op(TensorList self, const Scalar& s) {
  at::native::check_foreach_api_restrictions(self);
  if (!fast_route({self}, s, promotes(OP))) return SLOW(self, s);
  return binary(OP, self, nullptr, RowScalar::of(s), 1.0, false);
}
template <int OP, SlowScalar_ SLOW>
void scalar_op_(TensorList self, const Scalar& s) {
  at::native::check_foreach_api_restrictions(self);
  if (!fast_route({self}, s, promotes(OP))) return SLOW(self, s);
  binary(OP, self, nullptr, RowScalar::of(s), 1.0, true);
}

template <int OP, SlowList SLOW>
TensorVec list_op(TensorList self, TensorList other) {
  at::native::check_foreach_api_restrictions(self, other);
  if (!fast_route({self, other}, {}, promotes(OP))) return SLOW(self, other);
  return binary(OP, self, &other, RowScalar(), 1.0, false);
}
template <int OP, SlowList_ SLOW>
void list_op_(TensorList self, TensorList other) {
  at::native::check_foreach_api_restrictions(self, other);
  if (!fast_route({self, other}, {}, promotes(OP))) return SLOW(self, other);
  binary(OP, self, &other, RowScalar(), 1.0, true);
}
template <int OP, SlowListAlpha SLOW>
TensorVec list_alpha_op(TensorList self, TensorList other, const Scalar& alpha) {
  at::native::check_foreach_api_restrictions(self, other);
  if (!fast_route({self, other}, alpha)) return SLOW(self, other, alpha);
  return binary(OP, self, &other, RowScalar(), alpha.toDouble(), false);
}
template <int OP, SlowListAlpha_ SLOW>
void list_alpha_op_(TensorList self, TensorList other, const Scalar& alpha) {
  at::native::check_foreach_api_restrictions(self, other);
  if (!fast_route({self, other}, alpha)) return SLOW(self, other, alpha);
  binary(OP, self, &other, RowScalar(), alpha.toDouble(), true);
}

template <int OP, SlowScalarList SLOW>
TensorVec scalarlist_op(TensorList self, at::ArrayRef<Scalar> s) {
  at::native::check_foreach_api_restrictions(self, s);
  if (!fast_route({self}, s, promotes(OP))) return SLOW(self, s);
  return binary(OP, self, nullptr, RowScalar::of(s), 1.0, false);
}
template <int OP, SlowScalarList_ SLOW>
void scalarlist_op_(TensorList self, at::ArrayRef<Scalar> s) {
  at::native::check_foreach_api_restrictions(self, s);
  if (!fast_route({self}, s, promotes(OP))) return SLOW(self, s);
  binary(OP, self, nullptr, RowScalar::of(s), 1.0, true);
}

// A 0-dim/1-element `other`: read here when on the CPU, by the kernel when
// on the list's device.  False: use the slow path.
bool tensor_scalar(TensorList self, const Tensor& other, RowScalar* out) {
  TORCH_CHECK(other.dim() == 0 && other.numel() == 1, "scalar tensor expected to be 0 dim but it has ",
              other.dim(), " dimensions and ", other.numel(), " elements.");
  if (other.is_complex() || !fast_route({self})) return false;
  if (other.is_cpu()) {
    out->value = other.item<double>();
    return true;
  }
  if (other.device() != self[0].device() || !is_native_dtype(other.scalar_type())) return false;
  out->kind = NK_FOREACH_SCALAR_TENSOR;
  out->tensor = other;
  return true;
}

template <int OP, SlowTensor SLOW>
TensorVec tensor_op(TensorList self, const Tensor& other) {
  at::native::check_foreach_api_restrictions(self);
  RowScalar sc;
  if (!tensor_scalar(self, other, &sc)) return SLOW(self, other);
  return binary(OP, self, nullptr, sc, 1.0, false);
}
template <int OP, SlowTensor_ SLOW>
void tensor_op_(TensorList self, const Tensor& other) {
  at::native::check_foreach_api_restrictions(self);
  RowScalar sc;
  if (!tensor_scalar(self, other, &sc)) return SLOW(self, other);
  binary(OP, self, nullptr, sc, 1.0, true);
}
template <int OP, SlowTensorAlpha SLOW>
TensorVec tensor_alpha_op(TensorList self, const Tensor& other, const Scalar& alpha) {
  at::native::check_foreach_api_restrictions(self);
  RowScalar sc;
  if (alpha.isComplex() || !tensor_scalar(self, other, &sc)) return SLOW(self, other, alpha);
  return binary(OP, self, nullptr, sc, alpha.toDouble(), false);
}
template <int OP, SlowTensorAlpha_ SLOW>
void tensor_alpha_op_(TensorList self, const Tensor& other, const Scalar& alpha) {
  at::native::check_foreach_api_restrictions(self);
  RowScalar sc;
  if (alpha.isComplex() || !tensor_scalar(self, other, &sc)) return SLOW(self, other, alpha);
  binary(OP, self, nullptr, sc, alpha.toDouble(), true);
}

// pow(Scalar, Tensor[])
TensorVec scalar_pow_list(const Scalar& self, TensorList exponent) {
  at::native::check_foreach_api_restrictions(exponent);
  if (!fast_route({exponent}, self, true)) return at::native::foreach_scalar_pow_list_kernel_slow(self, exponent);
  return binary(NK_FOREACH_RPOW, exponent, nullptr, RowScalar::of(self), 1.0, false);
}

// ---- addcmul / addcdiv / lerp -----------------------------------------------

TensorVec ternary(int op, TensorList self, TensorList t1, const TensorList* t2, const RowScalar& sc,
                  bool inplace) {
  TensorVec out;
  if (!inplace) out = outputs_like(self);
  Lists l;
  l.set(0, inplace ? self : TensorList(out)).set(1, self).set(2, t1);
  if (t2) l.set(3, *t2);
  foreach_launch(op, l, sc, 1.0, op == NK_FOREACH_LERP && t2 ? 2 : 1);
  return out;
}

using SlowAddcScalar = TensorVec (*)(TensorList, TensorList, TensorList, const Scalar&);
using SlowAddcScalar_ = void (*)(TensorList, TensorList, TensorList, const Scalar&);
using SlowAddcList = TensorVec (*)(TensorList, TensorList, TensorList, at::ArrayRef<Scalar>);
using SlowAddcList_ = void (*)(TensorList, TensorList, TensorList, at::ArrayRef<Scalar>);
using SlowAddcTensor = TensorVec (*)(TensorList, TensorList, TensorList, const Tensor&);
using SlowAddcTensor_ = void (*)(TensorList, TensorList, TensorList, const Tensor&);

template <int OP, SlowAddcScalar SLOW>
TensorVec addc_scalar(TensorList self, TensorList t1, TensorList t2, const Scalar& v) {
  at::native::check_foreach_api_restrictions(self, t1, t2);
  if (!fast_route({self, t1, t2}, v)) return SLOW(self, t1, t2, v);
  return ternary(OP, self, t1, &t2, RowScalar::of(v), false);
}
template <int OP, SlowAddcScalar_ SLOW>
void addc_scalar_(TensorList self, TensorList t1, TensorList t2, const Scalar& v) {
  at::native::check_foreach_api_restrictions(self, t1, t2);
  if (!fast_route({self, t1, t2}, v)) return SLOW(self, t1, t2, v);
  ternary(OP, self, t1, &t2, RowScalar::of(v), true);
}
template <int OP, SlowAddcList SLOW>
TensorVec addc_list(TensorList self, TensorList t1, TensorList t2, at::ArrayRef<Scalar> v) {
  at::native::check_foreach_api_restrictions(self, t1, t2, v);
  if (!fast_route({self, t1, t2}, v)) return SLOW(self, t1, t2, v);
  return ternary(OP, self, t1, &t2, RowScalar::of(v), false);
}
template <int OP, SlowAddcList_ SLOW>
void addc_list_(TensorList self, TensorList t1, TensorList t2, at::ArrayRef<Scalar> v) {
  at::native::check_foreach_api_restrictions(self, t1, t2, v);
  if (!fast_route({self, t1, t2}, v)) return SLOW(self, t1, t2, v);
  ternary(OP, self, t1, &t2, RowScalar::of(v), true);
}
// The Tensor overload is a packed CPU list of scalars, as on CUDA.
template <int OP, SlowAddcList SLOW>
TensorVec addc_tensor(TensorList self, TensorList t1, TensorList t2, const Tensor& v) {
  auto list = at::native::convert_tensor_to_scalar_list(v, static_cast<int64_t>(self.size()));
  return addc_list<OP, SLOW>(self, t1, t2, list);
}
template <int OP, SlowAddcList_ SLOW>
void addc_tensor_(TensorList self, TensorList t1, TensorList t2, const Tensor& v) {
  auto list = at::native::convert_tensor_to_scalar_list(v, static_cast<int64_t>(self.size()));
  addc_list_<OP, SLOW>(self, t1, t2, list);
}

TensorVec lerp_list(TensorList self, TensorList end, TensorList w) {
  at::native::check_foreach_api_restrictions(self, end, w);
  if (!fast_route({self, end, w})) return at::native::foreach_tensor_ternary_lerp_slow(self, end, w);
  return ternary(NK_FOREACH_LERP, self, end, &w, RowScalar(), false);
}
void lerp_list_(TensorList self, TensorList end, TensorList w) {
  at::native::check_foreach_api_restrictions(self, end, w);
  if (!fast_route({self, end, w})) return at::native::foreach_tensor_ternary_lerp_slow_(self, end, w);
  ternary(NK_FOREACH_LERP, self, end, &w, RowScalar(), true);
}
TensorVec lerp_scalar(TensorList self, TensorList end, const Scalar& w) {
  at::native::check_foreach_api_restrictions(self, end);
  if (!fast_route({self, end}, w)) return at::native::foreach_tensor_lerp_list_kernel_slow(self, end, w);
  return ternary(NK_FOREACH_LERP, self, end, nullptr, RowScalar::of(w), false);
}
void lerp_scalar_(TensorList self, TensorList end, const Scalar& w) {
  at::native::check_foreach_api_restrictions(self, end);
  if (!fast_route({self, end}, w)) return at::native::foreach_tensor_lerp_list_kernel_slow_(self, end, w);
  ternary(NK_FOREACH_LERP, self, end, nullptr, RowScalar::of(w), true);
}
TensorVec lerp_scalarlist(TensorList self, TensorList end, at::ArrayRef<Scalar> w) {
  at::native::check_foreach_api_restrictions(self, end, w);
  if (!fast_route({self, end}, w)) return at::native::foreach_tensor_lerp_scalarlist_kernel_slow(self, end, w);
  return ternary(NK_FOREACH_LERP, self, end, nullptr, RowScalar::of(w), false);
}
void lerp_scalarlist_(TensorList self, TensorList end, at::ArrayRef<Scalar> w) {
  at::native::check_foreach_api_restrictions(self, end, w);
  if (!fast_route({self, end}, w)) return at::native::foreach_tensor_lerp_scalarlist_kernel_slow_(self, end, w);
  ternary(NK_FOREACH_LERP, self, end, nullptr, RowScalar::of(w), true);
}

// ---- unary ops, zero_, copy_ --------------------------------------------------

using SlowUnary = TensorVec (*)(TensorList);
using SlowUnary_ = void (*)(TensorList);

template <int OP, SlowUnary SLOW>
TensorVec unary_op(TensorList self) {
  at::native::check_foreach_api_restrictions(self);
  if (!fast_route({self}, {}, false)) return SLOW(self);
  return binary(OP, self, nullptr, RowScalar(), 1.0, false);
}
template <int OP, SlowUnary_ SLOW>
void unary_op_(TensorList self) {
  at::native::check_foreach_api_restrictions(self);
  if (!fast_route({self}, {}, false)) return SLOW(self);
  binary(OP, self, nullptr, RowScalar(), 1.0, true);
}

void zero_(TensorList self) {
  at::native::check_foreach_api_restrictions(self);
  if (!fast_route({self})) return at::native::foreach_tensor_zero_slow_(self);
  Lists l;
  l.set(0, self).numel_slot = 0;
  foreach_launch(NK_FOREACH_ZERO, l, RowScalar(), 1.0, 0);
}

void copy_(TensorList self, TensorList src, bool non_blocking) {
  at::native::check_foreach_api_restrictions(self, src);
  const Tensor& d0 = self[0];
  const Tensor& s0 = src[0];
  bool fast = d0.is_privateuseone() && s0.device() == d0.device() &&
              is_fast_dtype(d0.scalar_type()) && is_fast_dtype(s0.scalar_type()) &&
              at::native::check_fast_path_restrictions({self, src}, {}, false,
                                                       /*skip_cross_list_dtype_check=*/true);
  if (!fast) return at::native::foreach_tensor_copy_list_kernel_slow_(self, src, non_blocking);
  Lists l;
  l.set(0, self).set(1, src);
  foreach_launch(NK_FOREACH_COPY, l, RowScalar(), 1.0, 0);
}

// ---- norm, max ----------------------------------------------------------------

TensorVec norm(TensorList self, const Scalar& ord, std::optional<at::ScalarType> dtype) {
  at::native::check_foreach_api_restrictions(self);
  const double p = ord.isComplex() ? -1 : ord.toDouble();
  const bool inf = std::isinf(p) && p > 0;
  bool fast = !ord.isComplex() && (inf || (std::isfinite(p) && p > 0)) && fast_route({self}) &&
              (!dtype || is_fast_dtype(*dtype));
  if (fast && inf)
    for (const Tensor& t : self)
      if (t.numel() == 0) fast = false;  // ATen raises for that
  if (fast && dtype) {
    // linalg_vector_norm refuses a dtype that would lose precision
    fast = c10::promoteTypes(self[0].scalar_type(), *dtype) == *dtype;
  }
  if (!fast) return at::native::foreach_tensor_norm_slow(self, ord, dtype);
  const auto out_dtype = dtype.value_or(self[0].scalar_type());
  TensorVec out;
  out.reserve(self.size());
  for (const Tensor& t : self) out.push_back(at::empty({}, t.options().dtype(out_dtype)));
  Lists l;
  l.set(0, out).set(1, self);
  foreach_launch(NK_FOREACH_NORM, l, RowScalar(), p, 0);
  return out;
}

TensorVec max(TensorList self) {
  at::native::check_foreach_api_restrictions(self);
  bool fast = fast_route({self});
  for (const Tensor& t : self)
    if (t.numel() == 0) fast = false;
  if (!fast) return at::native::foreach_tensor_max_slow(self);
  TensorVec out;
  out.reserve(self.size());
  for (const Tensor& t : self) out.push_back(at::empty({}, t.options()));
  Lists l;
  l.set(0, out).set(1, self);
  foreach_launch(NK_FOREACH_MAX, l, RowScalar(), 0.0, 0);
  return out;
}

// ---- GradScaler ----------------------------------------------------------------

void unscale_one_list(TensorList grads, Tensor& found_inf, const Tensor& inv_scale) {
  RowScalar sc;
  sc.kind = NK_FOREACH_SCALAR_TENSOR;
  sc.tensor = inv_scale;
  Lists l;
  l.set(0, grads).set(1, grads);
  foreach_launch(NK_FOREACH_UNSCALE, l, sc, 1.0, 0, found_inf.data_ptr());
}

void amp_unscale_(TensorList self, Tensor& found_inf, const Tensor& inv_scale) {
  if (self.empty()) return;
  TORCH_CHECK(inv_scale.is_privateuseone(), "inv_scale must be a neuron tensor.");
  TORCH_CHECK(found_inf.is_privateuseone(), "found_inf must be a neuron tensor.");
  TORCH_CHECK(inv_scale.numel() == 1, "inv_scale must be a 1-element tensor.");
  TORCH_CHECK(found_inf.numel() == 1, "found_inf must be a 1-element tensor.");
  TORCH_CHECK(inv_scale.scalar_type() == at::kFloat, "inv_scale must be a float tensor.");
  TORCH_CHECK(found_inf.scalar_type() == at::kFloat, "found_inf must be a float tensor.");
  TORCH_CHECK(inv_scale.device() == found_inf.device(), "inv_scale and found_inf must be on the same device.");
  const c10::Device dev = found_inf.device();
  for (const Tensor& t : self) {
    TORCH_CHECK(t.device() == dev, "scaled_grads must be on the same device as found_inf (",
                dev, "), got ", t.device());
    TORCH_CHECK(t.layout() == at::kStrided, "one of scaled_grads was not a strided tensor.");
    TORCH_CHECK(at::isFloatingType(t.scalar_type()),
                "_amp_foreach_non_finite_check_and_unscale_ supports only floating grads, got ",
                t.scalar_type());
  }
  if (fast_route({self})) return unscale_one_list(self, found_inf, inv_scale);
  // one tensor at a time (mixed dtypes, views): dense ones in place, the rest
  // through a contiguous copy
  for (const Tensor& t : self) {
    if (t.numel() == 0) continue;
    TORCH_CHECK(is_fast_dtype(t.scalar_type()), "_amp_foreach_non_finite_check_and_unscale_: ",
                t.scalar_type(), " is not supported on neuron");
    if (t.is_non_overlapping_and_dense()) {
      unscale_one_list({t}, found_inf, inv_scale);
    } else {
      Tensor c = t.contiguous();
      unscale_one_list({c}, found_inf, inv_scale);
      const_cast<Tensor&>(t).copy_(c);
    }
  }
}

Tensor& amp_update_scale_(Tensor& current_scale, Tensor& growth_tracker, const Tensor& found_inf,
                          double growth, double backoff, int64_t interval) {
  TORCH_CHECK(growth_tracker.is_privateuseone(), "growth_tracker must be a neuron tensor.");
  TORCH_CHECK(current_scale.is_privateuseone(), "current_scale must be a neuron tensor.");
  TORCH_CHECK(found_inf.is_privateuseone(), "found_inf must be a neuron tensor.");
  TORCH_CHECK(growth_tracker.numel() == 1, "growth_tracker must be a 1-element tensor.");
  TORCH_CHECK(current_scale.numel() == 1, "current_scale must be a 1-element tensor.");
  TORCH_CHECK(found_inf.numel() == 1, "found_inf must be a 1-element tensor.");
  TORCH_CHECK(growth_tracker.scalar_type() == at::kInt, "growth_tracker must be an int tensor.");
  TORCH_CHECK(current_scale.scalar_type() == at::kFloat, "current_scale must be a float tensor.");
  TORCH_CHECK(found_inf.scalar_type() == at::kFloat, "found_inf must be a float tensor.");
  Task task(NK_KERNEL_AMP_UPDATE_SCALE, "aten::_amp_update_scale_", 3);
  describe_or_fail(current_scale, task.operand(0), "_amp_update_scale_");
  describe_or_fail(growth_tracker, task.operand(1), "_amp_update_scale_");
  describe_or_fail(found_inf, task.operand(2), "_amp_update_scale_");
  auto* p = task.params<nk_amp_update_scale_params>();
  p->growth = growth;
  p->backoff = backoff;
  p->interval = interval;
  launch(current_scale.device().index(), task);
  return current_scale;
}

// ---- fused optimizer steps ----------------------------------------------------

// The optional one-element float32 tensors of a fused step, on the device.
const float* optional_flag(const std::optional<Tensor>& t, const char* what, c10::Device dev) {
  if (!t.has_value() || !t->defined()) return nullptr;
  TORCH_CHECK(t->numel() == 1 && t->scalar_type() == at::kFloat && t->device() == dev, what,
              " must be a one-element float32 tensor on ", dev);
  return static_cast<const float*>(t->data_ptr());
}

bool steps_ok(TensorList steps, c10::Device dev) {
  for (const Tensor& s : steps)
    if (s.device() != dev || s.numel() != 1 || !is_fast_dtype(s.scalar_type())) return false;
  return true;
}

bool optional_ok(const std::optional<Tensor>& t, c10::Device dev) {
  return !t.has_value() || !t->defined() ||
         (t->device() == dev && t->numel() == 1 && t->scalar_type() == at::kFloat);
}

// Fills and launches one NK_KERNEL_FUSED_OPTIM task.
void fused_launch(int op, int flags, const Lists& l, double lr, const Tensor* lr_t, double a,
                  double b, double wd, double eps, const std::optional<Tensor>& grad_scale,
                  const std::optional<Tensor>& found_inf, c10::Device dev, TensorList steps) {
  Task task(NK_KERNEL_FUSED_OPTIM, "aten::_fused_optimizer_step", 2);
  auto* p = task.params<nk_optim_params>();
  p->op = op;
  p->flags = flags;
  p->dtype = native_dtype(l.slot[0][0].scalar_type());
  p->step_dtype = steps.empty() ? NRT_FLOAT32 : native_dtype(steps[0].scalar_type());
  if (lr_t) {
    p->lr_ptr = lr_t->data_ptr();
    p->lr_dtype = native_dtype(lr_t->scalar_type());
  }
  p->grad_scale = optional_flag(grad_scale, "grad_scale", dev);
  p->found_inf = optional_flag(found_inf, "found_inf", dev);
  p->lr = lr;
  p->beta1 = a;
  p->beta2 = b;
  p->weight_decay = wd;
  p->eps = eps;
  launch_lists<nk_optim_params>(task, l, nullptr, false);
}

// state_steps have their own dtype and one element each: not part of the
// table's sizes check, so they go in slot 5 after it.
bool step_lists_ok(TensorList steps, c10::Device dev) {
  if (!steps_ok(steps, dev)) return false;
  for (const Tensor& s : steps)
    if (s.scalar_type() != steps[0].scalar_type()) return false;
  return true;
}

void fused_adam_impl(int op, TensorList params, TensorList grads, TensorList exp_avgs,
                     TensorList exp_avg_sqs, TensorList max_exp_avg_sqs, TensorList state_steps,
                     double lr, const Tensor* lr_t, double beta1, double beta2, double weight_decay,
                     double eps, bool amsgrad, bool maximize,
                     const std::optional<Tensor>& grad_scale, const std::optional<Tensor>& found_inf,
                     const char* name, const char* overload) {
  const size_t n = params.size();
  TORCH_CHECK(grads.size() == n);
  TORCH_CHECK(exp_avgs.size() == n);
  TORCH_CHECK(exp_avg_sqs.size() == n);
  if (amsgrad) {
    TORCH_CHECK(max_exp_avg_sqs.size() == n);
  } else {
    TORCH_CHECK(max_exp_avg_sqs.empty());
  }
  TORCH_CHECK(state_steps.size() == n);
  if (n == 0) return;
  const c10::Device dev = params[0].device();
  std::vector<TensorList> lists = {params, grads, exp_avgs, exp_avg_sqs};
  if (amsgrad) lists.push_back(max_exp_avg_sqs);
  bool fast = fast_route(lists) && step_lists_ok(state_steps, dev) && optional_ok(grad_scale, dev) &&
              optional_ok(found_inf, dev) &&
              (!lr_t || lr_t->device() == dev || lr_t->is_cpu());
  if (!fast) {
    torch::jit::Stack args = {params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps};
    args.emplace_back(lr_t ? c10::IValue(*lr_t) : c10::IValue(lr));
    for (double v : {beta1, beta2, weight_decay, eps}) args.emplace_back(v);
    args.emplace_back(amsgrad);
    args.emplace_back(maximize);
    args.emplace_back(grad_scale);
    args.emplace_back(found_inf);
    run_on_cpu(name, overload, std::move(args));
    return;
  }
  Lists l;
  l.set(0, params).set(1, grads).set(2, exp_avgs).set(3, exp_avg_sqs).set(5, state_steps);
  if (amsgrad) l.set(4, max_exp_avg_sqs);
  l.numel_slot = 0;
  const Tensor* dev_lr = nullptr;
  if (lr_t) {
    if (lr_t->is_cpu())
      lr = lr_t->item<double>();
    else
      dev_lr = lr_t;
  }
  int flags = (amsgrad ? NK_OPTIM_AMSGRAD : 0) | (maximize ? NK_OPTIM_MAXIMIZE : 0);
  fused_launch(op, flags, l, lr, dev_lr, beta1, beta2, weight_decay, eps, grad_scale, found_inf,
               dev, state_steps);
}

void fused_adam(TensorList params, TensorList grads, TensorList exp_avgs, TensorList exp_avg_sqs,
                TensorList max_exp_avg_sqs, TensorList state_steps, double lr, double beta1,
                double beta2, double weight_decay, double eps, bool amsgrad, bool maximize,
                const std::optional<Tensor>& grad_scale, const std::optional<Tensor>& found_inf) {
  fused_adam_impl(NK_OPTIM_ADAM, params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps,
                  lr, nullptr, beta1, beta2, weight_decay, eps, amsgrad, maximize, grad_scale,
                  found_inf, "aten::_fused_adam_", "");
}
void fused_adam_t(TensorList params, TensorList grads, TensorList exp_avgs, TensorList exp_avg_sqs,
                  TensorList max_exp_avg_sqs, TensorList state_steps, const Tensor& lr, double beta1,
                  double beta2, double weight_decay, double eps, bool amsgrad, bool maximize,
                  const std::optional<Tensor>& grad_scale, const std::optional<Tensor>& found_inf) {
  fused_adam_impl(NK_OPTIM_ADAM, params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps,
                  0.0, &lr, beta1, beta2, weight_decay, eps, amsgrad, maximize, grad_scale,
                  found_inf, "aten::_fused_adam_", "tensor_lr");
}
void fused_adamw(TensorList params, TensorList grads, TensorList exp_avgs, TensorList exp_avg_sqs,
                 TensorList max_exp_avg_sqs, TensorList state_steps, double lr, double beta1,
                 double beta2, double weight_decay, double eps, bool amsgrad, bool maximize,
                 const std::optional<Tensor>& grad_scale, const std::optional<Tensor>& found_inf) {
  fused_adam_impl(NK_OPTIM_ADAMW, params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs,
                  state_steps, lr, nullptr, beta1, beta2, weight_decay, eps, amsgrad, maximize,
                  grad_scale, found_inf, "aten::_fused_adamw_", "");
}
void fused_adamw_t(TensorList params, TensorList grads, TensorList exp_avgs, TensorList exp_avg_sqs,
                   TensorList max_exp_avg_sqs, TensorList state_steps, const Tensor& lr,
                   double beta1, double beta2, double weight_decay, double eps, bool amsgrad,
                   bool maximize, const std::optional<Tensor>& grad_scale,
                   const std::optional<Tensor>& found_inf) {
  fused_adam_impl(NK_OPTIM_ADAMW, params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs,
                  state_steps, 0.0, &lr, beta1, beta2, weight_decay, eps, amsgrad, maximize,
                  grad_scale, found_inf, "aten::_fused_adamw_", "tensor_lr");
}

void fused_sgd_impl(TensorList params, TensorList grads, TensorList momentum_buffer_list,
                    double weight_decay, double momentum, double lr, const Tensor* lr_t,
                    double dampening, bool nesterov, bool maximize, bool is_first_step,
                    const std::optional<Tensor>& grad_scale, const std::optional<Tensor>& found_inf,
                    const char* overload) {
  const size_t n = params.size();
  TORCH_CHECK(grads.size() == n);
  const bool has_momentum = momentum != 0.0;
  if (has_momentum) {
    TORCH_CHECK(momentum_buffer_list.size() == n);
  } else {
    TORCH_CHECK(momentum_buffer_list.empty());
  }
  if (n == 0) return;
  const c10::Device dev = params[0].device();
  std::vector<TensorList> lists = {params, grads};
  if (has_momentum) lists.push_back(momentum_buffer_list);
  bool fast = fast_route(lists) && optional_ok(grad_scale, dev) && optional_ok(found_inf, dev) &&
              (!lr_t || lr_t->device() == dev || lr_t->is_cpu());
  if (!fast) {
    torch::jit::Stack args = {params, grads, momentum_buffer_list, weight_decay, momentum};
    args.emplace_back(lr_t ? c10::IValue(*lr_t) : c10::IValue(lr));
    args.emplace_back(dampening);
    args.emplace_back(nesterov);
    args.emplace_back(maximize);
    args.emplace_back(is_first_step);
    args.emplace_back(grad_scale);
    args.emplace_back(found_inf);
    run_on_cpu("aten::_fused_sgd_", overload, std::move(args));
    return;
  }
  Lists l;
  l.set(0, params).set(1, grads);
  if (has_momentum) l.set(2, momentum_buffer_list);
  l.numel_slot = 0;
  const Tensor* dev_lr = nullptr;
  if (lr_t) {
    if (lr_t->is_cpu())
      lr = lr_t->item<double>();
    else
      dev_lr = lr_t;
  }
  int flags = (maximize ? NK_OPTIM_MAXIMIZE : 0) | (nesterov ? NK_OPTIM_NESTEROV : 0) |
              (is_first_step ? NK_OPTIM_FIRST_STEP : 0);
  fused_launch(NK_OPTIM_SGD, flags, l, lr, dev_lr, momentum, dampening, weight_decay, 0.0,
               grad_scale, found_inf, dev, {});
}

void fused_sgd(TensorList params, TensorList grads, TensorList momentum_buffer_list,
               double weight_decay, double momentum, double lr, double dampening, bool nesterov,
               bool maximize, bool is_first_step, const std::optional<Tensor>& grad_scale,
               const std::optional<Tensor>& found_inf) {
  fused_sgd_impl(params, grads, momentum_buffer_list, weight_decay, momentum, lr, nullptr, dampening,
                 nesterov, maximize, is_first_step, grad_scale, found_inf, "");
}
void fused_sgd_t(TensorList params, TensorList grads, TensorList momentum_buffer_list,
                 double weight_decay, double momentum, const Tensor& lr, double dampening,
                 bool nesterov, bool maximize, bool is_first_step,
                 const std::optional<Tensor>& grad_scale, const std::optional<Tensor>& found_inf) {
  fused_sgd_impl(params, grads, momentum_buffer_list, weight_decay, momentum, 0.0, &lr, dampening,
                 nesterov, maximize, is_first_step, grad_scale, found_inf, "tensor_lr");
}

void fused_adagrad_impl(TensorList params, TensorList grads, TensorList state_sums,
                        TensorList state_steps, double lr, const Tensor* lr_t, double lr_decay,
                        double weight_decay, double eps, bool maximize,
                        const std::optional<Tensor>& grad_scale,
                        const std::optional<Tensor>& found_inf, const char* overload) {
  const size_t n = params.size();
  TORCH_CHECK(grads.size() == n);
  TORCH_CHECK(state_sums.size() == n);
  TORCH_CHECK(state_steps.size() == n);
  if (n == 0) return;
  const c10::Device dev = params[0].device();
  bool fast = fast_route({params, grads, state_sums}) && step_lists_ok(state_steps, dev) &&
              optional_ok(grad_scale, dev) && optional_ok(found_inf, dev) &&
              (!lr_t || lr_t->device() == dev || lr_t->is_cpu());
  if (!fast) {
    torch::jit::Stack args = {params, grads, state_sums, state_steps};
    args.emplace_back(lr_t ? c10::IValue(*lr_t) : c10::IValue(lr));
    for (double v : {lr_decay, weight_decay, eps}) args.emplace_back(v);
    args.emplace_back(maximize);
    args.emplace_back(grad_scale);
    args.emplace_back(found_inf);
    run_on_cpu("aten::_fused_adagrad_", overload, std::move(args));
    return;
  }
  Lists l;
  l.set(0, params).set(1, grads).set(2, state_sums).set(5, state_steps);
  l.numel_slot = 0;
  const Tensor* dev_lr = nullptr;
  if (lr_t) {
    if (lr_t->is_cpu())
      lr = lr_t->item<double>();
    else
      dev_lr = lr_t;
  }
  fused_launch(NK_OPTIM_ADAGRAD, maximize ? NK_OPTIM_MAXIMIZE : 0, l, lr, dev_lr, lr_decay, 0.0,
               weight_decay, eps, grad_scale, found_inf, dev, state_steps);
}

void fused_adagrad(TensorList params, TensorList grads, TensorList state_sums, TensorList state_steps,
                   double lr, double lr_decay, double weight_decay, double eps, bool maximize,
                   const std::optional<Tensor>& grad_scale, const std::optional<Tensor>& found_inf) {
  fused_adagrad_impl(params, grads, state_sums, state_steps, lr, nullptr, lr_decay, weight_decay,
                     eps, maximize, grad_scale, found_inf, "");
}
void fused_adagrad_t(TensorList params, TensorList grads, TensorList state_sums,
                     TensorList state_steps, const Tensor& lr, double lr_decay, double weight_decay,
                     double eps, bool maximize, const std::optional<Tensor>& grad_scale,
                     const std::optional<Tensor>& found_inf) {
  fused_adagrad_impl(params, grads, state_sums, state_steps, 0.0, &lr, lr_decay, weight_decay, eps,
                     maximize, grad_scale, found_inf, "tensor_lr");
}

}  // namespace

#define NS at::native
// Scalar / List / ScalarList overloads of a binary op (in and out of place).
#define REG_SCALAR(NAME, OP, SLOW)                                                          \
  m.impl("_foreach_" #NAME ".Scalar",                                                       \
         TORCH_FN((scalar_op<OP, &NS::foreach_tensor_##SLOW##_scalar_kernel_slow>)));       \
  m.impl("_foreach_" #NAME "_.Scalar",                                                      \
         TORCH_FN((scalar_op_<OP, &NS::foreach_tensor_##SLOW##_scalar_kernel_slow_>)));
#define REG_SCALARLIST(NAME, OP, SLOW)                                                      \
  m.impl("_foreach_" #NAME ".ScalarList",                                                   \
         TORCH_FN((scalarlist_op<OP, &NS::foreach_tensor_##SLOW##_scalarlist_kernel_slow>))); \
  m.impl("_foreach_" #NAME "_.ScalarList",                                                  \
         TORCH_FN((scalarlist_op_<OP, &NS::foreach_tensor_##SLOW##_scalarlist_kernel_slow_>)));
#define REG_LIST(NAME, OP, SLOW)                                                            \
  m.impl("_foreach_" #NAME ".List",                                                         \
         TORCH_FN((list_op<OP, &NS::foreach_tensor_##SLOW##_list_kernel_slow>)));           \
  m.impl("_foreach_" #NAME "_.List",                                                        \
         TORCH_FN((list_op_<OP, &NS::foreach_tensor_##SLOW##_list_kernel_slow_>)));
#define REG_LIST_ALPHA(NAME, OP)                                                            \
  m.impl("_foreach_" #NAME ".List",                                                         \
         TORCH_FN((list_alpha_op<OP, &NS::foreach_tensor_##NAME##_list_kernel_slow>)));     \
  m.impl("_foreach_" #NAME "_.List",                                                        \
         TORCH_FN((list_alpha_op_<OP, &NS::foreach_tensor_##NAME##_list_kernel_slow_>)));
#define REG_TENSOR(NAME, OP)                                                                \
  m.impl("_foreach_" #NAME ".Tensor",                                                       \
         TORCH_FN((tensor_op<OP, &NS::foreach_tensor_##NAME##_tensor_kernel_slow>)));       \
  m.impl("_foreach_" #NAME "_.Tensor",                                                      \
         TORCH_FN((tensor_op_<OP, &NS::foreach_tensor_##NAME##_tensor_kernel_slow_>)));
#define REG_ADDC(NAME, OP)                                                                  \
  m.impl("_foreach_" #NAME ".Scalar",                                                       \
         TORCH_FN((addc_scalar<OP, &NS::foreach_tensor_##NAME##_scalar_slow>)));            \
  m.impl("_foreach_" #NAME "_.Scalar",                                                      \
         TORCH_FN((addc_scalar_<OP, &NS::foreach_tensor_##NAME##_scalar_slow_>)));          \
  m.impl("_foreach_" #NAME ".ScalarList",                                                   \
         TORCH_FN((addc_list<OP, &NS::foreach_tensor_##NAME##_scalarlist_slow>)));          \
  m.impl("_foreach_" #NAME "_.ScalarList",                                                  \
         TORCH_FN((addc_list_<OP, &NS::foreach_tensor_##NAME##_scalarlist_slow_>)));        \
  m.impl("_foreach_" #NAME ".Tensor",                                                       \
         TORCH_FN((addc_tensor<OP, &NS::foreach_tensor_##NAME##_scalarlist_slow>)));        \
  m.impl("_foreach_" #NAME "_.Tensor",                                                      \
         TORCH_FN((addc_tensor_<OP, &NS::foreach_tensor_##NAME##_scalarlist_slow_>)));
#define REG_UNARY(NAME, OP)                                                                 \
  m.impl("_foreach_" #NAME, TORCH_FN((unary_op<OP, &NS::foreach_tensor_##NAME##_slow>)));   \
  m.impl("_foreach_" #NAME "_", TORCH_FN((unary_op_<OP, &NS::foreach_tensor_##NAME##_slow_>)));

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  REG_SCALAR(add, NK_FOREACH_ADD, add)
  REG_SCALAR(sub, NK_FOREACH_SUB, sub)
  REG_SCALAR(mul, NK_FOREACH_MUL, mul)
  REG_SCALAR(div, NK_FOREACH_DIV, div)
  REG_SCALAR(clamp_min, NK_FOREACH_MAXIMUM, clamp_min)
  REG_SCALAR(clamp_max, NK_FOREACH_MINIMUM, clamp_max)
  REG_SCALAR(maximum, NK_FOREACH_MAXIMUM, clamp_min)
  REG_SCALAR(minimum, NK_FOREACH_MINIMUM, clamp_max)
  REG_SCALAR(pow, NK_FOREACH_POW, pow)
  REG_SCALARLIST(add, NK_FOREACH_ADD, add)
  REG_SCALARLIST(sub, NK_FOREACH_SUB, sub)
  REG_SCALARLIST(mul, NK_FOREACH_MUL, mul)
  REG_SCALARLIST(div, NK_FOREACH_DIV, div)
  REG_SCALARLIST(clamp_min, NK_FOREACH_MAXIMUM, clamp_min)
  REG_SCALARLIST(clamp_max, NK_FOREACH_MINIMUM, clamp_max)
  REG_SCALARLIST(maximum, NK_FOREACH_MAXIMUM, clamp_min)
  REG_SCALARLIST(minimum, NK_FOREACH_MINIMUM, clamp_max)
  REG_SCALARLIST(pow, NK_FOREACH_POW, pow)
  REG_LIST_ALPHA(add, NK_FOREACH_ADD)
  REG_LIST_ALPHA(sub, NK_FOREACH_SUB)
  REG_LIST(mul, NK_FOREACH_MUL, mul)
  REG_LIST(div, NK_FOREACH_DIV, div)
  REG_LIST(clamp_min, NK_FOREACH_MAXIMUM, clamp_min)
  REG_LIST(clamp_max, NK_FOREACH_MINIMUM, clamp_max)
  REG_LIST(maximum, NK_FOREACH_MAXIMUM, clamp_min)
  REG_LIST(minimum, NK_FOREACH_MINIMUM, clamp_max)
  REG_LIST(pow, NK_FOREACH_POW, pow)
  m.impl("_foreach_add.Tensor",
         TORCH_FN((tensor_alpha_op<NK_FOREACH_ADD, &NS::foreach_tensor_add_tensor_kernel_slow>)));
  m.impl("_foreach_add_.Tensor",
         TORCH_FN((tensor_alpha_op_<NK_FOREACH_ADD, &NS::foreach_tensor_add_tensor_kernel_slow_>)));
  REG_TENSOR(mul, NK_FOREACH_MUL)
  REG_TENSOR(div, NK_FOREACH_DIV)
  m.impl("_foreach_pow.ScalarAndTensor", TORCH_FN(scalar_pow_list));
  REG_ADDC(addcmul, NK_FOREACH_ADDCMUL)
  REG_ADDC(addcdiv, NK_FOREACH_ADDCDIV)
  m.impl("_foreach_lerp.List", TORCH_FN(lerp_list));
  m.impl("_foreach_lerp_.List", TORCH_FN(lerp_list_));
  m.impl("_foreach_lerp.Scalar", TORCH_FN(lerp_scalar));
  m.impl("_foreach_lerp_.Scalar", TORCH_FN(lerp_scalar_));
  m.impl("_foreach_lerp.ScalarList", TORCH_FN(lerp_scalarlist));
  m.impl("_foreach_lerp_.ScalarList", TORCH_FN(lerp_scalarlist_));
  REG_UNARY(neg, NK_FOREACH_NEG)
  REG_UNARY(abs, NK_FOREACH_ABS)
  REG_UNARY(sqrt, NK_FOREACH_SQRT)
  REG_UNARY(rsqrt, NK_FOREACH_RSQRT)
  REG_UNARY(exp, NK_FOREACH_EXP)
  REG_UNARY(expm1, NK_FOREACH_EXPM1)
  REG_UNARY(log, NK_FOREACH_LOG)
  REG_UNARY(log1p, NK_FOREACH_LOG1P)
  REG_UNARY(log2, NK_FOREACH_LOG2)
  REG_UNARY(log10, NK_FOREACH_LOG10)
  REG_UNARY(reciprocal, NK_FOREACH_RECIPROCAL)
  REG_UNARY(sign, NK_FOREACH_SIGN)
  REG_UNARY(sigmoid, NK_FOREACH_SIGMOID)
  REG_UNARY(tanh, NK_FOREACH_TANH)
  REG_UNARY(sin, NK_FOREACH_SIN)
  REG_UNARY(cos, NK_FOREACH_COS)
  REG_UNARY(ceil, NK_FOREACH_CEIL)
  REG_UNARY(floor, NK_FOREACH_FLOOR)
  REG_UNARY(round, NK_FOREACH_ROUND)
  REG_UNARY(trunc, NK_FOREACH_TRUNC)
  REG_UNARY(frac, NK_FOREACH_FRAC)
  REG_UNARY(erf, NK_FOREACH_ERF)
  REG_UNARY(erfc, NK_FOREACH_ERFC)
  m.impl("_foreach_zero_", TORCH_FN(zero_));
  m.impl("_foreach_copy_", TORCH_FN(copy_));
  m.impl("_foreach_norm.Scalar", TORCH_FN(norm));
  m.impl("_foreach_max", TORCH_FN(max));
  m.impl("_amp_foreach_non_finite_check_and_unscale_", TORCH_FN(amp_unscale_));
  m.impl("_amp_update_scale_", TORCH_FN(amp_update_scale_));
  m.impl("_fused_adam_", TORCH_FN(fused_adam));
  m.impl("_fused_adam_.tensor_lr", TORCH_FN(fused_adam_t));
  m.impl("_fused_adamw_", TORCH_FN(fused_adamw));
  m.impl("_fused_adamw_.tensor_lr", TORCH_FN(fused_adamw_t));
  m.impl("_fused_sgd_", TORCH_FN(fused_sgd));
  m.impl("_fused_sgd_.tensor_lr", TORCH_FN(fused_sgd_t));
  m.impl("_fused_adagrad_", TORCH_FN(fused_adagrad));
  m.impl("_fused_adagrad_.tensor_lr", TORCH_FN(fused_adagrad_t));
}

}  // namespace torch_neuronx
