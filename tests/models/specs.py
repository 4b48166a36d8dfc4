"""The Hugging Face `transformers` architectures the model suite runs: ONE table.

Every model is built from a small config with random weights (no hub access,
no tokenizer): hidden sizes 16-64, 1-2 layers, a vocabulary of 99 tokens,
32x32 images, so the whole suite runs in seconds per model.  Each row names

  - `config`: a zero-argument factory of the model's config,
  - `model`:  the `transformers` class built from it (`cls(config)`),
  - `inputs`: `inputs(generator) -> dict` of CPU tensors (random ids, pixel
              values or audio features; the harness moves them to the device),
  - `logits`: `logits(output) -> Tensor`, the tensor compared and fed to the loss,
  - `loss`:   `loss(logits, generator) -> scalar`, from the logits only.

A model that cannot match the CPU is listed in `XFAIL` (below the table) with
its reason; the test marks it as a strict xfail.  `XFAIL_COMPILED` is the same
for the model under torch.compile (tests/models/test_models_compile.py).
"""
import dataclasses
import logging
import os
from typing import Callable

# Never the hub: every model here comes from a config (random weights).
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# Nor kernels from the hub (transformers' `kernels` integration would look up
# their publishers on the hub when it is imported).
os.environ.setdefault("USE_HUB_KERNELS", "NO")
# ... which, offline, says once per kernel that it skipped the check.
logging.getLogger("kernels").setLevel(logging.ERROR)

import torch  # noqa: E402
import transformers as tf  # noqa: E402

VOCAB = 99
BATCH = 2
SEQ = 16
IMAGE = 32
LABELS = 10


@dataclasses.dataclass(frozen=True)
class Spec:
    name: str
    config: Callable
    model: Callable
    inputs: Callable
    logits: Callable = lambda out: out.logits
    loss: Callable = None  # default: cross entropy against random classes
    # BatchNorm layers in training mode (batch statistics); False keeps them in
    # eval mode where batch statistics over a few values per channel make the
    # backward ill-conditioned (not an op bug: see the row's comment).
    train_batchnorm: bool = True


# --- input factories --------------------------------------------------------

def ids(g, batch=BATCH, seq=SEQ, low=3):
    # ids >= 3 keep clear of the pad/bos/eos ids of every config below.
    return torch.randint(low, VOCAB, (batch, seq), generator=g)


def text(g):
    x = ids(g)
    mask = torch.ones_like(x)
    mask[1, -3:] = 0  # one padded row: exercises the attention mask
    return {"input_ids": x, "attention_mask": mask}


def text_ids(g):
    return {"input_ids": ids(g)}


def seq2seq(g):
    return {"input_ids": ids(g), "attention_mask": torch.ones(BATCH, SEQ, dtype=torch.long),
            "decoder_input_ids": ids(g, seq=SEQ // 2)}


def image(g, size=IMAGE):
    return {"pixel_values": torch.randn(BATCH, 3, size, size, generator=g)}


def clip_inputs(g):
    return {"input_ids": ids(g, seq=8), "pixel_values": torch.randn(BATCH, 3, IMAGE, IMAGE, generator=g)}


def whisper_inputs(g):
    # Whisper's encoder wants exactly 2 * max_source_positions frames.
    return {"input_features": torch.randn(BATCH, 16, 32, generator=g),
            "decoder_input_ids": ids(g, seq=8)}


def audio(g):
    return {"input_values": torch.randn(BATCH, 1600, generator=g)}


# --- losses from the logits --------------------------------------------------

def cross_entropy(logits, g):
    flat = logits.reshape(-1, logits.shape[-1])
    target = torch.randint(0, flat.shape[-1], (flat.shape[0],), generator=g).to(flat.device)
    return torch.nn.functional.cross_entropy(flat, target)


def mse(logits, g):
    target = torch.randn(logits.shape, generator=g).to(logits.device)
    return torch.nn.functional.mse_loss(logits, target)


# --- common small config fields --------------------------------------------

DEC = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
           num_attention_heads=4, max_position_embeddings=64)
GQA = dict(DEC, num_key_value_heads=2)
ENC = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
           num_attention_heads=4, max_position_embeddings=64)
VIT = dict(image_size=IMAGE, patch_size=8, num_channels=3, hidden_size=32, num_hidden_layers=2,
           num_attention_heads=4, intermediate_size=64, num_labels=LABELS)
S2S = dict(vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=2,
           encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
           decoder_ffn_dim=64, max_position_embeddings=64, pad_token_id=1,
           bos_token_id=0, eos_token_id=2, decoder_start_token_id=2)


