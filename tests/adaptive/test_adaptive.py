"""Adaptive eager: fused execution is bit for bit unfused execution.

Every test runs the same work with fusion off and on (and in verify mode,
where the runtime itself re-runs each fused group unfused and compares the
bytes) and compares the results' bits, and checks through the counters that
fusion did happen.  tests/adaptive/programs.py draws the random programs.
"""

import os
import subprocess
import sys

import pytest
import torch

import torch_neuronx

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import programs  # noqa: E402

# Launch-blocking mode runs every op alone (the suite must pass under it):
# then nothing fuses, and only the bits are checked.
FUSES = not torch.neuron.is_launch_blocking()


@pytest.fixture(autouse=True)
def restore_mode():
    yield
    torch_neuronx.set_adaptive_eager(True)


def run_modes(fn, modes=(False, True, "verify")):
    """fn() under each mode; returns the results and the groups fused."""
    results, groups = {}, {}
    for mode in modes:
        torch_neuronx.set_adaptive_eager(mode)
        torch_neuronx.reset_adaptive_eager_stats()
        results[mode] = fn()
        torch.neuron.synchronize()
        groups[mode] = torch_neuronx.adaptive_eager_stats()["groups"]
    torch_neuronx.set_adaptive_eager(True)
    return results, groups


def stats_of(fn):
    """The adaptive-eager counters of one more run of fn, fusion on."""
    torch_neuronx.reset_adaptive_eager_stats()
    fn()
    torch.neuron.synchronize()
    return torch_neuronx.adaptive_eager_stats()


def assert_same(results, reference=False):
    ref = results[reference]
    for mode, got in results.items():
        assert len(got) == len(ref)
        for i, (a, b) in enumerate(zip(ref, got)):
            if a is None:
                assert b is None
                continue
            assert programs.same_bits(a, b), f"value {i} differs with adaptive eager = {mode!r}"


def test_defaults_and_switch():
    assert torch_neuronx.is_adaptive_eager_enabled() == FUSES
    torch_neuronx.set_adaptive_eager(False)
    assert not torch_neuronx.is_adaptive_eager_enabled()
    torch_neuronx.set_adaptive_eager("verify")
    assert torch_neuronx.is_adaptive_eager_enabled() == FUSES
    with pytest.raises(ValueError, match="expected True, False or 'verify'"):
        torch_neuronx.set_adaptive_eager("sometimes")
    with pytest.raises(TypeError):
        torch_neuronx.set_adaptive_eager(1.5)


@pytest.mark.parametrize("seed", range(40))
def test_random_programs(seed):
    inputs, steps, side = programs.draw(seed)
    results, _ = run_modes(lambda: programs.run(inputs, steps, side))
    assert_same(results)


def test_random_programs_fuse():
    """Over a batch of programs, most tasks of the long ones run fused."""
    torch_neuronx.reset_adaptive_eager_stats()
    for seed in range(100, 110):
        inputs, steps, side = programs.draw(seed, n_ops=12)
        programs.run(inputs, steps, side)
    stats = torch_neuronx.adaptive_eager_stats()
    if FUSES:
        assert stats["groups"] >= 5 and stats["tasks_fused"] >= 30, stats
        # groups run in rows (each op's row loop); the per-tile path runs in
        # the C tests (a kernel with no row loop) and for narrow rows
        assert stats["groups_in_rows"] >= 1, stats


def chain_x_a_b(dtype, n=1 << 16):
    g = torch.Generator().manual_seed(1)
    x, a, b = (torch.randn(n, generator=g).to(dtype).to("neuron") for _ in range(3))

    def fn():
        torch.neuron._sleep(20_000_000)
        out = []
        for _ in range(4):
            out.append(x * a + b)
            out.append(((x * 1.5 + 0.25).sigmoid() * x - 0.5).relu())
        return [t.cpu() for t in out]
    return fn


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32, torch.float64])
def test_rounding_chain(dtype):
    """x * a + b rounds after the product in 16-bit dtypes, as unfused ops do."""
    results, groups = run_modes(chain_x_a_b(dtype))
    assert_same(results)
    if FUSES:
        assert groups[True] >= 1 and groups["verify"] >= 1


