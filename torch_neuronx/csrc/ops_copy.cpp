// ops_copy.cpp — copies between neuron devices and the host, and .item().
//
// ATen's copy_ sends every copy that touches a neuron tensor to _copy_from,
// so this file owns all of copy_'s semantics for neuron: broadcasting src to
// dst, dtype casts, the overlap checks, and devices.
//
//   neuron <- neuron (one device): NK_KERNEL_COPY over a TensorIterator
//       (strided, broadcast, cast in the kernel).
//   neuron <- cpu: the host data, made contiguous (and cast on the host only
//       if the device lacks one of the dtypes), goes by nrt_memcpy_async
//       straight into dst when dst is contiguous with the same shape and
//       dtype, else into a contiguous device staging buffer that
//       NK_KERNEL_COPY then scatters into dst.
//   cpu <- neuron: the mirror image: src made contiguous (and cast) on the
//       device, one memcpy to the host, the host finishes broadcasting/casts.
//   neuron:j <- neuron:i: the copy runs on device i's current stream behind a
//       two-way barrier of events, as cuda does: it waits for work queued on
//       j (which may still use dst), and j's later work waits for the copy.
//
// non_blocking is honoured like cuda: from or to pinned host memory the copy
// is only queued (the host buffer is kept alive until it has run); from
// pageable memory it is queued from a private copy of the source (as
// cudaMemcpyAsync stages it); to pageable memory it has completed on return.
// A blocking copy has completed, and a failed earlier kernel is reported
// here, at the host read.
#include <ATen/ExpandUtils.h>
#include <ATen/TensorIterator.h>
#include <ATen/ops/_local_scalar_dense.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <torch/library.h>

#include "launch.h"
#include "neuron_check.h"
#include "neuron_stream.h"
#include "ops.h"

