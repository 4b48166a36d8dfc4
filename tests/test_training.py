"""Training end to end: the examples' learning curves on neuron are the CPU's.

The three examples (examples/train_gpt.py, train_cnn.py, train_mlp.py) are
trained for STEPS steps from the same seed on cpu and on neuron, with small
configurations so the file stays fast:

- float32: every step's loss within 1e-4 relative, and the final parameters
  within PARAM_ATOL + PARAM_RTOL * |cpu| (the losses agree to ~1e-7; the
  parameters of Adam-trained models differ most where a gradient is tiny,
  because Adam divides it by its own square root, see PARAM_* below);
- bfloat16 autocast: every step's loss within 1e-2 relative;
- float16 autocast with torch.amp.GradScaler (GPT and MLP): the same, and
  an inf gradient halves the scale and skips that step, as on the CPU;
- the same seed twice on neuron: bit-identical losses;
- no op falls back to the CPU on any of these runs (fallback_stats() empty).

The CNN of these comparisons uses SiLU instead of ReLU.  With ReLU its
per-step gradients agree to ~1e-6 (the rounding of batch-norm reductions),
but an activation that rounds to either side of ReLU's kink on the two
devices (a few per run, for any two correctly rounded implementations, CPU
with 1 or 2 threads included) changes a gradient discretely, and over 50 SGD
steps the curves part by ~1e-4..1e-3; with a smooth activation they stay
within ~3e-7.  The ReLU CNN is compared over its first 10 steps.

Also: torch.utils.checkpoint (use_reentrant False and True), the
torch.nn.utils.parametrizations (weight_norm, spectral_norm, orthogonal) and
a DataLoader with pin_memory=True / pin_memory_device feeding neuron with
non-blocking copies, each against the CPU.
"""
import contextlib
import copy
import os
import sys

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch_neuronx
from torch_neuronx._fallback import fallback_mode, fallback_stats, reset_fallback_stats

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
import train_cnn  # noqa: E402
import train_gpt  # noqa: E402
import train_mlp  # noqa: E402

STEPS = 50
LOSS_RTOL_FP32 = 1e-4
LOSS_RTOL_BF16 = 1e-2
# Final parameters after 50 float32 steps: |neuron - cpu| <= ATOL + RTOL * |cpu|.
# Adam/AdamW scale an update by 1/sqrt(v): a parameter whose gradient is near
# zero moves by ~lr either way, so 1e-7 differences in such a gradient show
# up as up to ~1e-4 in that parameter (the GPT's rarely seen embedding rows).
PARAM_ATOL = 2e-4
PARAM_RTOL = 1e-3

MODELS = {
    "gpt": (train_gpt, dict(block_size=32, n_layer=2, n_head=2, n_embd=32, batch_size=8)),
    "cnn": (train_cnn, dict(batch_size=16, widths=(8, 16), act="silu")),
    "mlp": (train_mlp, dict()),
}

_runs = {}


@contextlib.contextmanager
def cpu_threads(n):
    """torch's CPU threads set to n inside the block (None: unchanged).  The
    CPU reference runs use one thread: these models are tiny, and on a busy
    2-core machine torch's two spinning OpenMP threads run them 5-10x slower."""
    previous = torch.get_num_threads()
    if n is not None:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def run(name, device, amp="none", again=False):
    """(losses, final parameters on the CPU, fallback stats) of one training
    run, cached per (model, device, amp); again=True trains once more."""
    key = (name, device, amp, again)
    if key not in _runs:
        module, config = MODELS[name]
        previous = torch_neuronx._C.get_fallback_mode()
        torch_neuronx._C.set_fallback_mode("silent")
        torch_neuronx._C.reset_fallback_stats()
        try:
            with cpu_threads(1 if device == "cpu" else None):
                losses, model = module.train(device, STEPS, seed=0, amp=amp, **config)
            stats = dict(torch_neuronx._C.fallback_stats())
        finally:
            torch_neuronx._C.set_fallback_mode(previous)
        params = {n: p.detach().cpu() for n, p in model.named_parameters()}
        _runs[key] = (losses, params, stats)
    return _runs[key]


