"""Runs one `transformers` model (a row of specs.MODELS) on the CPU and on
neuron and compares them.

The model is built on the CPU with a fixed seed, deep-copied to neuron, and
both copies run the same forward + backward (a loss from the logits).  The
model is in eval mode (no dropout: its random masks could not agree across
devices) except its BatchNorm layers, which stay in training mode so that the
batch-statistics path (and its running-stat update) is exercised (unless the
spec says train_batchnorm=False, with its reason).

Moving the model.  The harness does what a user does, `copy.deepcopy(model)
.to("neuron")`.  That must keep tied parameters tied (an LM head sharing the
token embedding, BERT's decoder bias), as cuda does: c10's
TensorImpl::has_compatible_shallow_copy_type counts no PrivateUse1 among the
dense backends, and torch_neuronx's _has_compatible_shallow_copy_type
(ops_train.cpp) adds it.  `move` still counts ties lost (Result.ties_lost,
reported in docs/models.md, asserted 0 by test_models.py) and re-ties them,
so a regression there fails loudly without hiding the comparison below.

Tolerances (float32).  Every compared tensor gets one number, its *scaled
error*  max|neuron - cpu| / max|cpu|  (the error relative to the tensor's own
magnitude, so a gradient of size 1e-6 is judged like one of size 1).  float32
rounds at 6e-8 relative; a sum of K terms computed in another order differs by
about eps * sqrt(K) of its magnitude, and the reductions here (GEMMs, softmax,
norms, the weight gradients over batch * sequence) are at most a few thousand
long, through 2-4 layers, so an honest difference is ~1e-7..1e-5 (seen:
1e-7..1e-6 for most models).  The bounds:
  - logits and loss:            scaled error <= 1e-4
  - every parameter gradient:   scaled error <= 1e-3 (backward goes through
    every layer twice, and small gradients are the differences of large terms)
A gradient smaller than GRAD_FLOOR (1e-3) of the model's largest gradient G is
judged against that floor instead (an absolute error of 1e-6 G): such
gradients (a key projection's bias, a bias followed by batch norm) are
analytically zero, and what either device computes for them is rounding noise,
~eps * G * sqrt(K), of the larger terms that cancel.  And the same parameters
must have a gradient on both (None vs a tensor agrees).  A model whose CPU
logits are ~constant (std <= MIN_LOGITS_STD: activations that vanished with a
small init) is an error, not a match.

Compiled mode (run(spec, compiled=True), tests/models/test_models_compile.py).
The neuron copy is wrapped in `torch.compile(model, backend="neuron")` and
runs the same forward + backward (the loss stays eager; AOTAutograd compiles
the backward), compared against CPU *eager* with the same bounds: Inductor
fuses and reorders float32 work (and keeps float32 intermediates), but sums
no more terms than eager does, so the eps * sqrt(K) argument above holds
unchanged (seen: logits 1e-7..1.4e-6; gradients 3e-7..1e-5, and up to 2e-4 /
3e-4 for mobilenet_v2 / efficientnet, whose training-mode batch norm also
gives eager 6e-5 / 3.5e-4).  Fallbacks are counted as in eager mode (silent mode, per op):
counting, unlike TORCHNEURON_FALLBACK=error, sees every op that fell back,
including ops run eagerly between graphs, and cannot be swallowed by a
try/except in the model or in Dynamo.  Graph breaks are Dynamo's own counter
(`counters["graph_break"]`, one per break met while tracing, as torch's tests
count them), summed after a `torch._dynamo.reset()`; `graphs` is the number
of FX graphs compiled.  `torch._dynamo.explain` would trace the model a
second time for a number that misses breaks in frames Dynamo re-enters.
"""
import contextlib
import copy
import dataclasses
import statistics
import time
import traceback

import torch
import torch_neuronx

LOGITS_TOL = 1e-4
GRAD_TOL = 1e-3
GRAD_FLOOR = 1e-3
MIN_LOGITS_STD = 1e-3  # below this a model's activations vanished: the comparison is void
SEED = 0