namespace torch_neuronx {
namespace {

bool cast_on_device(c10::ScalarType a, c10::ScalarType b) {
  return a == b || (is_native_dtype(a) && is_native_dtype(b));
}

// dst can take a contiguous `data` of this shape and dtype byte for byte.
bool can_write_directly(const at::Tensor& dst, const at::Tensor& data) {
  return dst.is_contiguous() && dst.scalar_type() == data.scalar_type() &&
         dst.sizes().equals(data.sizes());
}

// Keeps a host buffer alive until the work queued on `stream` so far has run.
void keep_alive_until_done(nrt_stream* stream, const c10::Storage& storage) {
  auto* held = new c10::Storage(storage);
  Task task(NRT_KERNEL_HOST_FN, "neuron::release_host_buffer", 0);
  auto* p = task.params<nrt_host_fn_params>();
  p->fn = [](void* arg) { delete static_cast<c10::Storage*>(arg); };
  p->arg = held;
  const nrt_status status = nrt_launch(stream, &task.t);
  if (status != NRT_SUCCESS) {
    delete held;
    raise_status(status, "nrt_launch(release_host_buffer)");
  }
}

// Host <-> device bytes of two contiguous tensors of the same dtype and size.
// A blocking copy returns once the data has arrived and the stream is clean
// (nrt_memcpy: the calling thread copies once the stream has drained, and
// reports a failed earlier task). A non-blocking one is queued, as cuda's
// cudaMemcpyAsync: a pinned host buffer is kept alive until it has run; a
// pageable source is staged by the runtime (or, when large, copied at once),
// so the caller may reuse it; a pageable destination is written before the
// call returns.
void memcpy_contiguous(nrt_stream* stream, const at::Tensor& dst, const at::Tensor& src,
                       const at::Tensor& host, bool non_blocking) {
  const size_t nbytes = dst.nbytes();
  if (nbytes == 0) return;
  if (!non_blocking) {
    NEURON_CHECK(nrt_memcpy(stream, dst.data_ptr(), src.const_data_ptr(), nbytes));
    return;
  }
  NEURON_CHECK(nrt_memcpy_async(stream, dst.data_ptr(), src.const_data_ptr(), nbytes));
  if (nrt_host_is_pinned(host.const_data_ptr()) != 0) keep_alive_until_done(stream, host.storage());
}

void copy_host_to_device(const at::Tensor& dst, const at::Tensor& src, bool non_blocking) {
  at::Tensor host = src;
  if (!cast_on_device(src.scalar_type(), dst.scalar_type())) host = host.to(dst.scalar_type());
  host = host.contiguous();
  nrt_stream* stream = current_stream(dst.device().index());
  if (can_write_directly(dst, host)) {
    memcpy_contiguous(stream, dst, host, host, non_blocking);
    return;
  }
  at::Tensor staging = empty_neuron(host.sizes(), host.scalar_type(), dst.device());
  // The staging buffer is read by the next task; its host side must be done
  // (or kept alive) first, which memcpy_contiguous guarantees.
  memcpy_contiguous(stream, staging, host, host, non_blocking);
  copy_on_device(dst, staging);
}

void copy_device_to_host(const at::Tensor& dst, const at::Tensor& src, bool non_blocking) {
  at::Tensor dev = src;
  const bool device_cast = cast_on_device(src.scalar_type(), dst.scalar_type());
  const auto dtype = device_cast ? dst.scalar_type() : src.scalar_type();
  if (!dev.is_contiguous() || dev.scalar_type() != dtype) {
    dev = empty_neuron(src.sizes(), dtype, src.device());
    copy_on_device(dev, src);
  }
  const bool direct = can_write_directly(dst, dev);
  at::Tensor host = direct ? dst : at::empty(dev.sizes(), dev.options().device(at::kCPU));
  memcpy_contiguous(current_stream(src.device().index()), host, dev, host,
                    non_blocking && direct);
  if (!direct) dst.copy_(host);
}

struct Event {
  nrt_event* e = nullptr;
  Event() { NEURON_CHECK(nrt_event_create(NRT_EVENT_DEFAULT, &e)); }
  ~Event() { nrt_event_destroy(e); }  // safe while a stream still waits on it
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
};

void copy_between_devices(const at::Tensor& dst, const at::Tensor& src) {
  if (!cast_on_device(src.scalar_type(), dst.scalar_type())) {
    dst.copy_(src.cpu());  // the host casts what the device cannot
    return;
  }
  at::Tensor from = src;
  if (!from.is_contiguous() || from.scalar_type() != dst.scalar_type()) {
    from = empty_neuron(src.sizes(), dst.scalar_type(), src.device());
    copy_on_device(from, src);
  }
  const bool direct = can_write_directly(dst, from);
  at::Tensor to = direct ? dst : empty_neuron(from.sizes(), from.scalar_type(), dst.device());
  nrt_stream* src_stream = current_stream(src.device().index());
  nrt_stream* dst_stream = current_stream(dst.device().index());
  if (from.nbytes() != 0) {
    Event dst_ready, copied;
    NEURON_CHECK(nrt_event_record(dst_ready.e, dst_stream));
    NEURON_CHECK(nrt_stream_wait_event(src_stream, dst_ready.e));
    NEURON_CHECK(nrt_memcpy_async(src_stream, to.data_ptr(), from.const_data_ptr(), from.nbytes()));
    NEURON_CHECK(nrt_event_record(copied.e, src_stream));
    NEURON_CHECK(nrt_stream_wait_event(dst_stream, copied.e));
  }
  if (!direct) copy_on_device(dst, to);
}

bool is_same_data(const at::Tensor& a, const at::Tensor& b) {
  return a.is_alias_of(b) && a.storage_offset() == b.storage_offset() &&
         a.strides().equals(b.strides()) && a.sizes().equals(b.sizes()) &&
         a.scalar_type() == b.scalar_type();
}

// A conjugate or negative view as the source.  ATen's math-bit fallbacks
// would materialise it by cloning it, that is by calling this copy again,
// forever; so the stored values move as they are and the CPU, which has
// kernels for the bits, applies them on the way.
at::Tensor copy_math_view(const at::Tensor& dst, const at::Tensor& src) {
  at::Tensor stored = src.is_conj() ? src.conj() : src;  // conj() clears the bit
  if (stored.is_neg()) stored = stored._neg_view();
  at::Tensor host = stored.cpu();
  if (src.is_neg()) host = host._neg_view();
  if (src.is_conj()) host = host.conj();
  dst.copy_(host.resolve_conj().resolve_neg());
  return dst;
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  const at::Tensor& src = self;
  TORCH_CHECK(src.defined() && dst.defined(), "copy_: undefined tensor");
  if (is_same_data(dst, src)) return dst;
  if (src.is_conj() || src.is_neg()) return copy_math_view(dst, src);
  if (dst.numel() == 0) {  // nothing to move; still check the shapes
    const auto shape = at::infer_size_dimvector(dst.sizes(), src.sizes());
    TORCH_CHECK(dst.sizes().equals(shape), "output with shape ", dst.sizes(),
                " doesn't match the broadcast shape ", c10::IntArrayRef(shape));
    return dst;
  }
  const bool src_neuron = src.device().is_privateuseone();
  const bool dst_neuron = dst.device().is_privateuseone();
  if (src_neuron && dst_neuron) {
    if (src.device() != dst.device()) {
      copy_between_devices(dst, src);
    } else if (cast_on_device(src.scalar_type(), dst.scalar_type())) {
      copy_on_device(dst, src);
    } else {
      dst.copy_(src.cpu());
    }
  } else if (dst_neuron) {
    TORCH_CHECK(src.device().is_cpu(), "neuron: cannot copy from ", src.device());
    copy_host_to_device(dst, src, non_blocking);
  } else {
    TORCH_CHECK(dst.device().is_cpu(), "neuron: cannot copy to ", dst.device());
    copy_device_to_host(dst, src, non_blocking);
  }
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  // The fallback's CPU kernel already gave any resize warning.
  if (!dst.sizes().equals(self.sizes())) dst.resize_(self.sizes());
  return copy_from(self, dst, false);
}

// .item(): a synchronising device-to-host read of one element.
c10::Scalar local_scalar_dense(const at::Tensor& self) {
  TORCH_CHECK(self.numel() == 1, "a Tensor with ", self.numel(),
              " elements cannot be converted to Scalar");
  alignas(16) unsigned char bytes[16];
  const size_t itemsize = self.itemsize();
  TORCH_CHECK(itemsize <= sizeof bytes, "item(): unsupported dtype ", self.scalar_type());
  nrt_stream* stream = current_stream(self.device().index());
  NEURON_CHECK(nrt_memcpy_async(stream, bytes, self.const_data_ptr(), itemsize));
  NEURON_CHECK(nrt_stream_synchronize(stream));
  return at::_local_scalar_dense(
      at::from_blob(bytes, {}, at::TensorOptions().dtype(self.scalar_type())));
}

}  // namespace

void copy_on_device(const at::Tensor& dst, const at::Tensor& src) {
  auto iter = at::TensorIteratorConfig()
                  .add_output(dst)
                  .add_const_input(src)
                  .resize_outputs(false)
                  .check_all_same_dtype(false)
                  .check_all_same_device(false)
                  .build();
  if (iter.numel() == 0) return;
  Task task(NK_KERNEL_COPY, "aten::copy_", 2);
  const bool same_dtype = iter.dtype(0) == iter.dtype(1);
  const bool described = same_dtype && !is_native_dtype(iter.dtype(0))
                          ? describe_raw(iter, 0, task.operand(0)) &&
                                describe_raw(iter, 1, task.operand(1))
                          : describe(iter, 0, task.operand(0)) &&
                                describe(iter, 1, task.operand(1));
  if (!described) {
    TORCH_CHECK(dst.dim() > 0, "neuron: cannot copy ", iter.dtype(1), " to ", iter.dtype(0));
    // More dims than an operand holds even after TensorIterator merged what
    // it could: one copy per slice of the first dim (each has one dim less).
    const at::Tensor from = src.expand(dst.sizes());
    for (int64_t i = 0; i < dst.size(0); ++i) copy_on_device(dst.select(0, i), from.select(0, i));
    return;
  }
  launch(dst.device().index(), task);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_copy_from", TORCH_FN(copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(copy_from_and_resize));
  m.impl("_local_scalar_dense", TORCH_FN(local_scalar_dense));
}

// copy_from sees the conjugate/negative bits itself (see copy_math_view).
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
}
TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
}

}  // namespace torch_neuronx
