"""Memory-bound ops on 2^24 float32 elements: neuron next to torch CPU.

For each op, the median time over --repeats runs on the CPU and on neuron
(synchronised), printed as the speed ratio cpu_time / neuron_time (> 1: neuron
is faster) and as the effective bandwidth of each (bytes the op must read and
write / time) next to the machine's copy bandwidth, measured in the same run
as the best of --repeats `dst.copy_(src)` on the CPU over 2^24 float32.

The threads are the same for both: torch's intra-op pool and the device's
compute pool each default to the number of cores.  Prints a table; asserts
nothing.  Usage: python bench/elementwise.py [--repeats N] [--log2n 24]
"""
import argparse

import torch

from timing import median_seconds, paired_medians, machine



def cases(n):
    """(name, bytes moved, make(device) -> zero-argument callable)."""
    side = int(round(n ** 0.5))
    f = 4  # bytes per float32

    def binary(op):
        def make(device):
            g = torch.Generator().manual_seed(0)
            a = torch.randn(n, generator=g).to(device)
            b = torch.randn(n, generator=g).to(device)
            return lambda: op(a, b)
        return make

    def unary(op, shape=(n,), transpose=False):
        def make(device):
            x = torch.randn(shape, generator=torch.Generator().manual_seed(0)).to(device)
            if transpose:
                x = x.t()
            return lambda: op(x)
        return make

    def add_transposed(device):
        g = torch.Generator().manual_seed(0)
        a = torch.randn(side, side, generator=g).to(device)
        b = torch.randn(side, side, generator=g).to(device)
        return lambda: a.t() + b

    gelu = torch.nn.functional.gelu
    return [
        ("add", 3 * n * f, binary(torch.add)),
        ("mul", 3 * n * f, binary(torch.mul)),
        ("gelu", 2 * n * f, unary(gelu)),
        ("softmax (rows of %d)" % side, 2 * n * f, unary(lambda x: x.softmax(-1), (side, side))),
        ("sum (all)", n * f, unary(torch.sum)),
        ("add, a transposed", 3 * n * f, add_transposed),
        ("sum (dim 0, transposed)", n * f, unary(lambda x: x.sum(0), (side, side), transpose=True)),
        ("gelu, transposed", 2 * n * f, unary(gelu, (side, side), transpose=True)),
    ]


def copy_bandwidth(n, repeats):
    src = torch.randn(n)
    dst = torch.empty(n)
    dst.copy_(src)
    best = min(median_seconds(lambda: dst.copy_(src), torch.device("cpu"), 1)
               for _ in range(repeats))
    return 2 * n * 4 / best


def main():
    print(machine(), flush=True)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--log2n", type=int, default=24)
    args = parser.parse_args()
    n = 1 << args.log2n
    cpu, neuron = torch.device("cpu"), torch.device("neuron")
    peak = copy_bandwidth(n, args.repeats)
    print(f"2^{args.log2n} float32 elements, {torch.get_num_threads()} threads; "
          f"CPU copy bandwidth {peak / 1e9:.1f} GB/s")
    print(f"{'op':<26} {'neuron/cpu speed':>16} {'cpu GB/s':>9} {'neuron GB/s':>12} "
          f"{'neuron % of copy':>17}")
    for name, nbytes, make in cases(n):
        t_cpu, t_dev = paired_medians([(make(cpu), cpu), (make(neuron), neuron)], args.repeats)
        print(f"{name:<26} {t_cpu / t_dev:>15.2f}x {nbytes / t_cpu / 1e9:>9.1f} "
              f"{nbytes / t_dev / 1e9:>12.1f} {100 * nbytes / t_dev / peak:>16.0f}%")


if __name__ == "__main__":
    main()
