"""The ``neuron`` c10d backend (issue 6, first slice).

Importing torchneuron registers it, so the standard APIs work unchanged::

    dist.init_process_group(backend="neuron")            # neuron tensors
    dist.init_process_group(backend="cpu:gloo,neuron:neuron")

The collectives run in the shared-memory engine of ``comm/`` (C) through
``torchneuron/csrc/c10d_neuron.cpp``.  Rendezvous goes through the store c10d
passes to the creator: rank 0 puts a random token there, which names the
job's shared-memory segment (so two jobs or two process groups never meet),
and every rank publishes its host name: ranks on more than one host are not
supported yet (the cross-host path of issue 6).

Environment: ``TORCHNEURON_COMM_CHUNK_BYTES`` sets the engine's slot size
per rank and buffer (default 1 MiB).
"""

from __future__ import annotations

import os
import secrets
import socket

import torch.distributed as dist

from torchneuron import _C

BACKEND_NAME = "neuron"


def _create_backend(store, rank: int, world_size: int, timeout):
    # Each init of this group (same prefix store) gets its own generation,
    # hence its own key, even when an earlier init's keys are still there.
    gen = (store.add("torchneuron/comm/inits", 1) - 1) // world_size
    store.set(f"torchneuron/comm/{gen}/host/{rank}", socket.gethostname())
    key_name = f"torchneuron/comm/{gen}/key"
    if rank == 0:
        store.set(key_name, secrets.token_hex(16))
    key = store.get(key_name).decode()
    hosts = {store.get(f"torchneuron/comm/{gen}/host/{r}").decode() for r in range(world_size)}
    if len(hosts) > 1:
        raise NotImplementedError(
            "neuron backend: ranks on more than one host are not supported yet "
            f"(hosts: {sorted(hosts)})"
        )
    chunk = int(os.environ.get("TORCHNEURON_COMM_CHUNK_BYTES", "0") or 0)
    return _C._create_neuron_backend(key, rank, world_size, timeout, chunk)


def _register() -> None:
    if dist.is_available() and BACKEND_NAME.upper() not in dist.Backend._plugins:
        dist.Backend.register_backend(BACKEND_NAME, _create_backend, devices=["neuron"])


_register()
