"""Random elementwise programs for adaptive eager's tests.

A program is a list of steps drawn from a seed, interpreted on neuron
twice -- fusion off, then on (or verify) -- from the same inputs; every
tensor alive at the end must match bit for bit.  The steps cover what the
fusion planner must get right: dtypes and promotion with Python scalars,
broadcast / transposed / sliced / offset / expanded (stride 0) views,
in-place ops on inputs and intermediates, ``del`` at random points (free
hints, and the caching allocator handing the block to the next op),
``.item()`` / ``.cpu()`` mid-chain, a second stream with events, and NaN
payloads, signed zeros, infinities and subnormals in the inputs.
"""

from __future__ import annotations

import random

import torch

SHAPE = (48, 400)  # 19200 elements: above the planner's minimum, a few tiles
FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]

UNARY = [
    lambda x: -x,
    torch.abs,
    torch.exp,
    torch.sigmoid,
    torch.tanh,
    torch.relu,
    lambda x: torch.sqrt(torch.abs(x)),
    torch.sin,
    torch.nn.functional.gelu,
    lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
    torch.nn.functional.silu,
    torch.floor,
    lambda x: torch.clamp(x, -0.5, 0.75),
    torch.reciprocal,
    torch.log1p,
]
BINARY = [torch.add, torch.sub, torch.mul, torch.div, torch.maximum, torch.minimum,
          lambda a, b: torch.add(a, b, alpha=0.5), torch.atan2, torch.hypot]
SCALARS = [2.5, -1.0, 0.1, 3, 1e-3, -0.0]
INPLACE = ["add_", "mul_", "sub_", "relu_", "sigmoid_", "clamp_", "div_"]


def special_values(t: torch.Tensor, rng: random.Random) -> torch.Tensor:
    """Sprinkles NaN (a payload too), +-0, +-inf and subnormals."""
    flat = t.view(-1)
    n = flat.numel()
    tiny = torch.finfo(t.dtype).tiny
    for value in (float("nan"), 0.0, -0.0, float("inf"), float("-inf"), tiny / 4, -tiny / 8):
        for _ in range(3):
            flat[rng.randrange(n)] = value
    if t.dtype == torch.float32:  # a NaN with a payload
        flat.view(torch.int32)[rng.randrange(n)] = 0x7FC12345
    return t


def make_input(kind: str, dtype: torch.dtype, gen: torch.Generator, rng: random.Random):
    """A CPU tensor of SHAPE (or broadcastable to it) seen through `kind`."""
    rows, cols = SHAPE
    if kind == "dense":
        t = torch.randn(SHAPE, generator=gen, dtype=torch.float64).to(dtype)
        return special_values(t, rng)
    if kind == "row":  # broadcast along rows
        return torch.randn(cols, generator=gen, dtype=torch.float64).to(dtype)
    if kind == "col":  # broadcast along columns
        return torch.randn(rows, 1, generator=gen, dtype=torch.float64).to(dtype)
    if kind == "transposed":
        return torch.randn(cols, rows, generator=gen, dtype=torch.float64).to(dtype)
    if kind == "sliced":
        return torch.randn(rows + 3, cols + 7, generator=gen, dtype=torch.float64).to(dtype)
    if kind == "offset":
        return torch.randn(rows * cols + 11, generator=gen, dtype=torch.float64).to(dtype)
    if kind == "expanded":
        return torch.randn(1, cols, generator=gen, dtype=torch.float64).to(dtype)
    raise ValueError(kind)


def view_on_device(kind: str, t: torch.Tensor) -> torch.Tensor:
    rows, cols = SHAPE
    if kind == "transposed":
        return t.t()
    if kind == "sliced":
        return t[2:2 + rows, 5:5 + cols]
    if kind == "offset":
        return t[11:].view(SHAPE)
    if kind == "expanded":
        return t.expand(SHAPE)
    return t


