"""`GenerationMixin.generate()` on neuron against PyTorch's CPU backend.

The model is tiny.gpt2_decisive() (random weights, seeded, built on the CPU)
and a deep copy moved with `.to("neuron")`; every neuron call runs under the
`native` fixture, so an op that falls back to the CPU fails the test.

- greedy decoding gives the CPU's token ids, for one prompt and for a
  left-padded batch with its attention mask, and the per-step scores
  (`output_scores=True, return_dict_in_generate=True`) equal the CPU's within
  float32 tolerance;
- sampling under a seed is checked as described in
  test_sampling_is_honest_to_the_cpu_model's docstring (a device's generator
  is not the CPU's, so sampled tokens cannot be compared one by one).
"""
import copy
import math
import os
import sys

import pytest
import torch
from transformers import LogitsProcessorList, TemperatureLogitsWarper, TopKLogitsWarper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiny  # noqa: E402
from conftest import assert_same  # noqa: E402

NEW_TOKENS = 24
TOP_K = 8
TEMPERATURE = 0.7
PROMPT = "w5 w17 w40 w2 w9"
BATCH = ["w5 w17 w40 w2 w9", "w3 w60 w61"]  # the second is left-padded by two

# Scores are logits of a 2-layer model: the CPU's and neuron's differ by
# float32 rounding of a different summation order: at most ~4e-6 here.
SCORE_TOL = dict(rtol=1e-5, atol=5e-5)


@pytest.fixture(scope="module")
def models():
    cpu = tiny.gpt2_decisive()
    return cpu, copy.deepcopy(cpu).to("neuron")


@pytest.fixture(scope="module")
def tokenizer():
    tok = tiny.word_tokenizer()
    tok.padding_side = "left"  # decoder-only generation pads on the left
    return tok


def _inputs(tokenizer, text, device):
    batch = tokenizer(text, return_tensors="pt", padding=True)
    return {name: tensor.to(device) for name, tensor in batch.items()}


def _sampling_processors():
    """The warpers generate() builds for do_sample=True with TEMPERATURE and
    TOP_K (the model's generation config adds none), in its order."""
    return LogitsProcessorList([TemperatureLogitsWarper(TEMPERATURE), TopKLogitsWarper(TOP_K)])


@pytest.mark.parametrize("text", [PROMPT, BATCH], ids=["one_prompt", "left_padded_batch"])
def test_greedy_matches_cpu(models, tokenizer, text, native):
    cpu, neuron = models
    kwargs = dict(max_new_tokens=NEW_TOKENS, do_sample=False, output_scores=True,
                  return_dict_in_generate=True)
    expected = cpu.generate(**_inputs(tokenizer, text, "cpu"), **kwargs)
    actual = neuron.generate(**_inputs(tokenizer, text, "neuron"), **kwargs)

    # The reference is worth comparing against: no early stop, a varied
    # continuation, and top-2 gaps far above float32 rounding (no near-ties
    # that rounding alone could flip).
    expected_scores = torch.stack(expected.scores)  # (steps, batch, vocab)
    assert expected_scores.shape[0] == NEW_TOKENS
    assert len(set(expected.sequences[:, -NEW_TOKENS:].flatten().tolist())) >= 8
    top2 = expected_scores.topk(2, dim=-1).values
    assert (top2[..., 0] - top2[..., 1]).min() > 1e-3

    assert actual.sequences.device.type == "neuron"
    assert actual.sequences.cpu().tolist() == expected.sequences.tolist()
    assert len(actual.scores) == NEW_TOKENS
    assert_same(torch.stack(actual.scores), expected_scores, **SCORE_TOL)


def _sample(model, input_ids, seed, **kwargs):
    torch.manual_seed(seed)  # seeds the CPU's and every neuron device's generator
    return model.generate(input_ids, attention_mask=torch.ones_like(input_ids), do_sample=True,
                          top_k=TOP_K, temperature=TEMPERATURE, **kwargs)


