"""`fleet --facts ... --manifest FILE`: the workload's own manifest read beside the nodes' facts.

The manifest reader of `check --manifest` (serveline/manifest.py) gives the vLLM container's
declared image (and the vLLM release its tag names), GPUs per pod, pods per group, /dev/shm and
serve line. Each node's facts gain the declared deploy.* facts (so the node rules judge them as
`check --manifest` does), the serve line is the manifest's when none is given after `--`, and
every difference between what is declared and what the nodes have becomes a note of the fleet's
report (in every format): another vLLM than the image's tag, other GPU counts, other pod counts.
"""

from __future__ import annotations

from vllm_doctor.facts.model import Facts
from vllm_doctor.fleet.node import Node


def compare_with_manifest(manifest: str, nodes: list[Node]) -> tuple[list[str], list[str] | None]:
    """(notes, the manifest's serve words or None)."""
    from vllm_doctor.serveline.directory import read_input

    target = read_input(manifest)[0]  # a file, or a folder of them
    declared = Facts()
    target.write_facts(declared)
    notes = [f"declared in {manifest}: {target.name}"]
    image = declared.value("deploy.image")
    release = declared.value("vllm.version")
    per_pod = declared.value("deploy.gpus_per_pod")
    pods = declared.value("deploy.nodes")
    answered = [n for n in nodes if n.facts is not None]
    for node in answered:
        assert node.facts is not None
        for path, fact in declared.area("deploy"):
            node.facts.set(path, fact.value, fact.source, fact.detail)
        have = node.facts.value("vllm.version")
        if release is not None and have is not None and str(have) != str(release):
            notes.append(f"{node.label} runs vLLM {have}, the image {image} is vLLM {release}")
        gpus = node.facts.value("gpu.count")
        daemonset = node.facts.value("env.VLLM_DOCTOR_COLLECTED_BY") == "daemonset"
        if isinstance(per_pod, int) and isinstance(gpus, int) and gpus != per_pod and not daemonset:
            notes.append(f"{node.label} sees {gpus} GPUs, the pod asks for {per_pod}")
    if isinstance(pods, int) and pods != len(nodes):
        notes.append(f"{len(nodes)} nodes answered, one group of the workload has {pods} pods")
    words = [w for w in target.words if w] or None
    return notes, words
