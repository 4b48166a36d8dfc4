"""Train a small MLP on a synthetic regression task.

y = sin(x @ w) + noise on 16 features; a 16-64-64-1 MLP with GELU, Adam,
mean-squared error, minibatches drawn from a seeded CPU generator.  (This is
the old examples/demo.py, grown minibatches and the shared command line.)

Only the device string differs from a cuda script (`--device neuron|cpu`).
The model and the data are made on the CPU from `--seed`, so every device
starts from the same weights and sees the same batches.

    python examples/train_mlp.py --device neuron --steps 200
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from common import AMP_DTYPES, run_main


def build_model(seed=0, n_in=16, hidden=64):
    """The MLP with its initial weights drawn on the CPU from `seed`."""
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(n_in, hidden), nn.GELU(), nn.Linear(hidden, hidden), nn.GELU(),
                         nn.Linear(hidden, 1))


def make_data(seed=0, n=1024, n_in=16):
    """(x, y) on the CPU: n samples of n_in features, y = sin(x @ w) + noise."""
    g = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(n, n_in, generator=g)
    w = torch.randn(n_in, 1, generator=g) / n_in ** 0.5
    return x, torch.sin(2 * x @ w) + 0.1 * torch.randn(n, 1, generator=g)


def train(device, steps, seed=0, amp="none", batch_size=128, lr=3e-3, model=None, on_step=None,
          **config):
    """Trains for `steps` steps on `device`; returns (losses, model): the
    per-step losses as Python floats and the trained model (losses stay on
    the device until the end; on_step(step, loss_tensor) sees each)."""
    device = torch.device(device)
    x_all, y_all = make_data(seed)
    if model is None:
        model = build_model(seed, **config)
    model = model.to(device)
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    amp_dtype = AMP_DTYPES[amp]
    scaler = torch.amp.GradScaler(device.type, enabled=amp_dtype is torch.float16)
    generator = torch.Generator().manual_seed(seed)
    losses = []
    for step in range(steps):
        ix = torch.randint(len(x_all), (batch_size,), generator=generator)
        x, y = x_all[ix].to(device, non_blocking=True), y_all[ix].to(device, non_blocking=True)
        with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
            loss = F.mse_loss(model(x).float(), y)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        loss = loss.detach()
        losses.append(loss)
        if on_step is not None:
            on_step(step, loss)
    return [float(l) for l in losses], model


if __name__ == "__main__":
    run_main(__doc__.splitlines()[0], train, 200)
