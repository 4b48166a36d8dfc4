// profiler.cpp — the neuron device in torch.profiler, and device-memory
// observation (profile_memory, the memory-history recorder, snapshots).
//
// Mechanism: a Kineto activity profiler registered with
// REGISTER_PRIVATEUSE1_PROFILER (torch/csrc/profiler/standalone/
// privateuse1_profiler.h).  torch 2.13's wheel ships the Kineto headers
// (include/kineto/IActivityProfiler.h, GenericTraceActivity.h, ...), exports
// PrivateUse1ProfilerRegistry and libkineto's symbols from libtorch_cpu, and
// torch.profiler runs ProfilerState.KINETO_PRIVATEUSE1 for a renamed
// PrivateUse1 backend: Kineto creates our session next to its CPU tracing,
// forwards every ATen op's correlation id to it, and merges our activities
// into the one trace.  So this is the newest mechanism, and the only one that
// gives all of these without code of ours on the Python side:
// key_averages()'s device-time columns (a device activity linked to its CPU
// op), export_chrome_trace with one lane per device stream (ResourceInfo),
// tensorboard_trace_handler, schedule/on_trace_ready.  The legacy stubs
// (registerPrivateUse1Methods: one event pair per op) would give per-op
// timing only, with no stream lanes and no copies, and the Python-side merge
// they need would duplicate what Kineto already does.
//
// How a device task finds its op: the runtime keeps a per-thread correlation
// id (nrt_trace_set_correlation) that every launch with correlation 0 takes,
// copies queued by the runtime itself included.  The session's
// push/popCorrelationId (called by Kineto on the launching thread for every
// ATen op and record_function range) keep a per-thread stack and set the
// runtime's id to its top, so a task belongs to the innermost op.  The
// runtime's trace ring (trace.c) records each executed task (device, stream,
// enqueue/start/end on CLOCK_MONOTONIC); stop() drains it and processTrace()
// turns each record into a GenericTraceActivity: kernels as
// CONCURRENT_KERNEL, copies as GPU_MEMCPY (both map to DeviceType
// PrivateUse1 in torch), times moved onto the CPU ops' clock (Unix epoch
// ns), device = pid lane, stream = resource lane, linked to the CPU op
// through Kineto's getLinkedActivity and a CPU->device flow arrow.
// CPU fallbacks show up as a "neuron::fallback aten::op" range
// (fallback.cpp) whose copies are correlated to it.
//
// Memory: the runtime's allocator calls one observer after each alloc and
// free (outside its lock).  It reports to torch.profiler
// (c10::reportMemoryUsageToProfiler, as CUDA's allocator does) when the
// calling thread is being profiled with profile_memory=True, and appends to
// the memory-history ring when torch.neuron.memory._record_memory_history is
// on (with a CapturedTraceback, as CUDA's allocator records it).
//
// Overhead: with the profiler off, a launch reads one thread-local and the
// allocator one atomic; with it on, each task costs two clock reads and a
// ring append, and each op a push/pop.
#define FMT_HEADER_ONLY  // GenericTraceActivity's metadata uses fmt, which torch does not export
#include <ATen/Context.h>
#include <c10/core/Allocator.h>
#include <c10/util/ApproximateClock.h>
#include <torch/csrc/profiler/combined_traceback.h>
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>
#include <torch/csrc/utils/pybind.h>

#include <libkineto.h>     // libkineto::CpuTraceBuffer
#include <output_base.h>  // libkineto::ActivityLogger

#include <atomic>
#include <cstring>
#include <ctime>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "neuron_check.h"
#include "neuron_runtime.h"

namespace py = pybind11;


// torch/csrc/profiler/python/combined_traceback.h declares it, but that
// header includes nlohmann/json, which the wheel does not ship.  Exported
// by libtorch_python: frames as lists of {"filename", "line", "name"}.
namespace torch {
std::vector<pybind11::object> py_symbolize(std::vector<CapturedTraceback*>& to_symbolize);
}

