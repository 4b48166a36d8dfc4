"""The OpInfo conformance harness (tests/conformance) in `make test`: a
representative slice of op_db on neuron against the CPU, every listed failure
an xfail(strict) -- so an unexpected pass fails too -- and the harness's own
checks, which must be able to fail.  `make conformance` runs all of op_db.

A pair whose CPU result depends on the CPU's own instruction set is held to
the float64 truth where this machine's CPU kernel rounds intermediates
(conformance/reference.py: conv1d/conv2d in bfloat16 where oneDNN has no
bfloat16 -- AVX2-only x86, `make test-avx2` -- and in float16 where it has
no float16 -- no AVX512_FP16); the test id is the same, the reference is
the truth."""
import copy
import dataclasses
import json
import pathlib
import sys
import textwrap

import pytest
import torch
from torch.testing._internal.opinfo.core import SampleInput

from conformance import catalog, expected, harness, reference, run

from conftest import check_python

EXPECTED = expected.load()


def _slice_params():
    for name, dtype in catalog.all_pairs(catalog.SLICE):
        dtype_name = catalog.DTYPE_NAMES[dtype]
        reason = EXPECTED.get((name, dtype_name))
        marks = () if reason is None else pytest.mark.xfail(strict=True, reason=reason)
        yield pytest.param(name, dtype, marks=marks, id=f"{name}-{dtype_name}")


@pytest.mark.parametrize("name,dtype", list(_slice_params()))
def test_slice_pair_is_correct_on_neuron(name, dtype):
    verdict = harness.check(name, dtype, "neuron", mode="both")
    assert verdict.samples > 0
    assert verdict.status != harness.FAILS, verdict.reason


# ---- the harness itself ----------------------------------------------------

def _wrong_on_neuron(name, perturb):
    """A copy of OpInfo `name` whose result on neuron is perturb(result)."""
    op = copy.copy(catalog.find_op(name))
    correct = op.op

    def wrong(*args, **kwargs):
        result = correct(*args, **kwargs)
        return perturb(result) if result.device.type == "neuron" else result

    op.op = wrong
    return op


@pytest.mark.parametrize("perturb", [
    lambda r: r + 1e-2,                     # values off
    lambda r: r.double(),                   # dtype differs
    lambda r: r.reshape(-1)[:1],            # shape differs
    lambda r: r.cpu(),                      # result left on the CPU
    lambda r: (r, r),                       # structure differs
    lambda r: r.detach(),                   # gradient lost
], ids=["values", "dtype", "shape", "device", "structure", "requires_grad"])
def test_a_wrong_result_fails(perturb):
    verdict = harness.check(_wrong_on_neuron("mul", perturb), torch.float32, "neuron")
    assert verdict.status == harness.FAILS
    assert verdict.reason


def test_a_wrong_gradient_fails():
    class TimesTwoBackward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, grad):
            return grad * 2

    op = _wrong_on_neuron("abs", TimesTwoBackward.apply)
    verdict = harness.check(op, torch.float32, "neuron")
    assert verdict.status == harness.FAILS and "grad" in verdict.reason, verdict


def test_a_wrong_integer_result_fails_by_one():
    verdict = harness.check(_wrong_on_neuron("neg", lambda r: r + 1), torch.int32, "neuron")
    assert verdict.status == harness.FAILS


def _off_on_the_cpu(op, dtype, off):
    """`op` whose CPU result in `dtype` (only: not the float64 truth) is off(result)."""
    correct = op.op

    def cpu_off(*args, **kwargs):
        result = correct(*args, **kwargs)
        if result.device.type == "cpu" and result.dtype == dtype:
            return off(result)
        return result

    op.op = cpu_off
    return op


def _held_to_the_truth(monkeypatch, name, dtype_name):
    deviation = reference.Deviation("always, in this test", lambda: True, "a test")
    monkeypatch.setattr(reference, "DEVIATIONS", {(name, dtype_name): deviation})


def test_a_pair_held_to_the_float64_truth(monkeypatch):
    """With a reference.py entry in force the device is held to the float64
    truth: a CPU result that misses it does not fail a correct device, a wrong
    device result fails, and an entry whose CPU result is right fails as stale."""
    _held_to_the_truth(monkeypatch, "mul", "bfloat16")
    bf16 = torch.bfloat16
    cpu_off = _off_on_the_cpu(copy.copy(catalog.find_op("mul")), bf16, lambda r: r + 1)
    verdict = harness.check(cpu_off, bf16, "neuron")
    assert verdict.status == harness.NATIVE and verdict.reference == "float64 truth: a test"
    assert harness.check(cpu_off, bf16, "neuron", mode="native").status == harness.NATIVE
    with monkeypatch.context() as undo:  # the same op held to the CPU fails
        undo.setattr(reference, "DEVIATIONS", {})
        assert harness.check(cpu_off, bf16, "neuron").status == harness.FAILS

    both_off = _off_on_the_cpu(_wrong_on_neuron("mul", lambda r: r + 1), bf16, lambda r: r + 1)
    verdict = harness.check(both_off, bf16, "neuron")
    assert verdict.status == harness.FAILS and "float64 truth" in verdict.reason, verdict

    verdict = harness.check("mul", bf16, "neuron")
    assert verdict.status == harness.FAILS and "stale" in verdict.reason, verdict


