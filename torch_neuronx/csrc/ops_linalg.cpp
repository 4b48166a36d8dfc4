// ops_linalg.cpp — the linear algebra torch.nn.utils.parametrizations.orthogonal
// needs: linalg_matrix_exp (its "matrix_exp" map, the default for square
// weights) and linalg_householder_product (its "householder" map, the
// default for non-square ones).  Their backward formulas are compositions
// (linalg_matrix_exp_differential is matrix_exp of a 2n x 2n block matrix;
// householder_product_backward is matmuls, triangles and sums), so they are
// native once these forwards and their pieces are.
//
//  - linalg_matrix_exp: ATen's CPU/CUDA function cannot be registered as is:
//    it moves its from_blob coefficient tables to the device only for cuda
//    and calls at::native::_compute_linear_combination directly, so on
//    neuron it would mix devices.  Here is the same algorithm (Bader,
//    Blanes, Casas 2019: Taylor polynomials of degree 1, 2, 4, 8, 12, 18
//    evaluated with few products, the degree chosen by the 1-norm, degree 18
//    with scaling and squaring) written with native ops: matmul_out, mul,
//    add.  As ATen: a single matrix picks its degree from its norm (one
//    device->host copy of the norm, as CUDA's one sync); a batch takes the
//    degree 18 path for every matrix, with per-matrix squaring counts, the
//    matrices sorted by count so each squaring is one batched matmul.
//    matmul_out, not matmul, so autocast (which this kernel sits below) does
//    not lower the precision of the inner products, as ATen does.  Complex
//    inputs run on the CPU (the device has no complex dtype).
//  - linalg_householder_product: ATen's function is device-generic (checks,
//    a batched column-major copy, orgqr_stub), so it is registered as is and
//    the stub runs NK_KERNEL_ORGQR (kernels/src/linalg/linalg.c).  Complex inputs
//    run on the CPU; float16/bfloat16 raise like the CPU (LAPACK has none).
//  - linalg.solve / lu_factor / lu_solve (orthogonal's "cayley" map, and
//    linalg_solve's backward): ATen's structured _linalg_solve_ex,
//    linalg_lu_factor_ex and linalg_lu_solve run here with their own meta and
//    impl (so their checks, layouts and error messages are ATen's); their
//    lu_factor_stub and lu_solve_stub run NK_KERNEL_LU.  LU and pivots
//    broadcast against B's batch dims as stride-0 operands.  linalg_inv_ex
//    (a solve against the identity) and _linalg_det (an LU, then the
//    diagonal's product and the pivots' parity) are the same kind of
//    structured ops on these pieces, so they are registered the same way,
//    as is _linalg_slogdet (sign and log|det| from the same LU).
#include <ATen/ATen.h>
#include <ATen/native/BatchLinearAlgebra.h>
#include <ATen/native/LinearAlgebraUtils.h>
#include <ATen/native/TransposeType.h>
#include <ATen/ops/_linalg_det_native.h>
#include <ATen/ops/_linalg_slogdet_native.h>
#include <ATen/ops/_linalg_solve_ex_native.h>
#include <ATen/ops/linalg_inv_ex_native.h>
#include <ATen/ops/linalg_householder_product_native.h>
#include <ATen/ops/linalg_lu_factor_ex_native.h>
#include <ATen/ops/linalg_lu_solve_native.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "fallback.h"
#include "launch.h"
#include "structured.h"

namespace torch_neuronx {
namespace {

using at::Tensor;

// ---- matrix exponential ---------------------------------------------------

struct Mexp {
  bool single;  // coefficients rounded to float, as ATen's float tables
  double c(double v) const { return single ? static_cast<double>(static_cast<float>(v)) : v; }

  // a @ b into a new tensor, below autocast (see the header)
  static Tensor mm(const Tensor& a, const Tensor& b) {
    Tensor out = at::empty({a.size(0), a.size(1), b.size(2)}, a.options());
    at::matmul_out(out, a, b);
    return out;
  }
  // sum_i coeffs[i] * xs[i], in order (ATen's _compute_linear_combination)
  Tensor comb(std::initializer_list<const Tensor*> xs, std::initializer_list<double> coeffs) const {
    Tensor r;
    auto x = xs.begin();
    for (double k : coeffs) {
      r = r.defined() ? r.add(**x, c(k)) : (*x)->mul(c(k));
      ++x;
    }
    return r;
  }

