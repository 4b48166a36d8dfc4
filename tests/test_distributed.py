"""The `neuron` c10d backend (torchneuron/distributed.py, c10d_neuron.cpp,
comm/): every implemented collective and dtype against gloo on CPU copies of
the same inputs, with 2 and 4 ranks (mp.spawn); DDP on neuron against
single-process training on the global batch; faults (mismatched sizes, a rank
that never arrives, a rank that dies) raise instead of hanging; a torchrun
launch.

Inputs are small integers, so every reduction is exact in every dtype and
the results must be equal, whatever order either backend reduces in."""

import os
import socket
import time
import warnings
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

pytestmark = pytest.mark.skipif(not dist.is_available(), reason="torch without distributed")

DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int64, torch.int32,
          torch.int16, torch.int8, torch.uint8]
OPS = [dist.ReduceOp.SUM, dist.ReduceOp.AVG, dist.ReduceOp.PRODUCT, dist.ReduceOp.MIN,
       dist.ReduceOp.MAX]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _init(rank, world, port, timeout=30):
    dist.init_process_group("cpu:gloo,neuron:neuron", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=world, timeout=timedelta(seconds=timeout))


def _input(rank, shape, dtype, salt=0):
    g = torch.Generator().manual_seed(1000 * rank + salt)
    lo = 0 if dtype == torch.uint8 else -3
    return torch.randint(lo, 4, shape, generator=g).to(dtype)


def _g(x):
    """A CPU copy gloo can take: gloo has no int16, so int16 goes as int32
    (the small inputs make that exact); _same casts back."""
    return x.to(torch.int32) if x.dtype == torch.int16 else x.clone()


def _same(neuron_result, cpu_result, what):
    torch.testing.assert_close(neuron_result.cpu(), cpu_result.to(neuron_result.dtype), rtol=0,
                               atol=0, msg=what)


def _check_all_reduce(rank, world, dtypes, ops, shapes):
    for dtype in dtypes:
        for op in ops:
            for salt, shape in enumerate(shapes):
                x = _input(rank, shape, dtype, salt)
                xn = x.to("neuron")
                dist.all_reduce(xn, op=op)
                if op == dist.ReduceOp.AVG:  # gloo has no AVG: sum, then divide like the engine
                    ref = _g(x)
                    dist.all_reduce(ref, op=dist.ReduceOp.SUM)
                    ref = ref / world if dtype.is_floating_point else torch.div(
                        ref, world, rounding_mode="trunc")
                else:
                    ref = _g(x)
                    dist.all_reduce(ref, op=op)
                _same(xn, ref, f"all_reduce {dtype} {op} {shape}")


