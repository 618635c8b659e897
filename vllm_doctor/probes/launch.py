"""Starting the probe processes: the worker group's ranks, the isolated parts and the bytecode
compiler, each leading its own process group (a kill takes its children; none sees the
terminal's Ctrl-C) and listed in the run directory for the reaper; the run directory itself;
and the record the runner keeps of each process. No torch here.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vllm_doctor.child import module_command
from vllm_doctor.errors import InputError
from vllm_doctor.probes import rendezvous
from vllm_doctor.probes.registry import Part, ProbeSpec

CPU_RANKS_PER_CORE = 4  # gloo ranks mostly wait: world size 4 still runs on a 2-core machine
MIN_CPU_RANKS = 4


def max_ranks(device: str, visible_gpus: int | None = None) -> int:
    """The most ranks one node can run: one per visible GPU, or on the CPU a small multiple
    of the cores (each rank is a process that imports torch)."""
    if device == "cuda":
        return visible_gpus if visible_gpus is not None else 64
    return max(MIN_CPU_RANKS, CPU_RANKS_PER_CORE * (os.cpu_count() or 1))


def too_many_ranks(tp: int, device: str, limit: int) -> str:
    if device == "cuda":
        return (
            f"{tp} ranks need {tp} GPUs on this node and {limit} are visible (several nodes: "
            f"run the worker under torchrun, see docs/probes.md)"
        )
    return (
        f"{tp} ranks is more than this machine can run on the CPU (at most {limit}: "
        f"{CPU_RANKS_PER_CORE} per core, at least {MIN_CPU_RANKS})"
    )


def package_root() -> str:
    return str(Path(__file__).resolve().parent.parent.parent)


def child_pythonpath(environ: dict[str, str] | os._Environ) -> str:
    """PYTHONPATH for a child process: this package's root first, then the caller's path."""
    root = package_root()
    return root + (os.pathsep + environ["PYTHONPATH"] if environ.get("PYTHONPATH") else "")


def pid_alive(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - not ours
        return True
    try:  # a zombie has finished
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return True


def describe_exit(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


@dataclass
class Proc:
    """One started process, and what the runner has learnt of it from its events."""

    tag: str  # "rank0", "part-tp-softembed-compile"
    events: Path
    log: Path | None
    launched: float
    group: int
    popen: subprocess.Popen | None = None
    pid: int | None = None
    rank: int = 0
    part: tuple[str, str] | None = None  # (probe, part) for an isolated sub-check
    offset: int = 0
    partial: bytes = b""
    init: dict[str, Any] | None = None
    fatal: str | None = None
    current: str | None = None
    current_since: float = 0.0
    last_progress: str = ""
    done_at: float | None = None
    teardown_started: float | None = None
    teardown_returned: bool = False
    teardown: dict[str, Any] | None = None
    aborted: str | None = None  # the probe after whose sticky error the worker stopped
    killed: bool = False
    exit_seen: bool = False
    exited_at: float | None = None
    hello_at: float | None = None  # its first word (the process is up)
    joining_at: float | None = None  # it began joining the process group
    # where it runs when not on this machine ("node 1a2b3c4d@10.0.0.2"), and what alone can
    # see and stop it there (``alive(proc)``, ``kill(proc)``: a Ray actor, fleet/probe_ray.py)
    where: str | None = None
    remote: Any = None

    def alive(self) -> bool:
        if self.remote is not None:
            return bool(self.remote.alive(self))
        if self.popen is not None:
            return self.popen.poll() is None
        return pid_alive(self.pid)

    @property
    def named(self) -> str:
        """``rank1``, or ``rank1 on node 1a2b3c4d@10.0.0.2`` for a process on another node."""
        return f"{self.tag} on {self.where}" if self.where else self.tag

    def exit_text(self) -> str:
        if self.remote is not None:
            return str(self.remote.exit_text(self))
        if self.popen is None:
            return "exited" if not self.alive() else "still running"
        return describe_exit(self.popen.returncode)


def private_dir(path: Path) -> Path:
    """A run directory given by the user (``VLLM_DOCTOR_PROBE_DIR``): created here with mode
    0700, or one that exists only when it is a real directory (not a link) of this user that
    nobody else may write to: the workers' logs and events are written in it, and a link or
    another user's directory could redirect them onto any file."""
    source = "VLLM_DOCTOR_PROBE_DIR"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.mkdir(mode=0o700)  # exclusive: fails on anything already there, a link included
        return path
    except FileExistsError:
        pass
    except OSError as err:
        raise InputError(source, f"cannot create {path}: {err.strerror or err}") from None
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        raise InputError(source, f"{path} is a symbolic link: give a real directory")
    if not stat.S_ISDIR(info.st_mode):
        raise InputError(source, f"{path} is not a directory")
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        raise InputError(source, f"{path} belongs to another user: give a directory of your own")
    if info.st_mode & 0o022:
        raise InputError(
            source,
            f"{path} may be written by others (mode {stat.S_IMODE(info.st_mode):o}): "
            "chmod go-w, or give a private directory",
        )
    return path


