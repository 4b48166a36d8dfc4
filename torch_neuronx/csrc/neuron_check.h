// neuron_check.h — runtime status -> the exception PyTorch raises for cuda.
//   NRT_SUCCESS               nothing
//   NRT_ERROR_OUT_OF_MEMORY   torch.OutOfMemoryError ("NEURON out of memory. ...")
//   anything else             RuntimeError ("NEURON error: <runtime message>")
#pragma once
#include <c10/macros/Macros.h>

#include "neuron_runtime.h"

namespace torch_neuronx {

[[noreturn]] void raise_status(nrt_status status, const char* call);

}  // namespace torch_neuronx

#define NEURON_CHECK(expr)                                   \
  do {                                                       \
    nrt_status neuron_check_status_ = (expr);                \
    if (C10_UNLIKELY(neuron_check_status_ != NRT_SUCCESS)) { \
      ::torch_neuronx::raise_status(neuron_check_status_, #expr); \
    }                                                        \
  } while (0)
