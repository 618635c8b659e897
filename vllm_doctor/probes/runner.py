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

The runner's seams live beside it: ``launch`` starts the processes (and keeps the record of
each), ``rendezvous`` says how the ranks meet, ``deadlines`` how long each may take and who
overran, ``collection`` reads their events into the probes' results, ``teardown`` ends them.

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
import os
import stat
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vllm_doctor.errors import InputError
from vllm_doctor.probes.collection import Collector
from vllm_doctor.probes.deadlines import Deadlines, stopped_at
from vllm_doctor.probes.launch import Launcher, Proc, max_ranks, private_dir, too_many_ranks
from vllm_doctor.probes.registry import BY_NAME, DEFAULT_PROBES, MODEL_KEYS, PROBES, ProbeSpec
from vllm_doctor.probes.result import ERROR, PASS, SKIP, TIMEOUT, ProbeResult
from vllm_doctor.probes.teardown import Teardowns, install_signals, kill, kill_all, start_reaper

POLL_S = 0.02

# on_update(probe, state, info): state is "start", "progress" (info: message) or "result"
# (info: the ProbeResult). Called from the runner's thread.
UpdateFn = Callable[[str, str, Any], None]


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
    def __init__(
        self,
        names: list[str] | None,
        tp: int,
        device: str,
        timeout: float,
        model: dict | None = None,
        on_update: UpdateFn | None = None,
        run_dir: str | os.PathLike | None = None,
        teardown_timeout: float = 2.0,
        params: dict | None = None,
        python: str | None = None,
        use_cache: bool = True,
        visible_gpus: int | None = None,
        join_timeout: float | None = None,
        launcher: type[Launcher] | Callable[..., Launcher] | None = None,
    ):
        if device not in ("cuda", "cpu"):
            raise InputError("--device", f"unknown device {device!r} (cuda or cpu)")
        if not isinstance(tp, int) or tp < 1:
            raise InputError("--tp", f"must be at least 1 (got {tp})")
        limit = max_ranks(device, visible_gpus)
        if launcher is None and tp > limit:  # another launcher places the ranks itself
            raise InputError("--tp", too_many_ranks(tp, device, limit))
        self.deadlines = Deadlines(timeout, teardown_timeout, join_timeout)
        self.specs = resolve(names)
        self.tp = tp
        self.device = device
        self.on_update = on_update or (lambda *_: None)
        self.python = python or sys.executable
        self.params = dict(params or {})
        if os.environ.get("VLLM_DOCTOR_PROBE_PARAMS"):  # test hook: extra worker parameters
            try:
                self.params.update(json.loads(os.environ["VLLM_DOCTOR_PROBE_PARAMS"]))
            except ValueError:
                raise InputError("VLLM_DOCTOR_PROBE_PARAMS", "not valid JSON") from None
        if model:
            self.params["model"] = {
                k: model[k] for k in MODEL_KEYS if isinstance(model.get(k), int)
            }
        if device == "cpu":
            self.params.setdefault("small", True)
        self.params["tp"] = tp
        if run_dir is None and os.environ.get("VLLM_DOCTOR_PROBE_DIR"):  # keep logs and events here
            run_dir = os.environ["VLLM_DOCTOR_PROBE_DIR"]
        self.keep_dir = run_dir is not None or os.environ.get("VLLM_DOCTOR_PROBE_KEEP") == "1"
        self.run_dir = (
            private_dir(Path(run_dir))
            if run_dir
            else Path(tempfile.mkdtemp(prefix="vllm-doctor-probe-"))
        )
        self.procs: list[Proc] = []  # every process started, parts included
        self.group: list[Proc] = []  # the worker group now running
        self.launcher = (launcher or Launcher)(
            self.run_dir,
            self.python,
            device,
            tp,
            self.specs,
            self.params,
            self.deadlines.teardown_timeout,
        )
        self.collector = Collector(
            self.specs, tp, self.params, self.procs, self.on_update, use_cache
        )
        self.teardowns = Teardowns(self.deadlines)

    @property
    def info(self) -> dict[str, Any]:
        """About the run itself (the bytecode it compiled), for the JSON report."""
        return self.launcher.info

    def run(self) -> list[ProbeResult]:
        restore = install_signals()
        reaper = start_reaper(self.run_dir, self.python, self.keep_dir)
        try:
            return self._run()
        finally:
            self.launcher.stop_compiler()
            kill_all(self.procs)
            restore()
            if not self.keep_dir:
                import shutil

                shutil.rmtree(self.run_dir, ignore_errors=True)
            if reaper is not None:
                reaper.kill()
                reaper.wait()

    def _launch_group(self, names: list[str]) -> None:
        self.group = self.launcher.launch_group(names)
        self.procs.extend(self.group)
        for name in names:
            self.collector.states[name].attempts += 1

    def _run(self) -> list[ProbeResult]:
        states = self.collector.states
        runnable: list[str] = []
        for name, state in states.items():
            reason = state.spec.skip_reason(self.tp, self.device)
            if reason:
                state.final = ProbeResult(name=name, status=SKIP, reason=reason)
                self.on_update(name, "result", state.final)
            else:
                runnable.append(name)
        self.collector.cached_parts(runnable)
        if runnable:
            parts = [
                (name, part)
                for name in runnable
                for part in states[name].spec.parts
                if part.name not in states[name].parts
            ]  # not answered from the cache
            self.launcher.start_compiler([states[name].spec for name in runnable], parts)
            self.procs.extend(self.launcher.launch_parts(parts))
            self._launch_group(runnable)
            self._loop()
        for state in states.values():
            if state.final is None:  # nothing came back for it (should not happen)
                for rank in range(self.tp):
                    state.per_rank.setdefault(
                        rank,
                        {
                            "status": ERROR,
                            "metrics": {},
                            "synthetic": True,
                            "reason": "no result came back",
                        },
                    )
                self.collector.finalise(state, force=True)
        out = [states[s.name].final for s in self.specs]
        teardown = self.teardowns.result()
        if teardown is not None:
            p2p = states.get("p2p-nccl")
            if p2p is not None and p2p.final is not None and p2p.final.status != SKIP:
                p2p.final.metrics["teardown_destroy_process_group_s"] = teardown.metrics.get(
                    "destroy_process_group_s"
                )
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
                    self.collector.pump(proc)
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
            state = self.collector.states[probe]
            if part in state.parts:
                if not proc.alive():
                    proc.exit_seen = True
                elif (proc.done_at is not None and now - proc.done_at > self.deadlines.grace) or (
                    state.final is not None
                    and proc.done_at is None
                    and self.deadlines.part_overran(proc, now)
                ):
                    kill(proc)
                    proc.exit_seen = True
                continue
            if not proc.alive():
                self.collector.pump(proc)
                if part not in state.parts:
                    where = f" after: {proc.last_progress}" if proc.last_progress else ""
                    state.parts[part] = {
                        "status": ERROR,
                        "metrics": {"last_step": proc.last_progress},
                        "reason": f"the isolated child died{where}",
                    }
                    state.log_tail.extend(self.collector.tails([proc]))
                proc.exit_seen = True
                self.collector.finalise(state)
            elif self.deadlines.part_overran(proc, now):
                kill(proc)
                proc.exit_seen = True
                if proc.current is None:
                    reason = (
                        f"the isolated child did not finish starting (torch import) within "
                        f"{self.deadlines.start_limit:g}s"
                    )
                else:
                    where = f" (last step: {proc.last_progress})" if proc.last_progress else ""
                    reason = f"the isolated child exceeded the {self.deadlines.timeout:g}s deadline{where}"
                state.parts[part] = {"status": TIMEOUT, "metrics": {}, "reason": reason}
                state.log_tail.extend(self.collector.tails([proc]))
                self.collector.finalise(state)

    def _check_group(self, now: float) -> str:
        """'running', 'finished' (all results in, teardown settled) or 'restart'."""
        group = self.group
        if not group:
            return "finished"
        if all(p.done_at is not None for p in group):
            alive = [p for p in group if p.alive()]
            for p in group:  # how long each took to leave after its last word (context teardown)
                if p not in alive and p.exited_at is None:
                    p.exited_at = now
            if not self.deadlines.settled(group, now):
                return "running"
            for p in group:
                self.collector.pump(p)
            self.teardowns.record(
                group, killed=[p.tag for p in alive if p.alive()], groups=self.launcher.groups
            )
            for p in alive:
                kill(p)
            for p in group:
                p.exit_seen = True
            self.group = []
            for state in self.collector.states.values():
                if (
                    state.final is None
                    and len(state.per_rank) >= self.tp
                    and not self.collector.part_running(state.spec.name)
                ):
                    self.collector.finalise(state, force=True)
            return "finished"

        failure, culprits = self.deadlines.group_failure(group, now, self.collector.pump)
        if failure is None:
            return "running"
        return self._fail_group(group, failure, culprits)

    def _fail_group(self, group: list[Proc], failure: str, culprits: list[Proc]) -> str:
        # where each rank had got to, before they are stopped
        blame = "never joined the process group; it " if failure == "join-timeout" else ""
        where, steps = stopped_at(group, culprits, time.monotonic(), blame)
        for p in group:
            if p.alive():
                kill(p)
            self.collector.pump(p)
        tails = self.collector.tails(culprits + [p for p in group if p not in culprits])
        for p in group:
            p.exit_seen = True
        self.group = []
        pending = [
            name
            for name, st in self.collector.states.items()
            if st.final is None and len(st.per_rank) < self.tp
        ]
        not_started = [p for p in culprits if p.init is None and p.current is None]
        if failure == "join-timeout" or (not_started and failure in ("died", "init-timeout")):
            fatal = next((p.fatal for p in group if p.fatal), None)
            if failure == "join-timeout":
                reason = (
                    f"the process group did not form within the {self.deadlines.join_timeout:g}s "
                    f"join deadline: {where}"
                )
                status = TIMEOUT
            elif failure == "init-timeout":
                reason = (
                    f"the workers did not finish starting (torch import, process-group init) "
                    f"within {self.deadlines.start_limit:g}s: {where}"
                )
                status = TIMEOUT
            else:
                codes = ", ".join(f"{p.named}: {p.exit_text()}" for p in not_started)
                reason = f"the workers failed to start: {fatal or codes}"
                status = ERROR
            step_of_rank = {row["rank"]: row for row in steps}
            for name in pending:
                st = self.collector.states[name]
                st.log_tail = tails
                for p in group:
                    st.per_rank.setdefault(
                        p.rank,
                        {
                            "status": status,
                            "reason": reason,
                            "metrics": {"stopped": step_of_rank[p.rank]},
                            "synthetic": True,
                        },
                    )
                if not self.collector.part_running(name):
                    self.collector.finalise(st, force=True)
            self.teardowns.record(group, killed=[], groups=self.launcher.groups, failed=True)
            return "finished"

        # A rank that failed while its process group was being torn down in the background:
        # the teardown is the suspect, not the probe that was running beside it.
        in_teardown = [
            p for p in culprits if p.teardown_started is not None and not p.teardown_returned
        ]
        blamed: set[str] = set()
        for p in culprits:
            if p.current and p not in in_teardown:
                blamed.add(p.current)
            if p.aborted:  # reported its own error, then stopped: the others stop with it
                blamed.add(p.aborted)
        rerun: list[str] = []
        for name in pending:
            st = self.collector.states[name]
            if name in blamed:
                status = TIMEOUT if failure == "timeout" else ERROR
                if failure == "timeout":
                    reason = f"exceeded the {self.deadlines.timeout:g}s deadline"
                    slow = [p for p in culprits if p.current == name and p.last_progress]
                    if slow:
                        reason += f" (last step: {slow[0].last_progress})"
                    elsewhere = [p.named for p in culprits if p.current == name and p.where]
                    if elsewhere:  # ranks on other nodes: say which
                        reason += f" on {', '.join(elsewhere)}"
                else:
                    dead = [p for p in culprits if p.current == name]
                    stopped = [p for p in culprits if p.aborted == name]
                    reason = "; ".join(f"{p.named} died ({p.exit_text()})" for p in dead) or (
                        f"stopped with its worker group after an error on "
                        f"{', '.join(p.tag for p in stopped)}"
                        if stopped
                        else "a worker died"
                    )
                for p in group:
                    st.per_rank.setdefault(
                        p.rank,
                        {"status": status, "reason": reason, "metrics": {}, "synthetic": True},
                    )
                st.log_tail = tails
                if not self.collector.part_running(name):
                    self.collector.finalise(st, force=True)
            elif st.attempts >= 2:
                st.log_tail = tails
                for p in group:
                    st.per_rank.setdefault(
                        p.rank,
                        {
                            "status": ERROR,
                            "metrics": {},
                            "synthetic": True,
                            "reason": "its worker group failed twice",
                        },
                    )
                if not self.collector.part_running(name):
                    self.collector.finalise(st, force=True)
            else:
                st.per_rank.clear()
                why = "a teardown failure" if in_teardown else f"{failure} of an earlier probe"
                st.notes.append(f"ran again in fresh worker processes after {why}")
                rerun.append(name)
        self.teardowns.record(
            group,
            killed=[p.tag for p in in_teardown],
            groups=self.launcher.groups,
            failed=True,
            during=failure if in_teardown else None,
        )
        if rerun:
            self._launch_group(rerun)
            return "restart"
        return "finished"


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


