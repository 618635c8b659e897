"""Ending the probe processes: killing a process with its children, the teardown records of each
worker group and the ``teardown`` result made of them, the reaper that outlives a runner killed
outright, and the signals that end a run. No torch here.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vllm_doctor.child import module_command
from vllm_doctor.probes.deadlines import Deadlines
from vllm_doctor.probes.launch import Proc, child_pythonpath, pid_alive
from vllm_doctor.probes.result import PASS, WARN, ProbeResult


class Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGHUP while probes run."""


def kill(proc: Proc) -> None:
    """SIGKILL the process and its process group; wait until it is gone."""
    if proc.alive():
        proc.killed = True
    if proc.remote is not None:  # on another node: its host there ends it
        proc.remote.kill(proc)
        return
    pid = proc.popen.pid if proc.popen is not None else proc.pid
    if pid is not None:
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
    if proc.popen is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):  # SIGKILL does not fail
            proc.popen.wait(timeout=5)
    else:
        deadline = time.monotonic() + 2.0
        while pid_alive(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.01)


def kill_all(procs: list[Proc]) -> None:
    for proc in list(procs):
        kill(proc)


def start_reaper(run_dir: Path, python: str, keep: bool) -> subprocess.Popen | None:
    """A small process that outlives this one if it is killed outright (SIGKILL): it then
    kills the workers still running and removes the run directory (see reaper.py)."""
    cmd = module_command("vllm_doctor.probes.reaper", str(os.getpid()), str(run_dir), python=python)
    if keep:
        cmd.append("--keep")
    env = dict(os.environ, PYTHONPATH=child_pythonpath(os.environ))
    try:
        # the run directory as its working directory: nothing of the user's is imported
        return subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
            cwd=str(run_dir),
        )
    except OSError:  # pragma: no cover - the workers still die with this process
        return None


def install_signals() -> Callable[[], None]:
    """SIGTERM and SIGHUP raise Interrupted in the main thread (so every process is killed on the
    way out); returns what restores the old handlers."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def handler(signum, frame):
        raise Interrupted(f"signal {signum}")

    old = {}
    for sig in (signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(ValueError, OSError):  # not the main thread
            old[sig] = signal.signal(sig, handler)

    def restore() -> None:
        for sig, h in old.items():
            signal.signal(sig, h)

    return restore


class Teardowns:
    """The teardown records of a run's worker groups."""

    def __init__(self, deadlines: Deadlines):
        self.deadlines = deadlines
        self.records: list[dict[str, Any]] = []

    def record(
        self,
        group: list[Proc],
        killed: list[str],
        groups: int,
        failed: bool = False,
        during: str | None = None,
    ) -> None:
        """What one worker group's ranks said of their teardown, and which were killed."""
        self.records.append(
            {
                "group": group[0].group if group else groups,
                "failed": failed,
                "killed": killed,
                "during": during,
                "ranks": [
                    {
                        "rank": p.rank,
                        "backend": (p.init or {}).get("backend"),
                        "teardown": p.teardown,
                        "started": p.teardown_started is not None,
                        "exit": p.exit_text(),
                        "exit_after_done_s": (
                            round(p.exited_at - p.done_at, 3)
                            if p.exited_at is not None and p.done_at is not None
                            else None
                        ),
                        "init": {
                            k: v for k, v in (p.init or {}).items() if k not in ("ev", "rank", "t")
                        },
                    }
                    for p in group
                ],
            }
        )

    def result(self) -> ProbeResult | None:
        """The ``teardown`` result of the last group that finished or failed in its teardown."""
        records = [t for t in self.records if not t["failed"] or t["during"]]
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
            entry = {
                "rank": r["rank"],
                "status": PASS,
                "seconds": td.get("seconds"),
                "returned": td.get("returned"),
                "killed": killed,
                "init": r["init"],
                "exit_after_done_s": r.get("exit_after_done_s"),
            }
            if td.get("returned") is False or killed or td.get("error"):
                entry["status"] = WARN
                hung.append(r["rank"])
            if td.get("error"):
                entry["error"] = td["error"]
            ranks.append(entry)
        seconds = [r["seconds"] for r in ranks if r["seconds"] is not None]
        metrics: dict[str, Any] = {
            "destroy_process_group_s": max(seconds) if seconds else None,
            "teardown_limit_s": self.deadlines.teardown_timeout,
        }
        init = [r["init"] for r in ranks if r["init"]]
        for key in ("import_torch_s", "cuda_init_s", "dist_init_s"):
            vals = [i[key] for i in init if isinstance(i.get(key), (int, float))]
            if vals:
                metrics[f"max_{key}"] = max(vals)
        if hung:
            who = ", ".join(str(r) for r in hung)
            if last["during"]:
                reason = (
                    f"teardown failure: rank {who} {last['during']} while destroy_process_group "
                    f"ran in the background; the probes it interrupted ran again"
                )
            elif any(r["returned"] is False for r in ranks):
                reason = (
                    f"teardown hang: destroy_process_group did not return within "
                    f"{self.deadlines.teardown_timeout:g}s on rank {who}, after every rank had reported "
                    f"its results; the workers were stopped"
                )
            else:
                reason = (
                    f"teardown hang: rank {who} did not exit within {self.deadlines.grace:g}s after "
                    f"reporting its results and was killed"
                )
            status = WARN
        else:
            status = PASS
            reason = (
                f"process group torn down in {metrics['destroy_process_group_s']:.2f}s"
                if metrics.get("destroy_process_group_s") is not None
                else "workers exited"
            )
        return ProbeResult(
            name="teardown",
            status=status,
            reason=reason,
            metrics=metrics,
            ranks=ranks,
            duration_s=metrics.get("destroy_process_group_s") or 0.0,
        )
