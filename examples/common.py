"""What the example scripts share: the command line (--device, --steps,
--seed, --amp, --log-every), printing each step's loss and the steps/s."""
import argparse
import time

import torch

AMP_DTYPES = {"none": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def add_common_args(parser, steps):
    parser.add_argument("--device", default="neuron", help="cpu, neuron (or cuda): the only difference")
    parser.add_argument("--steps", type=int, default=steps)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--amp", choices=sorted(AMP_DTYPES), default="none",
                        help="autocast dtype (fp16 adds a GradScaler)")
    parser.add_argument("--log-every", type=int, default=10,
                        help="read the losses back every N steps (each read waits for the device)")


class StepPrinter:
    """on_step callback: prints every step's loss, reading the losses back
    from the device in groups of log_every (a read waits for the device),
    with the steps/s of the group; step 0 is read alone, so that
    steady_rate() can leave its one-time costs out."""

    def __init__(self, log_every):
        self.log_every = max(1, log_every)
        self.pending = []
        self.start = time.perf_counter()
        self.after_first = None  # (time, step) when step 0 was read
        self.last = None  # (time, step) of the latest read

    def __call__(self, step, loss):
        self.pending.append((step, loss))
        if step == 0 or len(self.pending) == self.log_every:
            self.flush()

    def flush(self):
        if not self.pending:
            return
        values = [float(l) for _, l in self.pending]  # waits for the device
        now = time.perf_counter()
        rate = len(values) / (now - self.start)
        for (step, _), v in zip(self.pending, values):
            print(f"step {step:5d}  loss {v:.6f}  ({rate:.1f} steps/s)")
        step = self.pending[-1][0]
        if self.after_first is None:
            self.after_first = (now, step)
        self.last = (now, step)
        self.pending = []
        self.start = now

    def steady_rate(self):
        """Steps/s from the end of step 0 to the latest read."""
        if self.after_first is None or self.last[1] == self.after_first[1]:
            return float("nan")
        return (self.last[1] - self.after_first[1]) / (self.last[0] - self.after_first[0])


def run_main(description, train_fn, default_steps):
    """The command line every example shares: train on --device, print each
    step's loss and the overall steps/s."""
    parser = argparse.ArgumentParser(description=description)
    add_common_args(parser, default_steps)
    args = parser.parse_args()
    printer = StepPrinter(args.log_every)
    start = time.perf_counter()
    losses, _ = train_fn(args.device, args.steps, seed=args.seed, amp=args.amp, on_step=printer)
    printer.flush()
    elapsed = time.perf_counter() - start
    # the first step carries one-time costs (torch.optim's imports, caches)
    steady = printer.steady_rate()
    print(f"{args.device}: {args.steps} steps in {elapsed:.2f} s, "
          f"{steady:.1f} steps/s after the first step, final loss {losses[-1]:.6f}")