def run_probes(
    names: list[str] | None,
    tp: int,
    device: str,
    timeout: float,
    model: dict | None = None,
    *,
    on_update: UpdateFn | None = None,
    run_dir: str | os.PathLike | None = None,
    teardown_timeout: float = 2.0,
    params: dict | None = None,
    use_cache: bool = True,
    visible_gpus: int | None = None,
    info: dict[str, Any] | None = None,
    join_timeout: float | None = None,
    launcher: Callable[..., Launcher] | None = None,
) -> list[ProbeResult]:
    """Run the probes and return one ProbeResult each (plus ``teardown`` when a process group ran).

    ``names``: probe names (None: all but those run on request); ``tp``: ranks (one GPU each with ``device="cuda"``);
    ``timeout``: seconds each probe may take; ``model``: ``{"vocab_size": .., "hidden_size": ..}``
    from the model's config.json (None: the probes' defaults, DiffusionGemma-like sizes);
    ``use_cache``: reuse deterministic sub-check results (the traced torch.compile failure);
    ``visible_gpus``: GPUs this node shows (caps ``tp`` on CUDA; None: not known);
    ``info``: filled with what the run did besides the probes (the bytecode it compiled);
    ``join_timeout``: seconds from the first rank's joining the process group for the group to
    form (None: the start-up limit alone); ``launcher``: what starts the processes, where
    (default: this machine's ``Launcher``; ``fleet.probe_ray`` places them on Ray nodes).
    """
    runner = Runner(
        names,
        tp,
        device,
        timeout,
        model,
        on_update=on_update,
        run_dir=run_dir,
        teardown_timeout=teardown_timeout,
        params=params,
        use_cache=use_cache,
        visible_gpus=visible_gpus,
        join_timeout=join_timeout,
        launcher=launcher,
    )
    try:
        return runner.run()
    finally:
        if info is not None:
            info.update(runner.info)
