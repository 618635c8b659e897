"""The probe runner: launch worker processes, stream their results, enforce deadlines, clean up.

No torch in this process. Layout of one run:

* one worker process per rank (``python -m vllm_doctor.probes.worker``) runs every selected
  probe in sequence, so torch is imported and the process group initialised once per rank;
* a probe's isolated *parts* (sub-checks that need their own process: the torch.compile trace,
  the transient CUDA-graph replay with the caching allocator off) start as their own processes
  at the same moment as the ranks, so their torch import overlaps the ranks' start-up;
* every process leads its own process group (``start_new_session``), so a kill takes its
  children too and none of them sees the terminal's Ctrl-C: the runner kills them all on
  Ctrl-C, on SIGTERM/SIGHUP, on any error and at the end. If the runner itself is killed
  (SIGKILL, SIGQUIT), every worker dies with it (parent-death signal and a watchdog on the
  parent's pid, see ``worker.die_with_parent``), and a small reaper process that outlives
  the runner removes the run directory (``reaper.py``);
* the ranks meet through a file in the run directory (``FileStore``): no rendezvous port
  listens on any interface, and NCCL's and gloo's own sockets use the loopback interface
  unless the environment names another. Several nodes run under torchrun instead.

Workers append one JSON event per line to their own file in the run directory; the runner
polls those files and finalises a probe as soon as every rank (and every part) reported it.
A rank that exceeds the deadline of its current probe, or dies, ends its group: the probe it
was running is reported (``timeout`` / ``error`` with the last lines the ranks printed) and
the probes not yet finished run again in a fresh group. The workers tear their process group
down in the background while the probes that need no communicator run; after every rank said
``done``, each worker gets a short grace period to finish that teardown and exit; one still
alive then is killed, and the hang is reported in the ``teardown`` result.
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from vllm_doctor.child import module_command
from vllm_doctor.errors import InputError
from vllm_doctor.probes.registry import BY_NAME, DEFAULT_PROBES, MODEL_KEYS, PROBES, ProbeSpec
from vllm_doctor.probes.result import (ERROR, PASS, SKIP, TIMEOUT, WARN, ProbeResult,
                                       merge_rank_results)

LOG_TAIL_LINES = 12
POLL_S = 0.02
INIT_TIMEOUT_MIN_S = 60.0  # torch import + process-group init may take this long on a cold disk

# on_update(probe, state, info): state is "start", "progress" (info: message) or "result"
# (info: the ProbeResult). Called from the runner's thread.
UpdateFn = Callable[[str, str, Any], None]

_NOISE = re.compile(r"^\s*(frame #\d+:|Exception raised from |<unknown function>)")


MAX_TIMEOUT_S = 24 * 3600.0
MAX_TEARDOWN_TIMEOUT_S = 600.0
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
        return (f"{tp} ranks need {tp} GPUs on this node and {limit} are visible (several nodes: "
                f"run the worker under torchrun, see docs/probes.md)")
    return (f"{tp} ranks is more than this machine can run on the CPU (at most {limit}: "
            f"{CPU_RANKS_PER_CORE} per core, at least {MIN_CPU_RANKS})")


def check_seconds(option: str, value: float, maximum: float, allow_zero: bool = False) -> float:
    """A finite number of seconds in range, or an InputError naming the option."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise InputError(option, f"not a number of seconds: {value!r}") from None
    low_ok = value >= 0 if allow_zero else value > 0
    if not math.isfinite(value) or not low_ok or value > maximum:
        bound = "at least 0" if allow_zero else "more than 0"
        raise InputError(option, f"must be a finite number of seconds, {bound} and at most "
                                 f"{maximum:g} (got {value:g})")
    return value


def _package_root() -> str:
    return str(Path(__file__).resolve().parent.parent.parent)


def tail(path: Path | None, lines: int = LOG_TAIL_LINES) -> list[str]:
    """The last lines a process printed, without C++ stack frames (they bury the message)."""
    if path is None:
        return []
    try:
        data = Path(path).read_bytes()[-65536:]
    except OSError:
        return []
    text = data.decode("utf-8", errors="replace")
    out = [ln.rstrip() for ln in text.splitlines() if ln.strip() and not _NOISE.match(ln)]
    return out[-lines:]


def _pid_alive(pid: int | None) -> bool:
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


@dataclass
class _Proc:
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

    def alive(self) -> bool:
        if self.popen is not None:
            return self.popen.poll() is None
        return _pid_alive(self.pid)

    def exit_text(self) -> str:
        if self.popen is None:
            return "exited" if not self.alive() else "still running"
        return _describe_exit(self.popen.returncode)


@dataclass
class _ProbeState:
    spec: ProbeSpec
    per_rank: dict[int, dict[str, Any]] = field(default_factory=dict)
    parts: dict[str, dict[str, Any]] = field(default_factory=dict)
    started_at: float | None = None
    final: ProbeResult | None = None
    log_tail: list[str] = field(default_factory=list)
    attempts: int = 0
    notes: list[str] = field(default_factory=list)