def _check_others(rank, world):
    for dtype in DTYPES:
        # broadcast from the last rank
        x = _input(rank, (5, 3), dtype, 7)
        xn = x.to("neuron")
        dist.broadcast(xn, src=world - 1)
        ref = _g(x)
        dist.broadcast(ref, src=world - 1)
        _same(xn, ref, f"broadcast {dtype}")
        # all_gather (list) and all_gather_into_tensor
        x = _input(rank, (4, 5), dtype, 8)
        outs = [torch.empty(4, 5, dtype=dtype, device="neuron") for _ in range(world)]
        dist.all_gather(outs, x.to("neuron"))
        refs = [_g(torch.empty(4, 5, dtype=dtype)) for _ in range(world)]
        dist.all_gather(refs, _g(x))
        for o, r in zip(outs, refs):
            _same(o, r, f"all_gather {dtype}")
        out = torch.empty(4 * world, 5, dtype=dtype, device="neuron")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            dist.all_gather_into_tensor(out, x.to("neuron"))
        _same(out, torch.cat(refs), f"all_gather_into_tensor {dtype}")
        # reduce_scatter (list) and reduce_scatter_tensor, sum: reference is
        # gloo's all_reduce of the whole input, this rank's block
        inp = _input(rank, (world * 3, 2), dtype, 9)
        ref = _g(inp)
        dist.all_reduce(ref)
        ref = ref[rank * 3:(rank + 1) * 3]
        out = torch.empty(3, 2, dtype=dtype, device="neuron")
        dist.reduce_scatter_tensor(out, inp.to("neuron"))
        _same(out, ref, f"reduce_scatter_tensor {dtype}")
        out = torch.empty(3, 2, dtype=dtype, device="neuron")
        dist.reduce_scatter(out, list(inp.to("neuron").chunk(world)))
        _same(out, ref, f"reduce_scatter {dtype}")
        # reduce to rank 0
        x = _input(rank, (6,), dtype, 10)
        xn = x.to("neuron")
        dist.reduce(xn, dst=0)
        ref = _g(x)
        dist.all_reduce(ref)
        _same(xn, ref if rank == 0 else x, f"reduce {dtype}")
    # all_to_all_single: even, and uneven splits (some empty)
    for dtype in (torch.float32, torch.bfloat16, torch.int64, torch.int16):
        x = _input(rank, (world * 2, 3), dtype, 15)
        out = torch.empty_like(x, device="neuron")
        dist.all_to_all_single(out, x.to("neuron"))
        ref = torch.empty_like(_g(x))
        dist.all_to_all_single(ref, _g(x))
        _same(out, ref, f"all_to_all_single {dtype}")
        in_splits = [(rank + j) % 3 for j in range(world)]
        out_splits = [(q + rank) % 3 for q in range(world)]
        x = _input(rank, (sum(in_splits), 2), dtype, 16)
        out = torch.empty(sum(out_splits), 2, dtype=dtype, device="neuron")
        dist.all_to_all_single(out, x.to("neuron"), out_splits, in_splits)
        ref = torch.empty(sum(out_splits), 2, dtype=_g(x).dtype)
        dist.all_to_all_single(ref, _g(x), out_splits, in_splits)
        _same(out, ref, f"all_to_all_single uneven {dtype}")
    # all_to_all (lists, uneven: gloo takes only equal sizes, so the reference
    # is what rank q sends here, regenerated from its seed)
    ins = [_input(rank, (j + 1,), torch.float32, 17 + j) for j in range(world)]
    outs = [torch.empty(rank + 1, device="neuron") for _ in range(world)]
    dist.all_to_all(outs, [t.to("neuron") for t in ins])
    for q, o in enumerate(outs):
        _same(o, _input(q, (rank + 1,), torch.float32, 17 + rank), "all_to_all")
    # premul_sum (factor as a float and as a tensor): factor * sum
    for factor in (0.5, torch.tensor(3.0)):
        x = _input(rank, (9,), torch.float32, 20)
        xn = x.to("neuron")
        dist.all_reduce(xn, op=dist._make_nccl_premul_sum(factor))
        ref = x.clone()
        dist.all_reduce(ref)
        _same(xn, ref * factor, "all_reduce premul_sum")
        out = torch.empty(3, device="neuron")
        inp = _input(rank, (3 * world,), torch.float32, 21)
        dist.reduce_scatter_tensor(out, inp.to("neuron"), op=dist._make_nccl_premul_sum(factor))
        ref = inp.clone()
        dist.all_reduce(ref)
        _same(out, ref[rank * 3:(rank + 1) * 3] * factor, "reduce_scatter_tensor premul_sum")
    # gather to / scatter from the last rank
    root = world - 1
    x = _input(rank, (3, 2), torch.float32, 18)
    outs = [torch.empty(3, 2, device="neuron") for _ in range(world)] if rank == root else None
    dist.gather(x.to("neuron"), outs, dst=root)
    refs = [torch.empty(3, 2) for _ in range(world)] if rank == root else None
    dist.gather(x, refs, dst=root)
    if rank == root:
        for o, r in zip(outs, refs):
            _same(o, r, "gather")
    ins = [_input(rank, (2, 5), torch.int64, 19 + j) for j in range(world)]
    out = torch.empty(2, 5, dtype=torch.int64, device="neuron")
    dist.scatter(out, [t.to("neuron") for t in ins] if rank == root else None, src=root)
    ref = torch.empty(2, 5, dtype=torch.int64)
    dist.scatter(ref, ins if rank == root else None, src=root)
    _same(out, ref, "scatter")
    # send/recv around the ring (even ranks send first), several slots long
    if world > 1:
        nxt, prv = (rank + 1) % world, (rank - 1) % world
        x = _input(rank, (300_001,), torch.float32, 22).to("neuron")
        got = torch.empty(300_001, device="neuron")
        if rank % 2 == 0:
            dist.send(x, dst=nxt)
            dist.recv(got, src=prv)
        else:
            dist.recv(got, src=prv)
            dist.send(x, dst=nxt)
        _same(got, _input(prv, (300_001,), torch.float32, 22), "send/recv")
        # batch_isend_irecv: everyone sends first, 4 MB (many channel slots):
        # progressed together, so no deadlock
        big = _input(rank, (1_000_003,), torch.float32, 23).to("neuron")
        got = torch.empty(1_000_003, device="neuron")
        reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, big, nxt),
                                       dist.P2POp(dist.irecv, got, prv)])
        for r in reqs:
            r.wait()
        _same(got, _input(prv, (1_000_003,), torch.float32, 23), "batch_isend_irecv")
        # isend/irecv return works that wait() on
        y = torch.empty(4, 3, device="neuron").t()
        if rank == 0:
            dist.isend(torch.arange(12.0, device="neuron").view(3, 4), dst=1).wait()
        elif rank == 1:
            dist.irecv(y, src=0).wait()
            _same(y, torch.arange(12.0).view(3, 4), "irecv non-contiguous")
    # non-contiguous, multi-chunk (> 1 MiB per rank) and async_op forms
    x = _input(rank, (40, 30), torch.float32, 11).t()
    xn = x.to("neuron")
    assert not xn.is_contiguous()
    ref = _g(x)
    dist.all_reduce(ref)
    dist.all_reduce(xn)
    _same(xn, ref, "all_reduce non-contiguous")
    x = _input(rank, (700_001,), torch.float32, 12)
    xn = x.to("neuron")
    ref = _g(x)
    dist.all_reduce(ref)
    work = dist.all_reduce(xn, async_op=True)
    work.wait()
    _same(xn, ref, "all_reduce 700001 elements")
    fut = dist.all_reduce(xn, async_op=True).get_future()
    assert torch.equal(fut.wait()[0].cpu(), ref * world)
    # results feed later kernels on the stream in order
    y = torch.ones(8, device="neuron") * (rank + 1)
    dist.all_reduce(y)
    assert (y * 2).cpu().tolist() == [world * (world + 1)] * 8
    dist.barrier()


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.fc2 = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def _train_losses(model, xs, ys, steps, lr=0.1):
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(xs), ys)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return losses