@dataclasses.dataclass
class Result:
    name: str
    runs: bool = False
    error: str = ""
    logits_err: float = float("nan")
    loss_err: float = float("nan")
    grad_err: float = float("nan")
    worst_grad: str = ""
    grad_mismatch: str = ""  # set when the parameters with a gradient differ
    ties_lost: int = 0  # tied parameters `.to(device)` made separate (re-tied)
    fallback: dict = dataclasses.field(default_factory=dict)
    bf16_err: float = float("nan")  # logits under bfloat16 autocast (information only)
    bf16_fallback: dict = dataclasses.field(default_factory=dict)
    bf16_error: str = ""
    cpu_s: float = float("nan")
    neuron_s: float = float("nan")
    compiled: bool = False  # the neuron copy ran under torch.compile(backend="neuron")
    graph_breaks: int = 0  # compiled: Dynamo's graph breaks (counters["graph_break"], summed)
    graphs: int = 0  # compiled: FX graphs compiled
    break_reasons: list = dataclasses.field(default_factory=list)  # first line of each reason
    compile_s: float = float("nan")  # compiled: the first forward + backward, compiles included

    @property
    def matches(self):
        return (self.runs and not self.grad_mismatch and self.logits_err <= LOGITS_TOL
                and self.loss_err <= LOGITS_TOL and self.grad_err <= GRAD_TOL)

    @property
    def passes(self):
        """What assert_matches asserts, as a bool."""
        return (self.matches and not self.ties_lost
                and not (self.compiled and self.fallback))

    @property
    def ratio(self):
        """forward+backward time, neuron / cpu (< 1: neuron is faster)."""
        return self.neuron_s / self.cpu_s

    def describe(self):
        if not self.runs:
            return f"{self.name}: error: {self.error}"
        return (f"{self.name}: logits err {self.logits_err:.2e}, loss err {self.loss_err:.2e}, "
                f"worst grad err {self.grad_err:.2e} ({self.worst_grad})"
                + (f", {self.grad_mismatch}" if self.grad_mismatch else "")
                + (f", .to() untied {self.ties_lost} parameter(s)" if self.ties_lost else "")
                + f"; fallback {self.fallback}"
                + (f"; {self.graph_breaks} graph break(s) {self.break_reasons}" if self.compiled else ""))


def assert_matches(result):
    """The checks of a test: the model ran, and matched within the bounds
    (every tie kept); compiled, also with no fallback op (issue 18's "zero
    fallbacks"; eager runs record theirs in docs/models.md instead)."""
    assert result.runs, getattr(result, "traceback", result.error)
    assert not result.grad_mismatch, result.describe()
    assert result.logits_err <= LOGITS_TOL, result.describe()
    assert result.loss_err <= LOGITS_TOL, result.describe()
    assert result.grad_err <= GRAD_TOL, result.describe()
    assert result.ties_lost == 0, result.describe()
    assert not (result.compiled and result.fallback), result.describe()


def scaled_error(actual, expected, floor=0.0):
    actual = actual.detach().cpu().double()
    expected = expected.detach().double()
    if actual.shape != expected.shape:
        return float("inf")
    if expected.numel() == 0:
        return 0.0
    diff = (actual - expected).abs()
    if not torch.isfinite(actual).all() or not torch.isfinite(expected).all():
        same = torch.equal(torch.isfinite(actual), torch.isfinite(expected))
        diff = diff[torch.isfinite(expected)] if same else torch.tensor([float("inf")])
    finite = expected[torch.isfinite(expected)]
    scale = finite.abs().max().item() if finite.numel() else 0.0
    worst = diff.max().item() if diff.numel() else 0.0
    scale = max(scale, floor)
    return worst / scale if scale > 0 else worst


def move(model, device):
    """model.to(device) in place; re-ties the parameters it untied and returns
    how many module attributes had to be re-tied."""
    owners = {}  # id(parameter) -> [(module, attribute name)], ties included
    for module in model.modules():
        for key, p in module._parameters.items():
            if p is not None:
                owners.setdefault(id(p), []).append((module, key))
    model.to(device)
    lost = 0
    for refs in owners.values():
        first = refs[0][0]._parameters[refs[0][1]]
        for module, key in refs[1:]:
            if module._parameters[key] is not first:
                module._parameters[key] = first
                lost += 1
    return lost


def build(spec):
    """The CPU model and its inputs (fixed seeds)."""
    torch.manual_seed(SEED)
    model = spec.model(spec.config())
    model.eval()
    for module in model.modules():
        if spec.train_batchnorm and isinstance(module, torch.nn.modules.batchnorm._BatchNorm):
            module.train()
    inputs = spec.inputs(torch.Generator().manual_seed(SEED + 1))
    return model, inputs


def to_device(inputs, device):
    return {k: v.to(device) for k, v in inputs.items()}


def step(spec, model, inputs):
    """Forward + backward; returns (logits, loss).  Gradients accumulate in
    model's parameters (zero them first)."""
    out = spec.logits(model(**inputs))
    from .specs import cross_entropy
    loss_fn = spec.loss or cross_entropy
    loss = loss_fn(out, torch.Generator().manual_seed(SEED + 2))
    loss.backward()
    return out, loss


def sync(device):
    if device.type != "cpu":
        torch.accelerator.synchronize(device)


def time_one(spec, model, inputs, device):
    model.zero_grad(set_to_none=True)
    sync(device)
    start = time.perf_counter()
    step(spec, model, inputs)
    sync(device)
    return time.perf_counter() - start


def time_both(spec, cpu_run, dev_run, device, repeats):
    """Median seconds of one forward + backward on the CPU and on device,
    after a warm-up run of each; the runs alternate (cpu, device, cpu, ...) so
    that both see the same load on a shared machine."""
    cpu, dev = [], []
    for i in range(repeats + 1):
        c = time_one(spec, *cpu_run, torch.device("cpu"))
        d = time_one(spec, *dev_run, device)
        if i:
            cpu.append(c)
            dev.append(d)
    return statistics.median(cpu), statistics.median(dev)


