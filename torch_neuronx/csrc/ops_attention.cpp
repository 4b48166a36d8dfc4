// ops_attention.cpp — torch.nn.functional.scaled_dot_product_attention on
// the fused attention kernel (NK_KERNEL_ATTENTION), forward and backward.
//
// The route is the one ATen gives PrivateUse1 backends: SDPA asks
// _fused_sdp_choice_stub (keyed by device type) which backend to run; we
// answer "overrideable" whenever the kernel takes the call, and ATen then
// calls _scaled_dot_product_fused_attention_overrideable (bool masks
// already turned into additive -inf masks by ATen), whose derivative is
// _scaled_dot_product_fused_attention_overrideable_backward.  Anything the
// kernel does not take (ranks other than 3/4, mixed dtypes, inconsistent
// shapes, is_causal with a mask, the math backend forced by the user) goes
// to the math backend, which is made of native ops and raises ATen's own
// errors.
//
// Outputs follow the CUDA flash/overrideable conventions: logsumexp is
// (B, Hq, L) in float32 (float64 for float64 inputs, so float64 gradients
// stay exact), cum_seq_q/k and debug_attn_mask are undefined, and the
// Philox seed and offset are 0-dim CPU int64 tensors (read back by the
// backward with no device synchronisation).  Dropout reserves B*Hq*L*S
// Philox words from the neuron generator, one per attention weight.
#include <ATen/native/transformers/attention.h>
#include <ATen/native/transformers/sdp_utils_cpp.h>
#include <ATen/ExpandUtils.h>
#include <torch/library.h>

#include <cmath>

#include "generator.h"
#include "launch.h"
#include "ops.h"