def _check_ddp(rank, world):
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)
    base = _Net()
    g = torch.Generator().manual_seed(123)
    xs = torch.randn(8 * world, 8, generator=g)
    ys = torch.randn(8 * world, 4, generator=g)
    steps = 5
    # single process, global batch
    ref_model = _Net().to("neuron")
    ref_model.load_state_dict(base.state_dict())
    ref = [float(l) for l in _train_losses(ref_model, xs.to("neuron"), ys.to("neuron"), steps)]
    # DDP, this rank's shard; the global loss is the mean of the ranks' losses
    model = _Net().to("neuron")
    model.load_state_dict(base.state_dict())
    if rank == 1:  # DDP must broadcast rank 0's parameters
        with torch.no_grad():
            for p in model.parameters():
                p.add_(1.0)
    ddp = DDP(model)
    lo, hi = rank * 8, (rank + 1) * 8
    local = _train_losses(ddp, xs[lo:hi].to("neuron"), ys[lo:hi].to("neuron"), steps)
    got = []
    for l in local:
        l = l.clone()
        dist.all_reduce(l, op=dist.ReduceOp.AVG)
        got.append(float(l))
    for step, (a, b) in enumerate(zip(got, ref)):
        assert abs(a - b) <= 1e-5 * abs(b), f"step {step}: DDP loss {a} vs single-process {b}"
    for p, q in zip(model.parameters(), ref_model.parameters()):
        torch.testing.assert_close(p.cpu(), q.cpu(), rtol=1e-5, atol=1e-6)


