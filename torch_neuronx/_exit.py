"""At exit: the autograd engine's neuron threads let go of their last
backward before Python finalizes.

torch 2.13's backward (``_engine_run_backward``, torch/autograd/graph.py)
stashes a ``contextvars.Context`` in the calling thread's TLS, and the
GraphTask copies it (``ThreadLocalState::saved_objects_``, a SafePyObject).
The caller erases its entry when backward returns; the device thread that
ran the last node releases its GraphTask only after marking it complete
(``Engine::thread_main``), so it can be the Context's last owner.  If the
main thread reaches interpreter finalization first, that thread's decref
waits for the GIL, CPython ends it with ``pthread_exit``, and the forced
unwind through a noexcept destructor calls std::terminate: "terminate
called without an active exception", exit status 134 after a run that
succeeded.  Reproduced with two processes on 2 cores, each running a
backward on neuron and exiting: 7 aborts in 20 pairs (upstream:
pytorch/pytorch#180701 on the same race).  Any device whose backward runs
on an autograd device thread has it; we close it for ours.

The handler runs one scalar backward on each device's thread through the
engine directly, so no Context is stashed and its own GraphTask holds no
Python object: a device thread takes its next task only after releasing
the previous one, so once that backward has run none of them owns a
Context.  It does nothing in a process that never initialised neuron.
"""
from __future__ import annotations

import atexit

import torch


def release_graph_tasks() -> None:
    """One scalar backward on each device's autograd thread (see above)."""
    from torch_neuronx import neuron

    if not neuron.is_initialized():
        return
    engine = torch.autograd.Variable._execution_engine
    for index in range(neuron.device_count()):
        x = torch.zeros((), device=torch.device("neuron", index), requires_grad=True)
        y = x * 1.0  # MulBackward0 runs on this device's autograd thread
        engine.run_backward((y,), (torch.ones_like(y),), False, False, (), True, True)


def _at_exit() -> None:
    try:
        release_graph_tasks()
    except Exception:  # noqa: BLE001 - at exit there is no one to report to
        pass


def install() -> None:
    atexit.register(_at_exit)
