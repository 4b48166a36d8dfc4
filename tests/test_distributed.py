"""The `neuron` c10d backend (torch_neuronx/distributed.py, c10d_neuron.cpp,
comm/): every implemented collective and dtype against gloo on CPU copies of
the same inputs, with 2 and 4 ranks (mp.spawn), over both transports (the
shared-memory engine and gloo on host-staged buffers,
TORCHNEURON_COMM_TRANSPORT=gloo); DDP on neuron against single-process
training on the global batch; the communication stream (async_op=True for
every collective kind, wait() ordering the caller's stream without a host
block, overlap with compute, tensors kept alive); complex all_reduce through
the Python API (view_as_real is a native view); faults (mismatched sizes, a
rank that never arrives, a rank that dies) raise instead of hanging, on the
sync, async and blocking-wait paths; a torchrun launch.

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
# The gloo transport stages every dtype through CPU tensors the same way;
# these cover its dtype conversions (int16 goes as int32) and both float
# widths, and keep the test fast.
GLOO_DTYPES = [torch.float32, torch.bfloat16, torch.int64, torch.int16, torch.uint8]
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


def _check_others(rank, world, dtypes=DTYPES):
    for dtype in dtypes:
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


def _check_complex(rank, world):
    # torch.distributed passes view_as_real(t) to the backend: a native view
    # on neuron, so the result lands in t
    x = torch.complex(_input(rank, (6,), torch.float32, 30), _input(rank, (6,), torch.float32, 31))
    xn = x.to("neuron")
    dist.all_reduce(xn)
    ref = x.clone()
    dist.all_reduce(ref)
    _same(xn, ref, "complex all_reduce")


def _check_bool(rank, world):
    # gloo has no bool: a reference from the ranks' seeded inputs (sum, avg,
    # max = or; product, min = and, as NCCL); the gloo transport stages bool
    # as uint8
    masks = [_input(q, (11,), torch.int64, 32) > 0 for q in range(world)]
    any_, all_ = torch.stack(masks).any(0), torch.stack(masks).all(0)
    for op, want in ((dist.ReduceOp.SUM, any_), (dist.ReduceOp.MAX, any_),
                     (dist.ReduceOp.PRODUCT, all_), (dist.ReduceOp.MIN, all_)):
        x = masks[rank].to("neuron")
        dist.all_reduce(x, op=op)
        _same(x, want, f"bool all_reduce {op}")


def _expected_sum(world, shape, dtype, salt):
    return sum(_input(q, shape, dtype, salt).to(torch.float64) for q in range(world)).to(dtype)


def _check_async(rank, world):
    """async_op=True for every collective kind, all issued before any wait;
    references from the other ranks' seeded inputs (no second backend)."""
    f32 = torch.float32
    works, checks = [], []
    x = _input(rank, (1000,), f32, 40).to("neuron")
    works.append(dist.all_reduce(x, async_op=True))
    checks.append((x, _expected_sum(world, (1000,), f32, 40), "all_reduce"))
    b = _input(rank, (7,), f32, 41).to("neuron")
    works.append(dist.broadcast(b, src=0, async_op=True))
    checks.append((b, _input(0, (7,), f32, 41), "broadcast"))
    g_in = _input(rank, (3, 2), f32, 42).to("neuron")
    g_outs = [torch.empty(3, 2, device="neuron") for _ in range(world)]
    works.append(dist.all_gather(g_outs, g_in, async_op=True))
    for q, o in enumerate(g_outs):
        checks.append((o, _input(q, (3, 2), f32, 42), "all_gather"))
    gt = torch.empty(3 * world, 2, device="neuron")
    works.append(dist.all_gather_into_tensor(gt, g_in, async_op=True))
    checks.append((gt, torch.cat([_input(q, (3, 2), f32, 42) for q in range(world)]),
                   "all_gather_into_tensor"))
    rs_in = _input(rank, (world * 4,), f32, 43).to("neuron")
    rs_ref = _expected_sum(world, (world * 4,), f32, 43)[rank * 4:(rank + 1) * 4]
    rs = torch.empty(4, device="neuron")
    works.append(dist.reduce_scatter_tensor(rs, rs_in, async_op=True))
    checks.append((rs, rs_ref, "reduce_scatter_tensor"))
    rsl = torch.empty(4, device="neuron")
    works.append(dist.reduce_scatter(rsl, list(rs_in.chunk(world)), async_op=True))
    checks.append((rsl, rs_ref, "reduce_scatter"))
    r = _input(rank, (5,), f32, 44).to("neuron")
    works.append(dist.reduce(r, dst=0, async_op=True))
    checks.append((r, _expected_sum(world, (5,), f32, 44) if rank == 0 else _input(rank, (5,), f32, 44),
                   "reduce"))
    a_in = _input(rank, (world * 2,), f32, 45).to("neuron")
    a_out = torch.empty(world * 2, device="neuron")
    works.append(dist.all_to_all_single(a_out, a_in, async_op=True))
    checks.append((a_out, torch.cat([_input(q, (world * 2,), f32, 45)[rank * 2:rank * 2 + 2]
                                     for q in range(world)]), "all_to_all_single"))
    l_outs = [torch.empty(2, device="neuron") for _ in range(world)]
    works.append(dist.all_to_all(l_outs, list(a_in.chunk(world)), async_op=True))
    for q, o in enumerate(l_outs):
        checks.append((o, _input(q, (world * 2,), f32, 45)[rank * 2:rank * 2 + 2], "all_to_all"))
    g_list = [torch.empty(3, 2, device="neuron") for _ in range(world)] if rank == 0 else None
    works.append(dist.gather(g_in, g_list, dst=0, async_op=True))
    if rank == 0:
        for q, o in enumerate(g_list):
            checks.append((o, _input(q, (3, 2), f32, 42), "gather"))
    sc = torch.empty(3, device="neuron")
    sc_in = [torch.full((3,), float(j), device="neuron") for j in range(world)] if rank == 0 else None
    works.append(dist.scatter(sc, sc_in, src=0, async_op=True))
    checks.append((sc, torch.full((3,), float(rank)), "scatter"))
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    p_in = _input(rank, (9,), f32, 46).to("neuron")
    p_out = torch.empty(9, device="neuron")
    if rank % 2 == 0:
        works += [dist.isend(p_in, nxt), dist.irecv(p_out, prv)]
    else:
        works += [dist.irecv(p_out, prv), dist.isend(p_in, nxt)]
    checks.append((p_out, _input(prv, (9,), f32, 46), "isend/irecv"))
    works.append(dist.barrier(async_op=True))
    for w in works:
        w.wait()
    for got, want, what in checks:
        _same(got, want, f"async {what}")
    assert all(w.is_completed() for w in works)


