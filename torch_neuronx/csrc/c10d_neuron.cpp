// c10d_neuron.cpp — the `neuron` c10d backend (issue 6): a c10d::Backend
// whose collectives run on a communication stream, through one of two
// transports: the shared-memory engine in comm/ (neuron_comm.h) when every
// rank is on this host, or torch's own ProcessGroupGloo on host-staged
// buffers (ranks on several hosts, or TORCHNEURON_COMM_TRANSPORT=gloo).
// Python registers it (torch_neuronx/distributed.py) with
// Backend.register_backend("neuron", ..., devices=["neuron"]) and picks the
// transport.
//
// Decisions:
//  - Asynchronous, as NCCL: each collective records an event on the caller's
//    current stream; the backend's communication stream (one per device, a
//    high-priority stream of the runtime's pool) waits for it, then runs the
//    collective as a host-function task (the transport call, on raw host
//    pointers: device memory is host-addressable here) and the ATen copies
//    that finish it (copy-back into non-contiguous or list outputs), and
//    records an end event.  The host returns at once: compute launched
//    afterwards overlaps the communication.
//  - Work::wait() / synchronize() make the caller's current stream wait for
//    the end event (no host block); isCompleted() queries it; getFuture() is
//    a Future marked completed on the communication stream (its wait() is a
//    stream wait too, as NCCL's).  barrier's wait() blocks the host (as
//    NCCL's), and so does every wait() with TORCHNEURON_COMM_BLOCKING_WAIT=1
//    (TORCH_NCCL_BLOCKING_WAIT's counterpart).  async_op=False is the same
//    path: torch.distributed calls wait(), so results are right in stream
//    order.
//  - Collectives of one backend run in issue order (the engine needs every
//    rank to issue the same sequence): on one stream per device, and one
//    whose stream differs from the previous collective's (tensors on another
//    device than the bound one) waits for that stream first.  The stream comes
//    from the runtime's high-priority pool (it has no private streams), so
//    two process groups, or user code on a high-priority pool stream, may
//    share it past 32 of them: still correct, but serialised; process groups
//    issued in different orders on different ranks would then wait for each
//    other until the timeout (an error, not a hang).
//  - Lifetimes: every tensor the communication stream touches is
//    record_stream'ed on it (the caching allocator does not reuse its memory
//    until the stream has passed the collective), and the Work holds the
//    outputs.  The host task itself holds only host pointers and the
//    transport (shared_ptr), so no tensor is freed on a stream worker and a
//    backend destroyed with collectives in flight is safe.
//  - Errors (timeout, dead rank, mismatch, gloo exceptions) are caught in the
//    host task and kept in the Work's state, naming the collective: wait()
//    raises DistBackendError when the collective has already failed (always
//    with blocking wait); otherwise wait() also queues a check task on the
//    caller's stream that fails it with the same message, so the error is
//    raised at the next synchronisation.  A failure poisons the transport:
//    every later collective of the backend raises DistBackendError when it
//    is issued (or in its task), never hangs.
//  - Non-contiguous tensors and the list forms go through one contiguous
//    device buffer (copy_ on the caller's stream before, on the
//    communication stream after), so a transport only sees flat memory.
//  - Complex tensors are reduced as (real, imag) pairs (sum/avg), as NCCL.
//  - Implemented: allreduce (sum, avg, product, min, max, premul_sum) and
//    allreduce_coalesced, reduce, broadcast, allgather, _allgather_base and
//    its coalesced form, reduce_scatter, _reduce_scatter_base and its
//    coalesced form, alltoall_base (uneven splits), alltoall, gather,
//    scatter (both as all_to_alls with one root), send/recv (no tag
//    matching: per-pair FIFO), coalescing (batch_isend_irecv: sends and
//    receives run as one batch), barrier.  The rest (recvAnysource,
//    monitoredBarrier, bitwise reduce ops, sparse) keep c10d::Backend's
//    default error ("Backend neuron does not support <collective>").
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <unordered_map>

#include <ATen/ATen.h>
#include <c10/core/StreamGuard.h>
#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>

#include "glue_kernels.h"
#include "neuron_check.h"
#include "neuron_comm.h"
#include "neuron_stream.h"

namespace py = pybind11;

namespace torch_neuronx {
namespace {

// ------------------------------------------------------------ transports

// What the communication stream's tasks call: collectives on contiguous
// host-addressable buffers, the engine's vocabulary (neuron_comm.h).  Each
// call throws std::runtime_error with a message naming the collective.  Used
// by one thread at a time (run_mutex).
class Transport {
 public:
  virtual ~Transport() = default;
  virtual void set_timeout(int64_t ms) = 0;
  virtual void all_reduce(void* buf, size_t count, nrt_dtype dt, ncomm_op op) = 0;
  virtual void broadcast(void* buf, size_t bytes, int root) = 0;
  virtual void all_gather(const void* in, void* out, size_t bytes) = 0;
  virtual void reduce_scatter(const void* in, void* out, size_t count, nrt_dtype dt,
                              ncomm_op op) = 0;
  virtual void all_to_all(const void* in, const size_t* sb, const size_t* sd, void* out,
                          const size_t* rb, const size_t* rd) = 0;
  virtual void barrier() = 0;
  virtual void p2p(const std::vector<ncomm_p2p_op>& ops) = 0;

  // The first failure (any thread may ask); empty while healthy.
  std::string failure() {
    std::lock_guard<std::mutex> g(failure_mutex_);
    return failure_;
  }
  void set_failure(const std::string& msg) {
    std::lock_guard<std::mutex> g(failure_mutex_);
    if (failure_.empty()) failure_ = msg;
  }
  std::mutex run_mutex;

 private:
  std::mutex failure_mutex_;
  std::string failure_;
};

class ShmTransport final : public Transport {
 public:
  explicit ShmTransport(ncomm* c) : c_(c) {}
  ~ShmTransport() override { ncomm_destroy(c_); }
  void set_timeout(int64_t ms) override { ncomm_set_timeout(c_, ms); }
  void all_reduce(void* buf, size_t count, nrt_dtype dt, ncomm_op op) override {
    check(ncomm_all_reduce(c_, buf, buf, count, dt, op));
  }
  void broadcast(void* buf, size_t bytes, int root) override {
    check(ncomm_broadcast(c_, buf, bytes, root));
  }
  void all_gather(const void* in, void* out, size_t bytes) override {
    check(ncomm_all_gather(c_, in, out, bytes));
  }
  void reduce_scatter(const void* in, void* out, size_t count, nrt_dtype dt,
                      ncomm_op op) override {
    check(ncomm_reduce_scatter(c_, in, out, count, dt, op));
  }
  void all_to_all(const void* in, const size_t* sb, const size_t* sd, void* out, const size_t* rb,
                  const size_t* rd) override {
    check(ncomm_all_to_all(c_, in, sb, sd, out, rb, rd));
  }
  void barrier() override { check(ncomm_barrier(c_)); }
  void p2p(const std::vector<ncomm_p2p_op>& ops) override {
    check(ncomm_p2p_batch(c_, ops.data(), static_cast<int>(ops.size())));
  }

