"""Normalisation: neuron next to torch CPU, float32.

layer_norm forward and forward+backward (weight and bias, the input's
gradient too), rms_norm forward and forward+backward, batch_norm (training,
ResNet-like (32, 256, 28, 28)) forward and forward+backward, group_norm
forward and forward+backward.  For each case, the median time over
--repeats runs on the CPU and on neuron (synchronised) in the same process,
printed as the speed ratio cpu_time / neuron_time (> 1: neuron is faster)
and as the effective bandwidth of each (the bytes the op must at least read
and write / time): forward reads x once and writes y once; backward reads x
and dy and writes dx (weights and statistics are negligible).  The CPU copy
bandwidth of the same run is printed for scale.  Same threads for both (the
intra-op pool and the compute pool default to the core count).  Prints a
table; asserts nothing.

Convolutional shapes (--conv, or with the others unless --quick): batch_norm
on the small ResNet of examples/train_cnn.py ((32, 16, 16, 16), (32, 32, 8,
8)) and on ResNet-50-like layers ((8, 64, 56, 56), (8, 256, 14, 14), (8,
512, 7, 7)), forward, forward+backward and the backward alone
(native_batch_norm_backward with the saved statistics), float32 and
bfloat16; group_norm (8, 64, 28, 28) g=32 likewise.  --threads N sets both
pools to N threads (TORCHNEURON_NUM_THREADS and torch.set_num_threads) for
single-thread cost; --only SUBSTR keeps the cases whose name contains it;
--loop CASE --seconds S runs one case on neuron (or --loop-cpu on the CPU)
in a loop, for perf record (--calls K: K calls, printing the process CPU
time per call).
Usage: python bench/norm.py [--repeats N] [--quick] [--conv] [--threads N] [--only S]
"""
import argparse
import os
import sys
import time

if "--threads" in sys.argv:  # before torch_neuronx starts its pool
    os.environ["TORCHNEURON_NUM_THREADS"] = sys.argv[sys.argv.index("--threads") + 1]

import torch
import torch.nn.functional as F

import torch_neuronx  # noqa: F401  (registers the device)
from timing import median_seconds, paired_medians, sync, machine


def layer_norm_case(shape, backward):
    def make(device):
        g = torch.Generator().manual_seed(0)
        x = torch.randn(shape, generator=g).to(device).requires_grad_(backward)
        w = torch.randn(shape[-1], generator=g).to(device).requires_grad_(backward)
        b = torch.randn(shape[-1], generator=g).to(device).requires_grad_(backward)
        dy = torch.randn(shape, generator=g).to(device)
        if not backward:
            return lambda: F.layer_norm(x, shape[-1:], w, b)
        return lambda: torch.autograd.grad(F.layer_norm(x, shape[-1:], w, b), (x, w, b), dy)
    return make


def rms_norm_case(shape, backward):
    def make(device):
        g = torch.Generator().manual_seed(0)
        x = torch.randn(shape, generator=g).to(device).requires_grad_(backward)
        w = torch.randn(shape[-1], generator=g).to(device).requires_grad_(backward)
        dy = torch.randn(shape, generator=g).to(device)
        if not backward:
            return lambda: F.rms_norm(x, shape[-1:], w, 1e-6)
        return lambda: torch.autograd.grad(F.rms_norm(x, shape[-1:], w, 1e-6), (x, w), dy)
    return make


def batch_norm_case(shape, backward, dtype=torch.float32):
    """backward: False (forward), True (forward+backward) or "only" (the
    backward kernel alone, from the saved statistics)"""
    def make(device):
        g = torch.Generator().manual_seed(0)
        C = shape[1]
        x = torch.randn(shape, generator=g).to(device, dtype).requires_grad_(backward is True)
        w = torch.randn(C, generator=g).to(device, dtype).requires_grad_(backward is True)
        b = torch.randn(C, generator=g).to(device, dtype).requires_grad_(backward is True)
        rm, rv = torch.zeros(C, device=device, dtype=dtype), torch.ones(C, device=device, dtype=dtype)
        dy = torch.randn(shape, generator=g).to(device, dtype)
        f = lambda: F.batch_norm(x, rm, rv, w, b, training=True)  # noqa: E731
        if not backward:
            return f
        if backward == "only":
            _, mean, invstd = torch.ops.aten.native_batch_norm(x, w, b, rm, rv, True, 0.1, 1e-5)
            return lambda: torch.ops.aten.native_batch_norm_backward(
                dy, x, w, rm, rv, mean, invstd, True, 1e-5, [True, True, True])
        return lambda: torch.autograd.grad(f(), (x, w, b), dy)
    return make


def group_norm_case(shape, groups, backward, dtype=torch.float32):
    def make(device):
        g = torch.Generator().manual_seed(0)
        C = shape[1]
        x = torch.randn(shape, generator=g).to(device, dtype).requires_grad_(backward)
        w = torch.randn(C, generator=g).to(device, dtype).requires_grad_(backward)
        b = torch.randn(C, generator=g).to(device, dtype).requires_grad_(backward)
        dy = torch.randn(shape, generator=g).to(device, dtype)
        f = lambda: F.group_norm(x, groups, w, b)  # noqa: E731
        if not backward:
            return f
        return lambda: torch.autograd.grad(f(), (x, w, b), dy)
    return make


