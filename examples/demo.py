"""Train one small MLP on cpu and on neuron from identical weights and data,
and show that the two runs agree.

The training code is what a cuda script would be: only the device string
differs.  `python examples/demo.py` runs both and prints the loss curves side
by side; `--device cpu` or `--device neuron` runs one.
"""
import argparse
import copy
import time

import torch

STEPS = 200
REPORT_EVERY = 20


def make_problem(seed=0):
    """A regression task on synthetic data and a freshly initialised model,
    built on the CPU from a fixed seed so every device starts identically."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(512, 16, generator=g)
    true_w = torch.randn(16, 1, generator=g)
    y = torch.sin(x @ true_w) + 0.1 * torch.randn(512, 1, generator=g)
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.Tanh(), torch.nn.Linear(64, 1))
    return model, x, y


def train(device, model, x, y, steps=STEPS):
    """The whole device-specific part is `device`.  Returns (losses, steps/s)."""
    model = copy.deepcopy(model).to(device)
    x, y = x.to(device), y.to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses = []
    start = time.perf_counter()
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    losses = [l.item() for l in losses]  # one host read at the end: stays async
    return losses, steps / (time.perf_counter() - start)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cpu", "neuron"], default=None,
                        help="run one device (default: both, side by side)")
    parser.add_argument("--steps", type=int, default=STEPS)
    args = parser.parse_args()

    model, x, y = make_problem()
    devices = [args.device] if args.device else ["cpu", "neuron"]
    runs = {d: train(d, model, x, y, args.steps) for d in devices}

    print("step  " + "  ".join(f"{d + ' loss':>14}" for d in devices))
    for step in list(range(0, args.steps, REPORT_EVERY)) + [args.steps - 1]:
        print(f"{step:4d}  " + "  ".join(f"{runs[d][0][step]:14.6f}" for d in devices))
    for d in devices:
        print(f"{d}: {runs[d][1]:.1f} steps/s")
    if len(devices) == 2:
        cpu_losses, dev_losses = runs["cpu"][0], runs["neuron"][0]
        rel = max(abs(a - b) / max(abs(a), 1e-12) for a, b in zip(cpu_losses, dev_losses))
        print(f"max relative difference of the loss curves: {rel:.3e}")


if __name__ == "__main__":
    main()
