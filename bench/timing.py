"""Timing shared by the benches: median wall time of fn on a device, the
device synchronised before each timer stops."""
import statistics
import time

import torch


def machine():
    """One line for a bench's header: the CPU, the threads, the instruction
    set torch's CPU kernels use and the one the device's kernels use."""
    import platform

    import torch_neuronx
    model = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            model = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return (f"# {model}; {torch.get_num_threads()} threads; torch CPU kernels "
            f"{torch.backends.cpu.get_cpu_capability()}; neuron kernels {torch_neuronx.kernel_isa()}")


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
