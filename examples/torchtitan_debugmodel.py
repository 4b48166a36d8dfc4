"""torchtitan's own Trainer on its llama3 `debugmodel`, on neuron, FSDP + TP,
under torchrun (issue 6).  Not a test: torchtitan is not a dependency.

Outcome with torchtitan 0.3.0 (PyPI) and torch 2.13.0 (see the report of the
fsdp branch): it imports, and with the three shims below it trains on 4
ranks (FSDP 2 x TP 2, bf16 params / f32 reduce, selective activation
checkpointing, sequence length 64): the loss falls 8.02 -> 6.46 in 5 steps
on a repeated batch (FSDP only on 2 ranks: 8.14 -> 6.59; the two do not
start from the same weights: DTensor's sharded init draws other values
under TP).
What stands in the way of running it unchanged:

- The wheel does not ship the repo's tests/assets (the debug tokenizer and
  the c4_test data set), and its text loader needs `datasets` (pyarrow,
  pandas, ...).  Here: a stub `datasets` module (import only), a tokenizer
  stub and a random-token data loader of our own.
- Attention: 0.3.0 refuses `sdpa` for language models; `flex` goes through
  torch's flex_attention, which accepts only CUDA/CPU/HPU/MPS tensors (and
  torchtitan torch.compile()s it: inductor has no neuron backend); `varlen`
  needs aten::_flash_attention_forward (CUDA).  Here: torchtitan's own
  ScaledDotProductAttention put back as the inner attention.
- `torch.distributed.set_timeout` (called after step 1) exists only in torch
  nightlies: a no-op shim here.
- parallelism.spmd_backend: the default `spmd_types` fails in fully_shard
  ("all parameters must be DTensors on the full SPMD mesh ... 'weight'",
  tok_embeddings is left a plain tensor; not neuron-specific as far as
  seen); `partial_dtensor` (DTensor TP + FSDP2) is used.
- Fallbacks to the CPU: the complex RoPE (aten::polar.out,
  view_as_complex, view_as_real, complex mul.Tensor).

Run (deps into a private folder so pip never touches torch)::

    pip install --no-deps --target /tmp/tt torchtitan==0.3.0 spmd_types==0.2.3 \\
        tyro docstring_parser torchdata tensorboard protobuf absl-py triton
    TORCHNEURON_DEVICE_COUNT=4 PYTHONPATH=/tmp/tt \\
        python -m torch.distributed.run --nproc_per_node=4 examples/torchtitan_debugmodel.py

Environment: TP (default 2), STEPS (5), SEQ (64), SPMD (partial_dtensor),
ATTN (sdpa_patched; flex/varlen show the failures above).
"""
import os
import sys
import types
from dataclasses import dataclass

_ds = types.ModuleType("datasets")
_ds.Dataset, _ds.load_dataset = object, None
_dsd = types.ModuleType("datasets.distributed")
_dsd.split_dataset_by_node = None
_ds.distributed = _dsd
sys.modules.setdefault("datasets", _ds)
sys.modules.setdefault("datasets.distributed", _dsd)

import torch  # noqa: E402
import torch_neuronx  # noqa: E402
import torchtitan.models.llama3 as llama3  # noqa: E402
from torchtitan.components.dataloader import BaseDataLoader  # noqa: E402
from torchtitan.components.tokenizer import BaseTokenizer  # noqa: E402
from torchtitan.models.common.attention import ScaledDotProductAttention  # noqa: E402
from torchtitan.models.llama3.config_registry import llama3_debugmodel  # noqa: E402
from torchtitan.tools.logging import init_logger  # noqa: E402

ATTN = os.environ.get("ATTN", "sdpa_patched")
VOCAB = 2048


class StubTokenizer(BaseTokenizer):
    @dataclass(kw_only=True, slots=True)
    class Config(BaseTokenizer.Config):
        pass

    def __init__(self, config, tokenizer_path=None):
        super().__init__()
        self.eos_id, self.bos_id = 1, 0

    def encode(self, *args, **kwargs):
        return []

    def decode(self, *args, **kwargs):
        return ""

    def get_vocab_size(self):
        return VOCAB


class RandomTokens(BaseDataLoader):
    """One random batch per data-parallel rank, again and again (the loss
    must fall)."""

    @dataclass(kw_only=True, slots=True)
    class Config(BaseDataLoader.Config):
        pass

    def __init__(self, config, *, dp_world_size, dp_rank, tokenizer, seq_len, local_batch_size,
                 snapshot_every_n_steps=None):
        g = torch.Generator().manual_seed(dp_rank)
        self.toks = torch.randint(0, VOCAB, (local_batch_size, seq_len + 1), generator=g)

    def __iter__(self):
        b, s = self.toks.shape
        while True:
            inputs = {"input": self.toks[:, :-1]}
            if ATTN != "sdpa_patched":  # the masked backends build masks from positions
                inputs["positions"] = torch.arange(s - 1).expand(b, -1)
            yield inputs, self.toks[:, 1:]

    def state_dict(self):
        return {}

    def load_state_dict(self, state_dict):
        pass


def main():
    init_logger()
    if not hasattr(torch.distributed, "set_timeout"):
        torch.distributed.set_timeout = lambda timeout, group=None: None
    original = llama3.get_attention_config
    llama3.get_attention_config = (
        lambda b: ScaledDotProductAttention.Config() if b == "sdpa_patched" else original(b))
    c = llama3_debugmodel()
    c.model_spec = llama3.model_registry("debugmodel", attn_backend=ATTN)
    c.tokenizer = StubTokenizer.Config()
    c.dataloader = RandomTokens.Config()
    c.training.seq_len = int(os.environ.get("SEQ", "64"))
    c.training.local_batch_size = 2
    c.training.steps = int(os.environ.get("STEPS", "5"))
    c.parallelism.tensor_parallel_degree = int(os.environ.get("TP", "2"))
    c.parallelism.data_parallel_shard_degree = -1
    c.parallelism.spmd_backend = os.environ.get("SPMD", "partial_dtensor")
    c.checkpoint.enable = False
    c.debug.seed = 0
    c.dump_folder = os.environ.get("DUMP", "/tmp/torchtitan_neuron")
    trainer = c.build()
    trainer.train()
    trainer.close()
    torch.distributed.destroy_process_group()
    print("rank", os.environ.get("RANK"), "fallbacks", dict(torch_neuronx._C.fallback_stats()))


if __name__ == "__main__":
    main()
