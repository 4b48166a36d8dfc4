"""Collectives of the `neuron` c10d backend next to gloo on CPU tensors.

The matrix of issue 6: all_reduce, all_gather_into_tensor and
reduce_scatter_tensor (float32, sum), message sizes 4 KiB .. 256 MiB (powers
of 4; the size is the full tensor: all_reduce's tensor, all_gather's output,
reduce_scatter's input), 2 and 4 ranks (mp.spawn), each in one
"cpu:gloo,neuron:neuron" process group so both backends run in the same
processes, on the same machine, in the same run.

For each cell, as NCCL-tests time them: after a warm-up, a barrier, then
`iters` calls back to back (20 up to 64 KiB, 5 up to 4 MiB, 1 above), the
neuron side synchronised before the timer stops; time / iters is one sample,
the median of --repeats samples is shown, on neuron tensors and on CPU
tensors (gloo); the ratio gloo_time / neuron_time (> 1: neuron faster);
each backend's bus bandwidth, NCCL-tests convention (all_reduce moves
2(n-1)/n of the message per rank, all_gather / reduce_scatter (n-1)/n); and
the neuron bus bandwidth as a fraction of the machine's copy bandwidth
(measured first, in this run: best of a few single-thread
`dst.copy_(src)` of 64 MiB on the CPU, bytes copied / time).  The ranks
share the machine's cores with each other (and with anyone else): on a
2-core machine 4 ranks are oversubscribed and every figure is noisy.
Prints tables from rank 0; asserts nothing.

Usage: python bench/comm.py [--ranks 2,4] [--repeats 5] [--max-mib 256] [--quick]
"""
import argparse
import os
import socket
import statistics
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

COLLECTIVES = (
    ("all_reduce", lambda w: 2 * (w - 1) / w),
    ("all_gather_into_tensor", lambda w: (w - 1) / w),
    ("reduce_scatter_tensor", lambda w: (w - 1) / w),
)


def timed(fn, device, repeats, iters):
    fn()
    if device.type != "cpu":
        torch.neuron.synchronize()
    samples = []
    for _ in range(repeats):
        dist.barrier()
        start = time.perf_counter()
        for _ in range(iters):
            fn()
        if device.type != "cpu":
            torch.neuron.synchronize()
        samples.append((time.perf_counter() - start) / iters)
    return statistics.median(samples)


def make(name, n, world, device):
    if name == "all_reduce":
        x = torch.ones(n, device=device)
        return lambda: dist.all_reduce(x)
    if name == "all_gather_into_tensor":
        x = torch.ones(n // world, device=device)
        out = torch.empty(n, device=device)
        return lambda: dist.all_gather_into_tensor(out, x)
    x = torch.ones(n, device=device)
    out = torch.empty(n // world, device=device)
    return lambda: dist.reduce_scatter_tensor(out, x)


def worker(rank, world, port, sizes, repeats, queue):
    import warnings

    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    dist.init_process_group("cpu:gloo,neuron:neuron", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=world)
    rows = []
    for nbytes in sizes:
        n = max(world, nbytes // 4) // world * world
        reps = repeats if nbytes <= (4 << 20) else max(2, repeats // 2)
        iters = 20 if nbytes <= (64 << 10) else 5 if nbytes <= (4 << 20) else 1
        for name, factor in COLLECTIVES:
            times = {}
            for dev in ("neuron", "cpu"):
                fn = make(name, n, world, torch.device(dev))
                times[dev] = timed(fn, torch.device(dev), reps, iters)
                del fn
            rows.append((name, n * 4, times["neuron"], times["cpu"], factor(world)))
    if rank == 0:
        queue.put(rows)
    dist.destroy_process_group()


def copy_bandwidth():
    torch.set_num_threads(1)
    src = torch.ones(16 << 20)
    dst = torch.empty_like(src)
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        dst.copy_(src)
        best = min(best, time.perf_counter() - t0)
    return src.numel() * 4 / best / 1e9


def human(b):
    for unit, s in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= s:
            return f"{b / s:g} {unit}"
    return f"{b} B"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ranks", default="2,4")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--max-mib", type=int, default=256)
    p.add_argument("--quick", action="store_true",
                   help="4 KiB, 64 KiB, 1 MiB, 16 MiB; 3 repeats")
    a = p.parse_args()
    top = (16 << 20) if a.quick else a.max_mib << 20
    sizes, s = [], 4096
    while s <= top:
        sizes.append(s)
        s *= 16 if a.quick else 4
    repeats = 3 if a.quick else a.repeats
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    bw = copy_bandwidth()
    print(f"float32 sum; median of {repeats} samples ({max(2, repeats // 2)} above 4 MiB); "
          f"copy bandwidth (1 thread, 64 MiB): {bw:.2f} GB/s; {os.cpu_count()} cores")
    ctx = mp.get_context("spawn")
    for world in (int(r) for r in a.ranks.split(",")):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        queue = ctx.SimpleQueue()
        mp.spawn(worker, args=(world, port, sizes, repeats, queue), nprocs=world)
        rows = queue.get()
        print(f"\n{world} ranks")
        print(f"{'collective':24} {'size':>9} {'neuron us':>10} {'gloo us':>10} {'ratio':>6} "
              f"{'neuron busbw':>12} {'gloo busbw':>10} {'neuron/copy':>11}")
        for name, b, tn, tc, f in rows:
            nb, gb = b * f / tn / 1e9, b * f / tc / 1e9
            print(f"{name:24} {human(b):>9} {tn * 1e6:>10.1f} {tc * 1e6:>10.1f} {tc / tn:>6.2f} "
                  f"{nb:>9.2f} GB/s {gb:>5.2f} GB/s {nb / bw:>11.2f}")


if __name__ == "__main__":
    main()
