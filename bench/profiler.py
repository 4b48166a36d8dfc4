"""Profiling overhead on a training step of a small GPT on neuron.

The model is a self-contained GPT-like decoder (token + position embedding,
pre-LayerNorm blocks of causal self-attention and a GELU MLP, tied-free LM
head; cross-entropy loss, AdamW).  A step is forward, backward, optimizer
step, then torch.neuron.synchronize().

Measured in one run, alternating blocks of --steps steps so that drift hits
every side alike:
  plain     no profiler
  cpu       torch.profiler.profile(activities=[CPU])
  neuron    torch.profiler.profile(activities=[CPU, PrivateUse1]) (the
            device activity on: every task traced and correlated)
The profiler is started before and stopped after the timed steps, so the
figures are the per-step cost while profiling.  Prints the median and the
fastest step of each side and their ratios to plain (overhead = ratio - 1;
on a machine shared with other work the fastest steps are the less noisy
figure), the median CPU time of the process per step (host thread and
device workers together: the work profiling adds, whatever else runs on
the machine), and, separately, the one-off cost of stopping the profiler.
--memory adds profile_memory=True.

--trace PATH additionally profiles a few steps with a schedule
(wait 1, warmup 1, active 2) and record_function ranges, writes the chrome
trace through on_trace_ready, and --report PATH makes the HTML report of it
(torch_neuronx.profiler.report).  Asserts nothing.
Usage: python bench/profiler.py [--quick] [--steps N] [--repeats N]
       [--trace build/profile/trace.json --report build/profile/report.html]
"""
import argparse
import math
import os
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile, record_function, schedule

import torch_neuronx  # noqa: F401  (registers the device)


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.out = nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class TinyGPT(nn.Module):
    def __init__(self, vocab=256, d=128, heads=4, layers=2, seq=64):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(seq, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x))


def make_step(device, batch=8, seq=64, vocab=256):
    torch.manual_seed(0)
    model = TinyGPT(vocab=vocab, seq=seq).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    idx = torch.randint(0, vocab, (batch, seq), device=device)
    target = torch.randint(0, vocab, (batch, seq), device=device)

    def step(annotate=False):
        if annotate:
            with record_function("forward"):
                logits = model(idx)
                loss = F.cross_entropy(logits.view(-1, vocab), target.view(-1))
            with record_function("backward"):
                loss.backward()
            with record_function("optimizer"):
                opt.step()
                opt.zero_grad(set_to_none=True)
        else:
            logits = model(idx)
            loss = F.cross_entropy(logits.view(-1, vocab), target.view(-1))
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        torch.neuron.synchronize()
        return loss

    return step


def time_steps(step, n, cpu_samples=None):
    """Wall time of each of n steps; the process's CPU time (all threads:
    the host thread and the device's workers) of each into cpu_samples."""
    samples = []
    for _ in range(n):
        c = time.process_time()
        t = time.perf_counter()
        step()
        samples.append(time.perf_counter() - t)
        if cpu_samples is not None:
            cpu_samples.append(time.process_time() - c)
    return samples


ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]


def measure(step, steps, repeats, memory):
    """Per-step samples of each side, blocks alternating; the one-off cost of
    stopping the profiler (Kineto's stop and the C++ post-processing)."""
    sides = {"plain": None, "cpu": [ProfilerActivity.CPU], "neuron": ACTIVITIES}
    samples = {k: [] for k in sides}
    cpu = {k: [] for k in sides}
    teardown = []
    for _ in range(repeats):
        for name, acts in sides.items():
            if acts is None:
                samples[name] += time_steps(step, steps, cpu[name])
                continue
            prof = profile(activities=acts, profile_memory=memory)
            prof.start()
            samples[name] += time_steps(step, steps, cpu[name])
            t = time.perf_counter()
            prof.stop()
            if name == "neuron":
                teardown.append(time.perf_counter() - t)
    return samples, cpu, statistics.median(teardown)


def write_trace(step, trace_path, report_path):
    os.makedirs(os.path.dirname(os.path.abspath(trace_path)), exist_ok=True)

    def on_ready(p):
        p.export_chrome_trace(trace_path)

    with profile(activities=ACTIVITIES, profile_memory=True, record_shapes=True,
                 schedule=schedule(wait=1, warmup=1, active=2, repeat=1),
                 on_trace_ready=on_ready) as p:
        for _ in range(4):
            step(annotate=True)
            p.step()
    print(p.key_averages().table(sort_by="device_time_total", row_limit=12))
    print(f"trace: {trace_path}")
    if report_path:
        from torch_neuronx.profiler import report
        out = report(trace_path, report_path, title="TinyGPT training steps on neuron")
        print(f"report: {out['path']} {out['summary']}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer steps and repeats")
    ap.add_argument("--steps", type=int, default=None, help="steps per block")
    ap.add_argument("--repeats", type=int, default=None, help="blocks per side")
    ap.add_argument("--memory", action="store_true", help="profile_memory=True as well")
    ap.add_argument("--trace", default=None, help="write a chrome trace of 2 profiled steps")
    ap.add_argument("--report", default=None, help="and its HTML report")
    args = ap.parse_args()
    steps = args.steps or (5 if args.quick else 10)
    repeats = args.repeats or (3 if args.quick else 6)

    device = torch.device("neuron")
    step = make_step(device)
    for _ in range(3):  # warm up: allocator, lazy init, first-call costs
        step()
    if args.trace:
        write_trace(step, args.trace, args.report)

    samples, cpu, teardown = measure(step, steps, repeats, args.memory)
    med = {k: statistics.median(v) for k, v in samples.items()}
    low = {k: min(v) for k, v in samples.items()}
    cpu = {k: statistics.median(v) for k, v in cpu.items()}
    ratio = med["neuron"] / med["plain"]
    print(f"TinyGPT training step on neuron, {steps} steps x {repeats} blocks per side "
          f"(alternating), {torch.neuron.get_device_properties().multi_processor_count} "
          f"device threads")
    print(f"{'':34s}{'median step':>14s}{'ratio':>8s}{'fastest step':>15s}{'ratio':>8s}"
          f"{'CPU time/step':>16s}{'ratio':>8s}")
    labels = {"plain": "no profiler", "cpu": "profiler CPU only",
              "neuron": "profiler CPU + neuron" + (" + memory" if args.memory else "")}
    for k, label in labels.items():
        print(f"{label:34s}{med[k] * 1e3:11.2f} ms{med[k] / med['plain']:8.3f}"
              f"{low[k] * 1e3:12.2f} ms{low[k] / low['plain']:8.3f}"
              f"{cpu[k] * 1e3:13.2f} ms{cpu[k] / cpu['plain']:8.3f}")
    print(f"overhead with the device activity on: median step {100 * (ratio - 1):+.1f}%, "
          f"fastest step {100 * (low['neuron'] / low['plain'] - 1):+.1f}%, "
          f"CPU time {100 * (cpu['neuron'] / cpu['plain'] - 1):+.1f}%")
    print(f"one-off: stopping the profiler after {steps} steps: {teardown * 1e3:.1f} ms")
    return 0 if math.isfinite(ratio) else 1


if __name__ == "__main__":
    sys.exit(main())
