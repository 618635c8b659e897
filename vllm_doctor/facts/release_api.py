"""The API the judged vLLM release uses of its companion packages against the installed or
reported companion versions (facts ``release.api.*``).

Read from two generated tables: ``companion_uses`` (per vLLM release, the names it imports or
reads from FlashInfer, LMCache, instanttensor, humming-kernels, quack-kernels, with the keyword
arguments of its calls; ``tools/extractors/companion_uses.py``) and the ``api:`` keys of
``stack/<distribution>`` (per companion version, whether each such name exists and the
parameters it accepts, read from the package's own code; ``tools/gen_stack_knowledge.py``).
A name that vLLM guards (``try``/``except ImportError``, ``getattr`` with a default, a lazy
import with a fallback) is not judged missing (it falls back), but the keywords it is called
with are judged all the same (a TypeError is no fallback). A name the
companion's code cannot decide (re-exported from another package, a lazy ``__getattr__``) has no
key and is never judged; a companion whose version is unknown is never judged either.

Each release is judged against the companion version it was built against (its pin, else the
lowest version its requirement allows): what that version lacks too is not the install's
doing (a call behind a version test, or the release's own bug on one path: the DeepSeek-V4
decode keywords of 0.24.0),
and a companion the release names no version of (LMCache) is not judged here: ENV215 still
reads its messages in a log.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vllm_doctor.facts.model import Facts

SOURCE = "release knowledge"
PATHS = ("release.api.missing", "release.api.fix", "release.api.model_code_only")
# vLLM's per-model code: a call there runs only when that model is served
MODEL_CODE = ("models/", "model_executor/models/")


# (version, None) known; (None, why) unknown; (None, None) not installed: release_stack's reading
Installed = Callable[[Facts, str, bool], tuple[str | None, str | None]]


def collect_release_api(
    facts: Facts, release: str | None, reason: str, installed: Installed
) -> set[str]:
    """Set ``release.api.*``; the distributions found lacking an API (release_stack leaves
    them out of its unmet requirements: one cause, one finding). ``installed`` reads a
    package's version as release_stack does."""
    if release is None:
        for path in PATHS:
            facts.mark_missing(path, reason)
        return set()
    from vllm_doctor import knowledge
    from vllm_doctor.facts.release_pins import what_if_without

    try:
        uses = knowledge.load("companion_uses").at(release)
    except knowledge.KnowledgeError as err:
        for path in PATHS:
            facts.mark_missing(path, f"the companion_uses table cannot be read: {err}")
        return set()
    by_dist: dict[str, dict[str, Any]] = {}
    for key, use in uses.items():
        if isinstance(use, dict) and use.get("package"):
            by_dist.setdefault(use["package"], {})[key] = use
    lacking: list[str] = []
    model_only: list[bool] = []  # per entry of lacking: every call is in one model's code
    fixes: list[str] = []
    unknown: list[str] = []
    judged = 0
    for dist, used in sorted(by_dist.items()):
        what_if = what_if_without(facts, f"packages.{dist}")
        if what_if is not None:  # the package installed here belongs to another stack
            unknown.append(f"{dist}: {what_if}")
            continue
        version, why = installed(facts, dist, False)
        if version is None:
            if why:
                unknown.append(f"{dist}: {why}")
            continue  # not installed: vLLM does not reach its API
        found = _judge(release, dist, version, used)
        if found is None:
            unknown.append(
                f"{dist} {version}: not among the versions read, or vLLM {release} "
                "names no read version of it to judge by"
            )
            continue
        judged += 1
        if found:
            lacking.extend(line for line, _ in found)
            model_only.extend(only for _, only in found)
            fixes.append(_fix(release, dist, used))
    if lacking:
        facts.set(
            "release.api.missing",
            lacking,
            SOURCE,
            f"names and keywords vLLM {release} uses (companion_uses) against each companion "
            "version's own code (stack/<distribution> api: keys)",
        )
        facts.set("release.api.fix", "; ".join(fixes), SOURCE)
        facts.set(
            "release.api.model_code_only",
            all(model_only),
            SOURCE,
            "every call found lacking is in vLLM's per-model code (models/, "
            "model_executor/models/): it fails only when that model is served",
        )
        return {line.split(" ", 1)[0] for line in lacking}
    if not judged:
        why = "; ".join(unknown) or "no companion package that vLLM calls has a known version"
        for path in PATHS:
            facts.mark_missing(path, why)
        return set()
    # as for the requirements (ENV102): the companions of known version are judged; one of
    # unknown version can give no finding, and the detail says which were not judged
    facts.set(
        "release.api.missing",
        [],
        SOURCE,
        f"every name and keyword vLLM {release} uses is in the companion versions known"
        + (f" (not judged: {'; '.join(unknown)})" if unknown else ""),
    )
    facts.mark_missing("release.api.fix", "nothing to fix")
    facts.mark_missing("release.api.model_code_only", "nothing is missing")
    return set()


