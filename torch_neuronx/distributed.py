"""The ``neuron`` c10d backend (issue 6, first slice).

Importing torch_neuronx registers it, so the standard APIs work unchanged::

    dist.init_process_group(backend="neuron")            # neuron tensors
    dist.init_process_group(backend="cpu:gloo,neuron:neuron")

The collectives run in the shared-memory engine of ``comm/`` (C) through
``torch_neuronx/csrc/c10d_neuron.cpp``.  Rendezvous goes through the store c10d
passes to the creator: rank 0 puts a random token there, which names the
job's shared-memory segment (so two jobs or two process groups never meet),
and every rank publishes its host name.

Transports: when every rank is on this host the collectives run in the
shared-memory engine; when the ranks span several hosts (or with
``TORCHNEURON_COMM_TRANSPORT=gloo``) the backend stages through CPU tensors
and runs torch's own ProcessGroupGloo, created here from the same store under
its own prefix and handed to the C++ backend (which keeps the communication
stream, the async Work and the error handling of the shared-memory path: only
the transport differs).  The choice is made in Python because creating a
ProcessGroupGloo (its device, its options) is a Python-level c10d API.

Environment: ``TORCHNEURON_COMM_CHUNK_BYTES`` sets the engine's slot size
per rank and buffer (default 1 MiB); ``TORCHNEURON_COMM_TRANSPORT`` (``shm``
or ``gloo``; default: shm on one host, gloo across hosts);
``TORCHNEURON_COMM_BLOCKING_WAIT=1`` makes ``Work.wait()`` block the host
until the collective is done and raise its error there (like
``TORCH_NCCL_BLOCKING_WAIT``), instead of only ordering the caller's stream.
"""

from __future__ import annotations

import os
import secrets
import socket

import torch.distributed as dist

from torch_neuronx import _C

BACKEND_NAME = "neuron"


def _create_backend(store, rank: int, world_size: int, timeout):
    # Each init of this group (same prefix store) gets its own generation,
    # hence its own key, even when an earlier init's keys are still there.
    gen = (store.add("torch_neuronx/comm/inits", 1) - 1) // world_size
    store.set(f"torch_neuronx/comm/{gen}/host/{rank}", socket.gethostname())
    key_name = f"torch_neuronx/comm/{gen}/key"
    if rank == 0:
        store.set(key_name, secrets.token_hex(16))
    key = store.get(key_name).decode()
    hosts = {store.get(f"torch_neuronx/comm/{gen}/host/{r}").decode() for r in range(world_size)}
    blocking = os.environ.get("TORCHNEURON_COMM_BLOCKING_WAIT", "0") not in ("", "0")
    if _transport(len(hosts)) == "gloo":
        host_store = dist.PrefixStore(f"torch_neuronx/gloo/{gen}", store)
        gloo = dist.ProcessGroupGloo(host_store, rank, world_size, timeout)
        return _C._create_neuron_backend_over(gloo, rank, world_size, timeout, blocking)
    chunk = int(os.environ.get("TORCHNEURON_COMM_CHUNK_BYTES", "0") or 0)
    return _C._create_neuron_backend(key, rank, world_size, timeout, chunk, blocking)


def _transport(n_hosts: int) -> str:
    choice = os.environ.get("TORCHNEURON_COMM_TRANSPORT", "").strip().lower()
    if choice not in ("", "shm", "gloo"):
        raise ValueError(f"TORCHNEURON_COMM_TRANSPORT must be shm or gloo, got {choice!r}")
    if n_hosts > 1:
        if choice == "shm":
            raise ValueError("neuron backend: the shm transport needs every rank on one host")
        return "gloo"
    return choice or "shm"


def _register() -> None:
    if dist.is_available() and BACKEND_NAME.upper() not in dist.Backend._plugins:
        dist.Backend.register_backend(BACKEND_NAME, _create_backend, devices=["neuron"])


_register()
