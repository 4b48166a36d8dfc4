"""Shared helpers for the neuron test suites.

Nothing here skips: every test runs, and a missing feature is a failure.

The runtime reads its TORCHNEURON_* configuration once, when it initialises,
so the in-process tests run with the documented defaults (2 devices, 16G of
HBM each, fallback in warn mode) and anything that needs another environment
runs in a subprocess through `run_python`.
"""
import os
import subprocess
import sys
import textwrap

# Scrub the variables the in-process expectations depend on before torch (and
# with it torch_neuronx, through autoload) is imported.  TORCHNEURON_NUM_THREADS
# and TORCHNEURON_LAUNCH_BLOCKING are kept: the suite must pass under both.
for _name in ("TORCHNEURON_DEVICE_COUNT", "TORCHNEURON_HBM_SIZE",
              "TORCHNEURON_FALLBACK", "TORCH_DEVICE_BACKEND_AUTOLOAD",
              "NEURON_RT_VISIBLE_CORES", "LOCAL_RANK"):
    os.environ.pop(_name, None)

import pytest  # noqa: E402
import torch  # noqa: E402
import torch_neuronx  # noqa: E402,F401  (autoload is tested in a subprocess)

DEFAULT_DEVICE_COUNT = 2
DEFAULT_HBM_BYTES = 16 * 2**30

# Ops with a CPU kernel that will never get a neuron one: the fallback tests
# use them, so they do not change meaning as ATen ops become native.  The
# source is also run in the child interpreters of run_python.
CPU_ONLY_OPS = """
import torch
if not hasattr(torch.ops.cpu_only, "double_it"):
    _cpu_only_lib = torch.library.Library("cpu_only", "DEF")
    for _name, _fn in (("double_it", lambda x: x * 2), ("square_it", lambda x: x * x),
                       ("negate_it", lambda x: -x)):
        _cpu_only_lib.define(_name + "(Tensor x) -> Tensor")
        _cpu_only_lib.impl(_name, _fn, "CPU")
"""
exec(CPU_ONLY_OPS)


def run_python(code, env=None, timeout=120):
    """Runs `code` in a fresh interpreter with os.environ updated by `env`
    (a value of None removes the variable); returns the CompletedProcess."""
    full_env = dict(os.environ)
    for key, value in (env or {}).items():
        if value is None:
            full_env.pop(key, None)
        else:
            full_env[key] = value
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)],
                          env=full_env, capture_output=True, text=True,
                          timeout=timeout)


def check_python(code, env=None, timeout=120):
    """Like run_python, but the child must exit 0; returns its stdout."""
    proc = run_python(code, env, timeout)
    assert proc.returncode == 0, (
        f"child exited {proc.returncode}\n--- stdout\n{proc.stdout}"
        f"\n--- stderr\n{proc.stderr}")
    return proc.stdout


def assert_same(actual, expected, **tolerances):
    """actual (any device) equals the CPU reference `expected`: same shape and
    dtype, values within torch's default tolerances for the dtype (exact for
    integral and bool) unless tolerances are given."""
    assert isinstance(actual, torch.Tensor), type(actual)
    assert actual.device.type == "neuron", actual.device
    torch.testing.assert_close(actual.cpu(), expected, equal_nan=True,
                               **tolerances)


@pytest.fixture
def native():
    """Fallback in error mode for the duration of the test: any op without a
    native kernel raises, so the test proves its path is native."""
    with torch_neuronx._fallback.fallback_mode("error"):
        yield


@pytest.fixture(autouse=True)
def _restore_device_and_sync():
    """Each test starts on neuron:0 and leaves no queued work behind."""
    torch.neuron.set_device(0)
    yield
    for index in range(torch.neuron.device_count()):
        torch.neuron.synchronize(index)
    torch.neuron.set_device(0)
