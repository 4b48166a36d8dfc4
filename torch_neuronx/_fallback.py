"""The CPU fallback's controls: what an aten op without a neuron kernel does.

Such an op runs on the CPU through real copies.  By default it warns once per
op; ``TORCHNEURON_FALLBACK=error`` (or :func:`fallback_mode`) makes it raise a
RuntimeError naming the op, so a test can prove that a path is native, and
``silent`` only counts.  Every fallback is counted per op.
"""
import contextlib

from torch_neuronx import _C

__all__ = ["fallback_stats", "reset_fallback_stats", "fallback_mode",
           "get_fallback_mode", "set_fallback_mode"]


def fallback_stats():
    """{"aten::op.overload": times it fell back to the CPU} since the last reset."""
    return _C.fallback_stats()


def reset_fallback_stats():
    """Clears the counts (the once-per-op warnings are not given again)."""
    _C.reset_fallback_stats()


def get_fallback_mode():
    """'warn', 'error' or 'silent'."""
    return _C.get_fallback_mode()


def set_fallback_mode(mode):
    """Sets the mode for the whole process: 'warn', 'error' or 'silent'."""
    _C.set_fallback_mode(mode)


@contextlib.contextmanager
def fallback_mode(mode):
    """Sets the fallback mode inside a ``with`` block, e.g.
    ``with fallback_mode("error"): ...``, and restores the previous one."""
    previous = get_fallback_mode()
    set_fallback_mode(mode)
    try:
        yield
    finally:
        set_fallback_mode(previous)