 private:
  void check(int rc) {
    if (rc != 0) throw std::runtime_error(ncomm_error(c_));
  }
  ncomm* c_;
};

at::ScalarType to_aten(nrt_dtype t) {
  switch (t) {
    case NRT_BOOL: return at::kBool;
    case NRT_UINT8: return at::kByte;
    case NRT_INT8: return at::kChar;
    case NRT_INT16: return at::kShort;
    case NRT_INT32: return at::kInt;
    case NRT_INT64: return at::kLong;
    case NRT_FLOAT16: return at::kHalf;
    case NRT_BFLOAT16: return at::kBFloat16;
    case NRT_FLOAT32: return at::kFloat;
    case NRT_FLOAT64: return at::kDouble;
    default: throw std::runtime_error("unsupported dtype");
  }
}

// Cross-host transport: torch's ProcessGroupGloo (created by Python from the
// same store, under its own prefix) on CPU tensors staged from device memory
// (a real device would DMA them to the host; here a copy).  gloo lacks bool
// and int16: they travel as uint8 (sum/avg/max = or, product/min = and) and
// int32 (wrapping like the engine once cast back).  avg is a sum divided
// afterwards (truncating for integers, like the engine).  reduce_scatter is
// an all_reduce of the whole input keeping this rank's block (every reduce
// op and dtype gloo's all_reduce has); all_to_all packs the blocks.
class GlooTransport final : public Transport {
 public:
  GlooTransport(c10::intrusive_ptr<c10d::Backend> pg, int rank, int world)
      : pg_(std::move(pg)), rank_(rank), world_(world) {}
  void set_timeout(int64_t ms) override { timeout_ = std::chrono::milliseconds(ms); }

  void all_reduce(void* buf, size_t count, nrt_dtype dt, ncomm_op op) override {
    at::Tensor dev = host_view(buf, count, to_aten(dt));
    dev.copy_(reduced(dev, op, "all_reduce"));
  }
  void broadcast(void* buf, size_t bytes, int root) override {
    at::Tensor dev = host_view(buf, bytes, at::kByte);
    std::vector<at::Tensor> v{dev.clone()};
    c10d::BroadcastOptions o;
    o.rootRank = root;
    o.timeout = timeout_;
    run("broadcast", pg_->broadcast(v, o));
    dev.copy_(v[0]);
  }
  void all_gather(const void* in, void* out, size_t bytes) override {
    at::Tensor src = host_view(const_cast<void*>(in), bytes, at::kByte).clone();
    at::Tensor dst = at::empty({static_cast<int64_t>(bytes) * world_}, src.options());
    c10d::AllgatherOptions o;
    o.timeout = timeout_;
    run("all_gather", pg_->_allgather_base(dst, src, o));
    host_view(out, bytes * world_, at::kByte).copy_(dst);
  }
  void reduce_scatter(const void* in, void* out, size_t count, nrt_dtype dt,
                      ncomm_op op) override {
    at::Tensor src = host_view(const_cast<void*>(in), count * world_, to_aten(dt));
    at::Tensor all = reduced(src, op, "reduce_scatter");
    host_view(out, count, to_aten(dt)).copy_(all.narrow(0, count * rank_, count));
  }
  void all_to_all(const void* in, const size_t* sb, const size_t* sd, void* out, const size_t* rb,
                  const size_t* rd) override {
    std::vector<int64_t> in_splits, out_splits;
    int64_t nin = 0, nout = 0;
    for (int j = 0; j < world_; ++j) {
      in_splits.push_back(static_cast<int64_t>(sb[j]));
      out_splits.push_back(static_cast<int64_t>(rb[j]));
      nin += in_splits.back();
      nout += out_splits.back();
    }
    auto cpu = at::TensorOptions().dtype(at::kByte);
    at::Tensor src = at::empty({nin}, cpu), dst = at::empty({nout}, cpu);
    auto* s = static_cast<const unsigned char*>(in);
    int64_t off = 0;
    for (int j = 0; j < world_; ++j) {
      if (sb[j]) std::memcpy(src.data_ptr<uint8_t>() + off, s + sd[j], sb[j]);
      off += in_splits[j];
    }
    c10d::AllToAllOptions o;
    o.timeout = timeout_;
    // gloo takes the split vectors over (moves from them): hand it copies
    std::vector<int64_t> gloo_out(out_splits), gloo_in(in_splits);
    run("all_to_all", pg_->alltoall_base(dst, src, gloo_out, gloo_in, o));
    auto* d = static_cast<unsigned char*>(out);
    off = 0;
    for (int q = 0; q < world_; ++q) {
      if (rb[q]) std::memcpy(d + rd[q], dst.data_ptr<uint8_t>() + off, rb[q]);
      off += out_splits[q];
    }
  }
  void barrier() override {
    c10d::BarrierOptions o;
    o.timeout = timeout_;
    run("barrier", pg_->barrier(o));
  }
  void p2p(const std::vector<ncomm_p2p_op>& ops) override {
    std::vector<at::Tensor> staged;
    std::vector<c10::intrusive_ptr<c10d::Work>> works;
    for (const auto& op : ops) {
      at::Tensor dev = host_view(op.buf, op.bytes, at::kByte);
      std::vector<at::Tensor> v{op.is_send ? dev.clone() : at::empty_like(dev)};
      staged.push_back(v[0]);
      works.push_back(op.is_send ? pg_->send(v, op.peer, 0) : pg_->recv(v, op.peer, 0));
    }
    for (size_t i = 0; i < ops.size(); ++i) {
      run(ops[i].is_send ? "send" : "recv", works[i]);
      if (!ops[i].is_send) host_view(ops[i].buf, ops[i].bytes, at::kByte).copy_(staged[i]);
    }
  }

