"""``torch.neuron.memory``: the memory-history recorder and allocator
snapshots, shaped like ``torch.cuda.memory``'s so that tools written for
those (``torch.cuda._memory_viz``, https://pytorch.org/memory_viz) read
them unchanged.

The runtime's caching allocator (runtime/src/allocator.c) reports each
allocation and free to one observer (torch_neuronx/csrc/profiler.cpp), which
appends to a bounded ring with the Python (and optionally C++) stack while
recording is on.  ``_snapshot()`` adds the allocator's segments and blocks.
Concepts CUDA has and neuron does not (expandable segments, private memory
pools, out-of-memory observers) are left out.
"""
from __future__ import annotations

import pickle
import sys
from typing import Any

from torch_neuronx import _C

__all__ = ["memory_snapshot", "_record_memory_history", "_snapshot", "_dump_snapshot"]


def _record_memory_history(
    enabled: str | None = "all",
    context: str | None = "all",
    stacks: str = "all",
    max_entries: int = sys.maxsize,
    device: Any = None,
) -> None:
    """Start (``enabled="all"`` or ``"state"``) or stop (``enabled=None``)
    recording device allocations and frees, as
    ``torch.cuda.memory._record_memory_history``.  ``context=None`` records
    no stacks; ``stacks="python"`` Python frames only, ``"all"`` Python and
    C++ frames.  At most ``max_entries`` events are kept (the oldest go).
    Stopping clears the recorded events.  ``device`` is accepted for
    compatibility: the recorder covers every neuron device."""
    if enabled not in (None, "all", "state"):
        raise ValueError(f"enabled must be None, 'state' or 'all', got {enabled!r}")
    if context not in (None, "state", "alloc", "all"):
        raise ValueError(f"context must be None, 'state', 'alloc' or 'all', got {context!r}")
    if stacks not in ("python", "all"):
        raise ValueError(f"stacks must be 'python' or 'all', got {stacks!r}")
    on = enabled is not None
    with_stacks = context is not None
    _C._record_memory_history(
        on,
        python=with_stacks,
        cpp=with_stacks and stacks == "all",
        max_entries=min(int(max_entries), 2**62),
    )


def _snapshot(device: Any = None) -> dict[str, Any]:
    """``{"segments": [...], "device_traces": [[...] per device]}`` as
    ``torch.cuda.memory._snapshot()``: every segment of every device with its
    blocks, and the recorded alloc/free events (``action`` "alloc" or
    "free_requested", ``addr``, ``size``, ``stream``, ``time_us``,
    ``frames``)."""
    return _C._memory_snapshot()


def _dump_snapshot(filename: str = "dump_snapshot.pickle") -> None:
    """Pickles ``_snapshot()`` to ``filename`` (the file
    https://pytorch.org/memory_viz opens)."""
    with open(filename, "wb") as f:
        pickle.dump(_snapshot(), f)


def memory_snapshot() -> list[dict[str, Any]]:
    """The allocator's segments on every device, as
    ``torch.cuda.memory_snapshot()``."""
    return _snapshot()["segments"]