def assert_losses_close(neuron, cpu, rtol):
    assert len(neuron) == len(cpu) == STEPS
    worst = max(abs(a - b) / abs(b) for a, b in zip(neuron, cpu))
    assert worst <= rtol, (f"loss curves differ by {worst:.3e} relative (> {rtol}):\n"
                           f"neuron {neuron}\ncpu    {cpu}")


@pytest.mark.parametrize("name", sorted(MODELS))
def test_float32_same_learning_curve(name):
    cpu_losses, cpu_params, _ = run(name, "cpu")
    losses, params, stats = run(name, "neuron")
    assert stats == {}, f"{name}: ops fell back to the CPU: {stats}"
    assert_losses_close(losses, cpu_losses, LOSS_RTOL_FP32)
    assert cpu_losses[-1] < cpu_losses[0], "the model did not learn"
    assert params.keys() == cpu_params.keys()
    for n in params:
        torch.testing.assert_close(params[n], cpu_params[n], atol=PARAM_ATOL, rtol=PARAM_RTOL,
                                   msg=lambda m, n=n: f"{name} parameter {n}: {m}")


@pytest.mark.parametrize("name", sorted(MODELS))
def test_bf16_autocast_same_learning_curve(name):
    cpu_losses, _, _ = run(name, "cpu", "bf16")
    losses, _, stats = run(name, "neuron", "bf16")
    assert stats == {}, f"{name} bf16: ops fell back to the CPU: {stats}"
    assert_losses_close(losses, cpu_losses, LOSS_RTOL_BF16)
    # autocast really ran in bfloat16: the curve is not the float32 one
    assert losses != run(name, "neuron")[0]


@pytest.mark.parametrize("name", sorted(MODELS))
def test_same_seed_twice_is_bit_identical(name):
    first = run(name, "neuron")[0]
    second = run(name, "neuron", again=True)[0]
    assert first == second


# float16 autocast + GradScaler: the losses within LOSS_RTOL_FP16 relative
# per step over the 50 steps (measured: gpt 8e-5, mlp 2e-4; float16 keeps 3
# more mantissa bits than bfloat16, hence a bound 5x tighter than bf16's).
LOSS_RTOL_FP16 = 2e-3


@pytest.mark.parametrize("name", ["gpt", "mlp"])
def test_fp16_autocast_with_grad_scaler_matches_cpu(name):
    cpu_losses, _, _ = run(name, "cpu", "fp16")
    losses, _, stats = run(name, "neuron", "fp16")
    assert stats == {}, f"{name} fp16: ops fell back to the CPU: {stats}"
    assert_losses_close(losses, cpu_losses, LOSS_RTOL_FP16)
    assert cpu_losses[-1] < cpu_losses[0], "the model did not learn"
    assert losses != run(name, "neuron")[0]  # autocast really ran in float16


def _fp16_steps_with_an_inf(device, steps=6, bad_step=3):
    """The MLP example's loop (float16 autocast, GradScaler, Adam) with one
    gradient set to inf after the backward of `bad_step`: per step the loss,
    the scale after update(), whether the parameters moved, Adam's step count."""
    model = train_mlp.build_model(0).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    scaler = torch.amp.GradScaler(device, init_scale=2.0 ** 12, growth_interval=100)
    x_all, y_all = train_mlp.make_data(0)
    log = []
    for step in range(steps):
        x, y = x_all[step * 32:(step + 1) * 32].to(device), y_all[step * 32:(step + 1) * 32].to(device)
        with torch.autocast(device, dtype=torch.float16):
            loss = F.mse_loss(model(x).float(), y)
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        if step == bad_step:
            model[2].weight.grad[0, 0] = float("inf")
        before = [p.detach().clone() for p in model.parameters()]
        scaler.step(opt)
        scaler.update()
        moved = any(not torch.equal(b, p.detach()) for b, p in zip(before, model.parameters()))
        adam_steps = int(opt.state[model[0].weight]["step"]) if opt.state[model[0].weight] else 0
        log.append((float(loss.detach()), scaler.get_scale(), moved, adam_steps))
    return log, [p.detach().cpu() for p in model.parameters()]


