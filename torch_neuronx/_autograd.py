"""Where the backward pass of neuron tensors runs: on the calling thread.

PyTorch's autograd engine gives every accelerator device a worker thread of
its own and hands each device node of a backward pass to it, while the
thread that called ``backward()`` waits (torch/csrc/autograd/engine.cpp,
``Engine::ready_queue``: only CPU, meta and lazy nodes stay on the caller's
queue).  For a GPU that thread keeps the device's context current and lets
several devices issue work at once.  Here it buys nothing: issuing a neuron
kernel is a queue push (the work runs asynchronously on the device's
streams either way), and the hand-off costs two thread wake-ups per
``backward()``.  On a 2-core VM that was 0.13 ms of a 0.87 ms compiled MLP
training step, and a tiny backward took 175 us against 46 us on the caller.

So on import the package turns PyTorch's multithreaded backward off for
the importing thread (``torch.autograd.set_multithreading_enabled(False)``,
a thread-local setting, the one ``torch.inference_mode`` also uses): the
engine then runs every node on the thread that called ``backward()``, as
it does for CPU tensors.  Streams are unaffected: the engine still runs
each node on the stream its forward op used.  Other threads keep PyTorch's
default, and ``TORCHNEURON_AUTOGRAD_DEVICE_THREADS=1`` keeps the device
threads for the importing thread too.
"""

import os

import torch

_VARIABLE = "TORCHNEURON_AUTOGRAD_DEVICE_THREADS"


def install() -> None:
    value = os.environ.get(_VARIABLE, "0").strip()
    if value not in ("0", "1"):
        raise ValueError(f"{_VARIABLE} must be 0 or 1, got {value!r}")
    if value == "0":
        torch.autograd.set_multithreading_enabled(False)
