"""What the judged release takes as a unified-memory GPU's free memory (``release.uma_free_memory``).

The knowledge table ``uma_memory`` (tools/extractors/uma_memory.py, from each release's
``MemorySnapshot.measure`` and the platforms' ``is_integrated_gpu``) says on which platforms
an integrated GPU's free memory is the OS's available memory (psutil) and where it stays the
device's own figure (``mem_get_info``: cudaMemGetInfo, hipMemGetInfo).

Fact written, on a unified-memory GPU (``gpu.unified_memory``; absent on a dedicated one):
  ``release.uma_free_memory``  os_available | device_free
"""

from __future__ import annotations

import re
from typing import Any

from vllm_doctor.facts.model import Facts

SOURCE = "release knowledge"
PATH = "release.uma_free_memory"


def collect_release_memory(facts: Facts) -> None:
    from vllm_doctor import knowledge

    unified = facts.value("gpu.unified_memory")
    if unified is None:
        facts.mark_missing(PATH, facts.why_missing("gpu.unified_memory") or "no GPU is known")
        return
    if not unified:
        return  # a dedicated-memory GPU: absent
    release = facts.value("release.judged")
    if release is None:
        facts.mark_missing(PATH, facts.why_missing("release.judged") or "no release is judged")
        return
    table: dict[str, Any] = knowledge.load("uma_memory").at(str(release))
    snapshot = table.get("@snapshot")
    if snapshot is None:
        facts.mark_missing(PATH, f"vLLM {release}'s MemorySnapshot is not in the knowledge")
        return
    targets = facts.value("gpu.gfx_targets")
    if targets is None and facts.why_missing("gpu.gfx_targets"):
        why = facts.why_missing("gpu.gfx_targets")
        facts.mark_missing(PATH, f"the GPU's platform is not known: {why}")
        return
    platform = "rocm" if targets else "cuda"
    entry = table.get(platform)
    where = f"vLLM {release} {snapshot['where']}"
    if entry is None:
        facts.set(
            PATH,
            "device_free",
            SOURCE,
            f"{where}: on {platform} free memory is the device's mem_get_info, "
            + (
                "the release has no unified-memory branch"
                if snapshot["test"] is None
                else f"the psutil branch ({snapshot['test']}) does not hold on {platform}"
            ),
        )
        return
    if entry["when"] == "integrated":
        facts.set(
            PATH,
            "os_available",
            SOURCE,
            f"{where}: psutil's available memory where {platform}'s is_integrated_gpu "
            f"({entry['reads']})",
        )
        return
    capabilities = facts.value("gpu.capabilities")
    if capabilities is None:
        why = facts.why_missing("gpu.capabilities")
        facts.mark_missing(PATH, f"the GPU's capability is not known: {why}")
        return
    listed = {major * 10 + minor for major, minor in entry["capabilities"]}
    taken = all(_capability(c) in listed for c in capabilities)
    facts.set(
        PATH,
        "os_available" if taken else "device_free",
        SOURCE,
        f"{where}: psutil's available memory only on capabilities "
        + ", ".join(f"{a}.{b}" for a, b in entry["capabilities"]),
    )


def _capability(value: Any) -> int:
    """A capability as major*10+minor (the facts hold 121 or '12.1')."""
    text = str(value)
    match = re.fullmatch(r"(\d+)\.(\d)", text)
    return int(match.group(1)) * 10 + int(match.group(2)) if match else int(float(text))
