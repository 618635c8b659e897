"""What a companion package imports from the package it plugs into, against the installed or
reported version of that package (facts ``release.stack.partner_imports_*``).

Read from the generated table ``stack_imports`` (``tools/partner_imports.py``): per version of
LMCache and of quack-kernels, the ``vllm.*`` / ``cutlass.*`` names each of its modules imports
unguarded at module level (its own imports followed) or reads as an attribute when it is
imported (a ``def``'s annotation ``cute.core.ThrMma``), with the vLLM releases / CuTe DSL
versions whose code lacks each. Such a module fails to load (``ImportError: cannot import
name``, ``AttributeError: module 'cutlass.cute.core' has no attribute 'ThrMma'``):

* LMCache is loaded through ``--kv-transfer-config``: vLLM's own LMCache connectors import
  the LMCache modules the ``companion_uses`` table lists for the judged release, and a
  ``kv_connector_module_path`` names one of LMCache's own connectors. With the serve line in
  hand the modules are known (none when no LMCache connector is configured); without it the
  failures are ``at_risk`` (a warning), never an error.
* quack-kernels is required by vLLM and imported by its CuTe DSL kernels (the modules
  ``companion_uses`` lists): a known version that cannot import is ``missing``; an unknown one
  whose versions the release allows include some that cannot is ``at_risk``, naming them.

A pair the companion's own ``Requires-Dist`` already excludes is left to
``release.stack.unmet_requirements`` (one cause, one finding); a partner version the table did
not read (a vLLM build between releases) is never judged.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from typing import Any

from vllm_doctor.facts.model import Facts

SOURCE = "release knowledge"
PATHS = (
    "release.stack.partner_imports_missing",
    "release.stack.partner_imports_at_risk",
    "release.stack.partner_imports_fix",
)
Installed = Callable[[Facts, str, bool], tuple[str | None, str | None]]


def collect_partner_imports(
    facts: Facts, release: str | None, reason: str, installed: Installed
) -> None:
    from vllm_doctor import knowledge

    try:
        table = knowledge.load("stack_imports")
    except knowledge.KnowledgeError as err:
        for path in PATHS:
            facts.mark_missing(path, f"the stack_imports table cannot be read: {err}")
        return
    missing: list[str] = []
    at_risk: list[str] = []
    fixes: list[str] = []
    unknown: list[str] = []
    judged = 0
    for dist, meta in sorted((table.meta.get("companions") or {}).items()):
        found = _companion(facts, table, dist, meta, release, reason, installed)
        if isinstance(found, str):
            unknown.append(found)
            continue
        judged += 1
        lines, risky, fix = found
        missing += lines
        at_risk += risky
        if fix:
            fixes.append(fix)
    if not judged:
        for path in PATHS:
            facts.mark_missing(path, "; ".join(unknown) or "no companion to judge")
        return
    detail = (
        "the names each companion version imports from its partner (stack_imports), against "
        "the partner version here" + (f" (not judged: {'; '.join(unknown)})" if unknown else "")
    )
    facts.set("release.stack.partner_imports_missing", missing, SOURCE, detail)
    facts.set("release.stack.partner_imports_at_risk", at_risk, SOURCE, detail)
    facts.set_fix("release.stack.partner_imports_fix", "; ".join(fixes), SOURCE)


def _companion(
    facts: Facts,
    table: Any,
    dist: str,
    meta: dict[str, Any],
    release: str | None,
    reason: str,
    installed: Installed,
) -> tuple[list[str], list[str], str] | str:
    """(missing, at_risk, fix) for one companion, or why it is not judged."""
    from vllm_doctor.facts.release_pins import what_if_without

    partner = meta["partner"]
    if release is None:
        return f"{dist}: {reason}"
    if partner == "vllm":
        partner_version: str | None = _exact_release(facts, release)
        if partner_version is None:
            return f"{dist}: vLLM {facts.value('vllm.version')} is not a release the table read"
    else:
        if what_if_without(facts, f"packages.{partner}"):
            return f"{dist}: {partner} belongs to another install (what-if release)"
        partner_version, why = installed(facts, partner, False)
        if partner_version is None:
            return f"{dist}: {partner}: {why or 'not installed'}"
    if partner_version not in meta["partner_releases"]:
        return f"{dist}: {partner} {partner_version} is not among the versions read"
    loaded, maybe, why_loaded = _modules(facts, table, dist, meta, release)
    if not loaded and not maybe:
        return ([], [], "") if why_loaded is None else f"{dist}: {why_loaded}"
    what_if = what_if_without(facts, f"packages.{dist}")
    # a what-if release brings one of the versions it allows: the one here says nothing
    version, why = (None, what_if) if what_if else installed(facts, dist, False)
    releases = meta["releases"]
    label = _partner_label(partner, partner_version)
    if version is not None and version in releases:
        if _requirement_excludes(dist, version, partner, partner_version):
            return [], [], ""  # release.stack.unmet_requirements says it
        errors = _lacking(table, dist, version, loaded, meta, partner_version)
        risks = _lacking(table, dist, version, maybe - loaded, meta, partner_version)
        lines = [_line(dist, version, e, label, meta) for e in errors]
        risky = [_line(dist, version, e, label, meta) + f" ({why_loaded})" for e in risks]
        fix = (
            _fix(table, dist, version, loaded | maybe, meta, partner, partner_version)
            if (lines or risky)
            else ""
        )
        return lines, risky, fix
    if version is not None:
        return _between(table, dist, version, loaded | maybe, meta, partner, partner_version)
    # the version is unknown: the versions the release installs, when vLLM requires it
    allowed = _allowed(dist, release, releases, partner, partner_version)
    if not allowed:
        return f"{dist}: {why or 'not installed'}"
    failing = {
        v for v in allowed if _lacking(table, dist, v, loaded | maybe, meta, partner_version)
    }
    if not failing:
        return [], [], ""
    from vllm_doctor.knowledge.ranges import release_spans

    names = sorted(
        {
            e["name"]
            for v in failing
            for e in _lacking(table, dist, v, loaded | maybe, meta, partner_version)
        }
    )
    spec = _vllm_spec(dist, release)
    risky = [
        f"{dist} {release_spans(releases, failing)} (of the versions vLLM {release} allows: "
        f"{dist}{spec}) use {', '.join(n.replace(':', '.').rstrip('.') for n in names[:4])} "
        f"of {label}, which lacks "
        f"{'it' if len(names) == 1 else 'them'}; the version of {dist} is not known here "
        f"({why or 'not listed'}: pip show {dist})"
    ]
    good = sorted(set(allowed) - failing, key=_key)
    fix = f"pip install '{dist}=={good[-1]}'" if good else ""
    return [], risky, fix


def _between(
    table: Any,
    dist: str,
    version: str,
    modules: set[str],
    meta: dict[str, Any],
    partner: str,
    partner_version: str,
) -> tuple[list[str], list[str], str] | str:
    """A companion version the table did not read (LMCache 0.3.8 is no longer on the index):
    where the release before it cannot import and the release after it can, a warning that
    names both, never an error (its own code was not read)."""
    from packaging.version import InvalidVersion, Version

    unread = f"{dist} {version} is not among the versions read"
    releases = meta["releases"]
    try:
        wanted = Version(version)
        before = [r for r in releases if Version(r) < wanted]
        after = [r for r in releases if Version(r) > wanted]
    except InvalidVersion:
        return unread
    if not before or not after:
        return unread
    lacking = _lacking(table, dist, before[-1], modules, meta, partner_version)
    if not lacking or _lacking(table, dist, after[0], modules, meta, partner_version):
        return unread
    label = _partner_label(partner, partner_version)
    names = ", ".join(e["name"] for e in lacking[:3])
    risky = [
        f"{dist} {version} was not read (no wheel on the index): {dist} {before[-1]}, the "
        f"release before it, imports {names}, which {label} lacks; {dist} {after[0]}, the "
        "release after it, imports cleanly"
    ]
    return [], risky, _fix(table, dist, version, modules, meta, partner, partner_version)


def _exact_release(facts: Facts, release: str) -> str | None:
    """The judged release when the installed vLLM is exactly it (a build between releases may
    have any name)."""
    from packaging.version import InvalidVersion, Version

    try:
        public = Version(str(facts.value("vllm.version"))).public  # a local build is the release
        return release if Version(public) == Version(release) else None
    except InvalidVersion:
        return None


def _modules(
    facts: Facts, table: Any, dist: str, meta: dict[str, Any], release: str
) -> tuple[set[str], set[str], str | None]:
    """(modules loaded, modules loaded only if the user configures it, why the second set is
    uncertain or why nothing is loaded)."""
    used = _used_modules(dist, release)
    prefixes = tuple(meta.get("entry_prefixes") or ())
    if not prefixes:  # imported by vLLM's own code
        return used, set(), "when vLLM imports it"
    connectors = set(meta.get("connectors") or ())  # the modules a module path may name
    if facts.get("serve.argv") is None:
        return set(), used | connectors, "if the serve line configures the LMCache connector"
    config = _kv_transfer_config(facts.value("serve.argv") or [])
    if config is None:
        return set(), set(), None  # no KV connector: the companion is not loaded
    path = config.get("kv_connector_module_path")
    if isinstance(path, str) and path.startswith(tuple(p.split(".", 1)[0] + "." for p in prefixes)):
        return {path}, set(), None
    connector = str(config.get("kv_connector") or "")
    if dist.replace("-", "").lower() in connector.lower():
        return used, set(), None
    return set(), set(), None


def _kv_transfer_config(argv: list[Any]) -> dict[str, Any] | None:
    words = [str(w) for w in argv]
    if len(words) == 1:
        try:
            words = shlex.split(words[0])
        except ValueError:
            return None
    for i, word in enumerate(words):
        value = None
        if word in ("--kv-transfer-config", "--kv_transfer_config") and i + 1 < len(words):
            value = words[i + 1]
        elif word.startswith(("--kv-transfer-config=", "--kv_transfer_config=")):
            value = word.split("=", 1)[1]
        if value is not None:
            try:
                parsed = json.loads(value)
            except ValueError:
                return None
            return parsed if isinstance(parsed, dict) else None
    return None


def _used_modules(dist: str, release: str) -> set[str]:
    """The companion's modules the release imports (companion_uses)."""
    from vllm_doctor import knowledge

    out: set[str] = set()
    try:
        uses = knowledge.load("companion_uses").at(release)
    except (knowledge.KnowledgeError, KeyError):
        return out
    for key, use in uses.items():
        if isinstance(use, dict) and use.get("package") == dist and not use.get("guarded"):
            module, _, dotted = key.partition(":")
            out.add(module)
            out.add(f"{module}.{dotted.split('.', 1)[0]}")
    return out


