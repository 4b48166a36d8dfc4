"""Training steps/s of the three examples: neuron next to torch CPU eager.

For each example (examples/train_gpt.py, train_cnn.py, train_mlp.py, at
their default sizes) and each precision (float32; bfloat16 autocast), the
example's own training loop runs on the CPU and on neuron in this process;
after --warmup steps the loop is timed in windows of --window steps (the
device synchronised at each window's end by reading the loss back) and the
median window gives steps/s.  Printed with the speed ratio neuron/cpu (> 1:
neuron is faster).  The threads are the same for both: torch's intra-op pool
and the device's compute pool each default to the number of cores.  Prints a
table; asserts nothing.  Usage: python bench/train.py [--quick] [--repeats N]
"""
import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
import train_cnn  # noqa: E402
import train_gpt  # noqa: E402
import train_mlp  # noqa: E402
from timing import ROUNDS, machine  # noqa: E402

EXAMPLES = [("gpt", train_gpt), ("cnn", train_cnn), ("mlp", train_mlp)]


def steps_per_second(module, device, amp, warmup, window, repeats):
    """Median steps/s over `repeats` windows of `window` steps after `warmup`."""
    marks = []

    def on_step(step, loss):
        if step >= warmup - 1 and (step - (warmup - 1)) % window == 0:
            float(loss)  # synchronises: every step up to this one has run
            marks.append(time.perf_counter())

    module.train(device, warmup + window * repeats, seed=0, amp=amp, on_step=on_step)
    rates = [window / (b - a) for a, b in zip(marks, marks[1:])]
    return statistics.median(rates)


def main():
    print(machine(), flush=True)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="short windows, fewer repeats")
    parser.add_argument("--repeats", type=int, default=None, help="timed windows per case (median)")
    parser.add_argument("--window", type=int, default=None, help="steps per timed window")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--examples", default="gpt,cnn,mlp")
    parser.add_argument("--amp", default="none,bf16", help="precisions: none (float32), bf16")
    args = parser.parse_args()
    repeats = args.repeats or (3 if args.quick else 5)
    windows = {"gpt": 5, "cnn": 5, "mlp": 20} if args.quick else {"gpt": 10, "cnn": 10, "mlp": 50}
    wanted = set(args.examples.split(","))
    print(f"{torch.get_num_threads()} threads; median of {repeats} windows after {args.warmup} warm-up steps")
    print(f"{'example':<8} {'precision':<10} {'cpu steps/s':>12} {'neuron steps/s':>15} {'speed':>7}")
    for name, module in EXAMPLES:
        if name not in wanted:
            continue
        for amp in args.amp.split(","):
            window = args.window or windows[name]
            # the devices take turns, ROUNDS loops each, so a slow phase of a
            # noisy machine falls on both alike
            per_round = -(-repeats // ROUNDS)
            rates = {"cpu": [], "neuron": []}
            for _ in range(ROUNDS):
                for device, got in rates.items():
                    got.append(steps_per_second(module, device, amp, args.warmup, window, per_round))
            cpu, neuron = (statistics.median(r) for r in rates.values())
            label = "float32" if amp == "none" else amp + " amp"
            print(f"{name:<8} {label:<10} {cpu:12.2f} {neuron:15.2f} {neuron / cpu:6.2f}x", flush=True)


if __name__ == "__main__":
    main()
