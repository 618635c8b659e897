"""The installed transformers against the model and the packages around it: the model's
model_type (facts ``release.stack.model_type_unknown`` and ``release.stack.model_type_fix``)
and the versions transformers checks when it is imported (``release.stack.transformers_refuses``
and ``release.stack.transformers_refuses_fix``).

vLLM builds the model's config with its own config class when the judged release registers
one for the model_type (``_CONFIG_REGISTRY``), else with transformers' ``AutoConfig``, which
fails (``The checkpoint you are trying to load has model type `X` but Transformers does not
recognize this architecture``) when the installed transformers predates the model. Read from
the generated table ``transformers_types`` (``tools/transformers_types.py``: the model types of
every transformers release from 4.48.0, and vLLM's own config registry per release).

Decided only with the facts in hand: the model_type from config.json, the transformers version
known (not inferred from the release's pin) and among the releases read, the vLLM release
known (or the model_type registered by no read release); a config.json whose ``auto_map``
names an AutoConfig class is loaded from the model repository with ``--trust-remote-code``, so
it needs the serve line to say that flag is off. A model_type no transformers release read
knows (a model with its own code only) is not this finding.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vllm_doctor.facts.model import Facts

SOURCE = "release knowledge"
PATHS = ("release.stack.model_type_unknown", "release.stack.model_type_fix")
CHECK_PATHS = ("release.stack.transformers_refuses", "release.stack.transformers_refuses_fix")
Installed = Callable[[Facts, str, bool], tuple[str | None, str | None]]


def collect_model_type(
    facts: Facts, release: str | None, reason: str, installed: Installed
) -> None:
    found = _judge(facts, release, reason, installed)
    if isinstance(found, str):
        for path in PATHS:
            facts.mark_missing(path, found)
        return
    lines, fix, detail = found
    facts.set("release.stack.model_type_unknown", lines, SOURCE, detail)
    facts.set_fix("release.stack.model_type_fix", fix, SOURCE, detail)


def _judge(
    facts: Facts, release: str | None, reason: str, installed: Installed
) -> tuple[list[str], str, str] | str:
    from vllm_doctor import knowledge

    model_type = facts.value("model.model_type")
    if not isinstance(model_type, str) or not model_type:
        return facts.why_missing("model.model_type") or "config.json names no model_type"
    try:
        table = knowledge.load("transformers_types")
    except knowledge.KnowledgeError as err:
        return f"the transformers_types table cannot be read: {err}"
    knowing = [r for r in table.releases if table.get(model_type, r) is not None]
    detail = f"transformers_types: {len(table.releases)} transformers releases read"
    if not knowing:
        return [], "", f"{detail}; none knows model_type {model_type} (a model with its own code)"
    registered = _vllm_registers(table, model_type)
    if release is not None and release in registered:
        return [], "", f"{detail}; vLLM {release} registers its own config class for it"
    if release is None and registered:
        return f"{reason} (some vLLM releases register their own config class for {model_type})"
    if facts.value("model.remote_config") is True:
        trust = facts.get("serve.trust_remote_code")
        if trust is None:
            return (
                "config.json's auto_map names its own config class: whether "
                "--trust-remote-code loads it is not known (no serve line)"
            )
        if trust.value is True:
            return [], "", f"{detail}; --trust-remote-code loads the repository's config class"
    from vllm_doctor.facts.release_pins import what_if_without

    what_if = what_if_without(facts, "packages.transformers")
    if what_if:  # installing the what-if release brings a transformers it allows
        return what_if
    version, why = installed(facts, "transformers", False)
    if version is None:
        return f"transformers: {why or 'not installed'}"
    if version in knowing:
        return [], "", f"{detail}; transformers {version} knows {model_type}"
    if version not in table.releases:
        # a build between releases (or after the newest read) keeps the model types of the
        # release before it: that decides "known", never an error
        before = _release_before(table.releases, version)
        if before in knowing:
            return (
                [],
                "",
                f"{detail}; transformers {before}, the release before {version}, knows it",
            )
        return f"transformers {version} is not among the releases read"
    from vllm_doctor.knowledge.ranges import release_spans

    first = knowing[0]
    who = f"vLLM {release}" if release else "no vLLM release read"
    line = (
        f"transformers {version} does not know model_type {model_type}: transformers has it "
        f"in {release_spans(table.releases, set(knowing))}; {who} registers no config class "
        "of its own for it"
    )
    return [line], _fix(table, release, knowing, first), detail


def _release_before(releases: list[str], version: str) -> str | None:
    from packaging.version import InvalidVersion, Version

    try:
        wanted = Version(version)
        earlier = [r for r in releases if Version(r) <= wanted]
    except InvalidVersion:
        return None
    return earlier[-1] if earlier else None


def _vllm_registers(table: Any, model_type: str) -> set[str]:
    order = table.meta.get("vllm_releases") or []
    out: set[str] = set()
    for first, last in (table.meta.get("vllm_configs") or {}).get(model_type, ()):
        out |= set(order[order.index(first) : order.index(last) + 1])
    return out


def _fix(table: Any, release: str | None, knowing: list[str], first: str) -> str:
    """The transformers to install, within the judged release's requirement when it has one
    that admits a release knowing the model."""
    if release is None:
        return f"pip install 'transformers>={first}'"
    spec = _spec(release)
    allowed = [v for v in knowing if _contains(spec, v)]
    if allowed:
        return f"pip install 'transformers=={allowed[-1]}' (vLLM {release} requires transformers{spec or ' (any)'})"
    later = _first_release_admitting(release, knowing)
    return (
        f"vLLM {release} requires transformers{spec}, which no release knowing the model "
        f"satisfies: "
        + (f"upgrade vLLM ({later} admits transformers>={first})" if later else "upgrade vLLM")
    )


def _spec(release: str) -> str:
    from vllm_doctor import knowledge

    req = knowledge.load("dependencies").at(release).get("transformers")
    return str(req.get("spec") or "") if isinstance(req, dict) else ""


def _contains(spec: str, version: str) -> bool:
    from vllm_doctor.version_specs import admits

    return admits(spec, version) is True


def _first_release_admitting(release: str, knowing: list[str]) -> str | None:
    from vllm_doctor import knowledge

    releases = knowledge.covered_releases()
    for later in releases[releases.index(release) + 1 :] if release in releases else ():
        spec = _spec(later)
        if any(_contains(spec, v) for v in knowing):
            return later
    return None


# -- the versions transformers checks when it is imported ------------------------------------


def collect_transformers_checks(facts: Facts, installed: Installed) -> None:
    """transformers' ``dependency_versions_check``: ``require_version_core`` raises ImportError
    (``tokenizers>=0.22.0,<=0.23.0 is required for a normal functioning of this module, but
    found tokenizers==0.21.1``) for a checked package outside the release's spec."""
    found = _checks(facts, installed)
    if isinstance(found, str):
        for path in CHECK_PATHS:
            facts.mark_missing(path, found)
        return
    lines, fixes, detail = found
    facts.set("release.stack.transformers_refuses", lines, SOURCE, detail)
    facts.set_fix("release.stack.transformers_refuses_fix", "; ".join(fixes), SOURCE)


