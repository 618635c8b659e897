"""GPU facts of a pasted `vllm collect-env` report: the devices (names, memory, what the
GPU table knows of each name), the visible devices, and the topology matrix (NVIDIA's
`nvidia-smi topo -m` and ROCm's `rocm-smi --showtopo`)."""

from __future__ import annotations

import re
from typing import Any

from vllm_doctor.facts.gpus import link_rank
from vllm_doctor.facts.model import Facts, Source
from vllm_doctor.facts.report_beside import UUID_TAIL, smi_gpus
from vllm_doctor.facts.report_text import (
    _BANNER,
    _ENV_LINE,
    _GPU_LINE,
    _MIG_LINE,
    _collected,
    _key_of,
    _line_detail,
    _Report,
)

# -- GPU name -> compute capability ------------------------------------------------------

# The names are resolved by the GPU table (vllm_doctor/knowledge/gpus.py), read on first use.
CAPABILITY_DETAIL = "capability inferred from the GPU name (GPU table knowledge/data/gpus.json)"


def capability_from_name(name: str) -> int | None:
    """Compute capability (major*10+minor) of an NVIDIA GPU from its name, or None."""
    from vllm_doctor.knowledge.gpus import capability_of

    return capability_of(name)


def _describe_device(device: dict[str, Any], name: str) -> int | None:
    """Add what the GPU table knows of ``name`` to a device record; its capability or None."""
    from vllm_doctor.knowledge.gpus import lookup

    match = lookup(name)
    if match is None:
        return None
    device["family"] = match.family.name
    if match.memory_gib:
        device["memory_gib_nominal"] = match.memory_gib
    if match.gfx:
        device.setdefault("arch", match.gfx)
    if match.capability is not None:
        device["capability"] = match.capability
        device["capability_source"] = CAPABILITY_DETAIL
    return match.capability


# -- GPUs -----------------------------------------------------------------------------------


def _visible_devices(report: _Report, facts: Facts) -> list[int] | None:
    """GPU indices named by CUDA_VISIBLE_DEVICES in the report's environment, if any.

    The report's GPU list comes from `nvidia-smi -L` (every GPU of the host); CUDA, and so
    vLLM, sees only these. UUID or MIG ids cannot be matched (the report strips UUIDs)."""
    for line in report.lines:
        m = _ENV_LINE.match(line.strip())
        if not m or m.group("key") != "CUDA_VISIBLE_DEVICES" or line.startswith((" ", "\t")):
            continue
        value = m.group("val").strip()
        facts.set("gpu.visible_devices", value, Source.REPORT, line.strip())
        parts = [p.strip() for p in value.split(",") if p.strip()]
        if all(re.fullmatch(r"\d+", p) for p in parts):
            out: list[int] = []
            for p in parts:
                if int(p) in out:
                    break  # CUDA stops at a repeated index
                out.append(int(p))
            return out
        if any(p.startswith("MIG-") for p in parts):
            facts.set("gpu.mig_enabled", True, Source.REPORT, line.strip())
        facts.notes.append(
            f"CUDA_VISIBLE_DEVICES={value} in the report: not GPU indices, "
            "so the GPU list is taken as it is"
        )
        return None
    return None


