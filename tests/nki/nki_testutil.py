"""Shared by the NKI tests: importing it makes the samples of examples/nki
importable by name.  (Not a conftest.py: tests/test_*.py import `conftest`
by name, and a second conftest module would shadow theirs.)"""
import os
import sys

import torch

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..",
                                                "examples", "nki")))


def tol(dtype):
    """Tolerances against a float32 torch reference: bfloat16 tiles round
    every intermediate NKI would round (8 mantissa bits)."""
    return dict(atol=1e-4, rtol=1e-4) if dtype == torch.float32 else dict(atol=4e-2, rtol=4e-2)