def _check_stream_order(rank, world):
    """wait() orders the caller's stream without blocking the host: rank 1
    joins 1 s late, yet rank 0's wait() returns while the collective is still
    pending, and the kernels queued after it see the result."""
    x = torch.full((1 << 16,), float(rank + 1), device="neuron")
    if rank == 1:
        time.sleep(1.0)
    work = dist.all_reduce(x, async_op=True)
    work.wait()
    if rank == 0:
        assert not work.is_completed(), "wait() blocked the host until the collective ended"
    y = x * 2 + 1  # queued behind the collective on this stream
    assert torch.equal(y.cpu(), torch.full((1 << 16,), 2.0 * world * (world + 1) / 2 + 1))
    assert work.is_completed() and work.is_success()
    # the Future's wait() is a stream wait too; then() sees the outputs
    x = torch.ones(5, device="neuron")
    fut = dist.all_reduce(x, async_op=True).get_future().then(lambda f: f.value()[0] * 10)
    assert fut.wait().cpu().tolist() == [10.0 * world] * 5
    # a tensor dropped while its collective is in flight is not reused
    # (record_stream on the communication stream)
    dist.all_reduce(torch.ones(1 << 20, device="neuron"), async_op=True)
    fresh = [torch.full((1 << 20,), 7.0, device="neuron") for _ in range(3)]
    torch.neuron.synchronize()
    for t in fresh:
        assert bool((t == 7.0).all()), "memory of an in-flight collective was reused"