class _Interrupted(KeyboardInterrupt):
    pass


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
        raise InputError(source, f"{path} may be written by others (mode {stat.S_IMODE(info.st_mode):o}): "
                                 "chmod go-w, or give a private directory")
    return path


def stdout_reader_gone() -> bool:
    """Whether stdout is a pipe or socket whose reader has left (`vllm-doctor probe | head -1`,
    a CI step cancelled): the probes' results would go nowhere, so the run stops."""
    try:
        fd = sys.stdout.fileno()
        mode = os.fstat(fd).st_mode
    except (AttributeError, ValueError, OSError):
        return False
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
        return False
    import select

    poller = select.poll()
    poller.register(fd, 0)  # POLLERR and POLLHUP are always reported
    return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))


class Runner:
    def __init__(self, names: list[str] | None, tp: int, device: str, timeout: float,
                 model: dict | None = None, on_update: UpdateFn | None = None,
                 run_dir: str | os.PathLike | None = None, teardown_timeout: float = 2.0,
                 params: dict | None = None, python: str | None = None, use_cache: bool = True,
                 visible_gpus: int | None = None):
        if device not in ("cuda", "cpu"):
            raise InputError("--device", f"unknown device {device!r} (cuda or cpu)")
        if not isinstance(tp, int) or tp < 1:
            raise InputError("--tp", f"must be at least 1 (got {tp})")
        limit = max_ranks(device, visible_gpus)
        if tp > limit:
            raise InputError("--tp", too_many_ranks(tp, device, limit))
        self.timeout = check_seconds("--timeout", timeout, MAX_TIMEOUT_S)
        self.teardown_timeout = check_seconds("--teardown-timeout", teardown_timeout,
                                              MAX_TEARDOWN_TIMEOUT_S, allow_zero=True)
        self.specs = resolve(names)
        self.tp = tp
        self.device = device
        self.grace = self.teardown_timeout + 1.5
        self.on_update = on_update or (lambda *_: None)
        self.python = python or sys.executable
        self.params = dict(params or {})
        if os.environ.get("VLLM_DOCTOR_PROBE_PARAMS"):  # test hook: extra worker parameters
            try:
                self.params.update(json.loads(os.environ["VLLM_DOCTOR_PROBE_PARAMS"]))
            except ValueError:
                raise InputError("VLLM_DOCTOR_PROBE_PARAMS", "not valid JSON") from None
        if model:
            self.params["model"] = {k: model[k] for k in MODEL_KEYS if isinstance(model.get(k), int)}
        if device == "cpu":
            self.params.setdefault("small", True)
        self.params["tp"] = tp
        if run_dir is None and os.environ.get("VLLM_DOCTOR_PROBE_DIR"):  # keep logs and events here
            run_dir = os.environ["VLLM_DOCTOR_PROBE_DIR"]
        self.keep_dir = run_dir is not None or os.environ.get("VLLM_DOCTOR_PROBE_KEEP") == "1"
        self.run_dir = private_dir(Path(run_dir)) if run_dir else Path(
            tempfile.mkdtemp(prefix="vllm-doctor-probe-"))
        self.states = {s.name: _ProbeState(s) for s in self.specs}
        self.procs: list[_Proc] = []
        self.group: list[_Proc] = []
        self.groups = 0
        self.teardowns: list[dict[str, Any]] = []
        self.use_cache = use_cache
        self.part_keys: dict[tuple[str, str], str | None] = {}
        self.spawn_env: dict[str, str] = {}  # for every probe process started from now on
        self.compiler: subprocess.Popen | None = None
        self.info: dict[str, Any] = {}  # about the run itself (bytecode), for the JSON report

    # -- launching ----------------------------------------------------------------------------
    def _env(self, extra: dict[str, str]) -> dict[str, str]:
        env = dict(os.environ)
        root = _package_root()
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env["PYTHONUNBUFFERED"] = "1"
        env["VLLM_DOCTOR_PARENT_PID"] = str(os.getpid())
        # One node: NCCL's bootstrap and gloo's connections stay on the loopback interface.
        env.setdefault("NCCL_SOCKET_IFNAME", "lo")
        env.setdefault("GLOO_SOCKET_IFNAME", "lo")
        for name in ("MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID"):
            env.pop(name, None)  # the ranks meet through the run directory's store file
        if self.device == "cpu":
            procs = self.tp + sum(len(s.parts) for s in self.specs)
            env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // max(1, procs))))
        env.update(self.spawn_env)
        env.update(extra)
        return env

    def _spawn(self, cmd: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
        with open(log, "wb") as log_fh:
            popen = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log_fh,
                                     stderr=subprocess.STDOUT, env=env, start_new_session=True,
                                     cwd=str(self.run_dir))
        with open(self.run_dir / "pids", "a", encoding="ascii") as fh:  # for the reaper
            fh.write(f"{popen.pid}\n")
        return popen

    def _start_compiler(self, names: list[str]) -> None:
        """Where torch ships without bytecode, compile the probe processes' imports once, on the
        idle cores, beside their start-up (bytecode.py); they read it from the run directory."""
        from vllm_doctor.probes import bytecode

        if not bytecode.wanted(self.python):
            return
        roots = list(bytecode.ROOTS)
        parts = 0
        for name in names:
            spec = self.states[name].spec
            roots.append(f"vllm_doctor.probes.{spec.module}")
            for part in spec.parts:
                if part.name not in self.states[name].parts:  # not answered from the cache
                    parts += 1
                    roots.extend(part.imports)
        roots = list(dict.fromkeys(roots))
        # the cores the probe processes and this one leave idle; too few and it only competes
        jobs = min(bytecode.MAX_JOBS, bytecode.usable_cpus() - self.tp - parts - 1)
        forced = os.environ.get(bytecode.SWITCH) == "1"
        if jobs < bytecode.MIN_JOBS and not forced:
            return
        jobs = max(1, jobs)
        prefix = self.run_dir / "bytecode"
        if prefix.exists():  # a kept run directory: nothing from an earlier run is trusted
            import shutil

            shutil.rmtree(prefix, ignore_errors=True)
        env = self._env({})
        env.pop("PYTHONPYCACHEPREFIX", None)
        self.compiler = self._spawn(
            module_command("vllm_doctor.probes.bytecode", "--prefix", str(prefix),
                           "--roots", ",".join(roots), "--jobs", str(jobs),
                           "--summary", str(self.run_dir / "bytecode.json"), python=self.python),
            env, self.run_dir / "bytecode.log")
        self.spawn_env["PYTHONPYCACHEPREFIX"] = str(prefix)
        self.info["bytecode"] = {"jobs": jobs, "roots": roots}

    def _stop_compiler(self) -> None:
        if self.compiler is None:
            return
        if self.compiler.poll() is None:
            self.info.setdefault("bytecode", {})["unfinished"] = True
            try:
                os.killpg(self.compiler.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self.compiler.wait()
        try:
            summary = json.loads((self.run_dir / "bytecode.json").read_text(encoding="utf-8"))
            self.info.setdefault("bytecode", {}).update(
                {k: summary[k] for k in ("compiled", "linked", "failed", "seconds", "existing_linked",
                                         "existing_link_s") if k in summary})
        except (OSError, ValueError, TypeError):
            pass
        self.compiler = None

    def _launch_parts(self, names: list[str]) -> None:
        """Start every isolated sub-check not answered from the cache, now, beside the ranks."""
        from vllm_doctor.probes.worker import part_command

        for name in names:
            state = self.states[name]
            for part in state.spec.parts:
                if part.name in state.parts:
                    continue
                tag = f"part-{name}-{part.name}"
                events = self.run_dir / f"events.{tag}.jsonl"
                events.touch()
                log = self.run_dir / f"{tag}.log"
                env = self._env(dict(part.env, LOCAL_RANK="0"))
                popen = self._spawn(part_command(name, part.name, str(events), self.device,
                                                 self.params, self.python), env, log)
                self.procs.append(_Proc(tag=tag, events=events, log=log, launched=time.monotonic(),
                                        group=0, popen=popen, pid=popen.pid, part=(name, part.name)))

    def _launch_group(self, names: list[str]) -> None:
        self.groups += 1
        g = self.groups
        self.group = []
        common = ["--device", self.device, "--params", json.dumps(self.params),
                  "--teardown-timeout", str(self.teardown_timeout), "--probes", ",".join(names),
                  "--parts", "none"]
        store = self.run_dir / f"store.g{g}"
        for rank in range(self.tp):
            env = self._env({"RANK": str(rank), "WORLD_SIZE": str(self.tp), "LOCAL_RANK": str(rank),
                             "LOCAL_WORLD_SIZE": str(self.tp), "VLLM_DOCTOR_STORE_FILE": str(store)})
            tag = f"rank{rank}"
            events = self.run_dir / f"events.{tag}.g{g}.jsonl"
            log = self.run_dir / f"{tag}.g{g}.log"
            events.touch()
            popen = self._spawn(module_command("vllm_doctor.probes.worker", "--events", str(events),
                                               *common, python=self.python), env, log)
            proc = _Proc(tag=tag, events=events, log=log, launched=time.monotonic(), group=g,
                         popen=popen, pid=popen.pid, rank=rank)
            self.procs.append(proc)
            self.group.append(proc)
        for name in names:
            self.states[name].attempts += 1

    # -- events -------------------------------------------------------------------------------
    def _read_events(self, proc: _Proc) -> list[dict[str, Any]]:
        try:
            with open(proc.events, "rb") as fh:
                fh.seek(proc.offset)
                data = fh.read()
        except OSError:
            return []
        if not data:
            return []
        proc.offset += len(data)
        data = proc.partial + data
        lines = data.split(b"\n")
        proc.partial = lines.pop()
        out = []
        for line in lines:
            if line.strip():
                try:
                    out.append(json.loads(line))
                except ValueError:
                    continue
        return out

    def _pump(self, proc: _Proc) -> None:
        for ev in self._read_events(proc):
            self._handle(proc, ev)

    def _handle(self, proc: _Proc, ev: dict[str, Any]) -> None:
        kind = ev.get("ev")
        now = time.monotonic()
        if kind == "hello":
            if proc.pid is None:
                proc.pid = ev.get("pid")
        elif kind == "init":
            proc.init = ev
        elif kind == "fatal":
            proc.fatal = ev.get("error", "worker failed")
        elif kind == "start":
            proc.current = ev.get("probe")
            proc.current_since = now
            proc.last_progress = ""
            state = self.states.get(proc.current or "")
            if state and state.started_at is None:
                state.started_at = now
                self.on_update(state.spec.name, "start", None)
        elif kind == "progress":
            proc.last_progress = str(ev.get("msg", ""))
            self.on_update(ev.get("probe", ""), "progress", ev.get("msg", ""))
        elif kind == "result":
            name = ev.get("probe", "")
            state = self.states.get(name)
            if proc.part is None:
                proc.current = None
            if state is None or state.final is not None:
                return
            res = ev.get("result", {})
            if proc.part:
                state.parts.setdefault(proc.part[1], res)
                if proc.part in self.part_keys:
                    from vllm_doctor.probes import cache

                    cache.store(self.part_keys[proc.part], res)
            else:
                state.per_rank[proc.rank] = res
            self._maybe_finalise(state)
        elif kind == "abort":
            proc.aborted = ev.get("after") or "?"
        elif kind == "teardown_start":
            proc.teardown_started = now
        elif kind == "done":
            proc.done_at = now
            proc.current = None
        elif kind == "teardown":
            proc.teardown = ev
            proc.teardown_returned = bool(ev.get("returned"))

    def _cached_parts(self, names: list[str]) -> None:
        """Reuse deterministic sub-check results from the cache (see probes/cache.py)."""
        from vllm_doctor.probes import cache

        for name in names:
            spec = self.states[name].spec
            for part in spec.parts:
                if not part.cacheable:
                    continue
                key = cache.part_key(name, spec.module, part.name,
                                     {k: self.params.get(k) for k in part.cache_params})
                self.part_keys[(name, part.name)] = key
                if self.use_cache:
                    hit = cache.load(key)
                    if hit is not None:
                        self.states[name].parts[part.name] = hit

    def _complete(self, state: _ProbeState) -> bool:
        return len(state.per_rank) >= self.tp and all(p.name in state.parts for p in state.spec.parts)

    def _maybe_finalise(self, state: _ProbeState, force: bool = False) -> None:
        if state.final is not None or not (force or self._complete(state)):
            return
        for part in state.spec.parts:  # forced before a part reported
            state.parts.setdefault(part.name, {"status": SKIP, "metrics": {},
                                               "reason": "did not run (its worker group failed first)"})
        duration = max([float(r.get("duration_s", 0.0)) for r in state.per_rank.values()] or [0.0])
        result = merge_rank_results(state.spec.name, state.per_rank, state.parts, duration)
        result.log_tail = list(state.log_tail)
        result.notes.extend(n for n in state.notes if n not in result.notes)
        if result.status in (ERROR, TIMEOUT) and not result.log_tail:
            result.log_tail = self._tails([p for p in self.procs if not p.part])
        state.final = result
        self.on_update(state.spec.name, "result", result)

    def _tails(self, procs: list[_Proc]) -> list[str]:
        out: list[str] = []
        for p in procs:
            out.extend(f"[{p.tag}] {ln}" for ln in tail(p.log))
        return out

    # -- killing ------------------------------------------------------------------------------
    def _kill(self, proc: _Proc) -> None:
        if proc.alive():
            proc.killed = True
        pid = proc.popen.pid if proc.popen is not None else proc.pid
        if pid is not None:
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        if proc.popen is not None:
            try:
                proc.popen.wait(timeout=5)
            except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL does not fail
                pass
        else:
            deadline = time.monotonic() + 2.0
            while _pid_alive(proc.pid) and time.monotonic() < deadline:
                time.sleep(0.01)

    def kill_all(self) -> None:
        for proc in list(self.procs):
            self._kill(proc)

    # -- the loop -----------------------------------------------------------------------------
    def run(self) -> list[ProbeResult]:
        restore = self._install_signals()
        reaper = self._start_reaper()
        try:
            return self._run()
        finally:
            self._stop_compiler()
            self.kill_all()
            restore()
            if not self.keep_dir:
                import shutil

                shutil.rmtree(self.run_dir, ignore_errors=True)
            if reaper is not None:
                reaper.kill()
                reaper.wait()

    def _start_reaper(self) -> subprocess.Popen | None:
        """A small process that outlives this one if it is killed outright (SIGKILL): it then
        kills the workers still running and removes the run directory (see reaper.py)."""
        cmd = module_command("vllm_doctor.probes.reaper", str(os.getpid()), str(self.run_dir),
                             python=self.python)
        if self.keep_dir:
            cmd.append("--keep")
        env = dict(os.environ, PYTHONPATH=_package_root() + (
            os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else ""))
        try:
            # the run directory as its working directory: nothing of the user's is imported
            return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL, env=env, start_new_session=True,
                                    cwd=str(self.run_dir))
        except OSError:  # pragma: no cover - the workers still die with this process
            return None

    def _install_signals(self) -> Callable[[], None]:
        if threading.current_thread() is not threading.main_thread():
            return lambda: None

        def handler(signum, frame):  # noqa: ARG001
            raise _Interrupted(f"signal {signum}")

        old = {}
        for sig in (signal.SIGTERM, signal.SIGHUP):
            try:
                old[sig] = signal.signal(sig, handler)
            except (ValueError, OSError):  # pragma: no cover
                pass

        def restore() -> None:
            for sig, h in old.items():
                signal.signal(sig, h)

        return restore

    def _run(self) -> list[ProbeResult]:
        runnable: list[str] = []
        for name, state in self.states.items():
            reason = state.spec.skip_reason(self.tp, self.device)
            if reason:
                state.final = ProbeResult(name=name, status=SKIP, reason=reason)
                self.on_update(name, "result", state.final)
            else:
                runnable.append(name)
        self._cached_parts(runnable)
        if runnable:
            self._start_compiler(runnable)
            self._launch_parts(runnable)
            self._launch_group(runnable)
            self._loop()
        for state in self.states.values():
            if state.final is None:  # nothing came back for it (should not happen)
                for rank in range(self.tp):
                    state.per_rank.setdefault(rank, {"status": ERROR, "metrics": {}, "synthetic": True,
                                                     "reason": "no result came back"})
                self._maybe_finalise(state, force=True)
        out = [self.states[s.name].final for s in self.specs]
        teardown = self._teardown_result()
        if teardown is not None:
            p2p = self.states.get("p2p-nccl")
            if p2p is not None and p2p.final is not None and p2p.final.status != SKIP:
                p2p.final.metrics["teardown_destroy_process_group_s"] = teardown.metrics.get(
                    "destroy_process_group_s")
                p2p.final.metrics["teardown_hang"] = teardown.status != PASS
            out.append(teardown)
        return [r for r in out if r is not None]

    def _loop(self) -> None:
        next_stdout_check = 0.0
        while True:
            if time.monotonic() >= next_stdout_check:
                if stdout_reader_gone():
                    raise BrokenPipeError("stdout closed: the reader of the results left")
                next_stdout_check = time.monotonic() + 0.5
            for proc in list(self.procs):
                if not proc.exit_seen:
                    self._pump(proc)
            now = time.monotonic()
            self._check_parts(now)
            group_state = self._check_group(now)
            if group_state == "restart":
                continue
            if group_state == "finished" and all(p.exit_seen for p in self.procs if p.part):
                return
            time.sleep(POLL_S)

    def _check_parts(self, now: float) -> None:
        for proc in self.procs:
            if proc.part is None or proc.exit_seen:
                continue
            probe, part = proc.part
            state = self.states[probe]
            if part in state.parts:
                if not proc.alive():
                    proc.exit_seen = True
                elif proc.done_at is not None and now - proc.done_at > self.grace:
                    self._kill(proc)
                    proc.exit_seen = True
                elif state.final is not None and proc.done_at is None and self._part_overran(proc, now):
                    self._kill(proc)
                    proc.exit_seen = True
                continue
            if not proc.alive():
                self._pump(proc)
                if part not in state.parts:
                    where = f" after: {proc.last_progress}" if proc.last_progress else ""
                    state.parts[part] = {"status": ERROR, "metrics": {"last_step": proc.last_progress},
                                         "reason": f"the isolated child died{where}"}
                    state.log_tail.extend(self._tails([proc]))
                proc.exit_seen = True
                self._maybe_finalise(state)
            elif self._part_overran(proc, now):
                self._kill(proc)
                proc.exit_seen = True
                if proc.current is None:
                    reason = (f"the isolated child did not finish starting (torch import) within "
                              f"{max(self.timeout, INIT_TIMEOUT_MIN_S):g}s")
                else:
                    where = f" (last step: {proc.last_progress})" if proc.last_progress else ""
                    reason = f"the isolated child exceeded the {self.timeout:g}s deadline{where}"
                state.parts[part] = {"status": TIMEOUT, "metrics": {}, "reason": reason}
                state.log_tail.extend(self._tails([proc]))
                self._maybe_finalise(state)

    def _part_overran(self, proc: _Proc, now: float) -> bool:
        """A sub-check gets the workers' start-up allowance until it starts, then the deadline."""
        if proc.current is None:
            return now - proc.launched > max(self.timeout, INIT_TIMEOUT_MIN_S)
        return now - proc.current_since > self.timeout

    def _check_group(self, now: float) -> str:
        """'running', 'finished' (all results in, teardown settled) or 'restart'."""
        group = self.group
        if not group:
            return "finished"
        if all(p.done_at is not None for p in group):
            last_done = max(p.done_at for p in group)  # type: ignore[type-var]
            alive = [p for p in group if p.alive()]
            for p in group:  # how long each took to leave after its last word (context teardown)
                if p not in alive and p.exited_at is None:
                    p.exited_at = now
            if alive and now - last_done <= self.grace:
                return "running"
            for p in group:
                self._pump(p)
            self._record_teardown(group, killed=[p.tag for p in alive if p.alive()])
            for p in alive:
                self._kill(p)
            for p in group:
                p.exit_seen = True
            self.group = []
            for state in self.states.values():
                if state.final is None and len(state.per_rank) >= self.tp and \
                        not self._part_running(state.spec.name):
                    self._maybe_finalise(state, force=True)
            return "finished"

        failure: str | None = None
        culprits: list[_Proc] = []
        for p in group:
            if p.done_at is not None:
                continue
            if not p.alive():
                self._pump(p)
                if p.done_at is not None:
                    continue
                failure = "died"
                culprits.append(p)
            elif p.init is None and p.current is None:
                if now - p.launched > max(self.timeout, INIT_TIMEOUT_MIN_S):
                    failure = failure or "init-timeout"
                    culprits.append(p)
            elif p.current is not None and now - p.current_since > self.timeout:
                failure = failure or "timeout"
                culprits.append(p)
        if failure is None:
            return "running"
        return self._fail_group(group, failure, culprits)

    def _part_running(self, probe: str) -> bool:
        return any(p.part and p.part[0] == probe and not p.exit_seen for p in self.procs)

    def _fail_group(self, group: list[_Proc], failure: str, culprits: list[_Proc]) -> str:
        for p in group:
            if p.alive():
                self._kill(p)
            self._pump(p)
        tails = self._tails(group)
        for p in group:
            p.exit_seen = True
        self.group = []
        pending = [name for name, st in self.states.items()
                   if st.final is None and len(st.per_rank) < self.tp]
        not_started = [p for p in culprits if p.init is None and p.current is None]
        if not_started and failure in ("died", "init-timeout"):
            fatal = next((p.fatal for p in group if p.fatal), None)
            if failure == "init-timeout":
                reason = (f"the workers did not finish starting (torch import, process-group init) "
                          f"within {max(self.timeout, INIT_TIMEOUT_MIN_S):g}s")
                status = TIMEOUT
            else:
                codes = ", ".join(f"{p.tag}: {p.exit_text()}" for p in not_started)
                reason = f"the workers failed to start: {fatal or codes}"
                status = ERROR
            for name in pending:
                st = self.states[name]
                st.log_tail = tails
                for p in group:
                    st.per_rank.setdefault(p.rank, {"status": status, "reason": reason, "metrics": {}, "synthetic": True})
                if not self._part_running(name):
                    self._maybe_finalise(st, force=True)
            self._record_teardown(group, killed=[], failed=True)
            return "finished"

        # A rank that failed while its process group was being torn down in the background:
        # the teardown is the suspect, not the probe that was running beside it.
        in_teardown = [p for p in culprits if p.teardown_started is not None and not p.teardown_returned]
        blamed: set[str] = set()
        for p in culprits:
            if p.current and p not in in_teardown:
                blamed.add(p.current)
            if p.aborted:  # reported its own error, then stopped: the others stop with it
                blamed.add(p.aborted)
        rerun: list[str] = []
        for name in pending:
            st = self.states[name]
            if name in blamed:
                status = TIMEOUT if failure == "timeout" else ERROR
                if failure == "timeout":
                    reason = f"exceeded the {self.timeout:g}s deadline"
                    slow = [p for p in culprits if p.current == name and p.last_progress]
                    if slow:
                        reason += f" (last step: {slow[0].last_progress})"
                else:
                    dead = [p for p in culprits if p.current == name]
                    stopped = [p for p in culprits if p.aborted == name]
                    reason = "; ".join(f"{p.tag} died ({p.exit_text()})" for p in dead) or (
                        f"stopped with its worker group after an error on "
                        f"{', '.join(p.tag for p in stopped)}" if stopped else "a worker died")
                for p in group:
                    st.per_rank.setdefault(p.rank, {"status": status, "reason": reason, "metrics": {}, "synthetic": True})
                st.log_tail = tails
                if not self._part_running(name):
                    self._maybe_finalise(st, force=True)
            elif st.attempts >= 2:
                st.log_tail = tails
                for p in group:
                    st.per_rank.setdefault(p.rank, {"status": ERROR, "metrics": {}, "synthetic": True,
                                                    "reason": "its worker group failed twice"})
                if not self._part_running(name):
                    self._maybe_finalise(st, force=True)
            else:
                st.per_rank.clear()
                why = "a teardown failure" if in_teardown else f"{failure} of an earlier probe"
                st.notes.append(f"ran again in fresh worker processes after {why}")
                rerun.append(name)
        self._record_teardown(group, killed=[p.tag for p in in_teardown], failed=True,
                              during=failure if in_teardown else None)
        if rerun:
            self._launch_group(rerun)
            return "restart"
        return "finished"

    # -- teardown -----------------------------------------------------------------------------
    def _record_teardown(self, group: list[_Proc], killed: list[str], failed: bool = False,
                         during: str | None = None) -> None:
        self.teardowns.append({
            "group": group[0].group if group else self.groups, "failed": failed, "killed": killed,
            "during": during,
            "ranks": [{"rank": p.rank, "backend": (p.init or {}).get("backend"),
                       "teardown": p.teardown, "started": p.teardown_started is not None,
                       "exit": p.exit_text(),
                       "exit_after_done_s": (round(p.exited_at - p.done_at, 3)
                                             if p.exited_at is not None and p.done_at is not None else None),
                       "init": {k: v for k, v in (p.init or {}).items()
                                if k not in ("ev", "rank", "t")}} for p in group],
        })

    def _teardown_result(self) -> ProbeResult | None:
        records = [t for t in self.teardowns if not t["failed"] or t["during"]]
        if not records:
            return None
        last = records[-1]
        uses_pg = any(r["backend"] or r["teardown"] or r["started"] for r in last["ranks"])
        if not uses_pg and not last["killed"]:
            return None
        ranks = []
        hung: list[int] = []
        for r in last["ranks"]:
            td = r["teardown"] or {}
            killed = f"rank{r['rank']}" in last["killed"]
            entry = {"rank": r["rank"], "status": PASS, "seconds": td.get("seconds"),
                     "returned": td.get("returned"), "killed": killed, "init": r["init"],
                     "exit_after_done_s": r.get("exit_after_done_s")}
            if td.get("returned") is False or killed or td.get("error"):
                entry["status"] = WARN
                hung.append(r["rank"])
            if td.get("error"):
                entry["error"] = td["error"]
            ranks.append(entry)
        seconds = [r["seconds"] for r in ranks if r["seconds"] is not None]
        metrics: dict[str, Any] = {"destroy_process_group_s": max(seconds) if seconds else None,
                                   "teardown_limit_s": self.teardown_timeout}
        init = [r["init"] for r in ranks if r["init"]]
        for key in ("import_torch_s", "cuda_init_s", "dist_init_s"):
            vals = [i[key] for i in init if isinstance(i.get(key), (int, float))]
            if vals:
                metrics[f"max_{key}"] = max(vals)
        if hung:
            who = ", ".join(str(r) for r in hung)
            if last["during"]:
                reason = (f"teardown failure: rank {who} {last['during']} while destroy_process_group "
                          f"ran in the background; the probes it interrupted ran again")
            elif any(r["returned"] is False for r in ranks):
                reason = (f"teardown hang: destroy_process_group did not return within "
                          f"{self.teardown_timeout:g}s on rank {who}, after every rank had reported "
                          f"its results; the workers were stopped")
            else:
                reason = (f"teardown hang: rank {who} did not exit within {self.grace:g}s after "
                          f"reporting its results and was killed")
            status = WARN
        else:
            status = PASS
            reason = (f"process group torn down in {metrics['destroy_process_group_s']:.2f}s"
                      if metrics.get("destroy_process_group_s") is not None else "workers exited")
        return ProbeResult(name="teardown", status=status, reason=reason, metrics=metrics,
                           ranks=ranks, duration_s=metrics.get("destroy_process_group_s") or 0.0)


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def resolve(names: list[str] | None) -> list[ProbeSpec]:
    """The probe specs for ``names`` (None or empty: every public probe but those run on
    request), in canonical order."""
    if not names:
        return list(DEFAULT_PROBES)
    wanted = []
    for raw in names:
        name = raw.strip()
        if not name:
            continue
        if name not in BY_NAME:
            from vllm_doctor.probes.registry import PROBE_NAMES

            raise InputError("probe", f"unknown probe {name!r} (known: {', '.join(PROBE_NAMES)})")
        if name not in wanted:
            wanted.append(name)
    return [p for p in PROBES if p.name in wanted]


