"""Train a small ResNet on synthetic images.

Basic residual blocks (conv3x3 - BatchNorm - ReLU, a 1x1 projection where
the shape changes; build_model(act="silu") swaps ReLU for SiLU, which the
tests use: ReLU's kink turns rounding differences into discrete gradient
changes), global average pooling and a linear classifier, trained
with SGD (momentum 0.9, Nesterov, weight decay) and a cosine learning-rate
schedule on 10 classes of synthetic 3x16x16 images: each class is a smooth
random pattern, each image that pattern under noise.  The data comes from a
DataLoader with pinned memory and non-blocking copies, as on cuda.

Only the device string differs from a cuda script (`--device neuron|cpu`).
The model and the data are made on the CPU from `--seed`, so every device
starts from the same weights and sees the same batches.

    python examples/train_cnn.py --device neuron --steps 100
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from common import AMP_DTYPES, run_main


ACTIVATIONS = {"relu": F.relu, "silu": F.silu, "gelu": F.gelu}


class BasicBlock(nn.Module):
    def __init__(self, c_in, c_out, stride=1, act="relu"):
        super().__init__()
        self.act = ACTIVATIONS[act]
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.shortcut = nn.Sequential()
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out))

    def forward(self, x):
        out = self.act(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.act(out + self.shortcut(x))


class ResNet(nn.Module):
    def __init__(self, num_classes=10, widths=(16, 32), blocks_per_stage=1, act="relu"):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, widths[0], 3, 1, 1, bias=False),
                                  nn.BatchNorm2d(widths[0]),
                                  nn.ReLU(inplace=True) if act == "relu" else nn.SiLU() if act == "silu" else nn.GELU())
        layers, c = [], widths[0]
        for i, w in enumerate(widths):
            for j in range(blocks_per_stage):
                layers.append(BasicBlock(c, w, stride=2 if (i > 0 and j == 0) else 1, act=act))
                c = w
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(c, num_classes)

    def forward(self, x):
        x = self.layers(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def build_model(seed=0, **config):
    """The ResNet with its initial weights drawn on the CPU from `seed`."""
    torch.manual_seed(seed)
    return ResNet(**config)


def make_data(seed=0, n=512, num_classes=10, size=16):
    """(images, labels) on the CPU: n float32 images 3 x size x size and
    int64 labels; class k is a smooth random pattern (upsampled 4x4 noise)
    and each image is its class's pattern plus Gaussian noise."""
    g = torch.Generator().manual_seed(seed + 1)
    patterns = F.interpolate(torch.randn(num_classes, 3, 4, 4, generator=g), size=(size, size),
                             mode="bilinear", align_corners=False)
    labels = torch.randint(num_classes, (n,), generator=g)
    images = patterns[labels] + 0.8 * torch.randn(n, 3, size, size, generator=g)
    return images, labels


def make_loader(images, labels, batch_size, seed, device):
    """A shuffling DataLoader (order from a seeded CPU generator), pinned
    for an accelerator as a cuda script pins for cuda."""
    dataset = torch.utils.data.TensorDataset(images, labels)
    return torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=True, drop_last=True,
                                       generator=torch.Generator().manual_seed(seed),
                                       pin_memory=torch.device(device).type != "cpu")


def train(device, steps, seed=0, amp="none", batch_size=32, lr=0.05, model=None, on_step=None,
          **config):
    """Trains for `steps` steps on `device`; returns (losses, model): the
    per-step losses as Python floats and the trained model (losses stay on
    the device until the end; on_step(step, loss_tensor) sees each)."""
    device = torch.device(device)
    images, labels = make_data(seed)
    if model is None:
        model = build_model(seed, **config)
    model = model.to(device)
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, nesterov=True, weight_decay=5e-4)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps)
    amp_dtype = AMP_DTYPES[amp]
    scaler = torch.amp.GradScaler(device.type, enabled=amp_dtype is torch.float16)
    loader = make_loader(images, labels, batch_size, seed, device)
    losses, step = [], 0
    while step < steps:
        for x, y in loader:
            if step == steps:
                break
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
                loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            scheduler.step()
            loss = loss.detach()
            losses.append(loss)
            if on_step is not None:
                on_step(step, loss)
            step += 1
    return [float(l) for l in losses], model


if __name__ == "__main__":
    run_main(__doc__.splitlines()[0], train, 100)