def _gpu_facts(report: _Report, facts: Facts, visible: list[int] | None = None) -> None:
    entry = report.get("GPU models and configuration")
    value, idx = entry if entry is not None else ("", -1)
    gpus: list[tuple[int, str, str]] = []  # index, name, line
    mig = False
    candidates: list[tuple[int, str]] = []
    if value:
        candidates.append((idx, value))
    if entry is not None:
        candidates.extend(report.block_after(idx))
    for _, line in candidates:
        m = _GPU_LINE.match(line)
        if m:
            gpus.append((int(m.group("idx")), UUID_TAIL.sub("", m.group("name")), line.strip()))
        elif _MIG_LINE.match(line):
            mig = True
    rocm = _is_rocm(report)
    detail = "GPU models and configuration"
    if not gpus and not (value and _collected(value)):
        # no GPU line collected (collect-env without nvidia-smi): an nvidia-smi table pasted
        gpus = smi_gpus(report.lines)
        detail = "the nvidia-smi table pasted with the report"
    if not gpus:
        if value and _collected(value) and not _GPU_LINE.match(value):
            # ROCm (and macOS): one device name, for device 0 only
            _single_device(report, facts, value, rocm)
            return
        if entry is None:
            facts.mark_missing("gpu", "the report has no `GPU models and configuration` line")
        else:
            facts.mark_missing("gpu", f"the report lists no GPUs (`{value or 'nothing'}`)")
        return
    if visible is not None:
        listed = {g[0]: g for g in gpus}
        gpus = [listed[i] for i in visible if i in listed]
        detail += f" (CUDA_VISIBLE_DEVICES={','.join(map(str, visible))})"
        facts.notes.append(
            f"the report lists {len(listed)} GPUs; CUDA_VISIBLE_DEVICES leaves {len(gpus)} visible"
        )
    devices: list[dict[str, Any]] = []
    capabilities: list[int] = []
    unknown: list[str] = []
    for index, gpu_name, _line in gpus:
        device: dict[str, Any] = {"index": index, "name": gpu_name}
        cap = _describe_device(device, gpu_name)
        if rocm:
            cap = None
            device.pop("capability", None)
            device.pop("capability_source", None)
        if cap is not None:
            capabilities.append(cap)
        else:
            unknown.append(gpu_name)
        devices.append(device)
    in_matrix = _topology_count(report)
    if visible is None and in_matrix and in_matrix != len(gpus):
        # nvidia-smi -L and nvidia-smi topo -m see the same GPUs: a paste that lost a line
        facts.mark_missing(
            "gpu.count",
            f"the report lists {len(gpus)} GPUs but its GPU Topology matrix has {in_matrix}: "
            "the paste is cut or edited",
        )
    else:
        facts.set("gpu.count", len(gpus), Source.REPORT, detail)
    facts.set("gpu.names", [g[1] for g in gpus], Source.REPORT, detail)
    facts.set("gpu.devices", devices, Source.REPORT, detail)
    if mig or "gpu.mig_enabled" not in facts:
        facts.set(
            "gpu.mig_enabled",
            mig,
            Source.REPORT,
            "MIG devices listed" if mig else "no MIG devices listed",
        )
    if not gpus:
        _capability_facts(facts, missing="no GPU is visible")
    elif unknown:
        _capability_facts(
            facts,
            missing=(
                f"no compute capability known for {', '.join(sorted(set(unknown)))} "
                "(not in the GPU table)"
                if not rocm
                else "AMD GPUs have no CUDA compute capability"
            ),
        )
    else:
        _capability_facts(facts, capabilities)
    for path in ("gpu.memory_total_mib", "gpu.memory_free_mib"):
        # facts/hardware.py infers them from the names (marked inferred) where it can
        facts.mark_missing(path, "a collect-env report does not state GPU memory")


def _is_rocm(report: _Report) -> bool:
    rocm = report.get("ROCM used to build PyTorch")
    hip = report.get("HIP runtime version")
    return bool((rocm and _collected(rocm[0])) or (hip and _collected(hip[0])))


def _single_device(report: _Report, facts: Facts, value: str, rocm: bool) -> None:
    detail = _line_detail(report, "GPU models and configuration")
    # "AMD Instinct MI300X (gfx942:sramecc+:xnack-)": found with find(), linear on any value
    arch = re.search(r"\((gfx[0-9a-f]+)", value)
    if arch and ")" not in value[arch.end() :]:
        arch = None
    name = value.strip()
    if name.endswith(")"):
        at = name.find("(gfx", name.rfind(")", 0, len(name) - 1) + 1)
        if at >= 0:
            name = name[:at].strip()
    device: dict[str, Any] = {"index": 0, "name": name}
    if arch:
        device["arch"] = arch.group(1)
    cap = _describe_device(device, name)
    amd = rocm or arch or device.get("arch", "").startswith("gfx")
    if amd:
        device.pop("capability", None)
        device.pop("capability_source", None)
    # the record is complete before it is stored: Facts.set keeps a (redacted) copy
    facts.set("gpu.names", [name], Source.REPORT, detail)
    facts.set("gpu.devices", [device], Source.REPORT, detail)
    count = _topology_count(report)
    if count:
        facts.set("gpu.count", count, Source.REPORT, "GPU Topology")
    else:
        facts.mark_missing("gpu.count", "the report names device 0 only (ROCm layout)")
    if amd:
        reason = f"AMD GPU ({device.get('arch') or name}): no CUDA compute capability"
    else:
        if cap is not None:
            _capability_facts(facts, [cap])
            return
        reason = f"no compute capability known for {name} (not in the GPU table)"
    _capability_facts(facts, missing=reason)


def _capability_facts(
    facts: Facts, capabilities: list[int] | None = None, missing: str = ""
) -> None:
    """gpu.capabilities with its min and max, or all three marked ``missing`` for that reason."""
    if not capabilities:
        for path in ("gpu.capabilities", "gpu.min_capability", "gpu.max_capability"):
            facts.mark_missing(path, missing)
        return
    names = ", ".join(sorted(set(facts.value("gpu.names") or ()))) or "the report's GPUs"
    basis = f"GPU table (knowledge/data/gpus.json): {names}"
    facts.infer("gpu.capabilities", capabilities, basis)
    facts.infer("gpu.min_capability", min(capabilities), basis)
    facts.infer("gpu.max_capability", max(capabilities), basis)


# -- topology -------------------------------------------------------------------------------