class Launcher:
    """Starts the processes of one run, all in ``run_dir``, with ``python``."""

    def __init__(
        self,
        run_dir: Path,
        python: str,
        device: str,
        tp: int,
        specs: list[ProbeSpec],
        params: dict[str, Any],
        teardown_timeout: float,
    ):
        self.run_dir = run_dir
        self.python = python
        self.device = device
        self.tp = tp
        self.specs = specs
        self.params = params
        self.teardown_timeout = teardown_timeout
        self.groups = 0  # worker groups started so far (a failed group is followed by a fresh one)
        self.spawn_env: dict[str, str] = {}  # for every probe process started from now on
        self.compiler: subprocess.Popen | None = None
        self.info: dict[str, Any] = {}  # about the run itself (bytecode), for the JSON report

    def env(self, extra: dict[str, str]) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = child_pythonpath(env)
        env["PYTHONUNBUFFERED"] = "1"
        env["VLLM_DOCTOR_PARENT_PID"] = str(os.getpid())
        rendezvous.node_env(env)
        if self.device == "cpu":
            procs = self.tp + sum(len(s.parts) for s in self.specs)
            env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // max(1, procs))))
        env.update(self.spawn_env)
        env.update(extra)
        return env

    def spawn(self, cmd: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
        with open(log, "wb") as log_fh:
            popen = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log_fh,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
                cwd=str(self.run_dir),
            )
        with open(self.run_dir / "pids", "a", encoding="ascii") as fh:  # for the reaper
            fh.write(f"{popen.pid}\n")
        return popen

    def start_compiler(self, specs: list[ProbeSpec], parts: list[tuple[str, Part]]) -> None:
        """Where torch ships without bytecode, compile the probe processes' imports once, on the
        idle cores, beside their start-up (bytecode.py); they read it from the run directory.
        ``parts``: the (probe, part) sub-checks that will run (not answered from the cache)."""
        from vllm_doctor.probes import bytecode

        if not bytecode.wanted(self.python):
            return
        roots = list(bytecode.ROOTS)
        for spec in specs:  # each probe's module, then the imports of its parts that will run
            roots.append(f"vllm_doctor.probes.{spec.module}")
            roots.extend(
                name for probe, part in parts if probe == spec.name for name in part.imports
            )
        roots = list(dict.fromkeys(roots))
        # the cores the probe processes and this one leave idle; too few and it only competes
        jobs = min(bytecode.MAX_JOBS, bytecode.usable_cpus() - self.tp - len(parts) - 1)
        forced = os.environ.get(bytecode.SWITCH) == "1"
        if jobs < bytecode.MIN_JOBS and not forced:
            return
        jobs = max(1, jobs)
        prefix = self.run_dir / "bytecode"
        if prefix.exists():  # a kept run directory: nothing from an earlier run is trusted
            import shutil

            shutil.rmtree(prefix, ignore_errors=True)
        env = self.env({})
        env.pop("PYTHONPYCACHEPREFIX", None)
        self.compiler = self.spawn(
            module_command(
                "vllm_doctor.probes.bytecode",
                "--prefix",
                str(prefix),
                "--roots",
                ",".join(roots),
                "--jobs",
                str(jobs),
                "--summary",
                str(self.run_dir / "bytecode.json"),
                python=self.python,
            ),
            env,
            self.run_dir / "bytecode.log",
        )
        self.spawn_env["PYTHONPYCACHEPREFIX"] = str(prefix)
        self.info["bytecode"] = {"jobs": jobs, "roots": roots}

    def stop_compiler(self) -> None:
        if self.compiler is None:
            return
        if self.compiler.poll() is None:
            self.info.setdefault("bytecode", {})["unfinished"] = True
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.compiler.pid, signal.SIGKILL)
        self.compiler.wait()
        try:
            summary = json.loads((self.run_dir / "bytecode.json").read_text(encoding="utf-8"))
            self.info.setdefault("bytecode", {}).update(
                {
                    k: summary[k]
                    for k in (
                        "compiled",
                        "linked",
                        "failed",
                        "seconds",
                        "existing_linked",
                        "existing_link_s",
                    )
                    if k in summary
                }
            )
        except (OSError, ValueError, TypeError):
            pass
        self.compiler = None

    def launch_parts(self, parts: list[tuple[str, Part]]) -> list[Proc]:
        """Start these isolated sub-checks (probe name, part), now, beside the ranks."""
        from vllm_doctor.probes.worker import part_command

        started = []
        for name, part in parts:
            tag = f"part-{name}-{part.name}"
            events = self.run_dir / f"events.{tag}.jsonl"
            events.touch()
            log = self.run_dir / f"{tag}.log"
            env = self.env(dict(part.env, LOCAL_RANK="0"))
            popen = self.spawn(
                part_command(name, part.name, str(events), self.device, self.params, self.python),
                env,
                log,
            )
            started.append(
                Proc(
                    tag=tag,
                    events=events,
                    log=log,
                    launched=time.monotonic(),
                    group=0,
                    popen=popen,
                    pid=popen.pid,
                    part=(name, part.name),
                )
            )
        return started

    def launch_group(self, names: list[str]) -> list[Proc]:
        """A fresh worker group: one process per rank, running these probes in sequence."""
        self.groups += 1
        g = self.groups
        common = worker_args(self.device, self.params, self.teardown_timeout, names)
        store = rendezvous.store_file(self.run_dir, g)
        group = []
        for rank in range(self.tp):
            env = self.env(rendezvous.rank_env(rank, self.tp, store))
            tag = f"rank{rank}"
            events = self.run_dir / f"events.{tag}.g{g}.jsonl"
            log = self.run_dir / f"{tag}.g{g}.log"
            events.touch()
            popen = self.spawn(
                module_command(
                    "vllm_doctor.probes.worker",
                    "--events",
                    str(events),
                    *common,
                    python=self.python,
                ),
                env,
                log,
            )
            group.append(
                Proc(
                    tag=tag,
                    events=events,
                    log=log,
                    launched=time.monotonic(),
                    group=g,
                    popen=popen,
                    pid=popen.pid,
                    rank=rank,
                )
            )
        return group


def worker_args(
    device: str, params: dict[str, Any], teardown_timeout: float, names: list[str]
) -> list[str]:
    """The worker's arguments for one group of ranks running ``names`` in sequence (the
    local runner and `probe --ray` start the same worker)."""
    return [
        "--device",
        device,
        "--params",
        json.dumps(params),
        "--teardown-timeout",
        str(teardown_timeout),
        "--probes",
        ",".join(names),
        "--parts",
        "none",
    ]