namespace torch_neuronx {
namespace {

// ---------------------------------------------------------------- clocks

int64_t clock_ns(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// Unix-epoch ns minus CLOCK_MONOTONIC ns (the runtime's trace clock),
// measured as the middle of a monotonic bracket.
int64_t realtime_offset_ns() {
  int64_t a = clock_ns(CLOCK_MONOTONIC);
  int64_t r = clock_ns(CLOCK_REALTIME);
  int64_t b = clock_ns(CLOCK_MONOTONIC);
  return r - (a + (b - a) / 2);
}

// ---------------------------------------------------------------- correlation

// The ops being run on this thread, innermost last (Kineto pushes and pops
// around each op and record_function range).
thread_local std::vector<uint64_t> correlation_stack;

void push_correlation(uint64_t id) {
  correlation_stack.push_back(id);
  nrt_trace_set_correlation(id);
}

void pop_correlation() {
  if (!correlation_stack.empty()) correlation_stack.pop_back();
  nrt_trace_set_correlation(correlation_stack.empty() ? 0 : correlation_stack.back());
}

// ---------------------------------------------------------------- Kineto

bool is_copy(const nrt_trace_record& r) {
  return r.kernel == NRT_KERNEL_MEMCPY || (r.name && std::strncmp(r.name, "memcpy", 6) == 0);
}

// A device task's label: copies by direction ("memcpy DtoH"), kernels as
// "<engine kernel>: <task name>" ("gemm: aten::mm"), so a kernel row in
// key_averages() never has its CPU op's name.
std::string activity_name(const nrt_trace_record& r) {
  std::string task = r.name ? r.name : "task";
  if (is_copy(r)) return task;
  if (r.kernel == NRT_KERNEL_FUSED_MEMBER) return "fused member: " + task;  // its group: the fused[...] task at the same start
  const char* kernel = nrt_kernel_name(r.kernel);
  return kernel ? std::string(kernel) + ": " + task : task;
}

// Outlives every activity that points at it (Kineto's logger keeps copies
// of our activities, and the trace span pointer with them).
const libkineto::TraceSpan& trace_span() {
  static const libkineto::TraceSpan span(0, 0, "neuron");
  return span;
}

std::atomic<uint64_t> sessions_started{0};

class NeuronSession final : public libkineto::IActivityProfilerSession {
 public:
  void start() override {
    offset_ns_ = realtime_offset_ns();
    records_.clear();
    dropped_ = 0;
    nrt_trace_enable(1);
    sessions_started.fetch_add(1);
    status_ = libkineto::TraceStatus::RECORDING;
  }

  // torch.profiler synchronizes the device (torch.neuron.synchronize) before
  // it stops Kineto, so every task of the profiled region has run by now.
  void stop() override {
    nrt_trace_enable(0);
    drain();
    nrt_trace_set_correlation(0);
    status_ = libkineto::TraceStatus::PROCESSING;
  }

  std::vector<std::string> errors() override {
    std::vector<std::string> out;
    if (dropped_) {
      out.push_back("neuron: " + std::to_string(dropped_) +
                    " device tasks were not recorded (trace ring full; raise "
                    "TORCHNEURON_TRACE_CAPACITY)");
    }
    return out;
  }

  void processTrace(libkineto::ActivityLogger& logger) override {
    processTrace(logger, nullptr, 0, 0);
  }

  void processTrace(libkineto::ActivityLogger& logger,
                    libkineto::getLinkedActivityCallback linked_activity, int64_t /*start*/,
                    int64_t /*end*/) override {
    for (const nrt_trace_record& r : records_) {
      const bool copy = is_copy(r);
      libkineto::GenericTraceActivity a(
          trace_span(),
          copy ? libkineto::ActivityType::GPU_MEMCPY : libkineto::ActivityType::CONCURRENT_KERNEL,
          activity_name(r));
      a.startTime = static_cast<int64_t>(r.start_ns) + offset_ns_;
      a.endTime = static_cast<int64_t>(r.end_ns) + offset_ns_;
      a.id = static_cast<int32_t>(r.correlation);
      a.device = r.device;
      a.resource = static_cast<int32_t>(r.stream);
      a.threadId = static_cast<int32_t>(r.stream);
      if (r.correlation && linked_activity) {
        a.linked = linked_activity(static_cast<int32_t>(r.correlation));
        if (a.linked) {
          a.flow.id = static_cast<uint32_t>(r.correlation);
          a.flow.type = libkineto::kLinkAsyncCpuGpu;
          a.flow.start = 0;
        }
      }
      a.addMetadata("device", r.device);
      a.addMetadata("stream", r.stream);
      a.addMetadata("correlation", r.correlation);
      a.addMetadata("kernel", r.kernel);
      a.addMetadata("queued ns", r.start_ns - r.enqueue_ns);
      if (r.failed) a.addMetadata("failed", 1);
      a.log(logger);
    }
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    // One DeviceInfo per session: the first device seen (or 0).  Other
    // devices' lanes are still labelled by their ResourceInfo.
    int64_t device = records_.empty() ? 0 : records_.front().device;
    return std::make_unique<libkineto::DeviceInfo>(
        libkineto::DeviceInfo{device, device + 0x1000, "neuron " + std::to_string(device),
                              "neuron " + std::to_string(device)});
  }

  std::vector<libkineto::ResourceInfo> getResourceInfos() override {
    std::set<std::pair<int32_t, int64_t>> lanes;
    for (const auto& r : records_) lanes.emplace(r.device, r.stream);
    std::vector<libkineto::ResourceInfo> out;
    for (const auto& [device, stream] : lanes) {
      out.push_back(libkineto::ResourceInfo{stream, stream, device,
                                            "neuron stream " + std::to_string(stream)});
    }
    return out;
  }

  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override {
    return nullptr;  // everything went to the logger in processTrace
  }

  void pushCorrelationId(uint64_t id) override { push_correlation(id); }
  void popCorrelationId() override { pop_correlation(); }

  std::string getDeviceProperties() override {
    int count = 0;
    if (nrt_device_count(&count) != NRT_SUCCESS) return "";
    std::string out;
    for (int d = 0; d < count; ++d) {
      nrt_device_props p{};
      if (nrt_device_props_get(d, &p) != NRT_SUCCESS) continue;
      if (!out.empty()) out += ",\n";
      out += "{\"id\": " + std::to_string(d) + ", \"name\": \"" + p.name +
             "\", \"totalGlobalMem\": " + std::to_string(p.hbm_bytes) + "}";
    }
    return out;
  }

 private:
  void drain() {
    std::vector<nrt_trace_record> buf(4096);
    for (;;) {
      size_t n = 0;
      uint64_t lost = 0;
      if (nrt_trace_drain(buf.data(), buf.size(), &n, &lost) != NRT_SUCCESS) break;
      dropped_ += lost;
      records_.insert(records_.end(), buf.begin(), buf.begin() + static_cast<ptrdiff_t>(n));
      if (n < buf.size()) break;
    }
  }

  int64_t offset_ns_ = 0;
  uint64_t dropped_ = 0;
  std::vector<nrt_trace_record> records_;
};

class NeuronActivityProfiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }
  const std::set<libkineto::ActivityType>& availableActivities() const override {
    return activities_;
  }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      const std::set<libkineto::ActivityType>& activity_types,
      const libkineto::Config& /*config*/) override {
    // Only when the device was asked for (ProfilerActivity.PrivateUse1 asks
    // for the device types, kernels and copies; a CPU-only profile asks
    // for the host-side PRIVATEUSE1_RUNTIME/DRIVER types, which are not ours).
    for (auto t : activity_types) {
      if (activities_.count(t)) return std::make_unique<NeuronSession>();
    }
    return nullptr;
  }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      int64_t /*ts_ms*/, int64_t /*duration_ms*/,
      const std::set<libkineto::ActivityType>& activity_types,
      const libkineto::Config& config) override {
    return configure(activity_types, config);
  }

 private:
  std::string name_{"neuron"};
  std::set<libkineto::ActivityType> activities_{
      libkineto::ActivityType::CONCURRENT_KERNEL, libkineto::ActivityType::GPU_MEMCPY};
};

