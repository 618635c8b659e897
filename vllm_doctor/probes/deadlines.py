"""How long each thing may take, and who overran: the deadlines of one probe run. No torch here.

A probe has ``timeout`` seconds from its start on a rank (or in its isolated child); a process
that has not started its first probe has ``start_limit`` (torch import, process-group init); with
``join_timeout``, the ranks have that long from the first one's joining the process group for
every other to join it and the group to form; a worker that reported its last result has
``grace`` to tear its process group down and exit. ``stopped_at`` says where each rank of a
group that failed had got to.
"""

from __future__ import annotations

import math
from typing import Any

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

    def __init__(self, timeout: float, teardown_timeout: float, join_timeout: float | None = None):
        self.timeout = check_seconds("--timeout", timeout, MAX_TIMEOUT_S)
        self.teardown_timeout = check_seconds(
            "--teardown-timeout", teardown_timeout, MAX_TEARDOWN_TIMEOUT_S, allow_zero=True
        )
        self.join_timeout = (
            None
            if join_timeout is None
            else check_seconds("--join-timeout", join_timeout, MAX_TIMEOUT_S)
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
        if failure is None:
            stragglers = self.not_joined(group, now)
            if stragglers:
                return "join-timeout", stragglers
        return failure, culprits

    def not_joined(self, group: list[Proc], now: float) -> list[Proc]:
        """With a join limit, once it has passed since the first rank began joining the process
        group and the group has not formed: the ranks that never began joining (or, when every
        rank did, all of those still waiting for the group)."""
        if self.join_timeout is None:
            return []
        began = [p.joining_at for p in group if p.joining_at is not None]
        if not began or now - min(began) <= self.join_timeout:
            return []
        waiting = [p for p in group if p.init is None and p.done_at is None]
        return [p for p in waiting if p.joining_at is None] or waiting

    def settled(self, group: list[Proc], now: float) -> bool:
        """Every rank said ``done``, and each has exited or had its grace period."""
        done = [p.done_at for p in group if p.done_at is not None]  # every rank's, by then
        return not any(p.alive() for p in group) or now - max(done, default=now) > self.grace


def step_of(proc: Proc, now: float) -> str:
    """Where one rank had got to, in words, from its events."""
    if proc.done_at is not None:
        return "had reported every result"
    if proc.current is not None:
        step = f" ({proc.last_progress})" if proc.last_progress else ""
        return f"was in probe {proc.current}{step} for {now - proc.current_since:.0f} s"
    if proc.init is not None:
        return "was in its process group, between probes"
    if proc.joining_at is not None:
        return "waited in init_process_group"
    if proc.hello_at is not None:
        return "had started, importing torch or preparing its probes"
    return "never started: no word from its process"


def stopped_at(
    group: list[Proc], culprits: list[Proc], now: float, blame: str = ""
) -> tuple[str, list[dict]]:
    """(``rank 3 on node X <blame><its step>; ranks 0, 1 on node Y <their step>``, per rank:
    its place and step) for a worker group that failed, the culprits first, one by one; the
    other ranks grouped by node and step."""
    rows = []
    for p in sorted(group, key=lambda p: (p not in culprits, p.rank)):
        step = step_of(p, now)
        if not p.alive() and p.done_at is None:
            step += f", then exited ({p.exit_text()})"
        rows.append({"rank": p.rank, "where": p.where, "step": step, "blamed": p in culprits})
    parts: list[str] = []
    others: dict[tuple[Any, Any], list[Any]] = {}
    for r in rows:
        if r["blamed"]:
            where = f" on {r['where']}" if r["where"] else ""
            parts.append(f"rank {r['rank']}{where} {blame}{r['step']}")
        else:
            others.setdefault((r["where"], r["step"]), []).append(r["rank"])
    for (where, step), ranks in others.items():
        said = f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {', '.join(map(str, ranks))}"
        parts.append(f"{said}{' on ' + where if where else ''} {step}")
    return "; ".join(parts), rows
