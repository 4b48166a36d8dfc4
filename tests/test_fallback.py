"""The CPU fallback: every ATen op without a native kernel still gives CPU's
results on neuron tensors, keeps in-place/out=/aliasing semantics, warns
once per op and is counted; in error mode it raises instead."""
import warnings

import pytest
import torch
import torch_neuronx

from conftest import CPU_ONLY_OPS, check_python, run_python


@pytest.fixture(autouse=True)
def _quiet_fallback_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def same(actual, expected):
    if isinstance(expected, torch.Tensor):
        assert actual.device.type == "neuron", actual.device
        torch.testing.assert_close(actual.cpu(), expected, equal_nan=True)
    else:
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            same(a, e)


def inputs():
    g = torch.Generator().manual_seed(0)
    return {
        "x": torch.randn(6, 5, generator=g),
        "y": torch.randn(6, 5, generator=g),
        "m": torch.randn(5, 3, generator=g),
        "p": torch.rand(6, 5, generator=g) * 0.9 + 0.05,
        "i": torch.randint(0, 6, (4, 5), generator=g),
        "b": torch.rand(6, 5, generator=g) > 0.5,
        "img": torch.randn(2, 3, 8, 8, generator=g),
        "w": torch.randn(4, 3, 3, 3, generator=g),
    }


OPS = {
    "sin": lambda t: t["x"].sin(),
    "exp_log": lambda t: t["p"].log() + t["x"].exp(),
    "pow": lambda t: torch.pow(t["p"], t["y"]),
    "sum_dim": lambda t: t["x"].sum(dim=1),
    "sum_all": lambda t: t["x"].sum(),
    "mean_keepdim": lambda t: t["x"].mean(dim=0, keepdim=True),
    "max_dim": lambda t: t["x"].max(dim=1),
    "argmax": lambda t: t["x"].argmax(),
    "matmul": lambda t: t["x"] @ t["m"],
    "softmax": lambda t: torch.softmax(t["x"], dim=-1),
    "cumsum": lambda t: t["x"].cumsum(0),
    "sort": lambda t: t["x"].sort(dim=1),
    "topk": lambda t: t["x"].topk(2, dim=0),
    "where": lambda t: torch.where(t["b"], t["x"], t["y"]),
    "masked_fill": lambda t: t["x"].masked_fill(t["b"], -1.0),
    "gather": lambda t: t["x"].gather(0, t["i"]),
    "index_select": lambda t: t["x"].index_select(0, t["i"][0]),
    "advanced_index": lambda t: t["x"][t["i"][1], 1:3],
    "boolean_index": lambda t: t["x"][t["b"]],
    "nonzero": lambda t: t["b"].nonzero(),
    "cat_stack": lambda t: (torch.cat([t["x"], t["y"]]), torch.stack([t["x"], t["y"]], 1)),
    "clamp": lambda t: t["x"].clamp(-0.5, 0.5),
    "compare": lambda t: (t["x"] > t["y"], t["x"].eq(t["y"]), t["x"].isfinite()),
    "unique": lambda t: torch.unique(t["i"], return_counts=True),
    "conv2d": lambda t: torch.nn.functional.conv2d(t["img"], t["w"], padding=1),
    "max_pool": lambda t: torch.nn.functional.max_pool2d(t["img"], 2),
    "layer_norm": lambda t: torch.nn.functional.layer_norm(t["x"], (5,)),
    "cross_entropy": lambda t: torch.nn.functional.cross_entropy(t["x"], t["i"].flatten()[:6] % 5),
    "scatter_add": lambda t: torch.zeros(6, 5, device=t["x"].device).scatter_add(0, t["i"], t["x"][:4]),
    "linalg_solve": lambda t: torch.linalg.solve(t["x"][:5] @ t["x"][:5].T + 5 * torch.eye(5, device=t["x"].device), t["y"][:5]),
    "flip_roll": lambda t: (t["x"].flip(0), t["x"].roll(2, 1)),
    "any_all": lambda t: (t["b"].any(), t["b"].all(dim=0)),
    "to_strided_op": lambda t: t["x"].t().sin(),
}


@pytest.mark.parametrize("op", OPS.values(), ids=OPS.keys())
def test_fallback_results_match_cpu(op):
    cpu = inputs()
    dev = {k: v.to("neuron") for k, v in cpu.items()}
    same(op(dev), op(cpu))


def test_fallback_keeps_the_device_index():
    x = torch.randn(4, 4)
    y = x.to("neuron:1").sin().sum(0)
    assert y.device == torch.device("neuron:1")
    torch.testing.assert_close(y.cpu(), x.sin().sum(0))


def test_inplace_fallback_returns_self_and_updates_it():
    cpu = torch.rand(5, 4) * 1.8 - 0.9
    x = cpu.to("neuron")
    result = x.erfinv_()
    assert result is x
    same(x, cpu.erfinv())


@pytest.mark.parametrize("index", [
    (slice(1, 3),),  # contiguous rows
    (slice(None), slice(None, None, 2)),  # strided columns
    (slice(None), 1),  # a column
])
def test_inplace_fallback_on_a_view_updates_the_base(index):
    cpu = torch.rand(5, 4) * 1.8 - 0.9
    base = cpu.to("neuron")
    view = base[index]
    view.erfinv_()
    cpu[index].erfinv_()
    same(base, cpu)
    same(view, cpu[index])


def test_inplace_fallback_on_a_transposed_view():
    cpu = torch.rand(4, 6) + 0.5
    base = cpu.to("neuron")
    base.t().lgamma_()
    cpu.t().lgamma_()
    same(base, cpu)


