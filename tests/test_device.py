"""torch.neuron as a device module: registration, enumeration, the current
device, properties — the torch.cuda API with "cuda" -> "neuron"."""
import pytest
import torch

from conftest import DEFAULT_DEVICE_COUNT, DEFAULT_HBM_BYTES, check_python


def test_import_torch_alone_autoloads_neuron():
    out = check_python("""
        import sys, torch
        x = torch.ones(3, device="neuron")
        print("torch_neuronx" in sys.modules, torch.neuron.is_available(),
              x.device, x.cpu().tolist())
    """)
    assert out.split() == ["True", "True", "neuron:0", "[1.0,", "1.0,", "1.0]"]


def test_autoload_can_be_disabled_and_import_still_works():
    out = check_python("""
        import sys, torch
        print("loaded" if "torch_neuronx" in sys.modules else "not-loaded")
        print(hasattr(torch, "neuron"))
        import torch_neuronx
        print(torch.zeros(2, device="neuron").device)
    """, env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    assert out.split() == ["not-loaded", "False", "neuron:0"]


def test_importing_torch_neuronx_before_torch_works():
    # torch's autoload then re-enters the half-imported package.
    out = check_python("""
        import torch_neuronx
        import torch
        print(torch.ones(2, device="neuron").cpu().tolist())
    """)
    assert out.split() == ["[1.0,", "1.0]"]


def test_device_module_is_registered():
    assert torch.get_device_module("neuron") is torch.neuron
    assert torch._C._get_privateuse1_backend_name() == "neuron"
    assert torch.neuron.is_available() is True
    assert torch.device("neuron").type == "neuron"
    assert torch.device("neuron", 1) == torch.device("neuron:1")


def test_default_device_count():
    assert torch.neuron.device_count() == DEFAULT_DEVICE_COUNT


def test_device_count_from_environment():
    out = check_python("""
        import torch
        print(torch.neuron.device_count(), torch.accelerator.device_count())
        print(torch.empty(1, device="neuron:4").device)
    """, env={"TORCHNEURON_DEVICE_COUNT": "5"})
    assert out.split() == ["5", "5", "neuron:4"]


def test_kernel_isa_names_the_level_and_follows_the_cap():
    import torch_neuronx
    order = ["portable", "avx2", "avx512"]
    assert torch_neuronx.kernel_isa() in order
    isa = {cap: check_python("import torch_neuronx; print(torch_neuronx.kernel_isa())",
                             env={"TORCHNEURON_ISA": cap}).strip() for cap in order}
    best = isa["avx512"]  # the highest cap: what this CPU has
    for cap in order:  # the cap or the CPU's best, whichever is lower
        assert isa[cap] == order[min(order.index(cap), order.index(best))], isa


def test_set_device_moves_the_default_index():
    assert torch.neuron.current_device() == 0
    torch.neuron.set_device(1)
    assert torch.neuron.current_device() == 1
    assert torch.empty(2, device="neuron").device == torch.device("neuron:1")
    assert torch.zeros(2, device="neuron").device.index == 1
    torch.neuron.set_device(torch.device("neuron:0"))
    assert torch.neuron.current_device() == 0


@pytest.mark.parametrize("target", [1, "neuron:1", torch.device("neuron", 1)])
def test_device_context_switches_and_restores(target):
    with torch.neuron.device(target):
        assert torch.neuron.current_device() == 1
        assert torch.ones(1, device="neuron").device.index == 1
    assert torch.neuron.current_device() == 0


def test_device_context_nests():
    with torch.neuron.device(1):
        with torch.neuron.device(0):
            assert torch.neuron.current_device() == 0
        assert torch.neuron.current_device() == 1
    assert torch.neuron.current_device() == 0


@pytest.mark.parametrize("device", [None, 0, 1, "neuron:1", torch.device("neuron:0")])
def test_synchronize_accepts_every_device_spelling(device):
    x = torch.ones(1000, device="neuron" if device is None else device)
    y = x + x
    torch.neuron.synchronize(device)
    assert y.cpu().sum().item() == 2000


def test_tensor_neuron_method_and_is_neuron():
    cpu = torch.arange(6.0)
    x = cpu.neuron()
    assert x.is_neuron and not cpu.is_neuron
    assert x.device == torch.device("neuron:0")
    assert cpu.neuron(1).device == torch.device("neuron:1")
    assert cpu.neuron("neuron:1").device == torch.device("neuron:1")
    assert x.neuron() is x  # already there: no copy, as Tensor.cuda()
    assert torch.equal(x.cpu(), cpu)


def test_module_neuron_moves_parameters_and_buffers():
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    reference = [t.clone() for t in model.state_dict().values()]
    assert model.neuron() is model
    for tensor, expected in zip(model.state_dict().values(), reference):
        assert tensor.device == torch.device("neuron:0")
        assert torch.equal(tensor.cpu(), expected)
    model.neuron(1)
    assert all(p.device == torch.device("neuron:1") for p in model.parameters())


def test_device_name_and_properties():
    name = torch.neuron.get_device_name()
    assert isinstance(name, str) and name
    assert torch.neuron.get_device_name(1) == name
    props = torch.neuron.get_device_properties(0)
    assert props.name == name
    assert props.total_memory == DEFAULT_HBM_BYTES
    assert isinstance(props.major, int) and isinstance(props.minor, int)
    assert torch.neuron.get_device_properties("neuron:1").total_memory == DEFAULT_HBM_BYTES


def test_amp_dtypes_and_bf16():
    assert torch.neuron.is_bf16_supported() is True
    supported = torch.neuron.get_amp_supported_dtype()
    assert torch.bfloat16 in supported and torch.float16 in supported


def test_autocast_on_neuron_lowers_matmul():
    a = torch.randn(4, 8, device="neuron")
    b = torch.randn(8, 2, device="neuron")
    with torch.autocast("neuron", dtype=torch.bfloat16):
        y = a @ b
        z = a + 1  # add is not on autocast's lists: keeps its dtype
    assert y.dtype == torch.bfloat16 and y.device.type == "neuron"
    assert z.dtype == torch.float32
    expected = a.cpu().bfloat16() @ b.cpu().bfloat16()
    torch.testing.assert_close(y.cpu(), expected)


@pytest.mark.parametrize("dtype", [torch.bool, torch.uint8, torch.int8, torch.int16,
                                   torch.int32, torch.int64, torch.float16,
                                   torch.bfloat16, torch.float32, torch.float64])
def test_every_dtype_round_trips(dtype):
    cpu = (torch.arange(-3, 9) % 5).to(dtype)
    x = cpu.to("neuron")
    assert x.dtype == dtype and x.device.type == "neuron"
    assert torch.equal(x.cpu(), cpu)
