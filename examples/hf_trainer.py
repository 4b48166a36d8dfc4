"""Fine-tune a small causal LM with Hugging Face's `Trainer` on neuron, next
to the same run on the CPU, and print both loss curves.

There is no device code: `Trainer` puts training on neuron by itself,
because `torch_neuronx` is installed (transformers' is_torch_neuron_available).
The CPU run is the same script with `use_cpu=True`.  The text is the Zen of
Python (in the standard library, so no download), with a byte-pair tokenizer
trained on it in memory with the `tokenizers` package; the model is a small
Llama built from a config with random weights.  Dropout is off so that both
devices take the same steps (their random generators differ, as cuda's and
the CPU's do).

    python examples/hf_trainer.py [--steps 60] [--every 5]

(Speed is measured in bench/, not here.)
"""
import argparse
import codecs
import contextlib
import io

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from torch.utils.data import Dataset
from transformers import (LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast, PrinterCallback,
                          Trainer, TrainerCallback, TrainingArguments)

BLOCK = 32


def zen_tokenizer():
    with contextlib.redirect_stdout(io.StringIO()):  # importing `this` prints the text
        import this
    text = codecs.decode(this.s, "rot13")
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator([text], trainers.BpeTrainer(
        vocab_size=384, special_tokens=["<unk>", "<eos>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return text, PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>", unk_token="<unk>")


class Blocks(Dataset):
    """Every BLOCK-token window of the text (stride 4), labels = inputs."""

    def __init__(self, ids):
        self.windows = [ids[i:i + BLOCK] for i in range(0, len(ids) - BLOCK, 4)]

    def __len__(self):
        return len(self.windows)

    def __getitem__(self, i):
        x = torch.tensor(self.windows[i])
        return {"input_ids": x, "labels": x}


class Curve(TrainerCallback):
    def __init__(self):
        self.losses = []

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "loss" in logs:
            self.losses.append(logs["loss"])


def run(use_cpu, tokenizer, data, steps):
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=BLOCK, eos_token_id=tokenizer.eos_token_id)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    args = TrainingArguments(output_dir="build/hf_trainer", max_steps=steps,
                             per_device_train_batch_size=16, learning_rate=3e-3,
                             lr_scheduler_type="cosine", warmup_steps=5, logging_steps=1,
                             save_strategy="no", report_to="none", seed=0, use_cpu=use_cpu,
                             disable_tqdm=True)
    curve = Curve()
    trainer = Trainer(model=model, args=args, train_dataset=data, callbacks=[curve])
    trainer.remove_callback(PrinterCallback)  # the table below shows the losses
    trainer.train()
    return curve.losses, str(trainer.model.device)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--every", type=int, default=5)
    a = p.parse_args()

    import torch_neuronx  # only for the fallback counts; the training needs no import

    torch_neuronx._C.set_fallback_mode("silent")
    torch_neuronx._C.reset_fallback_stats()
    text, tokenizer = zen_tokenizer()
    data = Blocks(tokenizer(text)["input_ids"])
    neuron, dev_neuron = run(False, tokenizer, data, a.steps)
    fallbacks = torch_neuronx._C.fallback_stats()
    cpu, dev_cpu = run(True, tokenizer, data, a.steps)

    print(f"{len(data)} windows of {BLOCK} tokens, vocabulary {len(tokenizer)}")
    print(f"{'step':>5} {dev_neuron:>12} {dev_cpu:>12}")
    for step in sorted({*range(0, a.steps, a.every), a.steps - 1}):
        print(f"{step + 1:5d} {neuron[step]:12.5f} {cpu[step]:12.5f}")
    worst = max(abs(n - c) / abs(c) for n, c in zip(neuron, cpu))
    print(f"largest relative difference of the curves: {worst:.2e}")
    print("ops that fell back to the CPU on neuron: " + (", ".join(sorted(fallbacks)) or "none"))


if __name__ == "__main__":
    main()