 private:
  static at::Tensor host_view(void* p, size_t n, at::ScalarType t) {
    return at::from_blob(p, {static_cast<int64_t>(n)}, at::TensorOptions().dtype(t));
  }
  void run(const char* coll, const c10::intrusive_ptr<c10d::Work>& w) {
    try {
      w->wait(timeout_);
    } catch (const std::exception& e) {
      throw std::runtime_error(std::string(coll) + " (gloo): " + e.what());
    }
  }
  // op over ranks of a staged copy of dev, in dev's dtype.
  at::Tensor reduced(const at::Tensor& dev, ncomm_op op, const char* coll) {
    const at::ScalarType t = dev.scalar_type();
    at::ScalarType st = t == at::kBool ? at::kByte : t == at::kShort ? at::kInt : t;
    c10d::AllreduceOptions o;
    o.timeout = timeout_;
    switch (op) {
      case NCOMM_SUM: case NCOMM_AVG:
        o.reduceOp = t == at::kBool ? c10d::ReduceOp::MAX : c10d::ReduceOp::SUM;
        break;
      case NCOMM_PRODUCT:
        o.reduceOp = t == at::kBool ? c10d::ReduceOp::MIN : c10d::ReduceOp::PRODUCT;
        break;
      case NCOMM_MIN: o.reduceOp = c10d::ReduceOp::MIN; break;
      default: o.reduceOp = c10d::ReduceOp::MAX; break;
    }
    std::vector<at::Tensor> v{dev.to(st, /*non_blocking=*/false, /*copy=*/true)};
    run(coll, pg_->allreduce(v, o));
    at::Tensor r = v[0].to(t);
    if (op == NCOMM_AVG && t != at::kBool) {
      r = at::isFloatingType(t) ? (r.to(at::kDouble) / world_).to(t)
                                : at::div(r, world_, "trunc").to(t);
    }
    return r;
  }

  c10::intrusive_ptr<c10d::Backend> pg_;
  int rank_, world_;
  std::chrono::milliseconds timeout_{std::chrono::minutes(30)};
};

// ------------------------------------------------------------------ work

// What a collective's host task reports: shared by the task, the Work and
// the check tasks queued on callers' streams.
struct WorkState {
  explicit WorkState(std::string name) : coll(std::move(name)) {}
  const std::string coll;
  std::atomic<bool> finished{false};
  void fail(const std::string& msg) {
    std::lock_guard<std::mutex> g(mutex);
    if (error_.empty()) error_ = "neuron backend: " + coll + " failed: " + msg;
  }
  std::string error() {
    std::lock_guard<std::mutex> g(mutex);
    return error_;
  }

 private:
  std::mutex mutex;
  std::string error_;
};

[[noreturn]] void throw_dist_error(const std::string& msg) {
  C10_THROW_ERROR(DistBackendError, msg);
}

// The check task: fails the stream it runs on with the collective's error
// (its kernel id: glue_kernels.h).
constexpr uint32_t kCheckKernel = kCollectiveCheckKernel;

int run_check(const nrt_task* task, nrt_exec_ctx* ctx) {
  std::unique_ptr<std::shared_ptr<WorkState>> held(
      *reinterpret_cast<std::shared_ptr<WorkState>* const*>(task->params));
  std::string err = (*held)->error();
  if (err.empty()) return 0;
  nrt_exec_fail(ctx, "%s", err.c_str());
  return 1;
}

void queue_check(nrt_stream* s, const std::shared_ptr<WorkState>& state) {
  static std::once_flag once;
  std::call_once(once, [] {
    NEURON_CHECK(nrt_kernel_register(kCheckKernel, "neuron::collective_check", run_check));
  });
  nrt_task t;
  t.kernel = kCheckKernel;
  t.n_operands = 0;
  t.name = "neuron::collective_check";
  t.correlation = 0;
  auto* held = new std::shared_ptr<WorkState>(state);
  std::memcpy(t.params, &held, sizeof held);
  nrt_status st = nrt_launch(s, &t);
  if (st != NRT_SUCCESS) {
    delete held;
    raise_status(st, "nrt_launch(collective_check)");
  }
}

class NeuronWork final : public c10d::Work {
 public:
  NeuronWork(int rank, c10d::OpType type, std::shared_ptr<WorkState> state, nrt_event* end,
             c10::DeviceIndex device, std::vector<at::Tensor> outputs,
             c10::intrusive_ptr<c10::ivalue::Future> future, bool host_wait)
      : c10d::Work(rank, type),
        state_(std::move(state)),
        end_(end),
        device_(device),
        outputs_(std::move(outputs)),
        future_(std::move(future)),
        host_wait_(host_wait) {}
  ~NeuronWork() override { (void)nrt_event_destroy(end_); }

  bool isCompleted() override { return nrt_event_query(end_) == NRT_SUCCESS; }
  bool isSuccess() const override { return state_->error().empty(); }
  std::exception_ptr exception() const override {
    std::string err = state_->error();
    if (err.empty()) return nullptr;
    try {
      throw_dist_error(err);
    } catch (...) {
      return std::current_exception();
    }
  }
  bool wait(std::chrono::milliseconds /*timeout: the transport's own bounds the task*/) override {
    raise_if_failed();
    if (host_wait_) {
      NEURON_CHECK(nrt_event_synchronize(end_));
      raise_if_failed();
      return true;
    }
    blockCurrentStream();
    // finished is stored after the error, so a finished collective's error
    // is visible here.  Skipping the check whenever finished dropped a
    // failure that landed between raise_if_failed() above and this load:
    // the caller's synchronize then raised nothing (seen once in CI).
    if (!state_->finished.load() || !state_->error().empty())
      queue_check(current_stream(device_), state_);
    return true;
  }
  void synchronize() override { wait(c10d::kUnsetTimeout); }
  void blockCurrentStream() override {
    NEURON_CHECK(nrt_stream_wait_event(current_stream(device_), end_));
  }
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  void raise_if_failed() {
    std::string err = state_->error();
    if (!err.empty()) throw_dist_error(err);
  }
  std::shared_ptr<WorkState> state_;
  nrt_event* end_;
  c10::DeviceIndex device_;
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  bool host_wait_;
};

// The host-function task of one collective on the communication stream.
struct HostCall {
  std::shared_ptr<Transport> transport;
  std::shared_ptr<WorkState> state;
  std::function<void(Transport&)> fn;
  int64_t timeout_ms;

