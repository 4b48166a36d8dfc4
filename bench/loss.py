"""Losses: neuron next to torch CPU in the same run.

cross_entropy on [rows, classes] logits (forward, and forward + backward),
in float32 and bfloat16; mse_loss and binary_cross_entropy_with_logits on
2^24 float32 elements (forward + backward).  For each, the median time over
--repeats runs (after a warm-up) on the CPU and on neuron (synchronised),
printed as the ratio cpu_time / neuron_time (> 1: neuron is faster) and as
the effective bandwidth (the bytes the op must at least read and write /
time) next to the machine's copy bandwidth measured in the same run.

Threads are the same for both (torch's intra-op pool and the device's
compute pool default to the number of cores).  Prints a table; asserts
nothing.  Usage: python bench/loss.py [--repeats N] [--quick]
"""
import argparse

import torch
import torch.nn.functional as F
from timing import median_seconds, paired_medians, sync, machine


def ce_case(rows, classes, dtype, backward):
    es = torch.tensor([], dtype=dtype).element_size()
    # forward: read logits, write log_softmax, read it back (nll); backward:
    # read grad/log_softmax, write grad of log_softmax, write the nll grad
    nbytes = rows * classes * es * (2 if not backward else 5)

    def make(device):
        g = torch.Generator().manual_seed(0)
        x = torch.randn(rows, classes, generator=g).to(dtype).to(device)
        t = torch.randint(0, classes, (rows,), generator=g).to(device)
        if not backward:
            return lambda: F.cross_entropy(x, t)
        x.requires_grad_()

        def step():
            x.grad = None
            F.cross_entropy(x, t).backward()
        return step
    name = f"cross_entropy {rows}x{classes} {str(dtype).split('.')[1]}" + (" f+b" if backward else " fwd")
    return name, nbytes, make


def pointwise_case(name, n, fn, nbytes):
    def make(device):
        g = torch.Generator().manual_seed(0)
        x = torch.randn(n, generator=g).to(device).requires_grad_()
        y = torch.rand(n, generator=g).to(device)

        def step():
            x.grad = None
            fn(x, y).backward()
        return step
    return name, nbytes, make


def copy_bandwidth(n, repeats):
    src, dst = torch.randn(n), torch.empty(n)
    dst.copy_(src)
    best = min(median_seconds(lambda: dst.copy_(src), torch.device("cpu"), 1) for _ in range(repeats))
    return 2 * n * 4 / best


def main():
    print(machine(), flush=True)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="smaller shapes, fewer repeats")
    args = parser.parse_args()
    repeats = 3 if args.quick else args.repeats
    shapes = [(1024, 8000)] if args.quick else [(4096, 32000), (8192, 50257)]
    n = 1 << (20 if args.quick else 24)
    cases = []
    for rows, classes in shapes:
        for dtype in (torch.float32, torch.bfloat16):
            cases.append(ce_case(rows, classes, dtype, False))
            cases.append(ce_case(rows, classes, dtype, True))
    # forward reads x, y; backward reads x, y and writes the gradient
    cases.append(pointwise_case(f"mse_loss 2^{n.bit_length() - 1} f+b", n, F.mse_loss, 5 * n * 4))
    cases.append(pointwise_case(f"bce_with_logits 2^{n.bit_length() - 1} f+b", n,
                                F.binary_cross_entropy_with_logits, 5 * n * 4))
    cpu, neuron = torch.device("cpu"), torch.device("neuron")
    peak = copy_bandwidth(n, repeats)
    print(f"{torch.get_num_threads()} threads; CPU copy bandwidth {peak / 1e9:.1f} GB/s")
    print(f"{'case':<40} {'cpu ms':>9} {'neuron ms':>10} {'cpu/neuron':>11} {'neuron GB/s':>12} "
          f"{'% of copy':>10}")
    for name, nbytes, make in cases:
        t_cpu, t_dev = paired_medians([(make(cpu), cpu), (make(neuron), neuron)], repeats)
        print(f"{name:<40} {t_cpu * 1e3:>9.2f} {t_dev * 1e3:>10.2f} {t_cpu / t_dev:>10.2f}x "
              f"{nbytes / t_dev / 1e9:>12.1f} {100 * nbytes / t_dev / peak:>9.0f}%")


if __name__ == "__main__":
    main()
