"""Adaptive eager's multi-tensor groups: queued foreach ops (an optimizer's
step) run fused, bit for bit as unfused (runtime/src/fusion_multi.c).

Each test runs the same work with fusion off, on and in verify mode from
the same inputs and compares the bits; the counters show that fusion
happened.  The hazard tests check the results against torch's CPU too.
"""
import os
import random
import sys

import pytest
import torch

import torch_neuronx

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import programs  # noqa: E402
from test_adaptive import FUSES, assert_same, run_modes, stats_of  # noqa: E402

SIZES = [7, 0, 70001, 300, 9000]  # 79308 elements: several blocks, a tail, an empty row


def tensors(dtype, seed, positive=False):
    g = torch.Generator().manual_seed(seed)
    out = []
    for n in SIZES:
        t = torch.randn(n, generator=g, dtype=torch.float64)
        out.append((t.abs() + 0.5 if positive else t).to(dtype).to("neuron"))
    return out


OPTIMIZERS = [
    (torch.optim.SGD, dict(lr=1e-2, momentum=0.9, nesterov=True, weight_decay=5e-4)),
    (torch.optim.Adam, dict(lr=1e-3, amsgrad=True, weight_decay=0.1)),
    (torch.optim.AdamW, dict(lr=1e-3, betas=(0.9, 0.95))),
    (torch.optim.RMSprop, dict(lr=1e-3, momentum=0.5, centered=True)),
    (torch.optim.Adagrad, dict(lr=1e-2)),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("cls,kwargs", OPTIMIZERS, ids=[c.__name__ for c, _ in OPTIMIZERS])
def test_optimizer_steps(cls, kwargs, dtype):
    """Three foreach steps (torch's default on neuron) queued behind a busy
    stream, with the parameters' and state's bits compared."""
    def fn():
        params = [torch.nn.Parameter(t) for t in tensors(dtype, 0)]
        for p, g in zip(params, tensors(dtype, 1)):
            p.grad = g
        opt = cls(params, foreach=True, **kwargs)
        torch.neuron._sleep(20_000_000)
        for _ in range(3):
            opt.step()
        state = [v for p in params for v in opt.state[p].values() if torch.is_tensor(v)]
        return [t.detach().cpu() for t in params + state]
    results, _ = run_modes(fn)
    assert_same(results)
    if FUSES:
        assert stats_of(fn)["groups_multi_tensor"] >= 1


def random_program(seed):
    """A seeded run of foreach ops over three lists (in place and out of
    place, Python, per-tensor and device scalars, dels, a read in the
    middle), returning every list's values."""
    dtype = random.Random(seed).choice(
        [torch.float32, torch.float32, torch.bfloat16, torch.float16, torch.float64])

    def fn():
        rng = random.Random(seed + 1)  # the same program in every mode
        a, b, c = tensors(dtype, seed), tensors(dtype, seed + 1), tensors(dtype, seed + 2, True)
        lists = [a, b, c]
        scale = torch.tensor(0.75, dtype=dtype, device="neuron")
        reads = []
        torch.neuron._sleep(20_000_000)
        for _ in range(rng.randint(2, 12)):
            x, y = rng.sample(range(len(lists)), 2)
            op = rng.randrange(9)
            if op == 0:
                torch._foreach_add_(lists[x], lists[y], alpha=rng.choice([1.0, -0.5]))
            elif op == 1:
                torch._foreach_mul_(lists[x], rng.uniform(-2, 2))
            elif op == 2:
                torch._foreach_addcmul_(lists[x], lists[y], lists[x], value=0.25)
            elif op == 3:
                torch._foreach_lerp_(lists[x], lists[y], 0.3)
            elif op == 4:  # a new list, later dropped
                lists.append(torch._foreach_sqrt(torch._foreach_abs(lists[x])))
            elif op == 5:
                torch._foreach_div_(lists[x], [rng.uniform(0.5, 2) for _ in SIZES])
            elif op == 6:
                torch._foreach_mul_(lists[x], scale)
            elif op == 7:
                torch._foreach_maximum_(lists[x], lists[y])
            elif len(lists) > 3:
                del lists[-1]
            if rng.random() < 0.15:
                reads.append(lists[x][2].cpu())
        return [t.cpu() for lst in lists[:3] for t in lst] + reads
    return fn


@pytest.mark.parametrize("seed", range(12))
def test_random_foreach_programs(seed):
    results, _ = run_modes(random_program(seed))
    assert_same(results)


def test_random_foreach_programs_fuse():
    torch_neuronx.reset_adaptive_eager_stats()
    for seed in range(100, 106):
        random_program(seed)()
    stats = torch_neuronx.adaptive_eager_stats()
    if FUSES:
        assert stats["groups_multi_tensor"] >= 3 and stats["tasks_fused"] >= 10, stats


def test_overlapping_views_across_lists():
    """x and y view one buffer one element apart: each op reads what the
    one before wrote at other places, so none joins the other's group; the
    result is the CPU's."""
    def fn(device):
        base = torch.arange(sum(SIZES) + len(SIZES), dtype=torch.float32).to(device) * 0.25
        xs, ys, at = [], [], 0
        for n in SIZES:
            xs.append(base[at:at + n])
            ys.append(base[at + 1:at + 1 + n])
            at += n + 1
        if device == "neuron":
            torch.neuron._sleep(20_000_000)
        torch._foreach_mul_(xs, 3.0)
        torch._foreach_add_(ys, 0.5)
        torch._foreach_mul_(xs, -2.0)
        return [base.cpu()]
    results, _ = run_modes(lambda: fn("neuron"))
    assert_same(results)
    assert programs.same_bits(results[True][0], fn("cpu")[0])


def test_device_scalar_written_by_an_earlier_op():
    """The scalar a foreach op reads on the device is an element that the op
    before it writes: the later op must read it after that write."""
    def fn(device):
        g = torch.Generator().manual_seed(5)
        a = [torch.randn(n, generator=g).to(device) for n in SIZES]
        b = [torch.randn(n, generator=g).to(device) for n in SIZES]
        if device == "neuron":
            torch.neuron._sleep(20_000_000)
        torch._foreach_mul_(a, 4.0)
        torch._foreach_mul_(b, a[0][3])
        return [t.cpu() for t in b]
    results, _ = run_modes(lambda: fn("neuron"))
    assert_same(results)
    for got, want in zip(results[True], fn("cpu")):
        assert programs.same_bits(got, want)
