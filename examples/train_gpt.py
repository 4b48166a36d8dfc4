"""Train a small GPT (nanoGPT-like) on a character corpus.

Token + position embeddings, pre-norm transformer blocks with causal
`F.scaled_dot_product_attention`, a weight-tied language-model head, AdamW
with a cosine learning-rate schedule after a linear warm-up, gradient
clipping, optional mixed precision (`--amp bf16` autocast, `--amp fp16`
autocast + GradScaler).  The corpus is generated here, deterministically,
from a small grammar (no download).

The script is what a cuda script would be: only the device string differs
(`--device neuron` or `--device cpu`; `--device cuda` would run too).  The
model and the batches are made on the CPU from `--seed`, so every device
starts from the same weights and sees the same batches.

    python examples/train_gpt.py --device neuron --steps 200
"""
import math
import random

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import AMP_DTYPES, run_main


# ---------------------------------------------------------------- corpus

_SUBJECTS = ["the cat", "a dog", "the old man", "my sister", "the neuron", "a small bird",
             "the engineer", "every child", "the king", "a quiet river"]
_VERBS = ["sees", "likes", "follows", "builds", "remembers", "finds", "carries", "watches"]
_OBJECTS = ["the moon", "a red apple", "the long road", "a tensor", "the garden",
            "an open door", "the last train", "a warm fire", "the blue sea"]
_ENDINGS = [".", ".", ".", "!", "?"]
_ADVERBS = ["", "", "slowly ", "often ", "never ", "always "]


def make_corpus(n_chars=20000, seed=0):
    """A deterministic English-like character corpus of n_chars characters:
    sentences from a small grammar, drawn with Python's own seeded RNG (the
    same text on every machine and Python version >= 3.2)."""
    rng = random.Random(seed)
    parts, size = [], 0
    while size < n_chars:
        s = f"{rng.choice(_SUBJECTS)} {rng.choice(_ADVERBS)}{rng.choice(_VERBS)} {rng.choice(_OBJECTS)}"
        s = s[0].upper() + s[1:] + rng.choice(_ENDINGS) + ("\n" if rng.random() < 0.2 else " ")
        parts.append(s)
        size += len(s)
    return "".join(parts)[:n_chars]


def make_data(seed=0, n_chars=20000):
    """(data, vocab): the corpus encoded as an int64 CPU tensor of character
    ids, and the sorted characters it uses."""
    text = make_corpus(n_chars, seed)
    vocab = sorted(set(text))
    index = {c: i for i, c in enumerate(vocab)}
    return torch.tensor([index[c] for c in text], dtype=torch.long), vocab


def get_batch(data, batch_size, block_size, generator):
    """A batch of (input, target) windows at random offsets, drawn on the CPU
    from `generator` so every device sees the same batches."""
    ix = torch.randint(len(data) - block_size - 1, (batch_size,), generator=generator)
    x = torch.stack([data[i:i + block_size] for i in ix.tolist()])
    y = torch.stack([data[i + 1:i + 1 + block_size] for i in ix.tolist()])
    return x, y


# ----------------------------------------------------------------- model

class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.n_head = n_head
        self.qkv = nn.Linear(n_embd, 3 * n_embd)
        self.proj = nn.Linear(n_embd, n_embd)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).contiguous().view(B, T, C))


class Block(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.ln1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head)
        self.ln2 = nn.LayerNorm(n_embd)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab_size, block_size=64, n_layer=2, n_head=4, n_embd=64):
        super().__init__()
        self.block_size = block_size
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.blocks = nn.ModuleList(Block(n_embd, n_head) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight  # weight tying, as GPT-2
        self.apply(self._init_weights)
        for name, p in self.named_parameters():  # GPT-2's scaled residual projections
            if name.endswith("proj.weight") or name.endswith("mlp.2.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * n_layer))

    @staticmethod
    def _init_weights(m):
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets=None):
        T = idx.shape[1]
        pos = torch.arange(T, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        if targets is None:
            return logits
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def build_model(vocab_size, seed=0, **config):
    """The GPT with its initial weights drawn on the CPU from `seed`."""
    torch.manual_seed(seed)
    return GPT(vocab_size, **config)


def configure_optimizer(model, lr, weight_decay=0.1):
    """AdamW, weight decay on matrices only (nanoGPT's split); torch picks its
    default implementation for the device (foreach on an accelerator)."""
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95))


def lr_at(step, max_lr, warmup, total, min_lr_ratio=0.1):
    """Linear warm-up over `warmup` steps, then a cosine decay to
    min_lr_ratio * max_lr at step `total`."""
    if step < warmup:
        return max_lr * (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return max_lr * (min_lr_ratio + (1 - min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))


def train(device, steps, seed=0, amp="none", batch_size=16, block_size=64, n_layer=2,
          n_head=4, n_embd=64, lr=3e-3, warmup=None, grad_clip=1.0, model=None,
          on_step=None):
    """Trains for `steps` steps on `device`; returns (losses, model): the
    per-step training losses as Python floats and the trained model.  The
    losses stay on the device until the end (or until on_step asks for them:
    on_step(step, loss_tensor) is called each step), so the steps run
    asynchronously."""
    device = torch.device(device)
    data, vocab = make_data(seed)
    if model is None:
        model = build_model(len(vocab), seed, block_size=block_size, n_layer=n_layer,
                            n_head=n_head, n_embd=n_embd)
    model = model.to(device)
    model.train()
    optimizer = configure_optimizer(model, lr)
    amp_dtype = AMP_DTYPES[amp]
    scaler = torch.amp.GradScaler(device.type, enabled=amp_dtype is torch.float16)
    generator = torch.Generator().manual_seed(seed)
    warmup = max(1, steps // 10) if warmup is None else warmup
    losses = []
    for step in range(steps):
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step, lr, warmup, steps)
        x, y = get_batch(data, batch_size, block_size, generator)
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
            _, loss = model(x, y)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        if grad_clip:
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        scaler.step(optimizer)
        scaler.update()
        loss = loss.detach()
        losses.append(loss)
        if on_step is not None:
            on_step(step, loss)
    return [float(l) for l in losses], model


if __name__ == "__main__":
    run_main(__doc__.splitlines()[0], train, 200)
