"""Hugging Face `transformers` models no one here wrote, on neuron vs the CPU.

One test per row of specs.MODELS: the model (small config, random weights,
fixed seed) runs forward + backward on the CPU and, deep-copied, on neuron;
logits, loss and every parameter gradient must agree within the tolerances
stated in harness.py.  A model listed in specs.XFAIL is a strict xfail (it
must fail, with the reason given there).  Fallback ops are allowed here (they
are recorded by `python -m tests.models.report` into docs/models.md); the
results must still match.
"""
import warnings

import pytest

from . import harness, specs


def _param(spec):
    reason = specs.XFAIL.get(spec.name)
    marks = [pytest.mark.xfail(reason=reason, strict=True)] if reason else []
    return pytest.param(spec, id=spec.name, marks=marks)


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


@pytest.mark.parametrize("spec", [_param(s) for s in specs.MODELS])
def test_model_matches_cpu(spec):
    harness.assert_matches(harness.run(spec))


def test_module_to_keeps_tied_parameters():
    """.to("neuron") keeps an LM head tied to its embedding, as cuda does
    (ops_train.cpp's _has_compatible_shallow_copy_type)."""
    model, _ = harness.build(specs.BY_NAME["gpt2"])
    assert model.lm_head.weight is model.transformer.wte.weight
    model.to("neuron")
    assert model.lm_head.weight is model.transformer.wte.weight


def test_the_table_is_large_enough():
    assert len(specs.MODELS) >= 25
    assert set(specs.XFAIL) <= set(specs.BY_NAME), "XFAIL names a model not in the table"