CONV_BN = [(32, 16, 16, 16), (32, 32, 8, 8), (8, 64, 56, 56), (8, 256, 14, 14), (8, 512, 7, 7)]


def conv_cases():
    out = []
    for dtype, tag in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
        for s in CONV_BN:
            n = dtype.itemsize
            for d in s:
                n *= d
            out.append((f"bn {tag} {s}", 2 * n, batch_norm_case(s, False, dtype)))
            out.append((f"bn {tag} {s} bwd", 3 * n, batch_norm_case(s, "only", dtype)))
            out.append((f"bn {tag} {s} fwd+bwd", 5 * n, batch_norm_case(s, True, dtype)))
        s = (8, 64, 28, 28)
        n = dtype.itemsize * 8 * 64 * 28 * 28
        out.append((f"gn {tag} {s} g=32", 2 * n, group_norm_case(s, 32, False, dtype)))
        out.append((f"gn {tag} {s} g=32 fwd+bwd", 5 * n, group_norm_case(s, 32, True, dtype)))
    return out


def cases(quick):
    ln_shapes = [(4096, 768)] if quick else [(4096, 768), (8192, 1024), (2048, 4096)]
    bn_shape = (8, 256, 28, 28) if quick else (32, 256, 28, 28)
    gn_shape = (8, 256, 28, 28) if quick else (32, 256, 28, 28)
    out = []
    for s in ln_shapes:
        n = s[0] * s[1] * 4
        out.append((f"layer_norm {s}", 2 * n, layer_norm_case(s, False)))
        out.append((f"layer_norm {s} fwd+bwd", 2 * n + 3 * n, layer_norm_case(s, True)))
    for s in ln_shapes[:2]:
        n = s[0] * s[1] * 4
        out.append((f"rms_norm {s}", 2 * n, rms_norm_case(s, False)))
        out.append((f"rms_norm {s} fwd+bwd", 2 * n + 3 * n, rms_norm_case(s, True)))
    n = 4
    for d in bn_shape:
        n *= d
    out.append((f"batch_norm {bn_shape}", 2 * n, batch_norm_case(bn_shape, False)))
    out.append((f"batch_norm {bn_shape} fwd+bwd", 5 * n, batch_norm_case(bn_shape, True)))
    out.append((f"group_norm {gn_shape} g=32", 2 * n, group_norm_case(gn_shape, 32, False)))
    out.append((f"group_norm {gn_shape} g=32 fwd+bwd", 5 * n, group_norm_case(gn_shape, 32, True)))
    return out


def copy_bandwidth(repeats):
    n = 1 << 24
    src, dst = torch.randn(n), torch.empty(n)
    best = min(median_seconds(lambda: dst.copy_(src), torch.device("cpu"), 1) for _ in range(repeats))
    return 2 * n * 4 / best


def main():
    print(machine(), flush=True)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="fewer, smaller cases, 3 repeats")
    parser.add_argument("--conv", action="store_true", help="only the convolutional shapes")
    parser.add_argument("--threads", type=int, help="threads of both pools")
    parser.add_argument("--only", help="cases whose name contains this")
    parser.add_argument("--loop", help="run the case of this exact name in a loop (perf record)")
    parser.add_argument("--loop-cpu", action="store_true", help="--loop on the CPU")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--calls", type=int, help="--loop: this many calls; prints the process CPU time per call")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    repeats = 3 if args.quick else args.repeats
    cpu, neuron = torch.device("cpu"), torch.device("neuron")
    todo = conv_cases() if args.conv else cases(args.quick) + ([] if args.quick else conv_cases())
    if args.only:
        todo = [c for c in todo if args.only in c[0]]
    if args.loop:
        dev = cpu if args.loop_cpu else neuron
        fn = next(m for n, _, m in todo if n == args.loop)(dev)
        end, k = time.perf_counter() + args.seconds, 0
        if args.calls:
            fn()
            sync(dev)
            t0 = time.process_time()
            for _ in range(args.calls):
                fn()
            sync(dev)
            print(f"{args.loop} {'cpu' if args.loop_cpu else 'neuron'}: "
                  f"{(time.process_time() - t0) / args.calls * 1e6:.1f} us CPU time per call")
            return
        while time.perf_counter() < end:
            for _ in range(10):
                fn()
            sync(dev)
            k += 10
        print(f"{k} calls")
        return
    peak = copy_bandwidth(repeats)
    print(f"{torch.get_num_threads()} threads; CPU copy bandwidth {peak / 1e9:.1f} GB/s")
    print(f"{'case':<44} {'cpu ms':>8} {'neuron ms':>10} {'speed':>7} {'cpu GB/s':>9} {'neuron GB/s':>12}")
    for name, nbytes, make in todo:
        t_cpu, t_dev = paired_medians([(make(cpu), cpu), (make(neuron), neuron)], repeats)
        print(f"{name:<44} {t_cpu * 1e3:>8.2f} {t_dev * 1e3:>10.2f} {t_cpu / t_dev:>6.2f}x "
              f"{nbytes / t_cpu / 1e9:>9.1f} {nbytes / t_dev / 1e9:>12.1f}")


if __name__ == "__main__":
    main()