def _topology_lines(report: _Report) -> list[str]:
    entry = report.get("GPU Topology")
    if entry is None:
        return []
    value, idx = entry
    out = [value] if value else []
    j = idx + 1
    while j < len(report.lines):
        line = report.lines[j]
        if _BANNER.match(line) or (_key_of(line) is not None and not line.startswith((" ", "\t"))):
            break
        if line.strip().startswith("Legend"):
            break
        if not line.strip():
            # a blank line ends the matrix once rows were read; ROCm output has
            # blank lines between its tables
            if out and any(re.match(r"^\s*GPU\d+\b", x) for x in out) and not _is_rocm(report):
                break
            j += 1
            continue
        if _ENV_LINE.match(line.strip()) and not line.startswith((" ", "\t")):
            break
        out.append(line)
        j += 1
    return out


def _topology_count(report: _Report) -> int | None:
    lines = _topology_lines(report)
    names = set()
    for line in lines:
        m = re.match(r"^\s*GPU(\d+)\b", line)
        if m:
            names.add(int(m.group(1)))
    return len(names) or None


def _parse_nvidia_matrix(lines: list[str]) -> tuple[list[str], dict[str, list[str]]] | None:
    """`nvidia-smi topo -m`: a header of GPU columns, then one row per GPU with X on the
    diagonal (tabs or spaces between the cells)."""
    header: list[str] | None = None
    rows: dict[str, list[str]] = {}
    for line in lines:
        cells = line.split()
        if not cells or not re.fullmatch(r"GPU\d+", cells[0]):
            continue
        if header is None and "X" not in cells:
            header = []
            for cell in cells:
                if not re.fullmatch(r"GPU\d+", cell):
                    break
                header.append(cell)
            continue
        if header is not None:
            rows[cells[0]] = cells[1 : 1 + len(header)]
    if not header:
        return None
    return header, rows


def _topology_facts(report: _Report, facts: Facts, visible: list[int] | None = None) -> None:
    facts.mark_unknowable(
        "topology.acs_redirect", "a collect-env report does not show the PCIe bridges' ACS control"
    )
    lines = _topology_lines(report)
    if not lines or not any(_collected(x) for x in lines):
        facts.mark_missing("topology", "the report has no GPU Topology matrix")
        return
    if _is_rocm(report) or any("XGMI" in x or "Link Type between" in x for x in lines):
        _rocm_topology(lines, facts)
        return
    parsed = _parse_nvidia_matrix(lines)
    if parsed is None:
        facts.mark_missing("topology", "the report's GPU Topology block could not be read")
        return
    header, rows = parsed
    links: list[dict[str, Any]] = []
    for i, a in enumerate(header):
        row = rows.get(a)
        if row is None:
            continue
        for j in range(i + 1, len(header)):
            if j >= len(row):
                continue
            link = row[j]
            if link == "X":
                continue
            links.append({"a": int(a[3:]), "b": int(header[j][3:]), "link": link})
    detail = "GPU Topology"
    if visible is not None:
        links = [x for x in links if x["a"] in visible and x["b"] in visible]
        detail += f" (CUDA_VISIBLE_DEVICES={','.join(map(str, visible))})"
    facts.set("topology.links", links, Source.REPORT, detail)
    if not links:
        facts.mark_missing("topology.all_nvlink", "one GPU: no links between GPUs")
        facts.mark_missing("topology.worst_link", "one GPU: no links between GPUs")
        return
    facts.set(
        "topology.all_nvlink",
        all(re.fullmatch(r"NV\d+", x["link"]) for x in links),
        Source.REPORT,
        detail,
    )
    worst = max((x["link"] for x in links), key=link_rank)
    facts.set("topology.worst_link", worst, Source.REPORT, detail)
    facts.mark_unknowable("topology.p2p_all", "a collect-env report does not test P2P access")


def _rocm_topology(lines: list[str], facts: Facts) -> None:
    """`rocm-smi --showtopo`: read the "Link Type between two GPUs" table."""
    links: list[dict[str, Any]] = []
    in_table = False
    header: list[str] = []
    for line in lines:
        if "Link Type between two GPUs" in line:
            in_table = True
            header = []
            continue
        if in_table and re.search(r"between two GPUs|Numa Nodes|={3,}", line):
            if header:
                break
            continue
        if not in_table:
            continue
        cells = line.split()
        if cells and all(re.fullmatch(r"GPU\d+", c) for c in cells):
            header = cells
            continue
        if header and cells and re.fullmatch(r"GPU\d+", cells[0]):
            a = int(cells[0][3:])
            for j, cell in enumerate(cells[1 : 1 + len(header)]):
                b = int(header[j][3:])
                if b > a and cell not in ("0", "X"):
                    links.append({"a": a, "b": b, "link": cell})
    if not links:
        facts.mark_missing("topology", "ROCm topology: no link table could be read")
        return
    detail = "GPU Topology (rocm-smi --showtopo)"
    facts.set("topology.links", links, Source.REPORT, detail)
    facts.set("topology.all_nvlink", False, Source.REPORT, "AMD GPUs: links are XGMI or PCIe")
    order = {"XGMI": 0, "PCIE": 1}
    worst = max((x["link"] for x in links), key=lambda link: order.get(link.upper(), 2))
    facts.set("topology.worst_link", worst, Source.REPORT, detail)
    facts.mark_unknowable("topology.p2p_all", "a collect-env report does not test P2P access")
