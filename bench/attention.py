"""scaled_dot_product_attention: neuron's fused kernel next to torch CPU's SDPA.

For each shape (batch, heads, seq, head dim: the training examples' first,
head dim 16 as strided views of one projection, then head dim 64), causal and not, float32
(and bfloat16 with --bf16), the median time over --repeats runs of the
forward and of forward+backward on the CPU (torch's own SDPA: its flash
kernel) and on neuron (synchronised), printed as cpu_time / neuron_time (> 1:
neuron is faster) and as GFLOP/s of each: the forward counts 4*B*H*L*S*D
flops (2 GEMMs; half of it when causal), forward+backward 3.5x that (the
usual flash-attention accounting: the backward's 5 GEMMs).  The threads are
the same for both: torch's intra-op pool and the device's compute pool each
default to the number of cores.  Prints a table; asserts nothing.
Usage: python bench/attention.py [--quick] [--repeats N] [--bf16]
"""
import argparse

import torch
import torch.nn.functional as F
from timing import paired_medians, sync, machine


def make(device, dtype, B, H, S, D, backward, causal):
    g = torch.Generator().manual_seed(0)
    if D < 64:
        # the training examples' layout: q/k/v split from one (B, S, 3C)
        # projection, viewed (B, S, H, D) and transposed (strided views)
        qkv = torch.randn(B, S, 3 * H * D, generator=g).to(dtype).to(device)
        q, k, v = (t.view(B, S, H, D).transpose(1, 2).detach().requires_grad_(backward)
                   for t in qkv.split(H * D, dim=2))
    else:
        q, k, v = (torch.randn(B, H, S, D, generator=g).to(dtype).to(device).requires_grad_(backward)
                   for _ in range(3))
    grad = torch.randn(B, H, S, D, generator=g).to(dtype).to(device)

    def fwd():
        with torch.no_grad():
            F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    def fwd_bwd():
        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        torch.autograd.grad(out, (q, k, v), grad)

    return fwd_bwd if backward else fwd


def main():
    print(machine(), flush=True)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="sequences up to 1024, fewer shapes")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--bf16", action="store_true", help="also bfloat16")
    parser.add_argument("--no-backward", action="store_true")
    args = parser.parse_args()
    cpu, neuron = torch.device("cpu"), torch.device("neuron")
    # (B, H, seq, head dim): examples/train_gpt.py (head dim 16, strided
    # views of one projection) and bench/models.py's GPT-2 first
    models = [(16, 4, 64, 16), (8, 4, 128, 64)]
    if args.quick:
        shapes = models + [(1, 8, 512, 64), (2, 8, 1024, 64)]
    else:
        shapes = models + [(4, 12, 512, 64), (2, 12, 1024, 64), (1, 12, 2048, 64), (1, 8, 4096, 64)]
    dtypes = [torch.float32] + ([torch.bfloat16] if args.bf16 else [])
    passes = [False] + ([] if args.no_backward else [True])
    print(f"{torch.get_num_threads()} threads, median of {args.repeats}")
    print(f"{'dtype':<9} {'B':>2} {'H':>3} {'seq':>5} {'D':>3} {'causal':>6} {'pass':>8} {'cpu ms':>9} {'neuron ms':>10} "
          f"{'speed':>7} {'cpu GF/s':>9} {'neuron GF/s':>12}")
    for dtype in dtypes:
        for B, H, S, D in shapes:
            for causal in (False, True):
                for backward in passes:
                    flops = 4.0 * B * H * S * S * D * (0.5 if causal else 1.0) * (3.5 if backward else 1.0)
                    t_cpu, t_dev = paired_medians(
                        [(make(cpu, dtype, B, H, S, D, backward, causal), cpu),
                         (make(neuron, dtype, B, H, S, D, backward, causal), neuron)], args.repeats)
                    print(f"{str(dtype).replace('torch.', ''):<9} {B:>2} {H:>3} {S:>5} {D:>3} {str(causal):>6} "
                          f"{'fwd+bwd' if backward else 'fwd':>8} {t_cpu * 1e3:>9.2f} {t_dev * 1e3:>10.2f} "
                          f"{t_cpu / t_dev:>6.2f}x {flops / t_cpu / 1e9:>9.1f} {flops / t_dev / 1e9:>12.1f}",
                          flush=True)


if __name__ == "__main__":
    main()
