"""Collectives of the `neuron` c10d backend next to gloo on CPU tensors.

For all_reduce, all_gather_into_tensor and reduce_scatter_tensor (float32,
sum) at message sizes from 4 KiB up, with --ranks processes (mp.spawn) in
one "cpu:gloo,neuron:neuron" process group: the median time over --repeats
calls (after a warm-up; a barrier before each timed call, the neuron
results synchronised) on neuron tensors and on CPU tensors (gloo), the ratio
gloo_time / neuron_time (> 1: neuron is faster) and each backend's bus
bandwidth (NCCL-tests convention: all_reduce moves 2(n-1)/n of the message
per rank, all_gather / reduce_scatter (n-1)/n).  Prints a table from rank 0;
asserts nothing.

Usage: python bench/comm.py [--ranks 2] [--repeats 10] [--max-mib 64] [--quick]
"""
import argparse
import os
import socket
import statistics
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def timed(fn, device, repeats):
    fn()
    samples = []
    for _ in range(repeats):
        dist.barrier(device_ids=None)
        start = time.perf_counter()
        fn()
        if device.type != "cpu":
            torch.accelerator.synchronize(device)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def worker(rank, world, port, sizes, repeats):
    dist.init_process_group("cpu:gloo,neuron:neuron", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=world)
    rows = []
    for nbytes in sizes:
        n = max(world, nbytes // 4) // world * world
        for name, factor in (("all_reduce", 2 * (world - 1) / world),
                             ("all_gather_into_tensor", (world - 1) / world),
                             ("reduce_scatter_tensor", (world - 1) / world)):
            times = {}
            for dev in ("neuron", "cpu"):
                device = torch.device(dev)
                if name == "all_reduce":
                    x = torch.ones(n, device=device)
                    fn = lambda x=x: dist.all_reduce(x)
                elif name == "all_gather_into_tensor":
                    x = torch.ones(n // world, device=device)
                    out = torch.empty(n, device=device)
                    fn = lambda x=x, out=out: dist.all_gather_into_tensor(out, x)
                else:
                    x = torch.ones(n, device=device)
                    out = torch.empty(n // world, device=device)
                    fn = lambda x=x, out=out: dist.reduce_scatter_tensor(out, x)
                times[dev] = timed(fn, device, repeats)
            rows.append((name, n * 4, times["neuron"], times["cpu"], factor))
    if rank == 0:
        print(f"{'collective':24} {'bytes':>10} {'neuron us':>10} {'gloo us':>10} "
              f"{'ratio':>6} {'neuron GB/s':>11} {'gloo GB/s':>9}")
        for name, b, tn, tc, f in rows:
            print(f"{name:24} {b:>10} {tn * 1e6:>10.1f} {tc * 1e6:>10.1f} {tc / tn:>6.2f} "
                  f"{b * f / tn / 1e9:>11.2f} {b * f / tc / 1e9:>9.2f}")
    dist.destroy_process_group()


def main():
    import warnings

    warnings.filterwarnings("ignore")
    p = argparse.ArgumentParser()
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--max-mib", type=int, default=64)
    p.add_argument("--quick", action="store_true")
    a = p.parse_args()
    top = 4 << 20 if a.quick else a.max_mib << 20
    sizes, s = [], 4096
    while s <= top:
        sizes.append(s)
        s *= 8 if a.quick else 4
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    print(f"{a.ranks} ranks, float32 sum, median of {3 if a.quick else a.repeats}")
    mp.spawn(worker, args=(a.ranks, port, sizes, 3 if a.quick else a.repeats), nprocs=a.ranks)


if __name__ == "__main__":
    main()