REGISTER_PRIVATEUSE1_PROFILER(NeuronActivityProfiler);

// ---------------------------------------------------------------- memory

struct HistoryEntry {
  int action;  // NRT_MEM_EVENT_*
  int device;
  uintptr_t addr;
  size_t size, requested;
  int64_t stream;
  int64_t time_us;
  uint64_t allocated, reserved;
  std::shared_ptr<torch::CapturedTraceback> frames;
};

struct History {
  std::mutex mutex;
  std::atomic<bool> enabled{false};
  bool python = true, cpp = false;
  size_t max_entries = 100000;
  std::deque<HistoryEntry> entries;
};

History& history() {
  static History* h = new History();  // leaked: allocations may be freed at exit
  return *h;
}

void observe(const nrt_mem_event* e) {
  const bool sign = e->kind == NRT_MEM_EVENT_ALLOC;
  if (c10::memoryProfilingEnabled()) {
    c10::reportMemoryUsageToProfiler(
        e->ptr, sign ? static_cast<int64_t>(e->size) : -static_cast<int64_t>(e->size),
        e->allocated_bytes, e->reserved_bytes,
        c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(e->device)));
  }
  History& h = history();
  if (!h.enabled.load(std::memory_order_relaxed)) return;
  HistoryEntry entry{e->kind,
                     e->device,
                     reinterpret_cast<uintptr_t>(e->ptr),
                     e->size,
                     e->requested,
                     e->stream,
                     clock_ns(CLOCK_REALTIME) / 1000,
                     e->allocated_bytes,
                     e->reserved_bytes,
                     nullptr};
  if (h.python || h.cpp) entry.frames = torch::CapturedTraceback::gather(h.python, false, h.cpp);
  std::lock_guard<std::mutex> lock(h.mutex);
  h.entries.push_back(std::move(entry));
  while (h.entries.size() > h.max_entries) h.entries.pop_front();
}

