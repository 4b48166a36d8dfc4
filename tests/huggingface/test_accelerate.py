"""Hugging Face `accelerate` on neuron, with no device code anywhere.

accelerate picks neuron by itself because torch_neuronx is installed
(`is_neuron_available`, `PartialState.default_device`, `_prepare_backend`);
its state is a process-wide singleton, so every scenario runs in a fresh
interpreter, and the reference is PyTorch's CPU backend (an
`Accelerator(cpu=True)` run of the same script, or plain CPU tensors).

- the state: neuron is detected after a bare `import torch`, the device is
  neuron, `set_seed` seeds the neuron generators, the collectives' single
  process paths, `clear_device_cache` (torch.neuron.empty_cache);
- `prepare` + a custom loop (accelerate_train.py): float32 per-step losses
  equal the CPU's within 1e-4 relative (no dropout: a device's generator is
  not the CPU's); `mixed_precision="bf16"` autocasts on neuron;
- `save_state`/`load_state` with dropout on: a resumed run repeats the
  uninterrupted run's losses, through accelerate's `torch_neuron_manual_seed`
  entry, and would not without it;
- a 2-process `accelerate launch --multi_gpu` run: backend "neuron",
  MULTI_NEURON, DDP, `_neuron_gather_object` / `_neuron_broadcast_object_list`,
  `synchronize_rng_states(["neuron"])`; its losses equal one process on the
  same global batch.
"""
import json
import os
import socket
import subprocess
import sys

import pytest
import torch

from conftest import DEFAULT_DEVICE_COUNT, check_python

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "accelerate_train.py")
STEPS = 5
SAVE_AT, RESUME_STEPS = 3, 6


def _env():
    env = dict(os.environ)
    env.pop("TORCH_DEVICE_BACKEND_AUTOLOAD", None)  # autoload is what engages accelerate
    for name in ("LOCAL_RANK", "RANK", "WORLD_SIZE", "ACCELERATE_USE_CPU",
                 "ACCELERATE_MIXED_PRECISION"):
        env.pop(name, None)
    return env


def _start(*flags, launcher=None):
    cmd = [*(launcher or [sys.executable]), SCRIPT, *flags]
    return subprocess.Popen(cmd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def _result(proc, timeout=240):
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"timed out\n--- stdout\n{out}\n--- stderr\n{err[-6000:]}")
    assert proc.returncode == 0, f"--- stdout\n{out}\n--- stderr\n{err[-6000:]}"
    lines = [line for line in out.splitlines() if line.startswith("{")]
    assert lines, out
    return json.loads(lines[-1])


