"""`transformers.pipeline(..., device="neuron")` against the same pipeline
with device="cpu" on the same weights (random, seeded, built on the CPU; no
hub).  The neuron pipelines run under the `native` fixture: any op that
falls back to the CPU fails the test.

- text-generation (tiny GPT-2, the in-memory word-level tokenizer), greedy:
  the generated text equals the CPU pipeline's;
- image-classification (tiny ViT, the PIL ViT image processor): the labels
  equal the CPU pipeline's, in order, and the scores are within float32
  tolerance.
"""
import copy
import os
import sys

import pytest
import torch
from transformers import pipeline

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiny  # noqa: E402


def _pipelines(task, model, **kwargs):
    """The CPU pipeline and the neuron one on a deep copy of the same
    weights (a pipeline moves its model to its device in place)."""
    cpu = pipeline(task, model=model, device="cpu", **kwargs)
    neuron = pipeline(task, model=copy.deepcopy(model), device="neuron", **kwargs)
    assert cpu.model.device == torch.device("cpu")
    assert neuron.device.type == "neuron"
    assert neuron.model.device == torch.device("neuron", 0)
    assert all(p.device.type == "neuron" for p in neuron.model.parameters())
    return cpu, neuron


def test_text_generation_greedy_matches_cpu(native):
    cpu, neuron = _pipelines("text-generation", tiny.gpt2_decisive(),
                             tokenizer=tiny.word_tokenizer())
    prompts = ["w5 w17 w40", "w3 w9 w60 w61 w77"]
    kwargs = dict(max_new_tokens=20, do_sample=False, return_full_text=False)
    expected = cpu(prompts, **kwargs)
    actual = neuron(prompts, **kwargs)
    texts = [out[0]["generated_text"] for out in expected]
    # a real continuation: 20 words, not one repeated
    assert all(len(text.split()) == 20 and len(set(text.split())) >= 5 for text in texts), texts
    assert [out[0]["generated_text"] for out in actual] == texts


def test_image_classification_matches_cpu(native):
    cpu, neuron = _pipelines("image-classification", tiny.vit(),
                             image_processor=tiny.vit_image_processor())
    images = tiny.random_images(3)
    expected = cpu(images, top_k=len(tiny.LABELS))
    actual = neuron(images, top_k=len(tiny.LABELS))
    assert len(actual) == len(expected) == len(images)
    for got, want in zip(actual, expected):
        # scores apart by far more than the tolerance: rounding alone cannot
        # reorder the labels (a random ViT's scores are all near 1/5)
        gaps = [a["score"] - b["score"] for a, b in zip(want, want[1:])]
        assert min(gaps) > 1e-4, want
        assert [r["label"] for r in got] == [r["label"] for r in want], (got, want)
        torch.testing.assert_close(torch.tensor([r["score"] for r in got]),
                                   torch.tensor([r["score"] for r in want]),
                                   rtol=1e-5, atol=1e-6)
