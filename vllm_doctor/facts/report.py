"""Facts from a pasted `vllm collect-env` (or `python collect_env.py`) report.

Both layouts are read: the current one (sections between banners of ``=``, ``Key   : value``
lines with the colon at a fixed column) and the older PyTorch-style one (``Key: value``
lines, no banners). Markdown fences, ``<details>``/``<summary>`` wrappers, ``>`` quoting,
issue-template text and log lines around the report are ignored: only lines whose key is
one of the report's own keys are read, plus the multi-line blocks that follow some of them
(the GPU list, the GPU topology matrix, the package list, the environment variables).

Every fact has the source ``Source.REPORT`` and, as detail, the report line it came from.

``vllm.base_release`` — the release a build descends from:
  * a release (``0.25.1``, ``0.25.1+cu128``, ``0.6.3.post1``) is its own base: the public
    version without the local label;
  * a pre-release or dev build (``0.23.1rc1.dev20+g0d8097964``) sorts *before* the release
    it leads to (PEP 440: 0.23.0 < 0.23.1rc1.dev20 < 0.23.1), so its base is the newest
    known vLLM release below it (``0.23.0``), from the release list in ``_KNOWN_RELEASES``;
  * for versions past the end of that list the base is guessed from the number itself:
    X.Y.Z-1 when Z > 0, else the newest known release below it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from packaging.version import InvalidVersion, Version

from vllm_doctor.errors import InputError
from vllm_doctor.facts.environment import is_collected
from vllm_doctor.facts.gpus import link_rank
from vllm_doctor.facts.model import Facts, Listing, Source
from vllm_doctor.facts.packages import canonical_name
from vllm_doctor.redact import REDACTED, redact_text
from vllm_doctor.redact import is_secret_name as is_secret

# vLLM releases on the package registry (0.1.0 … 0.33.0), newest last.
_KNOWN_RELEASES = [
    "0.1.0",
    "0.1.1",
    "0.1.2",
    "0.1.3",
    "0.1.4",
    "0.1.5",
    "0.1.6",
    "0.1.7",
    "0.2.0",
    "0.2.1.post1",
    "0.2.2",
    "0.2.3",
    "0.2.4",
    "0.2.5",
    "0.2.6",
    "0.2.7",
    "0.3.0",
    "0.3.1",
    "0.3.2",
    "0.3.3",
    "0.4.0",
    "0.4.0.post1",
    "0.4.1",
    "0.4.2",
    "0.4.3",
    "0.5.0",
    "0.5.0.post1",
    "0.5.1",
    "0.5.2",
    "0.5.3",
    "0.5.3.post1",
    "0.5.4",
    "0.5.5",
    "0.6.0",
    "0.6.1",
    "0.6.1.post1",
    "0.6.1.post2",
    "0.6.2",
    "0.6.3",
    "0.6.3.post1",
    "0.6.4",
    "0.6.4.post1",
    "0.6.5",
    "0.6.6",
    "0.6.6.post1",
    "0.7.0",
    "0.7.1",
    "0.7.2",
    "0.7.3",
    "0.8.0",
    "0.8.1",
    "0.8.2",
    "0.8.3",
    "0.8.4",
    "0.8.5",
    "0.8.5.post1",
    "0.9.0",
    "0.9.0.1",
    "0.9.1",
    "0.9.2",
    "0.10.0",
    "0.10.1",
    "0.10.1.1",
    "0.10.2",
    "0.11.0",
    "0.11.1",
    "0.11.2",
    "0.12.0",
    "0.13.0",
    "0.14.0",
    "0.14.1",
    "0.15.0",
    "0.15.1",
    "0.16.0",
    "0.17.0",
    "0.17.1",
    "0.18.0",
    "0.18.1",
    "0.19.0",
    "0.19.1",
    "0.20.0",
    "0.20.1",
    "0.20.2",
    "0.21.0",
    "0.22.0",
    "0.22.1",
    "0.23.0",
    "0.24.0",
    "0.25.0",
    "0.25.1",
    "0.26.0",
    "0.27.0",
    "0.27.1",
    "0.28.0",
    "0.29.0",
    "0.30.0",
    "0.31.0",
    "0.32.0",
    "0.33.0",
]

# Keys of the report, both layouts (compared case-insensitively, spaces collapsed).
_KEYS = [
    "OS",
    "GCC version",
    "Clang version",
    "CMake version",
    "Libc version",
    "PyTorch version",
    "Is debug build",
    "CUDA used to build PyTorch",
    "ROCM used to build PyTorch",
    "XPU used to build PyTorch",
    "Python version",
    "Python platform",
    "Is CUDA available",
    "CUDA runtime version",
    "CUDA_MODULE_LOADING set to",
    "GPU models and configuration",
    "Nvidia driver version",
    "cuDNN version",
    "HIP runtime version",
    "MIOpen runtime version",
    "Is XNNPACK available",
    "Is XPU available",
    "XPU runtime version",
    "Intel GPU models",
    "CPU",
    "Versions of relevant libraries",
    "ROCM Version",
    "Neuron SDK Version",
    "vLLM Version",
    "vLLM Build Flags",
    "GPU Topology",
    "CUDA Archs",
]
_KEY_SET = {k.lower(): k for k in _KEYS}
# Keys that only a collect-env report has (to tell a report from other text).
_CORE_KEYS = {
    "PyTorch version",
    "CUDA used to build PyTorch",
    "vLLM Version",
    "vLLM Build Flags",
    "GPU models and configuration",
    "Nvidia driver version",
    "Is CUDA available",
    "CUDA runtime version",
    "GPU Topology",
    "ROCM used to build PyTorch",
}
_NOT_COLLECTED = {
    "",
    "n/a",
    "none",
    "could not collect",
    "no cuda",
    "no xpu",
    "not set",
    "n/a (dev)",
    "unknown",
}

_BANNER = re.compile(r"^\s*={20,}\s*$")
# Linear on any line (a 60 KB run of blanks included): a key or value ends in a non-blank
# character, so no lazy group is retried against a trailing `\s*` at every length.
_KEY_LINE = re.compile(
    r"^\s*(?P<key>[A-Za-z](?:[A-Za-z0-9_ ./()\-]*[A-Za-z0-9_./()\-])?)\s*:(?:\s(?P<val>.*))?$"
)
_GPU_LINE = re.compile(r"^\s*GPU\s+(?P<idx>\d+)\s*:\s*(?P<name>\S(?:.*\S)?)\s*$")
_MIG_LINE = re.compile(r"^\s*MIG\s+\S+\s+Device\s+\d+\s*:")
_PIP_LINE = re.compile(r"^\s*\[(?P<tool>pip3?|uv|conda)\]\s+(?P<rest>\S(?:.*\S)?)\s*$")
_ENV_LINE = re.compile(r"^(?P<key>[A-Za-z_][A-Za-z0-9_]*)=(?P<val>.*)$")
_SMI_CUDA = re.compile(r"CUDA Version:\s*(?P<v>\d+\.\d+)")

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


# -- parsing -----------------------------------------------------------------------------


def _decode(text: str | bytes, name: str) -> str:
    if isinstance(text, bytes):
        if b"\x00" in text:
            raise InputError(
                name, "does not look like a `vllm collect-env` report: binary data (NUL bytes)"
            )
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise InputError(
                name, "does not look like a `vllm collect-env` report: not UTF-8 text"
            ) from None
    if not isinstance(text, str):
        raise InputError(name, "does not look like a `vllm collect-env` report: not text")
    if "\x00" in text:
        raise InputError(
            name, "does not look like a `vllm collect-env` report: binary data (NUL bytes)"
        )
    if not text.strip():
        raise InputError(name, "does not look like a `vllm collect-env` report: empty")
    return text


def _clean_lines(text: str) -> list[str]:
    """Lines without markdown/HTML wrappers; blockquote markers removed."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\ufeff", "")
    raw = text.split("\n")
    quoted = [ln for ln in raw if ln.strip()]
    strip_quote = (
        bool(quoted) and sum(ln.lstrip().startswith(">") for ln in quoted) > len(quoted) / 2
    )
    out: list[str] = []
    for given in raw:
        line = re.sub(r"^\s*>\s?", "", given) if strip_quote else given
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            continue
        if re.fullmatch(
            r"</?details[^>]*>|</?summary[^>]*>.*|<summary>.*</summary>",
            stripped,
            flags=re.IGNORECASE,
        ):
            continue
        bare = re.sub(r"</?(details|summary|code|pre)[^>]*>", "", line, flags=re.IGNORECASE)
        out.append(bare.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&"))
    return out


def _key_of(line: str) -> tuple[str, str] | None:
    """(canonical key, value) when the line is one of the report's ``Key: value`` lines."""
    m = _KEY_LINE.match(line)
    if not m:
        return None
    key = " ".join(m.group("key").split()).lower()
    canonical = _KEY_SET.get(key)
    if canonical is None:
        return None
    return canonical, (m.group("val") or "").strip()


def _collected(value: str | None) -> bool:
    return value is not None and value.strip().lower() not in _NOT_COLLECTED


_secret = is_secret  # the environment collector's test


class _Report:
    def __init__(self, lines: list[str]):
        self.lines = lines
        self.values: dict[str, tuple[str, int]] = {}  # key -> (value, line index), first wins
        self.section_of: list[str | None] = []
        section: str | None = None
        i = 0
        while i < len(lines):
            line = lines[i]
            if _BANNER.match(line) and i + 2 < len(lines) and _BANNER.match(lines[i + 2]):
                section = " ".join(lines[i + 1].split()) or None
                self.section_of.extend([section] * 3)
                i += 3
                continue
            self.section_of.append(section)
            kv = _key_of(line)
            if kv is not None and kv[0] not in self.values:
                self.values[kv[0]] = (kv[1], i)
            i += 1

    def get(self, key: str) -> tuple[str, int] | None:
        return self.values.get(key)

    def block_after(self, index: int, stop_on_blank: bool = True) -> list[tuple[int, str]]:
        """The lines after ``index`` up to a banner, another report key or a blank line
        (leading blank lines are skipped)."""
        out: list[tuple[int, str]] = []
        j = index + 1
        while j < len(self.lines):
            line = self.lines[j]
            if _BANNER.match(line) or _key_of(line) is not None:
                break
            if not line.strip():
                if out and stop_on_blank:
                    break
                j += 1
                continue
            out.append((j, line))
            j += 1
        return out


def parse_report(text: str | bytes, name: str) -> Facts:
    """Facts from the text of a `vllm collect-env` report (``name`` names the input)."""
    text = _decode(text, name)
    # credentials in URLs (pip's git+https://user:PASS@host, HF_ENDPOINT), tokens and
    # secret assignments never become facts
    lines = [redact_text(line) for line in _clean_lines(text)]
    report = _Report(lines)
    found_core = sorted(k for k in report.values if k in _CORE_KEYS)
    has_banner_titles = any(
        s in ("PyTorch Info", "vLLM Info", "CUDA / GPU Info") for s in report.section_of if s
    )
    if not found_core and not has_banner_titles:
        raise InputError(
            name,
            "does not look like a `vllm collect-env` report: none of its "
            "keys (PyTorch version, vLLM Version, GPU models and configuration, "
            "...) were found",
        )
    facts = Facts()
    facts.notes.append(f"facts from the collect-env report {name}")
    _vllm_facts(report, facts)
    _torch_facts(report, facts)
    _driver_facts(report, lines, facts)
    visible = _visible_devices(report, facts)
    _gpu_facts(report, facts, visible)
    _topology_facts(report, facts, visible)
    _package_facts(report, facts)
    _package_listing(facts)
    _env_facts(report, facts)
    return facts


def _line_detail(report: _Report, key: str) -> str:
    _value, idx = report.values[key]
    return report.lines[idx].strip()


def _set_first_word(report: _Report, facts: Facts, key: str, path: str) -> bool:
    """Set ``path`` to the first word of the report's ``key`` when it was collected."""
    entry = report.get(key)
    if entry is None or not _collected(entry[0]):
        return False
    facts.set(path, entry[0].split()[0], Source.REPORT, _line_detail(report, key))
    return True


# -- vLLM -----------------------------------------------------------------------------------

_VLLM_VERSION = re.compile(
    r"^(?P<ver>\S+)(?:\s*\((?:git sha:\s*(?P<sha>[0-9a-fA-F]+))?(?:,?\s*date:\s*(?P<date>\d{8}))?\))?"
)


def base_release(version: str) -> str | None:
    """The vLLM release a version descends from (see the module docstring)."""
    try:
        v = Version(version)
    except InvalidVersion:
        return None
    if v.pre is None and v.dev is None:
        return v.public
    known = sorted((Version(r) for r in _KNOWN_RELEASES), reverse=True)
    below = [r for r in known if r < v]
    newest = known[0]
    if v.release[:3] > tuple(newest.release[:3]) and len(v.release) >= 3 and v.release[2] > 0:
        # past the known list: X.Y.(Z-1)
        parts = list(v.release[:3])
        parts[2] -= 1
        return ".".join(str(p) for p in parts)
    return str(below[0]) if below else None


def _vllm_facts(report: _Report, facts: Facts) -> None:
    entry = report.get("vLLM Version")
    if entry is None:
        facts.mark_missing("vllm", "the report has no `vLLM Version` line")
    else:
        value, _ = entry
        detail = _line_detail(report, "vLLM Version")
        m = _VLLM_VERSION.match(value)
        version = m.group("ver") if m else ""
        if not _collected(value) or version.upper() == "N/A" or not m:
            facts.mark_missing("vllm.version", f"the report says `{value or 'nothing'}`")
        else:
            try:
                parsed = Version(version)
            except InvalidVersion:
                parsed = None
            facts.set("vllm.installed", True, Source.REPORT, detail)
            facts.set("vllm.version", version, Source.REPORT, detail)
            sha = m.group("sha")
            date = m.group("date")
            local = parsed.local if parsed is not None else None
            if local:
                for part in local.split("."):
                    if sha is None and re.fullmatch(r"g[0-9a-f]{6,40}", part):
                        sha = part[1:]
                    if date is None and re.fullmatch(r"d\d{8}", part):
                        date = part[1:]
            if sha:
                facts.set("vllm.git_sha", sha.lower(), Source.REPORT, detail)
            if date:
                facts.set("vllm.build_date", date, Source.REPORT, detail)
            if parsed is not None:
                is_dev = parsed.is_devrelease or parsed.is_prerelease
                facts.set("vllm.is_dev", bool(is_dev), Source.REPORT, detail)
                base = base_release(version)
                if base is not None:
                    facts.set(
                        "vllm.base_release",
                        base,
                        Source.REPORT,
                        f"{detail} (newest release at or below {version})",
                    )
            else:
                facts.mark_missing("vllm.is_dev", f"`{version}` is not a PEP 440 version")
    flags = report.get("CUDA Archs")
    if flags is not None:
        archs = flags[0].split(";", 1)[0].strip()
        if _collected(archs):
            facts.set("vllm.cuda_archs", archs, Source.REPORT, _line_detail(report, "CUDA Archs"))
        else:
            facts.mark_missing(
                "vllm.cuda_archs",
                "the report's build flags say `Not Set` "
                "(the line shows TORCH_CUDA_ARCH_LIST at report time)",
            )
    else:
        facts.mark_missing("vllm.cuda_archs", "the report has no `vLLM Build Flags` line")


# -- torch ----------------------------------------------------------------------------------


# `Is CUDA available`: str(torch.cuda.is_available()) in today's reports, Yes/No in torch's
# collect_env before 1.8
_AVAILABLE = {"true": True, "yes": True, "false": False, "no": False}


def _torch_facts(report: _Report, facts: Facts) -> None:
    entry = report.get("Is CUDA available")
    said = _AVAILABLE.get(entry[0].strip().lower()) if entry is not None else None
    if entry is not None and said is not None:
        facts.set(
            "torch.cuda_available", said, Source.REPORT, _line_detail(report, "Is CUDA available")
        )
    else:
        facts.mark_missing("torch.cuda_available", "the report has no `Is CUDA available` line")
    if not _set_first_word(report, facts, "PyTorch version", "torch.version"):
        facts.mark_missing("torch.version", "the report has no PyTorch version")
    if not _set_first_word(report, facts, "CUDA used to build PyTorch", "torch.cuda_version"):
        rocm = report.get("ROCM used to build PyTorch")
        if rocm is not None and _collected(rocm[0]):
            facts.mark_missing(
                "torch.cuda_version", f"torch is a ROCm build ({rocm[0]}), not a CUDA build"
            )
        else:
            facts.mark_missing(
                "torch.cuda_version", "the report has no `CUDA used to build PyTorch` value"
            )


# -- driver ---------------------------------------------------------------------------------


def _driver_facts(report: _Report, lines: list[str], facts: Facts) -> None:
    if not _set_first_word(report, facts, "Nvidia driver version", "driver.version"):
        facts.mark_missing("driver.version", "the report has no NVIDIA driver version")
    for line in lines:
        m = _SMI_CUDA.search(line)
        if m:
            facts.set("driver.cuda_version", m.group("v"), Source.REPORT, line.strip())
            break
    else:
        facts.mark_missing(
            "driver.cuda_version",
            "a collect-env report does not state the "
            "driver's CUDA version (paste `nvidia-smi` output to add it)",
        )


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
    if entry is None:
        facts.mark_missing("gpu", "the report has no `GPU models and configuration` line")
        return
    value, idx = entry
    gpus: list[tuple[int, str, str]] = []  # index, name, line
    mig = False
    candidates: list[tuple[int, str]] = []
    if value:
        candidates.append((idx, value))
    candidates.extend(report.block_after(idx))
    for _, line in candidates:
        m = _GPU_LINE.match(line)
        if m:
            gpus.append((int(m.group("idx")), m.group("name"), line.strip()))
        elif _MIG_LINE.match(line):
            mig = True
    rocm = _is_rocm(report)
    if not gpus:
        if value and _collected(value) and not _GPU_LINE.match(value):
            # ROCm (and macOS): one device name, for device 0 only
            _single_device(report, facts, value, rocm)
            return
        facts.mark_missing("gpu", f"the report lists no GPUs (`{value or 'nothing'}`)")
        return
    detail = "GPU models and configuration"
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


# -- packages -------------------------------------------------------------------------------


# `pip list` (name, version, maybe a location) and `pip freeze` (name==version) lines pasted
# beside the report, e.g. `pip list | grep flashinfer`: read for the packages the doctor knows
_PIP_LIST_LINE = re.compile(
    r"^\s*(?P<name>[A-Za-z0-9][A-Za-z0-9._\-]*)(?:\s+|\s*==\s*)(?P<ver>\d[\w.+!\-]*)(?:\s+\S.*)?$"
)
_PLATFORM_MACHINE = re.compile(r"(x86_64|amd64|aarch64|arm64)", re.IGNORECASE)


def _listed_packages(report: _Report, facts: Facts) -> bool:
    """Versions from pasted `pip list` / `pip freeze` lines, for the packages of interest."""
    from packaging.version import InvalidVersion, Version

    from vllm_doctor.facts.packages import packages_of_interest

    known = set(packages_of_interest())
    found = False
    for line in report.lines:
        m = _PIP_LIST_LINE.match(line)
        if not m or _PIP_LINE.match(line):
            continue
        name = canonical_name(m.group("name"))
        if name not in known:
            continue
        try:
            Version(m.group("ver"))
        except InvalidVersion:
            continue
        path = f"packages.{name}"
        if path not in facts:
            facts.set(path, m.group("ver"), Source.REPORT, line.strip())
            found = True
    platform = report.get("Python platform")
    if platform is not None:
        machine = _PLATFORM_MACHINE.findall(platform[0])
        if machine:
            from vllm_doctor.facts.packages import machine_name

            facts.set("vllm.machine", machine_name(machine[-1]), Source.REPORT, platform[0])
    return found


def _package_facts(report: _Report, facts: Facts) -> None:
    found = _listed_packages(report, facts)
    conda: dict[str, tuple[str, str]] = {}
    for line in report.lines:
        m = _PIP_LINE.match(line)
        if not m:
            continue
        rest = m.group("rest")
        if rest.lower() in ("could not collect", "no relevant packages"):
            continue
        if m.group("tool") == "conda":
            parts = rest.split()
            if len(parts) >= 2 and re.match(r"^\d", parts[1]):
                conda.setdefault(canonical_name(parts[0]), (parts[1], line.strip()))
            continue
        pm = re.match(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._\-]*)\s*==\s*(?P<ver>\S+)$", rest)
        if not pm:
            continue
        path = f"packages.{canonical_name(pm.group('name'))}"
        if path not in facts:
            facts.set(path, pm.group("ver"), Source.REPORT, line.strip())
            found = True
    for pkg, (version, line) in conda.items():
        path = f"packages.{pkg}"
        if path not in facts:
            facts.set(path, version, Source.REPORT, line)
            found = True
    if not found:
        facts.mark_missing("packages", "the report lists no packages")


