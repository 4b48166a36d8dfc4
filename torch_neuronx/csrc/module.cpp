// module.cpp — torch_neuronx._C: the few entry points the Python package needs
// that PyTorch does not already expose.  Streams, events and memory
// statistics go through torch.Stream / torch.Event / torch.accelerator,
// which reach guard.cpp and allocator.cpp, so they need no bindings here
// beyond a stream's priority, which torch.Stream does not carry.
#include <ATen/Context.h>
#include <torch/csrc/Generator.h>
#include <torch/csrc/utils/pybind.h>

#include "fallback.h"
#include "launch.h"
#include "generator.h"
#include "neuron_check.h"
#include "neuron_kernels.h"
#include "neuron_stream.h"

namespace py = pybind11;

namespace torch_neuronx {
void bind_profiler(pybind11::module& m);  // profiler.cpp
void bind_compiled(pybind11::module& m);  // compiled.cpp (torch.compile's kernels)
}

// kernels/src/gemm/gemm.h: the FMA peak probe behind _peak_fma (bench/peak.py).
extern "C" int64_t nk_peak_fma(int64_t iters, int f64, int threads);

namespace torch_neuronx {
// c10d_neuron.cpp: the `neuron` c10d backend's entry point.
void init_distributed(pybind11::module& m);
namespace {

int device_count_checked() {
  int count = 0;
  NEURON_CHECK(nrt_device_count(&count));
  return count;
}

void set_device(c10::DeviceIndex device) {
  check_device_index(device);
  NEURON_CHECK(nrt_device_current_set(device));
}

py::dict device_properties(c10::DeviceIndex device) {
  check_device_index(device);
  nrt_device_props props{};
  NEURON_CHECK(nrt_device_props_get(device, &props));
  py::dict out;
  out["name"] = std::string(props.name);
  out["total_memory"] = props.hbm_bytes;
  out["sbuf_bytes"] = props.sbuf_bytes;
  out["multi_processor_count"] = props.compute_threads;
  out["major"] = props.major;
  out["minor"] = props.minor;
  return out;
}

// torch.cuda._sleep's counterpart: the current stream spins for `cycles`
// of a 1 GHz device clock (nanoseconds) before its next task.  Tests use it
// to let work queue up behind a busy stream, as CUDA's tests do.
void sleep_on_stream(int64_t cycles) {
  Task task(NRT_KERNEL_HOST_FN, "neuron::sleep", 0);
  auto* p = task.params<nrt_host_fn_params>();
  p->fn = [](void* arg) {
    const uint64_t until = nrt_now_ns() + static_cast<uint64_t>(reinterpret_cast<intptr_t>(arg));
    while (nrt_now_ns() < until) {
    }
  };
  p->arg = reinterpret_cast<void*>(static_cast<intptr_t>(cycles < 0 ? 0 : cycles));
  launch(-1, task);
}

}  // namespace
}  // namespace torch_neuronx

