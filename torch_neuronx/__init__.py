"""TorchNeuron: the virtual NeuronCore as the ordinary PyTorch device ``neuron``.

Importing this package (which ``import torch`` does through the
``torch.backends`` entry point unless TORCH_DEVICE_BACKEND_AUTOLOAD=0):

- loads ``torch_neuronx._C``, whose static initialisers register the device
  guard, hooks, allocators and ops for PrivateUse1;
- renames PrivateUse1 to ``neuron`` and installs ``torch.neuron``;
- generates ``Tensor.neuron()``, ``Tensor.is_neuron``, ``Module.neuron()``,
  the storage methods and their PackedSequence counterparts;
- arranges for torch.compile to find the neuron Inductor backend once Dynamo
  or Inductor is imported (``_inductor/``; nothing heavy is imported here);
- runs the backward of neuron tensors on the thread that calls
  ``backward()`` rather than on autograd's device thread (``_autograd.py``);
- makes Hugging Face's Trainer checkpoints keep the neuron generator's state
  (``_hf_trainer.py``: an upstream gap, patched only when transformers'
  trainer module is imported).
"""


def _autoload() -> None:
    """Entry point torch calls at ``import torch``; importing did the work.

    Defined before ``import torch``: when a user imports torch_neuronx first,
    torch's autoload finds this half-initialised module and calls this
    no-op, and the import below then finishes the registration."""


import torch  # noqa: E402

from torch_neuronx import _C  # noqa: F401  (registration happens on load)
from torch_neuronx import neuron
from torch_neuronx._fallback import fallback_stats
from torch_neuronx.adaptive import (
    adaptive_eager_stats,
    is_adaptive_eager_enabled,
    reset_adaptive_eager_stats,
    set_adaptive_eager,
)

__all__ = ["neuron", "fallback_stats", "set_adaptive_eager", "is_adaptive_eager_enabled",
           "adaptive_eager_stats", "reset_adaptive_eager_stats", "kernel_isa"]


def kernel_isa() -> str:
    """The instruction set the device's kernels run at: "avx512", "avx2" or
    "portable" (the best this CPU has, capped by TORCHNEURON_ISA); torch's own
    CPU kernels report theirs through torch.backends.cpu.get_cpu_capability()."""
    return _C._kernel_isa()


def _register() -> None:
    # torch allows one rename per process; the check keeps a reload of this
    # package (importlib.reload) from attempting a second one.
    if torch._C._get_privateuse1_backend_name() != "neuron":
        torch.utils.rename_privateuse1_backend("neuron")
        torch._register_device_module("neuron", neuron)
        torch.utils.generate_methods_for_privateuse1_backend(
            for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True
        )


_register()

from torch_neuronx import _hf_trainer  # noqa: E402
from torch_neuronx._inductor import trigger as _compile_trigger  # noqa: E402

# torch.compile: the Dynamo/Inductor registration happens lazily, when those
# are in use (torch_neuronx/_inductor/trigger.py); this imports neither.
_compile_trigger.install()

_hf_trainer.install()

from torch_neuronx import _autograd  # noqa: E402

_autograd.install()

from torch_neuronx import _exit  # noqa: E402

_exit.install()

# The `neuron` c10d backend (torch_neuronx/distributed.py) registers itself.
try:
    import torch.distributed as _dist

    if _dist.is_available():
        from torch_neuronx import distributed as _distributed  # noqa: F401
except ImportError:  # a torch build without distributed
    pass

