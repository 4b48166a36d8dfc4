// neuron_stream.h — the host thread's current device and stream, as the
// device guard (guard.cpp) keeps them, in the runtime's terms.  Every launch
// goes to current_stream(device).
#pragma once
#include <c10/core/Device.h>
#include <c10/core/Stream.h>

#include "neuron_runtime.h"

namespace torch_neuronx {

c10::DeviceIndex current_device();
// device < 0 means the current device.
nrt_stream* current_stream(c10::DeviceIndex device = -1);
// c10::Stream (type PrivateUse1, id = runtime stream id) <-> runtime handle.
c10::Stream to_c10_stream(nrt_stream* stream);
nrt_stream* to_nrt_stream(const c10::Stream& stream);
// Raises the torch-style error ("Invalid device index ..." / device ordinal)
// when index is outside [0, device_count).
void check_device_index(c10::DeviceIndex index);

}  // namespace torch_neuronx
