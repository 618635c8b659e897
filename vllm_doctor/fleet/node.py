"""One node of a fleet: who it is, where its facts came from, and the facts (or why none)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vllm_doctor.facts.model import Facts


@dataclass
class Node:
    node_id: str  # Ray's node id, or the document's name (a pod, a file)
    ip: str | None  # the address the engine knows it by
    engine: str  # "ray" | "facts document"
    source: str  # where its facts came from ("a Ray task", a file path, "standard input")
    facts: Facts | None = None
    # why no facts arrived (no answer within the deadline, the doctor failed there)
    silent: str | None = None
    # GPUs the engine offers on this node (Ray's GPU resource); None where no engine says
    offered_gpus: int | None = None
    is_head: bool = False
    seconds: float | None = None  # how long its collection took, as the engine measured it
    # collectors that crashed on the node ("model config: RecursionError: ...")
    crashes: list[str] = field(default_factory=list)
    hostname: str | None = None
    doctor: str | None = None  # the doctor that ran there: "0.1.0 at /path/vllm_doctor"

    @property
    def label(self) -> str:
        """How every report names the node: the short Ray node id and its IP, or the document."""
        if self.engine == "ray":
            return f"{self.node_id[:8]}@{self.ip}" if self.ip else self.node_id[:8]
        return self.node_id

    @property
    def answered(self) -> bool:
        return self.facts is not None and self.silent is None

    @property
    def gpus(self) -> int | None:
        """GPUs this node gives the deployment: what the engine offers, else what NVML sees."""
        if self.offered_gpus is not None:
            return self.offered_gpus
        if self.facts is None:
            return None
        count = self.facts.value("gpu.count")
        return count if isinstance(count, int) else None

    def identity(self) -> dict[str, Any]:
        """The node as every machine format names it."""
        return {
            "label": self.label,
            "node_id": self.node_id,
            "ip": self.ip,
            "hostname": self.hostname
            or (self.facts.value("host.name") if self.facts is not None else None),
            "engine": self.engine,
            "source": self.source,
            "head": self.is_head,
            "answered": self.answered,
            "silent": self.silent,
            "offered_gpus": self.offered_gpus,
            "doctor": self.doctor,
            "seconds": None if self.seconds is None else round(self.seconds, 3),
        }