def _worker_2(rank, world, port):
    _init(rank, world, port)
    assert dist.get_backend() == "cpu:gloo,neuron:neuron"
    _check_all_reduce(rank, world, DTYPES, OPS, [(7,), (3, 5)])
    _check_others(rank, world)
    _check_ddp(rank, world)
    dist.destroy_process_group()


def _worker_4(rank, world, port):
    _init(rank, world, port)
    _check_all_reduce(rank, world, DTYPES, OPS, [(13,)])
    _check_others(rank, world)
    dist.destroy_process_group()


def _worker_faults(rank, world, port, result_dir):
    dist.init_process_group("neuron", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=timedelta(seconds=3))
    assert dist.get_backend() == "neuron"
    t = torch.ones(4 if rank == 0 else 5, device="neuron")
    with pytest.raises(dist.DistBackendError, match="all_reduce: mismatched"):
        dist.all_reduce(t)
    # a fresh group: rank 1 never arrives at the all_reduce
    group = dist.new_group(backend="neuron", timeout=timedelta(seconds=3))
    if rank == 0:
        t = torch.ones(4, device="neuron")
        start = time.monotonic()
        with pytest.raises(dist.DistBackendError, match="all_reduce.*timed out"):
            dist.all_reduce(t, group=group)
        elapsed = time.monotonic() - start
        open(os.path.join(result_dir, "elapsed"), "w").write(str(elapsed))
    else:
        time.sleep(5)
    # collectives that are not implemented yet say so, naming the collective
    with pytest.raises(RuntimeError, match="does not support recvAnysource"):
        dist.recv(torch.empty(2, device="neuron"))
    # a neuron backend is only for neuron tensors
    with pytest.raises(RuntimeError):
        dist.all_reduce(torch.ones(2))
    # a rank that dies: the other raises at once, naming it
    group = dist.new_group(backend="neuron", timeout=timedelta(seconds=60))
    if rank == 1:
        os._exit(0)
    start = time.monotonic()
    with pytest.raises(dist.DistBackendError, match="broadcast.*rank 1 .*died"):
        dist.broadcast(torch.ones(3, device="neuron"), src=0, group=group)
    assert time.monotonic() - start < 30


def test_collectives_and_ddp_2_ranks():
    mp.spawn(_worker_2, args=(2, _free_port()), nprocs=2)


def test_collectives_4_ranks():
    mp.spawn(_worker_4, args=(4, _free_port()), nprocs=4)


def test_faults_raise_instead_of_hanging(tmp_path):
    mp.spawn(_worker_faults, args=(2, _free_port(), str(tmp_path)), nprocs=2)
    elapsed = float((tmp_path / "elapsed").read_text())
    assert elapsed < 30, f"the missing rank was noticed only after {elapsed:.1f} s"
    assert not [f for f in os.listdir("/dev/shm") if f.startswith("torchneuron-comm-")]


_TORCHRUN_SCRIPT = """
import os, sys, torch, torch.distributed as dist
local_rank = int(os.environ["LOCAL_RANK"])
dist.init_process_group(backend="neuron", device_id=torch.device("neuron", 0))
t = torch.full((5,), float(dist.get_rank() + 1), device="neuron")
dist.all_reduce(t)
dist.barrier()
assert t.cpu().tolist() == [3.0] * 5, t
assert dist.get_backend() == "neuron"
dist.destroy_process_group()
open(os.path.join(sys.argv[1], f"ok{local_rank}"), "w").close()
"""


def test_torchrun(tmp_path):
    """Launched as users do: torchrun, backend="neuron", device_id."""
    import subprocess
    import sys

    script = tmp_path / "train.py"
    script.write_text(_TORCHRUN_SCRIPT)
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
         f"--master_port={_free_port()}", str(script), str(tmp_path)],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "ok0").exists() and (tmp_path / "ok1").exists()
