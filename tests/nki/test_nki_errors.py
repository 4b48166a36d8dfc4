"""Bad kernels raise Python exceptions naming the kernel's file:line; no load
or store ever leaves its tensor."""
import inspect
import re

import pytest
import nki_testutil  # noqa: F401  (examples/nki on sys.path)
import torch

from torch_neuronx import nki
import torch_neuronx.nki.isa as nisa
import torch_neuronx.nki.language as nl
from torch_neuronx.nki import NKIError


def where(fn, marker="# <-"):
    lines, start = inspect.getsourcelines(fn.__wrapped__ if hasattr(fn, "__wrapped__") else fn)
    for i, line in enumerate(lines):
        if marker in line:
            return f"{__file__}:{start + i}"
    raise AssertionError("marker not found")


def raises_at(exc, kernel, *args, grid=(1,), match="", **kw):
    with pytest.raises(exc) as e:
        kernel[grid](*args, **kw)
    msg = str(e.value)
    assert msg.startswith(where(kernel)), msg
    assert re.search(match, msg), msg
    return msg


@nki.jit
def unmasked_tail(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    ix, iy = nl.mgrid[0:128, 0:a.shape[1]]
    for i in nl.affine_range((a.shape[0] + 127) // 128):
        t = nl.load(a[i * 128 + ix, iy])  # <-
        nl.store(out[i * 128 + ix, iy], t)
    return out


def test_load_past_the_end_is_an_error():
    raises_at(IndexError, unmasked_tail, torch.randn(300, 8), match="out of bounds.*mask")


@nki.jit
def grid_store(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    ix, iy = nl.mgrid[0:128, 0:8]
    t = nl.load(a[nl.program_id(0) * 128 + ix, iy], mask=(nl.program_id(0) * 128 + ix < 256))
    nl.store(out[nl.program_id(0) * 128 + ix, iy], t)  # <-
    return out


def test_store_out_of_bounds_for_some_program():
    msg = raises_at(IndexError, grid_store, torch.randn(256, 8, device="neuron"), grid=(3,),
                    match=r"program \(2,\)")
    assert "store" in msg


@nki.jit
def too_many_partitions(a):
    t = nl.ndarray((256, 4), dtype=nl.float32, buffer=nl.sbuf)  # <-
    return a


def test_partition_limit():
    raises_at(NKIError, too_many_partitions, torch.randn(4), match="pmax")


@nki.jit
def big_moving(a, b):
    out = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.shared_hbm)
    x, y = nl.load(a), nl.load(b)
    p = nisa.nc_matmul(x, y)  # <-
    nl.store(out, p)
    return out


def test_matmul_moving_limit():
    raises_at(NKIError, big_moving, torch.randn(128, 128), torch.randn(128, 1024),
              match=r"128, 512")


@nki.jit
def psum_hog(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    tiles = []
    for i in range(9):
        tiles.append(nl.zeros((128, 512), nl.float32, buffer=nl.psum))  # <-
    acc = tiles[0]
    for t in tiles[1:]:
        acc = acc + t
    nl.store(out, acc)
    return out


def test_psum_capacity():
    raises_at(NKIError, psum_hog, torch.randn(1), match="PSUM")


@nki.jit
def sbuf_hog(a):
    x = nl.load(a[:, 0:40000])
    y = nl.exp(x)  # <-
    z = x + y
    nl.store(a[:, 0:40000], z)


def test_sbuf_capacity():
    raises_at(NKIError, sbuf_hog, torch.randn(128, 40000), match="SBUF")


@nki.jit
def pid_branch(a):
    if nl.program_id(0) == 0 or nl.program_id(0) > 0:  # <-
        pass
    return a


def test_program_id_in_python_control_flow():
    raises_at(NKIError, pid_branch, torch.randn(4), grid=(2,), match="control flow")


@nki.jit
def partition_reduce(a):
    out = nl.ndarray((1, 8), dtype=a.dtype, buffer=nl.shared_hbm)
    s = nl.sum(nl.load(a), axis=0)  # <-
    nl.store(out, s)
    return out


def test_reduction_over_partitions():
    raises_at(NKIError, partition_reduce, torch.randn(8, 8), match="free axes")


@nki.jit
def hbm_math(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.exp(a))  # <-
    return out


def test_compute_on_hbm():
    raises_at(NKIError, hbm_math, torch.randn(8, 8), match="nl.load")


@nki.jit
def slice_past_tile(a):
    t = nl.load(a)
    nl.store(a, t[:, 4:12])  # <-


def test_tile_slice_bounds():
    raises_at(IndexError, slice_past_tile, torch.randn(8, 8), match="out of bounds")


def test_error_after_a_bad_call_leaves_the_device_working():
    with pytest.raises(IndexError):
        unmasked_tail(torch.randn(300, 8, device="neuron"))
    x = torch.randn(4, device="neuron")
    torch.testing.assert_close((x + 1).cpu(), x.cpu() + 1)


@nki.op("nki_tests::bad_inplace", mutates_args=())
def bad_inplace(a: torch.Tensor) -> torch.Tensor:
    return writes_input(a)


@nki.op("nki_tests::good_inplace", mutates_args=("a",))
def good_inplace(a: torch.Tensor) -> None:
    writes_input(a)


@nki.jit
def writes_input(a):
    t = nl.load(a)
    nl.store(a, t * 2.0)  # <-
    return a


def test_undeclared_mutation_is_an_error():
    a = torch.ones(4, 4, device="neuron")
    with pytest.raises(RuntimeError, match=re.escape(where(writes_input)) + ".*mutates_args"):
        bad_inplace(a)
    good_inplace(a)
    torch.testing.assert_close(a.cpu(), torch.full((4, 4), 2.0))