def test_row_mode_keeps_per_row_operands():
    """In row mode each op's row loop is captured once per group, on the
    first tile.  Here a tile is one row of x, where b (one bfloat16 value per
    row) looks like a scalar, which the binary kernel converts once: the
    group must not reuse row 0's value for the other rows (nd_iter's capture
    and the executor both refuse such a substitution; the group then runs
    tile by tile)."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(4, 1 << 15, generator=g).to("neuron")
    b = torch.randn(4, 1, generator=g).to(torch.bfloat16).to("neuron")

    def fn():
        torch.neuron._sleep(20_000_000)
        return [((x * b + 1).sigmoid() * x).cpu(), ((x + 0.5) * 3 - 1).cpu()]
    results, groups = run_modes(fn)
    assert_same(results)
    if FUSES:
        assert groups[True] >= 1


def test_dead_intermediates_are_not_written():
    x = torch.randn(1 << 16, device="neuron")
    torch.neuron.synchronize()
    torch_neuronx.reset_adaptive_eager_stats()
    torch.neuron._sleep(20_000_000)
    y = ((x * 2 + 1).sigmoid() * x - 3).relu()
    torch.neuron.synchronize()
    stats = torch_neuronx.adaptive_eager_stats()
    if FUSES:
        assert stats["tasks_fused"] >= 5 and stats["groups_in_rows"] >= 1
        # the four temporaries die inside the chain
        assert stats["bytes_not_written"] >= 4 * x.nbytes
    torch_neuronx.set_adaptive_eager(False)
    ref = ((x * 2 + 1).sigmoid() * x - 3).relu()
    assert programs.same_bits(y.cpu(), ref.cpu())


@pytest.fixture
def row_mode():
    """Groups run their captured row loops (compiled groups off): the
    tests of row mode's own machinery."""
    torch_neuronx._C._set_fusion_jit_mode(0)
    yield
    torch_neuronx._C._set_fusion_jit_mode(-1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_large_outputs_stream_and_inputs_prefetch(dtype, row_mode):
    """Row mode stages outputs of 4 MiB and more and streams them to memory
    after each row, and prefetches large inputs a row ahead: the bytes are
    those of unfused execution.  Odd sizes and a 3-element offset put the
    streamed rows off 16-byte alignment (the unaligned head and tail);
    kept intermediates, an in-place update of an input (read first: not
    staged) and a fresh output written twice are all in one group."""
    n = (4 << 20) // torch.tensor([], dtype=dtype).element_size() + 5
    g = torch.Generator().manual_seed(7)
    base, gr, m0 = (torch.randn(n + 3, generator=g).to(dtype) for _ in range(3))

    def fn():
        x, grad, m = base.to("neuron")[3:], gr.to("neuron")[3:], m0.to("neuron")[3:]
        torch.neuron._sleep(20_000_000)
        y = x * 1.5 + 0.25              # kept: staged
        z = (y.sigmoid() * x).mul_(2)   # fresh, then written again in place
        m.mul_(0.9).add_(grad, alpha=0.1)
        w = (m - z).relu()
        return [t.cpu() for t in (y, z, m, w)]
    results, groups = run_modes(fn)
    assert_same(results)
    if FUSES:
        stats = stats_of(fn)
        size = torch.tensor([], dtype=dtype).element_size()
        assert stats["groups_in_rows"] >= 1 and stats["bytes_streamed"] >= n * size, stats


def test_many_input_streams_run_in_long_rows():
    """Adam from plain in-place ops over 4 parameters of 1 MiB and more: 16
    large inputs read from memory (p, g, m and v of each), so the group runs
    in rows of 8K elements (fusion.h, FUSE_ROW_MAX_ELEMENTS), the last row
    of each tile short (odd sizes, a 3-element offset).  The bits are those
    of unfused execution and of verify mode."""
    n = (1 << 18) + 5
    g = torch.Generator().manual_seed(11)
    state = [torch.randn(4, n + 3, generator=g) for _ in range(4)]
    state[3] = state[3].abs()

    def fn():
        p, gr, m, v = ([row.to("neuron")[3:] for row in s.unbind()] for s in state)
        torch.neuron._sleep(20_000_000)
        for pi, gi, mi, vi in zip(p, gr, m, v):
            mi.mul_(0.9).add_(gi, alpha=0.1)
            vi.mul_(0.999).addcmul_(gi, gi, value=0.001)
            denom = (vi.sqrt() / 0.0316).add_(1e-8)
            pi.addcdiv_(mi, denom, value=-1e-3)
        return [t.cpu() for t in (*p, *m, *v)]
    results, groups = run_modes(fn)
    assert_same(results)
    if FUSES:
        stats = stats_of(fn)
        assert stats["groups_in_long_rows"] >= 1 and stats["tasks_fused"] >= 28, stats


def test_python_numbers_do_not_cut_groups():
    """Each Python number becomes a one-element device scalar whose fill is a
    constant of the group; the caching allocator gives the next number the
    block the previous one released while a member still reads it (in
    memory).  The constant's bytes are stored after the tiles, so the group
    goes on: GELU from 9 primitives with 5 numbers is one group."""
    x = torch.randn(1 << 16, device="neuron")

    def fn():
        torch.neuron._sleep(20_000_000)
        return [((x * 0.5) * ((((x * x) * x * 0.044715 + x) * 0.7978845608).tanh() + 1)).cpu()]
    results, groups = run_modes(fn)
    assert_same(results)
    if FUSES:
        stats = stats_of(fn)
        assert stats["groups"] == 1 and stats["tasks_fused"] == 9, stats


def overlap_programs():
    """In-place writes through views that overlap other views' bytes: the
    planner must end the group before the later access."""
    base = torch.randn(64, 512, device="neuron")
    flat = torch.randn(1 << 16, device="neuron")

    def fn():
        b, f = base.clone(), flat.clone()
        torch.neuron._sleep(20_000_000)
        b[:, :-1].add_(b[:, 1:] * 2)          # shifted read of what is written
        b.mul_(0.5).add_(1)                   # identical views: fuse in place
        f[1:].copy_(f[:-1].sigmoid())         # the write lands one element over
        g = f.view(256, 256).t() + 1          # transposed read of a written tensor
        f.add_(g.t().reshape(-1))
        h = b * 3
        b[::2].sub_(h[1::2])                  # strided write, other rows read
        return [b.cpu(), f.cpu(), g.cpu(), h.cpu()]
    return fn


def test_overlap_hazards_cut_groups():
    results, groups = run_modes(overlap_programs())
    assert_same(results)
    assert groups[True] >= 1 or not FUSES


def test_two_streams_with_events():
    x = torch.randn(1 << 15, device="neuron")
    side = torch.neuron.Stream()

    def fn():
        torch.neuron._sleep(10_000_000)
        a = (x * 2).exp()
        ev = torch.neuron.Event()
        ev.record()
        with torch.neuron.stream(side):
            torch.neuron._sleep(10_000_000)
            side.wait_event(ev)
            b = (a + 1).tanh() * a
            a.record_stream(side)
        torch.neuron.current_stream().wait_stream(side)
        c = (b - a).relu() + x
        b.record_stream(torch.neuron.current_stream())
        return [a.cpu(), b.cpu(), c.cpu()]
    results, groups = run_modes(fn)
    assert_same(results)


def test_deterministic_algorithms_keep_fusion():
    torch.use_deterministic_algorithms(True)
    try:
        results, groups = run_modes(chain_x_a_b(torch.float32), modes=(False, True))
    finally:
        torch.use_deterministic_algorithms(False)
    assert_same(results)
    assert groups[True] >= 1 or not FUSES


def test_peak_memory_does_not_grow():
    x = torch.randn(1 << 18, device="neuron")
    peaks = {}
    for mode in (False, True):
        torch_neuronx.set_adaptive_eager(mode)
        torch.neuron.synchronize()
        torch.neuron.reset_peak_memory_stats()
        torch.neuron._sleep(10_000_000)
        for _ in range(3):
            y = ((x * 2 + 1).sigmoid() * x - 3).relu()
        torch.neuron.synchronize()
        peaks[mode] = torch.neuron.max_memory_allocated()
        del y
    assert peaks[True] <= peaks[False]


def test_profiler_shows_fused_group():
    x = torch.randn(1 << 16, device="neuron")
    torch.neuron.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.PrivateUse1]) as prof:
        torch.neuron._sleep(20_000_000)
        y = (x * 2 + 1).sigmoid()
        torch.neuron.synchronize()
    names = [e.name for e in prof.events()]
    fused = [n for n in names if "fused[" in n]
    if not FUSES:
        return
    assert fused, names
    assert any("aten::mul" in n and "aten::add" in n and "aten::sigmoid" in n for n in fused)
    # every member's op stays linked to the device: the first to the group,
    # the others to a zero-length "fused member" record
    ops = {e.name: e for e in prof.events() if e.name in ("aten::mul", "aten::add", "aten::sigmoid")}
    assert set(ops) == {"aten::mul", "aten::add", "aten::sigmoid"}, names
    for name, op in ops.items():
        assert any("fused" in k.name for k in op.kernels), (name, [k.name for k in op.kernels])
    assert any(k.name == "fused member: aten::sigmoid" for k in ops["aten::sigmoid"].kernels)
    del y


