"""Hugging Face finds neuron on its own, and every `torch.neuron` call its
neuron code paths make behaves as the `torch.cuda` one does.

transformers 5.25 (utils/import_utils.py: is_torch_neuron_available) and
accelerate 1.15 (utils/imports.py: is_neuron_available) look for the module
`torch_neuronx` with importlib's find_spec, then use `torch.neuron`; so
`import torch` alone (autoload) must be enough.  The calls below are the
ones `grep -rn "torch.neuron" transformers accelerate` finds.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conftest import check_python, run_python  # noqa: E402


def test_import_torch_alone_engages_hugging_face():
    out = check_python("""
        import sys
        import torch
        assert "torch_neuronx" in sys.modules  # autoload, no explicit import
        from transformers.utils.import_utils import is_torch_neuron_available
        from accelerate.utils import is_neuron_available
        print(is_torch_neuron_available(), is_torch_neuron_available(check_device=True),
              is_neuron_available(), is_neuron_available(check_device=True))
        from transformers import TrainingArguments
        args = TrainingArguments(output_dir="unused", report_to="none")
        print(args.device, torch.neuron.current_device())
        args = TrainingArguments(output_dir="unused", report_to="none", use_cpu=True)
        print(args.device)
        from transformers.utils.import_utils import is_torch_bf16_gpu_available
        print(is_torch_bf16_gpu_available())
    """, env={"TORCH_DEVICE_BACKEND_AUTOLOAD": None, "LOCAL_RANK": None})
    lines = out.split("\n")
    assert lines[0] == "True True True True"
    assert lines[1] == "neuron:0 0"
    assert lines[2] == "cpu"
    assert lines[3] == "True"


def test_autoload_off_means_no_neuron_for_hugging_face():
    # find_spec still sees the installed package, but torch.neuron only
    # exists once torch_neuronx is imported: both libraries then say False.
    out = check_python("""
        import torch
        from transformers.utils.import_utils import is_torch_neuron_available
        from accelerate.utils import is_neuron_available
        print(hasattr(torch, "neuron"), is_torch_neuron_available(), is_neuron_available())
    """, env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    assert out.strip() == "False False False"


def test_launcher_rank_picks_the_worker_device():
    # torchrun / accelerate launch export LOCAL_RANK; accelerate puts a
    # neuron worker on torch.neuron.current_device() and gives DDP
    # device_ids=[local rank], so each worker starts on its own device.
    out = check_python("""
        import threading, torch
        seen = []
        t = threading.Thread(target=lambda: seen.append(torch.neuron.current_device()))
        t.start(); t.join()
        print(torch.neuron.current_device(), seen[0], torch.empty(1, device="neuron").device)
    """, env={"LOCAL_RANK": "3"})
    assert out.strip() == "1 1 neuron:1"  # 3 mod the default 2 devices


def test_visible_cores_from_accelerate_gpu_ids():
    # `accelerate launch --gpu_ids 1` exports NEURON_RT_VISIBLE_CORES=1 (the
    # real runtime's variable): the worker sees one device, numbered 0.
    out = check_python("""
        import torch
        print(torch.neuron.device_count(), torch.neuron.current_device())
    """, env={"NEURON_RT_VISIBLE_CORES": "1", "LOCAL_RANK": "0"})
    assert out.strip() == "1 0"
    # a core the machine lacks: no device (count 0, as cuda's count reads
    # for a bad CUDA_VISIBLE_DEVICES) and the first use says why
    proc = run_python("import torch; print(torch.neuron.device_count()); torch.ones(1, device='neuron')",
                      env={"NEURON_RT_VISIBLE_CORES": "0,5"})
    assert proc.stdout.strip() == "0"
    assert proc.returncode != 0 and "NEURON_RT_VISIBLE_CORES" in proc.stderr


def test_rng_state_calls():
    # accelerate checkpointing.py (get_rng_state_all/set_rng_state_all),
    # utils/random.py (manual_seed_all, get_rng_state/set_rng_state),
    # transformers trainer_pt_utils.set_rng_state_for_device.
    count = torch.neuron.device_count()
    torch.neuron.manual_seed_all(11)
    states = torch.neuron.get_rng_state_all()
    assert len(states) == count and all(s.dtype == torch.uint8 and s.device.type == "cpu"
                                        for s in states)
    first = [torch.rand(5, device=f"neuron:{i}").cpu() for i in range(count)]
    torch.neuron.set_rng_state_all(states)
    again = [torch.rand(5, device=f"neuron:{i}").cpu() for i in range(count)]
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    assert not torch.equal(first[0], torch.rand(5, device="neuron:0").cpu())

    state = torch.neuron.get_rng_state()
    x = torch.rand(7, device="neuron")
    torch.neuron.set_rng_state(state)
    assert torch.equal(x.cpu(), torch.rand(7, device="neuron").cpu())


def test_memory_and_device_calls():
    # accelerate utils/memory.py, test_utils (empty_cache, memory_allocated,
    # max_memory_allocated, reset_peak_memory_stats), commands/env.py
    # (get_device_name), big_modeling.py (Module.neuron), transformers
    # training_args.py (set_device) and import_utils.py (is_bf16_supported).
    torch.neuron.synchronize()
    torch.neuron.empty_cache()
    torch.neuron.reset_peak_memory_stats()
    base = torch.neuron.memory_allocated()
    x = torch.empty(1 << 20, device="neuron")
    assert torch.neuron.memory_allocated() >= base + x.nbytes
    del x
    assert torch.neuron.memory_allocated() == base
    assert torch.neuron.max_memory_allocated() >= base + (1 << 22)
    torch.neuron.empty_cache()
    torch.neuron.reset_peak_memory_stats()
    assert torch.neuron.max_memory_allocated() == torch.neuron.memory_allocated()

    assert isinstance(torch.neuron.get_device_name(), str) and torch.neuron.get_device_name()
    assert torch.neuron.is_bf16_supported()
    torch.neuron.set_device(torch.device("neuron:1"))
    assert torch.neuron.current_device() == 1
    torch.neuron.set_device(torch.device("neuron:0"))
    module = torch.nn.Linear(3, 2).neuron()
    assert module.weight.device == torch.device("neuron:0")