def _check_overlap(rank, world):
    """A large async all_reduce and a big matmul launched behind it: both
    right.  The wall time next to the sum of the two alone is printed, not
    asserted (the machine is shared and has 2 cores)."""
    n = 1 << 22  # 16 MiB
    a = torch.randn(768, 768, device="neuron")

    def comm():
        x = torch.full((n,), float(rank), device="neuron")
        return x, dist.all_reduce(x, async_op=True)

    def compute():
        y = a
        for _ in range(4):
            y = y @ a / 32
        return y

    def timed(fn):
        dist.barrier()
        t0 = time.perf_counter()
        out = fn()
        torch.neuron.synchronize()
        return time.perf_counter() - t0, out

    t_comm, _ = timed(comm)
    t_mm, ref = timed(compute)
    t_both, (x, y) = timed(lambda: (comm()[0], compute()))
    assert torch.equal(x[:8].cpu(), torch.full((8,), float(sum(range(world)))))
    assert bool((x == float(sum(range(world)))).all())
    torch.testing.assert_close(y.cpu(), ref.cpu())
    if rank == 0:
        print(f"overlap: all_reduce {t_comm * 1e3:.1f} ms, matmul {t_mm * 1e3:.1f} ms, "
              f"both {t_both * 1e3:.1f} ms (sum {(t_comm + t_mm) * 1e3:.1f} ms)")


def _worker_2(rank, world, port, transport):
    os.environ["TORCHNEURON_COMM_TRANSPORT"] = transport
    _init(rank, world, port)
    assert dist.get_backend() == "cpu:gloo,neuron:neuron"
    dtypes = DTYPES if transport == "shm" else GLOO_DTYPES
    _check_all_reduce(rank, world, dtypes, OPS, [(7,), (3, 5)])
    _check_others(rank, world, dtypes)
    _check_complex(rank, world)
    _check_bool(rank, world)
    _check_async(rank, world)
    if transport == "shm":
        _check_stream_order(rank, world)
        _check_overlap(rank, world)
        _check_ddp(rank, world)
    dist.destroy_process_group()


def _worker_4(rank, world, port, transport):
    os.environ["TORCHNEURON_COMM_TRANSPORT"] = transport
    _init(rank, world, port)
    dtypes = DTYPES if transport == "shm" else GLOO_DTYPES
    _check_all_reduce(rank, world, dtypes, OPS, [(13,)])
    _check_others(rank, world, dtypes)
    _check_async(rank, world)
    dist.destroy_process_group()


def _worker_faults(rank, world, port, result_dir):
    dist.init_process_group("neuron", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=timedelta(seconds=3))
    assert dist.get_backend() == "neuron"
    t = torch.ones(4 if rank == 0 else 5, device="neuron")
    # sync path: the error surfaces at the next synchronisation of the
    # caller's stream, naming the collective; later collectives of the group
    # raise DistBackendError at once
    dist.all_reduce(t)
    with pytest.raises(RuntimeError, match="all_reduce failed: all_reduce: mismatched"):
        torch.neuron.synchronize()
    with pytest.raises(dist.DistBackendError, match="broadcast: communicator aborted.*mismatched"):
        dist.broadcast(t, src=0)
    # a fresh group with blocking wait: rank 1 never arrives at the
    # all_reduce, rank 0's wait() raises
    os.environ["TORCHNEURON_COMM_BLOCKING_WAIT"] = "1"
    group = dist.new_group(backend="neuron", timeout=timedelta(seconds=3))
    del os.environ["TORCHNEURON_COMM_BLOCKING_WAIT"]
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
    # a rank that dies: on the async path the work completes with the error
    # (no hang) and wait() raises it, naming the collective and the rank
    group = dist.new_group(backend="neuron", timeout=timedelta(seconds=60))
    if rank == 1:
        os._exit(0)
    start = time.monotonic()
    work = dist.broadcast(torch.ones(3, device="neuron"), src=0, group=group, async_op=True)
    while not work.is_completed() and time.monotonic() - start < 30:
        time.sleep(0.01)
    assert work.is_completed() and not work.is_success()
    with pytest.raises(dist.DistBackendError, match="broadcast.*rank 1 .*died"):
        work.wait()
    assert time.monotonic() - start < 30


