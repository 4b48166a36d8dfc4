"""Adaptive eager: neuron with fusion on vs off, next to torch CPU eager.

Each case runs its work in one process with the device's fusion switched
off and on (torch_neuronx.set_adaptive_eager) and on the CPU, the same
threads for all (torch's intra-op pool and the device's compute pool each
default to the number of cores).  A timed sample issues the case's work
--chain times back to back and synchronises once, as a program does between
two reads of a result, so the stream has work queued behind the running
task -- the window fusion looks at; the time per evaluation is the median
over --repeats samples, after an untimed pass that also lets the
compiled groups' background builds finish (a one-time cost per program
and cache).  Printed: the three times, the speed of fusion on
over off (> 1: faster) and over the CPU, and the device's peak memory with
fusion on and off (it must not grow).  Prints a table; asserts nothing.
Usage: python bench/adaptive.py [--quick] [--repeats N]
"""
import argparse
import math
import statistics
import os
import sys

import torch

import torch_neuronx
from timing import ROUNDS, machine, paired_medians, sync

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))


def chained(fn, chain):
    """One timed sample: `chain` evaluations of fn back to back.  Their
    results stay alive until the next sample has issued its work, as a
    program's results do until it reads them: a result dropped at once would
    be a dead value, which fusion never stores (and compiled groups never
    compute), and the case would time nothing."""
    kept = []

    def sample():
        results = [fn() for _ in range(chain)]
        kept[:] = results
    return sample


# ------------------------------------------------------------------ cases

def chain_case(dtype, n, tensors=False):
    """((x*a+b).sigmoid()*x - c).relu(): a, b, c Python numbers (the device
    scalars they become are constants of the group), or tensors of x's size."""
    def make(device):
        g = torch.Generator().manual_seed(0)
        x = torch.randn(n, generator=g).to(dtype).to(device)
        if tensors:
            a, b, c = (torch.randn(n, generator=g).to(dtype).to(device) for _ in range(3))
        else:
            a, b, c = 1.5, 0.25, 0.5
        return lambda: ((x * a + b).sigmoid() * x - c).relu()
    return make


def gelu_primitives(n):
    def make(device):
        x = torch.randn(n, generator=torch.Generator().manual_seed(0)).to(device)
        k = math.sqrt(2 / math.pi)
        # 8 primitives: x*x, *x, *0.044715, +x, *k, tanh, +1, *(0.5x) folded as two ops
        return lambda: (x * 0.5) * ((((x * x) * x * 0.044715 + x) * k).tanh() + 1)
    return make


def layer_norm_primitives(rows, cols):
    def make(device):
        g = torch.Generator().manual_seed(0)
        x = torch.randn(rows, cols, generator=g).to(device)
        w = torch.randn(cols, generator=g).to(device)
        b = torch.randn(cols, generator=g).to(device)

        def ln():
            mean = x.mean(-1, keepdim=True)
            xc = x - mean
            var = (xc * xc).mean(-1, keepdim=True)
            return xc / (var + 1e-5).sqrt() * w + b
        return ln
    return make


def adam_state(device, n_params, pieces=10):
    g = torch.Generator().manual_seed(0)
    size = n_params // pieces
    make = lambda: [torch.randn(size, generator=g).to(device) for _ in range(pieces)]  # noqa: E731
    params, grads, m = make(), make(), make()
    v = [t.abs() for t in make()]
    return params, grads, m, v


def adam_plain(n_params):
    """Adam written as plain in-place tensor ops (the textbook loop)."""
    def make(device):
        params, grads, ms, vs = adam_state(device, n_params)
        lr, b1, b2, eps = 1e-3, 0.9, 0.999, 1e-8
        state = {"step": 0}

        def step():
            state["step"] += 1
            t = state["step"]
            bc1, bc2 = 1 - b1 ** t, 1 - b2 ** t
            for p, g, m, v in zip(params, grads, ms, vs):
                m.mul_(b1).add_(g, alpha=1 - b1)
                v.mul_(b2).addcmul_(g, g, value=1 - b2)
                denom = (v.sqrt() / math.sqrt(bc2)).add_(eps)
                p.addcdiv_(m, denom, value=-lr / bc1)
        return step
    return make


def adam_fused(n_params):
    """torch.optim.Adam(fused=True): the device's one-kernel optimizer step."""
    def make(device):
        params, grads, _, _ = adam_state(device, n_params)
        params = [torch.nn.Parameter(p) for p in params]
        for p, g in zip(params, grads):
            p.grad = g
        opt = torch.optim.Adam(params, lr=1e-3, fused=True)
        return opt.step
    return make


def gemm_loop(size, count):
    def make(device):
        g = torch.Generator().manual_seed(0)
        a, b = (torch.randn(size, size, generator=g).to(device) for _ in range(2))

        def loop():
            c = a
            for _ in range(count):
                c = torch.mm(c, b) * (1.0 / size)  # one scale per product keeps values finite
            return c
        return loop
    return make