# special token ids inside the small vocabulary (the defaults are in the real ones)
TOKENS = dict(bos_token_id=0, eos_token_id=2, pad_token_id=1)


def cfg(cls, **kw):
    return lambda: cls(**kw)


MODELS = [
    # decoder-only language models (causal LM heads)
    Spec("gpt2", cfg(tf.GPT2Config, vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4, n_positions=64,
                          **TOKENS),
         tf.GPT2LMHeadModel, text),
    Spec("llama", cfg(tf.LlamaConfig, **GQA), tf.LlamaForCausalLM, text),
    Spec("mistral", cfg(tf.MistralConfig, **GQA, sliding_window=8), tf.MistralForCausalLM, text),
    Spec("qwen2", cfg(tf.Qwen2Config, **GQA), tf.Qwen2ForCausalLM, text),
    Spec("qwen3", cfg(tf.Qwen3Config, **GQA, head_dim=8), tf.Qwen3ForCausalLM, text),
    Spec("gemma", cfg(tf.GemmaConfig, **GQA, head_dim=8), tf.GemmaForCausalLM, text),
    Spec("gemma2", cfg(tf.Gemma2Config, **GQA, head_dim=8, sliding_window=8),
         tf.Gemma2ForCausalLM, text),
    Spec("phi", cfg(tf.PhiConfig, **DEC, partial_rotary_factor=0.5), tf.PhiForCausalLM, text),
    Spec("phi3", cfg(tf.Phi3Config, **GQA, **TOKENS), tf.Phi3ForCausalLM, text),
    Spec("gpt_neox", cfg(tf.GPTNeoXConfig, **DEC, rotary_pct=0.5), tf.GPTNeoXForCausalLM, text),
    Spec("gptj", cfg(tf.GPTJConfig, vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4, n_positions=64,
                     rotary_dim=4, **TOKENS), tf.GPTJForCausalLM, text),
    Spec("gpt_bigcode", cfg(tf.GPTBigCodeConfig, vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4,
                            n_positions=64, multi_query=True, **TOKENS), tf.GPTBigCodeForCausalLM, text),
    Spec("opt", cfg(tf.OPTConfig, vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, ffn_dim=64,
                    num_attention_heads=4, max_position_embeddings=64, word_embed_proj_dim=32),
         tf.OPTForCausalLM, text),
    Spec("falcon", cfg(tf.FalconConfig, vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
                       num_attention_heads=4), tf.FalconForCausalLM, text),
    Spec("bloom", cfg(tf.BloomConfig, vocab_size=VOCAB, hidden_size=32, n_layer=2, n_head=4),
         tf.BloomForCausalLM, text),
    Spec("mixtral", cfg(tf.MixtralConfig, **GQA, num_local_experts=4, num_experts_per_tok=2),
         tf.MixtralForCausalLM, text),
    Spec("qwen2_moe", cfg(tf.Qwen2MoeConfig, **GQA, num_experts=4, num_experts_per_tok=2,
                          moe_intermediate_size=32, shared_expert_intermediate_size=32,
                          experts_implementation="eager"),  # mixtral has the default
         tf.Qwen2MoeForCausalLM, text),
    Spec("gpt_neo", cfg(tf.GPTNeoConfig, vocab_size=VOCAB, hidden_size=32, num_layers=2,
                        num_heads=4, max_position_embeddings=64, attention_types=[[["global", "local"], 1]],
                        window_size=8, **TOKENS), tf.GPTNeoForCausalLM, text),
    Spec("mamba", cfg(tf.MambaConfig, vocab_size=VOCAB, hidden_size=32, state_size=8,
                      num_hidden_layers=2, expand=2, conv_kernel=4, **TOKENS),
         tf.MambaForCausalLM, text_ids),
    Spec("stablelm", cfg(tf.StableLmConfig, **GQA), tf.StableLmForCausalLM, text),
    Spec("olmo", cfg(tf.OlmoConfig, **GQA, **TOKENS), tf.OlmoForCausalLM, text),
    # encoders (masked LM / classification heads)
    Spec("bert", cfg(tf.BertConfig, **ENC), tf.BertForMaskedLM, text),
    Spec("roberta", cfg(tf.RobertaConfig, **ENC), tf.RobertaForMaskedLM, text),
    Spec("distilbert", cfg(tf.DistilBertConfig, vocab_size=VOCAB, dim=32, n_layers=2, n_heads=4,
                           hidden_dim=64, max_position_embeddings=64),
         tf.DistilBertForMaskedLM, text),
    Spec("albert", cfg(tf.AlbertConfig, **ENC, embedding_size=16), tf.AlbertForMaskedLM, text),
    Spec("electra", cfg(tf.ElectraConfig, **ENC, embedding_size=16), tf.ElectraForMaskedLM, text),
    Spec("mobilebert", cfg(tf.MobileBertConfig, **dict(ENC, intermediate_size=32), embedding_size=16,
                           true_hidden_size=16, intra_bottleneck_size=16,
                           num_feedforward_networks=2), tf.MobileBertForMaskedLM, text),
    Spec("deberta_v2", cfg(tf.DebertaV2Config, **ENC, num_labels=LABELS),
         tf.DebertaV2ForSequenceClassification, text),
    Spec("xlm_roberta", cfg(tf.XLMRobertaConfig, **ENC, num_labels=LABELS),
         tf.XLMRobertaForSequenceClassification, text),
    Spec("xlnet", cfg(tf.XLNetConfig, vocab_size=VOCAB, d_model=32, n_layer=2, n_head=4, d_inner=64,
                      **TOKENS), tf.XLNetLMHeadModel, text),
    Spec("funnel", cfg(tf.FunnelConfig, vocab_size=VOCAB, d_model=32, n_head=4, d_head=8, d_inner=64,
                       block_sizes=[1, 1], num_decoder_layers=1, max_position_embeddings=64),
         tf.FunnelForMaskedLM, text),
    Spec("mpnet", cfg(tf.MPNetConfig, **ENC), tf.MPNetForMaskedLM, text),
    Spec("longformer", cfg(tf.LongformerConfig, **ENC, attention_window=[4, 4]),
         tf.LongformerForMaskedLM, text),
    # encoder-decoder
    Spec("t5", cfg(tf.T5Config, vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=64, num_layers=2,
                   num_heads=4, decoder_start_token_id=0), tf.T5ForConditionalGeneration, seq2seq),
    Spec("bart", cfg(tf.BartConfig, **S2S), tf.BartForConditionalGeneration, seq2seq),
    Spec("marian", cfg(tf.MarianConfig, **dict(S2S, pad_token_id=VOCAB - 1)),
         tf.MarianMTModel, seq2seq),
    Spec("whisper", cfg(tf.WhisperConfig, **dict(S2S, max_position_embeddings=None), num_mel_bins=16,
                        max_source_positions=16, max_target_positions=32),
         tf.WhisperForConditionalGeneration, whisper_inputs),
    # vision
    Spec("vit", cfg(tf.ViTConfig, **VIT), tf.ViTForImageClassification, image),
    Spec("deit", cfg(tf.DeiTConfig, **VIT), tf.DeiTForImageClassification, image),
    Spec("beit", cfg(tf.BeitConfig, **VIT, use_relative_position_bias=True),
         tf.BeitForImageClassification, image),
    Spec("swin", cfg(tf.SwinConfig, image_size=IMAGE, patch_size=4, embed_dim=16, depths=[1, 1],
                     num_heads=[2, 2], window_size=4, num_labels=LABELS),
         tf.SwinForImageClassification, image),
    Spec("convnext", cfg(tf.ConvNextConfig, num_stages=2, hidden_sizes=[16, 32], depths=[1, 1], num_labels=LABELS),
         tf.ConvNextForImageClassification, image),
    Spec("resnet", cfg(tf.ResNetConfig, embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1],
                       layer_type="basic", num_labels=LABELS),
         tf.ResNetForImageClassification, image),
    Spec("mobilenet_v2", cfg(tf.MobileNetV2Config, image_size=64, depth_multiplier=0.25,
                             finegrained_output=False, num_labels=LABELS),
         # 64x64: at 32x32 the last stages are 1x1, and batch norm's statistics over
         # 2 values per channel make the gradients ill-conditioned (1e3).
         tf.MobileNetV2ForImageClassification, lambda g: image(g, size=64)),
    Spec("segformer", cfg(tf.SegformerConfig, num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1],
                          hidden_sizes=[16, 32], num_attention_heads=[1, 2], decoder_hidden_size=32,
                          num_labels=LABELS), tf.SegformerForSemanticSegmentation, image,
         logits=lambda out: out.logits.movedim(1, -1)),  # classes last for the loss
    Spec("clip", lambda: tf.CLIPConfig(
            text_config=dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                             num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=32,
                             **TOKENS),
            vision_config=dict(image_size=IMAGE, patch_size=8, hidden_size=32, intermediate_size=64,
                               num_hidden_layers=2, num_attention_heads=4),
            projection_dim=16),
         tf.CLIPModel, clip_inputs, logits=lambda out: out.logits_per_image),
    Spec("dinov2", cfg(tf.Dinov2Config, **VIT), tf.Dinov2ForImageClassification, image),
    Spec("efficientnet", cfg(tf.EfficientNetConfig, image_size=64, width_coefficient=0.25,
                             depth_coefficient=0.25, hidden_dim=320, num_labels=LABELS,
                             initializer_range=0.3),  # 0.02: activations vanish (logits 1e-35)
         # 64x64 as mobilenet_v2 (at 32x32 batch norm sees 2 values per channel at 1x1)
         tf.EfficientNetForImageClassification, lambda g: image(g, size=64)),
    Spec("regnet", cfg(tf.RegNetConfig, embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1],
                       groups_width=8, num_labels=LABELS), tf.RegNetForImageClassification, image),
    Spec("poolformer", cfg(tf.PoolFormerConfig, hidden_sizes=[16, 32], depths=[1, 1], num_encoder_blocks=2,
                           patch_sizes=[7, 3], strides=[4, 2], padding=[2, 1], num_labels=LABELS),
         tf.PoolFormerForImageClassification, image),
    Spec("mobilevit", cfg(tf.MobileViTConfig, image_size=64, hidden_sizes=[16, 24, 32],
                          neck_hidden_sizes=[8, 8, 16, 16, 24, 32, 64], num_labels=LABELS,
                          initializer_range=0.3),  # 0.02: activations vanish (logits 0)
         # Batch norm in eval mode: in training mode, its backward over the 8 values per
         # channel of the last stages amplifies float32 rounding 6x per layer, and the
         # transformer biases' gradients (sums that cancel to 1e-5 of their terms) then
         # differ by 2e-2 of their size, though every activation gradient agrees to 7e-6.
         tf.MobileViTForImageClassification, lambda g: image(g, size=64), train_batchnorm=False),
    # audio
    Spec("wav2vec2", cfg(tf.Wav2Vec2Config, vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
                         num_attention_heads=4, intermediate_size=64, conv_dim=(16, 16, 16),
                         conv_stride=(5, 4, 4), conv_kernel=(10, 4, 4), num_conv_pos_embeddings=16,
                         num_conv_pos_embedding_groups=4),
         tf.Wav2Vec2ForCTC, audio),
    Spec("hubert", cfg(tf.HubertConfig, vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
                       num_attention_heads=4, intermediate_size=64, conv_dim=(16, 16, 16),
                       conv_stride=(5, 4, 4), conv_kernel=(10, 4, 4), num_conv_pos_embeddings=16,
                       num_conv_pos_embedding_groups=4),
         tf.HubertForCTC, audio),
    Spec("speech_to_text", cfg(tf.Speech2TextConfig, **dict(S2S, max_position_embeddings=None),
                               max_source_positions=64, max_target_positions=32,
                               num_conv_layers=2, conv_channels=32, input_feat_per_channel=16,
                               conv_kernel_sizes=(5, 5)),
         tf.Speech2TextForConditionalGeneration,
         lambda g: {"input_features": torch.randn(BATCH, 32, 16, generator=g),
                    "decoder_input_ids": ids(g, seq=8)}),
]

BY_NAME = {spec.name: spec for spec in MODELS}
assert len(BY_NAME) == len(MODELS), "duplicate model names"

# Models that do not match the CPU, with the reason (the one place they are
# listed; tests/models/test_models.py marks them as strict xfails).
XFAIL = {
    # mixtral was here (histc on int32): neuron's histc takes integers, as CUDA's
}

# Models that do not match CPU eager under torch.compile(backend="neuron"), or
# fall back, with the reason (test_models_compile.py's strict xfails).  (Was
# here: efficientnet, Inductor's avg_pool2d backward in ceil_mode, worked
# around for neuron: torch_neuronx/_inductor/workarounds.py F.)
XFAIL_COMPILED = {
    "funnel": "upstream Inductor: compiling the backward does not finish (on neuron, "
              "stopped after 14 min; on cpu the same calls, stopped after 200 s): "
              "CppKernelProxy's tiling (cpp.py:4135 _select_tiling_indices -> "
              "sizevars.stride_at) runs sympy.simplify on the index of the relative-position "
              "shift's gradient, nested ModularIndexing of ~1250 ops, 55 s for one call",
}
# XFAIL_COMPILED models whose test is not run (xfail run=False): it would not end.
COMPILE_HANGS = ("funnel",)