def test_fp16_grad_scaler_skips_the_inf_step_like_cpu():
    with fallback_mode("error"):
        log, params = _fp16_steps_with_an_inf("neuron")
    with cpu_threads(1):
        cpu_log, cpu_params = _fp16_steps_with_an_inf("cpu")
    scales = [s for _, s, _, _ in log]
    assert scales == [2.0 ** 12] * 3 + [2.0 ** 11] * 3, scales  # halved at the inf step only
    assert [m for _, _, m, _ in log] == [True, True, True, False, True, True]  # that step is skipped
    assert [n for _, _, _, n in log] == [1, 2, 3, 3, 4, 5]
    assert [entry[1:] for entry in log] == [entry[1:] for entry in cpu_log]
    worst = max(abs(a[0] - b[0]) / abs(b[0]) for a, b in zip(log, cpu_log))
    assert worst <= LOSS_RTOL_FP16, (log, cpu_log)
    for p, q in zip(params, cpu_params):
        torch.testing.assert_close(p, q, atol=1e-3, rtol=1e-2)


def test_relu_cnn_first_steps_match_cpu():
    config = dict(MODELS["cnn"][1], act="relu")
    with fallback_mode("error"):
        losses, _ = train_cnn.train("neuron", 10, **config)
    with cpu_threads(1):
        cpu_losses, _ = train_cnn.train("cpu", 10, **config)
    worst = max(abs(a - b) / abs(b) for a, b in zip(losses, cpu_losses))
    assert worst <= LOSS_RTOL_FP32, (losses, cpu_losses)


def test_module_to_keeps_parameter_objects_and_weight_tying():
    model = train_gpt.build_model(10, 0, block_size=8, n_layer=1, n_head=2, n_embd=8)
    params = list(model.parameters())
    assert model.lm_head.weight is model.wte.weight
    model.to("neuron")
    assert model.lm_head.weight is model.wte.weight
    assert all(a is b for a, b in zip(params, model.parameters()))
    assert all(p.device.type == "neuron" for p in model.parameters())
    model.to("cpu")
    assert all(a is b and a.device.type == "cpu" for a, b in zip(params, model.parameters()))
    # a parameter's .data can be swapped between devices, as between cpu and cuda
    p = nn.Parameter(torch.ones(3))
    p.data = torch.zeros(3, device="neuron")
    assert p.device.type == "neuron" and isinstance(p, nn.Parameter)


def _grads(fn, module, x, device):
    module = copy.deepcopy(module).to(device)
    x = x.to(device).detach().requires_grad_()
    fn(module, x).square().sum().backward()
    return [x.grad.cpu()] + [p.grad.cpu() for p in module.parameters()]