def run_probes(names: list[str] | None, tp: int, device: str, timeout: float,
               model: dict | None = None, *, on_update: UpdateFn | None = None,
               run_dir: str | os.PathLike | None = None, teardown_timeout: float = 2.0,
               params: dict | None = None, use_cache: bool = True,
               visible_gpus: int | None = None,
               info: dict[str, Any] | None = None) -> list[ProbeResult]:
    """Run the probes and return one ProbeResult each (plus ``teardown`` when a process group ran).

    ``names``: probe names (None: all); ``tp``: ranks (one GPU each with ``device="cuda"``);
    ``timeout``: seconds each probe may take; ``model``: ``{"vocab_size": .., "hidden_size": ..}``
    from the model's config.json (None: the probes' defaults, DiffusionGemma-like sizes);
    ``use_cache``: reuse deterministic sub-check results (the traced torch.compile failure);
    ``visible_gpus``: GPUs this node shows (caps ``tp`` on CUDA; None: not known);
    ``info``: filled with what the run did besides the probes (the bytecode it compiled).
    """
    runner = Runner(names, tp, device, timeout, model, on_update=on_update, run_dir=run_dir,
                    teardown_timeout=teardown_timeout, params=params, use_cache=use_cache,
                    visible_gpus=visible_gpus)
    try:
        return runner.run()
    finally:
        if info is not None:
            info.update(runner.info)


