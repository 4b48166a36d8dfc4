"""Adaptive eager: the device fuses queued elementwise work at run time.

Ops still queue one by one, asynchronously, as in plain eager mode.  When a
stream's worker takes the next task it looks at the tasks already queued
behind it (it never waits for more) and runs a chain of elementwise tasks
over one index space as one tiled pass: each tile stays in cache while every
op of the chain passes over it, through the very kernel routine the op would
use alone, so the results are bit for bit those of unfused execution.  An
intermediate the program has already dropped (``del``, or a temporary of an
expression) is never written to memory at all.  The design is in
docs/ARCHITECTURE.md; the runtime side in runtime/src/fusion_plan.c and
fusion_exec.c.

``TORCHNEURON_ADAPTIVE_EAGER`` sets the mode at start-up: ``1`` (the
default), ``0`` (off) or ``verify`` (every fused group also runs unfused and
the bytes are compared; a difference is raised at the next synchronisation,
naming the ops).  ``TORCHNEURON_LAUNCH_BLOCKING=1`` runs every op alone.
Deterministic algorithms leave it on: the bits do not change.
"""

from __future__ import annotations

from typing import Dict, Union

from torch_neuronx import _C

__all__ = ["set_adaptive_eager", "is_adaptive_eager_enabled", "adaptive_eager_stats",
           "reset_adaptive_eager_stats"]

_MODES = {False: 0, True: 1, "verify": 2}


def set_adaptive_eager(mode: Union[bool, str]) -> None:
    """Turns fusion on (``True``), off (``False``) or on with verification
    (``"verify"``) for the work launched from now on."""
    if isinstance(mode, str) and mode != "verify":
        raise ValueError(f"set_adaptive_eager: expected True, False or 'verify', got {mode!r}")
    if not isinstance(mode, (bool, str)):
        raise TypeError(f"set_adaptive_eager: expected a bool or 'verify', got {type(mode).__name__}")
    _C._set_adaptive_eager_mode(_MODES[mode])


def is_adaptive_eager_enabled() -> bool:
    """True when queued elementwise work is fused (verify mode included)."""
    return _C._adaptive_eager_mode() != 0 and not _C._is_launch_blocking()


def adaptive_eager_stats() -> Dict[str, int]:
    """Counters since start-up or the last reset, over all devices: ``groups``
    (fused groups run), ``tasks_fused`` (ops run inside them),
    ``bytes_not_written`` (stores of dead intermediates skipped),
    ``groups_verified`` (groups checked in verify mode) and
    ``groups_in_rows`` (groups run in short rows through each op's own row
    loop, rather than one kernel call per op per tile), ``groups_in_long_rows``
    (of those, groups of many large input streams run in longer rows) and
    ``bytes_streamed`` (large outputs that row mode stored with non-temporal
    stores)."""
    return dict(_C._fusion_stats())


def reset_adaptive_eager_stats() -> None:
    _C._fusion_stats_reset()