@pytest.mark.parametrize("use_reentrant", [False, True])
def test_activation_checkpointing_gradients_match_cpu(use_reentrant):
    from torch.utils.checkpoint import checkpoint, checkpoint_sequential

    torch.manual_seed(0)
    block = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 16))
    x = torch.randn(8, 16)

    def fn(m, inp):
        h = checkpoint(m, inp, use_reentrant=use_reentrant)
        return checkpoint_sequential(m, 2, h, use_reentrant=use_reentrant)

    expected = _grads(fn, block, x, "cpu")
    with fallback_mode("error"):
        got = _grads(fn, block, x, "neuron")
        plain = _grads(lambda m, inp: m(m(inp)), block, x, "neuron")
    for e, g, p in zip(expected, got, plain):
        torch.testing.assert_close(g, e, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(g, p, atol=0, rtol=0)  # recomputation is exact


def test_checkpoint_preserves_neuron_rng_state():
    # dropout inside a checkpointed block: the recomputation must draw the same
    # mask (checkpoint saves/restores torch.neuron's RNG state)
    torch.manual_seed(0)
    block = nn.Sequential(nn.Linear(16, 16), nn.Dropout(0.5), nn.Linear(16, 16)).to("neuron")
    x = torch.randn(8, 16, device="neuron")
    from torch.utils.checkpoint import checkpoint

    for reentrant in (False, True):
        xx = x.clone().requires_grad_()
        torch.neuron.manual_seed(1)
        checkpoint(block, xx, use_reentrant=reentrant).sum().backward()
        g_ckpt = xx.grad.cpu()
        xx = x.clone().requires_grad_()
        torch.neuron.manual_seed(1)
        block(xx).sum().backward()
        torch.testing.assert_close(g_ckpt, xx.grad.cpu(), atol=0, rtol=0)


PARAMETRIZATIONS = {
    "weight_norm": (lambda m: torch.nn.utils.parametrizations.weight_norm(m), set()),
    "spectral_norm": (lambda m: torch.nn.utils.parametrizations.spectral_norm(m), set()),
    # matrix_exp for the square weight, householder for the 4 x 12 one
    # (ops_linalg.cpp; "cayley" is in tests/test_ops_linalg_param.py)
    "orthogonal": (lambda m: torch.nn.utils.parametrizations.orthogonal(m), set()),
}


@pytest.mark.parametrize("kind", sorted(PARAMETRIZATIONS))
def test_parametrization_train_steps_match_cpu(kind):
    wrap, allowed_fallbacks = PARAMETRIZATIONS[kind]
    torch.manual_seed(0)
    base = nn.Sequential(wrap(nn.Linear(12, 12)), nn.Tanh(), wrap(nn.Linear(12, 4)))
    x, y = torch.randn(32, 12), torch.randn(32, 4)
    results = {}
    for device in ("cpu", "neuron"):
        model = copy.deepcopy(base).to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        reset_fallback_stats()
        with fallback_mode("silent"):
            losses = []
            for _ in range(5):
                loss = F.mse_loss(model(x.to(device)), y.to(device))
                opt.zero_grad()
                loss.backward()
                opt.step()
                losses.append(loss.detach())
            losses = [float(v) for v in losses]
        results[device] = (losses, [p.detach().cpu() for p in model.parameters()],
                           set(fallback_stats()))
    assert results["neuron"][2] <= allowed_fallbacks, results["neuron"][2]
    assert_rel = max(abs(a - b) / abs(b) for a, b in zip(results["neuron"][0], results["cpu"][0]))
    assert assert_rel <= 1e-5, (results["neuron"][0], results["cpu"][0])
    for a, b in zip(results["neuron"][1], results["cpu"][1]):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("pin_memory_device", [None, "neuron"])
def test_dataloader_pin_memory_feeds_neuron(pin_memory_device):
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(96, 8, generator=g), torch.randint(3, (96,), generator=g)
    kwargs = {} if pin_memory_device is None else {"pin_memory_device": pin_memory_device}
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=16, shuffle=True,
                                         generator=torch.Generator().manual_seed(1), pin_memory=True,
                                         **kwargs)
    torch.manual_seed(0)
    base = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
    curves = {}
    for device in ("cpu", "neuron"):
        model = copy.deepcopy(base).to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        losses = []
        with fallback_mode("error"):
            for epoch in range(2):
                loader.generator.manual_seed(epoch)
                for xb, yb in loader:
                    assert xb.is_pinned() and yb.is_pinned()
                    xb, yb = xb.to(device, non_blocking=True), yb.to(device, non_blocking=True)
                    loss = F.cross_entropy(model(xb), yb)
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                    losses.append(loss.detach())
        curves[device] = [float(v) for v in losses]
    assert len(curves["cpu"]) == 12
    assert max(abs(a - b) / abs(b) for a, b in zip(curves["neuron"], curves["cpu"])) <= 1e-5



@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("dim", [0, 2])
def test_weight_norm_interface_native(dtype, dim):
    # torch._weight_norm takes the fused _weight_norm_interface (ops_train.cpp)
    # for dim 0 and the last dim; forward and backward against the CPU
    g = torch.Generator().manual_seed(0)
    v = torch.randn(5, 4, 3, generator=g).to(dtype)
    gshape = [1, 1, 1]
    gshape[dim] = v.shape[dim]
    gain = torch.rand(gshape, generator=g).add(0.5).to(dtype)
    grad = torch.randn(5, 4, 3, generator=g).to(dtype)
    out = {}
    for device in ("cpu", "neuron"):
        vv = v.to(device).detach().requires_grad_()
        gg = gain.to(device).detach().requires_grad_()
        with fallback_mode("error" if device == "neuron" else "warn"):
            w = torch._weight_norm(vv, gg, dim)
            w.backward(grad.to(device))
        out[device] = (w.detach().cpu(), vv.grad.cpu(), gg.grad.cpu())
    tol = dict(atol=1e-5, rtol=1e-5) if dtype == torch.float32 else dict(atol=1e-2, rtol=1e-2)
    for a, b in zip(out["neuron"], out["cpu"]):
        assert a.dtype == b.dtype and a.shape == b.shape
        torch.testing.assert_close(a, b, **tol)