  // {I, A, A^2, A^3, A^6}, the first `count`
  static std::vector<Tensor> powers(const Tensor& A, int count) {
    std::vector<Tensor> p;
    p.push_back(at::eye(A.size(-1), A.options()).expand_as(A));
    p.push_back(A);
    if (count > 2) p.push_back(mm(A, A));
    if (count > 3) p.push_back(mm(A, p[2]));
    if (count > 4) p.push_back(mm(p[3], p[3]));
    return p;
  }

  Tensor t1(const Tensor& A) const { return A.add(powers(A, 2)[0]); }
  Tensor t2(const Tensor& A) const {
    auto p = powers(A, 3);
    return p[0].add(p[1]).add(p[2].div(2.0));
  }
  Tensor t4(const Tensor& A) const {
    auto p = powers(A, 3);
    Tensor a4 = mm(p[2], comb({&p[0], &p[1], &p[2]}, {1 / 2.0, 1 / 6.0, 1 / 24.0}));
    return comb({&p[0], &p[1], &p[2], &a4}, {1.0, 1.0, 0.0, 1.0});
  }
  Tensor t8(const Tensor& A) const {
    const double sqrt_177 = 0.1330413469565007072504e+2;
    const double x3 = 2. / 3.;
    const double x1 = x3 * ((1. + sqrt_177) / 88.);
    const double x2 = x3 * ((1. + sqrt_177) / 352.);
    const double x4 = (-271. + 29. * sqrt_177) / (315. * x3);
    const double x5 = (-11. + 11. * sqrt_177) / (1260. * x3);
    const double x6 = (-99. + 11. * sqrt_177) / (5040. * x3);
    const double x7 = (89. - sqrt_177) / (5040. * x3);
    const double y2 = (857. - 58. * sqrt_177) / 630.;
    auto p = powers(A, 3);
    Tensor a4 = mm(p[2], comb({&p[1], &p[2]}, {x1, x2}));
    Tensor a8 = mm(comb({&p[2], &a4}, {x3, 1.0}), comb({&p[0], &p[1], &p[2], &a4}, {x4, x5, x6, x7}));
    return comb({&p[0], &p[1], &p[2], &a4, &a8}, {1.0, 1.0, y2, 0.0, 1.0});
  }
  Tensor t12(const Tensor& A) const {
    static const double b[4][4] = {
        {9.0198e-16, 0.46932117595418237389, -0.20099424927047284052, -0.04623946134063071740},
        {5.31597895759871264183, 1.19926790417132231573, 0.01179296240992997031, 0.01108844528519167989},
        {0.18188869982170434744, 0.05502798439925399070, 0.09351590770535414968, 0.00610700528898058230},
        {-2.0861320e-13, -0.13181061013830184015, -0.02027855540589259079, -0.00675951846863086359}};
    auto p = powers(A, 4);
    std::array<Tensor, 4> B;
    for (int r = 0; r < 4; r++) B[r] = comb({&p[0], &p[1], &p[2], &p[3]}, {b[r][0], b[r][1], b[r][2], b[r][3]});
    B[2] = B[2].add(mm(B[3], B[3]));
    return B[0].add(mm(B[1].add(B[2]), B[2]));
  }
  Tensor t18(const Tensor& A) const {
    static const double b[5][5] = {
        {0., -1.00365581030144618291e-01, -8.02924648241156932449e-03, -8.92138498045729985177e-04, 0.},
        {0., 3.97849749499645077844e-01, 1.36783778460411720168e+00, 4.98289622525382669416e-01,
         -6.37898194594723280150e-04},
        {-1.09676396052962061844e+01, 1.68015813878906206114e+00, 5.71779846478865511061e-02,
         -6.98210122488052056106e-03, 3.34975017086070470649e-05},
        {-9.04316832390810593223e-02, -6.76404519071381882256e-02, 6.75961301770459654925e-02,
         2.95552570429315521194e-02, -1.39180257516060693404e-05},
        {0., 0., -9.23364619367118555360e-02, -1.69364939002081722752e-02, -1.40086798182036094347e-05}};
    auto p = powers(A, 5);
    std::array<Tensor, 5> B;
    for (int r = 0; r < 5; r++)
      B[r] = comb({&p[0], &p[1], &p[2], &p[3], &p[4]}, {b[r][0], b[r][1], b[r][2], b[r][3], b[r][4]});
    B[3] = B[3].add(mm(B[0], B[4]));
    return B[1].add(mm(B[2].add(B[3]), B[3]));
  }

