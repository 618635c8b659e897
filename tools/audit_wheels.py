#!/usr/bin/env python3
"""Re-check every rule's release ranges and source fingerprints against real vLLM wheels.

For each release wheel in a cache directory the script reads the files of the ``vllm``
package straight out of the zip (no install, no import) and, for every rule under ``rules/``
that has fingerprints, decides the fix state the way ``vllm_doctor.engine.fixstate`` does:

* the first fingerprint whose ``path`` glob matches a file in the wheel decides: its
  ``pattern`` found in one of those files means ``means`` (fixed / affected), not found
  means the opposite;
* when no fingerprint's glob matches a file, the result is "absent" (the engine then falls
  back to the release ranges).

That state is compared with the rule's ``affected.ranges`` for the release. A fingerprint
that says "affected" where the ranges say fixed (or the reverse) is a mismatch: the script
exits 1. "absent" where the ranges say affected is reported as a warning (the fingerprint
cannot confirm the range; ``--strict`` turns it into a failure).

It also counts, per release, the files of the whole package (text files) that match each
fingerprint pattern outside the fingerprint's own path: a pattern that shows up elsewhere
is not specific to the fix.

    python tools/audit_wheels.py /work/wheels
    python tools/audit_wheels.py CACHE --download --min-version 0.10.0   # fetch missing wheels
    python tools/audit_wheels.py CACHE --markdown docs/wheel-audit.md

Exit codes: 0 every fingerprint agrees with the ranges, 1 mismatches (or warnings under
``--strict``), 2 bad usage (no wheels, unreadable rules, failed download).
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import zipfile
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import yaml
from packaging.version import InvalidVersion, Version

from vllm_doctor.engine.fixstate import in_ranges
from vllm_doctor.engine.loader import rule_files
from vllm_doctor.engine.rule import VersionRange

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tools/: the shared wheel reader
from wheelsrc import wheel_version

REPO = Path(__file__).resolve().parent.parent
PACKAGE = "vllm"
# Files read when counting pattern hits across the whole package (the .so files are skipped).
TEXT_SUFFIXES = {
    ".py",
    ".pyi",
    ".txt",
    ".json",
    ".yaml",
    ".yml",
    ".jinja",
    ".md",
    ".toml",
    ".cfg",
    ".ini",
    ".cu",
    ".cuh",
    ".h",
    ".cpp",
}
MAX_TEXT_BYTES = 4 << 20

FIXED, AFFECTED, ABSENT = "fixed", "affected", "absent"


class AuditError(Exception):
    """Bad input (exit 2)."""


# -- rules -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class AuditFingerprint:
    path: str  # glob relative to the vllm package
    pattern: str
    means: str  # fixed | affected


@dataclass(frozen=True)
class AuditRule:
    code: str
    file: str
    ranges: tuple[tuple[str, str | None], ...] | None  # (introduced, fixed)
    fingerprints: tuple[AuditFingerprint, ...]


def load_rules(
    rules_dir: Path, select: list[str] | None = None
) -> tuple[list[AuditRule], list[str]]:
    """Rules with their ranges and fingerprints, read with yaml.safe_load; plus problems."""
    if not rules_dir.is_dir():
        raise AuditError(f"{rules_dir}: rule directory does not exist")
    rules, problems = [], []
    for path in rule_files(rules_dir):
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as err:
            problems.append(f"{path}: cannot read: {str(err).splitlines()[0]}")
            continue
        if not isinstance(data, dict) or not isinstance(data.get("code"), str):
            problems.append(f"{path}: not a rule (no `code`)")
            continue
        code = data["code"]
        if select and not any(code.startswith(p.strip().upper()) for p in select if p.strip()):
            continue
        affected = data.get("affected") or {}
        if not isinstance(affected, dict):
            problems.append(f"{path}: affected: must be a mapping")
            continue
        ranges = None
        if affected.get("ranges") is not None:
            ranges = []
            for i, item in enumerate(affected["ranges"] or []):
                introduced, fixed = None, None
                for event in (item or {}).get("events") or []:
                    if isinstance(event, dict) and "introduced" in event:
                        introduced = str(event["introduced"])
                    elif isinstance(event, dict) and "fixed" in event:
                        fixed = str(event["fixed"])
                if introduced is None:
                    problems.append(f"{path}: affected.ranges[{i}]: no `introduced` event")
                    continue
                try:
                    for v in (introduced, fixed):
                        if v not in (None, "0"):
                            Version(v)
                except InvalidVersion as err:
                    problems.append(f"{path}: affected.ranges[{i}]: {err}")
                    continue
                ranges.append((introduced, fixed))
            ranges = tuple(ranges)
        fps = []
        for i, fp in enumerate(affected.get("fingerprints") or []):
            try:
                fps.append(
                    AuditFingerprint(
                        str(fp["path"]).removeprefix(f"{PACKAGE}/"),
                        str(fp["pattern"]),
                        str(fp["means"]),
                    )
                )
                re.compile(fps[-1].pattern, re.MULTILINE)
                if fps[-1].means not in (FIXED, AFFECTED):
                    raise ValueError(f"means {fps[-1].means!r}")
            except (KeyError, TypeError, ValueError, re.error) as err:
                problems.append(f"{path}: affected.fingerprints[{i}]: {err}")
                fps = []
                break
        rules.append(
            AuditRule(
                code,
                str(
                    path.relative_to(rules_dir.parent) if rules_dir.parent in path.parents else path
                ),
                ranges,
                tuple(fps),
            )
        )
    return sorted(rules, key=lambda r: r.code), problems


def range_verdict(version: Version, ranges: tuple[tuple[str, str | None], ...]) -> str:
    """What the ranges say for a release (engine.fixstate.in_ranges decides, as in `check`)."""
    inside, _ = in_ranges(version, tuple(VersionRange(i, f) for i, f in ranges))
    return AFFECTED if inside else FIXED


# -- globs -----------------------------------------------------------------------------------


def _segment_regex(segment: str) -> str:
    out, i = [], 0
    while i < len(segment):
        c = segment[i]
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = segment.find("]", i + 1)
            if j == -1:
                out.append(re.escape(c))
            else:
                body = segment[i + 1 : j]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append(f"[{body}]")
                i = j
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A regex for a pathlib-style glob over POSIX relative paths (``**`` = any directories)."""
    parts = [p for p in PurePosixPath(pattern).parts if p not in ("", ".")]
    regex = ""
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if part == "**":
            regex += "(?:[^/]+/)*" if not last else "(?:[^/]+/)*[^/]+"
        else:
            regex += _segment_regex(part) + ("" if last else "/")
    return re.compile(rf"\A{regex}\Z")


