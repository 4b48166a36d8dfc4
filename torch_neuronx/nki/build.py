"""Compiling generated kernels: the system C++ compiler, a disk cache keyed by
sha256(source, runtime header, compiler version, flags, CPU), written by
atomic rename under a file lock, and loading through ctypes.

Inductor's CppCodeCache is not reused: importing torch._inductor costs
seconds, which would be most of a first NKI call, and its key and flags are
Inductor's (OpenMP, ATen headers) where ours need neither.
"""
from __future__ import annotations

import ctypes
import fcntl
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile

HEADER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nki_rt.h")
FLAGS = ["-O3", "-std=c++17", "-shared", "-fPIC", "-fno-math-errno", "-fno-trapping-math",
         "-fopenmp-simd", "-w"]
# The instruction set follows the kernels' (nk_cpu_isa, capped by
# TORCHNEURON_ISA): `make test-avx2` then builds AVX2 code on an AVX-512 CPU.
ARCH = {2: ["-march=native", "-mprefer-vector-width=512"], 1: ["-march=haswell", "-mtune=native"],
        0: ["-march=x86-64", "-mtune=native"]}


def flags():
    return FLAGS + ARCH[runtime_symbols()[1]]


def cache_dir():
    d = os.environ.get("TORCHNEURON_NKI_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "torch_neuronx", "nki")
    os.makedirs(d, exist_ok=True)
    return d


@functools.lru_cache(None)
def compiler():
    """(path, version) of the C++ compiler, or None (kernels then run on the
    table-driven executor)."""
    cxx = os.environ.get("CXX") or "g++"
    path = shutil.which(cxx)
    if path is None or os.environ.get("TORCHNEURON_NKI_NO_COMPILER") == "1":
        return None
    try:
        ver = subprocess.run([path, "--version"], capture_output=True, text=True,
                             timeout=30).stdout.splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return None
    return path, ver


@functools.lru_cache(None)
def _cpu_key():
    flags = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = line
                    break
    except OSError:
        pass
    return hashlib.sha256(flags.encode()).hexdigest()[:16] + f";isa={runtime_symbols()[1]}"


@functools.lru_cache(None)
def _header():
    with open(HEADER, "rb") as f:
        return f.read()


def key(source):
    cc = compiler()
    h = hashlib.sha256()
    for part in (source.encode(), _header(), cc[1].encode(), " ".join(flags()).encode(),
                 _cpu_key().encode()):
        h.update(part)
        h.update(b"\0")
    return h.hexdigest()


def compile_source(source):
    """Path of the shared library built from source (cached on disk)."""
    cc = compiler()
    d = cache_dir()
    k = key(source)
    so = os.path.join(d, k + ".so")
    if os.path.exists(so):
        return so
    with open(os.path.join(d, ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if os.path.exists(so):
                return so
            with tempfile.TemporaryDirectory(dir=d) as tmp:
                src = os.path.join(tmp, "kernel.cpp")
                with open(src, "w") as f:
                    f.write(source)
                out = os.path.join(tmp, "kernel.so")
                cmd = [cc[0], *flags(), "-I", os.path.dirname(HEADER), src, "-o", out]
                r = subprocess.run(cmd, capture_output=True, text=True)
                if r.returncode != 0:
                    raise RuntimeError("compiling an NKI kernel failed (a bug in "
                                       f"torch_neuronx.nki's C lowering):\n{r.stderr[-4000:]}")
                with open(os.path.join(d, k + ".cpp"), "w") as f:
                    f.write(source)  # kept beside the library, for reading
                os.replace(out, so)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return so


@functools.lru_cache(None)
def runtime_symbols():
    """(nrt_parallel_for, isa, micro-kernel, MR, NR) from the loaded _C."""
    from torch_neuronx import _C

    lib = ctypes.CDLL(_C.__file__)

    def addr(name):
        return ctypes.cast(getattr(lib, name), ctypes.c_void_p).value

    lib.nk_cpu_isa.restype = ctypes.c_int
    isa = lib.nk_cpu_isa()
    if isa >= 2:
        ukr, mr, nr = addr("nk_gemm_ukr_avx512_f32"), 12, 32
    elif isa == 1:
        ukr, mr, nr = addr("nk_gemm_ukr_avx2_f32"), 6, 16
    else:
        ukr, mr, nr = None, 0, 0
    return addr("nrt_parallel_for"), isa, ukr, mr, nr


class Library:
    """A loaded kernel library: entry points for the stream task and for
    direct (CPU tensor) calls."""

    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        pfor, _, ukr, mr, nr = runtime_symbols()
        self.lib.nki_init.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
        self.lib.nki_init(pfor, ukr, mr, nr)
        self.lib.nki_run.restype = ctypes.c_char_p
        self.lib.nki_run.argtypes = [ctypes.POINTER(ctypes.c_uint64)]
        self.entry = ctypes.cast(self.lib.neuron_entry, ctypes.c_void_p).value

    def run(self, pointers):
        """Runs on this thread (CPU tensors); returns an error message or None."""
        arr = (ctypes.c_uint64 * max(1, len(pointers)))(*pointers)
        err = self.lib.nki_run(arr)
        return err.decode() if err else None
