"""``torch.compile(backend="neuron")``: Inductor with this device's defaults.

Found by name through the ``torch_dynamo_backends`` entry point (pyproject
``[project.entry-points.torch_dynamo_backends]``): Dynamo's registry lists
entry points without importing them (``torch/_dynamo/backends/registry.py``
``_discover_entrypoint_backends``) and loads this module on first lookup, so
``torch._dynamo.list_backends()`` shows ``neuron`` and ``import torch``
stays cheap.  Hugging Face's Trainer and ``generate()`` ask for this name on
the neuron device.

``mode`` and ``options`` mean what they mean for ``backend="inductor"``.
The device's defaults (the kernels' thread count, the wrapper, the kernel
launch) live in the device backend itself, so ``backend="inductor"`` on
neuron tensors compiles the same code; this name exists for callers that
select a backend per device.
"""
from __future__ import annotations

from typing import Any

import torch


def neuron(gm: torch.fx.GraphModule, example_inputs: list[Any], *, mode: str | None = None,
           options: dict[str, Any] | None = None) -> Any:
    from torch._inductor import list_mode_options
    from torch._inductor.async_compile import maybe_warm_pool
    from torch._inductor.compile_fx import compile_fx

    from torch_neuronx import _inductor

    _inductor.register()
    maybe_warm_pool()
    patches: dict[str, Any] = {}
    if mode is not None and mode != "default":
        patches.update(list_mode_options(mode))
    if options:
        patches.update({key.replace("-", "_"): value for key, value in options.items()})
    return compile_fx(gm, example_inputs, config_patches=patches)