  // degree 18 on a / 2^s, then s squarings; s = max(0, ceil(log2(norm / theta)))
  // per matrix, computed on the host copy of the norms (a's dtype, as ATen)
  Tensor t18_scale_square(const Tensor& a, const Tensor& norm_cpu, double theta) const {
    const Tensor s = at::ceil(at::log2(norm_cpu / c(theta))).clamp_min(0);
    const Tensor pow2s = at::pow(2, -s);
    const Tensor a_scaled = a * pow2s.to(a.device()).view({-1, 1, 1});
    Tensor e = t18(a_scaled);
    const int64_t B = a.size(0);
    const Tensor sd = s.to(at::kDouble).contiguous();
    std::vector<int64_t> squarings(B);
    for (int64_t i = 0; i < B; i++) {
      const double v = sd.data_ptr<double>()[i];
      // NaN / inf norms: the result is NaN already; square nothing
      squarings[i] = std::isfinite(v) ? static_cast<int64_t>(v) : 0;
    }
    if (B == 1) {
      for (int64_t k = 0; k < squarings[0]; k++) e = mm(e, e);
      return e;
    }
    std::vector<int64_t> order(B);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return squarings[x] < squarings[y]; });
    std::vector<int64_t> inverse(B);
    for (int64_t i = 0; i < B; i++) inverse[order[i]] = i;
    const auto index = [&](const std::vector<int64_t>& v) {
      return at::tensor(v, at::TensorOptions().dtype(at::kLong)).to(a.device());
    };
    Tensor acc = e.index_select(0, index(order));
    std::vector<Tensor> pieces;
    int64_t done = 0;
    for (int64_t i = 0; i < B;) {
      const int64_t want = squarings[order[i]];
      int64_t j = i;
      while (j < B && squarings[order[j]] == want) j++;
      for (; done < want; done++) acc = mm(acc, acc);
      pieces.push_back(acc.narrow(0, 0, j - i));
      acc = acc.narrow(0, j - i, acc.size(0) - (j - i));
      i = j;
    }
    return at::cat(pieces, 0).index_select(0, index(inverse));
  }
};

// operator 1-norm of each matrix: max over columns of the column's abs sum
Tensor operator_1_norm(const Tensor& t) { return std::get<0>(t.abs().sum(-2).max(-1)); }

Tensor mexp(const Tensor& a) {
  const int64_t n = a.size(-1);
  const Tensor a3 = a.reshape({-1, n, n});
  const bool single = a.scalar_type() == at::kFloat;
  // ATen's thetas: the largest norm each degree is accurate for
  static const std::array<double, 6> thetas_float = {1.192092800768788e-07, 5.978858893805233e-04,
                                                     5.116619363445086e-02, 5.800524627688768e-01,
                                                     1.461661507209034e+00, 3.010066362817634e+00};
  static const std::array<double, 6> thetas_double = {2.220446049250313e-16, 2.580956802971767e-08,
                                                      3.397168839976962e-04, 4.991228871115323e-02,
                                                      2.996158913811580e-01, 1.090863719290036e+00};
  const auto& thetas = single ? thetas_float : thetas_double;
  Mexp m{single};
  if (a3.size(0) == 0) return a.clone(at::MemoryFormat::Contiguous);
  const Tensor norm_cpu = operator_1_norm(a3).cpu();
  if (a3.size(0) > 1) return m.t18_scale_square(a3, norm_cpu, thetas[5]).view(a.sizes());
  // one matrix: the lowest degree accurate for its norm; a NaN norm matches
  // no degree and gives NaN, as ATen's NaN-filled result
  const double norm = norm_cpu.to(at::kDouble).item<double>();
  const auto c = [&](int i) { return m.c(thetas[i]); };
  Tensor r;
  if (norm <= c(0)) r = m.t1(a3);
  else if (norm <= c(1)) r = m.t2(a3);
  else if (norm <= c(2)) r = m.t4(a3);
  else if (norm <= c(3)) r = m.t8(a3);
  else if (norm < c(4)) r = m.t12(a3);
  else if (norm >= c(4)) r = m.t18_scale_square(a3, norm_cpu, thetas[5]);
  else r = at::full_like(a3, std::numeric_limits<double>::quiet_NaN(), at::MemoryFormat::Contiguous);
  return r.view(a.sizes());
}