void record_memory_history(bool enabled, bool python, bool cpp, size_t max_entries) {
  History& h = history();
  std::lock_guard<std::mutex> lock(h.mutex);
  h.python = python;
  h.cpp = cpp;
  h.max_entries = max_entries ? max_entries : 1;
  if (!enabled) h.entries.clear();
  while (h.entries.size() > h.max_entries) h.entries.pop_front();
  h.enabled.store(enabled);
}

const char* state_name(int state) {
  switch (state) {
    case NRT_BLOCK_ALLOCATED: return "active_allocated";
    case NRT_BLOCK_PENDING_FREE: return "active_pending_free";
    default: return "inactive";
  }
}

// torch.cuda.memory._snapshot()'s layout: {"segments": [...],
// "device_traces": [[...] per device]}.
py::dict snapshot() {
  int count = 0;
  NEURON_CHECK(nrt_device_count(&count));
  py::list segments;
  for (int d = 0; d < count; ++d) {
    std::vector<nrt_mem_block_info> blocks(256);
    size_t n = 0;
    for (;;) {
      NEURON_CHECK(nrt_mem_snapshot(d, blocks.data(), blocks.size(), &n));
      if (n <= blocks.size()) break;
      blocks.resize(n + 64);
    }
    blocks.resize(n);
    for (size_t i = 0; i < n;) {
      void* seg = blocks[i].segment;
      py::list seg_blocks;
      size_t total = 0, allocated = 0, active = 0, requested = 0;
      const nrt_mem_block_info& first = blocks[i];
      for (; i < n && blocks[i].segment == seg; ++i) {
        const nrt_mem_block_info& b = blocks[i];
        py::dict blk;
        blk["address"] = reinterpret_cast<uintptr_t>(b.ptr);
        blk["size"] = b.size;
        blk["requested_size"] = b.requested;
        blk["state"] = state_name(b.state);
        seg_blocks.append(blk);
        total += b.size;
        if (b.state == NRT_BLOCK_ALLOCATED) allocated += b.size, requested += b.requested;
        if (b.state != NRT_BLOCK_FREE) active += b.size;
      }
      py::dict s;
      s["device"] = d;
      s["address"] = reinterpret_cast<uintptr_t>(seg);
      s["total_size"] = total;
      s["allocated_size"] = allocated;
      s["active_size"] = active;
      s["requested_size"] = requested;
      s["stream"] = first.stream;
      s["segment_type"] = first.large_pool ? "large" : "small";
      s["segment_pool_id"] = py::make_tuple(0, 0);
      s["is_expandable"] = false;
      s["frames"] = py::list();
      s["blocks"] = seg_blocks;
      segments.append(s);
    }
  }

  // The history, oldest first, with stacks symbolized in one pass.
  std::vector<HistoryEntry> entries;
  {
    History& h = history();
    std::lock_guard<std::mutex> lock(h.mutex);
    entries.assign(h.entries.begin(), h.entries.end());
  }
  std::vector<torch::CapturedTraceback*> to_symbolize;
  for (auto& e : entries)
    if (e.frames) to_symbolize.push_back(e.frames.get());
  std::vector<py::object> symbolized = torch::py_symbolize(to_symbolize);
  py::list traces;
  for (int d = 0; d < count; ++d) traces.append(py::list());
  size_t k = 0;
  for (auto& e : entries) {
    py::dict t;
    t["action"] = e.action == NRT_MEM_EVENT_ALLOC ? "alloc" : "free_requested";
    t["addr"] = e.addr;
    t["size"] = e.size;
    t["requested_size"] = e.requested;
    t["stream"] = e.stream;
    t["time_us"] = e.time_us;
    t["device"] = e.device;
    t["allocated_bytes"] = e.allocated;
    t["reserved_bytes"] = e.reserved;
    t["frames"] = e.frames ? symbolized[k++] : py::list();
    if (e.device >= 0 && e.device < count) traces[e.device].cast<py::list>().append(t);
  }
  py::dict out;
  out["segments"] = segments;
  out["device_traces"] = traces;
  return out;
}

}  // namespace

void bind_profiler(py::module& m) {
  nrt_mem_set_observer(&observe);
  m.def("_profiler_sessions_started", [] { return sessions_started.load(); });
  m.def("_profiler_registered",
        [] { return torch::profiler::impl::PrivateUse1ProfilerRegistry::instance().hasFactory(); });
  m.def("_record_memory_history", &record_memory_history, py::arg("enabled"),
        py::arg("python") = true, py::arg("cpp") = false, py::arg("max_entries") = 100000);
  m.def("_memory_snapshot", &snapshot);
  m.def("_trace_now_ns", [] { return nrt_now_ns(); });
}

}  // namespace torch_neuronx