def _judge(
    release: str, dist: str, version: str, used: dict[str, Any]
) -> list[tuple[str, bool]] | None:
    """What ``dist`` at ``version`` lacks of ``used``, each with whether every call is in
    one model's code (None: the version was not read)."""
    from vllm_doctor.knowledge import stack

    found, covered = stack.covered_version(dist, version)
    if found is None:
        return None
    reference = reference_version(release, dist, found.releases)
    if reference is None:
        # no version the release was built against (LMCache: imported, never required, with
        # connector code for several LMCache generations side by side): not judged
        return None
    keys = found.at(covered)
    ref_keys = found.at(reference)
    out = []
    for key, use in sorted(used.items()):
        absent = _absent(keys.get(f"api:{key}"), use.get("keywords") or [])
        if absent is None or (absent == ["*"] and use.get("guarded")):
            continue  # a guarded name falls back when missing; its keywords still count
        # what the release's own pin (or lowest allowed version) lacks too, the release reaches
        # only behind a version or feature test (`if self._combine_supports_output`) or on a
        # path its pin never ran: not a matter of the installed version
        at_ref = _absent(ref_keys.get(f"api:{key}"), use.get("keywords") or []) or []
        absent = [k for k in absent if k not in at_ref]
        if not absent:
            continue
        name = key.replace(":", ".")
        have = provides(found, key, absent)
        files = use.get("files") or []
        where = ", ".join(f"vllm/{f}" for f in files)
        what = (
            f"has no {name}" if absent == ["*"] else f"{name} takes no keyword {', '.join(absent)}"
        )
        has = "has it" if absent == ["*"] else "accepts it"
        out.append(
            (
                f"{dist} {version}: {what}, which vLLM {release} uses ({where}); "
                + (f"{dist} {have} {has}" if have else f"no {dist} version read provides it"),
                bool(files) and all(f.startswith(MODEL_CODE) for f in files),
            )
        )
    return out


def reference_version(release: str, dist: str, versions: list[str]) -> str | None:
    """The companion version the release was built against: its pin (``==X``), else the
    lowest read version its requirement allows; None when it names no version of it."""
    from vllm_doctor import knowledge

    requirement = knowledge.load("dependencies").get(dist, release)
    spec = requirement.value.get("spec") if requirement and requirement.value else None
    if not spec:
        return None
    if spec.startswith("==") and "," not in spec:
        return spec[2:] if spec[2:] in versions else None
    allowed = [v for v in versions if _inside(spec, v)]
    return allowed[0] if allowed else None


def _absent(api: dict[str, Any] | None, keywords: list[str]) -> list[str] | None:
    """``["*"]`` when the name is missing, the keywords it does not accept, or None."""
    if api is None:
        return None
    if api.get("missing"):
        return ["*"]
    if "params" not in api or api.get("kwargs"):
        return None
    lacking = [k for k in keywords if k not in api["params"]]
    return lacking or None


def provides(table: Any, key: str, keywords: list[str]) -> str:
    """The versions of the companion whose code has the name and accepts the keywords, as
    ranges ("0.6.12–0.7.2.post1"); "" when none."""
    wanted = [k for k in keywords if k != "*"]
    good = []
    for version in table.releases:
        span = table.get(f"api:{key}", version)
        api = span.value if span is not None else None
        if api is None or api.get("missing"):
            good.append(False)
            continue
        params = api.get("params")
        good.append(params is None or api.get("kwargs") or all(k in params for k in wanted))
    return ranges(table.releases, good)


def ranges(versions: list[str], good: list[bool]) -> str:
    out: list[str] = []
    start: int | None = None
    for index, ok in enumerate([*good, False]):
        if ok and start is None:
            start = index
        elif not ok and start is not None:
            first, last = versions[start], versions[index - 1]
            out.append(first if first == last else f"{first}–{last}")
            start = None
    return ", ".join(out)


def _fix(release: str, dist: str, used: dict[str, Any]) -> str:
    """The install that gives vLLM the API: the release's pin, else the newest version read
    inside its requirement that has every name and keyword the release uses."""
    from vllm_doctor import knowledge
    from vllm_doctor.knowledge import stack

    requirement = knowledge.load("dependencies").get(dist, release)
    spec = requirement.value.get("spec") if requirement and requirement.value else None
    if spec and spec.startswith("==") and "," not in spec:
        return f"pip install '{dist}{spec}' (vLLM {release}'s pin)"
    found = stack.table(dist)
    if found is not None:
        for version in reversed(found.releases):
            keys = found.at(version)
            if _inside(spec, version) and all(
                _absent(keys.get(f"api:{k}"), u.get("keywords") or []) in (None, ["*"])
                if u.get("guarded")
                else _absent(keys.get(f"api:{k}"), u.get("keywords") or []) is None
                for k, u in used.items()
            ):
                return f"pip install '{dist}=={version}'" + (
                    f" (inside vLLM {release}'s requirement {dist}{spec})" if spec else ""
                )
    return f"pip install '{dist}{spec}'" if spec else f"pip install -U {dist}"


def _inside(spec: str | None, version: str) -> bool:
    if not spec:
        return True
    from vllm_doctor.version_specs import admits

    return admits(spec, version) is True
