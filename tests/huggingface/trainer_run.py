"""One `Trainer` run of a tiny GPT-2, written as a user writes it: no device
argument anywhere (the Trainer picks neuron because torch_neuronx is
installed; `--use-cpu` is the reference run).  Prints one JSON line:
{"device": ..., "losses": [per-step training losses], "world": N}.

Run alone or under `accelerate launch` / torchrun: with N processes each
takes `--batch / N` rows per step, so the global batch is the same.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
from transformers import Trainer, TrainerCallback, TrainingArguments  # noqa: E402

import tiny  # noqa: E402


class LossLog(TrainerCallback):
    def __init__(self):
        self.losses = []

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "loss" in logs:
            self.losses.append(float(logs["loss"]))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--batch", type=int, default=8, help="global batch")
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--use-cpu", action="store_true")
    p.add_argument("--bf16", action="store_true")
    p.add_argument("--save-steps", type=int, default=0)
    p.add_argument("--resume", default=None, help="checkpoint folder to resume from")
    p.add_argument("--compile", action="store_true", help="torch_compile=True")
    a = p.parse_args()

    world = int(os.environ.get("WORLD_SIZE", "1"))
    args = TrainingArguments(
        output_dir=a.out, max_steps=a.steps, per_device_train_batch_size=a.batch // world,
        learning_rate=1e-2, lr_scheduler_type="linear", warmup_steps=0, weight_decay=0.01,
        logging_steps=1, report_to="none", seed=42, data_seed=7, use_cpu=a.use_cpu, bf16=a.bf16,
        save_strategy="steps" if a.save_steps else "no", save_steps=a.save_steps or 500,
        dataloader_num_workers=0, disable_tqdm=True, torch_compile=a.compile)
    model = tiny.gpt2(dropout=a.dropout)
    log = LossLog()
    trainer = Trainer(model=model, args=args, train_dataset=tiny.TokenDataset(64), callbacks=[log])
    trainer.train(resume_from_checkpoint=a.resume)
    if args.process_index == 0:
        print(json.dumps({"device": str(trainer.model.device), "args_device": str(args.device),
                          "compile_backend": args.torch_compile_backend,
                          "world": world, "losses": log.losses,
                          "param_dtype": str(next(trainer.model.parameters()).dtype)}))


if __name__ == "__main__":
    main()