def _assert_losses_close(actual, expected, rel, steps=STEPS):
    assert len(actual) == len(expected) == steps, (actual, expected)
    for step, (a, e) in enumerate(zip(actual, expected), 1):
        assert abs(a - e) <= rel * abs(e), f"step {step}: {a} vs {e}\n{actual}\n{expected}"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The independent single-process runs, started together (2 cores)."""
    ckpt = tmp_path_factory.mktemp("accelerate_state") / "step3"
    procs = {
        "cpu": _start("--steps", str(STEPS), "--cpu"),
        "neuron": _start("--steps", str(STEPS)),
        "bf16": _start("--steps", str(STEPS), "--mixed-precision", "bf16"),
        "save": _start("--steps", str(RESUME_STEPS), "--dropout", "0.2",
                       "--save-at", str(SAVE_AT), "--save-dir", str(ckpt)),
    }
    results = {name: _result(proc) for name, proc in procs.items()}
    results["checkpoint"] = ckpt
    return results


def test_state_picks_neuron_and_single_process_ops():
    out = check_python("""
        import sys
        import torch

        # a bare `import torch` loaded torch_neuronx (autoload): accelerate sees neuron
        assert "torch_neuronx" in sys.modules
        from accelerate import Accelerator, PartialState
        from accelerate.utils import (DistributedType, broadcast_object_list, gather_object,
                                      is_neuron_available, set_seed)
        from accelerate.utils.memory import clear_device_cache
        assert is_neuron_available() and is_neuron_available(check_device=True)

        accelerator = Accelerator()
        dev = accelerator.device
        # accelerate's default device has no index (as torch.device("cuda") on cuda);
        # tensors put there land on the current device, neuron:0
        assert dev.type == "neuron", dev
        assert PartialState().device == dev, (PartialState().device, dev)
        assert accelerator.distributed_type == DistributedType.NO
        assert accelerator.state.backend is None and accelerator.num_processes == 1
        assert torch.empty(1, device=dev).device == torch.device("neuron", 0)

        # set_seed -> torch.neuron.manual_seed_all: every neuron generator
        set_seed(1234)
        assert [g.initial_seed() for g in torch.neuron.default_generators] == \\
            [1234] * torch.neuron.device_count()
        a = torch.randn(64, device=dev)
        set_seed(1234)
        b = torch.randn(64, device=dev)
        set_seed(4321)
        c = torch.randn(64, device=dev)
        assert a.device.type == "neuron" and torch.equal(a.cpu(), b.cpu())
        assert not torch.equal(a.cpu(), c.cpu())

        # the collectives in one process, on neuron tensors, against the CPU
        cpu = torch.arange(12, dtype=torch.float32).reshape(3, 4)
        t = cpu.to(dev)
        for name, got in [("gather", accelerator.gather(t)),
                          ("gather_for_metrics", accelerator.gather_for_metrics(t)),
                          ("reduce sum", accelerator.reduce(t, "sum")),
                          ("reduce mean", accelerator.reduce(t, "mean")),
                          ("pad_across_processes", accelerator.pad_across_processes(t, dim=1))]:
            assert got.device.type == "neuron", (name, got.device)
            torch.testing.assert_close(got.cpu(), cpu, msg=name)
        nested = accelerator.gather({"x": t, "y": [t[0], t.long()]})
        torch.testing.assert_close(nested["y"][1].cpu(), cpu.long())
        assert nested["x"].device.type == "neuron"
        assert gather_object([{"rank": 0}, "two"]) == [{"rank": 0}, "two"]
        assert broadcast_object_list([1, "b"]) == [1, "b"]

        # gather_for_metrics over a prepared loader: every row once, on neuron
        from torch.utils.data import DataLoader
        loader = accelerator.prepare(DataLoader(torch.arange(10.0)[:, None], batch_size=4))
        seen = [accelerator.gather_for_metrics(batch) for batch in loader]
        assert all(s.device.type == "neuron" for s in seen)
        torch.testing.assert_close(torch.cat(seen).cpu(), torch.arange(10.0)[:, None])

        # memory.py: clear_device_cache -> torch.neuron.empty_cache
        x = torch.empty(64 << 20, dtype=torch.uint8, device=dev)
        del x
        before = torch.neuron.memory_reserved()
        clear_device_cache(garbage_collection=True)
        assert torch.neuron.memory_reserved() < before - (32 << 20), \\
            (before, torch.neuron.memory_reserved())
        print("OK")
    """, env={"TORCH_DEVICE_BACKEND_AUTOLOAD": None, "LOCAL_RANK": None})
    assert out.strip().endswith("OK"), out


def test_launcher_and_config_default_count_neuron_devices(tmp_path):
    # what `accelerate config default`, `accelerate env` and a bare
    # `accelerate launch script.py` do with neuron (commands/config/default.py,
    # commands/env.py, commands/launch.py), without starting any worker
    out = check_python(f"""
        import contextlib, io
        import torch
        from accelerate.commands.config.config_args import load_config_from_file
        from accelerate.commands.config.default import write_basic_config
        from accelerate.commands.env import env_command, env_command_parser
        from accelerate.commands.launch import _validate_launch_command, launch_command_parser

        n = torch.neuron.device_count()
        assert n == {DEFAULT_DEVICE_COUNT}, n
        path = {str(tmp_path / "default_config.yaml")!r}
        write_basic_config(mixed_precision="bf16", save_location=path)
        config = load_config_from_file(path)
        assert str(config.distributed_type) == "DistributedType.MULTI_NEURON", config
        assert config.num_processes == n and not config.use_cpu, config

        args, _, _ = _validate_launch_command(launch_command_parser().parse_args(["train.py"]))
        assert args.num_processes == n and args.multi_gpu, (args.num_processes, args.multi_gpu)
        args, _, _ = _validate_launch_command(
            launch_command_parser().parse_args(["--config_file", path, "train.py"]))
        assert args.num_processes == n and args.multi_gpu and args.mixed_precision == "bf16"

        text = io.StringIO()
        with contextlib.redirect_stdout(text):
            env_command(env_command_parser().parse_args([]))
        assert "PyTorch accelerator: NEURON" in text.getvalue(), text.getvalue()
        assert "NEURON type: " + torch.neuron.get_device_name() in text.getvalue()
        print("OK")
    """, env={"TORCH_DEVICE_BACKEND_AUTOLOAD": None, "HF_HOME": str(tmp_path / "hf")})
    assert out.strip().endswith("OK"), out


def test_prepare_trains_on_neuron_like_cpu(runs):
    cpu, neuron = runs["cpu"], runs["neuron"]
    assert cpu["device"] == "cpu" and cpu["param_device"] == "cpu"
    assert neuron["device"] == "neuron"
    assert neuron["distributed_type"] == "DistributedType.NO"
    assert neuron["param_device"] == "neuron:0" and neuron["batch_device"] == "neuron:0"
    assert neuron["batch_rows"] == 8 and neuron["global_rows"] == cpu["global_rows"]
    assert neuron["matmul_dtype"] == "torch.float32"
    _assert_losses_close(neuron["losses"], cpu["losses"], rel=1e-4)
    assert neuron["losses"][-1] < neuron["losses"][0], neuron["losses"]


def test_bf16_autocasts_on_neuron(runs):
    bf16 = runs["bf16"]
    assert bf16["device"] == "neuron" and bf16["param_device"] == "neuron:0"
    # the forward ran under torch.autocast("neuron", bfloat16); parameters stay float32
    assert bf16["matmul_dtype"] == "torch.bfloat16"
    assert bf16["param_dtype"] == "torch.float32"
    losses = bf16["losses"]
    assert all(x == x and abs(x) < 1e3 for x in losses), losses
    assert losses[-1] < losses[0], losses
    _assert_losses_close(losses, runs["neuron"]["losses"], rel=5e-2)


def test_save_state_holds_the_neuron_generators(runs):
    states = torch.load(runs["checkpoint"] / "random_states_0.pkl", weights_only=False)
    assert "torch_neuron_manual_seed" in states, sorted(states)
    saved = states["torch_neuron_manual_seed"]
    assert isinstance(saved, list) and len(saved) == DEFAULT_DEVICE_COUNT
    assert all(isinstance(s, torch.Tensor) and s.dtype == torch.uint8 for s in saved)
    # the generators' states when save_state ran (dropout had advanced neuron:0's)
    assert [s.tolist() for s in saved] == runs["save"]["neuron_rng_at_save"]
    assert saved[0].tolist() != saved[1].tolist()


def test_load_state_resumes_with_the_same_losses(runs):
    whole = runs["save"]
    assert len(whole["losses"]) == RESUME_STEPS
    resumed = _result(_start("--steps", str(RESUME_STEPS), "--dropout", "0.2",
                             "--load", str(runs["checkpoint"]), "--start", str(SAVE_AT)))
    assert resumed["device"] == "neuron" and resumed["param_device"] == "neuron:0"
    assert resumed["neuron_rng_after_load"] == whole["neuron_rng_at_save"]
    # same kernels, same data, same generator states: the same bits
    assert resumed["losses"] == whole["losses"][SAVE_AT:], (resumed["losses"], whole["losses"])
    # the test has power: with everything restored but the neuron generators
    # (a checkpoint without torch_neuron_manual_seed), dropout draws other masks
    other = resumed["losses_neuron_rng_not_restored"]
    assert len(other) == RESUME_STEPS - SAVE_AT
    assert other != whole["losses"][SAVE_AT:], other


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_launch_two_processes_ddp_matches_one(runs):
    launcher = [sys.executable, "-m", "accelerate.commands.launch", "--num_processes", "2",
                "--multi_gpu", "--main_process_port", str(_free_port()), "--num_machines", "1",
                "--mixed_precision", "no", "--dynamo_backend", "no"]
    run = _result(_start("--steps", str(STEPS), launcher=launcher))
    assert run["world"] == 2
    assert run["distributed_type"] == "DistributedType.MULTI_NEURON"
    assert run["backend"] == "neuron" and run["dist_backend"] == "neuron"
    assert run["model_class"] == "DistributedDataParallel"
    # each worker is its own process with its own (virtual) devices; the
    # runtime starts a launched worker on neuron:LOCAL_RANK, and accelerate
    # places it on torch.neuron.current_device() and gives DDP
    # device_ids=[local rank]: the two agree
    ranks = run["ranks"]
    assert [r["rank"] for r in ranks] == [0, 1]
    assert len({r["pid"] for r in ranks}) == 2
    for r in ranks:
        index = r["rank"] % DEFAULT_DEVICE_COUNT
        assert r["device"] == f"neuron:{index}" and r["current_device"] == index, ranks
        assert r["param_device"] == r["device"], ranks
    # _neuron_gather_object: rank 1's object (over 1 MiB pickled) came whole
    assert run["gather_object_pad_lengths"] == [0, 3 << 19]
    # reduce over the neuron backend
    assert run["reduce_sum"] == 3.0 and run["reduce_mean"] == 1.5
    # synchronize_rng_states(["neuron"]): rank 0's generator on both ranks
    draws = run["synced_draws"]
    assert len(draws) == 2 and draws[0] == draws[1], draws
    # split_batches: each rank got half of the global batch, together all of it
    one = runs["neuron"]
    assert run["batch_rows"] == 4 and run["global_rows"] == one["global_rows"]
    # DDP averages the two ranks' gradients: the same update as one process on
    # the whole batch, up to the order of float32 sums
    _assert_losses_close(run["losses"], one["losses"], rel=1e-4)