# -- wheels ----------------------------------------------------------------------------------


def find_wheels(cache: Path) -> dict[Version, Path]:
    """One wheel per release version found in the cache (the Python files do not differ)."""
    if not cache.is_dir():
        raise AuditError(f"{cache}: wheel cache directory does not exist")
    found: dict[Version, Path] = {}
    for path in sorted(cache.glob(f"{PACKAGE}-*.whl")):
        version = wheel_version(path)
        if version is not None and version not in found:
            found[version] = path
    return dict(sorted(found.items()))


def _pip(*args: str) -> list[str]:
    return [sys.executable, "-m", "pip", *args]


def available_releases(min_version: Version) -> list[Version]:
    """Releases of vLLM on the package index (one `pip index versions vllm` query)."""
    proc = subprocess.run(
        _pip("index", "versions", PACKAGE), capture_output=True, text=True, timeout=120
    )
    match = re.search(r"Available versions:\s*(.+)", proc.stdout)
    if proc.returncode != 0 or not match:
        raise AuditError(f"pip index versions {PACKAGE} failed: {proc.stderr.strip()[-300:]}")
    versions = []
    for text in match.group(1).split(","):
        try:
            v = Version(text.strip())
        except InvalidVersion:
            continue
        if not (v.is_prerelease or v.is_devrelease) and v >= min_version:
            versions.append(v)
    return sorted(versions)


