"""The probe runner: launch worker processes, stream their results, enforce deadlines, clean up.

No torch in this process. Layout of one run:

* one worker process per rank (``python -m vllm_doctor.probes.worker``) runs every selected
  probe in sequence, so torch is imported and the process group initialised once per rank;
* probes with isolated *parts* get one extra single-process child per part, started at the
  same time, so they cost no time on the critical path;
* every process is the leader of its own process group (``start_new_session``), so a kill
  takes its children too, and none of them sees the terminal's Ctrl-C: the runner kills them
  all on Ctrl-C, on SIGTERM, on any error and at the end of the run.

Workers append one JSON event per line to their own file in the run directory; the runner
polls those files and finalises a probe as soon as every rank (and every part) reported it.
A rank that exceeds the deadline of its current probe, or dies, ends its group: the probe it
was running is reported (``timeout`` / ``error`` with the last lines the ranks printed) and
the probes not yet finished run again in a fresh group. After all ranks said ``done``, each
worker gets a short grace period to tear down; a worker still alive after it is killed and
reported as a teardown hang.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from vllm_doctor.errors import InputError
from vllm_doctor.probes.registry import BY_NAME, PROBES, ProbeSpec
from vllm_doctor.probes.result import (ERROR, PASS, SKIP, TIMEOUT, WARN, ProbeResult,
                                       merge_rank_results)

LOG_TAIL_LINES = 12
POLL_S = 0.02
INIT_TIMEOUT_MIN_S = 60.0

# on_update(probe, state, info): state is "start", "progress" (info: message) or "result"
# (info: the ProbeResult). Called from the runner's thread.
UpdateFn = Callable[[str, str, Any], None]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _package_root() -> str:
    return str(Path(__file__).resolve().parent.parent.parent)


def tail(path: Path, lines: int = LOG_TAIL_LINES) -> list[str]:
    try:
        data = path.read_bytes()[-32768:]
    except OSError:
        return []
    text = data.decode("utf-8", errors="replace")
    out = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    return out[-lines:]


@dataclass
class _Proc:
    tag: str  # "rank0", "part-tp-softembed-compile"
    popen: subprocess.Popen
    events: Path
    log: Path
    launched: float
    rank: int = 0
    part: tuple[str, str] | None = None  # (probe, part) for an isolated child
    offset: int = 0
    partial: bytes = b""
    init: dict[str, Any] | None = None
    fatal: str | None = None
    current: str | None = None
    current_since: float = 0.0
    done_at: float | None = None
    teardown: dict[str, Any] | None = None
    aborted: bool = False
    killed: bool = False
    exit_seen: bool = False

    def alive(self) -> bool:
        return self.popen.poll() is None


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


class Runner:
    def __init__(self, names: list[str] | None, tp: int, device: str, timeout: float,
                 model: dict | None = None, on_update: UpdateFn | None = None,
                 run_dir: str | os.PathLike | None = None, teardown_timeout: float = 2.0,
                 params: dict | None = None, python: str | None = None):
        if device not in ("cuda", "cpu"):
            raise InputError("--device", f"unknown device {device!r} (cuda or cpu)")
        if tp < 1:
            raise InputError("--tp", f"must be at least 1 (got {tp})")
        if timeout <= 0:
            raise InputError("--timeout", f"must be positive (got {timeout})")
        self.specs = resolve(names)
        self.tp = tp
        self.device = device
        self.timeout = float(timeout)
        self.teardown_timeout = float(teardown_timeout)
        self.grace = self.teardown_timeout + 1.5
        self.on_update = on_update or (lambda *_: None)
        self.python = python or sys.executable
        self.params = dict(params or {})
        if model:
            self.params["model"] = {k: model[k] for k in ("vocab_size", "hidden_size")
                                    if isinstance(model.get(k), int)}
        if device == "cpu":
            self.params.setdefault("small", True)
        self.params["tp"] = tp
        self.keep_dir = run_dir is not None or os.environ.get("VLLM_DOCTOR_PROBE_KEEP") == "1"
        self.run_dir = Path(run_dir) if run_dir else Path(tempfile.mkdtemp(prefix="vllm-doctor-probe-"))
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.states = {s.name: _ProbeState(s) for s in self.specs}
        self.procs: list[_Proc] = []
        self.group: list[_Proc] = []
        self.groups = 0
        self.teardowns: list[dict[str, Any]] = []
        self.init_info: list[dict[str, Any]] = []

    # -- launching ----------------------------------------------------------------------------
    def _env(self, extra: dict[str, str]) -> dict[str, str]:
        env = dict(os.environ)
        root = _package_root()
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env["PYTHONUNBUFFERED"] = "1"
        if self.device == "cpu":
            env.setdefault("GLOO_SOCKET_IFNAME", "lo")
            procs = self.tp + sum(len(s.parts) for s in self.specs)
            env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // max(1, procs))))
        env.update(extra)
        return env

    def _spawn(self, tag: str, args: list[str], env: dict[str, str], rank: int = 0,
               part: tuple[str, str] | None = None) -> _Proc:
        events = self.run_dir / f"events.{tag}.g{self.groups}.jsonl"
        log = self.run_dir / f"{tag}.g{self.groups}.log"
        events.touch()
        with open(log, "wb") as log_fh:
            popen = subprocess.Popen(
                [self.python, "-m", "vllm_doctor.probes.worker", "--events", str(events), *args],
                stdin=subprocess.DEVNULL, stdout=log_fh, stderr=subprocess.STDOUT, env=env,
                start_new_session=True, cwd=str(self.run_dir))
        proc = _Proc(tag=tag, popen=popen, events=events, log=log, launched=time.monotonic(),
                     rank=rank, part=part)
        self.procs.append(proc)
        return proc

    def _common_args(self) -> list[str]:
        return ["--device", self.device, "--params", json.dumps(self.params),
                "--teardown-timeout", str(self.teardown_timeout)]

    def _launch_group(self, names: list[str]) -> None:
        self.groups += 1
        port = _free_port()
        self.group = []
        for rank in range(self.tp):
            env = self._env({"RANK": str(rank), "WORLD_SIZE": str(self.tp), "LOCAL_RANK": str(rank),
                             "LOCAL_WORLD_SIZE": str(self.tp), "MASTER_ADDR": "127.0.0.1",
                             "MASTER_PORT": str(port)})
            self.group.append(self._spawn(f"rank{rank}", ["--probes", ",".join(names), *self._common_args()],
                                          env, rank=rank))
        for name in names:
            self.states[name].attempts += 1

    def _launch_parts(self, names: list[str]) -> None:
        for name in names:
            spec = self.states[name].spec
            for part in spec.parts:
                env = self._env(dict(part.env, RANK="0", WORLD_SIZE="1", LOCAL_RANK="0"))
                self._spawn(f"part-{name}-{part.name}",
                            ["--part", f"{name}:{part.name}", *self._common_args()], env,
                            part=(name, part.name))

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

    def _handle(self, proc: _Proc, ev: dict[str, Any]) -> None:
        kind = ev.get("ev")
        now = time.monotonic()
        if kind == "init":
            proc.init = ev
            self.init_info.append(ev)
        elif kind == "fatal":
            proc.fatal = ev.get("error", "worker failed")
        elif kind == "start":
            proc.current = ev.get("probe")
            proc.current_since = now
            state = self.states.get(proc.current or "")
            if state and state.started_at is None:
                state.started_at = now
                self.on_update(state.spec.name, "start", None)
        elif kind == "progress":
            self.on_update(ev.get("probe", ""), "progress", ev.get("msg", ""))
        elif kind == "result":
            name = ev.get("probe", "")
            state = self.states.get(name)
            if state is None or state.final is not None:
                return
            res = ev.get("result", {})
            if proc.part:
                state.parts[proc.part[1]] = res
            else:
                state.per_rank[proc.rank] = res
                proc.current = None
            self._maybe_finalise(state)
        elif kind == "abort":
            proc.aborted = True
        elif kind == "done":
            proc.done_at = now
            proc.current = None
        elif kind == "teardown":
            proc.teardown = ev

    def _complete(self, state: _ProbeState) -> bool:
        ranks_ok = len(state.per_rank) >= self.tp
        parts_ok = all(p.name in state.parts for p in state.spec.parts)
        return ranks_ok and parts_ok

    def _maybe_finalise(self, state: _ProbeState, force: bool = False) -> None:
        if state.final is not None or not (force or self._complete(state)):
            return
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
            label = f"[{p.tag}]"
            out.extend(f"{label} {ln}" for ln in tail(p.log))
        return out

    # -- killing ------------------------------------------------------------------------------
    def _kill(self, proc: _Proc) -> None:
        if proc.popen.poll() is None:
            proc.killed = True
        try:
            os.killpg(proc.popen.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.popen.wait(timeout=5)
        except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL does not fail
            pass

    def kill_all(self) -> None:
        for proc in self.procs:
            self._kill(proc)

    # -- the loop -----------------------------------------------------------------------------
    def run(self) -> list[ProbeResult]:
        restore = self._install_signals()
        try:
            return self._run()
        finally:
            self.kill_all()
            restore()
            if not self.keep_dir:
                import shutil

                shutil.rmtree(self.run_dir, ignore_errors=True)

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
                state.final = ProbeResult(name=name, status=SKIP, reason=reason,
                                          rules_confirmed=_skip_rules(state.spec, reason))
                self.on_update(name, "result", state.final)
            else:
                runnable.append(name)
        if runnable:
            self._launch_parts(runnable)
            self._launch_group(runnable)
            self._loop()
        for state in self.states.values():
            if state.final is None:  # nothing came back for it (should not happen)
                for rank in range(self.tp):
                    state.per_rank.setdefault(rank, {"status": ERROR, "metrics": {},
                                                     "reason": "no result came back"})
                self._maybe_finalise(state, force=True)
        out = [self.states[s.name].final for s in self.specs]
        teardown = self._teardown_result()
        if teardown is not None:
            out.append(teardown)
        return out

    def _loop(self) -> None:
        while True:
            for proc in list(self.procs):
                for ev in self._read_events(proc):
                    self._handle(proc, ev)
            now = time.monotonic()
            self._check_parts(now)
            group_state = self._check_group(now)
            if group_state == "restart":
                continue
            parts_running = any(p.part and not p.exit_seen for p in self.procs)
            if group_state == "finished" and not parts_running:
                return
            time.sleep(POLL_S)

    def _check_parts(self, now: float) -> None:
        for proc in self.procs:
            if not proc.part or proc.exit_seen:
                continue
            probe, part = proc.part
            state = self.states[probe]
            if part in state.parts:
                if not proc.alive():
                    proc.exit_seen = True
                elif proc.done_at is not None and now - proc.done_at > self.grace:
                    self._kill(proc)
                    proc.exit_seen = True
                continue
            if not proc.alive():
                for ev in self._read_events(proc):
                    self._handle(proc, ev)
                if part not in state.parts:
                    code = proc.popen.returncode
                    state.parts[part] = {"status": ERROR, "metrics": {},
                                         "reason": proc.fatal or f"the isolated child died ({_describe_exit(code)})"}
                    state.log_tail.extend(self._tails([proc]))
                proc.exit_seen = True
                self._maybe_finalise(state)
            elif now - proc.launched > self.timeout + INIT_TIMEOUT_MIN_S * (proc.init is None and proc.current is None):
                self._kill(proc)
                proc.exit_seen = True
                state.parts[part] = {"status": TIMEOUT, "metrics": {},
                                     "reason": f"the isolated child exceeded the {self.timeout:g}s deadline"}
                state.log_tail.extend(self._tails([proc]))
                self._maybe_finalise(state)

    def _check_group(self, now: float) -> str:
        """'running', 'finished' (all results in, teardown settled) or 'restart'."""
        group = self.group
        if not group:
            return "finished"
        # Teardown phase: every rank said done.
        if all(p.done_at is not None for p in group):
            last_done = max(p.done_at for p in group)  # type: ignore[type-var]
            alive = [p for p in group if p.alive()]
            if alive and now - last_done <= self.grace:
                return "running"
            for p in group:
                for ev in self._read_events(p):
                    self._handle(p, ev)
            self._record_teardown(group, killed=[p.tag for p in alive])
            for p in alive:
                self._kill(p)
            for p in group:
                p.exit_seen = True
            self.group = []
            # Probes that a rank reported and the others never did (cannot happen unless a
            # worker skipped one) are finalised with what came in.
            for state in self.states.values():
                if state.final is None and state.per_rank and len(state.spec.parts) <= len(state.parts):
                    self._maybe_finalise(state, force=True)
            return "finished"

        failure: str | None = None
        culprits: list[_Proc] = []
        for p in group:
            if p.done_at is not None:
                continue
            if not p.alive():
                for ev in self._read_events(p):
                    self._handle(p, ev)
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

    def _fail_group(self, group: list[_Proc], failure: str, culprits: list[_Proc]) -> str:
        tails = None
        for p in group:
            if p.alive():
                self._kill(p)
            for ev in self._read_events(p):
                self._handle(p, ev)
        tails = self._tails(group)
        for p in group:
            p.exit_seen = True
        self.group = []
        never_started = all(p.init is None for p in culprits) and failure in ("died", "init-timeout") \
            and all(p.current is None for p in culprits)
        pending = [name for name, st in self.states.items() if st.final is None
                   and not _only_parts_pending(st, self.tp)]
        if never_started:
            fatal = next((p.fatal for p in group if p.fatal), None)
            if failure == "init-timeout":
                reason = (f"the workers did not finish starting (torch import, process-group init) "
                          f"within {max(self.timeout, INIT_TIMEOUT_MIN_S):g}s")
                status = TIMEOUT
            else:
                codes = ", ".join(f"{p.tag}: {_describe_exit(p.popen.returncode)}" for p in culprits)
                reason = f"the workers failed to start: {fatal or codes}"
                status = ERROR
            for name in pending:
                st = self.states[name]
                st.log_tail = tails
                for p in group:
                    st.per_rank.setdefault(p.rank, {"status": status, "reason": reason, "metrics": {}})
                self._maybe_finalise(st, force=True)
            return "finished"

        blamed: set[str] = set()
        for p in culprits:
            if p.current:
                blamed.add(p.current)
            elif p.aborted:
                pass  # the probe that poisoned the process reported its own error
        rerun: list[str] = []
        for name in pending:
            st = self.states[name]
            if name in blamed:
                status = TIMEOUT if failure == "timeout" else ERROR
                if failure == "timeout":
                    reason = f"exceeded the {self.timeout:g}s deadline"
                else:
                    dead = [p for p in culprits if p.current == name]
                    reason = "; ".join(f"{p.tag} died ({_describe_exit(p.popen.returncode)})" for p in dead) \
                        or "a worker died"
                for p in group:
                    if p.rank not in st.per_rank:
                        st.per_rank[p.rank] = {"status": status, "reason": reason, "metrics": {}}
                st.log_tail = tails
                if st.spec.parts and len(st.parts) < len(st.spec.parts):
                    st.notes.append("finalised before its isolated sub-check finished")
                    for part in st.spec.parts:
                        st.parts.setdefault(part.name, {"status": SKIP, "reason": "not waited for",
                                                        "metrics": {}})
                self._maybe_finalise(st, force=True)
            elif len(st.per_rank) < self.tp:
                if st.attempts >= 2:
                    st.log_tail = tails
                    for p in group:
                        st.per_rank.setdefault(p.rank, {"status": ERROR, "metrics": {},
                                                        "reason": "its worker group failed twice"})
                    self._maybe_finalise(st, force=True)
                else:
                    st.per_rank.clear()
                    st.notes.append(f"ran again in fresh worker processes after {failure} "
                                    f"of an earlier probe")
                    rerun.append(name)
        self._record_teardown(group, killed=[], failed=True)
        if rerun:
            self._launch_group(rerun)
            return "restart"
        return "finished"

    # -- teardown -----------------------------------------------------------------------------
    def _record_teardown(self, group: list[_Proc], killed: list[str], failed: bool = False) -> None:
        self.teardowns.append({
            "group": self.groups, "failed": failed, "killed": killed,
            "ranks": [{"rank": p.rank, "backend": (p.init or {}).get("backend"),
                       "teardown": p.teardown, "exit": p.popen.returncode,
                       "init": {k: v for k, v in (p.init or {}).items()
                                if k not in ("ev", "rank", "t")}} for p in group],
        })

    def _teardown_result(self) -> ProbeResult | None:
        clean = [t for t in self.teardowns if not t["failed"]]
        if not clean:
            return None
        last = clean[-1]
        uses_pg = any(r["backend"] for r in last["ranks"]) or any(r["teardown"] for r in last["ranks"])
        if not uses_pg and not last["killed"]:
            return None
        ranks = []
        hung: list[int] = []
        for r in last["ranks"]:
            td = r["teardown"] or {}
            returned = td.get("returned")
            entry = {"rank": r["rank"], "status": PASS, "seconds": td.get("seconds"),
                     "returned": returned, "killed": f"rank{r['rank']}" in last["killed"],
                     "init": r["init"]}
            if returned is False or entry["killed"] or td.get("error"):
                entry["status"] = WARN
                hung.append(r["rank"])
            if td.get("error"):
                entry["error"] = td["error"]
            ranks.append(entry)
        seconds = [r["seconds"] for r in ranks if r["seconds"] is not None]
        metrics: dict[str, Any] = {"destroy_process_group_s": max(seconds) if seconds else None,
                                   "teardown_limit_s": self.teardown_timeout}
        init = [r["init"] for r in ranks if r["init"]]
        if init:
            for key in ("import_torch_s", "cuda_init_s", "dist_init_s"):
                vals = [i[key] for i in init if isinstance(i.get(key), (int, float))]
                if vals:
                    metrics[f"max_{key}"] = max(vals)
        if hung:
            who = ", ".join(str(r) for r in hung)
            not_returned = [r for r in ranks if r["returned"] is False]
            if not_returned:
                reason = (f"teardown hang: destroy_process_group did not return within "
                          f"{self.teardown_timeout:g}s on rank {who}, after every rank had reported "
                          f"its results; the workers were stopped (a known hazard of this stack: "
                          f"vLLM shutdown can hang the same way)")
            else:
                reason = (f"teardown hang: rank {who} did not exit within {self.grace:g}s after "
                          f"reporting its results and was killed")
            status = WARN
        else:
            reason = (f"process groups torn down in {metrics['destroy_process_group_s']:.2f}s"
                      if metrics.get("destroy_process_group_s") is not None else "workers exited")
            status = PASS
        return ProbeResult(name="teardown", status=status, reason=reason, metrics=metrics,
                           ranks=ranks, duration_s=metrics.get("destroy_process_group_s") or 0.0)


def _only_parts_pending(state: _ProbeState, tp: int) -> bool:
    return len(state.per_rank) >= tp


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def _skip_rules(spec: ProbeSpec, reason: str) -> list[str]:
    return []


def resolve(names: list[str] | None) -> list[ProbeSpec]:
    """The probe specs for ``names`` (None or empty: every public probe), in canonical order."""
    if not names:
        return [p for p in PROBES if not p.hidden]
    wanted = []
    for raw in names:
        name = raw.strip()
        if not name:
            continue
        if name not in BY_NAME:
            from vllm_doctor.probes.registry import PROBE_NAMES

            raise InputError("--only", f"unknown probe {name!r} (known: {', '.join(PROBE_NAMES)})")
        if name not in wanted:
            wanted.append(name)
    return [p for p in PROBES if p.name in wanted]


def run_probes(names: list[str] | None, tp: int, device: str, timeout: float,
               model: dict | None = None, *, on_update: UpdateFn | None = None,
               run_dir: str | os.PathLike | None = None, teardown_timeout: float = 2.0,
               params: dict | None = None) -> list[ProbeResult]:
    """Run the probes and return one ProbeResult each (plus ``teardown`` when a process group ran).

    ``names``: probe names (None: all); ``tp``: ranks (one GPU each with ``device="cuda"``);
    ``timeout``: seconds each probe may take; ``model``: ``{"vocab_size": .., "hidden_size": ..}``
    from the model's config.json (None: the probes' defaults, DiffusionGemma-like sizes).
    """
    runner = Runner(names, tp, device, timeout, model, on_update=on_update, run_dir=run_dir,
                    teardown_timeout=teardown_timeout, params=params)
    return runner.run()


def load_results_dir(path: str | os.PathLike, world: int | None = None) -> list[ProbeResult]:
    """Collate the event files that ``worker --out DIR`` wrote (torchrun, several nodes)."""
    base = Path(path)
    files = sorted(base.glob("events.*.jsonl"))
    if not files:
        raise InputError(str(path), "no events.*.jsonl files (run the worker with --out DIR)")
    per_probe: dict[str, dict[int, dict[str, Any]]] = {}
    parts: dict[str, dict[str, dict[str, Any]]] = {}
    teardown: dict[int, dict[str, Any]] = {}
    inits: dict[int, dict[str, Any]] = {}
    seen_world = 0
    for f in files:
        for line in f.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            rank = int(ev.get("rank", 0))
            if ev.get("ev") == "hello":
                seen_world = max(seen_world, int(ev.get("world", 1)))
            elif ev.get("ev") == "init":
                inits[rank] = ev
            elif ev.get("ev") == "result":
                if ev.get("part"):
                    parts.setdefault(ev["probe"], {})[ev["part"]] = ev.get("result", {})
                else:
                    per_probe.setdefault(ev["probe"], {})[rank] = ev.get("result", {})
            elif ev.get("ev") == "teardown":
                teardown[rank] = ev
    world = world or seen_world or 1
    out: list[ProbeResult] = []
    for spec in PROBES:
        if spec.name not in per_probe:
            continue
        ranks = per_probe[spec.name]
        missing = [r for r in range(world) if r not in ranks]
        for r in missing:
            ranks[r] = {"status": ERROR, "reason": "no result from this rank", "metrics": {}}
        duration = max([float(r.get("duration_s", 0.0)) for r in ranks.values()] or [0.0])
        out.append(merge_rank_results(spec.name, ranks, parts.get(spec.name), duration))
    if teardown:
        hung = [r for r, ev in sorted(teardown.items()) if not ev.get("returned")]
        secs = [ev.get("seconds", 0.0) for ev in teardown.values()]
        out.append(ProbeResult(
            name="teardown", status=WARN if hung else PASS,
            reason=(f"teardown hang: destroy_process_group did not return on rank "
                    f"{', '.join(map(str, hung))}" if hung else f"process groups torn down in {max(secs):.2f}s"),
            metrics={"destroy_process_group_s": max(secs)},
            ranks=[{"rank": r, **{k: v for k, v in ev.items() if k not in ("ev", "t")}}
                   for r, ev in sorted(teardown.items())]))
    return out
