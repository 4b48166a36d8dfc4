"""conv2d on ResNet-50 layer shapes: neuron next to torch CPU, same run.

For each layer, the median time over --repeats runs of the forward pass and
of the backward pass (input and weight gradients: torch.autograd.grad of the
output against both, for a fixed upstream gradient) on the CPU and on neuron
(synchronised), printed as the speed ratio cpu_time / neuron_time (> 1:
neuron is faster) and as GFLOP/s (2 * N * Cout * Cin * kh * kw * Hout * Wout
multiply-adds per pass; backward counts twice that).  float32.  Threads are
the same for both: torch's intra-op pool and the device's compute pool each
default to the number of cores.  Prints a table; asserts nothing.
Usage: python bench/conv.py [--batch 8] [--repeats 5] [--quick]
"""
import argparse

import torch
import torch.nn.functional as F

from timing import median_seconds

# name, cin, cout, kernel, stride, padding, input size
LAYERS = [
    ("conv1 3->64 7x7/2 @224", 3, 64, 7, 2, 3, 224),
    ("layer1 64->64 3x3 @56", 64, 64, 3, 1, 1, 56),
    ("layer1 64->256 1x1 @56", 64, 256, 1, 1, 0, 56),
    ("layer2 128->128 3x3 @28", 128, 128, 3, 1, 1, 28),
    ("down 256->512 1x1/2 @56", 256, 512, 1, 2, 0, 56),
    ("layer3 256->256 3x3 @14", 256, 256, 3, 1, 1, 14),
    ("layer4 512->512 3x3 @7", 512, 512, 3, 1, 1, 7),
]



def make(layer, batch, device):
    _, cin, cout, k, s, p, size = layer
    g = torch.Generator().manual_seed(0)
    x = torch.randn(batch, cin, size, size, generator=g).to(device).requires_grad_()
    w = (torch.randn(cout, cin, k, k, generator=g) * 0.05).to(device).requires_grad_()
    out = F.conv2d(x, w, stride=s, padding=p)
    gy = torch.randn(out.shape, generator=g).to(device)

    def forward():
        with torch.no_grad():
            F.conv2d(x, w, stride=s, padding=p)

    def backward():
        y = F.conv2d(x, w, stride=s, padding=p)
        torch.autograd.grad(y, (x, w), gy)

    flops = 2 * out.numel() * cin * k * k
    return forward, backward, flops


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="batch 2, 2 repeats")
    args = parser.parse_args()
    if args.quick:
        args.batch, args.repeats = 2, 2
    cpu, neuron = torch.device("cpu"), torch.device("neuron")
    print(f"conv2d float32, batch {args.batch}, {torch.get_num_threads()} threads, "
          f"median of {args.repeats}; backward = input + weight gradients (+ its forward)")
    print(f"{'layer':<26} {'pass':<8} {'cpu ms':>8} {'neuron ms':>10} {'neuron/cpu':>10} "
          f"{'cpu GF/s':>9} {'neuron GF/s':>11}")
    for layer in LAYERS:
        fc, bc, flops = make(layer, args.batch, cpu)
        fd, bd, _ = make(layer, args.batch, neuron)
        for name, c, d, fl in (("forward", fc, fd, flops), ("backward", bc, bd, 3 * flops)):
            tc = median_seconds(c, cpu, args.repeats)
            td = median_seconds(d, neuron, args.repeats)
            print(f"{layer[0]:<26} {name:<8} {tc * 1e3:>8.2f} {td * 1e3:>10.2f} {tc / td:>9.2f}x "
                  f"{fl / tc / 1e9:>9.1f} {fl / td / 1e9:>11.1f}")


if __name__ == "__main__":
    main()