def download(cache: Path, versions: Iterable[Version]) -> list[str]:
    """Fetch the missing release wheels with `pip download vllm==X --no-deps`; returns errors."""
    errors = []
    for version in versions:
        cmd = _pip(
            "download",
            f"{PACKAGE}=={version}",
            "--no-deps",
            "--only-binary=:all:",
            "-q",
            "-d",
            str(cache),
        )
        print(f"downloading {PACKAGE}=={version} ...", file=sys.stderr)
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            errors.append(f"{version}: {proc.stderr.strip().splitlines()[-1:] or ['failed']}")
    return errors


@dataclass
class FingerprintHit:
    state: str  # fixed | affected | absent
    evidence: str  # file (and line) that decided, or why absent
    index: int | None  # which fingerprint decided


@dataclass
class WheelResult:
    version: str
    wheel: str
    states: dict[str, FingerprintHit] = field(default_factory=dict)
    # rule code -> fingerprint index -> files outside the fingerprint path that match
    outside: dict[str, dict[int, list[str]]] = field(default_factory=dict)
    error: str | None = None


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def audit_wheel(wheel: Path, version: str, rules: list[AuditRule]) -> WheelResult:
    """Fingerprint states and outside-path hits of every rule for one wheel."""
    result = WheelResult(version, wheel.name)
    prefix = f"{PACKAGE}/"
    try:
        archive = zipfile.ZipFile(wheel)
    except (OSError, zipfile.BadZipFile) as err:
        result.error = f"cannot open {wheel.name}: {err}"
        return result
    with archive:
        infos = {
            i.filename[len(prefix) :]: i
            for i in archive.infolist()
            if i.filename.startswith(prefix) and not i.is_dir()
        }
        cache: dict[str, str] = {}

        def text(rel: str) -> str:
            if rel not in cache:
                cache[rel] = _decode(archive.read(infos[rel]))
            return cache[rel]

        compiled = {
            (r.code, i): (glob_regex(fp.path), re.compile(fp.pattern, re.MULTILINE))
            for r in rules
            for i, fp in enumerate(r.fingerprints)
        }
        names = sorted(infos)
        for rule in rules:
            hit = FingerprintHit(ABSENT, "no file matches any fingerprint path", None)
            for i, fp in enumerate(rule.fingerprints):
                path_re, pattern = compiled[(rule.code, i)]
                files = [n for n in names if path_re.match(n)]
                if not files:
                    continue
                found = None
                for name in files:
                    match = pattern.search(text(name))
                    if match:
                        line = text(name).count("\n", 0, match.start()) + 1
                        found = f"{prefix}{name}:{line}"
                        break
                if found:
                    state = FIXED if fp.means == FIXED else AFFECTED
                    hit = FingerprintHit(state, f"{found} has the pattern", i)
                else:
                    state = AFFECTED if fp.means == FIXED else FIXED
                    hit = FingerprintHit(state, f"{prefix}{files[0]} lacks the pattern", i)
                break
            result.states[rule.code] = hit

        text_files = [
            n
            for n in names
            if PurePosixPath(n).suffix in TEXT_SUFFIXES and infos[n].file_size <= MAX_TEXT_BYTES
        ]
        for rule in rules:
            per_fp: dict[int, list[str]] = {}
            for i, _fp in enumerate(rule.fingerprints):
                path_re, pattern = compiled[(rule.code, i)]
                per_fp[i] = [
                    f"{prefix}{n}"
                    for n in text_files
                    if not path_re.match(n) and pattern.search(text(n))
                ]
            result.outside[rule.code] = per_fp
    return result


