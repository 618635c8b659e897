"""How the ranks of one node meet, both sides: the runner gives each rank its place and a store
file in the run directory; the worker forms its process group through that file (``FileStore``),
so no rendezvous port listens on any interface, and NCCL's and gloo's own sockets stay on the
loopback interface unless the environment names another. Several nodes meet under torchrun
(``MASTER_ADDR``/``MASTER_PORT``) instead. No torch imported here.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

STORE_ENV = "VLLM_DOCTOR_STORE_FILE"


def node_env(env: dict[str, str]) -> None:
    """One node: NCCL's bootstrap and gloo's connections on loopback, no torchrun address (the
    ranks meet through the run directory's store file)."""
    env.setdefault("NCCL_SOCKET_IFNAME", "lo")
    env.setdefault("GLOO_SOCKET_IFNAME", "lo")
    for name in ("MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID"):
        env.pop(name, None)


def store_file(run_dir: Path, group: int) -> Path:
    """The store file of worker group ``group`` (a fresh one for each group the runner starts)."""
    return run_dir / f"store.g{group}"


def rank_env(rank: int, world: int, store: Path) -> dict[str, str]:
    """The variables that tell one rank who it is and where the others are."""
    return {
        "RANK": str(rank),
        "WORLD_SIZE": str(world),
        "LOCAL_RANK": str(rank),
        "LOCAL_WORLD_SIZE": str(world),
        STORE_ENV: str(store),
    }


def store_kwargs(
    dist: Any, rank: int, world: int, environ: dict[str, str] | None = None
) -> dict[str, Any]:
    """The worker's side: ``init_process_group`` arguments for the store to meet through. The
    doctor's runner names a store file; a lone rank with no address gets a store of its own;
    otherwise torch's environment rendezvous (torchrun) is left to do it."""
    env = os.environ if environ is None else environ
    path = env.get(STORE_ENV)
    if world == 1 and "MASTER_ADDR" not in env and not path:
        return {"store": dist.HashStore(), "rank": 0, "world_size": 1}
    if path:
        return {"store": dist.FileStore(path, world), "rank": rank, "world_size": world}
    return {}
