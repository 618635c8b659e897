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

from packaging.version import InvalidVersion, Version

from vllm_doctor.errors import InputError
from vllm_doctor.facts.model import Facts, Listing, Source
from vllm_doctor.facts.report_beside import smi_driver
from vllm_doctor.facts.report_gpus import (  # noqa: F401  (re-exported: the GPU-name API)
    CAPABILITY_DETAIL,
    _gpu_facts,
    _topology_facts,
    _visible_devices,
    capability_from_name,
)
from vllm_doctor.facts.report_packages import _env_facts, _package_facts, _package_listing
from vllm_doctor.facts.report_text import (
    _CORE_KEYS,
    _KEYS,
    _SMI_CUDA,
    _clean_lines,
    _collected,
    _decode,
    _line_detail,
    _Report,
    _set_first_word,
)
from vllm_doctor.redact import redact_text

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
    package_list = not found_core and not has_banner_titles and _is_package_list(report)
    if not found_core and not has_banner_titles and not package_list:
        raise InputError(
            name,
            "does not look like a `vllm collect-env` report (none of its keys: PyTorch "
            "version, vLLM Version, GPU models and configuration, ...) nor a package list "
            "(`pip list`, `pip freeze`, `conda list` naming vllm or torch)",
        )
    facts = Facts()
    facts.notes.append(
        f"facts from the package list {name} (pip list / pip freeze / conda list): it shows "
        "packages only, not the GPUs, driver or platform"
        if package_list
        else f"facts from the collect-env report {name}"
    )
    _vllm_facts(report, facts)
    _torch_facts(report, facts)
    _driver_facts(report, lines, facts)
    visible = _visible_devices(report, facts)
    _gpu_facts(report, facts, visible)
    _topology_facts(report, facts, visible)
    _package_facts(report, facts)
    _torch_from_packages(facts)
    _vllm_from_packages(facts)
    _package_listing(facts)
    if package_list:  # cut or filtered (`pip list | grep vllm`): what it omits may be there
        facts.set_listing(
            Listing(
                "packages",
                f"{name} is a package list, which may be cut or filtered: {{name}} is "
                "not known from it (run `pip show {name}` there)",
            )
        )
    _env_facts(report, facts)
    return facts


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


# a conda package line: `[conda] pytorch 2.5.1 py3.12_cuda12.4_cudnn9.1.0_0 pytorch`, or the
# build column of `conda list` (py3.12_..., cuda..., h1234abc_0)
_CONDA_BUILD = re.compile(r"^\[conda\]|\s(?:py3\d*_\S*|\S*cuda\d\S*|h[0-9a-f]{7}_\d+)(?:\s|$)")


def _torch_from_packages(facts: Facts) -> None:
    """A report without a collected `PyTorch version` (cut before it, or a pip list pasted
    with a partial report): torch's version from its package line, and its CUDA build from the
    version's ``+cuXYZ`` label where it has one."""
    from vllm_doctor.facts.packages import cuda_from_torch_version

    listed = facts.get("packages.torch")
    if listed is None or "torch.version" in facts:
        return
    if _CONDA_BUILD.search(listed.detail or ""):
        # a conda build: its number says nothing of the CUDA it was built for (no PyPI wheel)
        return
    version = str(listed.value)
    facts.set("torch.version", version, Source.REPORT, listed.detail)
    cuda = cuda_from_torch_version(version)
    if cuda is not None and "torch.cuda_version" not in facts:
        facts.set("torch.cuda_version", cuda, Source.REPORT, f"{listed.detail} (+cu label)")


def _vllm_from_packages(facts: Facts) -> None:
    """A report without a `vLLM Version` line (a package list, a cut report): vLLM's version
    from its package line."""
    from vllm_doctor.facts.packages import set_vllm_version_facts

    listed = facts.get("packages.vllm")
    if listed is None or "vllm.version" in facts:
        return
    set_vllm_version_facts(facts, str(listed.value), Source.REPORT, listed.detail)
    facts.set("vllm.installed", True, Source.REPORT, listed.detail)


def _is_package_list(report: _Report) -> bool:
    """The text is a package list: `pip list` / `pip freeze` / `conda list` lines, at least two
    of the packages the doctor reads, vllm or torch among them."""
    from vllm_doctor.facts.packages import canonical_name, packages_of_interest
    from vllm_doctor.facts.report_packages import _PIP_LIST_LINE

    known = set(packages_of_interest())
    names = set()
    for line in report.lines:
        found = _PIP_LIST_LINE.match(line)
        if found and canonical_name(found.group("name")) in known:
            names.add(canonical_name(found.group("name")))
    return len(names) >= 2 and bool(names & {"vllm", "torch"})


# -- driver ---------------------------------------------------------------------------------


def _driver_facts(report: _Report, lines: list[str], facts: Facts) -> None:
    if not _set_first_word(report, facts, "Nvidia driver version", "driver.version"):
        # collect-env without nvidia-smi (a container, WSL): the table pasted beside it
        pasted = smi_driver(lines)
        if pasted is not None:
            facts.set("driver.version", pasted[0], Source.REPORT, f"nvidia-smi: {pasted[1]}")
        else:
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


def known_keys() -> Iterable[str]:
    """The report keys this parser reads (for documentation and tests)."""
    return tuple(_KEYS)
