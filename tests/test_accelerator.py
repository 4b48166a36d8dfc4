"""torch.accelerator (the device-agnostic API) reports and drives neuron."""
import torch

from conftest import DEFAULT_DEVICE_COUNT, DEFAULT_HBM_BYTES


def test_neuron_is_the_current_accelerator():
    assert torch.accelerator.is_available()
    assert torch.accelerator.current_accelerator() == torch.device("neuron")
    assert torch.accelerator.current_accelerator(check_available=True).type == "neuron"
    assert torch.accelerator.device_count() == DEFAULT_DEVICE_COUNT


def test_device_index_set_and_get_agree_with_torch_neuron():
    assert torch.accelerator.current_device_index() == 0
    torch.accelerator.set_device_index(1)
    assert torch.neuron.current_device() == 1
    assert torch.accelerator.current_device_index() == 1
    torch.neuron.set_device(0)
    assert torch.accelerator.current_device_index() == 0


def test_device_index_context():
    with torch.accelerator.device_index(1):
        assert torch.neuron.current_device() == 1
        assert torch.empty(1, device="neuron").device.index == 1
    assert torch.accelerator.current_device_index() == 0
    with torch.accelerator.device_index(None):
        assert torch.accelerator.current_device_index() == 0


def test_device_agnostic_device_construction():
    acc = torch.accelerator.current_accelerator()
    x = torch.ones(3, device=torch.device(acc.type, 1))
    assert x.device == torch.device("neuron:1")


def test_synchronize_waits_for_queued_work():
    x = torch.ones(1 << 16, device="neuron")
    for _ in range(20):
        x = x + 1
    torch.accelerator.synchronize()
    torch.accelerator.synchronize(1)
    assert x.cpu().eq(21).all().item()


def test_current_stream_and_set_stream():
    assert torch.accelerator.current_stream() == torch.neuron.current_stream()
    assert torch.accelerator.current_stream().device == torch.device("neuron:0")
    side = torch.neuron.Stream()
    torch.accelerator.set_stream(side)
    try:
        assert torch.neuron.current_stream() == side
        assert torch.accelerator.current_stream() == side
    finally:
        torch.accelerator.set_stream(torch.neuron.default_stream())
    assert torch.neuron.current_stream() == torch.neuron.default_stream()
    assert torch.accelerator.current_stream(1).device == torch.device("neuron:1")


def test_memory_functions_report_neuron():
    torch.neuron.empty_cache()
    before = torch.accelerator.memory_allocated()
    x = torch.empty(1 << 20, dtype=torch.uint8, device="neuron")
    assert torch.accelerator.memory_allocated() == torch.neuron.memory_allocated()
    assert torch.accelerator.memory_allocated() >= before + (1 << 20)
    assert torch.accelerator.memory_reserved() == torch.neuron.memory_reserved()
    assert torch.accelerator.max_memory_allocated() == torch.neuron.max_memory_allocated()
    assert torch.accelerator.max_memory_reserved() == torch.neuron.max_memory_reserved()
    stats = torch.accelerator.memory_stats()
    assert stats["allocated_bytes.all.current"] == torch.neuron.memory_allocated()
    del x
    torch.accelerator.reset_peak_memory_stats()
    assert torch.neuron.max_memory_allocated() == torch.neuron.memory_allocated()
    cached = torch.neuron.memory_reserved()
    torch.accelerator.empty_cache()
    assert torch.neuron.memory_allocated() <= torch.neuron.memory_reserved() <= cached


def test_memory_info_matches_mem_get_info():
    free, total = torch.accelerator.get_memory_info()
    assert total == DEFAULT_HBM_BYTES
    assert (free, total) == torch.neuron.mem_get_info()
    assert torch.accelerator.get_memory_info(1)[1] == DEFAULT_HBM_BYTES


def test_device_capability_lists_supported_dtypes():
    capability = torch.accelerator.get_device_capability()
    assert isinstance(capability, dict)
    assert {torch.float32, torch.bfloat16, torch.int64} <= set(capability["supported_dtypes"])


def test_pin_memory_uses_the_accelerator():
    x = torch.empty(16, pin_memory=True)
    assert x.is_pinned()
    assert torch.arange(4.0).pin_memory().is_pinned()
    assert not torch.arange(4.0).is_pinned()
