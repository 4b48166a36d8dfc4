"""torch.compile on neuron next to eager neuron and Inductor on the CPU.

For each case, in one process and with the same threads (torch's intra-op
pool and the device's compute pool both default to the core count):
  - eager neuron (adaptive eager fusion on, the default),
  - eager neuron with fusion off (one pass over memory per op),
  - compiled neuron (`torch.compile`, Inductor with the neuron backend),
  - compiled CPU (`torch.compile`, Inductor's own CPU backend),
the median time of one call (a call = the case's unit of work, the device
synchronised before each timer stops) over --repeats calls after warm-up,
the three columns taking turns in --rounds blocks (an example's training
loop: a block is a loop of --repeats steps, timed in windows of 5 steps
synchronised at their ends, as bench/train.py times it), so that a slow phase of a noisy
machine falls on every column alike.
Printed: the four times, the ratios  inductor_cpu / compiled_neuron,
eager_neuron / compiled_neuron  and  eager_unfused / compiled_neuron  (> 1:
compiled neuron is faster), and the
compile time of each compiled side, cold (first call with an empty Inductor
cache: Dynamo, AOTAutograd, codegen, the C compiler; the process's one-time
costs are paid before the first case, warm_up_process) and warm (after
torch._dynamo.reset(), so Dynamo traces again but Inductor's FX-graph and
AOTAutograd caches on disk hit and no C compiler runs).

Cases: a pointwise chain over 2^22 floats; LayerNorm and softmax written
from primitives (4096 x 1024); a SwiGLU MLP block forward+backward; the
GPT/CNN/MLP examples' training steps (model compiled, optimizer eager);
Hugging Face GPT-2 and Llama (bench/models.py's configs) inference and
training steps.  Asserts nothing.

Usage: python bench/compile.py [--quick] [--repeats N] [--only SUBSTR]
"""
import argparse
import copy
import os
import statistics
import sys
import tempfile
import time

# An empty Inductor cache for this run, so "cold" is cold (set before torch).
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="bench_compile_"))
for _var, _value in (("HF_HUB_OFFLINE", "1"), ("TRANSFORMERS_OFFLINE", "1"), ("USE_HUB_KERNELS", "NO")):
    os.environ.setdefault(_var, _value)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import torch_neuronx  # noqa: E402,F401  (registers the device)
from timing import machine, paired_medians, sync  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))


# ---------------------------------------------------------------- the cases
# A case is make(device) -> (run, target): run(f) does one unit of work with
# f = target or torch.compile(target) (a function or a module).  The same
# make() serves all three columns.  The examples' loops are the exception
# (example_step, timed_loop).

def pointwise_chain(n):
    def chain(x, a, b, c):
        y = (x * a + b).sigmoid() * x - c
        y = torch.where(y > 0, y, 0.1 * y).tanh() + x.abs().sqrt()
        return (y * y + 1.0).rsqrt() * (a - b).exp().clamp(max=4.0)

    def make(device):
        g = torch.Generator().manual_seed(0)
        args = [torch.randn(n, generator=g).to(device) for _ in range(4)]
        return (lambda f: f(*args)), chain
    return make


def layer_norm_primitives(rows, cols):
    def ln(x, w, b):
        mean = x.mean(-1, keepdim=True)
        var = ((x - mean) ** 2).mean(-1, keepdim=True)
        return (x - mean) * torch.rsqrt(var + 1e-5) * w + b

    def make(device):
        g = torch.Generator().manual_seed(0)
        x, w, b = (torch.randn(s, generator=g).to(device) for s in ((rows, cols), (cols,), (cols,)))
        return (lambda f: f(x, w, b)), ln
    return make


def softmax_primitives(rows, cols):
    def softmax(x):
        e = (x - x.amax(-1, keepdim=True)).exp()
        return e / e.sum(-1, keepdim=True)

    def make(device):
        x = torch.randn(rows, cols, generator=torch.Generator().manual_seed(0)).to(device)
        return (lambda f: f(x)), softmax
    return make


