"""`transformers.Trainer` on neuron with no device code (trainer_run.py).

The Trainer picks neuron by itself because torch_neuronx is installed
(TrainingArguments._setup_devices -> is_torch_neuron_available); the
reference is the same script with `use_cpu=True`.  Each run is a fresh
interpreter: the Trainer's accelerate state is a process-wide singleton.

- float32 per-step losses equal the CPU's within 1e-4 relative (no dropout:
  a device's generator is not the CPU's, so dropout masks differ);
- bf16=True trains on neuron (finite losses that fall);
- a run resumed from a mid-run checkpoint continues with the uninterrupted
  run's losses, with dropout on, so the neuron generator's state must travel
  in the checkpoint (torch_neuronx/_hf_trainer.py: transformers' Trainer
  does not save it);
- a 2-process `accelerate launch` run (DDP over the `neuron` c10d backend)
  matches one process on the same global batch.
"""
import json
import os
import socket
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "trainer_run.py")
STEPS = 6


def _run(out_dir, *flags, launcher=(), timeout=300):
    env = dict(os.environ)
    env.pop("TORCH_DEVICE_BACKEND_AUTOLOAD", None)  # autoload is what engages Hugging Face
    cmd = [*launcher, SCRIPT] if launcher else [sys.executable, SCRIPT]
    proc = subprocess.run([*cmd, "--out", str(out_dir), "--steps", str(STEPS), *flags],
                          env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr[-6000:]}"
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert lines, proc.stdout
    return json.loads(lines[-1])


def _assert_losses_close(actual, expected, rel):
    assert len(actual) == len(expected) == STEPS, (actual, expected)
    for step, (a, e) in enumerate(zip(actual, expected), 1):
        assert abs(a - e) <= rel * abs(e), f"step {step}: {a} vs {e}\n{actual}\n{expected}"


@pytest.fixture(scope="module")
def cpu_float32(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("cpu"), "--use-cpu")


@pytest.fixture(scope="module")
def neuron_float32(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("neuron"))


def test_trainer_picks_neuron_and_matches_cpu(cpu_float32, neuron_float32):
    assert cpu_float32["device"] == "cpu"
    assert neuron_float32["args_device"] == "neuron:0"
    assert neuron_float32["device"] == "neuron:0"
    _assert_losses_close(neuron_float32["losses"], cpu_float32["losses"], rel=1e-4)
    assert neuron_float32["losses"][-1] < neuron_float32["losses"][0]


def test_trainer_bf16_trains(tmp_path, neuron_float32):
    run = _run(tmp_path, "--bf16")
    assert run["device"] == "neuron:0"
    losses = run["losses"]
    assert len(losses) == STEPS and all(x == x and abs(x) < 1e3 for x in losses), losses
    assert losses[-1] < losses[0], losses
    # autocast to bfloat16 (parameters stay float32): near the float32 curve
    _assert_losses_close(losses, neuron_float32["losses"], rel=5e-2)


def test_trainer_resume_from_checkpoint_continues_the_same_losses(tmp_path):
    whole = _run(tmp_path / "whole", "--dropout", "0.2", "--save-steps", "3")
    checkpoint = tmp_path / "whole" / "checkpoint-3"
    assert (checkpoint / "rng_state.pth").is_file()
    resumed = _run(tmp_path / "resumed", "--dropout", "0.2", "--resume", str(checkpoint))
    assert resumed["device"] == "neuron:0"
    # the resumed run logs steps 4..6 only; same kernels, same data, same
    # generator states: the same bits
    assert resumed["losses"] == whole["losses"][3:], (resumed["losses"], whole["losses"])


def test_trainer_checkpoint_holds_the_neuron_generator(tmp_path):
    import torch

    _run(tmp_path, "--dropout", "0.2", "--save-steps", "3")
    states = torch.load(tmp_path / "checkpoint-3" / "rng_state.pth", weights_only=False)
    assert "neuron" in states
    assert isinstance(states["neuron"], torch.Tensor) and states["neuron"].dtype == torch.uint8


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_trainer_ddp_two_processes_match_one(tmp_path, neuron_float32):
    launcher = (sys.executable, "-m", "accelerate.commands.launch", "--num_processes", "2",
                "--multi_gpu", "--main_process_port", str(_free_port()), "--num_machines", "1",
                "--mixed_precision", "no", "--dynamo_backend", "no")
    run = _run(tmp_path, launcher=launcher)
    assert run["world"] == 2
    assert run["device"].startswith("neuron")
    # DDP averages the two ranks' gradients: the same update as one process
    # on the whole batch, up to the order of float32 sums
    _assert_losses_close(run["losses"], neuron_float32["losses"], rel=1e-4)
