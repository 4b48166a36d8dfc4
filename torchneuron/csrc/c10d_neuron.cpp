// c10d_neuron.cpp — the `neuron` c10d backend (issue 6, first slice): a
// c10d::Backend whose collectives run the shared-memory engine in comm/
// (neuron_comm.h) on the tensors' device memory, which is host-addressable in
// this virtual device.  Python registers it (torchneuron/distributed.py)
// with Backend.register_backend("neuron", ..., devices=["neuron"]).
//
// Decisions (first version, see the issue for what is left):
//  - Synchronous: each collective synchronises the current stream of the
//    tensor's device (so every kernel that produced the inputs has run), runs
//    the engine on the calling host thread and returns a completed Work whose
//    future already holds the outputs.  Later kernels are launched after the
//    call returns, so they see the results: stream order holds without
//    events.  A communication stream (overlap with compute) comes later.
//  - Non-contiguous tensors and the list forms (allgather, reduce_scatter)
//    go through one contiguous device buffer and copy_ (launched on the
//    stream, ordered like any op), so the engine only sees flat memory.
//  - Complex tensors are reduced as (real, imag) pairs (sum/avg), as NCCL does.
//    (torch.distributed.all_reduce itself passes view_as_real(t), which is
//    a CPU-fallback copy on neuron today, so complex all_reduce through the
//    Python API is lost until view_as_real is a native view; see report.)
//  - Engine failures (timeout, dead rank, mismatch) become DistBackendError
//    with the engine's message, which names the collective.
//  - Implemented: allreduce (sum, avg, product, min, max, premul_sum) and
//    allreduce_coalesced, reduce, broadcast, allgather, _allgather_base and
//    its coalesced form, reduce_scatter, _reduce_scatter_base and its
//    coalesced form, alltoall_base (uneven splits), alltoall, gather,
//    scatter (both as all_to_alls with one root), send/recv (no tag
//    matching: per-pair FIFO), coalescing of sends/receives
//    (batch_isend_irecv), barrier.  The rest (recvAnysource,
//    monitoredBarrier, bitwise reduce ops, sparse) keep c10d::Backend's
//    default error ("Backend neuron does not support <collective>").
#include <mutex>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>

#include "neuron_check.h"
#include "neuron_comm.h"
#include "neuron_stream.h"

namespace py = pybind11;

namespace torchneuron {
namespace {

class NeuronWork final : public c10d::Work {
 public:
  NeuronWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs)
      : c10d::Work(rank, type), outputs_(std::move(outputs)) {
    std::vector<c10::Device> devices;
    for (const auto& t : outputs_) {
      if (std::find(devices.begin(), devices.end(), t.device()) == devices.end()) {
        devices.push_back(t.device());
      }
    }
    future_ = c10::make_intrusive<c10::ivalue::Future>(
        c10::ListType::create(c10::TensorType::get()), devices);
    future_->markCompleted(c10::IValue(outputs_));
    finish();
  }
  bool isCompleted() override { return true; }
  bool isSuccess() const override { return true; }
  bool wait(std::chrono::milliseconds /*timeout*/) override { return true; }
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
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
  NeuronBackend(const std::string& key, int rank, int size, std::chrono::milliseconds timeout,
                int64_t chunk_bytes)
      : c10d::Backend(rank, size), timeout_(timeout) {
    char err[512] = {0};
    ncomm* c = nullptr;
    int rc = ncomm_create(key.c_str(), rank, size, static_cast<size_t>(chunk_bytes),
                          static_cast<int64_t>(timeout.count()), &c, err, sizeof err);
    if (rc != 0) C10_THROW_ERROR(DistBackendError, std::string("neuron backend: ") + err);
    comm_ = c;
  }
  ~NeuronBackend() override { ncomm_destroy(comm_); }

  const std::string getBackendName() const override { return "neuron"; }

