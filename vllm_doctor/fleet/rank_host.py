"""What one Ray actor does on its node for `vllm-doctor probe --ray`: host the probe processes of
one rank (and, on rank 0, the probes' isolated parts), exactly as the local runner starts them
(``python -m vllm_doctor.probes.worker``), and hand their event and log files back as they grow.

The actor holds its rank's GPU (Ray's placement-group bundle) and its Python is the node's; the
processes it starts are its children, so they die with it (the worker's parent-death signal and
watchdog). No Ray and no torch imported here: fleet/probe_ray.py wraps this class in
``ray.remote``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Any

LOG_TAIL_BYTES = 256 * 1024  # of a log, at most this much per poll (its tail is what is shown)
EVENTS_BYTES = 4 * 1024 * 1024  # of an event file, at most this much per poll


class RankHost:
    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="vllm-doctor-ray-"))
        self.procs: dict[str, tuple[subprocess.Popen, Path, Path]] = {}

    def where(self) -> dict[str, Any]:
        """This actor's node, address and GPUs, as Ray assigned them."""
        import ray

        context = ray.get_runtime_context()
        try:
            gpus = [str(g) for g in context.get_accelerator_ids().get("GPU", [])]
        except AttributeError:  # Ray before get_accelerator_ids
            gpus = [str(g) for g in ray.get_gpu_ids()]
        return {
            "node_id": context.get_node_id(),
            "ip": ray.util.get_node_ip_address(),
            "gpu_ids": gpus,
            "hostname": socket.gethostname(),
            "pid": os.getpid(),
        }

    def free_port(self) -> int:
        """A port nothing listens on here now, for rank 0's store (as vLLM's get_open_port).
        Taken below the kernel's ephemeral range where it can: the store binds it only when
        rank 0 starts, and in between any process's bind to port 0 could be handed a port
        from that range (torchrun's 29500 sits below it for the same reason)."""
        import random

        low = _ephemeral_low()
        candidates = random.sample(range(20000, low), min(64, low - 20000)) if low > 20000 else []
        for port in candidates:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                try:
                    sock.bind(("", port))
                except OSError:
                    continue
                return port
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("", 0))
            return int(sock.getsockname()[1])

    def start(self, tag: str, module: str, args: list[str], extra_env: dict[str, str]) -> int:
        """Start ``python -m module --events FILE *args`` with this node's environment plus
        ``extra_env``; returns its pid."""
        from vllm_doctor.child import module_command
        from vllm_doctor.probes.launch import child_pythonpath

        events, log = self.dir / f"events.{tag}.jsonl", self.dir / f"{tag}.log"
        events.touch()
        env = dict(os.environ)
        env.update(extra_env)
        env["PYTHONPATH"] = child_pythonpath(env)  # the doctor this actor imported
        env["PYTHONUNBUFFERED"] = "1"
        env["VLLM_DOCTOR_PARENT_PID"] = str(os.getpid())
        with open(log, "wb") as log_fh:
            popen = subprocess.Popen(
                module_command(module, "--events", str(events), *args),
                stdin=subprocess.DEVNULL,
                stdout=log_fh,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
                cwd=str(self.dir),
            )
        self.procs[tag] = (popen, events, log)
        return popen.pid

    def poll(
        self, offsets: dict[str, tuple[int, int]]
    ) -> dict[str, tuple[bytes, bytes, int, int | None]]:
        """For each process: (new event bytes, new log bytes, where that log text began, exit
        code or None). The exit code is read first, so the bytes include its last words."""
        out = {}
        for tag, (events_at, log_at) in offsets.items():
            if tag not in self.procs:
                continue
            popen, events, log = self.procs[tag]
            code = popen.poll()
            new_events = _read(events, events_at, EVENTS_BYTES)
            size = _size(log)
            log_from = max(log_at, size - LOG_TAIL_BYTES)
            out[tag] = (new_events, _read(log, log_from, LOG_TAIL_BYTES), log_from, code)
        return out

    def kill(self, tag: str) -> None:
        popen = self.procs[tag][0] if tag in self.procs else None
        if popen is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(popen.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            popen.wait(timeout=5)

    def close(self) -> None:
        for tag in list(self.procs):
            self.kill(tag)
        shutil.rmtree(self.dir, ignore_errors=True)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _read(path: Path, offset: int, limit: int) -> bytes:
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            return fh.read(limit)
    except OSError:
        return b""


def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (Linux), else Linux's default."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768