Tensor linalg_matrix_exp(const Tensor& a) {
  if (!is_native_dtype(a.scalar_type())) {
    return run_on_cpu("aten::linalg_matrix_exp", "", {a}).toTensor();
  }
  at::native::squareCheckInputs(a, "linalg.matrix_exp");
  at::native::checkFloatingOrComplex(a, "linalg.matrix_exp");
  c10::DeviceGuard guard(a.device());
  const int64_t n = a.size(-1);
  if (n == 0) return a.clone();
  if (n == 1) return a.exp();
  return mexp(a);
}

// ---- householder product --------------------------------------------------

Tensor& orgqr_kernel(Tensor& result, const Tensor& tau) {
  const auto t = result.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(t == at::kFloat || t == at::kDouble, "\"orgqr_cpu\" not implemented for '",
                              c10::toString(t), "'");
  if (result.numel() == 0) return result;
  const char* name = "aten::linalg_householder_product";
  Task task(NK_KERNEL_ORGQR, name, 2);
  describe_or_fail(result, task.operand(0), name);
  describe_or_fail(tau, task.operand(1), name);
  launch(result.device().index(), task);
  return result;
}

// ---- LU ---------------------------------------------------------------------

void check_lu_dtype(const Tensor& t, const char* what) {
  const auto dt = t.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(dt == at::kFloat || dt == at::kDouble, "\"", what, "\" not implemented for '",
                              c10::toString(dt), "'");
}

void lu_factor_kernel(const Tensor& LU, const Tensor& pivots, const Tensor& infos, bool compute_pivots) {
  check_lu_dtype(LU, "lu_cpu");
  if (LU.numel() == 0 && infos.numel() == 0) return;
  if (LU.numel() == 0) {  // (..., 0, n) or (..., m, 0): nothing to factor
    infos.zero_();
    return;
  }
  const char* name = "aten::linalg_lu_factor_ex";
  Task task(NK_KERNEL_LU, name, 3);
  describe_or_fail(LU, task.operand(0), name);
  describe_or_fail(pivots, task.operand(1), name);
  describe_or_fail(infos, task.operand(2), name);
  auto* p = task.params<nk_lu_params>();
  p->op = NK_LU_FACTOR;
  p->pivot = compute_pivots ? 1 : 0;
  launch(LU.device().index(), task);
}

void lu_solve_kernel(const Tensor& LU, const Tensor& pivots, const Tensor& B, at::native::TransposeType trans) {
  check_lu_dtype(LU, "lu_solve_cpu");
  TORCH_INTERNAL_ASSERT(trans != at::native::TransposeType::ConjTranspose || !LU.is_complex());
  if (B.numel() == 0) return;
  // LU and pivots have their own (broadcastable) batch dims: expand to B's
  std::vector<int64_t> lu_shape(B.sizes().begin(), B.sizes().end() - 2);
  std::vector<int64_t> piv_shape = lu_shape;
  lu_shape.push_back(LU.size(-2));
  lu_shape.push_back(LU.size(-1));
  piv_shape.push_back(pivots.size(-1));
  const char* name = "aten::linalg_lu_solve";
  Task task(NK_KERNEL_LU, name, 3);
  describe_or_fail(B, task.operand(0), name);
  describe_or_fail(LU.expand(lu_shape), task.operand(1), name);
  describe_or_fail(pivots.expand(piv_shape), task.operand(2), name);
  auto* p = task.params<nk_lu_params>();
  p->op = trans == at::native::TransposeType::NoTranspose ? NK_LU_SOLVE : NK_LU_SOLVE_TRANSPOSE;
  launch(B.device().index(), task);
}

using LuFactorOp = at::native::structured_linalg_lu_factor_ex_out;
using SolveOp = at::native::structured__linalg_solve_ex_out;

