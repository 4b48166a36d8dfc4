"""NKI kernels (torch_neuronx.nki, the samples of examples/nki) on neuron next
to torch CPU eager, in one run with the same threads (the compute pool and
torch's intra-op pool both default to the core count).

Each case prints the median over --repeats runs (the device synchronised
before each timer stops) and the ratio against its reference, with the
target of issue 17:
  tensor_add       bandwidth (3 tensors moved) / torch's copy bandwidth  >= 0.7
  rmsnorm, layernorm, softmax   torch composite ops / NKI                >= 2
                   (the fused native torch op is printed for scale)
  matmul           torch.mm / NKI (lhsT given transposed, untimed)       >= 0.5
  flash attention  F.scaled_dot_product_attention / NKI                  >= 0.5
  first call       trace + C lowering + gcc, empty disk cache (s)
  dispatch         host time per cached launch, no synchronisation (us)  <= 30
  simulator        nki.simulate time / compiled time (slowdown)
Prints a table; asserts nothing.  The machine's other load moves every
number: the ratios compare within one run.
Usage: python bench/nki.py [--repeats N] [--quick]
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

import torch_neuronx  # noqa: F401  (registers the device)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "examples", "nki"))

from timing import machine, median_seconds, paired_medians  # noqa: E402

from torch_neuronx import nki  # noqa: E402
from torch_neuronx.nki import build  # noqa: E402

NEURON, CPU = torch.device("neuron"), torch.device("cpu")
ROWS = []


def row(name, nki_s, ref_s, ratio, target, unit="ratio"):
    ok = "" if target is None else ("ok" if ratio >= target else "BELOW TARGET")
    ROWS.append((name, nki_s, ref_s, ratio, target, unit, ok))
    t = "" if target is None else f">= {target}"
    print(f"{name:44s} {nki_s * 1e3:10.2f} {ref_s * 1e3:10.2f} {ratio:9.2f} {t:>7s} {ok}",
          flush=True)


def header():
    # the CPU, torch's threads and the ISAs: main() printed machine() already
    isa = {0: "portable", 1: "avx2", 2: "avx512"}.get(build.runtime_symbols()[1], "?")
    print(f"NKI kernels' ISA: {isa}; compute pool {torch_neuronx._C._compute_threads()} threads; "
          f"compiler: {(build.compiler() or ('none', 'none'))[1]}")
    print(f"{'case':44s} {'nki ms':>10s} {'ref ms':>10s} {'ratio':>9s} {'target':>7s}")


def elementwise(reps, n):
    from tensor_add import nki_tensor_add

    src = torch.randn(n, n)
    dst = torch.empty_like(src)
    t_copy = median_seconds(lambda: dst.copy_(src), CPU, reps)
    copy_bw = 2 * src.numel() * 4 / t_copy
    print(f"  torch CPU copy bandwidth {copy_bw / 1e9:.1f} GB/s ({n}x{n} float32)")
    for dt in (torch.float32, torch.bfloat16):
        a, b = torch.randn(n, n).to(dt), torch.randn(n, n).to(dt)
        an, bn = a.to(NEURON), b.to(NEURON)
        t_copy, t = paired_medians([(lambda: dst.copy_(src), CPU),  # again: same moments
                                    (lambda: nki_tensor_add(an, bn), NEURON)], reps)
        bw = 3 * a.numel() * a.element_size() / t
        cbw = 2 * src.numel() * 4 / t_copy
        row(f"tensor_add {n}x{n} {str(dt)[6:]} ({bw / 1e9:.1f} GB/s)", t, t_copy, bw / cbw, 0.7)


def norms(reps, shapes):
    from layernorm import nki_layernorm_kernel_v1
    from rmsnorm import nki_rmsnorm_kernel
    from softmax import nki_softmax_kernel

    eps = 1e-5
    for shape in shapes:
        x, g, b = torch.randn(*shape), torch.randn(shape[1]), torch.randn(shape[1])
        xn, gn, bn = x.to(NEURON), g.to(NEURON), b.to(NEURON)

        def rms_composite():
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * g

        def ln_composite():
            mean = x.mean(-1, keepdim=True)
            var = (x - mean).pow(2).mean(-1, keepdim=True)
            return (x - mean) * torch.rsqrt(var + eps) * g + b

        def sm_composite():
            e = torch.exp(x - x.amax(-1, keepdim=True))
            return e / e.sum(-1, keepdim=True)

        cases = [
            ("rmsnorm", rms_composite, lambda: F.rms_norm(x, shape[1:], g, eps),
             lambda: nki_rmsnorm_kernel(xn, gn, eps)),
            ("layernorm", ln_composite, lambda: F.layer_norm(x, shape[1:], g, b, eps),
             lambda: nki_layernorm_kernel_v1(xn, eps, gn, bn)),
            ("softmax", sm_composite, lambda: torch.softmax(x, -1),
             lambda: nki_softmax_kernel(xn)),
        ]
        for name, composite, native, kernel in cases:
            kernel()
            tc, tn, tf = paired_medians([(composite, CPU), (kernel, NEURON), (native, CPU)], reps)
            row(f"{name} {shape[0]}x{shape[1]} vs composite", tn, tc, tc / tn, 2)
            row(f"{name} {shape[0]}x{shape[1]} vs fused torch op", tn, tf, tf / tn, None)


def matmuls(reps, sizes):
    from matmul import nki_matmul_hoist_load_, nki_matmul_tiled_

    for n in sizes:
        a, b = torch.randn(n, n), torch.randn(n, n)
        aT = a.T.contiguous().to(NEURON)
        bn = b.to(NEURON)
        for name, k in (("hoist_load", nki_matmul_hoist_load_), ("tiled", nki_matmul_tiled_)):
            k(aT, bn)
            tc, tn = paired_medians([(lambda: torch.mm(a, b), CPU), (lambda: k(aT, bn), NEURON)], reps)
            row(f"matmul_{name} {n}^3 ({2 * n ** 3 / tn / 1e9:.0f} GFLOP/s) vs torch.mm", tn, tc,
                tc / tn, 0.5)


def attention(reps, seqs):
    from flash_attention import flash_fwd

    B, H, D = 1, 4, 128
    for S in seqs:
        q, k, v = (torch.randn(B, H, S, D) for _ in range(3))
        args = [t.transpose(2, 3).contiguous().to(NEURON) for t in (q, k)] + [v.to(NEURON)]
        for causal in (False, True):
            flash_fwd[B, H](*args, causal=causal)
            tc, tn = paired_medians(
                [(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal), CPU),
                 (lambda: flash_fwd[B, H](*args, causal=causal), NEURON)], reps)
            row(f"flash_fwd B{B} H{H} S{S} d{D} causal={causal} vs SDPA", tn, tc, tc / tn, 0.5)


def first_call_and_dispatch(reps):
    from rmsnorm import nki_rmsnorm_kernel
    from tensor_add import nki_tensor_add_kernel_

    x, g = torch.randn(1024, 1024, device=NEURON), torch.randn(1024, device=NEURON)
    old = os.environ.get("TORCHNEURON_NKI_CACHE")
    with tempfile.TemporaryDirectory() as d:
        os.environ["TORCHNEURON_NKI_CACHE"] = d
        try:
            fresh = nki.jit(nki_rmsnorm_kernel.fn)
            t0 = time.perf_counter()
            tr = fresh.trace((1,), (x, g), {})
            t_trace = time.perf_counter() - t0
            fresh = nki.jit(nki_rmsnorm_kernel.fn)
            t0 = time.perf_counter()
            fresh(x, g)
            torch.neuron.synchronize()
            t_first = time.perf_counter() - t0
        finally:
            if old is None:
                del os.environ["TORCHNEURON_NKI_CACHE"]
            else:
                os.environ["TORCHNEURON_NKI_CACHE"] = old
    del tr
    print(f"  first call of rmsnorm 1024x1024 (trace + lower + gcc, empty cache): "
          f"{t_first:.2f} s, of which trace {t_trace * 1e3:.0f} ms")
    a = torch.randn(128, 512, device=NEURON)  # one tile: the launch, not the work
    k = nki_tensor_add_kernel_[1, 1]
    k(a, a)
    torch.neuron.synchronize()
    per_call = []
    for _ in range(reps):
        n = 2000
        t0 = time.perf_counter()
        for _ in range(n):
            k(a, a)
        per_call.append((time.perf_counter() - t0) / n)
        torch.neuron.synchronize()
    us = statistics.median(per_call) * 1e6
    print(f"  cached dispatch (tensor_add[1, 1] 128x512, host time per launch, no sync): "
          f"{us:.1f} us (target <= 30): {'ok' if us <= 30 else 'ABOVE TARGET'}")

    xc, gc = torch.randn(1024, 1024), torch.randn(1024)
    nki_rmsnorm_kernel(xc, gc)
    t_c = median_seconds(lambda: nki_rmsnorm_kernel(xc, gc), CPU, reps)
    sim = nki.simulate(nki_rmsnorm_kernel)
    t_s = median_seconds(lambda: sim(xc, gc), CPU, max(1, reps // 2))
    print(f"  simulator on rmsnorm 1024x1024: {t_s * 1e3:.1f} ms vs compiled {t_c * 1e3:.2f} ms: "
          f"{t_s / t_c:.0f}x slower")


def main():
    print(machine(), flush=True)
    p = argparse.ArgumentParser()
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--quick", action="store_true")
    args = p.parse_known_args()[0]  # make bench passes BENCH_ARGS to every bench
    header()
    reps = args.repeats
    elementwise(reps, 4096)
    norms(reps, [(4096, 4096)] if args.quick else [(4096, 4096), (4096, 8192)])
    matmuls(max(3, reps // 2), [1024] if args.quick else [1024, 2048])
    attention(max(3, reps // 2), [2048] if args.quick else [2048, 4096])
    first_call_and_dispatch(reps)
    below = [r[0] for r in ROWS if r[6] == "BELOW TARGET"]
    print(f"{len(ROWS)} rows, {len(below)} below target" + (f": {below}" if below else ""))


if __name__ == "__main__":
    main()
