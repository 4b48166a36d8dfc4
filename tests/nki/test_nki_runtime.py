"""How kernels execute: stream tasks in order with eager work, the profiler,
the disk cache, re-rolled C, the executor without a compiler, and the
simulator's debugging aids."""
import json

import pytest

import nki_testutil  # noqa: F401  (examples/nki on sys.path)
import torch
from torch.profiler import ProfilerActivity, profile

from torch_neuronx import nki
import torch_neuronx.nki.language as nl
from torch_neuronx.nki import build, kernel


@nki.jit
def scale_add(a, b, s):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(a.shape[0] // 128):
        x = nl.load(a[i * 128:(i + 1) * 128, :])
        y = nl.load(b[i * 128:(i + 1) * 128, :])
        nl.store(out[i * 128:(i + 1) * 128, :], x * s + y)
    return out


def test_in_stream_order_with_eager_ops():
    a = torch.randn(512, 256, device="neuron")
    b = torch.randn(512, 256, device="neuron")
    # eager op -> kernel -> eager op, no synchronisation in between
    out = scale_add(a * 2, b, 3.0) - b
    torch.testing.assert_close(out.cpu(), a.cpu() * 6)


def test_on_a_side_stream():
    a = torch.randn(256, 64, device="neuron")
    s = torch.neuron.Stream()
    s.wait_stream(torch.neuron.current_stream())
    with torch.neuron.stream(s):
        out = scale_add(a, a, 1.0)
    torch.neuron.current_stream().wait_stream(s)
    torch.testing.assert_close(out.cpu(), a.cpu() * 2)


def test_profiler_names_the_kernel(tmp_path):
    a = torch.randn(256, 64, device="neuron")
    scale_add(a, a, 1.0)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        scale_add(a, a, 1.0)
        torch.neuron.synchronize()
    avg = {e.key: e for e in prof.key_averages()}
    dev = [k for k in avg if "nki::scale_add" in k and avg[k].device_time_total > 0]
    assert dev, list(avg)
    prof.export_chrome_trace(str(tmp_path / "t.json"))
    names = [e.get("name", "") for e in json.load(open(tmp_path / "t.json"))["traceEvents"]]
    assert any("nki::scale_add" in n for n in names)


def test_cache_hits_do_not_retrace(monkeypatch):
    a = torch.randn(256, 64, device="neuron")
    scale_add(a, a, 2.0)
    traces = []
    real = kernel.Trace
    monkeypatch.setattr(kernel, "Trace", lambda *x, **k: traces.append(1) or real(*x, **k))
    scale_add(a, a, 2.0)
    assert traces == []
    scale_add(a, a, 5.0)  # a new non-tensor argument is a new signature
    assert traces == [1]


def test_disk_cache_skips_the_compiler(monkeypatch):
    a = torch.randn(256, 64)
    scale_add(a, a, 7.0)
    fresh = nki.jit(scale_add.fn)

    def no_compiler(*_a, **_k):
        raise AssertionError("compiler invoked on a disk cache hit")

    monkeypatch.setattr(build.subprocess, "run", no_compiler)
    torch.testing.assert_close(fresh(a, a, 7.0), a * 8)


def test_rerolled_c_stays_small():
    a = torch.randn(128 * 64, 32)
    out = scale_add(a, a, 1.0)
    torch.testing.assert_close(out, a * 2)
    src = scale_add.compiled((1,), (a, a, 1.0), {}).source
    assert src.count("NKI_ST_") == 1  # 64 iterations of load, load, math, store: one loop
    assert "nki_pfor(64" in src  # independent iterations run on the compute pool


@nki.jit
def add16(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(a.shape[0] // 128):
        nl.store(out[i * 128:(i + 1) * 128, :],
                 nl.load(a[i * 128:(i + 1) * 128, :]) + nl.load(b[i * 128:(i + 1) * 128, :]))
    return out


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_16bit_loads_and_stores_round_once(dtype):
    """A 16-bit load -> add -> store chain rounds once, in the store: a
    value loaded from a tensor of the tile's dtype is exact, and the store
    rounds as the tile would (bits equal to torch's add either way)."""
    a, b = (torch.randn(256, 64).to(dtype) for _ in range(2))
    out = add16(a, b)
    assert torch.equal(out.view(torch.int16), (a + b).view(torch.int16))
    src = add16.compiled((1,), (a, b), {}).source
    assert "nki_round_" not in src


def test_executor_without_a_compiler(monkeypatch):
    monkeypatch.setattr(build, "compiler", lambda: None)
    k = nki.jit(scale_add.fn)
    a = torch.randn(256, 64)
    torch.testing.assert_close(k(a, a, 2.0), a * 3)
    out = k(a.to("neuron"), a.to("neuron"), 2.0)
    assert out.device.type == "neuron"
    torch.testing.assert_close(out.cpu(), a * 3)


@nki.jit
def reads_unwritten(a):
    out = nl.ndarray((128, 8), dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
    t[:, 0:4] = nl.load(a[:, 0:4])
    print("tile:", t)
    nl.store(out, t)
    return out


def test_simulator_nan_fills_and_prints(capsys):
    a = torch.randn(128, 8)
    out = nki.simulate(reads_unwritten)(a)
    torch.testing.assert_close(out[:, :4], a[:, :4])
    assert out[:, 4:].isnan().all()
    assert "nan" in capsys.readouterr().out


def test_simulate_env(monkeypatch, capsys):
    monkeypatch.setenv("TORCHNEURON_NKI_SIMULATE", "1")
    a = torch.randn(128, 8, device="neuron")
    out = reads_unwritten(a)
    assert out.device.type == "neuron"
    assert out[:, 4:].isnan().all().item()
    assert "tile:" in capsys.readouterr().out


def test_benchmark_records_latencies():
    a = torch.randn(256, 64, device="neuron")
    b = nki.benchmark(scale_add, warmup=1, iters=3)
    out = b(a, a, 1.0)
    torch.testing.assert_close(out.cpu(), a.cpu() * 2)
    assert len(b.times_us) == 3
    assert b.benchmark_result.nc_latency.get_latency_percentile(50) > 0


def test_install_aliases_runs_unmodified_imports():
    import importlib.util
    import sys

    assert importlib.util.find_spec("neuronxcc") is None  # no real NKI on this machine
    try:
        assert "neuronxcc.nki" in nki.install_aliases()
        src = ("import neuronxcc.nki as nki\nimport neuronxcc.nki.language as nl\n"
               "@nki.jit\ndef k(a):\n    out = nl.ndarray(a.shape, dtype=a.dtype, "
               "buffer=nl.shared_hbm)\n    nl.store(out, nl.exp(nl.load(a)))\n    return out\n")
        g = {}
        exec(compile(src, "<ported>", "exec"), g)
        a = torch.randn(8, 8, device="neuron")
        torch.testing.assert_close(g["k"](a).cpu(), a.cpu().exp())
    finally:
        for m in ("nki", "nki.language", "nki.isa", "neuronxcc", "neuronxcc.nki",
                  "neuronxcc.nki.language", "neuronxcc.nki.isa"):
            sys.modules.pop(m, None)