def draw(seed: int, n_ops: int | None = None):
    """The inputs (CPU) and the steps of program `seed`."""
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    main_dtype = rng.choice(FLOATS)
    kinds = ["dense", "dense"] + rng.sample(
        ["row", "col", "transposed", "sliced", "offset", "expanded"], 3)
    inputs = []
    for kind in kinds:
        dtype = main_dtype if rng.random() < 0.8 else rng.choice(FLOATS)
        inputs.append((kind, make_input(kind, dtype, gen, rng)))
    steps = []
    n_values = len(inputs)
    for _ in range(n_ops or rng.randint(2, 12)):
        r = rng.random()
        pick = lambda: rng.randrange(n_values)  # noqa: E731
        if r < 0.3:
            steps.append(("unary", rng.randrange(len(UNARY)), pick()))
        elif r < 0.6:
            steps.append(("binary", rng.randrange(len(BINARY)), pick(), pick()))
        elif r < 0.72:
            steps.append(("scalar", rng.randrange(3), pick(), rng.choice(SCALARS)))
        elif r < 0.82:
            steps.append(("inplace", rng.choice(INPLACE), pick(), pick(), rng.choice(SCALARS)))
            continue  # no new value
        elif r < 0.88:
            steps.append(("cast", pick(), rng.choice(FLOATS)))
        elif r < 0.93:
            steps.append(("where", pick(), pick(), pick()))
        elif r < 0.97:
            steps.append(("del", pick()))
            continue
        else:
            steps.append(("sync", pick(), rng.random() < 0.5))
            continue
        n_values += 1
    side_stream = rng.random() < 0.25
    return inputs, steps, side_stream


def run(inputs, steps, side_stream: bool, device: str = "neuron"):
    """Interprets a program on `device`; returns every value alive at the end
    (on the CPU), in order, with None for deleted ones."""
    values = [view_on_device(kind, t.to(device)) for kind, t in inputs]
    torch.neuron._sleep(30_000_000)  # the stream is busy: the program queues up behind it
    main = torch.neuron.current_stream()
    side = torch.neuron.Stream() if side_stream else None
    for i, step in enumerate(steps):
        use_side = side is not None and i % 3 == 1
        if use_side:
            side.wait_stream(main)
            ctx = torch.neuron.stream(side)
        else:
            ctx = torch.neuron.stream(main)
        with ctx:
            apply(step, values)
        if use_side:
            main.wait_stream(side)
            for v in values:
                if v is not None:
                    v.record_stream(main)
    torch.neuron.synchronize()
    return [None if v is None else v.cpu() for v in values]


def live(values, i):
    """values[i], or the last live value before it when it was deleted."""
    for j in range(i, -1, -1):
        if values[j] is not None:
            return values[j]
    return next(v for v in values if v is not None)


def apply(step, values):
    kind = step[0]
    if kind == "unary":
        values.append(UNARY[step[1]](live(values, step[2])))
    elif kind == "binary":
        values.append(BINARY[step[1]](live(values, step[2]), live(values, step[3])))
    elif kind == "scalar":
        x, s = live(values, step[2]), step[3]
        values.append([lambda: x * s, lambda: x + s, lambda: s - x][step[1]]())
    elif kind == "inplace":
        _, name, i, j, s = step
        target = live(values, i)
        if target.stride(0) == 0 or target.stride(-1) == 0:  # no writes through expanded views
            return
        other = live(values, j)
        if name in ("add_", "mul_", "sub_", "div_"):
            if (torch.result_type(target, other) != target.dtype
                    or torch.broadcast_shapes(target.shape, other.shape) != target.shape):
                other = s
            getattr(target, name)(other)
        elif name == "clamp_":
            target.clamp_(-abs(s) - 0.5, abs(s) + 0.5)
        else:
            getattr(target, name)()
    elif kind == "cast":
        values.append(live(values, step[1]).to(step[2]))
    elif kind == "where":
        c, a, b = (live(values, k) for k in step[1:])
        values.append(torch.where(c > 0, a, b))
    elif kind == "del":
        if sum(v is not None for v in values) > 1:
            values[step[1]] = None
    elif kind == "sync":
        v = live(values, step[1])
        if step[2]:
            v.reshape(-1)[0].item()
        else:
            v.cpu()


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    int_type = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
    return torch.equal(a.contiguous().view(int_type), b.contiguous().view(int_type))