namespace torch_neuronx {
namespace {

using at::Tensor;

bool attn_dtype(c10::ScalarType t) {
  return t == at::kFloat || t == at::kDouble || t == at::kHalf || t == at::kBFloat16;
}

// True when the fused kernel takes these arguments.
bool kernel_takes(const Tensor& q, const Tensor& k, const Tensor& v, const std::optional<Tensor>& mask,
                  double dropout_p, bool is_causal, bool enable_gqa) {
  if (q.is_nested() || k.is_nested() || v.is_nested()) return false;
  const int64_t nd = q.dim();
  if ((nd != 3 && nd != 4) || k.dim() != nd || v.dim() != nd) return false;
  if (!attn_dtype(q.scalar_type()) || k.scalar_type() != q.scalar_type() || v.scalar_type() != q.scalar_type())
    return false;
  if (q.device() != k.device() || q.device() != v.device()) return false;
  if (k.size(-1) != q.size(-1) || k.size(-2) != v.size(-2)) return false;
  if (nd == 4 && (k.size(0) != q.size(0) || v.size(0) != q.size(0))) return false;
  const int64_t hq = q.size(-3), hk = k.size(-3), hv = v.size(-3);
  if (hk != hv || hk == 0) return false;
  if (hq != hk && !(enable_gqa && hq % hk == 0)) return false;
  if (!(dropout_p >= 0 && dropout_p <= 1)) return false;
  if (mask.has_value() && mask->defined()) {
    if (is_causal) return false;
    const Tensor& m = *mask;
    if (m.device() != q.device()) return false;
    if (m.scalar_type() != at::kBool && m.scalar_type() != q.scalar_type()) return false;
    std::vector<int64_t> target(q.sizes().begin(), q.sizes().end());
    target.back() = k.size(-2);
    if (!at::is_expandable_to(m.sizes(), target)) return false;
  }
  return true;
}

int64_t fused_sdp_choice(const Tensor& q, const Tensor& k, const Tensor& v, const std::optional<Tensor>& mask,
                         double dropout_p, bool is_causal, std::optional<double> /*scale*/, bool enable_gqa) {
  const bool overrideable = at::globalContext().userEnabledOverrideableSDP();
  if (overrideable && kernel_takes(q, k, v, mask, dropout_p, is_causal, enable_gqa))
    return static_cast<int64_t>(sdp::SDPBackend::overrideable);
  if (at::globalContext().userEnabledMathSDP()) return static_cast<int64_t>(sdp::SDPBackend::math);
  TORCH_CHECK(false, "No viable backend for scaled_dot_product_attention was found on neuron: the fused kernel ",
              overrideable ? "does not take these arguments" : "is disabled", " and the math backend is disabled.");
}

Tensor as4(const Tensor& t) { return t.dim() == 3 ? t.unsqueeze(0) : t; }

double softmax_scale(const Tensor& q, std::optional<double> scale) {
  return scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
}

c10::ScalarType stats_dtype(const Tensor& q) { return q.scalar_type() == at::kDouble ? at::kDouble : at::kFloat; }

void describe4(const Tensor& t, nrt_operand* op, const char* what) {
  describe_or_fail(t, op, what);
  TORCH_INTERNAL_ASSERT(op->ndim == 4 || (op->ndim == 3 && t.dim() == 3));
}

// The mask as the kernel reads it: (B, Hq, L, S), broadcast by stride 0.
Tensor mask4(const Tensor& mask, int64_t B, int64_t H, int64_t L, int64_t S) {
  return mask.expand({B, H, L, S});
}

void check_inputs(const Tensor& q, const Tensor& k, const Tensor& v) {
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4,
              "scaled_dot_product_attention on neuron: query, key and value must be 3-d or 4-d");
  TORCH_CHECK(attn_dtype(q.scalar_type()) && k.scalar_type() == q.scalar_type() && v.scalar_type() == q.scalar_type(),
              "scaled_dot_product_attention on neuron: query, key and value must have one floating dtype, got ",
              q.scalar_type(), ", ", k.scalar_type(), ", ", v.scalar_type());
  TORCH_CHECK(k.size(0) == q.size(0) && v.size(0) == q.size(0) && k.size(3) == q.size(3) && v.size(2) == k.size(2) &&
                  k.size(1) == v.size(1) && k.size(1) > 0 && q.size(1) % k.size(1) == 0,
              "scaled_dot_product_attention on neuron: inconsistent shapes: query ", q.sizes(), ", key ", k.sizes(),
              ", value ", v.sizes());
}

std::tuple<Tensor, Tensor, Tensor, Tensor, c10::SymInt, c10::SymInt, Tensor, Tensor, Tensor> sdpa_forward(
    const Tensor& query, const Tensor& key, const Tensor& value, const std::optional<Tensor>& attn_bias,
    double dropout_p, bool is_causal, bool return_debug_mask, std::optional<double> scale) {
  TORCH_CHECK(!return_debug_mask, "scaled_dot_product_attention on neuron: return_debug_mask is not supported");
  TORCH_CHECK(dropout_p >= 0 && dropout_p <= 1, "dropout probability has to be between 0 and 1, but got ", dropout_p);
  const Tensor q = as4(query), k = as4(key), v = as4(value);
  check_inputs(q, k, v);
  const int64_t B = q.size(0), H = q.size(1), L = q.size(2), S = k.size(2), Dv = v.size(3);
  // the output in the query's layout: (B, L, H, Dv) memory when the query
  // is a transposed (B, L, H, D) projection
  const bool heads_inner = q.stride(1) < q.stride(2) && L > 1 && H > 1;
  Tensor out = heads_inner ? at::empty({B, L, H, Dv}, q.options()).transpose(1, 2) : at::empty({B, H, L, Dv}, q.options());
  Tensor lse = at::empty({B, H, L}, q.options().dtype(stats_dtype(q)));
  uint64_t seed = 0, offset = 0;
  if (dropout_p > 0 && out.numel() > 0) {
    const uint64_t words = static_cast<uint64_t>(B * H * L) * static_cast<uint64_t>(S);
    const PhiloxState st = philox_reserve(std::nullopt, q.device().index(), (words + 3) / 4 * 4);
    seed = st.seed;
    offset = st.offset;
  }
  if (out.numel() > 0 || lse.numel() > 0) {
    Task task(NK_KERNEL_ATTENTION, "aten::_scaled_dot_product_fused_attention_overrideable", 5);
    auto* p = task.params<nk_attention_params>();
    p->mode = NK_ATTENTION_FORWARD;
    p->causal = is_causal;
    p->scale = softmax_scale(q, scale);
    p->dropout_p = dropout_p;
    p->seed = seed;
    p->offset = offset;
    const char* what = "scaled_dot_product_attention";
    describe4(out, task.operand(0), what);
    describe_or_fail(lse, task.operand(1), what);
    describe4(q, task.operand(2), what);
    describe4(k, task.operand(3), what);
    describe4(v, task.operand(4), what);
    Tensor m;
    if (attn_bias.has_value() && attn_bias->defined()) {
      m = mask4(*attn_bias, B, H, L, S);
      describe4(m, task.operand(5), what);
      p->has_mask = 1;
      task.t.n_operands = 6;
    }
    launch(q.device().index(), task);
  }
  Tensor seed_t = at::scalar_tensor(static_cast<int64_t>(seed), at::dtype(at::kLong));
  Tensor offset_t = at::scalar_tensor(static_cast<int64_t>(offset), at::dtype(at::kLong));
  if (query.dim() == 3) out = out.squeeze(0);
  return {out, lse, Tensor(), Tensor(), c10::SymInt(L), c10::SymInt(S), seed_t, offset_t, Tensor()};
}

std::tuple<Tensor, Tensor, Tensor, Tensor> sdpa_backward(
    const Tensor& grad_out, const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& attn_bias,
    std::array<bool, 4> grad_input_mask, const Tensor& out, const Tensor& logsumexp, const Tensor& /*cum_seq_q*/,
    const Tensor& /*cum_seq_k*/, int64_t /*max_q*/, int64_t /*max_k*/, double dropout_p, bool is_causal,
    const Tensor& philox_seed, const Tensor& philox_offset, std::optional<double> scale) {
  const Tensor q = as4(query), k = as4(key), v = as4(value), dout = as4(grad_out), o = as4(out);
  check_inputs(q, k, v);
  const int64_t B = q.size(0), H = q.size(1), L = q.size(2), S = k.size(2);
  const bool want_bias = grad_input_mask[3] && attn_bias.defined();
  Tensor dq, dk, dv, dbias;
  if (!grad_input_mask[0] && !grad_input_mask[1] && !grad_input_mask[2] && !want_bias) return {dq, dk, dv, dbias};
  dq = at::empty_like(q);
  dk = at::empty_like(k);
  dv = at::empty_like(v);
  const c10::ScalarType ct = stats_dtype(q);
  Tensor m = attn_bias.defined() ? mask4(attn_bias, B, H, L, S) : Tensor();
  // delta = rowsum(dout * out), the softmax backward's correction term
  const Tensor delta = dout.to(ct).mul(o.to(ct)).sum(-1);
  const Tensor stats = at::stack({logsumexp.to(ct), delta});
  const int64_t Hkv = k.size(1), D = q.size(3), Dv = v.size(3);
  nk_attention_params prm{};
  prm.causal = is_causal;
  prm.scale = softmax_scale(q, scale);
  prm.dropout_p = dropout_p;
  if (dropout_p > 0) {
    prm.seed = static_cast<uint64_t>(philox_seed.item<int64_t>());
    prm.offset = static_cast<uint64_t>(philox_offset.item<int64_t>());
  }
  const char* what = "scaled_dot_product_attention backward";
  // The one-pass backward (BACKWARD): a unit per (batch, kv head), or per
  // key chunk of one, 5 tile products per block pair against the two
  // passes' 7; taken without a mask (8 operands at most) where the shape
  // rule of nk_attention_one_pass says so.
  if (!m.defined() && nk_attention_one_pass(B, q.size(1), Hkv, L, S, D, Dv)) {
    if (dq.numel() + dk.numel() + dv.numel() > 0) {
      Task task(NK_KERNEL_ATTENTION, "aten::_scaled_dot_product_fused_attention_overrideable_backward", 8);
      auto* p = task.params<nk_attention_params>();
      *p = prm;
      p->mode = NK_ATTENTION_BACKWARD;
      describe4(dq, task.operand(0), what);
      describe4(dk, task.operand(1), what);
      describe4(dv, task.operand(2), what);
      describe4(dout, task.operand(3), what);
      describe4(q, task.operand(4), what);
      describe4(k, task.operand(5), what);
      describe4(v, task.operand(6), what);
      describe4(stats, task.operand(7), what);
      launch(q.device().index(), task);
    }
    if (query.dim() == 3) {
      dq = dq.squeeze(0);
      dk = dk.squeeze(0);
      dv = dv.squeeze(0);
    }
    return {grad_input_mask[0] ? dq : Tensor(), grad_input_mask[1] ? dk : Tensor(),
            grad_input_mask[2] ? dv : Tensor(), Tensor()};
  }
  Tensor dbias_full = want_bias ? at::zeros({B, H, L, S}, q.options().dtype(ct)) : Tensor();
  prm.has_mask = m.defined();
  auto run = [&](nk_attention_mode mode, const Tensor& a, const Tensor& b) {
    Task task(NK_KERNEL_ATTENTION, "aten::_scaled_dot_product_fused_attention_overrideable_backward",
              m.defined() ? 8 : 7);
    auto* p = task.params<nk_attention_params>();
    *p = prm;
    p->mode = mode;
    p->has_dbias = mode == NK_ATTENTION_BACKWARD_Q && want_bias;
    describe4(a, task.operand(0), what);
    describe4(b, task.operand(1), what);
    describe4(dout, task.operand(2), what);
    describe4(q, task.operand(3), what);
    describe4(k, task.operand(4), what);
    describe4(v, task.operand(5), what);
    describe4(stats, task.operand(6), what);
    if (m.defined()) describe4(m, task.operand(7), what);
    launch(q.device().index(), task);
  };
  if ((grad_input_mask[1] || grad_input_mask[2]) && dk.numel() + dv.numel() > 0)
    run(NK_ATTENTION_BACKWARD_KV, dk, dv);
  if ((grad_input_mask[0] || want_bias) && dq.numel() > 0) run(NK_ATTENTION_BACKWARD_Q, dq, want_bias ? dbias_full : dq);
  if (want_bias) dbias = dbias_full.sum_to_size(attn_bias.sizes()).to(attn_bias.scalar_type());
  if (query.dim() == 3) {
    dq = dq.squeeze(0);
    dk = dk.squeeze(0);
    dv = dv.squeeze(0);
  }
  return {grad_input_mask[0] ? dq : Tensor(), grad_input_mask[1] ? dk : Tensor(), grad_input_mask[2] ? dv : Tensor(),
          dbias};
}

}  // namespace
}  // namespace torch_neuronx

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &torch_neuronx::fused_sdp_choice);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fused_sdp_choice", TORCH_FN(torch_neuronx::fused_sdp_choice));
  m.impl("_scaled_dot_product_fused_attention_overrideable", TORCH_FN(torch_neuronx::sdpa_forward));
  m.impl("_scaled_dot_product_fused_attention_overrideable_backward", TORCH_FN(torch_neuronx::sdpa_backward));
}
