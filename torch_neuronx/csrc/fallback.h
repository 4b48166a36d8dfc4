// fallback.h — the boxed CPU fallback for every aten op without a neuron
// kernel, and its Python controls (see fallback.cpp).
#pragma once
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <pybind11/pybind11.h>

namespace torch_neuronx {

// Runs `op` on the CPU through real copies (after checking devices and the
// fallback mode, counting it and warning once per op).
void cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// The same for a native kernel that meets what the device cannot do (a dtype
// it lacks, more dims than an operand holds): runs aten op name.overload
// (e.g. "aten::add", "out") with the boxed arguments `args` on the CPU and
// returns its first result.  Counted, warned about, and forbidden in "error"
// mode like any other fallback.
c10::IValue run_on_cpu(const char* name, const char* overload, torch::jit::Stack args);

// The same, returning every result of the op in order (for ops with several).
torch::jit::Stack run_on_cpu_all(const char* name, const char* overload, torch::jit::Stack args);

// torch_neuronx._C.fallback_stats() -> {op name: count}, reset_fallback_stats(),
// set_fallback_mode("warn" | "error" | "silent"), get_fallback_mode().
void bind_fallback(pybind11::module& m);

}  // namespace torch_neuronx
