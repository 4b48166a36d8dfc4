"""One optimizer step: neuron next to torch CPU in the same run.

~25M float32 parameters in 100 tensors (sizes varying ~50x), gradients set
once; one step of AdamW (foreach=True and fused=True), Adam fused, and SGD
with momentum (foreach=True and fused=True).  The CPU runs its best: for
Adam/AdamW the fused kernel and the foreach path are both shown, so the
ratio column compares neuron with the same mode and the "vs cpu best"
column with the CPU's fastest.  For each case, the median over --repeats
steps (after warm-up steps that create the state) on the CPU and on neuron
(synchronised), printed as cpu_time / neuron_time (> 1: neuron is faster)
and as the effective bandwidth (the bytes a step must at least read and
write / time) next to the machine's copy bandwidth measured in the same run.

Threads are the same for both (torch's intra-op pool and the device's
compute pool default to the number of cores).  Prints a table; asserts
nothing.  Usage: python bench/optim.py [--repeats N] [--quick]
"""
import argparse

import torch
from timing import median_seconds, paired_medians, sync, machine


def param_sizes(total, count):
    # sizes from ~x to ~50x, deterministic, summing to about `total`
    weights = [1 + 49 * ((i * 37) % count) / (count - 1) for i in range(count)]
    scale = total / sum(weights)
    return [max(1, int(w * scale)) for w in weights]


# (name, optimizer class, kwargs, bytes per parameter element and step)
#   AdamW/Adam: read param, grad, exp_avg, exp_avg_sq; write param, exp_avg,
#   exp_avg_sq = 7 x 4 bytes.  SGD momentum: read param, grad, buf; write
#   param, buf = 5 x 4 bytes.
CASES = [
    ("adamw foreach", torch.optim.AdamW, dict(lr=1e-3, foreach=True), 28),
    ("adamw fused", torch.optim.AdamW, dict(lr=1e-3, fused=True), 28),
    ("adam fused", torch.optim.Adam, dict(lr=1e-3, fused=True), 28),
    ("sgd momentum foreach", torch.optim.SGD, dict(lr=1e-2, momentum=0.9, foreach=True), 20),
    ("sgd momentum fused", torch.optim.SGD, dict(lr=1e-2, momentum=0.9, fused=True), 20),
]
BEST_CPU = {"adamw foreach": "adamw fused", "sgd momentum foreach": "sgd momentum fused"}


def make_step(device, sizes, cls, kwargs):
    g = torch.Generator().manual_seed(0)
    params = []
    for n in sizes:
        p = torch.nn.Parameter(torch.randn(n, generator=g).to(device))
        p.grad = (torch.randn(n, generator=g) * 1e-2).to(device)
        params.append(p)
    opt = cls(params, **kwargs)
    opt.step()  # creates the state
    return opt.step


def copy_bandwidth(n, repeats):
    src, dst = torch.randn(n), torch.empty(n)
    t = median_seconds(lambda: dst.copy_(src), torch.device("cpu"), repeats)
    return 2 * 4 * n / t


def main():
    print(machine(), flush=True)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--params", type=float, default=25e6)
    parser.add_argument("--tensors", type=int, default=100)
    parser.add_argument("--quick", action="store_true", help="4M parameters, 3 repeats")
    args = parser.parse_args()
    if args.quick:
        args.params, args.repeats = 4e6, 3
    sizes = param_sizes(int(args.params), args.tensors)
    total = sum(sizes)
    peak = copy_bandwidth(total, args.repeats)
    dev = torch.device("neuron")
    print(f"{total / 1e6:.1f}M float32 parameters in {len(sizes)} tensors "
          f"({min(sizes)}..{max(sizes)}), {torch.get_num_threads()} threads; "
          f"CPU copy bandwidth {peak / 1e9:.1f} GB/s")
    print(f"{'step':<22} {'cpu ms':>8} {'neuron ms':>10} {'cpu/neuron':>11} {'vs cpu best':>12} "
          f"{'cpu GB/s':>9} {'neuron GB/s':>12} {'neuron % copy':>14}")
    times = {}
    for name, cls, kw, per_elem in CASES:
        step = make_step(dev, sizes, cls, kw)
        sync(dev)
        t_cpu, t_dev = paired_medians([(make_step(torch.device("cpu"), sizes, cls, kw),
                                        torch.device("cpu")), (step, dev)], args.repeats)
        times[name] = (t_cpu, t_dev, per_elem)
    for name, (t_cpu, t_dev, per_elem) in times.items():
        best = min(t_cpu, times[BEST_CPU.get(name, name)][0])
        nbytes = per_elem * total
        print(f"{name:<22} {t_cpu * 1e3:>8.2f} {t_dev * 1e3:>10.2f} {t_cpu / t_dev:>10.2f}x "
              f"{best / t_dev:>11.2f}x {nbytes / t_cpu / 1e9:>9.1f} {nbytes / t_dev / 1e9:>12.1f} "
              f"{100 * nbytes / t_dev / peak:>13.0f}%")

if __name__ == "__main__":
    main()