def train_case(module_name):
    """The example's own training loop (bench/train.py's steps/s, inverted)."""
    def measure_steps(device, repeats):
        from train import steps_per_second
        module = __import__(module_name)
        window = 20 if module_name == "train_mlp" else 5
        return 1.0 / steps_per_second(module, device, "none", 3, window, repeats)
    measure_steps.times_itself = True  # measure() calls it with (device, repeats)
    return measure_steps

# ------------------------------------------------------------------ driver

def measure(make, chain, repeats):
    """(cpu s, off s, on s, peak off, peak on) per evaluation (per step for
    the training cases, which time themselves).  The three sides take turns
    (timing.paired_medians; a training case: rounds of its own loop), so a
    slow phase of a noisy machine falls on all of them alike.  Off and on
    run the same neuron tensors; each mode's peak memory is read in a pass
    of its own before the timing, from the same starting point."""
    neuron, cpu = torch.device("neuron"), torch.device("cpu")
    modes = (lambda: torch_neuronx.set_adaptive_eager(False), lambda: torch_neuronx.set_adaptive_eager(True))
    peaks = []
    if getattr(make, "times_itself", False):
        modes[1]()
        make("neuron", 1)  # an untimed round: compiled groups are built (once per program)
        torch_neuronx._C._fusion_jit_drain()
        runs = [[], [], []]
        for _ in range(ROUNDS):
            for side, enter in enumerate(modes):
                enter()
                sync(neuron)
                torch.neuron.reset_peak_memory_stats()
                runs[side].append(make("neuron", max(1, repeats // ROUNDS)))
                if len(peaks) < 2:
                    peaks.append(torch.neuron.max_memory_allocated())
            runs[2].append(make("cpu", max(1, repeats // ROUNDS)))
        off, on, cpu_s = (statistics.median(r) for r in runs)
    else:
        sample = chained(make("neuron"), chain)
        for enter in modes:
            enter()
            sample()
            sync(neuron)
            torch_neuronx._C._fusion_jit_drain()  # compiled groups are built once per program
            torch.neuron.reset_peak_memory_stats()
            sample()
            sync(neuron)
            peaks.append(torch.neuron.max_memory_allocated())
        off, on, cpu_s = (t / chain for t in paired_medians(
            [(sample, neuron, modes[0]), (sample, neuron, modes[1]),
             (chained(make("cpu"), chain), cpu)], repeats))
    torch_neuronx.set_adaptive_eager(True)
    return cpu_s, off, on, peaks[0], peaks[1]


def main():
    print(machine(), flush=True)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer repeats")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--chain", type=int, default=4, help="evaluations per timed sample")
    parser.add_argument("--cases", default="", help="comma-separated name prefixes to run")
    args = parser.parse_args()
    repeats = args.repeats or (3 if args.quick else 5)
    log2n = 22 if args.quick else 24
    n = 1 << log2n
    cases = [
        (f"chain f32 2^{log2n}", chain_case(torch.float32, n), args.chain),
        (f"chain bf16 2^{log2n}", chain_case(torch.bfloat16, n), args.chain),
        (f"chain f32 2^{log2n}, a b c tensors", chain_case(torch.float32, n, True), args.chain),
        (f"gelu-tanh, 8 primitives, 2^{log2n}", gelu_primitives(n), args.chain),
        ("layernorm primitives 4096x4096", layer_norm_primitives(4096, 4096), args.chain),
        ("adam plain ops 10M", adam_plain(10_000_000), args.chain),
        ("adam fused=True 10M", adam_fused(10_000_000), args.chain),
        ("gemm loop 512^3 x8", gemm_loop(512, 8), args.chain),
        ("train_mlp step", train_case("train_mlp"), 0),
        ("train_cnn step", train_case("train_cnn"), 0),
        ("train_gpt step", train_case("train_gpt"), 0),
    ]
    wanted = [c for c in args.cases.split(",") if c]
    print(f"# median of {repeats}")
    print(f"{'case':<34} {'cpu ms':>8} {'off ms':>8} {'on ms':>8} {'on/off':>7} {'vs cpu':>7}"
          f" {'peak off MiB':>12} {'peak on MiB':>12}")
    for name, make, chain in cases:
        if wanted and not any(name.startswith(w) for w in wanted):
            continue
        cpu_s, off, on, p_off, p_on = measure(make, chain, repeats)
        print(f"{name:<34} {cpu_s * 1e3:8.2f} {off * 1e3:8.2f} {on * 1e3:8.2f} {off / on:6.2f}x"
              f" {cpu_s / on:6.2f}x {p_off / 2**20:12.1f} {p_on / 2**20:12.1f}", flush=True)


if __name__ == "__main__":
    main()
