"""Streams and events: torch.neuron.Stream/Event with torch.cuda's API, and
the generic torch.Stream/torch.Event on neuron."""
import math

import torch

N = 1 << 18  # big enough that work is still queued when the host moves on


def test_default_and_current_stream():
    default = torch.neuron.default_stream()
    assert torch.neuron.current_stream() == default
    assert default.device == torch.device("neuron:0")
    assert torch.neuron.default_stream(1).device == torch.device("neuron:1")
    assert torch.neuron.default_stream(1) != default


def test_new_streams_are_distinct_from_the_default():
    s1, s2 = torch.neuron.Stream(), torch.neuron.Stream()
    default = torch.neuron.default_stream()
    assert s1 != default and s2 != default and s1 != s2
    assert s1 == s1 and hash(s1) == hash(s1)
    assert torch.neuron.Stream(device=1).device == torch.device("neuron:1")
    assert torch.neuron.Stream(priority=-1).priority == -1


def test_stream_context_switches_current_stream():
    side = torch.neuron.Stream()
    with torch.neuron.stream(side):
        assert torch.neuron.current_stream() == side
        y = torch.ones(N, device="neuron") * 3
    assert torch.neuron.current_stream() == torch.neuron.default_stream()
    side.synchronize()
    assert y.cpu().eq(3).all().item()


def test_work_on_one_stream_runs_in_order():
    x = torch.zeros(N, device="neuron")
    for _ in range(50):
        x.add_(1)
        x.mul_(2)
    expected = torch.zeros(N)
    for _ in range(50):
        expected.add_(1)
        expected.mul_(2)
    assert torch.equal(x.cpu(), expected)


def test_cross_stream_wait_event():
    s1, s2 = torch.neuron.Stream(), torch.neuron.Stream()
    a = torch.ones(N, device="neuron")
    torch.neuron.synchronize()
    with torch.neuron.stream(s1):
        y = a
        for _ in range(30):
            y = y * 1.5 + 1
        done = torch.neuron.Event()
        done.record(s1)
    s2.wait_event(done)
    with torch.neuron.stream(s2):
        z = y - 2
    y.record_stream(s2)
    s2.synchronize()
    expected = torch.ones(N)
    for _ in range(30):
        expected = expected * 1.5 + 1
    assert torch.equal(z.cpu(), expected - 2)


def test_wait_stream():
    s1, s2 = torch.neuron.Stream(), torch.neuron.Stream()
    with torch.neuron.stream(s1):
        y = torch.full((N,), 2.0, device="neuron")
        for _ in range(20):
            y = y * y / y + 1
    s2.wait_stream(s1)
    with torch.neuron.stream(s2):
        z = y * 10
    torch.neuron.synchronize()
    assert z.cpu().eq(220).all().item()


def test_event_query_and_synchronize():
    x = torch.ones(N, device="neuron")
    for _ in range(10):
        x = x + 1
    event = torch.neuron.Event()
    event.record()
    event.synchronize()
    assert event.query() is True
    assert torch.neuron.current_stream().query() is True
    assert x.cpu().eq(11).all().item()
    never_recorded = torch.neuron.Event()
    assert never_recorded.query() is True  # as CUDA: nothing captured


def test_stream_query_and_synchronize():
    s = torch.neuron.Stream()
    with torch.neuron.stream(s):
        x = torch.ones(N, device="neuron") + 1
    s.synchronize()
    assert s.query() is True
    assert x.cpu().eq(2).all().item()


def test_elapsed_time_with_timing_events():
    start = torch.neuron.Event(enable_timing=True)
    end = torch.neuron.Event(enable_timing=True)
    start.record()
    x = torch.ones(N, device="neuron")
    for _ in range(10):
        x = x * 2
    end.record()
    end.synchronize()
    ms = start.elapsed_time(end)
    assert isinstance(ms, float) and math.isfinite(ms) and ms >= 0


def test_record_stream_keeps_memory_safe():
    side = torch.neuron.Stream()
    x = torch.arange(N, dtype=torch.float32, device="neuron")
    side.wait_stream(torch.neuron.current_stream())
    with torch.neuron.stream(side):
        y = x * 2
    x.record_stream(side)
    del x  # its block must not be reused before `side` is done with it
    z = torch.zeros(N, device="neuron")
    z.fill_(-1)
    side.synchronize()
    assert torch.equal(y.cpu(), torch.arange(N, dtype=torch.float32) * 2)
    assert z.cpu().eq(-1).all().item()


def test_streams_on_the_second_device():
    s = torch.neuron.Stream(device=1)
    with torch.neuron.device(1), torch.neuron.stream(s):
        assert torch.neuron.current_stream() == s
        x = torch.ones(N, device="neuron:1") * 4
    s.synchronize()
    assert x.device == torch.device("neuron:1")
    assert x.cpu().eq(4).all().item()


def test_generic_torch_stream_and_event():
    s = torch.Stream(device="neuron")
    assert s.device.type == "neuron"
    e = torch.Event(device="neuron", enable_timing=True)
    with s:
        x = torch.ones(N, device="neuron") + 5
        e.record(s)
    e.synchronize()
    assert e.query() and s.query()
    assert x.cpu().eq(6).all().item()
