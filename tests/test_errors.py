"""Errors the way torch.cuda reports them, and no input that crashes the
process: bad devices, mixed devices, bad sizes, malformed configuration."""
import pytest
import torch

from conftest import DEFAULT_DEVICE_COUNT, check_python, run_python


@pytest.mark.parametrize("device", ["neuron:99", f"neuron:{DEFAULT_DEVICE_COUNT}"])
def test_bad_device_index_raises(device):
    with pytest.raises(RuntimeError):
        torch.empty(1, device=device)
    with pytest.raises(RuntimeError):
        torch.ones(3).to(device)


@pytest.mark.parametrize("index", [DEFAULT_DEVICE_COUNT, 99])
def test_set_device_out_of_range_raises(index):
    with pytest.raises(RuntimeError):
        torch.neuron.set_device(index)
    assert torch.neuron.current_device() == 0
    with pytest.raises(RuntimeError):
        with torch.neuron.device(index):
            pass
    assert torch.neuron.current_device() == 0


@pytest.mark.parametrize("other", ["cpu", "neuron:1"])
@pytest.mark.parametrize("op", [torch.add, torch.mul, torch.atan2, torch.maximum])
def test_mixing_devices_raises(op, other):
    a = torch.ones(4, device="neuron:0")
    b = torch.ones(4, device=other)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        op(a, b)


def test_mixing_devices_in_place_and_out():
    a = torch.ones(4, device="neuron:0")
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        a.add_(torch.ones(4, device="neuron:1"))
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.add(a, a, out=torch.empty(4, device="neuron:1"))


@pytest.mark.parametrize("size", [(-1,), (2**62,), (2**40, 2**40), (2**31, 2**31, 4)])
def test_bad_sizes_raise(size):
    with pytest.raises(RuntimeError):
        torch.empty(size, device="neuron")
    assert torch.ones(2, device="neuron").cpu().tolist() == [1.0, 1.0]


def test_item_of_many_elements_raises_like_cpu():
    with pytest.raises(RuntimeError, match="element"):
        torch.ones(3, device="neuron").item()


def test_out_of_range_index_raises_and_the_process_continues():
    x = torch.arange(5.0, device="neuron")
    bad = torch.tensor([1, 7], device="neuron")
    with pytest.raises((IndexError, RuntimeError)):
        x.index_select(0, bad).cpu()
        torch.neuron.synchronize()
    torch.neuron.synchronize()  # the error was reported once, not kept
    assert (x + 1).cpu().tolist() == [1.0, 2.0, 3.0, 4.0, 5.0]


def test_out_of_memory_is_torch_out_of_memory_error():
    with pytest.raises(torch.OutOfMemoryError) as info:
        torch.empty(20 * 2**30, dtype=torch.uint8, device="neuron")
    assert isinstance(info.value, RuntimeError)
    assert torch.zeros(10, device="neuron").cpu().sum().item() == 0


@pytest.mark.parametrize("name, value", [
    ("TORCHNEURON_HBM_SIZE", "12X"),
    ("TORCHNEURON_HBM_SIZE", "1K"),  # below the 64M minimum
    ("TORCHNEURON_DEVICE_COUNT", "0"),
    ("TORCHNEURON_DEVICE_COUNT", "two"),
    ("TORCHNEURON_DEVICE_COUNT", "65"),
    ("TORCHNEURON_NUM_THREADS", "-3"),
])
def test_malformed_environment_is_a_clear_error(name, value):
    proc = run_python("""
        import torch, torch_neuronx
        torch.zeros(1, device="neuron").cpu()
        print("ran")
    """, env={name: value})
    assert proc.returncode == 1, (proc.returncode, proc.stderr)  # an exception, not a signal
    assert name in proc.stderr, proc.stderr
    assert "ran" not in proc.stdout


def test_launch_blocking_mode_runs_correctly():
    out = check_python("""
        import torch
        x = torch.arange(10.0, device="neuron")
        y = (x * 2 + 1) / 4
        s = torch.neuron.Stream()
        with torch.neuron.stream(s):
            z = y - 1
        print(z.cpu().tolist() == ((torch.arange(10.0) * 2 + 1) / 4 - 1).tolist())
    """, env={"TORCHNEURON_LAUNCH_BLOCKING": "1"})
    assert out.split() == ["True"]


def test_more_dims_than_the_runtime_descriptor_holds():
    # 17 dims whose strides cannot be coalesced: more than NRT_MAX_DIMS (16).
    # Must compute CPU's answer (or raise a clear error), never crash.
    out = check_python("""
        import torch
        # stride_k = 2**(k+1) - 1: never size * inner stride, so no dims merge.
        sizes, strides = [2] * 17, [2 ** (k + 1) - 1 for k in reversed(range(17))]
        span = sum((n - 1) * s for n, s in zip(sizes, strides)) + 1
        base_cpu = torch.arange(span, dtype=torch.int32)
        base = base_cpu.to("neuron")
        view = base.as_strided(sizes, strides)
        ref = base_cpu.as_strided(sizes, strides)
        print(torch.equal((view + 1).cpu(), ref + 1), torch.equal(view.contiguous().cpu(), ref.contiguous()))
    """)
    assert out.split() == ["True", "True"]