def _lacking(
    table: Any, dist: str, version: str, modules: set[str], meta: dict[str, Any], partner: str
) -> list[dict[str, Any]]:
    """Each name the modules import that the partner version lacks: name, file, module."""
    order = meta["partner_releases"]
    index = order.index(partner)
    out: dict[str, dict[str, Any]] = {}
    for module in sorted(modules):
        value = _value_at(table, f"{dist}|{module}", version, meta["releases"])
        if not value:
            continue
        for name, spans in value["missing"].items():
            if any(order.index(a) <= index <= order.index(b) for a, b in spans):
                entry = out.setdefault(
                    name,
                    {
                        "name": name,
                        "file": value["files"].get(name),
                        "modules": [],
                        "spans": spans,
                        # read as an attribute when the file is imported, not imported
                        "read": name in value.get("reads", ()),
                    },
                )
                entry["modules"].append(module)
    return [out[name] for name in sorted(out)]


def _value_at(table: Any, key: str, version: str, releases: list[str]) -> dict[str, Any] | None:
    index = releases.index(version)
    for span in table.raw_spans(key):
        if releases.index(span["first"]) <= index <= releases.index(span["last"]):
            value = span.get("value")
            return value if isinstance(value, dict) else None
    return None


def _line(dist: str, version: str, entry: dict[str, Any], label: str, meta: dict[str, Any]) -> str:
    module, _, name = entry["name"].partition(":")
    if entry.get("read"):
        what = f"reads {module}.{name} when it is imported (AttributeError)"
    else:
        what = f"imports {name} from {module}" if name else f"imports the module {module}"
    present = _present_in(entry["spans"], meta["partner_releases"])
    return (
        f"{dist} {version}: {entry['file']} {what}, which {label} lacks"
        + (f" ({meta['partner']} has it in {present})" if present else "")
        + f"; loaded by {', '.join(entry['modules'][:3])}"
    )