# -- the audit -------------------------------------------------------------------------------


@dataclass
class Cell:
    state: str
    expected: str | None  # what the ranges say (None: the rule has no ranges)
    status: str  # ok | mismatch | warn | info
    evidence: str


def judge(hit: FingerprintHit, expected: str | None) -> Cell:
    if expected is None:
        return Cell(hit.state, None, "info", hit.evidence)
    if hit.state == ABSENT:
        status = "warn" if expected == AFFECTED else "ok"
    else:
        status = "ok" if hit.state == expected else "mismatch"
    return Cell(hit.state, expected, status, hit.evidence)


@dataclass
class Audit:
    versions: list[str]
    rules: list[AuditRule]
    cells: dict[tuple[str, str], Cell]  # (version, code) -> cell
    outside: dict[tuple[str, str], dict[int, list[str]]]
    errors: list[str]
    unchecked: list[str] = field(default_factory=list)  # rules with ranges, no fingerprints

    @property
    def mismatches(self) -> list[tuple[str, str, Cell]]:
        return [(v, c, cell) for (v, c), cell in self.cells.items() if cell.status == "mismatch"]

    @property
    def warnings(self) -> list[tuple[str, str, Cell]]:
        return [(v, c, cell) for (v, c), cell in self.cells.items() if cell.status == "warn"]


def run_audit(wheels: dict[Version, Path], rules: list[AuditRule], jobs: int = 1) -> Audit:
    checked = [r for r in rules if r.fingerprints]
    items = list(wheels.items())
    if jobs > 1 and len(items) > 1:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            results = list(
                pool.map(
                    audit_wheel,
                    [p for _, p in items],
                    [str(v) for v, _ in items],
                    [checked] * len(items),
                )
            )
    else:
        results = [audit_wheel(p, str(v), checked) for v, p in items]
    cells, outside, errors = {}, {}, []
    for (version, _path), result in zip(items, results, strict=True):
        if result.error:
            errors.append(result.error)
            continue
        for rule in checked:
            expected = range_verdict(version, rule.ranges) if rule.ranges is not None else None
            cells[(str(version), rule.code)] = judge(result.states[rule.code], expected)
            outside[(str(version), rule.code)] = result.outside.get(rule.code, {})
    unchecked = [r.code for r in rules if not r.fingerprints and r.ranges is not None]
    return Audit([str(v) for v in wheels], checked, cells, outside, errors, unchecked)


# -- output ----------------------------------------------------------------------------------

MARK = {"ok": "", "mismatch": " ✗", "warn": " ?", "info": ""}


def cell_text(cell: Cell | None) -> str:
    if cell is None:
        return "-"
    return f"{cell.state}{MARK[cell.status]}"


def ranges_text(rule: AuditRule) -> str:
    if rule.ranges is None:
        return "no ranges"
    return "; ".join(f"[{i}, {f or '∞'})" for i, f in rule.ranges)


def fingerprint_text(rule: AuditRule) -> list[str]:
    return [f"{i}: {fp.path} /{fp.pattern}/ → {fp.means}" for i, fp in enumerate(rule.fingerprints)]


def outside_summary(audit: Audit) -> list[tuple[str, int, list[str], list[str]]]:
    """(rule, fingerprint index, releases with outside hits, example files) for each pattern."""
    rows = []
    for rule in audit.rules:
        for i in range(len(rule.fingerprints)):
            releases, examples = [], []
            for version in audit.versions:
                files = audit.outside.get((version, rule.code), {}).get(i, [])
                if files:
                    releases.append(f"{version} ({len(files)})")
                    examples.extend(f for f in files if f not in examples)
            rows.append((rule.code, i, releases, examples))
    return rows