@contextlib.contextmanager
def counting_fallbacks():
    """Fallback mode silent and fresh counts inside the block; yields a dict
    that holds, after the block (raised or not), {op: calls} that fell back."""
    counts = {}
    previous = torch_neuronx._C.get_fallback_mode()
    torch_neuronx._C.set_fallback_mode("silent")
    torch_neuronx._C.reset_fallback_stats()
    try:
        yield counts
    finally:
        counts.update(sorted(torch_neuronx._C.fallback_stats().items()))
        torch_neuronx._C.set_fallback_mode(previous)


@contextlib.contextmanager
def compiling(result):
    """Dynamo state cleared before and after the block (no graph or counter
    of another model is reused or counted); the block's graph breaks and
    graphs go into result."""
    import torch._dynamo
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    try:
        yield
    finally:
        breaks = counters["graph_break"]
        result.graph_breaks = sum(breaks.values())
        result.break_reasons = sorted({reason.splitlines()[0] for reason in breaks})
        result.graphs = counters["stats"]["unique_graphs"]
        torch._dynamo.reset()


def run_bf16(spec, result, cpu_run, dev_run, device):
    """Forward + backward under bfloat16 autocast on both devices: the ops
    that fell back on device, and the logits' scaled error (not asserted: the
    CPU's autocast lists differ from CUDA's, which neuron's follow)."""
    outs = []
    for (model, inputs), dev in ((cpu_run, torch.device("cpu")), (dev_run, device)):
        model.zero_grad(set_to_none=True)
        fallback = {}
        try:
            with counting_fallbacks() as fallback, torch.autocast(dev.type, dtype=torch.bfloat16):
                out, _ = step(spec, model, inputs)
                sync(dev)
            outs.append(out.float())
        except Exception as exc:
            result.bf16_error = f"{dev.type}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            return
        finally:
            if dev.type != "cpu":
                result.bf16_fallback = fallback
    result.bf16_err = scaled_error(outs[1], outs[0])


def compare_grads(result, cpu_model, dev_model):
    """The worst scaled error over the parameters' gradients (GRAD_FLOOR
    applied) into result, and the parameters with a gradient on one side only."""
    grads = [p.grad.abs().max().item() for p in cpu_model.parameters()
             if p.grad is not None and p.grad.numel()]
    floor = GRAD_FLOOR * max(grads, default=0.0)
    worst, worst_name, missing = 0.0, "", []
    dev_params = dict(dev_model.named_parameters())
    for name, p in cpu_model.named_parameters():
        q = dev_params[name]
        if (p.grad is None) != (q.grad is None):
            missing.append(name)
            continue
        if p.grad is None:
            continue
        err = scaled_error(q.grad, p.grad, floor)
        if not err <= worst:  # also catches nan
            worst, worst_name = err, name
    result.grad_err, result.worst_grad = worst, worst_name
    if missing:
        result.grad_mismatch = "gradient present on one device only: " + ", ".join(missing[:5])


def run(spec, device="neuron", repeats=0, bf16=False, compiled=False):
    """Runs spec on cpu and device; returns a Result.  repeats > 0 also times
    forward+backward (median of `repeats` runs after a warm-up) on both; bf16
    also runs both under bfloat16 autocast (run_bf16).  compiled runs the
    device copy under torch.compile(backend="neuron") against CPU eager (the
    module docstring); it times the first, compiling, call instead."""
    if compiled and (repeats or bf16):
        raise ValueError("compiled=True times the compiling call only: no repeats, no bf16")
    result = Result(spec.name, compiled=compiled)
    device = torch.device(device)
    try:
        cpu_model, cpu_inputs = build(spec)
        dev_model = copy.deepcopy(cpu_model)
        result.ties_lost = move(dev_model, device)
        dev_inputs = to_device(cpu_inputs, device)
        cpu_out, cpu_loss = step(spec, cpu_model, cpu_inputs)
        spread = cpu_out.detach().float().std().item() if cpu_out.numel() > 1 else 0.0
        if not spread > MIN_LOGITS_STD:
            raise ValueError(f"degenerate model: the CPU's logits have a standard deviation of "
                             f"{spread:.1e}, nothing to compare (fix its config)")

        with contextlib.ExitStack() as stack:
            result.fallback = stack.enter_context(counting_fallbacks())  # filled on exit
            runner = dev_model
            if compiled:
                stack.enter_context(compiling(result))
                runner = torch.compile(dev_model, backend="neuron")
            start = time.perf_counter()
            try:
                dev_out, dev_loss = step(spec, runner, dev_inputs)
                sync(device)
            finally:
                result.compile_s = time.perf_counter() - start if compiled else float("nan")
        result.runs = True

        result.logits_err = scaled_error(dev_out, cpu_out)
        result.loss_err = scaled_error(dev_loss, cpu_loss)
        compare_grads(result, cpu_model, dev_model)

        if bf16:
            run_bf16(spec, result, (cpu_model, cpu_inputs), (dev_model, dev_inputs), device)
        if repeats:
            with counting_fallbacks():
                result.cpu_s, result.neuron_s = time_both(
                    spec, (cpu_model, cpu_inputs), (dev_model, dev_inputs), device, repeats)
    except Exception as exc:  # a model that does not run is a result, not a crash
        result.error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        result.traceback = traceback.format_exc()
    return result