def _worker_device_order(rank, world, port):
    """Collectives of one group on tensors of another device than the bound
    one still run in issue order (the engine needs every rank's sequence to
    be the same): each all_reduce on neuron:1 runs on that device's
    communication stream, each barrier on neuron:0's.  They had run at once
    on two stream workers, and a barrier overtook an all_reduce ("rank 1
    called barrier while rank 0 called all_reduce")."""
    dist.init_process_group("neuron", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=timedelta(seconds=30),
                            device_id=torch.device("neuron", 0))
    xs = []
    for i in range(20):
        x = torch.full((5,), float(rank + i), device="neuron:1")
        dist.all_reduce(x)
        dist.barrier()
        xs.append(x)
    for i, x in enumerate(xs):
        assert x.cpu().tolist() == [float(sum(r + i for r in range(world)))] * 5, (i, x)
    dist.destroy_process_group()


def test_collectives_on_another_device_keep_issue_order():
    mp.spawn(_worker_device_order, args=(2, _free_port()), nprocs=2)


TRANSPORTS = ["shm", "gloo"]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_collectives_and_ddp_2_ranks(transport):
    mp.spawn(_worker_2, args=(2, _free_port(), transport), nprocs=2)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_collectives_4_ranks(transport):
    mp.spawn(_worker_4, args=(4, _free_port(), transport), nprocs=4)


def test_view_as_real_is_a_view():
    import torch_neuronx

    torch_neuronx._fallback.reset_fallback_stats()
    c = torch.complex(torch.arange(4.0), -torch.arange(4.0)).to("neuron")
    r = torch.view_as_real(c)
    assert r.shape == (4, 2) and r.dtype == torch.float32
    assert r.data_ptr() == c.data_ptr() and r.untyped_storage().data_ptr() == c.untyped_storage().data_ptr()
    r.mul_(2)  # writes through the view
    assert torch.equal(c.cpu(), torch.complex(2 * torch.arange(4.0), -2 * torch.arange(4.0)))
    back = torch.view_as_complex(r)
    assert back.data_ptr() == c.data_ptr() and back.dtype == torch.complex64
    # strided: a column of complex numbers
    full = torch.complex(torch.randn(3, 4), torch.randn(3, 4))
    m = full.to("neuron")[:, 1]
    torch.testing.assert_close(torch.view_as_real(m).cpu(), torch.view_as_real(full[:, 1]))
    assert torch.view_as_real(m).stride() == torch.view_as_real(full[:, 1]).stride() == (8, 1)
    assert not [k for k in torch_neuronx.fallback_stats() if "view_as" in k]


def test_faults_raise_instead_of_hanging(tmp_path):
    mp.spawn(_worker_faults, args=(2, _free_port(), str(tmp_path)), nprocs=2)
    elapsed = float((tmp_path / "elapsed").read_text())
    assert elapsed < 30, f"the missing rank was noticed only after {elapsed:.1f} s"
    assert not [f for f in os.listdir("/dev/shm") if f.startswith("torch_neuronx-comm-")]


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
