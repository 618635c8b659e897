"""Package and environment facts of a pasted `vllm collect-env` report: its
``[pip3]``/``[conda]`` lines and any `pip list` / `pip freeze` lines pasted beside it, what the
report's own release would list (knowledge/data/collect_env.json), and its environment
variables."""

from __future__ import annotations

import re
from typing import Any

from vllm_doctor.facts.environment import is_collected
from vllm_doctor.facts.model import Facts, Listing, Source
from vllm_doctor.facts.packages import canonical_name
from vllm_doctor.facts.report_beside import pip_show
from vllm_doctor.facts.report_text import _ENV_LINE, _PIP_LINE, _Report, _secret
from vllm_doctor.redact import REDACTED

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
    for name, version, detail in pip_show(report.lines):
        path = f"packages.{canonical_name(name)}"
        if canonical_name(name) in known and path not in facts:
            facts.set(path, version, Source.REPORT, detail)
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