def render_text(audit: Audit) -> str:
    codes = [r.code for r in audit.rules]
    width = max([len("release")] + [len(v) for v in audit.versions])
    col = max([10] + [len(c) for c in codes])
    lines = ["release".ljust(width) + "  " + "  ".join(c.ljust(col) for c in codes)]
    for version in audit.versions:
        row = [cell_text(audit.cells.get((version, c))).ljust(col) for c in codes]
        lines.append(version.ljust(width) + "  " + "  ".join(row))
    lines.append("")
    lines.append(
        "✗ the fingerprint contradicts the rule's ranges; ? no fingerprint file in a "
        "release the ranges call affected"
    )
    for rule in audit.rules:
        lines.append(
            f"{rule.code}: ranges {ranges_text(rule)}; " + "; ".join(fingerprint_text(rule))
        )
    lines.append("")
    lines.append("pattern matches outside the fingerprint path (files per release):")
    for code, index, releases, examples in outside_summary(audit):
        where = ", ".join(releases) if releases else "none"
        lines.append(f"  {code}#{index}: {where}")
        for example in examples[:5]:
            lines.append(f"      {example}")
    if audit.unchecked:
        lines.append("ranges without a fingerprint (not checked): " + ", ".join(audit.unchecked))
    for version, code, cell in audit.mismatches:
        lines.append(
            f"MISMATCH {code} {version}: fingerprint says {cell.state}, ranges say "
            f"{cell.expected} ({cell.evidence})"
        )
    for version, code, _cell in audit.warnings:
        lines.append(f"warning {code} {version}: ranges say affected, no fingerprint file")
    for error in audit.errors:
        lines.append(f"error: {error}")
    return "\n".join(lines)


def render_markdown(audit: Audit, command: str, problems: list[str]) -> str:
    codes = [r.code for r in audit.rules]
    out = [
        "# Wheel audit: rule ranges and fingerprints against the vLLM release wheels",
        "",
        "Generated by `tools/audit_wheels.py`; do not edit by hand. Command:",
        "",
        "```",
        command,
        "```",
        "",
        f"{len(audit.versions)} release wheels ({audit.versions[0] if audit.versions else '-'} "
        f"to {audit.versions[-1] if audit.versions else '-'}), {len(audit.rules)} rules with "
        "fingerprints. Each cell is what the rule's fingerprints say for that release "
        "(`fixed`, `affected`, or `absent` when no file matches the fingerprint path, in "
        "which case the engine uses the ranges). ✗ marks a fingerprint that contradicts the "
        "rule's `affected.ranges`; ? marks a release the ranges call affected where no "
        "fingerprint file exists.",
        "",
        f"Result: mismatches **{len(audit.mismatches)}**, warnings {len(audit.warnings)}.",
        "",
        "| release | " + " | ".join(codes) + " |",
        "|---|" + "---|" * len(codes),
    ]
    for version in audit.versions:
        out.append(
            f"| {version} | "
            + " | ".join(cell_text(audit.cells.get((version, c))) for c in codes)
            + " |"
        )
    out += ["", "## Rules", "", "| rule | ranges | fingerprints |", "|---|---|---|"]
    for rule in audit.rules:
        fps = "<br>".join(f"`{t}`".replace("|", "\\|") for t in fingerprint_text(rule))
        out.append(f"| {rule.code} | {ranges_text(rule)} | {fps} |")
    out += [
        "",
        "## Pattern matches outside the fingerprint path",
        "",
        "Files of the whole package (text files) that match a fingerprint pattern but lie "
        "outside its path, per release. Anything here means the pattern is not specific "
        "to the fixed file.",
        "",
        "| rule#fingerprint | releases (files) | files |",
        "|---|---|---|",
    ]
    for code, index, releases, examples in outside_summary(audit):
        shown = "<br>".join(f"`{e}`" for e in examples[:6]) + (
            f"<br>… {len(examples) - 6} more" if len(examples) > 6 else ""
        )
        out.append(
            f"| {code}#{index} | {', '.join(releases) if releases else 'none'} | {shown or '-'} |"
        )
    if audit.unchecked:
        out += [
            "",
            "Rules with release ranges but no fingerprint (their ranges are not checked "
            "here): " + ", ".join(audit.unchecked) + ".",
        ]
    if audit.mismatches or audit.warnings or audit.errors or problems:
        out += ["", "## Findings", ""]
        for version, code, cell in audit.mismatches:
            out.append(
                f"- ✗ {code} {version}: fingerprint says {cell.state}, ranges say "
                f"{cell.expected} ({cell.evidence})"
            )
        for version, code, _cell in audit.warnings:
            out.append(f"- ? {code} {version}: ranges say affected, no fingerprint file")
        for error in audit.errors:
            out.append(f"- error: {error}")
        for problem in problems:
            out.append(f"- rule file problem: {problem}")
    return "\n".join(out) + "\n"


