"""`make demo`: train the small GPT of train_gpt.py on neuron and on cpu from
the same seed and show that the two learning curves are the same.

Prints the two loss curves side by side (every --every steps and the last),
the steps/s of each device after the first step (which carries one-time
costs: torch.optim's imports, allocator warm-up), the speed ratio
neuron/cpu, the largest relative difference of the curves, the ops that
fell back to the CPU on neuron (the target is none), and writes a PNG of
both curves (default build/demo_loss.png).  The training code is
examples/train_gpt.py's: only the device string differs between the runs.

    python examples/demo.py [--steps 200] [--seed 0] [--amp none|bf16|fp16] [--png PATH]
"""
import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import png_plot  # noqa: E402
import train_gpt  # noqa: E402


def timed_train(device, steps, seed, amp):
    """(losses, steps/s after step 0) of train_gpt.train on `device`."""
    marks = {}

    def on_step(step, loss):
        if step == 0:
            float(loss)  # wait for step 0: its one-time costs stay out of the rate
            marks["t0"] = time.perf_counter()

    losses, _ = train_gpt.train(device, steps, seed=seed, amp=amp, on_step=on_step)
    elapsed = time.perf_counter() - marks["t0"]  # train() has read every loss back
    return losses, (steps - 1) / elapsed if steps > 1 else float("nan")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--amp", choices=sorted(train_gpt.AMP_DTYPES), default="none")
    parser.add_argument("--every", type=int, default=10, help="print every N-th step")
    parser.add_argument("--png", default=os.path.join("build", "demo_loss.png"))
    args = parser.parse_args()

    import torch_neuronx  # only for the fallback counts; the training needs no import

    torch_neuronx._C.set_fallback_mode("silent")
    torch_neuronx._C.reset_fallback_stats()
    runs = {}
    for device in ("neuron", "cpu"):
        print(f"training train_gpt.py on {device} ({args.steps} steps, seed {args.seed}, amp {args.amp}) ...",
              flush=True)
        runs[device] = timed_train(device, args.steps, args.seed, args.amp)
    fallbacks = torch_neuronx._C.fallback_stats()

    cpu, neuron = runs["cpu"][0], runs["neuron"][0]
    print(f"\n{'step':>5}  {'cpu loss':>12}  {'neuron loss':>12}  {'rel diff':>9}")
    shown = sorted(set(range(0, args.steps, max(1, args.every))) | {args.steps - 1})
    for s in shown:
        print(f"{s:5d}  {cpu[s]:12.6f}  {neuron[s]:12.6f}  {abs(neuron[s] - cpu[s]) / abs(cpu[s]):9.2e}")
    worst = max(abs(a - b) / abs(b) for a, b in zip(neuron, cpu))
    cpu_rate, neuron_rate = runs["cpu"][1], runs["neuron"][1]
    print(f"\ncpu:    {cpu_rate:8.2f} steps/s   ({torch.get_num_threads()} threads)")
    print(f"neuron: {neuron_rate:8.2f} steps/s   speed ratio neuron/cpu {neuron_rate / cpu_rate:.2f}x")
    print(f"largest relative difference of the loss curves over {args.steps} steps: {worst:.2e}")
    print("ops that fell back to the CPU on neuron: " + (", ".join(sorted(fallbacks)) or "none"))

    os.makedirs(os.path.dirname(os.path.abspath(args.png)), exist_ok=True)
    png_plot.line_plot(args.png, [("cpu", cpu, (150, 190, 255), 7), ("neuron", neuron, (230, 90, 20), 2)],
                       title=f"train_gpt.py: cpu vs neuron, seed {args.seed}")
    print(f"loss curves plotted in {args.png}")


if __name__ == "__main__":
    main()