std::tuple<Tensor, Tensor, Tensor> lu_factor_ex(const Tensor& A, bool pivot, bool check_errors) {
  if (!structured::all_native(A)) {
    const auto t = run_on_cpu_all("aten::linalg_lu_factor_ex", "", {A, pivot, check_errors});
    return {t[0].toTensor(), t[1].toTensor(), t[2].toTensor()};
  }
  structured::Functional<LuFactorOp, 3> op;
  op.meta(A, pivot, check_errors);
  op.impl(A, pivot, check_errors, op.output(0), op.output(1), op.output(2));
  return {std::move(op.outputs_[0]), std::move(op.outputs_[1]), std::move(op.outputs_[2])};
}

std::tuple<Tensor&, Tensor&, Tensor&> lu_factor_ex_out(const Tensor& A, bool pivot, bool check_errors, Tensor& LU,
                                                      Tensor& pivots, Tensor& info) {
  if (!structured::all_native(A, LU, pivots, info)) {
    run_on_cpu("aten::linalg_lu_factor_ex", "out", {A, pivot, check_errors, LU, pivots, info});
    return {LU, pivots, info};
  }
  structured::Out<LuFactorOp, 3> op(LU, pivots, info);
  op.meta(A, pivot, check_errors);
  op.impl(A, pivot, check_errors, op.output(0), op.output(1), op.output(2));
  op.copy_back();
  return {LU, pivots, info};
}

std::tuple<Tensor, Tensor, Tensor, Tensor> solve_ex(const Tensor& A, const Tensor& B, bool left, bool check_errors) {
  if (!structured::all_native(A, B)) {
    const auto t = run_on_cpu_all("aten::_linalg_solve_ex", "", {A, B, left, check_errors});
    const auto& e = t;
    return {e[0].toTensor(), e[1].toTensor(), e[2].toTensor(), e[3].toTensor()};
  }
  structured::Functional<SolveOp, 4> op;
  op.meta(A, B, left, check_errors);
  op.impl(A, B, left, check_errors, op.output(0), op.output(1), op.output(2), op.output(3));
  return {std::move(op.outputs_[0]), std::move(op.outputs_[1]), std::move(op.outputs_[2]),
          std::move(op.outputs_[3])};
}

std::tuple<Tensor&, Tensor&, Tensor&, Tensor&> solve_ex_out(const Tensor& A, const Tensor& B, bool left,
                                                            bool check_errors, Tensor& result, Tensor& LU,
                                                            Tensor& pivots, Tensor& info) {
  if (!structured::all_native(A, B, result, LU, pivots, info)) {
    run_on_cpu("aten::_linalg_solve_ex", "result", {A, B, left, check_errors, result, LU, pivots, info});
    return {result, LU, pivots, info};
  }
  structured::Out<SolveOp, 4> op(result, LU, pivots, info);
  op.meta(A, B, left, check_errors);
  op.impl(A, B, left, check_errors, op.output(0), op.output(1), op.output(2), op.output(3));
  op.copy_back();
  return {result, LU, pivots, info};
}

using InvOp = at::native::structured_linalg_inv_ex_out;
using DetOp = at::native::structured__linalg_det_out;

std::tuple<Tensor, Tensor> inv_ex(const Tensor& A, bool check_errors) {
  if (!structured::all_native(A)) {
    const auto t = run_on_cpu_all("aten::linalg_inv_ex", "", {A, check_errors});
    return {t[0].toTensor(), t[1].toTensor()};
  }
  structured::Functional<InvOp, 2> op;
  op.meta(A, check_errors);
  op.impl(A, check_errors, op.output(0), op.output(1));
  return {std::move(op.outputs_[0]), std::move(op.outputs_[1])};
}

std::tuple<Tensor&, Tensor&> inv_ex_out(const Tensor& A, bool check_errors, Tensor& inverse, Tensor& info) {
  if (!structured::all_native(A, inverse, info)) {
    run_on_cpu("aten::linalg_inv_ex", "inverse", {A, check_errors, inverse, info});
    return {inverse, info};
  }
  structured::Out<InvOp, 2> op(inverse, info);
  op.meta(A, check_errors);
  op.impl(A, check_errors, op.output(0), op.output(1));
  op.copy_back();
  return {inverse, info};
}

