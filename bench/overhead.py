"""Host-side overhead of the neuron device on tiny tensors, next to the CPU.

What it measures (medians over --repeats runs, 8 float32 elements):
  a + b        per-op time of a loop of --iters adds, synchronising once at
               the end: the throughput of the asynchronous queue.
  issue only   host time to issue the same loop without any synchronisation
               (the part Python waits for), and
  sync each    per-op time when every op is followed by a synchronisation
               (the full round trip through a stream's worker).
  empty(8)     allocation latency from the caching allocator.

Prints a table; asserts nothing.  Usage: python bench/overhead.py
"""
import argparse
import statistics
import time

import torch
from timing import machine  # noqa: E402


def sync(device):
    if device.type != "cpu":
        torch.accelerator.synchronize(device)


def per_op_us(fn, iters, repeats):
    """Median over repeats of (seconds for iters calls of fn) / iters, in us."""
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(iters)
        samples.append((time.perf_counter() - start) / iters * 1e6)
    return statistics.median(samples)


def measurements(device, iters, repeats):
    a = torch.ones(8, device=device)
    b = torch.ones(8, device=device)

    def add_loop(n):
        for _ in range(n):
            a + b
        sync(device)

    def issue_only(n):
        for _ in range(n):
            a + b

    def sync_each(n):
        for _ in range(n):
            a + b
            sync(device)

    def alloc_loop(n):
        for _ in range(n):
            torch.empty(8, device=device)

    for warm_up in (add_loop, alloc_loop):
        warm_up(100)
    sync(device)
    results = {}
    for name, fn, n in (("a + b (queue throughput)", add_loop, iters),
                        ("a + b issue only, no sync", issue_only, iters),
                        ("a + b with sync after each", sync_each, iters // 10),
                        ("torch.empty(8)", alloc_loop, iters)):
        results[name] = per_op_us(fn, n, repeats)
        sync(device)  # drain whatever issue_only left queued before timing the next
    return results


def main():
    print(machine(), flush=True)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="neuron")
    parser.add_argument("--iters", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    device = torch.device(args.device)
    if device.type != "cpu" and device.index is None:
        device = torch.device(device.type, torch.accelerator.current_device_index())

    dev = measurements(device, args.iters, args.repeats)
    cpu = measurements(torch.device("cpu"), args.iters, args.repeats)
    width = max(map(len, dev))
    print(f"per-op host latency, 8 float32 elements, {args.iters} iters, "
          f"median of {args.repeats}")
    print(f"{'':{width}}  {device.type + ' us':>10}  {'cpu us':>10}  {'ratio':>7}")
    for name in dev:
        print(f"{name:{width}}  {dev[name]:10.2f}  {cpu[name]:10.2f}  "
              f"{dev[name] / cpu[name]:7.1f}x")
    async_gain = dev["a + b with sync after each"] / dev["a + b (queue throughput)"]
    print(f"\nasync effect on {device}: an op followed by a sync costs "
          f"{async_gain:.1f}x an op left in the queue; issuing alone takes "
          f"{dev['a + b issue only, no sync']:.2f} us/op")


if __name__ == "__main__":
    main()