def test_sampling_is_honest_to_the_cpu_model(models, tokenizer, native):
    """Sampling under a seed.  neuron's generator is not the CPU's (as
    cuda's Philox stream is not the CPU's mt19937), so the tokens neuron
    samples cannot equal the CPU's one by one.  What is compared instead:

    (a) reproducibility: on neuron, torch.manual_seed(s) then
        generate(do_sample=True, top_k, temperature) twice gives identical
        tokens, and another seed gives other tokens;
    (b) each step is the CPU model's step: the sequence neuron sampled,
        teacher-forced through the CPU model and its logits put through the
        same warpers (temperature, top-k), gives every sampled token a CPU
        probability > 0, and neuron's per-step processed scores
        (output_scores) equal the CPU's on that sequence within float32
        tolerance;
    (c) the sampler draws from those probabilities, in distribution:
        test_sampled_frequencies_match_cpu_probabilities below.
    """
    cpu, neuron = models
    input_ids = _inputs(tokenizer, PROMPT, "neuron")["input_ids"]
    kwargs = dict(max_new_tokens=NEW_TOKENS, output_scores=True, return_dict_in_generate=True)

    # (a)
    first = _sample(neuron, input_ids, 1234, **kwargs)
    again = _sample(neuron, input_ids, 1234, **kwargs)
    other = _sample(neuron, input_ids, 4321, **kwargs)
    assert first.sequences.device.type == "neuron"
    assert again.sequences.cpu().tolist() == first.sequences.cpu().tolist()
    assert other.sequences.cpu().tolist() != first.sequences.cpu().tolist()

    # (b)
    sequence = first.sequences.cpu()
    prompt_len = input_ids.shape[1]
    steps = len(first.scores)
    assert steps == sequence.shape[1] - prompt_len > 0
    with torch.no_grad():
        logits = cpu(sequence[:, :-1]).logits  # position t predicts token t + 1
    processors = _sampling_processors()
    expected = []
    for step in range(steps):
        position = prompt_len + step  # index of the token sampled at this step
        scores = processors(sequence[:, :position], logits[:, position - 1].clone())
        probs = torch.softmax(scores, dim=-1)
        token = sequence[0, position]
        assert probs[0, token] > 0, f"step {step}: neuron sampled {token.item()}, " \
                                    f"which the CPU model's top-{TOP_K} excludes"
        expected.append(scores)
    assert_same(torch.stack(first.scores), torch.stack(expected), **SCORE_TOL)


def test_sampled_frequencies_match_cpu_probabilities(models, tokenizer, native):
    """(c) of the test above: one new token sampled on neuron for N copies
    of one prompt; the empirical frequencies are the CPU model's
    probabilities for that step (after temperature and top-k), and the same
    check against a wrong distribution (the probabilities shifted by one
    token) fails, so the check has power."""
    cpu, neuron = models
    n = 4096
    prompt = _inputs(tokenizer, PROMPT, "cpu")["input_ids"]
    with torch.no_grad():
        out = _sample(neuron, prompt.to("neuron").expand(n, -1).contiguous(), 99, max_new_tokens=1)
    assert out.device.type == "neuron" and out.shape == (n, prompt.shape[1] + 1)
    counts = torch.bincount(out[:, -1].cpu(), minlength=tiny.VOCAB).double()
    freq = counts / n

    with torch.no_grad():
        logits = cpu(prompt).logits[:, -1]
    p = torch.softmax(_sampling_processors()(prompt, logits).double(), dim=-1)[0]
    assert int((p > 0).sum()) == TOP_K

    # Bound on the L1 distance sum_i |freq_i - p_i| (twice the total
    # variation) that a correct sampler exceeds with probability < 1e-6,
    # whatever p is (no asymptotic chi-square approximation):
    # - E[L1] <= sum_i sqrt(p_i (1 - p_i) / n)   (Jensen, per category);
    # - L1 is a function of n independent draws that changes by at most 2/n
    #   when one draw changes, so McDiarmid's inequality gives
    #   P(L1 >= E[L1] + eps) <= exp(-n eps^2 / 2); eps = sqrt(2 ln(1e6) / n)
    #   makes that 1e-6.
    # n = 4096, 8 categories: bound ~0.11 (neuron's own probabilities differ
    # from the CPU's by float32 rounding, ~1e-6, nothing next to it).
    eps = math.sqrt(2 * math.log(1e6) / n)
    bound = float(torch.sqrt(p * (1 - p) / n).sum()) + eps

    def l1(q):
        return float((freq - q).abs().sum())

    assert freq[p == 0].sum() == 0, "neuron sampled tokens outside the top-k"
    assert l1(p) <= bound, f"L1 {l1(p):.4f} > {bound:.4f}\nfreq {freq[p > 0]}\np {p[p > 0]}"

    # Power: a sampler drawing from q passes with probability < 1e-6 when
    # L1(p, q) > 2 * bound (then L1(freq, q) >= L1(p, q) - L1(freq, p)
    # > bound unless L1(freq, p) > bound).  Here L1(p, q) is ~1.8.
    wrong = p.roll(1)
    assert float((p - wrong).abs().sum()) > 2 * bound
    assert l1(wrong) > bound