  static void run(void* arg) {
    std::unique_ptr<HostCall> call(static_cast<HostCall*>(arg));
    Transport& tr = *call->transport;
    try {
      std::lock_guard<std::mutex> g(tr.run_mutex);
      std::string prior = tr.failure();
      if (!prior.empty()) {
        throw std::runtime_error("communicator aborted by an earlier failure (" + prior + ")");
      }
      tr.set_timeout(call->timeout_ms);
      if (call->fn) call->fn(tr);
    } catch (const std::exception& e) {
      call->state->fail(e.what());
      tr.set_failure(call->state->error());
    } catch (...) {
      call->state->fail("unknown exception");
      tr.set_failure(call->state->error());
    }
    call->state->finished.store(true);
  }
};

nrt_dtype to_nrt(at::ScalarType t, const char* coll) {
  switch (t) {
    case at::kBool: return NRT_BOOL;
    case at::kByte: return NRT_UINT8;
    case at::kChar: return NRT_INT8;
    case at::kShort: return NRT_INT16;
    case at::kInt: return NRT_INT32;
    case at::kLong: return NRT_INT64;
    case at::kHalf: return NRT_FLOAT16;
    case at::kBFloat16: return NRT_BFLOAT16;
    case at::kFloat: return NRT_FLOAT32;
    case at::kDouble: return NRT_FLOAT64;
    default:
      TORCH_CHECK(false, "neuron backend: ", coll, " does not support dtype ", t);
  }
}

ncomm_op to_op(const c10d::ReduceOp& op, const char* coll) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
    case c10d::ReduceOp::PREMUL_SUM:  // the factor is applied first (premul)
      return NCOMM_SUM;
    case c10d::ReduceOp::AVG: return NCOMM_AVG;
    case c10d::ReduceOp::PRODUCT: return NCOMM_PRODUCT;
    case c10d::ReduceOp::MIN: return NCOMM_MIN;
    case c10d::ReduceOp::MAX: return NCOMM_MAX;
    default:
      TORCH_CHECK_NOT_IMPLEMENTED(false, "neuron backend: ", coll,
                                  " does not support this reduce op yet (",
                                  static_cast<int>(op.op_), ")");
  }
}

void check_neuron(const at::Tensor& t, const char* coll) {
  TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1, "neuron backend: ", coll,
              " expects neuron tensors, got a tensor on ", t.device());
  TORCH_CHECK(t.layout() == at::kStrided, "neuron backend: ", coll,
              " supports only dense tensors");
}

// PREMUL_SUM: t * factor (a new tensor), as NCCL multiplies before summing.
at::Tensor premul(const at::Tensor& t, const c10d::ReduceOp& op) {
  auto* sup = dynamic_cast<c10d::PreMulSumSupplement*>(op.supplement_.get());
  TORCH_CHECK(sup != nullptr, "neuron backend: premul_sum without a factor");
  if (sup->tensor_factor.defined()) return t * sup->tensor_factor.to(t.device());
  return t * sup->double_factor;
}

// The engine's view of a contiguous tensor for a reduction: complex tensors
// are reduced as their (real, imag) pairs (sum/avg only), straight on the
// data pointer (view_as_real would not be a view here while it falls back).
struct Flat {
  nrt_dtype dtype;
  size_t count;
};
Flat flat_for_reduce(const at::Tensor& t, ncomm_op op, const char* coll) {
  if (!t.is_complex()) return {to_nrt(t.scalar_type(), coll), static_cast<size_t>(t.numel())};
  TORCH_CHECK(op == NCOMM_SUM || op == NCOMM_AVG, "neuron backend: ", coll,
              " on complex tensors supports only sum and avg");
  return {to_nrt(c10::toRealValueType(t.scalar_type()), coll),
          static_cast<size_t>(t.numel()) * 2};
}

class NeuronBackend final : public c10d::Backend {
 public:
  NeuronBackend(std::shared_ptr<Transport> transport, int rank, int size,
                std::chrono::milliseconds timeout, bool blocking_wait)
      : c10d::Backend(rank, size),
        transport_(std::move(transport)),
        timeout_(timeout),
        blocking_wait_(blocking_wait) {}

  const std::string getBackendName() const override { return "neuron"; }

