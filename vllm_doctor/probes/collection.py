"""What the probe processes say, gathered: each process's event file read as it grows, every
event applied to its probe's state, a probe finalised as soon as every rank and every part
reported it; deterministic parts answered from the cache; and the event files of a torchrun run
collated (``load_results_dir``). No torch here.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vllm_doctor.errors import InputError
from vllm_doctor.probes.launch import Proc
from vllm_doctor.probes.registry import BY_NAME, PROBES, ProbeSpec
from vllm_doctor.probes.result import (
    ERROR,
    PASS,
    SKIP,
    TIMEOUT,
    WARN,
    ProbeResult,
    merge_rank_results,
)

LOG_TAIL_LINES = 12
_NOISE = re.compile(r"^\s*(frame #\d+:|Exception raised from |<unknown function>)")


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


@dataclass
class ProbeState:
    """One probe's results so far, per rank and per part, until it is final."""

    spec: ProbeSpec
    per_rank: dict[int, dict[str, Any]] = field(default_factory=dict)
    parts: dict[str, dict[str, Any]] = field(default_factory=dict)
    started_at: float | None = None
    final: ProbeResult | None = None
    log_tail: list[str] = field(default_factory=list)
    attempts: int = 0
    notes: list[str] = field(default_factory=list)


class Collector:
    """The probes' states, fed by the events of the processes in ``procs`` (the runner's list)."""

    def __init__(
        self,
        specs: list[ProbeSpec],
        tp: int,
        params: dict[str, Any],
        procs: list[Proc],
        on_update: Callable[[str, str, Any], None],
        use_cache: bool,
    ):
        self.states = {s.name: ProbeState(s) for s in specs}
        self.tp = tp
        self.params = params
        self.procs = procs
        self.on_update = on_update
        self.use_cache = use_cache
        self.part_keys: dict[tuple[str, str], str | None] = {}

    @staticmethod
    def read_events(proc: Proc) -> list[dict[str, Any]]:
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

    def pump(self, proc: Proc) -> None:
        for ev in self.read_events(proc):
            self.handle(proc, ev)

    def handle(self, proc: Proc, ev: dict[str, Any]) -> None:
        kind = ev.get("ev")
        now = time.monotonic()
        if kind == "hello":
            proc.hello_at = proc.hello_at or now
            if proc.pid is None and proc.remote is None:  # a remote pid is not this machine's
                proc.pid = ev.get("pid")
        elif kind == "joining":
            proc.joining_at = now
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
            self.finalise(state)
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

    def cached_parts(self, names: list[str]) -> None:
        """Reuse deterministic sub-check results from the cache (see probes/cache.py)."""
        from vllm_doctor.probes import cache

        for name in names:
            spec = self.states[name].spec
            for part in spec.parts:
                if not part.cacheable:
                    continue
                key = cache.part_key(
                    name, spec.module, part.name, {k: self.params.get(k) for k in part.cache_params}
                )
                self.part_keys[(name, part.name)] = key
                if self.use_cache:
                    hit = cache.load(key)
                    if hit is not None:
                        self.states[name].parts[part.name] = hit

    def complete(self, state: ProbeState) -> bool:
        return len(state.per_rank) >= self.tp and all(
            p.name in state.parts for p in state.spec.parts
        )

    def finalise(self, state: ProbeState, force: bool = False) -> None:
        if state.final is not None or not (force or self.complete(state)):
            return
        for part in state.spec.parts:  # forced before a part reported
            state.parts.setdefault(
                part.name,
                {
                    "status": SKIP,
                    "metrics": {},
                    "reason": "did not run (its worker group failed first)",
                },
            )
        duration = max([float(r.get("duration_s", 0.0)) for r in state.per_rank.values()] or [0.0])
        result = merge_rank_results(state.spec.name, state.per_rank, state.parts, duration)
        result.log_tail = list(state.log_tail)
        result.notes.extend(n for n in state.notes if n not in result.notes)
        if result.status in (ERROR, TIMEOUT) and not result.log_tail:
            result.log_tail = self.tails([p for p in self.procs if not p.part])
        state.final = result
        self.on_update(state.spec.name, "result", result)

    def tails(self, procs: list[Proc]) -> list[str]:
        out: list[str] = []
        for p in procs:
            out.extend(f"[{p.tag}] {ln}" for ln in tail(p.log))
        return out

    def part_running(self, probe: str) -> bool:
        return any(p.part and p.part[0] == probe and not p.exit_seen for p in self.procs)


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
        if (
            not isinstance(ev.get("probe"), str)
            or ev["probe"] not in BY_NAME
            or not isinstance(res, dict)
        ):
            return None
        if res.get("status") not in STATUSES or not isinstance(res.get("metrics", {}), dict):
            return None
        if not isinstance(res.get("reason", ""), str):
            return None
        if "part" in ev and not isinstance(ev["part"], str):
            return None
        if not isinstance(res.get("duration_s", 0.0), (int, float)) or isinstance(
            res.get("duration_s"), bool
        ):
            return None
        for key in ("rules_confirmed", "rules_refuted", "notes"):
            if not isinstance(res.get(key, []), list):
                return None
    elif ev["ev"] == "teardown" and not isinstance(ev.get("seconds", 0.0), (int, float)):
        return None
    return ev


def load_results_dir(
    path: str | os.PathLike, world: int | None = None, skipped: list[str] | None = None
) -> list[ProbeResult]:
    """Collate the event files that ``worker --out DIR`` wrote (torchrun, one or several nodes).

    Lines that are not events as the worker writes them are left out (each named in
    ``skipped`` when a list is given); a directory with no usable result is an InputError."""
    base = Path(path)
    if not base.is_dir():
        raise InputError(
            str(path), "not a directory (give the directory passed to the worker's --out)"
        )
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
                raise InputError(
                    str(f), f"larger than {MAX_EVENTS_FILE_BYTES // 2**20} MiB: not an events file"
                )
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
                if (
                    isinstance(hello_world, int)
                    and not isinstance(hello_world, bool)
                    and 0 < hello_world <= MAX_WORLD
                ):
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
            ranks.setdefault(
                r, {"status": ERROR, "reason": "no result from this rank", "metrics": {}}
            )
        duration = max([float(r.get("duration_s", 0.0)) for r in ranks.values()] or [0.0])
        out.append(merge_rank_results(spec.name, ranks, parts.get(spec.name), duration))
    if teardown:
        hung = [r for r, ev in sorted(teardown.items()) if not ev.get("returned")]
        secs = [float(ev.get("seconds", 0.0)) for ev in teardown.values()]
        out.append(
            ProbeResult(
                name="teardown",
                status=WARN if hung else PASS,
                reason=(
                    f"teardown hang: destroy_process_group did not return on rank "
                    f"{', '.join(map(str, hung))}"
                    if hung
                    else f"process group torn down in {max(secs):.2f}s"
                ),
                metrics={"destroy_process_group_s": max(secs)},
                ranks=[
                    {"rank": r, **{k: v for k, v in ev.items() if k not in ("ev", "t")}}
                    for r, ev in sorted(teardown.items())
                ],
            )
        )
    return out
