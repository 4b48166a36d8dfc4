"""Trains a small MLP whose normalisation is an NKI kernel registered with
nki.op (forward and backward kernels), on neuron, next to the same model with
torch's RMSNorm on the CPU: the two loss curves match.

    python examples/nki/train_rmsnorm.py
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rmsnorm import nki_rmsnorm_backward_kernel, nki_rmsnorm_kernel  # noqa: E402

from torch_neuronx import nki  # noqa: E402


@nki.op("nki_examples::rmsnorm", mutates_args=())
def rmsnorm(x: torch.Tensor, g: torch.Tensor, eps: float) -> torch.Tensor:
    return nki_rmsnorm_kernel(x, g, eps)


@nki.op("nki_examples::rmsnorm_backward", mutates_args=())
def rmsnorm_backward(x: torch.Tensor, g: torch.Tensor, dy: torch.Tensor,
                     eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    return nki_rmsnorm_backward_kernel(x, g, dy.contiguous(), eps)


def _setup(ctx, inputs, output):
    x, g, eps = inputs
    ctx.save_for_backward(x, g)
    ctx.eps = eps


def _backward(ctx, dy):
    x, g = ctx.saved_tensors
    # an op, not a bare kernel call, so that traced backward graphs hold it
    dx, dg = rmsnorm_backward(x, g, dy, ctx.eps)
    return dx, dg, None


rmsnorm.register_autograd(_backward, setup_context=_setup)


class NKIRMSNorm(torch.nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return rmsnorm(x, self.weight, self.eps)


def model(norm):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), norm(64), torch.nn.GELU(),
                               torch.nn.Linear(64, 64), norm(64), torch.nn.GELU(),
                               torch.nn.Linear(64, 1))


def train(net, device, steps=60):
    net = net.to(device)
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(200, 32, generator=g)
    y = (x[:, :4].sum(1, keepdim=True)).tanh()
    x, y = x.to(device), y.to(device)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(net(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def main():
    ours = train(model(NKIRMSNorm), "neuron")
    ref = train(model(lambda d: torch.nn.RMSNorm(d, eps=1e-6)), "cpu")
    for i in range(0, len(ours), 10):
        print(f"step {i:3d}  nki on neuron {ours[i]:.6f}  torch on cpu {ref[i]:.6f}")
    return ours, ref


if __name__ == "__main__":
    main()
