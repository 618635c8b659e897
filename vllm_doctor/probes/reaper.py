"""The run directory's reaper: outlives a runner that was killed outright.

``python -m vllm_doctor.probes.reaper RUNNER_PID RUN_DIR [--keep]`` is started by the runner
in its own session. It waits while the runner lives. A runner that finishes normally removes
the run directory and kills the reaper; one killed by SIGKILL or SIGQUIT cannot, so the reaper
kills every process the runner listed in ``RUN_DIR/pids`` that is still a probe process (the
workers also die on their own, see ``worker.die_with_parent``) and removes the directory
(``--keep``: only the processes). No torch here.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import time
from pathlib import Path

POLL_S = 0.1


def _is_probe_process(pid: int) -> bool:
    """Guard against a recycled pid: on Linux, the process must still be one of ours."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return not Path("/proc/self").exists()  # no /proc (macOS): trust the list
    except OSError:
        return False
    return b"vllm_doctor.probes.worker" in cmdline


def reap(run_dir: Path, keep: bool) -> None:
    try:
        listed = (run_dir / "pids").read_text(encoding="ascii").split()
    except OSError:
        listed = []
    for word in listed:
        if not word.isdigit():
            continue
        pid = int(word)
        if _is_probe_process(pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)  # each worker leads its own process group
    if not keep:
        shutil.rmtree(run_dir, ignore_errors=True)


def main(argv: list[str]) -> int:
    if len(argv) < 2 or not argv[0].isdigit():
        print(
            "usage: python -m vllm_doctor.probes.reaper RUNNER_PID RUN_DIR [--keep]",
            file=sys.stderr,
        )
        return 2
    runner, run_dir, keep = int(argv[0]), Path(argv[1]), "--keep" in argv[2:]
    while os.getppid() == runner:
        if not run_dir.exists():  # the runner finished and cleaned up
            return 0
        time.sleep(POLL_S)
    reap(run_dir, keep)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
