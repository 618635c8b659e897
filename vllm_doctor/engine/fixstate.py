"""Is the installed (or reported) vLLM affected by a rule's bug?

Order of trust:
1. a source fingerprint read from the installed vllm package (exact for nightlies, forks,
   backports) — the files are read as text, never imported;
2. the rule's release ranges, when the version is a release;
3. a dev/nightly version known only by its string: the release it descends from and what the
   next release brought may both be in it, so it counts as affected when that span overlaps an
   affected range — at lower confidence, because the build's commit decides.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from packaging.version import Version

from vllm_doctor.engine.conditions import parse_version
from vllm_doctor.engine.rule import Fingerprint, Rule, VersionRange
from vllm_doctor.facts.model import Facts, Source

AFFECTED, FIXED, UNKNOWN, UNVERSIONED = "affected", "fixed", "unknown", "unversioned"


@dataclass(frozen=True)
class FixState:
    """Whether the judged vLLM is affected by a rule, and how that was decided (the installed
    source's fingerprints, the rule's release ranges, a development build's version)."""

    state: str  # affected | fixed | unknown | unversioned
    method: str  # fingerprint | release-range | dev-version | none
    detail: str
    lowers_confidence: bool = False

    def to_dict(self) -> dict[str, object]:
        return {
            "state": self.state,
            "method": self.method,
            "detail": self.detail,
            "lowers_confidence": self.lowers_confidence,
        }


# A fingerprint names a source file or two; a glob like `**/*` must not read a whole package
# (shared libraries of a GiB included): at most this many files, each at most this large.
MAX_FINGERPRINT_FILES = 200
MAX_FINGERPRINT_FILE_BYTES = 4 << 20


@lru_cache(maxsize=4096)
def _read(path: str) -> str | None:
    """A source file's text, or None when it cannot be read or is too large to be source."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_FINGERPRINT_FILE_BYTES + 1)
    except OSError:
        return None
    if len(data) > MAX_FINGERPRINT_FILE_BYTES:
        return None
    return data.decode("utf-8", errors="replace")


def check_fingerprint(fp: Fingerprint, package_dir: Path) -> tuple[str, str] | None:
    """(state, evidence) from one fingerprint, or None when no file matches its path."""
    # the first matches of the glob only: it is lazy, so a huge tree is never walked whole
    matched = itertools.islice(package_dir.glob(fp.path), MAX_FINGERPRINT_FILES * 4)
    files = sorted(p for p in matched if p.is_file())[:MAX_FINGERPRINT_FILES]
    if not files:
        return None
    read = []
    for file in files:
        text = _read(str(file))
        if text is None:
            continue
        read.append(file)
        match = fp.pattern.search(text)
        if match:
            line = text.count("\n", 0, match.start()) + 1
            where = f"{file.relative_to(package_dir.parent)}:{line}"
            state = FIXED if fp.means == "fixed" else AFFECTED
            return state, f"{where} has /{fp.pattern.pattern}/"
    if not read:  # nothing readable as source: the fingerprint decides nothing
        return None
    state = AFFECTED if fp.means == "fixed" else FIXED
    rel = ", ".join(str(f.relative_to(package_dir.parent)) for f in read[:3])
    return state, f"{rel} lacks /{fp.pattern.pattern}/"


def _bound(text: str) -> Version:
    """A range's release (the loader has checked that it is a version)."""
    version = parse_version(text)
    if version is None:
        raise ValueError(f"not a version: {text!r}")
    return version


def in_ranges(version: Version, ranges: tuple[VersionRange, ...]) -> tuple[bool, str]:
    """Whether a release lies in one of the affected ranges, and the ranges in words."""
    for rng in ranges:
        low_ok = rng.introduced == "0" or version >= _bound(rng.introduced)
        high_ok = rng.fixed is None or version < _bound(rng.fixed)
        if low_ok and high_ok:
            upper = f", fixed in {rng.fixed}" if rng.fixed else ", no fixed release yet"
            return True, f"introduced in {rng.introduced}{upper}"
    spans = "; ".join(f"{r.introduced} ≤ v < {r.fixed or '∞'}" for r in ranges)
    return False, f"affected releases ({spans})"


def fix_state(rule: Rule, facts: Facts, vllm_tree: Path | None = None) -> FixState:
    """Decide whether the vLLM in ``facts`` carries the rule's bug."""
    if not rule.versioned:
        return FixState(UNVERSIONED, "none", "does not depend on the vLLM version")

    version_fact = facts.get("vllm.version")
    what_if = version_fact is not None and version_fact.source == Source.USER
    # (1) fingerprints: the installed tree (or a test's fake tree), unless asked "what if".
    tree = vllm_tree
    if tree is None and not what_if:
        location = facts.value("vllm.location")
        tree = Path(location) if location else None
    if tree is not None and tree.is_dir() and rule.fingerprints:
        for fp in rule.fingerprints:
            found = check_fingerprint(fp, tree)
            if found is not None:
                return FixState(found[0], "fingerprint", found[1])

    if rule.ranges is None:
        return FixState(
            UNKNOWN,
            "none",
            "only a source fingerprint decides this rule: run where vLLM is installed",
        )
    if version_fact is None:
        return FixState(UNKNOWN, "none", "the vLLM version is unknown")
    version = parse_version(str(version_fact.value))
    if version is None:
        return FixState(UNKNOWN, "none", f"cannot read vLLM version {version_fact.value!r}")

    # (2) a release: the ranges decide.
    if not (version.is_devrelease or version.is_prerelease):
        inside, why = in_ranges(version, rule.ranges)
        custom = f" (custom build +{version.local}: backports possible)" if version.local else ""
        why = why if inside else f"not in the {why}"
        return FixState(
            AFFECTED if inside else FIXED,
            "release-range",
            f"vLLM {version}: {why}{custom}",
            lowers_confidence=bool(version.local),
        )

    # (3) a dev build known by its string: it holds everything up to the release it descends
    # from, and possibly some of what later releases brought (knowledge.match_release's
    # candidates). It is affected if that span [base, newest candidate] overlaps an affected
    # range — at lower confidence either way (engine/over_releases.judge_dev_build then
    # judges the rule once per candidate release).
    base = parse_version(str(facts.value("vllm.base_release") or "")) or version
    upper = max(
        _newest_resembled(str(version)) or Version(f"{base.major}.{base.minor + 1}.0"),
        Version(version.base_version),
    )
    for rng in rule.ranges:
        introduced = Version("0") if rng.introduced == "0" else _bound(rng.introduced)
        fixed = _bound(rng.fixed) if rng.fixed else None
        if introduced <= upper and (fixed is None or fixed > base):
            maybe = []
            if introduced > base:
                maybe.append(f"the bug came in {rng.introduced}, after {base}")
            if fixed is not None and fixed <= upper:
                maybe.append(f"the fix came in {rng.fixed}")
            hedge = f" ({'; '.join(maybe)}: the build may or may not carry it)" if maybe else ""
            return FixState(
                AFFECTED,
                "dev-version",
                f"dev build {version} descends from {base}; affected releases "
                f"{rng.introduced} ≤ v < {rng.fixed or '∞'}{hedge} — a source fingerprint "
                "decides exactly where vLLM is installed",
                lowers_confidence=True,
            )
    _, why = in_ranges(base, rule.ranges)
    return FixState(
        FIXED,
        "dev-version",
        f"dev build {version} descends from {base}, outside the {why}",
        lowers_confidence=True,
    )


def _newest_resembled(version: str) -> Version | None:
    """The newest covered release a dev build may resemble (knowledge.match_release): a
    nightly may already carry a fix or a bug that only that release ships."""
    from vllm_doctor import knowledge

    match = knowledge.match_release(version, tuple(knowledge.covered_releases()))
    return Version(match.upper) if match.upper else None
