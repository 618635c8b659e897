"""How long each thing may take, and who overran: the deadlines of one probe run. No torch here.

A probe has ``timeout`` seconds from its start on a rank (or in its isolated child); a process
that has not started its first probe has ``start_limit`` (torch import, process-group init); a
worker that reported its last result has ``grace`` to tear its process group down and exit.
"""

from __future__ import annotations

import math

from vllm_doctor.errors import InputError
from vllm_doctor.probes.launch import Proc

INIT_TIMEOUT_MIN_S = 60.0  # torch import + process-group init may take this long on a cold disk
MAX_TIMEOUT_S = 24 * 3600.0
MAX_TEARDOWN_TIMEOUT_S = 600.0
TEARDOWN_GRACE_S = 1.5  # beyond the teardown limit: the worker's own exit


def check_seconds(option: str, value: float, maximum: float, allow_zero: bool = False) -> float:
    """A finite number of seconds in range, or an InputError naming the option."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise InputError(option, f"not a number of seconds: {value!r}") from None
    low_ok = value >= 0 if allow_zero else value > 0
    if not math.isfinite(value) or not low_ok or value > maximum:
        bound = "at least 0" if allow_zero else "more than 0"
        raise InputError(
            option,
            f"must be a finite number of seconds, {bound} and at most {maximum:g} (got {value:g})",
        )
    return value


class Deadlines:
    """The checked limits of one run, and the questions the runner's loop asks of them."""

    def __init__(self, timeout: float, teardown_timeout: float):
        self.timeout = check_seconds("--timeout", timeout, MAX_TIMEOUT_S)
        self.teardown_timeout = check_seconds(
            "--teardown-timeout", teardown_timeout, MAX_TEARDOWN_TIMEOUT_S, allow_zero=True
        )
        self.grace = self.teardown_timeout + TEARDOWN_GRACE_S

    @property
    def start_limit(self) -> float:
        """Seconds a process may take before its first probe starts."""
        return max(self.timeout, INIT_TIMEOUT_MIN_S)

    def part_overran(self, proc: Proc, now: float) -> bool:
        """A sub-check gets the workers' start-up allowance until it starts, then the deadline."""
        if proc.current is None:
            return now - proc.launched > self.start_limit
        return now - proc.current_since > self.timeout

    def group_failure(self, group: list[Proc], now: float, pump) -> tuple[str | None, list[Proc]]:
        """Why the worker group must end now ("died", "init-timeout", "timeout"; None: it need
        not) and the ranks to blame. A rank found dead is read once more (``pump``): it may
        have said ``done`` just before it exited."""
        failure: str | None = None
        culprits: list[Proc] = []
        for p in group:
            if p.done_at is not None:
                continue
            if not p.alive():
                pump(p)
                if p.done_at is not None:
                    continue
                failure = "died"
                culprits.append(p)
            elif p.init is None and p.current is None:
                if now - p.launched > self.start_limit:
                    failure = failure or "init-timeout"
                    culprits.append(p)
            elif p.current is not None and now - p.current_since > self.timeout:
                failure = failure or "timeout"
                culprits.append(p)
        return failure, culprits

    def settled(self, group: list[Proc], now: float) -> bool:
        """Every rank said ``done``, and each has exited or had its grace period."""
        done = [p.done_at for p in group if p.done_at is not None]  # every rank's, by then
        return not any(p.alive() for p in group) or now - max(done, default=now) > self.grace