def test_full_group_ends_at_a_whole_chain():
    """A group that reaches the member limit (64) inside a chain ends
    before that chain, which the next group takes whole: 12 independent
    7-op optimizer-like chains run as 9 + 3 chains, not 64 + 20 tasks."""
    def fresh_state():
        g = torch.Generator().manual_seed(5)
        state = [[torch.randn(1 << 14, generator=g) for _ in range(4)] for _ in range(12)]
        return [[p, grad, m, v.abs()] for p, grad, m, v in state]

    def step(state):
        for p, grad, m, v in state:
            m.mul_(0.9).add_(grad, alpha=0.1)
            v.mul_(0.99).addcmul_(grad, grad, value=0.01)
            p.addcdiv_(m, v.sqrt().add_(1e-8), value=-1e-3)

    def fn():
        state = [[t.to("neuron") for t in row] for row in fresh_state()]
        torch.neuron._sleep(30_000_000)
        step(state)
        return [t.cpu() for row in state for t in row]
    results, _ = run_modes(fn)
    assert_same(results)
    if not FUSES:
        return
    state = [[t.to("neuron") for t in row] for row in fresh_state()]
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.PrivateUse1]) as prof:
        torch.neuron._sleep(30_000_000)
        step(state)
        torch.neuron.synchronize()
    sizes = [e.name.count("|") + 1 for e in prof.events() if e.name.startswith("fused[")]
    assert sizes == [7 * 9, 7 * 3], sizes


