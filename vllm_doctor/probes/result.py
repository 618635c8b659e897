"""Probe results: one verdict per probe, with per-rank detail and the raw numbers behind it.

Pure data, no torch: the runner builds these from what the workers stream back.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

PASS, FAIL, WARN, SKIP, ERROR, TIMEOUT = "pass", "fail", "warn", "skip", "error", "timeout"
STATUSES = (PASS, FAIL, WARN, SKIP, ERROR, TIMEOUT)

# Worst first: the status of a probe is the worst status among its ranks and parts.
_SEVERITY = {ERROR: 5, TIMEOUT: 4, FAIL: 3, WARN: 2, PASS: 1, SKIP: 0}


def worst(statuses: list[str]) -> str:
    """The most severe status of a list (``skip`` for an empty list)."""
    return max(statuses, key=lambda s: _SEVERITY.get(s, 5), default=SKIP)


def is_problem(status: str) -> bool:
    """A status that makes `vllm-doctor probe` exit 1."""
    return status in (FAIL, ERROR, TIMEOUT)


@dataclass
class ProbeResult:
    """The outcome of one probe over all its ranks (and its isolated parts)."""

    name: str
    status: str
    reason: str = ""
    duration_s: float = 0.0
    metrics: dict[str, Any] = field(default_factory=dict)
    ranks: list[dict[str, Any]] = field(default_factory=list)
    rules_confirmed: list[str] = field(default_factory=list)
    rules_refuted: list[str] = field(default_factory=list)
    log_tail: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # one joined verdict per rule (probes.verdict): the mechanism here joined with the judged
    # vLLM's fix state; empty until joined
    verdicts: list[dict[str, Any]] = field(default_factory=list)

    @property
    def reproduced(self) -> bool:
        """The probe showed the mechanism of a known failure here (not that vLLM has the bug)."""
        return bool(self.rules_confirmed)

    def figures(self) -> list[dict[str, Any]]:
        """The measured figures of a measuring probe (``metrics["figures"]``, its ranks' beyond
        the lowest one's, and its parts'), each with what it measured and what it depends on."""
        out = list(self.metrics.get("figures") or [])
        for rank in self.ranks[1:]:
            out.extend(
                dict(f, rank=rank.get("rank"))
                for f in (rank.get("metrics") or {}).get("figures") or []
            )
        for value in self.metrics.values():
            if isinstance(value, dict) and isinstance(value.get("figures"), list):
                out.extend(value["figures"])
        return [f for f in out if isinstance(f, dict) and "name" in f]

    def verdict(self) -> str:
        """What to read: the joined verdicts when there are any, else what the probe itself
        showed (a mechanism, never "the bug": whether vLLM has it is the release's call)."""
        if self.verdicts:
            return "; ".join(f"{v['rule']}: {v['text']}" for v in self.verdicts)
        rules = ", ".join(self.rules_confirmed)
        if self.reproduced:
            head = f"mechanism present ({rules})"
            if self.status == PASS:
                return f"{head}; the fix's approach verified"
            if self.status == WARN:
                return f"{head}; {self.reason}" if self.reason else head
            if self.status == FAIL:
                return f"{head}; the fix's approach did not check out: {self.reason}"
            return f"{head}; then {self.status}: {self.reason}"
        if self.status in (PASS, WARN) and not self.rules_refuted and self.figures():
            return "measured" if self.status == PASS else "measured, partly"
        if self.status == PASS:
            out = "ok: no known failure's mechanism shown"
            return out + (
                f" (mechanism absent: {', '.join(self.rules_refuted)})"
                if self.rules_refuted
                else ""
            )
        if self.status == SKIP:
            return f"could not run: {self.reason}" if self.reason else "could not run"
        return f"{self.status}: {self.reason}" if self.reason else self.status

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "verdict": self.verdict(),
            "reason": self.reason,
            "duration_s": round(float(self.duration_s), 4),
            "metrics": _jsonable(self.metrics),
            "ranks": _jsonable(self.ranks),
            "rules_confirmed": list(self.rules_confirmed),
            "rules_refuted": list(self.rules_refuted),
            "log_tail": list(self.log_tail),
            "notes": list(self.notes),
            "verdicts": _jsonable(self.verdicts),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProbeResult:
        return cls(
            name=data["name"],
            status=data["status"],
            reason=data.get("reason", ""),
            duration_s=float(data.get("duration_s", 0.0)),
            metrics=dict(data.get("metrics", {})),
            ranks=list(data.get("ranks", [])),
            rules_confirmed=list(data.get("rules_confirmed", [])),
            rules_refuted=list(data.get("rules_refuted", [])),
            log_tail=list(data.get("log_tail", [])),
            notes=list(data.get("notes", [])),
            verdicts=list(data.get("verdicts", [])),
        )


def _jsonable(value: Any) -> Any:
    """Round-trip through JSON so that the dict is plain (floats, ints, strings, lists)."""
    return json.loads(json.dumps(value, default=str, allow_nan=True))


def merge_rank_results(
    name: str,
    per_rank: dict[int, dict[str, Any]],
    parts: dict[str, dict[str, Any]] | None = None,
    duration_s: float = 0.0,
) -> ProbeResult:
    """Fold the per-rank dicts (and isolated parts) a probe produced into one ProbeResult.

    Each rank dict carries ``status``, ``reason``, ``metrics``, ``rules_confirmed`` and
    ``rules_refuted``. The probe's status is the worst rank's; its metrics are the lowest
    rank's, and every rank's own record stays under ``ranks``. A part (a sub-check that ran in
    its own isolated child) adds its metrics under ``metrics[part]``; a part that errored or
    timed out makes the probe ``warn`` at least, since the main check still stands.
    """
    parts = parts or {}
    ranks = [dict(per_rank[r], rank=r) for r in sorted(per_rank)]
    statuses = [r.get("status", ERROR) for r in ranks]
    status = worst(statuses) if statuses else SKIP
    reason = ""
    # The reason of a rank that reported for itself beats one the runner wrote for a rank it
    # had to stop.
    for r in sorted(ranks, key=lambda x: bool(x.get("synthetic"))):
        if r.get("status") == status:
            reason = r.get("reason", "")
            if (
                status not in (PASS, SKIP)
                and len(ranks) > 1
                and len({x.get("reason", "") for x in ranks}) > 1
            ):
                reason = f"rank {r['rank']}: {reason}"
            break
    metrics: dict[str, Any] = dict(ranks[0].get("metrics", {})) if ranks else {}
    confirmed: list[str] = []
    refuted: list[str] = []
    notes: list[str] = []
    for r in ranks:
        for code in r.get("rules_confirmed", []):
            if code not in confirmed:
                confirmed.append(code)
        for code in r.get("rules_refuted", []):
            if code not in refuted:
                refuted.append(code)
        for note in r.get("notes", []):
            if note not in notes:
                notes.append(note)
    for part_name, part in sorted(parts.items()):
        metrics[part_name] = dict(
            part.get("metrics", {}), status=part.get("status"), reason=part.get("reason", "")
        )
        for code in part.get("rules_confirmed", []):
            if code not in confirmed:
                confirmed.append(code)
        for code in part.get("rules_refuted", []):
            if code not in refuted:
                refuted.append(code)
        for note in part.get("notes", []):
            if note not in notes:
                notes.append(note)
        part_status = part.get("status", ERROR)
        if part_status in (ERROR, TIMEOUT):
            part_status = WARN
            extra = f"{part_name} sub-check: {part.get('reason', 'failed')}"
            if worst([status, part_status]) != status or not reason:
                reason = extra
            else:
                notes.append(extra)
        elif part_status == FAIL and worst([status, FAIL]) == FAIL and status != FAIL:
            reason = f"{part_name} sub-check: {part.get('reason', '')}"
        if status == SKIP and part_status != SKIP:  # the ranks left the check to this part
            status = part_status
            reason = part.get("reason", "") or reason
        else:
            status = worst([status, part_status]) if part_status != SKIP else status
    refuted = [c for c in refuted if c not in confirmed]
    return ProbeResult(
        name=name,
        status=status,
        reason=reason,
        duration_s=duration_s,
        metrics=metrics,
        ranks=ranks,
        rules_confirmed=confirmed,
        rules_refuted=refuted,
        notes=notes,
    )
