"""Timing shared by the benches: median wall time of fn on a device, the
device synchronised before each timer stops."""
import statistics
import time

import torch


def sync(device):
    if device.type != "cpu":
        torch.accelerator.synchronize(device)


def median_seconds(fn, device, repeats):
    fn()  # warm up
    sync(device)
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync(device)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)
