"""Hugging Face Trainer checkpoints carry the neuron generator's state.

transformers 5.25 trains on neuron as soon as torch_neuronx is installed
(``TrainingArguments._setup_devices``), but ``Trainer._save_rng_state`` and
``Trainer._load_rng_state`` (transformers/trainer.py) save and restore the
python, numpy, CPU, cuda, xla, npu, hpu, mlu and musa generators only.  A run
resumed with ``resume_from_checkpoint`` then reseeds neuron from
``args.seed`` and draws other dropout masks than the uninterrupted run.
(accelerate's own ``save_state`` does save ``torch.neuron`` states.)

The workaround wraps the two methods when ``transformers.trainer`` is
imported: the checkpoint's ``rng_state*.pth`` gains a ``"neuron"`` entry in
cuda's format (``get_rng_state_all()`` when distributed, else the current
device's ``get_rng_state()``), and resuming restores it the way transformers
restores cuda's.  An entry already there (a transformers that saves it
itself) is left alone, so the wrap retires itself when upstream fixes this.

The hook is ``_import_hook.after_import``: ``import torch`` stays cheap and
transformers is never imported on our account.
"""
from __future__ import annotations

import os

import torch

from torch_neuronx._import_hook import after_import

_MODULE = "transformers.trainer"
_KEY = "neuron"


def _rng_file(trainer, directory: str) -> str:
    # The file name transformers uses (Trainer._save_rng_state).
    if trainer.args.world_size <= 1:
        return os.path.join(directory, "rng_state.pth")
    return os.path.join(directory, f"rng_state_{trainer.args.process_index}.pth")


def _distributed(trainer) -> bool:
    from transformers.training_args import ParallelMode

    return trainer.args.parallel_mode == ParallelMode.DISTRIBUTED


def _patch(module) -> None:
    trainer_cls = module.Trainer
    if getattr(trainer_cls, "_torch_neuronx_rng", False):
        return
    save_rng_state, load_rng_state = trainer_cls._save_rng_state, trainer_cls._load_rng_state

    def _save_rng_state_with_neuron(self, output_dir: str) -> None:
        save_rng_state(self, output_dir)
        path = _rng_file(self, output_dir)
        if not (torch.neuron.is_available() and os.path.isfile(path)):
            return
        states = torch.load(path, weights_only=False)
        if _KEY in states:
            return
        states[_KEY] = (torch.neuron.get_rng_state_all() if _distributed(self)
                        else torch.neuron.get_rng_state())
        torch.save(states, path)

    def _load_rng_state_with_neuron(self, checkpoint: str | None) -> None:
        load_rng_state(self, checkpoint)
        if checkpoint is None or not torch.neuron.is_available():
            return
        path = _rng_file(self, checkpoint)
        if not os.path.isfile(path):
            return  # transformers already logged that reproducibility is lost
        states = torch.load(path, weights_only=False)
        if _KEY not in states:
            return
        if _distributed(self):
            torch.neuron.set_rng_state_all(states[_KEY])
        else:
            torch.neuron.set_rng_state(states[_KEY])

    trainer_cls._save_rng_state = _save_rng_state_with_neuron
    trainer_cls._load_rng_state = _load_rng_state_with_neuron
    trainer_cls._torch_neuronx_rng = True


def install() -> None:
    after_import(_MODULE, _patch)
