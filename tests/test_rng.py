"""Random numbers on neuron: seeding, state, generators — judged by
reproducibility (same seed -> same numbers, other seed -> other numbers),
whether or not the random kernels are native yet."""
import pytest
import torch

from conftest import check_python, DEFAULT_DEVICE_COUNT

DRAWS = {
    "rand": lambda g=None, d="neuron": torch.rand(1000, device=d, generator=g),
    "randn": lambda g=None, d="neuron": torch.randn(1000, device=d, generator=g),
    "randint": lambda g=None, d="neuron": torch.randint(0, 1 << 30, (1000,), device=d, generator=g),
    "normal_": lambda g=None, d="neuron": torch.empty(1000, device=d).normal_(2, 3, generator=g),
    "bernoulli_": lambda g=None, d="neuron": torch.empty(1000, device=d).bernoulli_(0.5, generator=g),
    "randperm": lambda g=None, d="neuron": torch.randperm(1000, device=d, generator=g),
}


@pytest.mark.parametrize("draw", DRAWS.values(), ids=DRAWS.keys())
def test_manual_seed_reproduces(draw):
    torch.neuron.manual_seed(1234)
    a = draw()
    b = draw()
    torch.neuron.manual_seed(1234)
    c = draw()
    torch.neuron.manual_seed(4321)
    d = draw()
    assert a.device == torch.device("neuron:0")
    assert torch.equal(a.cpu(), c.cpu())
    assert not torch.equal(a.cpu(), b.cpu())  # the sequence advances
    assert not torch.equal(a.cpu(), d.cpu())


def test_uniform_values_are_plausible():
    torch.neuron.manual_seed(0)
    x = torch.rand(100_000, device="neuron").cpu()
    assert x.min().item() >= 0 and x.max().item() < 1
    assert abs(x.mean().item() - 0.5) < 0.01
    y = torch.randn(100_000, device="neuron").cpu()
    assert abs(y.mean().item()) < 0.02 and abs(y.std().item() - 1) < 0.02
    p = torch.randperm(50, device="neuron").cpu()
    assert torch.equal(p.sort().values, torch.arange(50))


def test_torch_manual_seed_seeds_neuron():
    torch.manual_seed(77)
    a = torch.rand(100, device="neuron").cpu()
    torch.manual_seed(77)
    b = torch.rand(100, device="neuron").cpu()
    assert torch.equal(a, b)


def test_initial_seed_and_seed():
    torch.neuron.manual_seed(42)
    assert torch.neuron.initial_seed() == 42
    torch.neuron.seed()
    first = torch.neuron.initial_seed()
    torch.neuron.seed()
    assert torch.neuron.initial_seed() != first  # a fresh non-deterministic seed


def test_rng_state_round_trip():
    torch.neuron.manual_seed(5)
    state = torch.neuron.get_rng_state()
    assert state.dtype == torch.uint8 and state.device.type == "cpu" and state.dim() == 1
    a = torch.rand(500, device="neuron").cpu()
    torch.neuron.set_rng_state(state)
    b = torch.rand(500, device="neuron").cpu()
    assert torch.equal(a, b)
    assert not torch.equal(torch.neuron.get_rng_state(), state)  # state advanced


def test_rng_state_all_covers_every_device():
    torch.neuron.manual_seed_all(9)
    states = torch.neuron.get_rng_state_all()
    assert len(states) == DEFAULT_DEVICE_COUNT
    a = torch.rand(100, device="neuron:1").cpu()
    torch.neuron.set_rng_state_all(states)
    b = torch.rand(100, device="neuron:1").cpu()
    assert torch.equal(a, b)
    assert torch.equal(torch.neuron.get_rng_state(1), torch.neuron.get_rng_state("neuron:1"))


def test_manual_seed_touches_only_the_current_device():
    torch.neuron.manual_seed_all(7)
    first = torch.rand(100, device="neuron:1").cpu()
    torch.neuron.manual_seed_all(7)
    assert torch.equal(torch.rand(100, device="neuron:1").cpu(), first)
    torch.neuron.manual_seed_all(7)
    torch.neuron.manual_seed(7)  # device 0 only: device 1 keeps its place
    torch.rand(100, device="neuron:1")
    torch.neuron.manual_seed(7)
    assert not torch.equal(torch.rand(100, device="neuron:1").cpu(), first)