def _collect_env_rule(facts: Facts) -> tuple[str | None, dict[str, Any]]:
    """(the covered release whose `collect-env` wrote the report, what it lists), or
    (None, {}) when the report names no version the collect-env table covers."""
    from vllm_doctor import knowledge

    version = facts.value("vllm.version")
    if version is None:
        return None, {}
    table = knowledge.load("collect_env")
    release = knowledge.match_release(str(version), tuple(table.releases)).release
    rule = table.at(release) if release is not None else {}
    return (release, rule) if rule else (None, {})


def _package_listing(facts: Facts) -> None:
    """A package the report does not list is absent only when the report's own release
    would list it: ``vllm collect-env`` prints just the pip packages whose line contains one
    of its DEFAULT_PIP_PATTERNS (knowledge/data/collect_env.json, per release), so DeepGEMM
    is never listed. Any other package cannot be known from the report (``Listing``)."""
    if "packages" in facts.missing:
        return
    version = facts.value("vllm.version")
    release, rule = _collect_env_rule(facts)
    patterns = rule.get("pip_patterns")
    if release is not None and patterns:
        facts.set_listing(
            Listing(
                "packages",
                f"`vllm collect-env` of vLLM {release} lists only pip packages whose line "
                f"contains one of {', '.join(patterns)}: {{name}} would not be listed even "
                "when installed (run `pip show {name}` there)",
                contains=tuple(patterns),
            )
        )
        return
    facts.set_listing(
        Listing(
            "packages",
            (
                f"which pip packages the report of vLLM {version} lists is not known"
                if version is not None
                else "the report names no vLLM version, so which pip packages it lists is not known"
            )
            + " (run `pip show {name}` there)",
        )
    )


