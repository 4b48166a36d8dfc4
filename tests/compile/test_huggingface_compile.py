"""Hugging Face's compiled paths on neuron, which ask for `backend="neuron"`.

- `Trainer(torch_compile=True)`: TrainingArguments picks
  torch_compile_backend="neuron" (training_args.py) and the Trainer compiles
  with dynamic=False; its per-step losses equal the eager neuron run's
  (tests/huggingface/trainer_run.py, a fresh interpreter each).
- `generate(..., cache_implementation="static")`: a compilable cache makes
  generate() compile the decoding step with backend "neuron"
  (generation/utils.py, modeling_utils.py: _default_compile_config); the
  tokens equal the CPU's greedy tokens, and the decoding step was compiled.
"""
import copy
import json
import os
import subprocess
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
HF = os.path.join(os.path.dirname(HERE), "huggingface")
sys.path.insert(0, HF)
import tiny  # noqa: E402


def _trainer(out_dir, *flags):
    env = dict(os.environ)
    env.pop("TORCH_DEVICE_BACKEND_AUTOLOAD", None)
    proc = subprocess.run([sys.executable, os.path.join(HF, "trainer_run.py"), "--out", str(out_dir),
                           *flags], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr[-6000:]}"
    return json.loads([line for line in proc.stdout.splitlines() if line.startswith("{")][-1])


def test_trainer_torch_compile_trains_with_eager_losses(tmp_path):
    compiled = _trainer(tmp_path / "compiled", "--compile")
    eager = _trainer(tmp_path / "eager")
    assert compiled["compile_backend"] == "neuron" and eager["compile_backend"] is None
    assert compiled["device"] == "neuron:0"
    assert len(compiled["losses"]) == len(eager["losses"]) == 6
    for step, (c, e) in enumerate(zip(compiled["losses"], eager["losses"]), 1):
        assert abs(c - e) <= 1e-4 * abs(e), (step, compiled["losses"], eager["losses"])


def test_static_cache_generate_is_compiled_and_matches_cpu():
    from torch._dynamo.utils import counters

    cpu = tiny.gpt2_decisive()
    neuron = copy.deepcopy(cpu).to("neuron")
    ids = tiny.word_tokenizer()("w5 w17 w40 w2 w9", return_tensors="pt")["input_ids"]
    kwargs = dict(max_new_tokens=12, do_sample=False, cache_implementation="static")
    expected = cpu.generate(ids, **kwargs)
    torch._dynamo.reset()
    counters.clear()
    actual = neuron.generate(ids.to("neuron"), **kwargs)
    assert actual.device.type == "neuron"
    assert actual.cpu().tolist() == expected.tolist()
    assert len(set(expected[0, ids.shape[1]:].tolist())) >= 4  # a real continuation
    assert counters["stats"]["unique_graphs"] >= 1  # the decoding step was compiled
    torch._dynamo.reset()
