"""torch.profiler with the neuron device (the Kineto plugin in
torch_neuronx/csrc/profiler.cpp), device memory profiling and history, and the
HTML report (torch_neuronx.profiler) rendered in headless Chromium."""
import gc
import json
import os
import re
import shutil
import subprocess
import sys

import pytest
import torch
from torch.profiler import (ProfilerActivity, profile, record_function, schedule,
                            tensorboard_trace_handler)

import torch_neuronx
from conftest import CPU_ONLY_OPS
from torch_neuronx.profiler import load_trace, summarize

ACTS = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
exec(CPU_ONLY_OPS)


def device_events(prof):
    return [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.PrivateUse1]


def trace_of(prof, tmp_path, name="trace.json"):
    path = str(tmp_path / name)
    prof.export_chrome_trace(path)
    return path, load_trace(path)["traceEvents"]


def test_plugin_is_registered_and_device_activity_supported():
    assert torch_neuronx._C._profiler_registered()
    assert ProfilerActivity.PrivateUse1 in torch.profiler.supported_activities()


def test_kernels_and_copies_have_device_time_and_their_op():
    x = torch.randn(128, 128, device="neuron")
    torch.neuron.synchronize()
    started = torch_neuronx._C._profiler_sessions_started()
    with profile(activities=ACTS) as prof:
        y = x + x
        z = torch.mm(x, y)
        z.cpu()
    assert torch_neuronx._C._profiler_sessions_started() == started + 1
    dev = device_events(prof)
    names = {e.name for e in dev}
    assert any(n.endswith("aten::add") for n in names), names
    assert any(n.endswith("aten::mm") for n in names), names
    assert "memcpy DtoH" in names, names
    for e in dev:
        assert e.time_range.end >= e.time_range.start
    # each device task is attached to the ATen op that launched it
    ops = {e.name: e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CPU}
    assert any("add" in k.name for k in ops["aten::add"].kernels)
    assert any("mm" in k.name for k in ops["aten::mm"].kernels)
    # the innermost op: z.cpu() -> aten::to -> ... -> aten::copy_ -> aten::_copy_from
    assert any(k.name == "memcpy DtoH" for k in ops["aten::_copy_from"].kernels)
    avg = {a.key: a for a in prof.key_averages()}
    assert avg["aten::add"].device_time_total > 0
    assert avg["aten::mm"].device_time_total > 0
    assert avg["aten::copy_"].device_time_total > 0
    assert "device time" in prof.key_averages().table(sort_by="device_time_total").lower() or \
        "neuron" in prof.key_averages().table(sort_by="device_time_total").lower()


def test_cpu_only_profiling_leaves_the_device_alone():
    x = torch.randn(32, device="neuron")
    started = torch_neuronx._C._profiler_sessions_started()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        (x + x).cpu()
    assert torch_neuronx._C._profiler_sessions_started() == started
    assert device_events(prof) == []
    assert any(e.name == "aten::add" for e in prof.events())


def test_chrome_trace_has_one_lane_per_device_stream(tmp_path):
    x = torch.randn(64, 64, device="neuron")
    s1, s2 = torch.neuron.Stream(), torch.neuron.Stream()
    torch.neuron.synchronize()
    with profile(activities=ACTS) as prof:
        with torch.neuron.stream(s1):
            a = x * 2
        with torch.neuron.stream(s2):
            b = x * 3
        torch.neuron.synchronize()
        c = a + b
    _, events = trace_of(prof, tmp_path)
    kernels = [e for e in events if e.get("ph") == "X" and e.get("cat") == "kernel"]
    lanes = {(e["pid"], e["tid"]) for e in kernels}
    streams = {e["args"]["stream"] for e in kernels}
    assert {s1.stream_id, s2.stream_id} <= streams, streams
    assert len(lanes) == len(streams) >= 3  # s1, s2 and the current stream of `c`
    # a kernel's correlation is its op's External id, and device time is on
    # the CPU ops' clock: a kernel starts after its op started (it is queued
    # by the op; how much later depends on the machine's load)
    cpu = {e["args"]["External id"]: e for e in events
           if e.get("ph") == "X" and e.get("cat") == "cpu_op"}
    for k in kernels:
        op = cpu[k["args"]["correlation"]]
        assert op["name"] in ("aten::mul", "aten::add"), op["name"]
        assert op["ts"] - 100 <= k["ts"] <= op["ts"] + 5e6
    # (x * 2 also fills a device scalar for the 2, launched by aten::mul)
    assert sum(k["name"].endswith("aten::mul") for k in kernels) == 2
    assert sum(k["name"].endswith("aten::add") for k in kernels) == 1
    del c


