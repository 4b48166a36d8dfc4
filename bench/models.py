"""Training steps/s of three Hugging Face `transformers` models: neuron next to torch CPU.

GPT-2, Llama and BERT (masked LM) from small configs with random weights (no
hub access): hidden 256, 4 layers, 4 heads (Llama: 2 key/value heads), a
vocabulary of 2048, batch 8 x sequence 128 (--quick: 2 layers, batch 4 x 64).
One training step is zero_grad + forward + cross entropy on the logits +
backward + AdamW step (torch.optim.AdamW with its defaults on each device).
Each model is timed on the CPU and on neuron in the same run, in float32 and
under bfloat16 autocast (`torch.autocast(device_type, torch.bfloat16)`), as
the median step time over --repeats steps after two warm-up steps (neuron
synchronised before each timer stops).  Printed: steps/s of each and the
speed ratio cpu_time / neuron_time (> 1: neuron is faster), plus the ops that
fell back to the CPU on neuron.  Same threads for both (the intra-op pool and
the compute pool default to the core count).  Prints a table; asserts nothing.
Usage: python bench/models.py [--repeats N] [--quick] [--models gpt2,llama,bert]
"""
import argparse
import copy
import os
import warnings

# Never the hub (random weights from configs), nor kernels from it.
for _var, _value in (("HF_HUB_OFFLINE", "1"), ("TRANSFORMERS_OFFLINE", "1"), ("USE_HUB_KERNELS", "NO")):
    os.environ.setdefault(_var, _value)

import torch  # noqa: E402
import transformers as tf  # noqa: E402

import torch_neuronx  # noqa: E402,F401  (registers the device)
from timing import machine, paired_medians  # noqa: E402

VOCAB = 2048


def configs(layers):
    common = dict(vocab_size=VOCAB, hidden_size=256, intermediate_size=1024,
                  num_hidden_layers=layers, num_attention_heads=4, max_position_embeddings=512)
    return {
        "gpt2": (tf.GPT2LMHeadModel, tf.GPT2Config(vocab_size=VOCAB, n_embd=256, n_layer=layers,
                                                   n_head=4, n_positions=512, bos_token_id=0,
                                                   eos_token_id=0)),
        "llama": (tf.LlamaForCausalLM, tf.LlamaConfig(**common, num_key_value_heads=2)),
        "bert": (tf.BertForMaskedLM, tf.BertConfig(**common)),
    }


def make_step(model, ids, targets, device, dtype):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=dtype == "bf16"):
            logits = model(input_ids=ids).logits
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB).float(), targets)
        loss.backward()
        opt.step()
    return step


def main():
    print(machine(), flush=True)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="2 layers, batch 4 x 64, 3 repeats")
    parser.add_argument("--models", default="gpt2,llama,bert")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    repeats = 3 if args.quick else args.repeats
    layers, batch, seq = (2, 4, 64) if args.quick else (4, 8, 128)
    cpu, neuron = torch.device("cpu"), torch.device("neuron")
    print(f"training step (AdamW), batch {batch} x seq {seq}, hidden 256, {layers} layers, "
          f"{torch.get_num_threads()} threads")
    print(f"{'model':<8} {'dtype':<6} {'cpu steps/s':>12} {'neuron steps/s':>15} {'speed':>7}  fallback ops")
    table = configs(layers)
    for name in args.models.split(","):
        cls, config = table[name]
        torch.manual_seed(0)
        base = cls(config).eval()  # eval: no dropout, the same work on both
        g = torch.Generator().manual_seed(1)
        ids = torch.randint(3, VOCAB, (batch, seq), generator=g)
        targets = torch.randint(0, VOCAB, (batch * seq,), generator=g)
        for dtype in ("fp32", "bf16"):
            sides = []
            for device in (cpu, neuron):
                model = copy.deepcopy(base).to(device)
                step = make_step(model, ids.to(device), targets.to(device), device, dtype)
                step()  # first step: the optimizer allocates its state
                sides.append((step, device))
            torch_neuronx._C.reset_fallback_stats()
            t_cpu, t_dev = paired_medians(sides, repeats)
            fallback = sorted(torch_neuronx._C.fallback_stats())
            print(f"{name:<8} {dtype:<6} {1 / t_cpu:>12.2f} {1 / t_dev:>15.2f} {t_cpu / t_dev:>6.2f}x  "
                  f"{', '.join(fallback) or 'none'}", flush=True)


if __name__ == "__main__":
    main()
