"""A custom `accelerate` training loop of a tiny GPT-2, written as a user
writes it: no device argument anywhere (accelerate picks neuron because
torch_neuronx is installed; `--cpu` is `Accelerator(cpu=True)`, the
reference).  Prints one JSON line from the main process:
{"device": ..., "losses": [per-step losses, averaged over the ranks], ...}.

Run alone or under `accelerate launch --multi_gpu --num_processes N`: the
DataLoader yields the global batch (`--batch` rows) and `split_batches=True`
gives each rank `--batch / N` of them, so every run sees the same data and
the scheduler steps once per optimizer step.

Checkpoints: `--save-at K --save-dir D` saves `accelerator.save_state(D)`
after K steps and carries on; `--load D --start K` loads it, skips the first
K batches and trains the remaining steps, then loads it again, puts the
neuron generators back to their state from before the load (what a run
whose checkpoint lacked accelerate's `torch_neuron_manual_seed` entry
would get) and trains the same steps again ("losses_neuron_rng_not_restored").
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402

from accelerate import Accelerator, DataLoaderConfiguration  # noqa: E402
from accelerate.utils import (  # noqa: E402
    broadcast_object_list,
    gather_object,
    set_seed,
    synchronize_rng_states,
)

import tiny  # noqa: E402

SEED = 42
TOTAL_STEPS = 20  # the linear schedule's length (longer than any run)


def build(dropout, batch):
    model = tiny.gpt2(dropout=dropout)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0 - s / TOTAL_STEPS)
    loader = DataLoader(tiny.TokenDataset(64), batch_size=batch, shuffle=False)
    return model, optimizer, loader, scheduler


def train(accelerator, model, optimizer, loader, scheduler, steps, record):
    losses = []
    model.train()
    for step, batch in enumerate(loader):
        if step == steps:
            break
        if step == 0:
            record(model, batch)
        out = model(**batch)
        accelerator.backward(out.loss)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        # the global batch's loss: the mean of the ranks' (equal-sized) means
        losses.append(accelerator.gather(out.loss.detach()[None]).mean().item())
    return losses


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--batch", type=int, default=8, help="global batch")
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--cpu", action="store_true")
    p.add_argument("--mixed-precision", default="no")
    p.add_argument("--save-at", type=int, default=0)
    p.add_argument("--save-dir", default=None)
    p.add_argument("--load", default=None)
    p.add_argument("--start", type=int, default=0)
    a = p.parse_args()

    accelerator = Accelerator(cpu=a.cpu, mixed_precision=a.mixed_precision,
                              dataloader_config=DataLoaderConfiguration(split_batches=True))
    set_seed(SEED)
    model, optimizer, loader, scheduler = accelerator.prepare(*build(a.dropout, a.batch))
    info = {"device": str(accelerator.device), "world": accelerator.num_processes,
            "distributed_type": str(accelerator.distributed_type),
            "backend": accelerator.state.backend,
            "model_class": type(model).__name__}

    seen = {}

    def record(model, batch):
        seen["param_device"] = str(next(model.parameters()).device)
        seen["param_dtype"] = str(next(model.parameters()).dtype)
        seen["batch_device"] = str(batch["input_ids"].device)
        seen["batch_rows"] = batch["input_ids"].shape[0]
        # the rows the ranks got, together: the global batch, in order
        seen["global_rows"] = accelerator.gather(batch["input_ids"]).cpu().tolist()
        # the dtype a Conv1D (addmm) computes in inside the forward: autocast
        unwrapped = accelerator.unwrap_model(model)
        def hook(module, args, out):
            seen.setdefault("matmul_dtype", str(out.dtype))

        seen["_handle"] = unwrapped.transformer.h[0].mlp.c_fc.register_forward_hook(hook)

    def after_first_step():
        handle = seen.pop("_handle", None)
        if handle is not None:
            handle.remove()

    if a.load is None:
        first = min(a.save_at or a.steps, a.steps)
        losses = train(accelerator, model, optimizer, loader, scheduler, first, record)
        after_first_step()
        if a.save_at:
            accelerator.save_state(a.save_dir)
            info["neuron_rng_at_save"] = [s.tolist() for s in torch.neuron.get_rng_state_all()]
            rest = accelerator.skip_first_batches(loader, a.save_at)
            losses += train(accelerator, model, optimizer, rest, scheduler,
                            a.steps - a.save_at, lambda *_: None)
        info["losses"] = losses
    else:
        before = torch.neuron.get_rng_state_all()
        accelerator.load_state(a.load)
        info["neuron_rng_after_load"] = [s.tolist() for s in torch.neuron.get_rng_state_all()]
        rest = accelerator.skip_first_batches(loader, a.start)
        info["losses"] = train(accelerator, model, optimizer, rest, scheduler,
                               a.steps - a.start, record)
        after_first_step()
        # the counterfactual: everything restored but the neuron generators
        accelerator.load_state(a.load)
        torch.neuron.set_rng_state_all(before)
        rest = accelerator.skip_first_batches(loader, a.start)
        info["losses_neuron_rng_not_restored"] = train(
            accelerator, model, optimizer, rest, scheduler, a.steps - a.start, lambda *_: None)
    info.update(seen)

    if accelerator.num_processes > 1:
        rank = accelerator.process_index
        # accelerate's _neuron_gather_object: one list per rank, flattened;
        # objects of different sizes (rank 1's is larger than 1 MiB, so the
        # padded all_gather grows past its first size)
        mine = [{"rank": rank, "pid": os.getpid(), "device": str(accelerator.device),
                 "current_device": torch.neuron.current_device(),
                 "param_device": seen.get("param_device"), "pad": "x" * (rank * (3 << 19))}]
        everyone = gather_object(mine)
        info["ranks"] = [{k: v for k, v in d.items() if k != "pad"} for d in everyone]
        info["gather_object_pad_lengths"] = [len(d["pad"]) for d in everyone]
        # accelerate's _neuron_broadcast_object_list: rank 0's objects everywhere
        objs = [info["losses"], {"from": rank}, "y" * 5000] if rank == 0 else [None, None, None]
        broadcast_object_list(objs)
        assert objs[0] == info["losses"] and objs[1] == {"from": 0} and objs[2] == "y" * 5000, objs[:2]
        # reduce: the same mean as gather().mean()
        loss = torch.tensor(float(rank + 1), device=accelerator.device)
        info["reduce_mean"] = accelerator.reduce(loss, "mean").item()
        info["reduce_sum"] = accelerator.reduce(loss, "sum").item()
        # random.py's synchronize_rng_state(NEURON): rank 0's generator everywhere
        torch.neuron.manual_seed(1000 + rank)
        synchronize_rng_states(["neuron"])
        draw = torch.randn(4, device=accelerator.device)
        info["synced_draws"] = accelerator.gather(draw[None]).cpu().tolist()
        info["dist_backend"] = torch.distributed.get_backend()
        accelerator.wait_for_everyone()

    if accelerator.is_main_process:
        print(json.dumps(info))
    accelerator.end_training()


if __name__ == "__main__":
    main()
