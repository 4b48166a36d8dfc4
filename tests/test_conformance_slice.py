"""The OpInfo conformance harness (tests/conformance) in `make test`: a
representative slice of op_db on neuron against the CPU, every listed failure
an xfail(strict) -- so an unexpected pass fails too -- and the harness's own
checks, which must be able to fail.  `make conformance` runs all of op_db."""
import copy
import dataclasses
import json
import sys
import textwrap

import pytest
import torch
from torch.testing._internal.opinfo.core import SampleInput

from conformance import catalog, expected, harness, run

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