def _checks_at(table: Any, version: str) -> dict[str, Any] | None:
    """The checks of a release read; of a build between two read releases whose checks are
    the same, theirs; else None."""
    from packaging.version import InvalidVersion, Version

    def at(release: str) -> dict[str, Any]:
        return {
            key.split(":", 1)[1]: value
            for key, value in table.at(release).items()
            if key.startswith("check:") and isinstance(value, dict)
        }

    if version in table.releases:
        return at(version)
    try:
        wanted = Version(version)
        before = [r for r in table.releases if Version(r) < wanted]
        after = [r for r in table.releases if Version(r) > wanted]
    except InvalidVersion:
        return None
    if not before or not after:
        return None
    below, above = at(before[-1]), at(after[0])
    return below if below and below == above else None


def _checks(facts: Facts, installed: Installed) -> tuple[list[str], list[str], str] | str:
    from vllm_doctor import knowledge
    from vllm_doctor.facts.release_pins import what_if_without

    what_if = what_if_without(facts, "packages.transformers")
    if what_if:
        return what_if
    version, why = installed(facts, "transformers", False)
    if version is None:
        return f"transformers: {why or 'not installed'}"
    try:
        table = knowledge.load("transformers_types")
    except knowledge.KnowledgeError as err:
        return f"the transformers_types table cannot be read: {err}"
    checks = _checks_at(table, version)
    if checks is None:
        return f"transformers {version} is not among the releases read"
    if not checks:
        return f"transformers {version}: its import-time checks were not read"
    lines: list[str] = []
    fixes: list[str] = []
    unknown: list[str] = []
    for name, check in sorted(checks.items()):
        if what_if_without(facts, f"packages.{name}"):
            continue
        partner, partner_why = installed(facts, name, False)
        if partner is None:
            if partner_why and not check.get("optional"):
                unknown.append(name)
            continue
        if not _contains(check["spec"], partner):
            lines.append(
                f"{name} {partner}: transformers {version} requires {name}{check['spec']} when "
                "it is imported (dependency_versions_check: ImportError)"
            )
            fixes.append(f"pip install '{name}{check['spec']}'")
    detail = f"the packages transformers {version} checks when imported (transformers_types)" + (
        f"; versions not known: {', '.join(unknown)}" if unknown else ""
    )
    return lines, fixes, detail