MAX_EVENTS_FILE_BYTES = 64 * 1024 * 1024
MAX_WORLD = 1 << 16


def _valid_event(ev: Any) -> dict[str, Any] | None:
    """An event as the worker writes it, or None: a dict whose rank is a small integer and
    whose result (for a result event) names a known probe and a known status."""
    from vllm_doctor.probes.result import STATUSES

    if not isinstance(ev, dict) or not isinstance(ev.get("ev"), str):
        return None
    rank = ev.get("rank", 0)
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < MAX_WORLD:
        return None
    if ev["ev"] == "result":
        res = ev.get("result")
        if not isinstance(ev.get("probe"), str) or ev["probe"] not in BY_NAME or not isinstance(res, dict):
            return None
        if res.get("status") not in STATUSES or not isinstance(res.get("metrics", {}), dict):
            return None
        if not isinstance(res.get("reason", ""), str):
            return None
        if "part" in ev and not isinstance(ev["part"], str):
            return None
        if not isinstance(res.get("duration_s", 0.0), (int, float)) or isinstance(res.get("duration_s"), bool):
            return None
        for key in ("rules_confirmed", "rules_refuted", "notes"):
            if not isinstance(res.get(key, []), list):
                return None
    elif ev["ev"] == "teardown":
        if not isinstance(ev.get("seconds", 0.0), (int, float)):
            return None
    return ev