def test_fallback_round_trip_is_recorded(tmp_path):
    x = torch.randn(32, device="neuron")
    torch.neuron.synchronize()
    with profile(activities=ACTS) as prof:
        y = torch.ops.cpu_only.double_it(x)
        torch.neuron.synchronize()
    _, events = trace_of(prof, tmp_path)
    fb = [e for e in events if e.get("ph") == "X" and
          e.get("name", "").startswith("neuron::fallback cpu_only::double_it")]
    assert len(fb) == 1
    # the round trip's copies come from the ops the fallback runs (nested in it)
    lo, hi = fb[0]["ts"], fb[0]["ts"] + fb[0]["dur"]
    inner = {e["args"]["External id"] for e in events if e.get("cat") == "cpu_op"
             and e["tid"] == fb[0]["tid"] and lo <= e["ts"] and e["ts"] + e["dur"] <= hi}
    copies = [e for e in events if e.get("cat") == "gpu_memcpy"
              and e["args"]["correlation"] in inner]
    names = sorted(e["name"] for e in copies)
    assert "memcpy DtoH" in names and "memcpy HtoD" in names, names
    torch.testing.assert_close(y.cpu(), x.cpu() * 2)


def test_profile_memory_records_device_allocations(tmp_path):
    gc.collect()
    torch.neuron.synchronize()
    with profile(activities=ACTS, profile_memory=True) as prof:
        t = torch.empty(4 << 20, dtype=torch.uint8, device="neuron")
        del t
    mem = [e for e in prof.events() if e.name == "aten::empty"]
    assert sum(e.device_memory_usage for e in mem) >= 4 << 20
    _, events = trace_of(prof, tmp_path)
    recs = [e for e in events if e.get("name") == "[memory]" and e["args"].get("Device Type") != 0]
    sizes = [e["args"]["Bytes"] for e in recs]
    assert 4 << 20 in sizes and -(4 << 20) in sizes, sizes


def test_memory_history_and_snapshot():
    gc.collect()
    torch.neuron.memory._record_memory_history(max_entries=1000)
    try:
        t = torch.empty(1 << 20, dtype=torch.uint8, device="neuron:1")
        addr = t.data_ptr()
        del t
        snap = torch.neuron.memory._snapshot()
    finally:
        torch.neuron.memory._record_memory_history(enabled=None)
    trace = snap["device_traces"][1]
    mine = [e for e in trace if e["addr"] == addr]
    assert [e["action"] for e in mine][-2:] == ["alloc", "free_requested"]
    assert mine[-1]["size"] >= 1 << 20
    files = [f["filename"] for f in mine[-2]["frames"]]
    assert any(f.endswith("test_profiler.py") for f in files), files
    for d in range(torch.neuron.device_count()):
        segs = [s for s in snap["segments"] if s["device"] == d]
        assert sum(s["total_size"] for s in segs) == torch.neuron.memory_reserved(d)
        for s in segs:
            assert sum(b["size"] for b in s["blocks"]) == s["total_size"]
    # the snapshot of live tensors, as torch.cuda.memory_snapshot()
    keep = torch.empty(3 << 20, dtype=torch.uint8, device="neuron")
    blocks = [b for s in torch.neuron.memory_snapshot() for b in s["blocks"]
              if b["address"] == keep.data_ptr()]
    assert len(blocks) == 1 and blocks[0]["state"] == "active_allocated"
    assert blocks[0]["requested_size"] == 3 << 20
    assert torch.neuron.memory._snapshot()["device_traces"] == [[], []]  # recording is off
    # torch's own viewers read it as they read a cuda snapshot
    from torch.cuda import _memory_viz
    assert "segments: " in _memory_viz.segsum(snap)
    assert "<html" in _memory_viz.trace_plot(snap).lower()