THREADS_SCRIPT = r"""
import sys, torch, torch_neuronx
sys.path.insert(0, sys.argv[2])
import programs
out = {}
for seed in (3, 7, 11):
    inputs, steps, side = programs.draw(seed, n_ops=10)
    out[seed] = programs.run(inputs, steps, side)
torch.save(out, sys.argv[1])
print(torch_neuronx.adaptive_eager_stats()["groups"])
"""


def test_thread_count_does_not_change_bits(tmp_path):
    """Fused results with 1, 2 and all cores equal unfused ones."""
    saved = {}
    for threads, mode in (("1", "1"), ("2", "1"), (str(os.cpu_count()), "1"), ("2", "0")):
        path = tmp_path / f"{threads}_{mode}.pt"
        env = dict(os.environ, TORCHNEURON_NUM_THREADS=threads, TORCHNEURON_ADAPTIVE_EAGER=mode)
        r = subprocess.run([sys.executable, "-c", THREADS_SCRIPT, str(path), HERE], env=env,
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr
        if mode == "1" and FUSES:
            assert int(r.stdout.split()[-1]) >= 1
        saved[(threads, mode)] = torch.load(path)
    ref = saved[("2", "0")]
    for key, got in saved.items():
        for seed, values in ref.items():
            for a, b in zip(values, got[seed]):
                assert (a is None) == (b is None)
                if a is not None:
                    assert programs.same_bits(a, b), (key, seed)


def test_launch_blocking_runs_unfused():
    env = dict(os.environ, TORCHNEURON_LAUNCH_BLOCKING="1")
    code = ("import torch, torch_neuronx\n"
            "x = torch.randn(1 << 16, device='neuron')\n"
            "y = ((x * 2 + 1).sigmoid() * x).relu(); y.cpu()\n"
            "print(torch_neuronx.is_adaptive_eager_enabled(), "
            "torch_neuronx.adaptive_eager_stats()['groups'])\n")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "0"]