def test_conv2d_bfloat16_is_held_to_the_truth_without_onednn_bfloat16():
    """The reference.py entry that `make test-avx2` (and an AVX2-only CPU)
    needs, checked on every machine: with oneDNN capped at AVX2, ATen's CPU
    bfloat16 conv2d misses the float64 truth (else the entry is stale) and the
    device, at our AVX2 level, matches it."""
    out = check_python("""
        import torch, torch_neuronx
        from conformance import harness, reference
        assert reference.active("nn.functional.conv2d", "bfloat16") is not None
        verdict = harness.check("nn.functional.conv2d", torch.bfloat16, "neuron")
        print(verdict.status, verdict.reference.split(":")[0].replace(" ", "_"),
              verdict.samples, verdict.reason)
    """, env={"ONEDNN_MAX_CPU_ISA": "AVX2", "TORCHNEURON_ISA": "avx2",
              "PYTHONPATH": str(pathlib.Path(__file__).parent)}, timeout=300)
    status, ref, samples = out.split()[:3]
    assert (status, ref) == (harness.NATIVE, "float64_truth") and int(samples) > 0, out


def test_a_correct_op_passes_and_a_fallback_is_not_native(monkeypatch):
    assert harness.check("mul", torch.float32, "cpu").status == harness.NATIVE
    monkeypatch.setattr(harness._Fallback, "ops_hit", lambda self: ["aten::fake"])
    verdict = harness.check("mul", torch.float32, "cpu", mode="both")
    assert (verdict.status, verdict.fallback_ops) == (harness.FALLBACK, ["aten::fake"])
    assert harness.check("mul", torch.float32, "cpu", mode="native").status == harness.FAILS


def test_move_sample_keeps_layout_nesting_and_leaves():
    base = torch.randn(4, 6, requires_grad=True)
    strided = base.detach()[:, ::2].requires_grad_()
    sample = SampleInput([strided, base], args=(1,), kwargs={"device": "cpu"})
    moved = harness.move_sample(sample, "neuron")
    first, second = moved.input
    assert isinstance(moved.input, list) and moved.args == (1,)
    assert moved.kwargs["device"] == "neuron"
    assert first.device.type == "neuron" and first.stride() == strided.stride()
    assert first.is_leaf and first.requires_grad and second.is_leaf
    assert torch.equal(first.cpu(), strided.detach())


def test_tensors_op_db_makes_on_the_cpu_stay_there():
    op = catalog.find_op("tensor_split")
    samples = list(op.sample_inputs("cpu", torch.float32))
    pinned = harness.cpu_pinned(op, torch.float32, requires_grad=False)
    moved = harness.move_sample(samples[0], "neuron", pinned[0])
    assert moved.input.device.type == "neuron"
    assert moved.args[0].device.type == "cpu"  # the indices, as tensor_split demands


def test_metadata_only_where_upstream_skips_values():
    values_reason, _ = catalog.comparison_policy("nn.functional.dropout", torch.float32)
    assert values_reason
    assert catalog.comparison_policy("mul", torch.float32)[0] is None


def test_committed_expected_failures_name_real_pairs():
    existing = {(n, catalog.DTYPE_NAMES[d]) for n, d in catalog.all_pairs()}
    assert set(EXPECTED) <= existing, sorted(set(EXPECTED) - existing)


def test_expected_failures_catch_both_surprises(tmp_path):
    verdicts = [harness.Verdict("abs", "float32", harness.FAILS, "new failure"),
                harness.Verdict("neg", "float32", harness.NATIVE)]
    listed = {("neg", "float32"): "old failure", ("neg", "int8"): "not run"}
    failures, passes, stale = expected.discrepancies(verdicts, listed)
    assert failures == [(("abs", "float32"), "new failure")]
    assert passes == [("neg", "float32")] and stale == []
    path = tmp_path / "expected.txt"
    expected.write(path, verdicts, listed)
    assert expected.load(path) == {("abs", "float32"): "new failure",
                                   ("neg", "int8"): "not run"}


_FAKE_WORKER = """
    import json, os, signal, sys, time
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        op, dtype = line.split()
        if op == "abs":
            os.kill(os.getpid(), signal.SIGSEGV)
        if op == "neg":
            time.sleep(60)
        print(json.dumps({"op": op, "dtype": dtype, "status": "native"}), flush=True)
"""


def test_a_crash_or_a_hang_costs_only_its_own_pair(tmp_path):
    """The scheduler of run.py with workers that segfault on abs and hang on
    neg: every other pair still gets its verdict."""
    worker = tmp_path / "worker.py"
    worker.write_text(textwrap.dedent(_FAKE_WORKER))
    args = run._parse_args(["--device", "cpu", "--jobs", "2", "--timeout", "3",
                            "--out", str(tmp_path / "results.json")])
    scheduler = run._Scheduler(args, tmp_path)
    scheduler.argv = [sys.executable, str(worker)]
    names = ["abs", "mul", "neg", "add", "sub"]
    pairs = [(name, torch.float32) for name in names]
    verdicts = {}
    scheduler.run(pairs, lambda v: verdicts.setdefault(v.op, v))
    assert sorted(verdicts) == sorted(names)
    assert verdicts["abs"].reason == "crashed: SIGSEGV"
    assert verdicts["neg"].reason.startswith("timeout")
    assert {verdicts[n].status for n in ("mul", "add", "sub")} == {harness.NATIVE}
    json.dumps([dataclasses.asdict(v) for v in verdicts.values()])