PYBIND11_MODULE(_C, m) {
  torch_neuronx::init_distributed(m);
  using namespace torch_neuronx;
  m.doc() = "TorchNeuron: the virtual NeuronCore as the PyTorch device 'neuron'";

  // Runs the hooks' init() once per process (again after a failure).
  m.def("_init", [] { at::globalContext().lazyInitDevice(c10::DeviceType::PrivateUse1); });
  m.def("_is_available", [] { return at::detail::getPrivateUse1Hooks().isAvailable(); });
  m.def("_device_count", &device_count_checked);
  m.def("_current_device", [] { return current_device(); });
  m.def("_set_device", &set_device, py::arg("device"));
  m.def("_synchronize", [](c10::DeviceIndex device) {
    check_device_index(device);
    py::gil_scoped_release no_gil;  // worker threads may need the GIL (host callbacks)
    NEURON_CHECK(nrt_device_synchronize(device));
  }, py::arg("device"));
  m.def("_stream_priority", [](c10::DeviceIndex device, int64_t id) {
    nrt_stream* stream = nullptr;
    NEURON_CHECK(nrt_stream_get(device, id, &stream));
    return nrt_stream_priority(stream);
  }, py::arg("device"), py::arg("stream_id"));
  m.def("_default_generator", [](c10::DeviceIndex device) {
    return py::reinterpret_steal<py::object>(
        THPGenerator_initDefaultGenerator(get_default_generator(device)));
  }, py::arg("device"));
  m.def("_device_properties", &device_properties, py::arg("device"));
  m.def("_is_launch_blocking", [] { return nrt_launch_blocking() != 0; });
  // bench/peak.py: the FMA peak probe (kernels/src/gemm/gemm.c), without the GIL.
  m.def("_peak_fma", [](int64_t iters, bool f64, int threads) {
    py::gil_scoped_release no_gil;
    return nk_peak_fma(iters, f64 ? 1 : 0, threads);
  }, py::arg("iters"), py::arg("f64") = false, py::arg("threads") = 1);
  m.def("_compute_threads", [] { return nrt_compute_threads(); });
  // Adaptive eager (runtime/src/fusion_*.c): mode and counters, for
  // torch_neuronx/adaptive.py.
  m.def("_adaptive_eager_mode", [] { return nrt_adaptive_mode(); });
  m.def("_set_adaptive_eager_mode", [](int mode) { nrt_adaptive_set_mode(mode); },
        py::arg("mode"));
  // The instruction set the device's kernels run at (nk_cpu_isa: the best
  // this CPU has, capped by TORCHNEURON_ISA).
  m.def("_kernel_isa", [] { return std::string(nk_isa_name(nk_cpu_isa())); });
  // The extensions on top of it that some kernels use (bench headers).
  m.def("_kernel_extensions", [] {
    std::vector<std::string> ext;
    if (nk_cpu_has_avx512bf16()) ext.push_back("avx512_bf16");
    if (nk_cpu_has_amx_bf16()) ext.push_back("amx_bf16");
    return ext;
  });
  m.def("_fusion_stats", [] {
    nrt_fusion_stats st;
    nrt_fusion_stats_get(&st);
    py::dict d;
    d["groups"] = st.groups;
    d["tasks_fused"] = st.tasks_fused;
    d["bytes_not_written"] = st.bytes_not_written;
    d["groups_verified"] = st.groups_verified;
    d["groups_in_rows"] = st.groups_in_rows;
    d["bytes_streamed"] = st.bytes_streamed;
    d["groups_in_long_rows"] = st.groups_in_long_rows;
    d["groups_compiled"] = st.groups_compiled;
    d["group_builds"] = st.group_builds;
    d["group_build_failures"] = st.group_build_failures;
    d["groups_multi_tensor"] = st.groups_multi_tensor;
    return d;
  });
  // Compiled groups (runtime/src/fusion_jit.c): where the kernel headers
  // and the library cache are, the mode, and a wait for queued builds.
  m.def("_fusion_jit_configure", [](const std::string &includes, const std::string &cache) {
    nrt_fusion_jit_configure(includes.c_str(), cache.c_str());
  }, py::arg("includes"), py::arg("cache"));
  m.def("_fusion_jit_mode", [] { return nrt_fusion_jit_mode(); });
  m.def("_set_fusion_jit_mode", [](int mode) { nrt_fusion_jit_set_mode(mode); }, py::arg("mode"));
  m.def("_fusion_jit_drain", [] {
    py::gil_scoped_release nogil;
    nrt_fusion_jit_drain();
  });
  m.def("_fusion_stats_reset", [] { nrt_fusion_stats_reset(); });
  m.def("_sleep", &sleep_on_stream, py::arg("cycles"));
  // Inductor's get_raw_stream (torch_neuronx/_inductor): the device's current
  // stream as the runtime's nrt_stream* address.
  m.def("_current_raw_stream", [](c10::DeviceIndex device) {
    return reinterpret_cast<intptr_t>(current_stream(device));
  }, py::arg("device"));
  bind_fallback(m);  // fallback_stats, fallback modes (fallback.cpp)
  bind_profiler(m);  // memory history/snapshot, the Kineto plugin's state (profiler.cpp)
  bind_compiled(m);  // _neuron_launch, _compiled_kernel, _empty_strided_neuron
}
