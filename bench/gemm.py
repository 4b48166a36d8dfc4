"""Matrix products, neuron next to torch CPU in the same run: GFLOP/s of
each, the ratio cpu_time / neuron_time (> 1: neuron is faster) and neuron's
GFLOP/s as a percentage of the machine's measured FMA peak (bench/peak.py,
all compute-pool threads, float32: bfloat16 runs on the float32 kernels).

Shapes: square n x n @ n x n for n in 64..4096 (--quick: up to 1024),
matrix-vector, and transformer shapes (a 4096-token batch through a
768-wide block: the MLP's up and down projections, an attention projection,
and the backward-like transposed product grad_w = x^T @ grad_y).  float32
and bfloat16.  Medians of --repeats runs after a warm-up; both sides use the
machine's threads.  Prints a table; asserts nothing.
Usage: python bench/gemm.py [--quick] [--repeats N] [--dtypes float32,bfloat16]
"""
import argparse
import torch
import torch_neuronx  # noqa: F401

import peak
from timing import machine, paired_medians  # noqa: E402


def cases(quick):
    """(name, flops, make(device, dtype) -> callable)."""
    def mm(m, k, n, ta=False, tb=False):
        def make(device, dtype):
            g = torch.Generator().manual_seed(0)
            a = torch.randn((k, m) if ta else (m, k), generator=g).to(dtype).to(device)
            b = torch.randn((n, k) if tb else (k, n), generator=g).to(dtype).to(device)
            a, b = (a.t() if ta else a), (b.t() if tb else b)
            return lambda: a @ b
        return make

    out = []
    squares = [64, 128, 256, 512, 1024] + ([] if quick else [2048, 4096])
    for n in squares:
        out.append((f"{n}^3", 2 * n ** 3, mm(n, n, n)))
    out.append(("mv 4096x4096 @ 4096", 2 * 4096 * 4096, mm(4096, 4096, 1)))
    out.append(("x 4096x768 @ W 768x3072", 2 * 4096 * 768 * 3072, mm(4096, 768, 3072)))
    out.append(("h 4096x3072 @ W 3072x768", 2 * 4096 * 3072 * 768, mm(4096, 3072, 768)))
    out.append(("x 4096x768 @ W 768x768", 2 * 4096 * 768 * 768, mm(4096, 768, 768)))
    out.append(("x 4096x768 @ W^T (linear)", 2 * 4096 * 768 * 3072, mm(4096, 768, 3072, tb=True)))
    out.append(("x^T 768x4096 @ dy 4096x3072", 2 * 768 * 4096 * 3072, mm(768, 4096, 3072, ta=True)))
    if quick:
        out = [c for c in out if c[1] <= 2 * 4096 * 768 * 768 or c[0].startswith("mv")]
    return out


def main():
    print(machine(), flush=True)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--dtypes", default="float32,bfloat16")
    args = ap.parse_args()
    pk = peak.measure(repeats=2, quick=True)
    print(f"machine: {pk['threads']} compute threads, torch {torch.get_num_threads()} threads; "
          f"FMA peak float32 {pk['fma32_all']:.0f} GFLOP/s (1 thread {pk['fma32_1']:.0f}), "
          f"float64 {pk['fma64_all']:.0f}")
    print(f"{'shape':<30}{'dtype':<10}{'cpu GF/s':>10}{'neuron GF/s':>13}{'ratio':>8}{'% peak':>8}")
    for dtype_name in args.dtypes.split(","):
        dtype = getattr(torch, dtype_name)
        for name, flops, make in cases(args.quick):
            t_cpu, t_dev = paired_medians([(make("cpu", dtype), torch.device("cpu")),
                                           (make("neuron", dtype), torch.device("neuron"))],
                                          args.repeats, budget=2.0)
            g_cpu, g_dev = flops / t_cpu / 1e9, flops / t_dev / 1e9
            print(f"{name:<30}{dtype_name:<10}{g_cpu:>10.1f}{g_dev:>13.1f}{t_cpu / t_dev:>8.2f}"
                  f"{100 * g_dev / pk['fma32_all']:>7.0f}%", flush=True)


if __name__ == "__main__":
    main()