  void setTimeout(std::chrono::milliseconds timeout) override { timeout_ = timeout; }

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override {
    TORCH_CHECK(tensors.size() == 1, "neuron backend: allreduce takes one tensor per process");
    run_allreduce(tensors[0], opts.reduceOp, opts.timeout, "all_reduce");
    return done(c10d::OpType::ALLREDUCE, tensors);
  }

  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override {
    for (auto& t : tensors) run_allreduce(t, opts.reduceOp, opts.timeout, "all_reduce_coalesced");
    return done(c10d::OpType::ALLREDUCE_COALESCED, tensors);
  }

  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override {
    TORCH_CHECK(tensors.size() == 1, "neuron backend: reduce takes one tensor per process");
    // All ranks reduce (a copy); only the root keeps the result.
    at::Tensor& t = tensors[0];
    check_neuron(t, "reduce");
    at::Tensor tmp = t.clone(at::MemoryFormat::Contiguous);
    run_allreduce(tmp, opts.reduceOp, opts.timeout, "reduce");
    if (opts.rootRank == rank_) t.copy_(tmp);
    return done(c10d::OpType::REDUCE, tensors);
  }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override {
    TORCH_CHECK(tensors.size() == 1, "neuron backend: broadcast takes one tensor per process");
    at::Tensor& t = tensors[0];
    check_neuron(t, "broadcast");
    TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < size_,
                "neuron backend: broadcast root ", opts.rootRank, " out of range");
    at::Tensor buf = t.is_contiguous() ? t : t.contiguous();
    {
      Engine e(this, buf, opts.timeout);
      e.check(ncomm_broadcast(comm_, buf.data_ptr(), buf.nbytes(), static_cast<int>(opts.rootRank)));
    }
    if (!buf.is_same(t)) t.copy_(buf);
    return done(c10d::OpType::BROADCAST, tensors);
  }

  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override {
    run_allgather(output, input, opts.timeout, "all_gather_into_tensor");
    std::vector<at::Tensor> outs{output};
    return done(c10d::OpType::_ALLGATHER_BASE, outs);
  }

  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override {
    TORCH_CHECK(outputs.size() == inputs.size(), "neuron backend: allgather_into_tensor_coalesced "
                "needs as many outputs as inputs");
    for (size_t i = 0; i < inputs.size(); ++i) {
      run_allgather(outputs[i], inputs[i], opts.timeout, "all_gather_into_tensor_coalesced");
    }
    return done(c10d::OpType::COALESCED, outputs);
  }

  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override {
    TORCH_CHECK(inputs.size() == 1 && outputs.size() == 1,
                "neuron backend: allgather takes one tensor per process");
    at::Tensor& in = inputs[0];
    auto& outs = outputs[0];
    TORCH_CHECK(static_cast<int>(outs.size()) == size_, "neuron backend: all_gather needs ",
                size_, " output tensors, got ", outs.size());
    for (const auto& o : outs) {
      check_neuron(o, "all_gather");
      TORCH_CHECK(o.numel() == in.numel() && o.scalar_type() == in.scalar_type(),
                  "neuron backend: all_gather output tensors must match the input's size and "
                  "dtype");
    }
    at::Tensor flat = at::empty({size_ * in.numel()}, in.options());
    run_allgather(flat, in, opts.timeout, "all_gather");
    for (int r = 0; r < size_; ++r) {
      outs[r].copy_(flat.narrow(0, r * in.numel(), in.numel()).view(outs[r].sizes()));
    }
    return done(c10d::OpType::ALLGATHER, outs);
  }

  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override {
    run_reduce_scatter(output, input, opts.reduceOp, opts.timeout, "reduce_scatter_tensor");
    std::vector<at::Tensor> outs{output};
    return done(c10d::OpType::_REDUCE_SCATTER_BASE, outs);
  }

  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override {
    TORCH_CHECK(outputs.size() == inputs.size(), "neuron backend: reduce_scatter_tensor_coalesced "
                "needs as many outputs as inputs");
    for (size_t i = 0; i < inputs.size(); ++i) {
      run_reduce_scatter(outputs[i], inputs[i], opts.reduceOp, opts.timeout,
                         "reduce_scatter_tensor_coalesced");
    }
    return done(c10d::OpType::COALESCED, outputs);
  }

  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override {
    TORCH_CHECK(inputs.size() == 1 && outputs.size() == 1,
                "neuron backend: reduce_scatter takes one tensor per process");
    auto& ins = inputs[0];
    at::Tensor& out = outputs[0];
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
    at::Tensor flat = at::cat(flat_parts);
    run_reduce_scatter(out, flat, opts.reduceOp, opts.timeout, "reduce_scatter");
    return done(c10d::OpType::REDUCE_SCATTER, outputs);
  }

