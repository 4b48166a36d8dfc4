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

A group whose ops all have a vector expression (binary arithmetic,
addcmul/addcdiv, the unary ops with vector bodies; float32, and at AVX2
float16 and bfloat16 too, each 16-bit result rounded in registers where the
op would round it) is also compiled, the first time it is seen, into one loop that keeps its
intermediates in registers (runtime/src/fusion_jit.c), with the kernels'
own vector code, so the bits stay those of unfused execution.  The build
runs on a background thread with the system C compiler (``TORCHNEURON_CC``,
default ``gcc``) into a disk cache (``TORCHNEURON_FUSION_CACHE``, default
``~/.cache/torch_neuronx/fusion``); until it is loaded the group runs as
before.  ``TORCHNEURON_FUSION_COMPILE=0`` turns compiling off, ``sync``
builds before the group runs.
"""

from __future__ import annotations

import hashlib
import os
from typing import Dict, Union

from torch_neuronx import _C

__all__ = ["set_adaptive_eager", "is_adaptive_eager_enabled", "adaptive_eager_stats",
           "reset_adaptive_eager_stats"]

_MODES = {False: 0, True: 1, "verify": 2}


def _kernel_headers() -> str:
    return os.path.join(os.path.dirname(_C.__file__), "include", "kernels")


def _headers_digest(base: str) -> str:
    """A digest of the installed kernel headers: the cache keeps one folder
    per version of the code that generated libraries include."""
    h = hashlib.sha256()
    for root, dirs, files in os.walk(base):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(root, name)
            h.update(os.path.relpath(path, base).encode())
            with open(path, "rb") as f:
                h.update(f.read())
    return h.hexdigest()[:16]


def _configure_compiled_groups(cache: Union[str, None] = None) -> None:
    """Tells the runtime where the kernel headers (installed with the
    package) and the library cache are; without them groups are not
    compiled."""
    base = _kernel_headers()
    if not os.path.isfile(os.path.join(base, "src", "fusion", "jit_prelude.h")):
        return
    if cache is None:
        root = os.environ.get("TORCHNEURON_FUSION_CACHE") or os.path.join(
            os.path.expanduser("~"), ".cache", "torch_neuronx", "fusion")
        cache = os.path.join(root, _headers_digest(base))
    try:
        os.makedirs(cache, exist_ok=True)
    except OSError:
        return
    _C._fusion_jit_configure(os.path.join(base, "src") + ":" + os.path.join(base, "include"), cache)


_configure_compiled_groups()


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
    (of those, groups of many large input streams run in longer rows),
    ``bytes_streamed`` (large outputs written past the cache with
    non-temporal stores: row mode's staged rows, compiled code's aligned
    vectors), ``groups_compiled`` (groups run by their compiled loop),
    ``group_builds`` (group libraries the C compiler built),
    ``group_build_failures`` and ``groups_multi_tensor`` (of ``groups``,
    runs of foreach ops over the same lists: an optimizer's step)."""
    return dict(_C._fusion_stats())


def reset_adaptive_eager_stats() -> None:
    _C._fusion_stats_reset()