def _present_in(spans: list[list[str]], order: list[str]) -> str:
    """The partner versions read that have the name (outside its missing spans)."""
    from vllm_doctor.knowledge.ranges import release_spans

    lacking: set[str] = set()
    for first, last in spans:
        lacking |= set(order[order.index(first) : order.index(last) + 1])
    return release_spans(order, set(order) - lacking)


def _partner_label(partner: str, version: str) -> str:
    return f"vLLM {version}" if partner == "vllm" else f"{partner} {version}"


def _fix(
    table: Any,
    dist: str,
    version: str,
    modules: set[str],
    meta: dict[str, Any],
    partner: str,
    partner_version: str,
) -> str:
    """The companion versions whose modules import cleanly on this partner version."""
    from vllm_doctor.knowledge.ranges import release_spans

    releases = meta["releases"]
    clean = {
        v
        for v in releases
        if not _requirement_excludes(dist, v, partner, partner_version)
        and not _lacking(table, dist, v, modules, meta, partner_version)
    }
    label = _partner_label(partner, partner_version)
    if not clean:
        return f"no {dist} version read imports cleanly on {label}: change {partner}"
    newest = max(clean, key=_key)
    return (
        f"pip install '{dist}=={newest}' ({dist} versions that import cleanly on {label}: "
        f"{release_spans(releases, clean)})"
    )


