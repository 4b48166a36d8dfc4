"""conv2d on ResNet-50 (and the CNN example's) layer shapes: neuron next to torch CPU, same run.

For each layer, the median time over --repeats runs of the forward pass and
of the backward pass (input and weight gradients: torch.autograd.grad of the
output against both, for a fixed upstream gradient) on the CPU and on neuron
(synchronised), printed as the speed ratio cpu_time / neuron_time (> 1:
neuron is faster) and as GFLOP/s (2 * N * Cout * Cin * kh * kw * Hout * Wout
multiply-adds per pass; backward counts twice that).  float32, or
bfloat16 (--dtype bfloat16: the operands of a bf16-autocast model; the CPU
runs oneDNN's bf16 convolution).  --shapes picks ResNet-50's layers
(resnet50), the CNN example's (cnn: examples/train_cnn.py, batch 32,
16x16), or both.  Threads are the same for both: torch's intra-op pool and
the device's compute pool each default to the number of cores (set
TORCHNEURON_NUM_THREADS=1 and --threads 1 for single-thread ratios).
--clock process times CPU work (time.process_time of the whole process)
instead of wall time: steadier on a shared machine, single-threaded.
Prints a table; asserts nothing.
Usage: python bench/conv.py [--batch 8] [--repeats 5] [--quick] [--dtype bfloat16]
       [--shapes resnet50,cnn] [--threads N] [--clock wall|process]
"""
import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from timing import paired_medians, sync, machine

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

# the CNN example's layers (examples/train_cnn.py: widths 16, 32; 16x16
# images; run with --batch 32, its batch size)
CNN_LAYERS = [
    ("cnn stem 3->16 3x3 @16", 3, 16, 3, 1, 1, 16),
    ("cnn 16->16 3x3 @16", 16, 16, 3, 1, 1, 16),
    ("cnn 16->32 3x3/2 @16", 16, 32, 3, 2, 1, 16),
    ("cnn 32->32 3x3 @8", 32, 32, 3, 1, 1, 8),
    ("cnn proj 16->32 1x1/2 @16", 16, 32, 1, 2, 0, 16),
]


def process_seconds(fn, device, repeats):
    """Median CPU time (every thread of this process) of fn, synchronised."""
    fn()
    sync(device)
    samples = []
    for _ in range(repeats):
        start = time.process_time()
        fn()
        sync(device)
        samples.append(time.process_time() - start)
    return statistics.median(samples)



def make(layer, batch, device, dtype):
    _, cin, cout, k, s, p, size = layer
    g = torch.Generator().manual_seed(0)
    x = torch.randn(batch, cin, size, size, generator=g).to(dtype).to(device).requires_grad_()
    w = (torch.randn(cout, cin, k, k, generator=g) * 0.05).to(dtype).to(device).requires_grad_()
    out = F.conv2d(x, w, stride=s, padding=p)
    gy = torch.randn(out.shape, generator=g).to(dtype).to(device)

    def forward():
        with torch.no_grad():
            F.conv2d(x, w, stride=s, padding=p)

    def backward():
        y = F.conv2d(x, w, stride=s, padding=p)
        torch.autograd.grad(y, (x, w), gy)

    flops = 2 * out.numel() * cin * k * k
    return forward, backward, flops


def main():
    print(machine(), flush=True)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="batch 2, 2 repeats")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--shapes", default="resnet50", help="resnet50, cnn, or both (comma-separated)")
    parser.add_argument("--threads", type=int, default=None, help="torch's intra-op threads")
    parser.add_argument("--clock", default="wall", choices=["wall", "process"])
    args = parser.parse_args()
    if args.quick:
        args.batch, args.repeats = 2, 2
    if args.threads:
        torch.set_num_threads(args.threads)
    dtype = getattr(torch, args.dtype)
    layers = []
    for name in args.shapes.split(","):
        layers += {"resnet50": LAYERS, "cnn": CNN_LAYERS}[name.strip()]
    cpu, neuron = torch.device("cpu"), torch.device("neuron")
    print(f"conv2d {args.dtype}, batch {args.batch}, {torch.get_num_threads()} threads, "
          f"median of {args.repeats} ({args.clock} time); backward = input + weight gradients "
          f"(+ its forward)")
    print(f"{'layer':<26} {'pass':<8} {'cpu ms':>8} {'neuron ms':>10} {'neuron/cpu':>10} "
          f"{'cpu GF/s':>9} {'neuron GF/s':>11}")
    for layer in layers:
        fc, bc, flops = make(layer, args.batch, cpu, dtype)
        fd, bd, _ = make(layer, args.batch, neuron, dtype)
        for name, c, d, fl in (("forward", fc, fd, flops), ("backward", bc, bd, 3 * flops)):
            if args.clock == "wall":
                tc, td = paired_medians([(c, cpu), (d, neuron)], args.repeats)
            else:
                tc, td = process_seconds(c, cpu, args.repeats), process_seconds(d, neuron, args.repeats)
            print(f"{layer[0]:<26} {name:<8} {tc * 1e3:>8.2f} {td * 1e3:>10.2f} {tc / td:>9.2f}x "
                  f"{fl / tc / 1e9:>9.1f} {fl / td / 1e9:>11.1f}", flush=True)


if __name__ == "__main__":
    main()