  // all_to_all_single: splits along dim 0 (empty = even), uneven allowed.
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_splits,
                                               std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions& opts) override {
    const char* coll = "all_to_all_single";
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
    {
      Engine e(this, in, opts.timeout);
      e.check(ncomm_all_to_all(comm_, in.data_ptr(), sb.data(), sd.data(), out.data_ptr(),
                               rb.data(), rd.data()));
    }
    if (!out.is_same(output)) output.copy_(out);
    std::vector<at::Tensor> outs{output};
    return done(c10d::OpType::ALLTOALL_BASE, outs);
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
    at::Tensor in = at::cat(flat_in);
    int64_t total = 0;
    for (auto n : out_splits) total += n;
    at::Tensor out = at::empty({total}, in.options());
    alltoall_base(out, in, out_splits, in_splits, opts);
    int64_t off = 0;
    for (int j = 0; j < size_; ++j) {
      outputs[j].copy_(out.narrow(0, off, out_splits[j]).view(outputs[j].sizes()));
      off += out_splits[j];
    }
    return done(c10d::OpType::ALLTOALL, outputs);
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
    in = in.contiguous();
    bool is_root = rank_ == root;
    if (is_root) {
      TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == size_,
                  "neuron backend: gather needs ", size_, " output tensors on the root");
      for (const auto& o : outputs[0]) {
        check_neuron(o, coll);
        TORCH_CHECK(o.numel() == in.numel() && o.scalar_type() == in.scalar_type(),
                    "neuron backend: gather output tensors must match the input's size and dtype");
      }
    }
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
    {
      Engine e(this, in, opts.timeout);
      e.check(ncomm_all_to_all(comm_, in.data_ptr(), sb.data(), sd.data(),
                               is_root ? flat.data_ptr() : nullptr, rb.data(), rd.data()));
    }
    std::vector<at::Tensor> outs;
    if (is_root) {
      for (int q = 0; q < size_; ++q) {
        auto& o = outputs[0][q];
        o.copy_(flat.narrow(0, q * in.numel(), in.numel()).view(o.sizes()));
      }
      outs = outputs[0];
    }
    return done(c10d::OpType::GATHER, outs);
  }

  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override {
    const char* coll = "scatter";
    TORCH_CHECK(outputs.size() == 1, "neuron backend: scatter takes one tensor per process");
    int root = static_cast<int>(opts.rootRank);
    TORCH_CHECK(root >= 0 && root < size_, "neuron backend: scatter root ", root, " out of range");
    at::Tensor& output = outputs[0];
    check_neuron(output, coll);
    bool is_root = rank_ == root;
    at::Tensor flat;
    if (is_root) {
      TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_,
                  "neuron backend: scatter needs ", size_, " input tensors on the root");
      std::vector<at::Tensor> parts;
      for (const auto& t : inputs[0]) {
        check_neuron(t, coll);
        TORCH_CHECK(t.numel() == output.numel() && t.scalar_type() == output.scalar_type(),
                    "neuron backend: scatter input tensors must match the output's size and dtype");
        parts.push_back(t.reshape({-1}));
      }
      flat = at::cat(parts);
    } else {
      flat = at::empty({0}, output.options());
    }
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
    {
      Engine e(this, out, opts.timeout);
      e.check(ncomm_all_to_all(comm_, flat.data_ptr(), sb.data(), sd.data(), out.data_ptr(),
                               rb.data(), rd.data()));
    }
    if (!out.is_same(output)) output.copy_(out);
    return done(c10d::OpType::SCATTER, outputs);
  }

  // Point to point.  Messages between two ranks arrive in send order; tags
  // are not matched (a first version: NCCL does not match them either).
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst,
                                      int /*tag*/) override {
    TORCH_CHECK(tensors.size() == 1, "neuron backend: send takes one tensor");
    at::Tensor& t = tensors[0];
    check_neuron(t, "send");
    at::Tensor buf = t.contiguous();
    if (coalescing_) {
      pending_.push_back({dst, true, buf, t});
      return done(c10d::OpType::SEND, tensors);
    }
    {
      Engine e(this, buf, c10d::kUnsetTimeout);
      e.check(ncomm_send(comm_, buf.data_ptr(), buf.nbytes(), dst));
    }
    return done(c10d::OpType::SEND, tensors);
  }

  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src,
                                      int /*tag*/) override {
    TORCH_CHECK(tensors.size() == 1, "neuron backend: recv takes one tensor");
    at::Tensor& t = tensors[0];
    check_neuron(t, "recv");
    at::Tensor buf = t.is_contiguous() ? t : at::empty_like(t, at::MemoryFormat::Contiguous);
    if (coalescing_) {
      pending_.push_back({src, false, buf, t});
      return done(c10d::OpType::RECV, tensors);
    }
    {
      Engine e(this, buf, c10d::kUnsetTimeout);
      e.check(ncomm_recv(comm_, buf.data_ptr(), buf.nbytes(), src));
    }
    if (!buf.is_same(t)) t.copy_(buf);
    return done(c10d::OpType::RECV, tensors);
  }

  // Coalescing (batch_isend_irecv, _coalescing_manager): collectives run as
  // they come (they are synchronous); sends and receives are queued and run
  // together by endCoalescing, so a ring exchange of any size cannot
  // deadlock.
  bool supportsCoalescing() const override { return true; }

  void startCoalescing() override {
    coalescing_ = true;
    pending_.clear();
  }

  c10::intrusive_ptr<c10d::Work> endCoalescing() override {
    coalescing_ = false;
    std::vector<P2P> ops;
    ops.swap(pending_);
    std::vector<at::Tensor> outs;
    if (!ops.empty()) {
      std::vector<ncomm_p2p_op> batch;
      for (auto& op : ops) {
        batch.push_back({op.peer, op.is_send ? 1 : 0, op.buf.data_ptr(), op.buf.nbytes()});
      }
      {
        Engine e(this, ops[0].buf, c10d::kUnsetTimeout);
        e.check(ncomm_p2p_batch(comm_, batch.data(), static_cast<int>(batch.size())));
      }
      for (auto& op : ops) {
        if (!op.is_send && !op.buf.is_same(op.user)) op.user.copy_(op.buf);
        outs.push_back(op.user);
      }
    }
    return done(c10d::OpType::COALESCED, outs);
  }

  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ncomm_set_timeout(comm_, timeout_ms(opts.timeout));
      if (ncomm_barrier(comm_) != 0) fail();
    }
    return done(c10d::OpType::BARRIER, {});
  }

 private:
  // Holds the engine lock for one collective after the tensor's stream has
  // drained; check() turns an engine failure into DistBackendError.
  struct Engine {
    Engine(NeuronBackend* b, const at::Tensor& t, std::chrono::milliseconds timeout)
        : backend(b), lock(b->mutex_) {
      NEURON_CHECK(nrt_stream_synchronize(current_stream(t.device().index())));
      ncomm_set_timeout(b->comm_, b->timeout_ms(timeout));
    }
    void check(int rc) {
      if (rc != 0) backend->fail();
    }
    NeuronBackend* backend;
    std::lock_guard<std::mutex> lock;
  };

  int64_t timeout_ms(std::chrono::milliseconds t) const {
    auto use = t == c10d::kUnsetTimeout ? timeout_ : t;
    return std::max<int64_t>(1, static_cast<int64_t>(use.count()));
  }

  [[noreturn]] void fail() {
    C10_THROW_ERROR(DistBackendError, std::string("neuron backend: ") + ncomm_error(comm_));
  }

  c10::intrusive_ptr<c10d::Work> done(c10d::OpType type, std::vector<at::Tensor> outs) {
    return c10::make_intrusive<NeuronWork>(rank_, type, std::move(outs));
  }

  void run_allreduce(at::Tensor& t, const c10d::ReduceOp& rop, std::chrono::milliseconds timeout,
                     const char* coll) {
    check_neuron(t, coll);
    ncomm_op op = to_op(rop, coll);
    at::Tensor buf = t.is_contiguous() ? t : t.contiguous();
    if (rop.op_ == c10d::ReduceOp::PREMUL_SUM) buf.copy_(premul(buf, rop));
    Flat f = flat_for_reduce(buf, op, coll);
    {
      Engine e(this, buf, timeout);
      e.check(ncomm_all_reduce(comm_, buf.data_ptr(), buf.data_ptr(), f.count, f.dtype, op));
    }
    if (!buf.is_same(t)) t.copy_(buf);
  }

  void run_allgather(at::Tensor& output, at::Tensor& input, std::chrono::milliseconds timeout,
                     const char* coll) {
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
    {
      Engine e(this, in, timeout);
      e.check(ncomm_all_gather(comm_, in.data_ptr(), out.data_ptr(), in.nbytes()));
    }
    if (!out.is_same(output)) output.copy_(out);
  }

  void run_reduce_scatter(at::Tensor& output, at::Tensor& input, const c10d::ReduceOp& rop,
                          std::chrono::milliseconds timeout, const char* coll) {
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
    {
      Engine e(this, in, timeout);
      e.check(ncomm_reduce_scatter(comm_, in.data_ptr(), out.data_ptr(), f.count, f.dtype, op));
    }
    if (!out.is_same(output)) output.copy_(out);
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

  ncomm* comm_ = nullptr;
  std::chrono::milliseconds timeout_;
  std::mutex mutex_;
};

}  // namespace

void init_distributed(py::module& m) {
  m.def(
      "_create_neuron_backend",
      [](const std::string& key, int rank, int size, std::chrono::milliseconds timeout,
         int64_t chunk_bytes) -> c10::intrusive_ptr<c10d::Backend> {
        return c10::make_intrusive<NeuronBackend>(key, rank, size, timeout, chunk_bytes);
      },
      py::arg("key"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
      py::arg("chunk_bytes") = 0, py::call_guard<py::gil_scoped_release>());
}

}  // namespace torchneuron
