"""HBM accounting through torch.neuron's memory API (torch.cuda's names and
memory_stats keys), capacity from TORCHNEURON_HBM_SIZE, out of memory."""
import gc

import pytest
import torch

from conftest import DEFAULT_HBM_BYTES, check_python

MiB = 2**20


def test_allocated_grows_and_shrinks_with_tensors():
    gc.collect()  # earlier tests' tensors held in reference cycles go now, not mid-test
    before = torch.neuron.memory_allocated()
    x = torch.empty(4 * MiB, dtype=torch.uint8, device="neuron")
    grown = torch.neuron.memory_allocated() - before
    assert 4 * MiB <= grown <= 8 * MiB  # rounded up to the allocator's granularity
    del x
    assert torch.neuron.memory_allocated() == before


def test_small_allocation_is_counted():
    before = torch.neuron.memory_allocated()
    x = torch.empty(1, dtype=torch.uint8, device="neuron")
    assert torch.neuron.memory_allocated() > before
    del x
    assert torch.neuron.memory_allocated() == before


def test_zero_size_tensor_allocates_nothing():
    before = torch.neuron.memory_allocated()
    x = torch.empty(0, 5, device="neuron")
    assert x.shape == (0, 5)
    assert torch.neuron.memory_allocated() == before


def test_statistics_are_per_device():
    before0 = torch.neuron.memory_allocated(0)
    before1 = torch.neuron.memory_allocated(1)
    x = torch.empty(MiB, device="neuron:1")
    assert torch.neuron.memory_allocated(1) >= before1 + 4 * MiB
    assert torch.neuron.memory_allocated("neuron:1") == torch.neuron.memory_allocated(1)
    assert torch.neuron.memory_allocated(0) == before0
    del x


def test_peak_and_reset_peak():
    torch.neuron.reset_peak_memory_stats()
    base = torch.neuron.memory_allocated()
    assert torch.neuron.max_memory_allocated() == base
    x = torch.empty(8 * MiB, dtype=torch.uint8, device="neuron")
    del x
    assert torch.neuron.max_memory_allocated() >= base + 8 * MiB
    assert torch.neuron.memory_allocated() == base
    torch.neuron.reset_peak_memory_stats()
    assert torch.neuron.max_memory_allocated() == base
    assert torch.neuron.max_memory_reserved() == torch.neuron.memory_reserved()


def test_cache_keeps_reserved_until_empty_cache():
    torch.neuron.empty_cache()
    x = torch.empty(64 * MiB, dtype=torch.uint8, device="neuron")
    assert torch.neuron.memory_reserved() >= torch.neuron.memory_allocated() >= 64 * MiB
    del x
    cached = torch.neuron.memory_reserved()
    assert cached >= 64 * MiB  # freed blocks stay reserved for reuse
    # A same-size allocation is served from the cache.
    y = torch.empty(64 * MiB, dtype=torch.uint8, device="neuron")
    assert torch.neuron.memory_reserved() == cached
    del y
    torch.neuron.empty_cache()
    assert torch.neuron.memory_reserved() <= cached - 64 * MiB
    assert torch.neuron.memory_reserved() >= torch.neuron.memory_allocated()


def test_memory_stats_keys_and_consistency():
    x = torch.empty(MiB, dtype=torch.uint8, device="neuron")
    stats = torch.neuron.memory_stats()
    for key in ("allocated_bytes.all.current", "allocated_bytes.all.peak",
                "allocated_bytes.all.allocated", "allocated_bytes.all.freed",
                "reserved_bytes.all.current", "reserved_bytes.all.peak",
                "active_bytes.all.current", "allocation.all.current",
                "segment.all.current", "num_alloc_retries", "num_ooms"):
        assert key in stats, key
        assert isinstance(stats[key], int) and stats[key] >= 0, key
    assert stats["allocated_bytes.all.current"] == torch.neuron.memory_allocated()
    assert stats["reserved_bytes.all.current"] == torch.neuron.memory_reserved()
    assert stats["allocated_bytes.all.peak"] == torch.neuron.max_memory_allocated()
    assert stats["allocation.all.current"] >= 1
    count = stats["allocation.all.current"]
    allocated_total = stats["allocated_bytes.all.allocated"]
    y = torch.empty(MiB, dtype=torch.uint8, device="neuron")
    after = torch.neuron.memory_stats()
    assert after["allocation.all.current"] == count + 1
    assert after["allocated_bytes.all.allocated"] >= allocated_total + MiB
    del x, y


def test_mem_get_info_is_capacity_minus_reserved():
    free, total = torch.neuron.mem_get_info()
    assert total == DEFAULT_HBM_BYTES
    assert free == total - torch.neuron.memory_reserved()
    assert torch.neuron.mem_get_info(1)[1] == DEFAULT_HBM_BYTES


def test_out_of_memory_raises_and_the_device_keeps_working():
    stats = torch.neuron.memory_stats()
    allocated = torch.neuron.memory_allocated()
    with pytest.raises(torch.OutOfMemoryError, match="(?i)out of memory"):
        torch.empty(20 * 2**30, dtype=torch.uint8, device="neuron")
    assert torch.neuron.memory_stats()["num_ooms"] == stats["num_ooms"] + 1
    assert torch.neuron.memory_allocated() == allocated
    x = torch.ones(1000, device="neuron")
    assert x.sum().item() == 1000


def test_hbm_size_from_environment():
    out = check_python("""
        import torch
        free, total = torch.neuron.mem_get_info()
        print(total, torch.neuron.get_device_properties(0).total_memory)
        x = torch.empty(100 * 2**20, dtype=torch.uint8, device="neuron")
        try:
            torch.empty(100 * 2**20, dtype=torch.uint8, device="neuron")
            print("no-oom")
        except torch.OutOfMemoryError:
            print("oom")
        del x
        y = torch.empty(100 * 2**20, dtype=torch.uint8, device="neuron")
        print("reused")
    """, env={"TORCHNEURON_HBM_SIZE": "128M"})
    assert out.split() == [str(128 * 2**20)] * 2 + ["oom", "reused"]