  void setTimeout(std::chrono::milliseconds timeout) override { timeout_ = timeout; }

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override {
    TORCH_CHECK(tensors.size() == 1, "neuron backend: allreduce takes one tensor per process");
    Call call(c10d::OpType::ALLREDUCE, "all_reduce", opts.timeout);
    add_allreduce(call, tensors[0], opts.reduceOp);
    call.outputs = tensors;
    return submit(std::move(call));
  }

  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override {
    Call call(c10d::OpType::ALLREDUCE_COALESCED, "all_reduce_coalesced", opts.timeout);
    for (auto& t : tensors) add_allreduce(call, t, opts.reduceOp);
    call.outputs = tensors;
    return submit(std::move(call));
  }

  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override {
    TORCH_CHECK(tensors.size() == 1, "neuron backend: reduce takes one tensor per process");
    // All ranks reduce (a copy); only the root keeps the result.
    at::Tensor t = tensors[0];
    check_neuron(t, "reduce");
    Call call(c10d::OpType::REDUCE, "reduce", opts.timeout);
    at::Tensor tmp = t.clone(at::MemoryFormat::Contiguous);
    add_allreduce(call, tmp, opts.reduceOp);
    if (opts.rootRank == rank_) call.post.push_back([t, tmp]() mutable { t.copy_(tmp); });
    call.used.push_back(t);
    call.outputs = tensors;
    return submit(std::move(call));
  }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override {
    TORCH_CHECK(tensors.size() == 1, "neuron backend: broadcast takes one tensor per process");
    at::Tensor t = tensors[0];
    check_neuron(t, "broadcast");
    TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < size_,
                "neuron backend: broadcast root ", opts.rootRank, " out of range");
    Call call(c10d::OpType::BROADCAST, "broadcast", opts.timeout);
    at::Tensor buf = t.is_contiguous() ? t : t.contiguous();
    void* p = buf.data_ptr();
    size_t n = buf.nbytes();
    int root = static_cast<int>(opts.rootRank);
    call.fn = [p, n, root](Transport& tr) { tr.broadcast(p, n, root); };
    copy_back(call, buf, t);
    call.outputs = tensors;
    return submit(std::move(call));
  }

  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override {
    Call call(c10d::OpType::_ALLGATHER_BASE, "all_gather_into_tensor", opts.timeout);
    add_allgather(call, output, input);
    call.outputs = {output};
    return submit(std::move(call));
  }

  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override {
    TORCH_CHECK(outputs.size() == inputs.size(), "neuron backend: allgather_into_tensor_coalesced "
                "needs as many outputs as inputs");
    Call call(c10d::OpType::COALESCED, "all_gather_into_tensor_coalesced", opts.timeout);
    for (size_t i = 0; i < inputs.size(); ++i) add_allgather(call, outputs[i], inputs[i]);
    call.outputs = outputs;
    return submit(std::move(call));
  }

  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override {
    TORCH_CHECK(inputs.size() == 1 && outputs.size() == 1,
                "neuron backend: allgather takes one tensor per process");
    at::Tensor in = inputs[0];
    auto outs = outputs[0];
    TORCH_CHECK(static_cast<int>(outs.size()) == size_, "neuron backend: all_gather needs ",
                size_, " output tensors, got ", outs.size());
    for (const auto& o : outs) {
      check_neuron(o, "all_gather");
      TORCH_CHECK(o.numel() == in.numel() && o.scalar_type() == in.scalar_type(),
                  "neuron backend: all_gather output tensors must match the input's size and "
                  "dtype");
    }
    Call call(c10d::OpType::ALLGATHER, "all_gather", opts.timeout);
    at::Tensor flat = at::empty({size_ * in.numel()}, in.options());
    add_allgather(call, flat, in);
    int world = size_;
    call.post.push_back([outs, flat, world]() mutable {
      int64_t n = flat.numel() / world;
      for (int r = 0; r < world; ++r) outs[r].copy_(flat.narrow(0, r * n, n).view(outs[r].sizes()));
    });
    for (const auto& o : outs) call.used.push_back(o);
    call.outputs = outs;
    return submit(std::move(call));
  }

  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override {
    Call call(c10d::OpType::_REDUCE_SCATTER_BASE, "reduce_scatter_tensor", opts.timeout);
    add_reduce_scatter(call, output, input, opts.reduceOp);
    call.outputs = {output};
    return submit(std::move(call));
  }

  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override {
    TORCH_CHECK(outputs.size() == inputs.size(), "neuron backend: reduce_scatter_tensor_coalesced "
                "needs as many outputs as inputs");
    Call call(c10d::OpType::COALESCED, "reduce_scatter_tensor_coalesced", opts.timeout);
    for (size_t i = 0; i < inputs.size(); ++i) {
      add_reduce_scatter(call, outputs[i], inputs[i], opts.reduceOp);
    }
    call.outputs = outputs;
    return submit(std::move(call));
  }

  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override {
    TORCH_CHECK(inputs.size() == 1 && outputs.size() == 1,
                "neuron backend: reduce_scatter takes one tensor per process");
    auto& ins = inputs[0];
    at::Tensor out = outputs[0];
    TORCH_CHECK(static_cast<int>(ins.size()) == size_, "neuron backend: reduce_scatter needs ",
                size_, " input tensors, got ", ins.size());
    std::vector<at::Tensor> flat_parts;
    for (const auto& t : ins) {
      check_neuron(t, "reduce_scatter");
      TORCH_CHECK(t.numel() == out.numel() && t.scalar_type() == out.scalar_type(),
                  "neuron backend: reduce_scatter input tensors must match the output's size and "
                  "dtype");
      flat_parts.push_back(t.reshape({-1}));
    }
    Call call(c10d::OpType::REDUCE_SCATTER, "reduce_scatter", opts.timeout);
    at::Tensor flat = at::cat(flat_parts);
    add_reduce_scatter(call, out, flat, opts.reduceOp);
    call.outputs = outputs;
    return submit(std::move(call));
  }

  // all_to_all_single: splits along dim 0 (empty = even), uneven allowed.
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_splits,
                                               std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions& opts) override {
    Call call(c10d::OpType::ALLTOALL_BASE, "all_to_all_single", opts.timeout);
    add_alltoall(call, output, input, output_splits, input_splits);
    call.outputs = {output};
    return submit(std::move(call));
  }

  // all_to_all (lists): tensor j of the input goes to rank j.
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override {
    const char* coll = "all_to_all";
    TORCH_CHECK(static_cast<int>(inputs.size()) == size_ &&
                    static_cast<int>(outputs.size()) == size_,
                "neuron backend: all_to_all needs ", size_, " input and output tensors");
    std::vector<at::Tensor> flat_in;
    std::vector<int64_t> in_splits, out_splits;
    for (int j = 0; j < size_; ++j) {
      check_neuron(inputs[j], coll);
      check_neuron(outputs[j], coll);
      TORCH_CHECK(inputs[j].scalar_type() == inputs[0].scalar_type() &&
                      outputs[j].scalar_type() == inputs[0].scalar_type(),
                  "neuron backend: all_to_all tensors must share one dtype");
      flat_in.push_back(inputs[j].reshape({-1}));
      in_splits.push_back(inputs[j].numel());
      out_splits.push_back(outputs[j].numel());
    }
    Call call(c10d::OpType::ALLTOALL, coll, opts.timeout);
    at::Tensor in = at::cat(flat_in);
    int64_t total = 0;
    for (auto n : out_splits) total += n;
    at::Tensor out = at::empty({total}, in.options());
    add_alltoall(call, out, in, out_splits, in_splits);
    auto outs = outputs;
    call.post.push_back([outs, out, out_splits]() mutable {
      int64_t off = 0;
      for (size_t j = 0; j < outs.size(); ++j) {
        outs[j].copy_(out.narrow(0, off, out_splits[j]).view(outs[j].sizes()));
        off += out_splits[j];
      }
    });
    for (const auto& o : outs) call.used.push_back(o);
    call.outputs = outputs;
    return submit(std::move(call));
  }

  // gather and scatter are all_to_alls where only the root receives (sends).
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override {
    const char* coll = "gather";
    TORCH_CHECK(inputs.size() == 1, "neuron backend: gather takes one tensor per process");
    int root = static_cast<int>(opts.rootRank);
    TORCH_CHECK(root >= 0 && root < size_, "neuron backend: gather root ", root, " out of range");
    at::Tensor in = inputs[0];
    check_neuron(in, coll);
    bool is_root = rank_ == root;
    std::vector<at::Tensor> outs;
    if (is_root) {
      TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == size_,
                  "neuron backend: gather needs ", size_, " output tensors on the root");
      for (const auto& o : outputs[0]) {
        check_neuron(o, coll);
        TORCH_CHECK(o.numel() == in.numel() && o.scalar_type() == in.scalar_type(),
                    "neuron backend: gather output tensors must match the input's size and dtype");
      }
      outs = outputs[0];
    }
    Call call(c10d::OpType::GATHER, coll, opts.timeout);
    in = in.contiguous();
    size_t n = in.nbytes();
    std::vector<size_t> sb(size_, 0), sd(size_, 0), rb(size_, 0), rd(size_, 0);
    sb[root] = n;
    at::Tensor flat = at::empty({is_root ? size_ * in.numel() : 0}, in.options());
    if (is_root) {
      for (int q = 0; q < size_; ++q) {
        rb[q] = n;
        rd[q] = q * n;
      }
    }
    add_raw_alltoall(call, in, flat, std::move(sb), std::move(sd), std::move(rb), std::move(rd));
    if (is_root) {
      int64_t numel = in.numel();
      call.post.push_back([outs, flat, numel]() mutable {
        for (size_t q = 0; q < outs.size(); ++q) {
          outs[q].copy_(flat.narrow(0, q * numel, numel).view(outs[q].sizes()));
        }
      });
      for (const auto& o : outs) call.used.push_back(o);
    }
    call.outputs = outs;
    return submit(std::move(call));
  }

  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override {
    const char* coll = "scatter";
    TORCH_CHECK(outputs.size() == 1, "neuron backend: scatter takes one tensor per process");
    int root = static_cast<int>(opts.rootRank);
    TORCH_CHECK(root >= 0 && root < size_, "neuron backend: scatter root ", root, " out of range");
    at::Tensor output = outputs[0];
    check_neuron(output, coll);
    bool is_root = rank_ == root;
    std::vector<at::Tensor> parts;
    if (is_root) {
      TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_,
                  "neuron backend: scatter needs ", size_, " input tensors on the root");
      for (const auto& t : inputs[0]) {
        check_neuron(t, coll);
        TORCH_CHECK(t.numel() == output.numel() && t.scalar_type() == output.scalar_type(),
                    "neuron backend: scatter input tensors must match the output's size and dtype");
        parts.push_back(t.reshape({-1}));
      }
    }
    Call call(c10d::OpType::SCATTER, coll, opts.timeout);
    at::Tensor flat = is_root ? at::cat(parts) : at::empty({0}, output.options());
    at::Tensor out = output.is_contiguous() ? output : at::empty_like(output, at::MemoryFormat::Contiguous);
    size_t n = out.nbytes();
    std::vector<size_t> sb(size_, 0), sd(size_, 0), rb(size_, 0), rd(size_, 0);
    rb[root] = n;
    if (is_root) {
      for (int j = 0; j < size_; ++j) {
        sb[j] = n;
        sd[j] = j * n;
      }
    }
    add_raw_alltoall(call, flat, out, std::move(sb), std::move(sd), std::move(rb), std::move(rd));
    copy_back(call, out, output);
    call.outputs = outputs;
    return submit(std::move(call));
  }

  // Point to point.  Messages between two ranks arrive in send order; tags
  // are not matched (a first version: NCCL does not match them either).
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst,
                                      int /*tag*/) override {
    TORCH_CHECK(tensors.size() == 1, "neuron backend: send takes one tensor");
    check_neuron(tensors[0], "send");
    return p2p(c10d::OpType::SEND, "send", tensors[0], dst, true);
  }

  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src,
                                      int /*tag*/) override {
    TORCH_CHECK(tensors.size() == 1, "neuron backend: recv takes one tensor");
    check_neuron(tensors[0], "recv");
    return p2p(c10d::OpType::RECV, "recv", tensors[0], src, false);
  }

  // Coalescing (batch_isend_irecv, _coalescing_manager): collectives are
  // queued on the communication stream as they come; sends and receives
  // wait for endCoalescing and run as one batch, so a ring exchange of any
  // size cannot deadlock.  The batch's Work (a marker when there is no
  // point-to-point op) completes after everything queued before it, and
  // fails if any of it failed (a failure poisons the transport).
  bool supportsCoalescing() const override { return true; }

  void startCoalescing() override {
    coalescing_ = true;
    pending_.clear();
  }

  c10::intrusive_ptr<c10d::Work> endCoalescing() override {
    coalescing_ = false;
    std::vector<P2P> ops;
    ops.swap(pending_);
    Call call(c10d::OpType::COALESCED, ops.empty() ? "coalesced" : "batch_isend_irecv",
              c10d::kUnsetTimeout);
    std::vector<ncomm_p2p_op> batch;
    for (auto& op : ops) {
      batch.push_back({op.peer, op.is_send ? 1 : 0, op.buf.data_ptr(), op.buf.nbytes()});
      call.used.push_back(op.buf);
      if (!op.is_send) copy_back(call, op.buf, op.user);
      call.outputs.push_back(op.user);
    }
    if (!batch.empty()) call.fn = [batch](Transport& tr) { tr.p2p(batch); };
    return submit(std::move(call));
  }

  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override {
    Call call(c10d::OpType::BARRIER, "barrier", opts.timeout);
    call.fn = [](Transport& tr) { tr.barrier(); };
    call.host_wait = true;
    return submit(std::move(call));
  }

 private:
  // One collective as the communication stream will run it.
  struct Call {
    Call(c10d::OpType t, const char* c, std::chrono::milliseconds to)
        : type(t), coll(c), timeout(to) {}
    c10d::OpType type;
    const char* coll;
    std::chrono::milliseconds timeout;
    std::vector<at::Tensor> used;     // every tensor the stream touches
    std::vector<at::Tensor> outputs;  // the Work's result and future value
    std::function<void(Transport&)> fn;           // host pointers only
    std::vector<std::function<void()>> post;      // ATen ops on the stream afterwards
    bool host_wait = false;           // wait() blocks the host (barrier)
  };

  c10::DeviceIndex device_of(const Call& call) {
    for (const auto& t : call.used) {
      if (t.defined()) return t.device().index();
    }
    if (auto d = getBoundDeviceId()) return d->index();
    return current_device();
  }

  nrt_stream* comm_stream(c10::DeviceIndex device) {
    std::lock_guard<std::mutex> g(mutex_);
    auto it = streams_.find(device);
    if (it != streams_.end()) return it->second;
    nrt_stream* s = nullptr;
    NEURON_CHECK(nrt_stream_from_pool(device, NRT_PRIORITY_HIGH, &s));
    streams_[device] = s;
    return s;
  }

  c10::intrusive_ptr<c10d::Work> submit(Call&& call) {
    std::string prior = transport_->failure();
    if (!prior.empty()) {
      throw_dist_error(std::string("neuron backend: ") + call.coll +
                       ": communicator aborted by an earlier failure (" + prior + ")");
    }
    const c10::DeviceIndex device = device_of(call);
    nrt_stream* user = current_stream(device);
    nrt_stream* comm = comm_stream(device);
    c10::Stream comm_c10 = to_c10_stream(comm);
    // The allocator keeps these blocks until the stream has run every task
    // queued before their free (so recording before the launch is enough).
    for (auto& t : call.used) record(t, comm_c10);
    for (auto& t : call.outputs) record(t, comm_c10);
    // The communication stream waits for everything queued so far on the
    // caller's stream (the inputs and their staging copies).
    if (comm != user) stream_waits_for(comm, user);
    // The engine needs every rank's collectives in issue order.  A backend
    // whose tensors are on another device than the last collective's (a
    // worker on neuron:1 whose process group is bound to neuron:0: its
    // barrier runs on neuron:0's stream) would otherwise run two of them at
    // once on two stream workers, and a barrier overtook an all_reduce.
    nrt_stream* previous = last_comm_.exchange(comm);
    if (previous && previous != comm) stream_waits_for(comm, previous);
    auto state = std::make_shared<WorkState>(call.coll);
    auto* hc = new HostCall{transport_, state, std::move(call.fn), timeout_ms(call.timeout)};
    nrt_task task;
    task.kernel = NRT_KERNEL_HOST_FN;
    task.n_operands = 0;
    task.name = "neuron::collective";
    task.correlation = 0;
    *reinterpret_cast<nrt_host_fn_params*>(task.params) = nrt_host_fn_params{&HostCall::run, hc};
    nrt_status st = nrt_launch(comm, &task);
    if (st != NRT_SUCCESS) {
      delete hc;
      raise_status(st, "nrt_launch(collective)");
    }
    auto future = c10::make_intrusive<c10::ivalue::Future>(
        c10::ListType::create(c10::TensorType::get()),
        std::vector<c10::Device>{c10::Device(c10::DeviceType::PrivateUse1, device)});
    {
      c10::StreamGuard guard(comm_c10);
      for (auto& f : call.post) f();
      future->markCompleted(c10::IValue(call.outputs));
    }
    nrt_event* end = nullptr;
    NEURON_CHECK(nrt_event_create(0, &end));
    st = nrt_event_record(end, comm);
    if (st != NRT_SUCCESS) {
      (void)nrt_event_destroy(end);
      raise_status(st, "neuron backend: event record");
    }
    return c10::make_intrusive<NeuronWork>(rank_, call.type, std::move(state), end, device,
                                           std::move(call.outputs), std::move(future),
                                           call.host_wait || blocking_wait_);
  }

  // `waiter` runs nothing more until `stream` has run what is queued on it now.
  static void stream_waits_for(nrt_stream* waiter, nrt_stream* stream) {
    nrt_event* ready = nullptr;
    NEURON_CHECK(nrt_event_create(0, &ready));
    nrt_status st = nrt_event_record(ready, stream);
    if (st == NRT_SUCCESS) st = nrt_stream_wait_event(waiter, ready);
    (void)nrt_event_destroy(ready);  // safe while the stream still waits on it
    if (st != NRT_SUCCESS) raise_status(st, "neuron backend: stream wait");
  }

  // record_stream; memory the caching allocator does not own (from_blob)
  // is the owner's business, as in CUDA's allocator.
  static void record(const at::Tensor& t, const c10::Stream& s) {
    if (!t.defined() || !t.has_storage() || t.storage().data() == nullptr) return;
    if (t.storage().data_ptr().get_deleter() !=
        c10::GetAllocator(c10::kPrivateUse1)->raw_deleter()) {
      return;
    }
    at::Tensor(t).record_stream(s);
  }

  // buf is a contiguous stand-in for the user's t: copy it back afterwards.
  static void copy_back(Call& call, const at::Tensor& buf, const at::Tensor& t) {
    call.used.push_back(buf);
    call.used.push_back(t);
    if (!buf.is_same(t)) {
      call.post.push_back([t, buf]() mutable { t.copy_(buf); });
    }
  }

  void add_allreduce(Call& call, const at::Tensor& t, const c10d::ReduceOp& rop) {
    const char* coll = call.coll;
    check_neuron(t, coll);
    ncomm_op op = to_op(rop, coll);
    at::Tensor buf = t.is_contiguous() ? t : t.contiguous();
    if (rop.op_ == c10d::ReduceOp::PREMUL_SUM) buf.copy_(premul(buf, rop));
    Flat f = flat_for_reduce(buf, op, coll);
    void* p = buf.data_ptr();
    call.fn = chain(std::move(call.fn), [p, f, op](Transport& tr) {
      tr.all_reduce(p, f.count, f.dtype, op);
    });
    copy_back(call, buf, t);
  }

  void add_allgather(Call& call, const at::Tensor& output, const at::Tensor& input) {
    const char* coll = call.coll;
    check_neuron(output, coll);
    check_neuron(input, coll);
    TORCH_CHECK(output.scalar_type() == input.scalar_type(), "neuron backend: ", coll,
                ": output dtype ", output.scalar_type(), " differs from input dtype ",
                input.scalar_type());
    TORCH_CHECK(output.numel() == input.numel() * size_, "neuron backend: ", coll,
                ": output must have world_size (", size_, ") times the input's elements, got ",
                output.numel(), " vs ", input.numel());
    at::Tensor in = input.is_contiguous() ? input : input.contiguous();
    at::Tensor out = output.is_contiguous() ? output : at::empty_like(output, at::MemoryFormat::Contiguous);
    const void* ip = in.data_ptr();
    void* op = out.data_ptr();
    size_t n = in.nbytes();
    call.fn = chain(std::move(call.fn), [ip, op, n](Transport& tr) { tr.all_gather(ip, op, n); });
    call.used.push_back(in);
    copy_back(call, out, output);
  }

  void add_reduce_scatter(Call& call, const at::Tensor& output, const at::Tensor& input,
                          const c10d::ReduceOp& rop) {
    const char* coll = call.coll;
    check_neuron(output, coll);
    check_neuron(input, coll);
    ncomm_op op = to_op(rop, coll);
    TORCH_CHECK(output.scalar_type() == input.scalar_type(), "neuron backend: ", coll,
                ": output dtype ", output.scalar_type(), " differs from input dtype ",
                input.scalar_type());
    TORCH_CHECK(input.numel() == output.numel() * size_, "neuron backend: ", coll,
                ": input must have world_size (", size_, ") times the output's elements, got ",
                input.numel(), " vs ", output.numel());
    at::Tensor in = input.is_contiguous() ? input : input.contiguous();
    if (rop.op_ == c10d::ReduceOp::PREMUL_SUM) in = premul(in, rop).contiguous();
    at::Tensor out = output.is_contiguous() ? output : at::empty_like(output, at::MemoryFormat::Contiguous);
    Flat f = flat_for_reduce(out, op, coll);
    const void* ip = in.data_ptr();
    void* outp = out.data_ptr();
    call.fn = chain(std::move(call.fn), [ip, outp, f, op](Transport& tr) {
      tr.reduce_scatter(ip, outp, f.count, f.dtype, op);
    });
    call.used.push_back(in);
    copy_back(call, out, output);
  }

  void add_alltoall(Call& call, const at::Tensor& output, const at::Tensor& input,
                    const std::vector<int64_t>& output_splits,
                    const std::vector<int64_t>& input_splits) {
    const char* coll = call.coll;
    check_neuron(output, coll);
    check_neuron(input, coll);
    TORCH_CHECK(output.scalar_type() == input.scalar_type(), "neuron backend: ", coll,
                ": output dtype ", output.scalar_type(), " differs from input dtype ",
                input.scalar_type());
    std::vector<size_t> sb, sd, rb, rd;
    splits_to_bytes(input, input_splits, sb, sd, coll);
    splits_to_bytes(output, output_splits, rb, rd, coll);
    at::Tensor in = input.is_contiguous() ? input : input.contiguous();
    at::Tensor out = output.is_contiguous() ? output : at::empty_like(output, at::MemoryFormat::Contiguous);
    add_raw_alltoall(call, in, out, std::move(sb), std::move(sd), std::move(rb), std::move(rd));
    copy_back(call, out, output);
  }

  // in and out contiguous; byte counts and offsets per rank.
  static void add_raw_alltoall(Call& call, const at::Tensor& in, const at::Tensor& out,
                               std::vector<size_t> sb, std::vector<size_t> sd,
                               std::vector<size_t> rb, std::vector<size_t> rd) {
    const void* ip = in.data_ptr();
    void* op = out.data_ptr();
    call.fn = chain(std::move(call.fn), [ip, op, sb, sd, rb, rd](Transport& tr) {
      tr.all_to_all(ip, sb.data(), sd.data(), op, rb.data(), rd.data());
    });
    call.used.push_back(in);
    call.used.push_back(out);
  }

  // first, then next (the coalesced forms run several transport calls in
  // one task).
  static std::function<void(Transport&)> chain(std::function<void(Transport&)> first,
                                               std::function<void(Transport&)> next) {
    if (!first) return next;
    return [first, next](Transport& tr) {
      first(tr);
      next(tr);
    };
  }

  c10::intrusive_ptr<c10d::Work> p2p(c10d::OpType type, const char* coll, const at::Tensor& t,
                                     int peer, bool is_send) {
    at::Tensor buf = is_send ? t.contiguous()
                             : (t.is_contiguous() ? t : at::empty_like(t, at::MemoryFormat::Contiguous));
    if (coalescing_) {
      pending_.push_back({peer, is_send, buf, t});
      // The batch's Work (endCoalescing) is the one to wait on; this one is
      // complete at once (what batch_isend_irecv's per-op works do in NCCL
      // is to wait for the whole batch: that is what torch hands out).
      Call call(type, coll, c10d::kUnsetTimeout);
      call.outputs = {t};
      call.used.push_back(t);
      return submit(std::move(call));
    }
    Call call(type, coll, c10d::kUnsetTimeout);
    ncomm_p2p_op op{peer, is_send ? 1 : 0, buf.data_ptr(), buf.nbytes()};
    call.fn = [op](Transport& tr) { tr.p2p({op}); };
    call.used.push_back(buf);
    if (!is_send) copy_back(call, buf, t);
    call.outputs = {t};
    return submit(std::move(call));
  }

  int64_t timeout_ms(std::chrono::milliseconds t) const {
    auto use = t == c10d::kUnsetTimeout ? timeout_ : t;
    return std::max<int64_t>(1, static_cast<int64_t>(use.count()));
  }

  // Split sizes (rows of dim 0; empty = even) -> byte counts and offsets.
  void splits_to_bytes(const at::Tensor& t, const std::vector<int64_t>& splits,
                       std::vector<size_t>& bytes, std::vector<size_t>& displs, const char* coll) {
    int64_t rows = t.dim() == 0 ? 1 : t.size(0);
    int64_t row_bytes = rows == 0 ? 0 : static_cast<int64_t>(t.nbytes()) / rows;
    bytes.assign(size_, 0);
    displs.assign(size_, 0);
    if (splits.empty()) {
      TORCH_CHECK(rows % size_ == 0, "neuron backend: ", coll, ": dim 0 (", rows,
                  ") is not divisible by the world size (", size_, ")");
      for (int j = 0; j < size_; ++j) bytes[j] = static_cast<size_t>(rows / size_ * row_bytes);
    } else {
      TORCH_CHECK(static_cast<int>(splits.size()) == size_, "neuron backend: ", coll,
                  ": expected ", size_, " split sizes, got ", splits.size());
      int64_t sum = 0;
      for (int j = 0; j < size_; ++j) {
        TORCH_CHECK(splits[j] >= 0, "neuron backend: ", coll, ": negative split size");
        sum += splits[j];
        bytes[j] = static_cast<size_t>(splits[j] * row_bytes);
      }
      TORCH_CHECK(sum == rows, "neuron backend: ", coll, ": split sizes sum to ", sum,
                  " but dim 0 is ", rows);
    }
    for (int j = 1; j < size_; ++j) displs[j] = displs[j - 1] + bytes[j - 1];
  }

  struct P2P {
    int peer;
    bool is_send;
    at::Tensor buf;   // contiguous (the user's tensor or a copy)
    at::Tensor user;  // the user's tensor (receives copy back into it)
  };
  bool coalescing_ = false;
  std::vector<P2P> pending_;

  std::shared_ptr<Transport> transport_;
  std::chrono::milliseconds timeout_;
  bool blocking_wait_;
  std::mutex mutex_;
  std::unordered_map<c10::DeviceIndex, nrt_stream*> streams_;
  std::atomic<nrt_stream*> last_comm_{nullptr};  // the last collective's stream
};

}  // namespace

