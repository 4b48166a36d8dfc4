// fallback.cpp — every aten op without a neuron kernel runs on the CPU.
//
// The boxed fallback (registered for all ops under PrivateUse1) does, in
// order:
//   1. the device check cuda kernels do: every tensor argument must be on one
//      neuron device, except 0-dim CPU tensors (scalars) and the elements of
//      Tensor?[] lists (the indices of index/index_put_, which cuda also
//      accepts on the CPU); otherwise the cuda message
//      "Expected all tensors to be on the same device, but found at least two
//      devices, neuron:0 and cpu!";
//   2. the mode: TORCHNEURON_FALLBACK=warn (default) | error | silent, or
//      set_fallback_mode() at run time.  "error" raises a RuntimeError naming
//      the op, so a test can prove that a path is native;
//   3. counting per op (fallback_stats()) and one warning per op per process;
//   4. at::native::cpu_fallback: real copies to host memory and back, which
//      keeps in-place and out= semantics (mutated arguments are copied back
//      into the original device tensors) and returns device tensors.
// The fallback path copies whole tensors through host memory, so one mutex
// around the statistics costs nothing measurable; the native hot path never
// comes here.
#include "fallback.h"

#include <ATen/native/CPUFallback.h>
#include <ATen/record_function.h>
#include <pybind11/stl.h>
#include <torch/library.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_set>

namespace torch_neuronx {
namespace {

enum class Mode { Warn = 0, Error = 1, Silent = 2 };
constexpr const char* kModeNames[] = {"warn", "error", "silent"};
constexpr int kUnset = -1;  // not yet read from the environment

std::atomic<int> g_mode{kUnset};

std::optional<Mode> parse_mode(const std::string& s) {
  for (int m = 0; m < 3; ++m) {
    if (s == kModeNames[m]) return static_cast<Mode>(m);
  }
  return std::nullopt;
}

Mode current_mode() {
  int m = g_mode.load(std::memory_order_relaxed);
  if (C10_LIKELY(m != kUnset)) return static_cast<Mode>(m);
  const char* env = std::getenv("TORCHNEURON_FALLBACK");
  Mode parsed = Mode::Warn;
  if (env != nullptr && *env != '\0') {
    auto p = parse_mode(env);
    TORCH_CHECK(p.has_value(), "TORCHNEURON_FALLBACK must be one of warn, error, silent; got '",
                env, "'");
    parsed = *p;
  }
  // A concurrent set_fallback_mode() wins over the environment.
  int expected = kUnset;
  g_mode.compare_exchange_strong(expected, static_cast<int>(parsed));
  return static_cast<Mode>(g_mode.load(std::memory_order_relaxed));
}

struct Stats {
  std::mutex mutex;
  std::map<std::string, int64_t> counts;
  std::unordered_set<std::string> warned;  // survives reset: warn once per process
};

Stats& stats() {
  static Stats* s = new Stats();  // never destroyed: ops may run during exit
  return *s;
}

// Step 1: one neuron device among the tensor arguments (see the top).
void check_devices(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto args = torch::jit::last(*stack, op.schema().arguments().size());
  std::optional<c10::Device> device;
  auto for_each_tensor = [&](auto&& fn) {
    for (const c10::IValue& v : args) {
      if (v.isTensor()) {
        fn(v.toTensor());
      } else if (v.isTensorList()) {
        for (const at::Tensor& t : v.toTensorList().vec()) fn(t);
      }
    }
  };
  for_each_tensor([&](const at::Tensor& t) {
    if (!device && t.defined() && t.device().is_privateuseone()) device = t.device();
  });
  if (!device) return;  // e.g. a factory op given device=neuron
  for_each_tensor([&](const at::Tensor& t) {
    if (!t.defined() || t.device() == *device || (t.device().is_cpu() && t.dim() == 0)) return;
    TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two "
                "devices, ", *device, " and ", t.device(), "!");
  });
}

std::string op_name(const c10::OperatorHandle& op) {
  const auto& name = op.schema().operator_name();
  return name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
}

}  // namespace

void cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  check_devices(op, stack);
  const Mode mode = current_mode();
  const std::string name = op_name(op);
  TORCH_CHECK(mode != Mode::Error, name, " is not natively implemented on neuron "
              "(TORCHNEURON_FALLBACK=error forbids falling back to CPU)");
  bool first = false;
  {
    Stats& s = stats();
    std::lock_guard<std::mutex> lock(s.mutex);
    ++s.counts[name];
    first = mode == Mode::Warn && s.warned.insert(name).second;
  }
  if (first) {  // outside the lock: a Python warning filter may run arbitrary code
    TORCH_WARN(name, " is not natively implemented on neuron; falling back to CPU "
               "(copies through host memory)");
  }
  // The profiler shows the round trip as a range of its own
  // ("neuron::fallback aten::foo"): its copies (and the CPU op) nest in it,
  // so the report can highlight fallbacks.  Costs nothing when not profiling.
  RECORD_FUNCTION_WITH_SCOPE(at::RecordScope::USER_SCOPE, "neuron::fallback " + name,
                             c10::ArrayRef<const c10::IValue>{});
  at::native::cpu_fallback(op, stack);
}

torch::jit::Stack run_on_cpu_all(const char* name, const char* overload, torch::jit::Stack args) {
  cpu_fallback(c10::Dispatcher::singleton().findSchemaOrThrow(name, overload), &args);
  return args;
}

c10::IValue run_on_cpu(const char* name, const char* overload, torch::jit::Stack args) {
  torch::jit::Stack results = run_on_cpu_all(name, overload, std::move(args));
  return results.empty() ? c10::IValue() : std::move(results.front());
}

void bind_fallback(pybind11::module& m) {
  m.def("fallback_stats", [] {
    Stats& s = stats();
    std::lock_guard<std::mutex> lock(s.mutex);
    return s.counts;
  }, "How many times each aten op fell back to the CPU since the last reset.");
  m.def("reset_fallback_stats", [] {
    Stats& s = stats();
    std::lock_guard<std::mutex> lock(s.mutex);
    s.counts.clear();
  }, "Clears fallback_stats() (the once-per-op warnings stay given).");
  m.def("set_fallback_mode", [](const std::string& mode) {
    auto p = parse_mode(mode);
    if (!p) {
      throw pybind11::value_error("fallback mode must be one of 'warn', 'error', 'silent'; got '" +
                                  mode + "'");
    }
    g_mode.store(static_cast<int>(*p), std::memory_order_relaxed);
  }, "Sets what an op without a neuron kernel does: 'warn', 'error' or 'silent'.");
  m.def("get_fallback_mode", [] {
    try {
      return std::string(kModeNames[static_cast<int>(current_mode())]);
    } catch (const c10::Error& e) {
      throw pybind11::value_error(e.what_without_backtrace());
    }
  }, "The current fallback mode: 'warn', 'error' or 'silent'.");
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&cpu_fallback>());
}

// convolution / convolution_backward are CompositeExplicitAutograd: they
// reach the device through convolution(_backward)_overrideable, which
// ops_conv.cpp registers.

}  // namespace torch_neuronx