# -- environment ----------------------------------------------------------------------------


def _env_facts(report: _Report, facts: Facts) -> None:
    found = False
    has_section = any(
        section is not None and section.lower() == "environment variables"
        for section in report.section_of
    )
    for i, line in enumerate(report.lines):
        section = report.section_of[i] if i < len(report.section_of) else None
        stripped = line.strip()
        m = _ENV_LINE.match(stripped)
        if not m or line.startswith((" ", "\t")):
            continue
        key, value = m.group("key"), m.group("val")
        in_section = section is not None and section.lower() == "environment variables"
        # outside the report's own section, only the variables the doctor collects (the one
        # list of facts/environment.py): a loose KEY=VALUE is most likely something else
        if not in_section and not (is_collected(key) and key.upper() == key):
            continue
        if _secret(key):
            value = REDACTED
        path = f"env.{key}"
        if path not in facts:
            facts.set(path, value, Source.REPORT, f"{key}=" + (REDACTED if _secret(key) else value))
            found = True
    if not found and not has_section:
        facts.mark_unknowable(
            "env",
            "the report prints no environment variables (torch's own collect_env, or a "
            "collect-env before vLLM 0.6.3): pass them with the report, or run on the host",
        )
        return
    facts.set_listing(_env_listing(facts))


def _env_listing(facts: Facts) -> Listing:
    """What the report's `collect-env` prints of the environment (knowledge/data/
    collect_env.json): vLLM's own variables and the names starting with its prefixes, never
    a name containing a secret term. For a version the table does not cover, only what every
    covered release prints."""
    from vllm_doctor import knowledge

    release, rule = _collect_env_rule(facts)
    if rule.get("env_prefixes") is not None:
        rules = [rule]
        whose = f"vLLM {release}"
    else:
        table = knowledge.load("collect_env")
        rules = [r for r in (table.at(x) for x in table.releases) if r.get("env_prefixes")]
        whose = "every covered release (the report's vLLM version is not one of them)"
    prefixes = set.intersection(*(set(r["env_prefixes"]) for r in rules)) | {"VLLM_"}
    names = set.intersection(*(set(r["env_names"]) for r in rules))
    never = set.union(*(set(r["env_never"]) for r in rules))
    return Listing(
        "env",
        f"`vllm collect-env` of {whose} prints only vLLM's own variables and names "
        f"starting with {', '.join(sorted(prefixes))}, never one containing "
        f"{', '.join(sorted(never))}: {{name}} would not be printed even when set",
        prefixes=tuple(sorted(prefixes)),
        names=tuple(sorted(names)),
        never=tuple(sorted(never)),
    )


def known_keys() -> Iterable[str]:
    """The report keys this parser reads (for documentation and tests)."""
    return tuple(_KEYS)
