"""Timing shared by the benches: median wall time of fn on a device, the
device synchronised before each timer stops.

Each measurement starts on a quiet machine.  torch's CPU ops run on
libgomp's OpenMP team, whose threads spin after a parallel region before
they sleep; a neuron measurement started right after a CPU one shared both
cores with them and read up to 2x slow (a 256^3 product: 210 us against
110 us after a 1 ms pause).  How long they spin depends on the machine: on
a Zen 3 VM (2 cores) the threads other than the caller's ran ~10 ms of CPU
after one 512^3 product (their /proc schedstat: 9.3 ms within a 10 ms
sleep, 10.0 within 50 ms), and a 512^3 neuron product within 5 ms of it
ran at half speed.  Our pool's helpers spin too (30 us).  So
median_seconds first sleeps SETTLE_S, past that spin and the same for both
sides, and the other side's threads are asleep before the warm-up call.

The machine can be noisy (a shared VM: the same convolution read 1.9 ms
and 1.06 ms minutes apart), so a comparison never times one side and then
the other: paired_medians interleaves the sides in rounds, each side's
samples spread over the whole measurement, and both see the same noise."""
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
    ext = "".join(f"+{e}" for e in torch_neuronx._C._kernel_extensions())
    return (f"# {model}; {torch.get_num_threads()} threads; torch CPU kernels "
            f"{torch.backends.cpu.get_cpu_capability()}; neuron kernels {torch_neuronx.kernel_isa()}{ext}")


def sync(device):
    """Waits for the device's work.  A device without an index is the
    current one, and the no-argument call waits for it: with the argument,
    torch.accelerator.synchronize first resolves the device in Python
    (torch/accelerator/_utils.py: current_accelerator() and a type check),
    1.2 us of upstream code per call on a 2-core Zen 3 (2.1 against 0.9 us)
    that a 64^3 product's sample (10 us) would count as the device's."""
    if device.type == "cpu":
        return
    if device.index is None:
        torch.accelerator.synchronize()
    else:
        torch.accelerator.synchronize(device)


SETTLE_S = 0.025


def median_seconds(fn, device, repeats, budget=None):
    """Median of `repeats` timed calls (fewer, but at least 3, once they
    have taken `budget` seconds)."""
    time.sleep(SETTLE_S)
    fn()  # warm up
    sync(device)
    samples = []
    for _ in range(repeats):
        if budget is not None and len(samples) >= 3 and sum(samples) > budget:
            break
        start = time.perf_counter()
        fn()
        sync(device)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


ROUNDS = 3
# A side's turn lasts at least this long (more samples of a short call):
# three samples of a 0.3 ms call read anywhere from 0.2 to 0.7 ms here.
TURN_S = 0.02
MAX_TURN_SAMPLES = 200


def paired_medians(sides, repeats, rounds=ROUNDS, budget=None):
    """Median seconds of each side, the sides interleaved: `rounds` rounds,
    in each every side settles (SETTLE_S), runs one warm-up call and then
    its share of the `repeats` timed calls (at least one), continued up to
    TURN_S of samples for a short call.  A side is (fn, device) or (fn,
    device, enter), enter() called before the side's turn (a mode switch).
    With `budget`, rounds stop once every side has 3 samples and the
    samples took `budget` seconds in all."""
    per_round = max(1, -(-repeats // rounds))
    samples = [[] for _ in sides]
    for _ in range(rounds):
        for side, got in zip(sides, samples):
            fn, device = side[0], side[1]
            if len(side) > 2:
                side[2]()
            time.sleep(SETTLE_S)
            fn()
            sync(device)
            taken, turn = 0, 0.0
            while taken < per_round or (turn < TURN_S and taken < MAX_TURN_SAMPLES):
                start = time.perf_counter()
                fn()
                sync(device)
                got.append(time.perf_counter() - start)
                turn += got[-1]
                taken += 1
        if (budget is not None and min(len(s) for s in samples) >= 3
                and sum(map(sum, samples)) > budget):
            break
    return [statistics.median(s) for s in samples]