def swiglu_block(tokens, dim, hidden):
    class SwiGLU(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = torch.nn.RMSNorm(dim)
            self.w1 = torch.nn.Linear(dim, hidden, bias=False)
            self.w3 = torch.nn.Linear(dim, hidden, bias=False)
            self.w2 = torch.nn.Linear(hidden, dim, bias=False)

        def forward(self, x):
            h = self.norm(x)
            return x + self.w2(F.silu(self.w1(h)) * self.w3(h))

    def make(device):
        torch.manual_seed(0)
        block = SwiGLU().to(device)
        x = torch.randn(tokens, dim, device=device, requires_grad=True)

        def run(f):
            f(x).square().mean().backward()
        return run, block
    return make


def example_step(name):
    """examples/train_<name>.py's own training loop with its model compiled
    (the optimizer runs eagerly, as in the example).  The loop cannot be
    called one step at a time, so this case times itself: `timed_loop`."""
    import train_cnn
    import train_gpt
    import train_mlp
    module = {"gpt": train_gpt, "cnn": train_cnn, "mlp": train_mlp}[name]

    def build():
        if name == "gpt":
            _, vocab = train_gpt.make_data(0)
            return train_gpt.build_model(len(vocab), 0)
        return module.build_model(0)
    return ("loop", module, build)


# An example's loop is timed as bench/train.py times it: in windows of
# LOOP_WINDOW steps, synchronising (reading the loss) only at a window's
# end, not after every step.  The examples keep their losses on the device
# and never wait for a step; a sync after each one timed, on an
# asynchronous device, the host issuing the next step's first ops while the
# device sat idle -- a cost the loop does not have and a synchronous CPU
# never pays.  Measured before the change (this file, Zen 3, 2 threads):
# the CNN example's compiled step 13.2-15.2 ms synced per step, 9.2 ms in a
# loop synchronised at its end; Inductor CPU the same either way.
LOOP_WINDOW = 5


def timed_loop(case, device, repeats, compile_model=False, model=None):
    """(median step time, first step time) of the example's loop, with a new
    model (compiled or not) or the given one: two warm-up steps, then
    windows of LOOP_WINDOW steps (at least `repeats` steps in all), each
    window's time over its steps."""
    _, module, build = case
    if model is None:
        model = build()
        if compile_model:
            model = torch.compile(model)
    window = min(LOOP_WINDOW, repeats)
    windows = -(-repeats // window)
    marks = []

    def on_step(step, loss):
        if step == 0 or (step - 1) % window == 0:
            float(loss)  # synchronises: every step up to this one has run
            marks.append(time.perf_counter())

    start = time.perf_counter()
    module.train(device, 2 + window * windows, seed=0, model=model, on_step=on_step)
    steps = [(b - a) / window for a, b in zip(marks[1:], marks[2:])]
    return statistics.median(steps), marks[0] - start


def hf_model(kind, train):
    import transformers as tf
    vocab = 2048

    def make(device):
        common = dict(vocab_size=vocab, hidden_size=256, intermediate_size=1024,
                      num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=512)
        if kind == "gpt2":
            config = tf.GPT2Config(vocab_size=vocab, n_embd=256, n_layer=2, n_head=4, n_positions=512,
                                   bos_token_id=0, eos_token_id=0, resid_pdrop=0.0, embd_pdrop=0.0,
                                   attn_pdrop=0.0)
            cls = tf.GPT2LMHeadModel
        else:
            config = tf.LlamaConfig(**common, num_key_value_heads=2)
            cls = tf.LlamaForCausalLM
        torch.manual_seed(0)
        model = cls(config).to(device).train(train)
        g = torch.Generator().manual_seed(1)
        ids = torch.randint(0, vocab, (8, 128), generator=g).to(device)
        targets = torch.randint(0, vocab, (8 * 128,), generator=g).to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4) if train else None

        def run(f):
            if not train:
                with torch.no_grad():
                    f(input_ids=ids).logits
                return
            opt.zero_grad(set_to_none=True)
            logits = f(input_ids=ids).logits
            F.cross_entropy(logits.reshape(-1, vocab), targets).backward()
            opt.step()
        return run, model
    return make


def cases(quick):
    n = 1 << 20 if quick else 1 << 22
    rows = 1024 if quick else 4096
    return [
        (f"pointwise chain 2^{n.bit_length() - 1}", pointwise_chain(n)),
        (f"layer_norm primitives {rows}x1024", layer_norm_primitives(rows, 1024)),
        (f"softmax primitives {rows}x1024", softmax_primitives(rows, 1024)),
        ("swiglu block fwd+bwd 2048x512", swiglu_block(512 if quick else 2048, 512, 1376)),
        ("gpt example train step", example_step("gpt")),
        ("cnn example train step", example_step("cnn")),
        ("mlp example train step", example_step("mlp")),
        ("hf gpt2 inference", hf_model("gpt2", train=False)),
        ("hf gpt2 train step", hf_model("gpt2", train=True)),
        ("hf llama inference", hf_model("llama", train=False)),
        ("hf llama train step", hf_model("llama", train=True)),
    ]


# ------------------------------------------------------------------ timing
# The machine is noisy (other tenants, frequency changes): a slow phase that
# covers one column's whole block of calls skews a ratio by tens of percent.
# So the columns take turns, in --rounds blocks each (eager neuron, compiled
# neuron, Inductor CPU, then again), and each column's figure is the median
# of all its calls.  Blocks rather than single calls in turn: a call right
# after another column's finds the caches full of that column's data and
# that side's thread team still spinning (measured: LayerNorm 1024x1024
# called in strict alternation reads 0.70 ms on neuron and 0.54 ms on the CPU,
# 0.43 and 0.42 ms each alone), so each block starts with an untimed call.

def timed_call(run, f, device):
    start = time.perf_counter()
    run(f)
    sync(device)
    return time.perf_counter() - start


def compile_times(make, device, repeats):
    """(cold s, warm s, steady callable) for one compiled side: the first
    call's time with an empty cache, then after torch._dynamo.reset() with
    the caches warm; compile time = that call's time less a steady call's
    (estimated from a few calls after it).  The warm compiled function is
    kept for the timed rounds."""
    if isinstance(make, tuple):  # an example's loop
        _, cold = timed_loop(make, device, 3, True)
        torch._dynamo.reset()
        model = make[2]()
        model = torch.compile(model)
        t, warm = timed_loop(make, device, 3, model=model)
        return max(cold - t, 0.0), max(warm - t, 0.0), model
    run, target = make(device)
    cold = timed_call(run, torch.compile(target), device)
    torch._dynamo.reset()
    run, target = make(device)
    f = torch.compile(target)
    warm = timed_call(run, f, device)
    steady = statistics.median(timed_call(run, f, device) for _ in range(3))
    return max(cold - steady, 0.0), max(warm - steady, 0.0), (run, f)


def interleaved(sides, repeats, rounds, loop):
    """Median time of each side over `rounds` blocks in turn.  sides: name ->
    (device, (run, f), fusion) for calls (timing.paired_medians: a block is
    a settle, one untimed call, then at least 20 ms of timed ones), or name
    -> (device, (case, model),
    fusion) for an example's loop (loop=True; a block: a loop of `repeats`
    steps, which times its own steady steps).  fusion: adaptive eager on or
    off during the side's blocks (None: as it is)."""
    if not loop:
        # calls: timing.paired_medians' turns (each at least 20 ms of
        # samples; a block of a few sub-millisecond calls read 0.5-2.3x
        # the other columns from one run to the next)
        before = torch_neuronx.is_adaptive_eager_enabled()
        spec = []
        for device, (run, f), fusion in sides.values():
            mode = before if fusion is None else fusion
            spec.append((lambda run=run, f=f: run(f), device,
                         lambda mode=mode: torch_neuronx.set_adaptive_eager(mode)))
        try:
            # One untimed call per side, then the adaptive-eager groups'
            # background builds are drained: a build (the C compiler,
            # seconds) still running under the timed rounds takes a core
            # from them.  In cold-cache runs the pointwise case's builds
            # slowed the next case's neuron columns up to 10x.
            for fn, device, enter in spec:
                enter()
                fn()
                sync(device)
            torch_neuronx._C._fusion_jit_drain()
            return dict(zip(sides, paired_medians(spec, repeats, rounds)))
        finally:
            torch_neuronx.set_adaptive_eager(before)
    times = {name: [] for name in sides}
    for _ in range(rounds):
        for name, (device, unit, fusion) in sides.items():
            before = torch_neuronx.is_adaptive_eager_enabled()
            if fusion is not None:
                torch_neuronx.set_adaptive_eager(fusion)
            try:
                case, model = unit
                torch_neuronx._C._fusion_jit_drain()  # no build under the timing (above)
                times[name].append(timed_loop(case, device, repeats, model=model)[0])
            finally:
                torch_neuronx.set_adaptive_eager(before)
    return {name: statistics.median(ts) for name, ts in times.items()}


def warm_up_process(*devices):
    """Pays what the first compile of a process pays once (importing Dynamo
    and Inductor, probing the compiler and the vector ISA, the precompiled
    header) on a function of no case, so that "cold" is each case's own
    compile time, on whichever side goes first."""
    for device in devices:
        torch._dynamo.reset()
        torch.compile(lambda t: t * 2 + 1)(torch.ones(64, device=device))
        sync(device)
    torch._dynamo.reset()


def main():
    print(machine(), flush=True)
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="smaller shapes, fewer repeats")
    p.add_argument("--repeats", type=int, default=None)
    p.add_argument("--only", default="", help="keep the cases whose name contains this")
    p.add_argument("--rounds", type=int, default=3,
                   help="blocks per column, taken in turn (see 'timing')")
    a = p.parse_args()
    repeats = a.repeats or (5 if a.quick else 15)
    neuron, cpu = torch.device("neuron"), torch.device("cpu")
    torch_neuronx._C.set_fallback_mode("silent")
    torch_neuronx._C.reset_fallback_stats()

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, torch CPU capability "
          f"{torch.backends.cpu.get_cpu_capability()} (Inductor's C++ for both sides), neuron "
          f"eager kernels TORCHNEURON_ISA={os.environ.get('TORCHNEURON_ISA', 'best')}")
    head = (f"{'case':34} {'eager neu':>10} {'no fusion':>10} {'comp neu':>10} {'ind cpu':>10} "
            f"{'cpu/neu':>8} {'eag/comp':>8} {'nof/comp':>8}  "
            f"{'compile cold/warm s: neuron':>27}  {'cpu':>11}")
    print(head)
    print("-" * len(head))
    warm_up_process(neuron, cpu)
    for name, make in cases(a.quick):
        if a.only not in name:
            continue
        cold_n, warm_n, comp_n = compile_times(make, neuron, repeats)
        cold_c, warm_c, comp_c = compile_times(make, cpu, repeats)
        if isinstance(make, tuple):
            eager_model = make[2]()
            sides = {"eager": (neuron, (make, eager_model), None),
                     "eager_off": (neuron, (make, eager_model), False),
                     "neuron": (neuron, (make, comp_n), None),
                     "cpu": (cpu, (make, comp_c), None)}
        else:
            eager_unit = make(neuron)
            sides = {"eager": (neuron, eager_unit, None), "eager_off": (neuron, eager_unit, False),
                     "neuron": (neuron, comp_n, None), "cpu": (cpu, comp_c, None)}
        t = interleaved(sides, repeats, a.rounds, isinstance(make, tuple))
        eager, off, comp, ind = t["eager"], t["eager_off"], t["neuron"], t["cpu"]
        print(f"{name:34} {eager * 1e3:8.2f}ms {off * 1e3:8.2f}ms {comp * 1e3:8.2f}ms "
              f"{ind * 1e3:8.2f}ms {ind / comp:7.2f}x {eager / comp:7.2f}x {off / comp:7.2f}x  "
              f"{cold_n:13.1f} / {warm_n:5.1f}      {cold_c:5.1f} / {warm_c:4.1f}", flush=True)
        torch._dynamo.reset()
    fallbacks = torch_neuronx._C.fallback_stats()
    print("ops that fell back to the CPU on neuron: " + (", ".join(sorted(fallbacks)) or "none"))


if __name__ == "__main__":
    main()