def _requirement_excludes(dist: str, version: str, partner: str, partner_version: str) -> bool:
    """The companion's own Requires-Dist rules the partner version out (pip would not pair
    them; release.stack.unmet_requirements reports an install that does)."""
    from vllm_doctor.knowledge import stack

    keys = stack.at(dist, version)
    req = (keys or {}).get(f"requires:{partner}")
    if not isinstance(req, dict) or not req.get("spec") or req.get("extra"):
        return False
    from vllm_doctor.version_specs import admits

    return admits(req["spec"], partner_version) is False


def _vllm_spec(dist: str, release: str) -> str:
    from vllm_doctor import knowledge

    req = knowledge.load("dependencies").at(release).get(dist)
    return str(req.get("spec") or "") if isinstance(req, dict) else ""


def _allowed(
    dist: str, release: str, releases: list[str], partner: str, partner_version: str
) -> list[str]:
    """The companion versions read that the release requires and that accept the partner."""
    from vllm_doctor import knowledge

    req = knowledge.load("dependencies").at(release).get(dist)
    if not isinstance(req, dict) or req.get("extra"):
        return []
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version

    try:
        spec = SpecifierSet(str(req.get("spec") or ""))
        return [
            v
            for v in releases
            if spec.contains(Version(v), prereleases=True)
            and not _requirement_excludes(dist, v, partner, partner_version)
        ]
    except (InvalidSpecifier, InvalidVersion):
        return []


def _key(version: str) -> Any:
    from packaging.version import InvalidVersion, Version

    try:
        return Version(version)
    except InvalidVersion:
        return Version("0")