# -- command line ----------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="audit_wheels.py",
        description="Check every rule's ranges and fingerprints against vLLM release wheels.",
    )
    parser.add_argument("cache", type=Path, help="directory holding vllm-*.whl release wheels")
    parser.add_argument(
        "--rules-dir",
        type=Path,
        default=REPO / "rules",
        help="rule directory (default: the repository's rules/)",
    )
    parser.add_argument(
        "--select", default="", help="only rules with these code prefixes (comma-separated)"
    )
    parser.add_argument(
        "--versions",
        default="",
        help="only these releases (comma-separated); with --download, fetch them",
    )
    parser.add_argument(
        "--min-version",
        default=None,
        help="lowest release to audit (default: every wheel in the cache) and "
        "to download (default 0.10.0)",
    )
    parser.add_argument(
        "--download",
        action="store_true",
        help="download missing release wheels with `pip download vllm==X --no-deps`",
    )
    parser.add_argument(
        "--markdown", type=Path, help="also write the report as markdown to this file"
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="fail (exit 1) on warnings too (ranges affected, fingerprint file absent)",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=min(4, os.cpu_count() or 1),
        help="wheels read in parallel (default: up to 4)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        min_version = Version(args.min_version) if args.min_version else None
        wanted = [Version(v.strip()) for v in args.versions.split(",") if v.strip()]
    except InvalidVersion as err:
        print(f"audit_wheels: {err}", file=sys.stderr)
        return 2
    try:
        rules, problems = load_rules(args.rules_dir, [s for s in args.select.split(",") if s])
        for problem in problems:
            print(f"warning: {problem}", file=sys.stderr)
        if args.download:
            args.cache.mkdir(parents=True, exist_ok=True)
            targets = wanted or available_releases(min_version or Version("0.10.0"))
            have = find_wheels(args.cache)
            errors = download(args.cache, [v for v in targets if v not in have])
            if errors:
                for error in errors:
                    print(f"audit_wheels: download failed: {error}", file=sys.stderr)
                return 2
        wheels = {
            v: p
            for v, p in find_wheels(args.cache).items()
            if (min_version is None or v >= min_version) and (not wanted or v in wanted)
        }
        missing = [str(v) for v in wanted if v not in wheels]
        if missing:
            raise AuditError(f"no wheel for {', '.join(missing)} in {args.cache} (use --download)")
        if not wheels:
            raise AuditError(f"{args.cache}: no vllm release wheels found (use --download)")
    except AuditError as err:
        print(f"audit_wheels: {err}", file=sys.stderr)
        return 2

    audit = run_audit(wheels, rules, jobs=max(1, args.jobs))
    print(render_text(audit))
    if args.markdown:
        shown = (
            ["python", "tools/audit_wheels.py", *sys.argv[1:]]
            if argv is None
            else ["python", "tools/audit_wheels.py", *argv]
        )
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(
            render_markdown(audit, shlex.join(shown), problems), encoding="utf-8"
        )
    failed = bool(audit.mismatches or audit.errors or (args.strict and audit.warnings))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
