"""Quick smoke test of the device plumbing (guard, allocator, hooks,
generator, torch.neuron); the full behaviour is in the other suites."""
import pytest
import torch


def test_registration_and_current_device():
    assert torch.neuron.is_available() and torch.neuron.device_count() >= 2
    assert torch.accelerator.current_accelerator().type == "neuron"
    with torch.neuron.device("neuron:1"):
        assert torch.accelerator.current_device_index() == 1
    assert torch.neuron.current_device() == 0
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        torch.neuron.set_device(torch.neuron.device_count())


def test_streams_events_and_timing():
    s = torch.neuron.Stream(device=1, priority=-1)
    assert (s.device, s.priority) == (torch.device("neuron:1"), -1)
    with torch.neuron.stream(s):
        assert torch.neuron.current_device() == 1 and torch.neuron.current_stream(1) == s
    assert torch.neuron.current_stream(1) == torch.neuron.default_stream(1)
    start, end = torch.neuron.Event(enable_timing=True), torch.neuron.Event(enable_timing=True)
    assert isinstance(start, torch.neuron.Event)
    start.record()
    end.record()
    end.synchronize()
    assert start.elapsed_time(end) >= 0
    untimed = torch.neuron.Event()
    untimed.record()
    with pytest.raises(ValueError):
        untimed.elapsed_time(end)


def test_allocator_counts_and_recovers_from_oom():
    before = torch.neuron.memory_allocated()
    x = torch.empty(1 << 20, dtype=torch.uint8, device="neuron")
    stats = torch.neuron.memory_stats()
    assert stats["allocated_bytes.all.current"] >= before + (1 << 20)
    assert x.untyped_storage().nbytes() == 1 << 20
    del x
    assert torch.neuron.memory_allocated() == before
    total = torch.neuron.mem_get_info()[1]
    with pytest.raises(torch.OutOfMemoryError, match="NEURON out of memory"):
        torch.empty(total + 1, dtype=torch.uint8, device="neuron")
    assert torch.empty(16, device="neuron").device.type == "neuron"
    assert torch.empty(8, pin_memory=True).is_pinned()


def test_generator_state_layout():
    g = torch.Generator(device="neuron:1")
    g.manual_seed(1234)
    state = g.get_state()
    assert state.dtype == torch.uint8 and state.numel() == 16
    assert int.from_bytes(bytes(state[:8].tolist()), "little") == 1234
    torch.neuron.manual_seed_all(5)
    assert [d.initial_seed() for d in torch.neuron.default_generators] == [5] * torch.neuron.device_count()
    with pytest.raises(RuntimeError, match="16 bytes"):
        g.set_state(torch.zeros(3, dtype=torch.uint8))
