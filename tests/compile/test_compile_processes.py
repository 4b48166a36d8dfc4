"""torch.compile on neuron across processes: lazy registration at autoload,
the FX-graph and AOTAutograd caches (a warm process runs no C compiler; a new
codegen version misses), and TORCHNEURON_LAUNCH_BLOCKING=1."""
import json

from conftest import check_python

# One training step compiled with backend="neuron" in a fresh interpreter,
# which imports nothing but torch (autoload and the torch_dynamo_backends
# entry point do the rest).  Prints the cache counters and how many times
# Inductor's C++ builder ran in this process.
TRAIN_STEP = """
import json, os, sys
import torch
from torch._dynamo.utils import counters
from torch._inductor import cpp_builder

builds = []
kernel_commands = []
_build = cpp_builder.CppBuilder.build
def counting_build(self, *args, **kwargs):
    # Not counted: the preprocessing of cpp_prefix.h by which Inductor checks
    # its precompiled header once per process (g++ -E, codecache.py
    # _precompile_header), for neuron's kernels as for its CPU kernels.
    if not self._preprocessing:
        builds.append(self.get_target_file_path())
        if not self._precompiling:
            kernel_commands.append(self.get_command_line())
    return _build(self, *args, **kwargs)
cpp_builder.CppBuilder.build = counting_build

version = os.environ.get("NEURON_TEST_CODEGEN_VERSION")
if version:
    import torch_neuronx._inductor.cache_key as cache_key
    cache_key.CODEGEN_VERSION = version

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
x = torch.randn(8, 16)
ref = model(x).square().mean()
ref.backward()
ref_grad = model[0].weight.grad.clone()
model.zero_grad()
model.to("neuron")
loss = torch.compile(model, backend="neuron")(x.to("neuron")).square().mean()
loss.backward()
torch.testing.assert_close(loss.detach().cpu(), ref.detach(), rtol=1e-4, atol=1e-5)
torch.testing.assert_close(model[0].weight.grad.cpu(), ref_grad, rtol=1e-4, atol=1e-5)
print(json.dumps({
    "fx_hit": counters["inductor"]["fxgraph_cache_hit"],
    "fx_miss": counters["inductor"]["fxgraph_cache_miss"],
    "aot_hit": counters["aot_autograd"]["autograd_cache_hit"],
    "aot_miss": counters["aot_autograd"]["autograd_cache_miss"],
    "builds": len(builds),
    # each kernel library (a .main.cpp; the rest are Inductor's ISA probes)
    # built with the precompiled cpp_prefix.h, as Inductor builds its CPU
    # kernels (runtime.py, NeuronKernelCodeCache)
    "kernels_as_cpu": any(".main.cpp" in c for c in kernel_commands) and all(
        "precompiled_headers" in c for c in kernel_commands if ".main.cpp" in c),
}))
"""


def run_step(cache_dir, **env):
    out = check_python(TRAIN_STEP, env={"TORCHINDUCTOR_CACHE_DIR": str(cache_dir),
                                        "TORCHINDUCTOR_COMPILE_THREADS": "1", **env},
                       timeout=600)
    return json.loads(out.strip().splitlines()[-1])


def test_warm_cache_runs_no_compiler_and_codegen_version_misses(tmp_path):
    cold = run_step(tmp_path)
    assert cold["fx_miss"] == 2 and cold["fx_hit"] == 0, cold  # forward and backward
    assert cold["aot_miss"] == 1 and cold["aot_hit"] == 0, cold
    assert cold["builds"] > 0 and cold["kernels_as_cpu"], cold
    warm = run_step(tmp_path)
    assert warm["aot_hit"] == 1 and warm["aot_miss"] == 0, warm
    assert warm["fx_hit"] == 2 and warm["fx_miss"] == 0, warm
    assert warm["builds"] == 0, warm  # the kernels' libraries came from the cache
    # Another codegen version: both caches miss (the key has our pass's uuid);
    # the kernels' sources did not change, so their libraries are reused.
    other = run_step(tmp_path, NEURON_TEST_CODEGEN_VERSION="neuron-codegen-test")
    assert other["aot_hit"] == 0 and other["aot_miss"] == 1, other
    assert other["fx_hit"] == 0 and other["fx_miss"] == 2, other
    # Another vector ISA (ATEN_CPU_CAPABILITY=default: no vectorisation, on
    # any machine): both caches miss and the step is still right.  The FX
    # key does not hold the ISA; a graph cached under AVX-512 and loaded
    # under an AVX2 cap had crashed in its kernels.
    scalar = run_step(tmp_path, ATEN_CPU_CAPABILITY="default")
    assert scalar["aot_miss"] == 1 and scalar["fx_miss"] == 2, scalar


def test_autoload_imports_no_compiler_and_default_backend_works(tmp_path):
    out = check_python("""
        import sys
        import torch
        assert "torch_neuronx" in sys.modules
        heavy = [m for m in ("torch._dynamo", "torch._inductor") if m in sys.modules]
        assert not heavy, heavy
        import torch._dynamo
        from torch._dynamo.device_interface import get_interface_for_device
        # registered by the import hook, before any compile
        assert get_interface_for_device("neuron").__name__ == "NeuronInterface"
        assert "torch_neuronx._inductor.scheduling" not in sys.modules
        assert "neuron" in torch._dynamo.list_backends()
        f = torch.compile(lambda x: torch.nn.functional.silu(x) * 2)
        x = torch.randn(64, device="neuron")
        torch.testing.assert_close(f(x).cpu(), torch.nn.functional.silu(x.cpu()) * 2)
        print("ok")
    """, env={"TORCHINDUCTOR_CACHE_DIR": str(tmp_path), "TORCHINDUCTOR_COMPILE_THREADS": "1"},
        timeout=600)
    assert out.strip().endswith("ok")


def test_launch_blocking_reports_kernel_errors_at_the_call(tmp_path):
    out = check_python("""
        import torch
        assert torch.neuron.is_launch_blocking()
        f = torch.compile(lambda x, i: x[i] + 1)
        x = torch.randn(10, 4, device="neuron")
        i = torch.tensor([0, 3, 9], device="neuron")
        torch.testing.assert_close(f(x, i).cpu(), x.cpu()[i.cpu()] + 1)
        i[1] = -11
        try:
            f(x, i)
        except RuntimeError as e:
            assert "index out of bounds" in str(e), e
            print("raised at the call")
        i[1] = -1
        torch.testing.assert_close(f(x, i).cpu(), x.cpu()[i.cpu()] + 1)
    """, env={"TORCHINDUCTOR_CACHE_DIR": str(tmp_path), "TORCHINDUCTOR_COMPILE_THREADS": "1",
              "TORCHNEURON_LAUNCH_BLOCKING": "1"}, timeout=600)
    assert "raised at the call" in out
