"""torch.save / torch.load of neuron tensors and modules, with every kind of
map_location."""
import io

import pytest
import torch


def round_trip(obj, **load_kwargs):
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    buffer.seek(0)
    return torch.load(buffer, **load_kwargs)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16,
                                   torch.bfloat16, torch.int64, torch.uint8, torch.bool])
def test_tensor_comes_back_on_its_device(dtype):
    cpu = (torch.arange(12) % 7).to(dtype).reshape(3, 4)
    loaded = round_trip(cpu.to("neuron:1"))
    assert loaded.device == torch.device("neuron:1") and loaded.dtype == dtype
    assert torch.equal(loaded.cpu(), cpu)


@pytest.mark.parametrize("location, expected", [
    ("cpu", torch.device("cpu")),
    ("neuron", torch.device("neuron:0")),
    ("neuron:1", torch.device("neuron:1")),
    (torch.device("neuron:1"), torch.device("neuron:1")),
    ({"neuron:0": "neuron:1"}, torch.device("neuron:1")),
])
def test_map_location(location, expected):
    cpu = torch.randn(5, 3)
    loaded = round_trip(cpu.to("neuron"), map_location=location)
    assert loaded.device == expected
    assert torch.equal(loaded.cpu(), cpu)


def test_cpu_checkpoint_loads_onto_neuron():
    cpu = torch.randn(4, 4)
    loaded = round_trip(cpu, map_location="neuron:1")
    assert loaded.device == torch.device("neuron:1")
    assert torch.equal(loaded.cpu(), cpu)


def test_views_keep_sharing_storage_after_load():
    base = torch.arange(12.0, device="neuron")
    view = base.view(3, 4)[:, 1]
    loaded_base, loaded_view = round_trip((base, view))
    assert loaded_view.shape == (3,) and loaded_view.stride() == (4,)
    loaded_view.fill_(-1)
    expected = torch.arange(12.0)
    expected.view(3, 4)[:, 1] = -1
    assert torch.equal(loaded_base.cpu(), expected)


def test_module_state_dict_both_ways(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    model_cpu = torch.nn.Sequential(torch.nn.Linear(6, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    model.neuron()
    path = tmp_path / "model.pt"
    torch.save(model.state_dict(), path)

    state_cpu = torch.load(path, map_location="cpu")
    assert all(t.device.type == "cpu" for t in state_cpu.values())
    model_cpu.load_state_dict(state_cpu)
    x = torch.randn(3, 6)
    torch.testing.assert_close(model(x.neuron()).cpu(), model_cpu(x))

    # And back: a cpu checkpoint into a neuron module.
    torch.save(model_cpu.state_dict(), path)
    fresh = torch.nn.Sequential(torch.nn.Linear(6, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2)).neuron()
    fresh.load_state_dict(torch.load(path))
    assert all(p.device.type == "neuron" for p in fresh.parameters())
    torch.testing.assert_close(fresh(x.neuron()).cpu(), model_cpu(x))

    torch.save(model.state_dict(), path)
    state_neuron = torch.load(path)  # default: back where it was saved
    assert all(t.device == torch.device("neuron:0") for t in state_neuron.values())
    state_one = torch.load(path, map_location="neuron:1", weights_only=True)
    assert all(t.device == torch.device("neuron:1") for t in state_one.values())
    for key, value in model.state_dict().items():
        assert torch.equal(state_one[key].cpu(), value.cpu())