@pytest.mark.parametrize("name,want", [("TORCHNEURON_ADAPTIVE_EAGER", "0, 1 or verify"),
                                       ("TORCHNEURON_FUSION_COMPILE", "0, 1 or sync")])
def test_bad_environment_value(name, want):
    env = dict(os.environ, **{name: "maybe"})
    r = subprocess.run([sys.executable, "-c", "import torch; torch.ones(2, device='neuron')"],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode != 0
    assert name in r.stderr and want in r.stderr


@pytest.mark.parametrize("numel", [1023, 1024, 65537, (1 << 24) + 3])
@pytest.mark.parametrize("op", ["sum", "mean", "amax", "var"])
def test_reduction_sink(numel, op):
    """A reduction ending a chain reduces each row as the unfused kernel
    does (same blocks, same order), whether it joins the group (rows that
    fit a tile) or not (longer rows, the whole tensor)."""
    rows = max(1, (1 << 16) // numel) if numel < (1 << 20) else 1
    x = torch.randn(rows, numel, generator=torch.Generator().manual_seed(numel)).to("neuron")
    reduce = {"sum": lambda t: t.sum(-1), "mean": lambda t: t.mean(-1, keepdim=True),
              "amax": lambda t: t.amax(-1), "var": lambda t: t.var(-1)}[op]

    def fn():
        torch.neuron._sleep(20_000_000)
        out = [reduce((x * 1.5 - 0.25).sigmoid() * x)]
        out.append(reduce(x * x).sqrt() if op != "amax" else reduce(x.abs()))
        if numel > 4096:
            out.append(reduce(x + 1))
        return [t.cpu() for t in out]
    results, groups = run_modes(fn)
    assert_same(results)
    if FUSES and numel <= 1024:
        assert groups[True] >= 1
        # the members before the sink run in rows (or compiled), the sink
        # reduces each tile after them
        assert stats_of(fn)["groups_in_rows"] >= 1


def test_reduction_of_another_tensor_is_no_sink():
    """A reduction whose input no member wrote stays out of the group (it
    would gain nothing, and hold the group to a kernel call per tile); one
    that reduces the chain's value joins it."""
    g = torch.Generator().manual_seed(3)
    x, z = (torch.randn(64, 1024, generator=g).to("neuron") for _ in range(2))

    def fn(reduced):
        torch.neuron._sleep(20_000_000)
        y = ((x * 2 + 1).sigmoid() * x)
        return [t.cpu() for t in (y, (y if reduced == "y" else z).mean(-1))]
    for reduced, fused in (("z", 4), ("y", 5)):
        results, _ = run_modes(lambda: fn(reduced))
        assert_same(results)
        if FUSES:
            assert stats_of(lambda: fn(reduced))["tasks_fused"] == fused
