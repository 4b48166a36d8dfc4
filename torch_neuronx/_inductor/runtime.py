"""What generated wrapper code calls at run time (kept free of Inductor imports)."""
from __future__ import annotations

from torch_neuronx import _C


def sync_stream(device: int) -> None:
    """Waits for the current stream of ``device`` (phase 1: host-side kernels)."""
    import torch

    torch.neuron.current_stream(device).synchronize()