std::tuple<Tensor, Tensor, Tensor> det(const Tensor& A) {
  if (!structured::all_native(A)) {
    const auto t = run_on_cpu_all("aten::_linalg_det", "", {A});
    return {t[0].toTensor(), t[1].toTensor(), t[2].toTensor()};
  }
  structured::Functional<DetOp, 3> op;
  op.meta(A);
  op.impl(A, op.output(0), op.output(1), op.output(2));
  return {std::move(op.outputs_[0]), std::move(op.outputs_[1]), std::move(op.outputs_[2])};
}

std::tuple<Tensor&, Tensor&, Tensor&> det_out(const Tensor& A, Tensor& result, Tensor& LU, Tensor& pivots) {
  if (!structured::all_native(A, result, LU, pivots)) {
    run_on_cpu("aten::_linalg_det", "result", {A, result, LU, pivots});
    return {result, LU, pivots};
  }
  structured::Out<DetOp, 3> op(result, LU, pivots);
  op.meta(A);
  op.impl(A, op.output(0), op.output(1), op.output(2));
  op.copy_back();
  return {result, LU, pivots};
}

using SlogdetOp = at::native::structured__linalg_slogdet_out;

std::tuple<Tensor, Tensor, Tensor, Tensor> slogdet(const Tensor& A) {
  if (!structured::all_native(A)) {
    const auto t = run_on_cpu_all("aten::_linalg_slogdet", "", {A});
    const auto& e = t;
    return {e[0].toTensor(), e[1].toTensor(), e[2].toTensor(), e[3].toTensor()};
  }
  structured::Functional<SlogdetOp, 4> op;
  op.meta(A);
  op.impl(A, op.output(0), op.output(1), op.output(2), op.output(3));
  return {std::move(op.outputs_[0]), std::move(op.outputs_[1]), std::move(op.outputs_[2]),
          std::move(op.outputs_[3])};
}

std::tuple<Tensor&, Tensor&, Tensor&, Tensor&> slogdet_out(const Tensor& A, Tensor& sign, Tensor& logabsdet,
                                                           Tensor& LU, Tensor& pivots) {
  if (!structured::all_native(A, sign, logabsdet, LU, pivots)) {
    run_on_cpu("aten::_linalg_slogdet", "sign", {A, sign, logabsdet, LU, pivots});
    return {sign, logabsdet, LU, pivots};
  }
  structured::Out<SlogdetOp, 4> op(sign, logabsdet, LU, pivots);
  op.meta(A);
  op.impl(A, op.output(0), op.output(1), op.output(2), op.output(3));
  op.copy_back();
  return {sign, logabsdet, LU, pivots};
}

}  // namespace

namespace st = structured;

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("linalg_matrix_exp", TORCH_FN(linalg_matrix_exp));
  st::Shared<&at::native::linalg_householder_product>::register_op(m, "linalg_householder_product");
  st::Shared<&at::native::linalg_householder_product_out>::register_op(m, "linalg_householder_product.out");
  using T = const at::Tensor&;
  st::Structured<at::native::structured_linalg_lu_solve_out, T, T, T, bool, bool>::register_ops(
      m, "linalg_lu_solve", nullptr, "linalg_lu_solve.out");
  m.impl("linalg_lu_factor_ex", TORCH_FN(lu_factor_ex));
  m.impl("linalg_lu_factor_ex.out", TORCH_FN(lu_factor_ex_out));
  m.impl("_linalg_solve_ex", TORCH_FN(solve_ex));
  m.impl("_linalg_solve_ex.result", TORCH_FN(solve_ex_out));
  m.impl("linalg_inv_ex", TORCH_FN(inv_ex));
  m.impl("linalg_inv_ex.inverse", TORCH_FN(inv_ex_out));
  m.impl("_linalg_det", TORCH_FN(det));
  m.impl("_linalg_det.result", TORCH_FN(det_out));
  m.impl("_linalg_slogdet", TORCH_FN(slogdet));
  m.impl("_linalg_slogdet.sign", TORCH_FN(slogdet_out));
}

}  // namespace torch_neuronx

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(orgqr_stub, &torch_neuronx::orgqr_kernel)
REGISTER_PRIVATEUSE1_DISPATCH(lu_factor_stub, &torch_neuronx::lu_factor_kernel)
REGISTER_PRIVATEUSE1_DISPATCH(lu_solve_stub, &torch_neuronx::lu_solve_kernel)
}  // namespace at::native