void init_distributed(py::module& m) {
  m.def(
      "_create_neuron_backend",
      [](const std::string& key, int rank, int size, std::chrono::milliseconds timeout,
         int64_t chunk_bytes, bool blocking_wait) -> c10::intrusive_ptr<c10d::Backend> {
        char err[512] = {0};
        ncomm* c = nullptr;
        int rc = ncomm_create(key.c_str(), rank, size, static_cast<size_t>(chunk_bytes),
                              static_cast<int64_t>(timeout.count()), &c, err, sizeof err);
        if (rc != 0) throw_dist_error(std::string("neuron backend: ") + err);
        return c10::make_intrusive<NeuronBackend>(std::make_shared<ShmTransport>(c), rank, size,
                                                  timeout, blocking_wait);
      },
      py::arg("key"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
      py::arg("chunk_bytes") = 0, py::arg("blocking_wait") = false,
      py::call_guard<py::gil_scoped_release>());
  m.def(
      "_create_neuron_backend_over",
      [](c10::intrusive_ptr<c10d::Backend> host_backend, int rank, int size,
         std::chrono::milliseconds timeout, bool blocking_wait) -> c10::intrusive_ptr<c10d::Backend> {
        return c10::make_intrusive<NeuronBackend>(
            std::make_shared<GlooTransport>(std::move(host_backend), rank, size), rank, size,
            timeout, blocking_wait);
      },
      py::arg("host_backend"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
      py::arg("blocking_wait") = false, py::call_guard<py::gil_scoped_release>());
}

}  // namespace torch_neuronx