def load_results_dir(path: str | os.PathLike, world: int | None = None,
                     skipped: list[str] | None = None) -> list[ProbeResult]:
    """Collate the event files that ``worker --out DIR`` wrote (torchrun, one or several nodes).

    Lines that are not events as the worker writes them are left out (each named in
    ``skipped`` when a list is given); a directory with no usable result is an InputError."""
    base = Path(path)
    if not base.is_dir():
        raise InputError(str(path), "not a directory (give the directory passed to the worker's --out)")
    files = sorted(base.glob("events.*.jsonl"))
    if not files:
        raise InputError(str(path), "no events.*.jsonl files (run the worker with --out DIR)")
    per_probe: dict[str, dict[int, dict[str, Any]]] = {}
    parts: dict[str, dict[str, dict[str, Any]]] = {}
    teardown: dict[int, dict[str, Any]] = {}
    seen_world = 0
    bad: list[str] = skipped if skipped is not None else []
    for f in files:
        try:
            if not f.is_file():
                raise InputError(str(f), "not a regular file")
            if f.stat().st_size > MAX_EVENTS_FILE_BYTES:
                raise InputError(str(f), f"larger than {MAX_EVENTS_FILE_BYTES // 2**20} MiB: not an events file")
            text = f.read_text(encoding="utf-8", errors="replace")
        except OSError as err:
            raise InputError(str(f), f"cannot read: {err.strerror or err}") from None
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                ev = _valid_event(json.loads(line))
            except (ValueError, RecursionError):
                ev = None
            if ev is None:
                bad.append(f"{f.name}:{number}")
                continue
            rank = ev.get("rank", 0)
            if ev["ev"] == "hello" and not ev.get("part"):
                hello_world = ev.get("world", 1)
                if isinstance(hello_world, int) and not isinstance(hello_world, bool) and 0 < hello_world <= MAX_WORLD:
                    seen_world = max(seen_world, hello_world)
            elif ev["ev"] == "result":
                if ev.get("part"):
                    parts.setdefault(ev["probe"], {})[ev["part"]] = ev["result"]
                else:
                    per_probe.setdefault(ev["probe"], {})[rank] = ev["result"]
            elif ev["ev"] == "teardown":
                teardown[rank] = ev
    if not per_probe:
        why = f" ({len(bad)} malformed line(s), first at {bad[0]})" if bad else ""
        raise InputError(str(path), f"no probe results in the events files{why}")
    top_rank = max(r for ranks in per_probe.values() for r in ranks)
    world = world or max(seen_world, top_rank + 1) or 1
    out: list[ProbeResult] = []
    for spec in PROBES:
        if spec.name not in per_probe:
            continue
        ranks = per_probe[spec.name]
        for r in range(world):
            ranks.setdefault(r, {"status": ERROR, "reason": "no result from this rank", "metrics": {}})
        duration = max([float(r.get("duration_s", 0.0)) for r in ranks.values()] or [0.0])
        out.append(merge_rank_results(spec.name, ranks, parts.get(spec.name), duration))
    if teardown:
        hung = [r for r, ev in sorted(teardown.items()) if not ev.get("returned")]
        secs = [float(ev.get("seconds", 0.0)) for ev in teardown.values()]
        out.append(ProbeResult(
            name="teardown", status=WARN if hung else PASS,
            reason=(f"teardown hang: destroy_process_group did not return on rank "
                    f"{', '.join(map(str, hung))}" if hung else f"process group torn down in {max(secs):.2f}s"),
            metrics={"destroy_process_group_s": max(secs)},
            ranks=[{"rank": r, **{k: v for k, v in ev.items() if k not in ("ev", "t")}}
                   for r, ev in sorted(teardown.items())]))
    return out