def test_explicit_generator():
    g = torch.Generator(device="neuron")
    assert g.device == torch.device("neuron:0")
    assert torch.Generator(device="neuron:1").device == torch.device("neuron:1")
    g.manual_seed(3)
    assert g.initial_seed() == 3
    state = g.get_state()
    assert state.dtype == torch.uint8 and state.device.type == "cpu"
    draws = {name: draw(g).cpu() for name, draw in DRAWS.items()}
    g.set_state(state)
    for name, draw in DRAWS.items():
        assert torch.equal(draw(g).cpu(), draws[name]), name
    # A generator is independent of the default one.
    g.manual_seed(3)
    torch.neuron.manual_seed(999)
    assert torch.equal(torch.rand(1000, device="neuron", generator=g).cpu(), draws["rand"])


def test_generator_must_match_the_device():
    g = torch.Generator(device="cpu")
    with pytest.raises(RuntimeError):
        torch.rand(10, device="neuron", generator=g).cpu()


def test_fork_rng_restores_neuron_state():
    torch.neuron.manual_seed(11)
    with torch.random.fork_rng(device_type="neuron"):
        torch.rand(100, device="neuron")
    after = torch.rand(100, device="neuron").cpu()
    torch.neuron.manual_seed(11)
    assert torch.equal(torch.rand(100, device="neuron").cpu(), after)


def test_numbers_do_not_depend_on_thread_count():
    code = """
        import hashlib, torch
        torch.neuron.manual_seed(2024)
        x = torch.rand(1 << 16, device="neuron").cpu()
        y = torch.randn(1 << 16, device="neuron").cpu()
        print(hashlib.sha256(x.numpy().tobytes() + y.numpy().tobytes()).hexdigest())
    """
    one = check_python(code, env={"TORCHNEURON_NUM_THREADS": "1"})
    two = check_python(code, env={"TORCHNEURON_NUM_THREADS": "2"})
    assert one == two


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_derived_distributions_native_seeded_and_plausible(native, dtype):
    """cauchy_, log_normal_ and geometric_ (ops_random.cpp): native,
    reproducible for a seed, and distributed as their parameters say."""
    n = 200_000
    def draw(seed, method, *args):
        torch.manual_seed(seed)
        return getattr(torch.empty(n, device="neuron", dtype=dtype), method)(*args)
    for method, args in [("cauchy_", (1.0, 2.0)), ("log_normal_", (0.5, 0.25)), ("geometric_", (0.25,))]:
        assert torch.equal(draw(7, method, *args), draw(7, method, *args))
        assert not torch.equal(draw(7, method, *args), draw(8, method, *args))
    c = draw(1, "cauchy_", 1.0, 2.0).cpu().double()
    assert abs(c.median().item() - 1.0) < 0.05                     # median = location
    assert abs((c - 1).abs().median().item() - 2.0) < 0.1          # median |x - m| = scale
    log = draw(2, "log_normal_", 0.5, 0.25).cpu().double().log()
    assert abs(log.mean().item() - 0.5) < 0.02 and abs(log.std().item() - 0.25) < 0.02
    g = draw(3, "geometric_", 0.25).cpu().double()
    assert g.min().item() == 1 and torch.equal(g, g.round())
    assert abs(g.mean().item() - 4.0) < 0.1                        # mean = 1 / p


def test_derived_distributions_check_like_cpu():
    for method, args in [("cauchy_", (0.0, -1.0)), ("log_normal_", (0.0, 0.0)), ("geometric_", (1.5,))]:
        with pytest.raises(RuntimeError) as cpu_err:
            getattr(torch.empty(3), method)(*args)
        with pytest.raises(RuntimeError) as dev_err:
            getattr(torch.empty(3, device="neuron"), method)(*args)
        assert str(dev_err.value).split("\n")[0] == str(cpu_err.value).split("\n")[0]
