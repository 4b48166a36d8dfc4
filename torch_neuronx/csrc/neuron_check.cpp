// neuron_check.cpp — turns a failed runtime status into the exception PyTorch
// raises for the same failure on cuda.  OOM gets its own type
// (torch.OutOfMemoryError) so callers can catch it and carry on; everything
// else is a RuntimeError carrying the runtime's own message, which already
// names the failing task for kernel errors.
#include "neuron_check.h"

#include <c10/util/Exception.h>
#include <c10/util/StringUtil.h>

namespace torch_neuronx {

void raise_status(nrt_status status, const char* call) {
  const char* message = nrt_last_error();
  if (message == nullptr || message[0] == '\0') {
    message = nrt_status_name(status);
  }
  if (status == NRT_ERROR_OUT_OF_MEMORY) {
    C10_THROW_ERROR(OutOfMemoryError, c10::str("NEURON out of memory. ", message));
  }
  // `call` is the C expression that failed; it helps whoever reads a bug
  // report, so it goes last, after what the user needs to know.
  C10_THROW_ERROR(Error, c10::str("NEURON error: ", message, " (", nrt_status_name(status),
                                  " from ", call, ")"));
}

}  // namespace torch_neuronx
