"""The machine's measured peak: FMA GFLOP/s (float32, float64; one thread and
all threads of the device's compute pool) and copy bandwidth (GB/s), so other
benchmarks can give their figures as a fraction of what the machine can do.

The FMA figure comes from a C loop of independent register-only fused
multiply-adds in the widest ISA the kernels use (torch_neuronx._C._peak_fma,
kernels/src/gemm/peak_<isa>_fma.c); the copy bandwidth from `dst.copy_(src)` of
2^25 float32 (128 MiB each way) on the CPU and on neuron (bytes read + bytes
written / time).  Best of --repeats (a peak, not a typical figure).  Prints a
table; asserts nothing.  Usage: python bench/peak.py [--repeats N] [--quick]

Other benchmarks import `measure()` to get the same numbers.
"""
import argparse
import time

import torch
import torch_neuronx  # noqa: F401  (registers the device)
from torch_neuronx import _C
from timing import machine  # noqa: E402


def fma_gflops(f64, threads, seconds=0.25, repeats=3):
    """Best GFLOP/s of the FMA loop on `threads` pool threads (1: this one)."""
    iters = 1 << 16
    while True:  # size the run to ~`seconds`
        start = time.perf_counter()
        _C._peak_fma(iters, f64, threads)
        if time.perf_counter() - start > seconds / 4 or iters > 1 << 34:
            break
        iters *= 4
    best = 0.0
    for _ in range(repeats):
        start = time.perf_counter()
        flops = _C._peak_fma(iters, f64, threads)
        best = max(best, flops / (time.perf_counter() - start) / 1e9)
    return best


def copy_gbps(device, repeats=5, n=1 << 25):
    src = torch.ones(n, device=device)
    dst = torch.empty(n, device=device)
    best = 0.0
    for _ in range(repeats + 1):
        start = time.perf_counter()
        dst.copy_(src)
        if device != "cpu":
            torch.neuron.synchronize()
        best = max(best, 2 * 4 * n / (time.perf_counter() - start) / 1e9)
    return best


def measure(repeats=3, quick=False):
    """dict: fma32_1, fma32_all, fma64_1, fma64_all (GFLOP/s), copy_cpu,
    copy_neuron (GB/s), threads."""
    threads = _C._compute_threads()
    seconds = 0.1 if quick else 0.25
    out = dict(threads=threads)
    for name, f64 in (("fma32", False), ("fma64", True)):
        out[name + "_1"] = fma_gflops(f64, 1, seconds, repeats)
        out[name + "_all"] = fma_gflops(f64, threads, seconds, repeats)
    n = 1 << (23 if quick else 25)
    out["copy_cpu"] = copy_gbps("cpu", repeats, n)
    out["copy_neuron"] = copy_gbps("neuron", repeats, n)
    return out


def main():
    print(machine(), flush=True)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    r = measure(args.repeats, args.quick)
    t = r["threads"]
    print(f"compute pool: {t} threads; torch CPU threads: {torch.get_num_threads()}")
    print(f"{'what':<28}{'1 thread':>12}{f'{t} threads':>14}")
    print(f"{'FMA float32 (GFLOP/s)':<28}{r['fma32_1']:>12.1f}{r['fma32_all']:>14.1f}")
    print(f"{'FMA float64 (GFLOP/s)':<28}{r['fma64_1']:>12.1f}{r['fma64_all']:>14.1f}")
    print(f"{'copy, CPU (GB/s)':<28}{'':>12}{r['copy_cpu']:>14.1f}")
    print(f"{'copy, neuron (GB/s)':<28}{'':>12}{r['copy_neuron']:>14.1f}")


if __name__ == "__main__":
    main()
