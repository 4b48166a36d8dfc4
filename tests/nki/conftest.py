"""NKI tests: the sample kernels of examples/nki are importable by name."""
import os
import sys

import pytest
import torch

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "nki")
sys.path.insert(0, os.path.abspath(EXAMPLES))


def tol(dtype):
    """Tolerances against a float32 torch reference: bfloat16 tiles round
    every intermediate NKI would round (8 mantissa bits)."""
    return dict(atol=1e-4, rtol=1e-4) if dtype == torch.float32 else dict(atol=4e-2, rtol=4e-2)


@pytest.fixture
def neuron():
    return torch.device("neuron")