def test_out_variant_fallback():
    cpu = torch.rand(3, 4) * 1.8 - 0.9
    x = cpu.to("neuron")
    out = torch.empty(3, 4, device="neuron")
    assert torch.erfinv(x, out=out) is out
    same(out, cpu.erfinv())
    empty = torch.empty(0, device="neuron")
    torch.erfinv(x, out=empty)  # resized, as on CPU
    assert empty.shape == (3, 4)
    same(empty, cpu.erfinv())
    big = torch.zeros(3, 8, device="neuron")
    torch.erfinv(x, out=big[:, ::2])  # non-contiguous out: written in place
    ref = torch.zeros(3, 8)
    torch.erfinv(cpu, out=ref[:, ::2])
    same(big, ref)


def test_multi_output_out_variant_fallback():
    cpu = torch.randn(4, 7)
    values = torch.empty(0, device="neuron")
    indices = torch.empty(0, dtype=torch.long, device="neuron")
    result = torch.sort(cpu.to("neuron"), dim=1, out=(values, indices))
    assert result[0] is values and result[1] is indices
    expected = torch.sort(cpu, dim=1)
    same(values, expected.values)
    same(indices, expected.indices)


def test_fallback_mixing_a_cpu_scalar_tensor():
    x = torch.randn(5)
    same(torch.atan2(x.to("neuron"), torch.tensor(0.5)), torch.atan2(x, torch.tensor(0.5)))


def test_warns_once_per_op_and_counts_every_call():
    # Python warnings need an op called through torch's own bindings (a
    # torch.ops call does not turn C++ warnings into Python ones), so this
    # uses LAPACK ops, which have no neuron kernel yet.
    torch_neuronx._fallback.reset_fallback_stats()
    assert sum(torch_neuronx.fallback_stats().values()) == 0
    m = torch.rand(2, 3, 3, device="neuron")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            torch.linalg.eigvals(m)
        torch.ops.cpu_only.square_it(m)
        torch.ops.cpu_only.square_it(m)
    messages = [str(w.message) for w in caught]
    assert sum("eigvals" in m for m in messages) == 1, messages
    stats = torch_neuronx.fallback_stats()
    assert isinstance(stats, dict)
    assert sum(n for name, n in stats.items() if "eigvals" in name) == 3, stats
    assert sum(n for name, n in stats.items() if "square_it" in name) == 2, stats
    torch_neuronx._fallback.reset_fallback_stats()
    assert sum(torch_neuronx.fallback_stats().values()) == 0


def test_error_mode_raises_naming_the_op_and_is_scoped():
    x = torch.rand(8, device="neuron")
    with torch_neuronx._fallback.fallback_mode("error"):
        with pytest.raises(RuntimeError, match="negate_it"):
            torch.ops.cpu_only.negate_it(x)
        y = x + 1  # native ops still run
    same(torch.ops.cpu_only.negate_it(x), -x.cpu())  # back to fallback
    same(y, x.cpu() + 1)


def test_error_mode_from_environment():
    proc = run_python(CPU_ONLY_OPS + """
x = torch.linspace(0.1, 0.9, 8, device="neuron")
print((x + x).cpu().shape)
torch.ops.cpu_only.square_it(x)
""", env={"TORCHNEURON_FALLBACK": "error"})
    assert proc.returncode == 1, proc.stderr
    assert "torch.Size([8])" in proc.stdout
    assert "RuntimeError" in proc.stderr and "square_it" in proc.stderr


def test_warn_mode_from_environment_prints_a_warning():
    out = check_python(CPU_ONLY_OPS + """
import warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    torch.linalg.eigvals(torch.rand(3, 3, device="neuron")).cpu()
print(sum("eigvals" in str(w.message) for w in caught))
""", env={"TORCHNEURON_FALLBACK": "warn"})
    assert out.split() == ["1"]


def test_printing_through_the_fallback_matches_cpu():
    # Printing's helpers (abs, ne, masked_select, min/max, ceil) are not
    # native yet: the eager-kernel families make printing fully native.
    for cpu in (torch.randn(3, 4) * 1000, torch.tensor([1, -2, 3]), torch.tensor(2.5),
                torch.tensor([float("nan"), float("inf"), 1e-8])):
        # whitespace-normalised: the longer device suffix may wrap the last
        # line where the CPU's does not (random values decide the width)
        got = " ".join(repr(cpu.to("neuron")).split())
        assert got == " ".join((repr(cpu)[:-1] + ", device='neuron:0')").split())


def test_conjugate_and_negative_views_copy_without_recursion():
    # The math-bit fallbacks materialise a conj/neg view by copying it; the
    # copy must apply the bit itself (it once recursed until the stack blew).
    x = torch.randn(6, dtype=torch.complex64)
    d = x.to("neuron")
    assert torch.equal(d.conj().cpu(), x.conj())
    assert torch.equal(d._neg_view().cpu(), -x)
    out = torch.empty_like(d)
    out.copy_(d.conj())
    assert torch.equal(out.cpu(), x.conj().resolve_conj())
    a = torch.tensor(0.5, device="neuron", requires_grad=True)
    b = torch.tensor(0.3, device="neuron", requires_grad=True)
    r = torch.polar(a, b)
    ga, gb = torch.autograd.grad(r, (a, b), torch.ones_like(r))
    ca = torch.tensor(0.5, requires_grad=True)
    cb = torch.tensor(0.3, requires_grad=True)
    ea, eb = torch.autograd.grad(torch.polar(ca, cb), (ca, cb), torch.ones(1, dtype=torch.complex64)[0])
    torch.testing.assert_close(ga.cpu(), ea)
    torch.testing.assert_close(gb.cpu(), eb)
