// ops_random.cpp — uniform_, normal_, bernoulli_(float), random_ (all three
// overloads), exponential_, cauchy_, log_normal_, geometric_ and randperm on
// the neuron generator.  bernoulli
// with a tensor p, multinomial and native_dropout live in ops_sort.cpp, on
// the same generator.
//
// ATen's own DistributionTemplates.h does every check and range computation
// (the same code CPU and CUDA run, so errors read the same); its kernel hook
// is a "stub" template, and the stubs here each fill one nk_random_params and
// launch NK_KERNEL_RANDOM on the output.  The generator hands out
// 4 * numel Philox words per launch (one block per element), so the numbers
// depend on the seed and the sequence of calls only.
#include <ATen/native/DistributionTemplates.h>
#include <c10/util/MathConstants.h>
#include <torch/library.h>

#include "generator.h"
#include "launch.h"
#include "ops.h"

namespace torch_neuronx {
namespace {

// Fills `out` (a TensorIterator's output or the tensor itself) with samples.
void launch_random(const at::TensorBase& out, nk_random_params p,
                   const std::optional<at::Generator>& gen) {
  TORCH_CHECK(is_native_dtype(out.scalar_type()), "random number generation on neuron does not support ",
              out.scalar_type());
  if (out.numel() == 0) return;
  Task task(NK_KERNEL_RANDOM, "aten::random", 1);
  TORCH_CHECK(describe(out, task.operand(0)), "random number generation on neuron: tensor has more than ",
              NRT_MAX_DIMS, " dims");
  const PhiloxState st = philox_reserve(gen, out.device().index(), 4 * static_cast<uint64_t>(out.numel()));
  p.seed = st.seed;
  p.offset = st.offset;
  *task.params<nk_random_params>() = p;
  launch(out.device().index(), task);
}

nk_random_params dist(nk_distribution d, double a = 0, double b = 0) {
  nk_random_params p{};
  p.dist = d;
  p.a = a;
  p.b = b;
  return p;
}

template <typename RNG>
struct UniformStub {
  void operator()(at::TensorIteratorBase& iter, double from, double to,
                  std::optional<at::Generator> gen) {
    launch_random(iter.tensor_base(0), dist(NK_DIST_UNIFORM, from, to), gen);
  }
};

template <typename RNG>
struct NormalStub {
  void operator()(const at::TensorBase& self, double mean, double std,
                  std::optional<at::Generator> gen) {
    launch_random(self, dist(NK_DIST_NORMAL, mean, std), gen);
  }
};

template <typename RNG>
struct BernoulliStub {
  void operator()(const at::TensorBase& self, double p, std::optional<at::Generator> gen) {
    launch_random(self, dist(NK_DIST_BERNOULLI, p), gen);
  }
};

template <typename RNG>
struct ExponentialStub {
  void operator()(at::TensorIteratorBase& iter, double lambda, std::optional<at::Generator> gen) {
    launch_random(iter.tensor_base(0), dist(NK_DIST_EXPONENTIAL, lambda), gen);
  }
};

template <typename RNG>
struct RandomFromToStub {
  void operator()(at::TensorIteratorBase& iter, uint64_t range, int64_t base,
                  std::optional<at::Generator> gen) {
    nk_random_params p = dist(NK_DIST_RANGE);
    p.range = range;
    p.base = base;
    launch_random(iter.tensor_base(0), p, gen);
  }
  void operator()(at::TensorIteratorBase& iter, std::optional<at::Generator> gen) {
    launch_random(iter.tensor_base(0), dist(NK_DIST_FULL_RANGE), gen);
  }
};

// random_() with no bounds: [0, 2^mantissa] for floats, [0, max] for
// integers, {0, 1} for bool — ATen's random_kernel ranges.
template <typename RNG>
struct RandomStub {
  void operator()(at::TensorIteratorBase& iter, std::optional<at::Generator> gen) {
    const auto t = iter.dtype();
    uint64_t range = 0;
    AT_DISPATCH_V2(t, "random_", AT_WRAP([&] {
      if constexpr (std::is_same_v<scalar_t, bool>) {
        range = 2;
      } else if constexpr (std::is_floating_point_v<scalar_t> ||
                           std::is_same_v<scalar_t, at::Half> ||
                           std::is_same_v<scalar_t, at::BFloat16>) {
        range = (uint64_t{1} << std::numeric_limits<scalar_t>::digits) + 1;
      } else {
        range = static_cast<uint64_t>(std::numeric_limits<scalar_t>::max()) + 1;
      }
    }), AT_EXPAND(AT_ALL_TYPES), at::kHalf, at::kBFloat16, at::kBool);
    nk_random_params p = dist(NK_DIST_RANGE);
    p.range = range;
    launch_random(iter.tensor_base(0), p, gen);
  }
};

// Distributions ATen derives from one uniform or normal sample by a
// formula (cauchy, log-normal, geometric): the sample is drawn in float64
// under the same counter scheme, the formula runs as native ops on the
// device, and the result is cast into self once (16-bit and integer outputs
// round once, as ATen's CPU casts its float/double result).
template <class Formula>
void derived(const at::TensorBase& self, nk_random_params base,
             const std::optional<at::Generator>& gen, Formula formula) {
  at::Tensor x = empty_neuron(self.sizes(), at::kDouble, self.device());
  launch_random(x, base, gen);
  at::Tensor(self).copy_(formula(x));
}

template <typename RNG>
struct CauchyStub {
  void operator()(at::TensorIteratorBase& iter, double median, double sigma,
                  std::optional<at::Generator> gen) {
    derived(iter.tensor_base(0), dist(NK_DIST_UNIFORM, 0, 1), gen, [&](at::Tensor u) {
      return u.sub_(0.5).mul_(c10::pi<double>).tan_().mul_(sigma).add_(median);
    });
  }
};

template <typename RNG>
struct LogNormalStub {
  void operator()(at::TensorIteratorBase& iter, double mean, double std,
                  std::optional<at::Generator> gen) {
    derived(iter.tensor_base(0), dist(NK_DIST_NORMAL, mean, std), gen,
            [](at::Tensor x) { return x.exp_(); });
  }
};

template <typename RNG>
struct GeometricStub {
  void operator()(at::TensorIteratorBase& iter, double p, std::optional<at::Generator> gen) {
    // number of Bernoulli(p) trials up to the first success: ceil(log(v) /
    // log1p(-p)) for v uniform in (0, 1]
    derived(iter.tensor_base(0), dist(NK_DIST_UNIFORM, 0, 1), gen, [&](at::Tensor u) {
      return u.neg_().add_(1).log_().div_(std::log1p(-p)).ceil_();
    });
  }
};

using namespace at::native::templates;
using Gen = NeuronGeneratorImpl;

at::Tensor& uniform_(at::Tensor& self, double from, double to, std::optional<at::Generator> gen) {
  return uniform_impl_<UniformStub, Gen>(self, from, to, gen);
}
at::Tensor& normal_(at::Tensor& self, double mean, double std, std::optional<at::Generator> gen) {
  return normal_impl_<NormalStub, Gen>(self, mean, std, gen);
}
at::Tensor& bernoulli_(at::Tensor& self, double p, std::optional<at::Generator> gen) {
  return bernoulli_impl_<BernoulliStub, Gen>(self, p, gen);
}
at::Tensor& exponential_(at::Tensor& self, double lambda, std::optional<at::Generator> gen) {
  return exponential_impl_<ExponentialStub, Gen>(self, lambda, gen);
}
at::Tensor& cauchy_(at::Tensor& self, double median, double sigma, std::optional<at::Generator> gen) {
  return cauchy_impl_<CauchyStub, Gen>(self, median, sigma, gen);
}
at::Tensor& log_normal_(at::Tensor& self, double mean, double std, std::optional<at::Generator> gen) {
  return log_normal_impl_<LogNormalStub, Gen>(self, mean, std, gen);
}
at::Tensor& geometric_(at::Tensor& self, double p, std::optional<at::Generator> gen) {
  return geometric_impl_<GeometricStub, Gen>(self, p, gen);
}
at::Tensor& random_from_(at::Tensor& self, int64_t from, std::optional<int64_t> to,
                         std::optional<at::Generator> gen) {
  return random_from_to_impl<RandomFromToStub, Gen>(self, from, to, gen);
}
at::Tensor& random_to_(at::Tensor& self, int64_t to, std::optional<at::Generator> gen) {
  return random_from_to_impl<RandomFromToStub, Gen>(self, 0, to, gen);
}
at::Tensor& random_(at::Tensor& self, std::optional<at::Generator> gen) {
  return random_impl<RandomStub, Gen>(self, gen);
}

// randperm: a random 64-bit key per position from the neuron generator,
// then a stable argsort of the keys (native, ops_sort.cpp).  Reproducible
// under the neuron seed.
at::Tensor& randperm_out(int64_t n, std::optional<at::Generator> gen, at::Tensor& out) {
  TORCH_CHECK(n >= 0, "n must be non-negative, got", n);
  at::Tensor keys = empty_neuron({n}, at::kLong, out.device());
  random_from_(keys, std::numeric_limits<int64_t>::lowest(), std::nullopt, gen);
  at::Tensor order = keys.argsort(/*stable=*/true);
  out.resize_({n});
  out.copy_(order);
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("uniform_", TORCH_FN(uniform_));
  m.impl("normal_", TORCH_FN(normal_));
  m.impl("bernoulli_.float", TORCH_FN(bernoulli_));
  m.impl("exponential_", TORCH_FN(exponential_));
  m.impl("cauchy_", TORCH_FN(cauchy_));
  m.impl("log_normal_", TORCH_FN(log_normal_));
  m.impl("geometric_", TORCH_FN(geometric_));
  m.impl("random_.from", TORCH_FN(random_from_));
  m.impl("random_.to", TORCH_FN(random_to_));
  m.impl("random_", TORCH_FN(random_));
  m.impl("randperm.generator_out", TORCH_FN(randperm_out));
}

}  // namespace torch_neuronx