def test_record_function_schedule_and_tensorboard_handler(tmp_path):
    x = torch.randn(64, 64, device="neuron")
    with profile(activities=ACTS, schedule=schedule(wait=1, warmup=1, active=2, repeat=1),
                 on_trace_ready=tensorboard_trace_handler(str(tmp_path))) as prof:
        for i in range(5):
            with record_function(f"step_{i}"):
                y = (x @ x).relu()
            prof.step()
    files = [f for f in os.listdir(tmp_path) if f.endswith(".pt.trace.json")]
    assert len(files) == 1
    events = load_trace(str(tmp_path / files[0]))["traceEvents"]
    ranges = {e["name"] for e in events if e.get("cat") == "user_annotation"
              and e["name"].startswith("step_")}
    assert ranges == {"step_2", "step_3"}, ranges
    kernels = [e for e in events if e.get("cat") == "kernel"]
    assert len(kernels) >= 4  # mm and relu in each active step
    del y


# ------------------------------------------------------------------ the report

def chromium():
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:  # the project's own set-up installs it (make test does first)
        subprocess.run([os.path.join(ROOT, "scripts", "install-chromium.sh")], check=True)
        exe = shutil.which("chromium")
    assert exe, "chromium is required for the report test (scripts/install-chromium.sh)"
    return exe


def headless(exe, *args):
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
           "--no-first-run", "--disable-extensions", "--hide-scrollbars",
           "--virtual-time-budget=3000", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def make_trace(tmp_path):
    """A trace with known content: two extra streams, a fallback, memory."""
    x = torch.randn(96, 96, device="neuron")
    s1, s2 = torch.neuron.Stream(), torch.neuron.Stream()
    torch.neuron.synchronize()
    with profile(activities=ACTS, profile_memory=True) as prof:
        with record_function("work"):
            with torch.neuron.stream(s1):
                a = x @ x
            with torch.neuron.stream(s2):
                b = torch.ops.cpu_only.double_it(x)
            torch.neuron.synchronize()
            c = (a + b).sum().cpu()
    path, _ = trace_of(prof, tmp_path)
    del c
    return path


def test_report_renders_in_headless_chromium(tmp_path):
    trace = make_trace(tmp_path)
    out = tmp_path / "report.html"
    r = subprocess.run([sys.executable, "-m", "torch_neuronx.profiler", "report", trace,
                        "-o", str(out)], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    page = out.read_text()
    # one self-contained file: no external script, stylesheet, image or font
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)=", page)
    assert "http://" not in page and "https://" not in page

    # what the page must show, counted from the trace independently
    events = load_trace(trace)["traceEvents"]
    spans = [e for e in events if e.get("ph") == "X" and e.get("cat") not in ("Trace", "trace")]
    dev = [e for e in spans if e.get("cat") in ("kernel", "gpu_memcpy")]
    lanes = {(e["cat"] in ("kernel", "gpu_memcpy"), e["pid"], e["tid"]) for e in spans}
    dev_lanes = {(e["pid"], e["tid"]) for e in dev}
    assert len(dev_lanes) >= 3
    data = summarize(load_trace(trace))
    assert data["summary"]["fallbacks"] == 1
    assert data["summary"]["memory_points"] > 0
    assert any(r["fallback"] for r in data["top"])

    exe = chromium()
    dom = headless(exe, "--dump-dom", out.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    m = re.search(r'<div id="summary"([^>]*)>', dom.stdout)
    assert m, dom.stdout[:2000]
    attrs = dict(re.findall(r'data-([\w-]+)="([^"]*)"', m.group(1)))
    assert attrs.get("rendered") == "1", attrs
    assert int(attrs["events"]) == len(spans)
    assert int(attrs["lanes"]) == len(lanes)
    assert int(attrs["device-lanes"]) == len(dev_lanes)
    assert int(attrs["fallbacks"]) == 1
    assert int(attrs["top-rows"]) >= 3
    assert 'class="fallback"' in dom.stdout  # highlighted rows

    shot = os.path.join(ROOT, "build", "profiler_report.png")
    os.makedirs(os.path.dirname(shot), exist_ok=True)
    if os.path.exists(shot):
        os.remove(shot)
    r = headless(exe, f"--screenshot={shot}", "--window-size=1400,1000", out.as_uri())
    assert r.returncode == 0, r.stderr[-2000:]
    with open(shot, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    shutil.copy(out, os.path.join(ROOT, "build", "profiler_report.html"))
