"""Load and validate rule files: every mistake is reported as ``file:field: problem``."""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from vllm_doctor.bounds import read_text
from vllm_doctor.compact import digest
from vllm_doctor.engine.conditions import ConditionError, compile_condition
from vllm_doctor.engine.rule import (
    CATEGORIES,
    COMPUTABLE_OPTIONS,
    CONFIDENCES,
    DETAIL_SECTIONS,
    FIX_STATUSES,
    PHASES,
    SEVERITIES,
    STATUSES,
    TITLE_PLACEHOLDER,
    Fingerprint,
    Fix,
    LazyPattern,
    LazySignature,
    Rule,
    VersionRange,
    Workaround,
)
from vllm_doctor.errors import InputError

CODE_RE = re.compile(rf"^({'|'.join(CATEGORIES)})\d{{3}}$")
SLUG_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
ALLOWED_KEYS = {
    "code",
    "slug",
    "status",
    "severity",
    "confidence",
    "summary",
    "phase",
    "affected",
    "when",
    "signatures",
    "fix",
    "workarounds",
    "probe",
    "references",
    "aliases",
    "related",
    "details",
    "defers_to",
    "warn_when",
    "log_only",
    "reader",
    "no_real_input",
}
REQUIRED_KEYS = (
    "code",
    "slug",
    "status",
    "severity",
    "confidence",
    "summary",
    "phase",
    "when",
    "references",
    "details",
)


def default_rules_dir() -> Path:
    """The shipped rule base: the top-level rules/ folder (the package vllm_doctor.rules)."""
    try:
        # the rules/ folder, mapped into the package by setuptools (package-dir): no module
        # file for the type checker to find
        import vllm_doctor.rules as shipped  # type: ignore[import-not-found]
    except ImportError:  # run from a source tree without installing (PYTHONPATH=.)
        return Path(__file__).resolve().parents[2] / "rules"
    return Path(shipped.__file__).parent


class RuleFileError(InputError):
    """One or more problems in rule files; ``problems`` lists ``file:field: problem`` lines."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        head, _, rest = problems[0].partition(": ")
        super().__init__(head, rest + more)


@dataclass
class _Checker:
    file: str
    strict: bool = True  # compile every regex now (validation) or on first use (check)
    problems: list[str] = field(default_factory=list)

    def problem(self, where: str, text: str) -> None:
        self.problems.append(f"{self.file}:{where}: {text}")

    def string(
        self, data: dict[str, Any], key: str, choices: tuple[str, ...] | None = None
    ) -> str | None:
        value = data.get(key)
        if value is None:
            return None
        if not isinstance(value, str) or not value.strip():
            self.problem(key, "must be a non-empty string")
            return None
        if choices and value not in choices:
            self.problem(key, f"{value!r} is not one of {', '.join(choices)}")
            return None
        return value

    def string_list(self, data: dict[str, Any], key: str) -> tuple[str, ...]:
        value = data.get(key, [])
        if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
            self.problem(key, "must be a list of strings")
            return ()
        return tuple(value)

    def version(self, where: str, value: Any) -> str | None:
        text = str(value)
        if text == "0":
            return text
        try:
            Version(text)
        except InvalidVersion:
            self.problem(where, f"{value!r} is not a PEP 440 version")
            return None
        return text

    def regex(self, where: str, value: Any) -> LazyPattern | None:
        if not isinstance(value, str) or not value:
            self.problem(where, "must be a non-empty regex string")
            return None
        if not self.strict:
            return LazyPattern(value, f"{self.file}:{where}")
        from vllm_doctor.engine.linear import LinearRegexError, compile_linear

        try:
            return LazyPattern(value, f"{self.file}:{where}", compile_linear(value, multiline=True))
        except LinearRegexError as err:
            self.problem(where, str(err))
            return None

    def signature(self, where: str, value: Any) -> LazySignature | None:
        """A signature must run in linear time (engine.logmatch); checked when strict."""
        if not isinstance(value, str) or not value:
            self.problem(where, "must be a non-empty regex string")
            return None
        if not self.strict:
            return LazySignature(value, f"{self.file}:{where}")
        from vllm_doctor.engine.logmatch import SignatureError, compile_signature

        try:
            return LazySignature(value, f"{self.file}:{where}", compile_signature(value))
        except SignatureError as err:
            self.problem(where, str(err))
            return None


def _ranges(chk: _Checker, affected: dict[str, Any]) -> tuple[VersionRange, ...] | None:
    raw = affected.get("ranges")
    if raw is None:
        return None
    if not isinstance(raw, list) or not raw:
        chk.problem("affected.ranges", "must be a non-empty list")
        return None
    ranges = []
    for i, item in enumerate(raw):
        where = f"affected.ranges[{i}]"
        events = item.get("events") if isinstance(item, dict) else None
        if not isinstance(events, list) or not events:
            chk.problem(f"{where}.events", "must be a non-empty list of introduced/fixed events")
            continue
        introduced, fixed = None, None
        for j, event in enumerate(events):
            if not isinstance(event, dict) or len(event) != 1:
                chk.problem(f"{where}.events[{j}]", "must be {introduced: V} or {fixed: V}")
                continue
            ((kind, value),) = event.items()
            if kind == "introduced":
                introduced = chk.version(f"{where}.events[{j}].introduced", value)
            elif kind == "fixed":
                fixed = chk.version(f"{where}.events[{j}].fixed", value)
            else:
                chk.problem(f"{where}.events[{j}]", f"unknown event {kind!r}")
        if introduced is None:
            chk.problem(f"{where}.events", "needs an `introduced` event")
            continue
        if fixed is not None and introduced != "0" and Version(fixed) <= Version(introduced):
            chk.problem(f"{where}.events", f"fixed {fixed} is not after introduced {introduced}")
        ranges.append(VersionRange(introduced, fixed))
    return tuple(ranges)


def _fingerprints(chk: _Checker, affected: dict[str, Any]) -> tuple[Fingerprint, ...]:
    raw = affected.get("fingerprints", [])
    if not isinstance(raw, list):
        chk.problem("affected.fingerprints", "must be a list")
        return ()
    result = []
    for i, item in enumerate(raw):
        where = f"affected.fingerprints[{i}]"
        if not isinstance(item, dict):
            chk.problem(where, "must be a mapping with path, pattern, means")
            continue
        unknown = set(item) - {"path", "pattern", "means"}
        if unknown:
            chk.problem(where, f"unknown keys {sorted(unknown)}")
        path = item.get("path")
        if not isinstance(path, str) or not path or path.startswith("/") or ".." in path:
            chk.problem(f"{where}.path", "must be a relative glob inside the vllm package")
            continue
        pattern = chk.regex(f"{where}.pattern", item.get("pattern"))
        means = item.get("means")
        if means not in ("fixed", "affected"):
            chk.problem(f"{where}.means", "must be `fixed` or `affected`")
            continue
        if pattern is not None:
            result.append(Fingerprint(path.removeprefix("vllm/"), pattern, means))
    return tuple(result)


def _workarounds(chk: _Checker, raw: Any) -> tuple[Workaround, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        chk.problem("workarounds", "must be a list")
        return ()
    result = []
    for i, item in enumerate(raw):
        where = f"workarounds[{i}]"
        if not isinstance(item, dict) or not isinstance(item.get("title"), str):
            chk.problem(where, "needs a `title`")
            continue
        unknown = set(item) - {"title", "serve", "env", "cost"}
        if unknown:
            chk.problem(where, f"unknown keys {sorted(unknown)}")
        serve = item.get("serve") or {}
        env = item.get("env") or {}
        if not isinstance(serve, dict) or set(serve) - {"set", "remove", "compute"}:
            chk.problem(
                f"{where}.serve",
                "takes `set: {flag: value}`, `remove: [flag]` and `compute: [flag]`",
            )
            serve = {}
        compute = serve.get("compute") or []
        if not isinstance(compute, list) or set(map(str, compute)) - set(COMPUTABLE_OPTIONS):
            chk.problem(
                f"{where}.serve.compute",
                f"lists options the doctor computes: {', '.join(COMPUTABLE_OPTIONS)}",
            )
            compute = []
        from vllm_doctor.facts.schema import is_known_path

        texts = str(item.get("title", "")) + str(item.get("cost", ""))
        for path, _words in TITLE_PLACEHOLDER.findall(texts):
            if not is_known_path(path):
                chk.problem(where, f"names {{{path}}}, which is not a fact (docs/facts.md)")
        if not isinstance(env, dict) or set(env) - {"set", "unset"}:
            chk.problem(f"{where}.env", "takes `set: {NAME: value}` and `unset: [NAME]`")
            env = {}
        serve_set = serve.get("set") or {}
        env_set = env.get("set") or {}
        if not isinstance(serve_set, dict) or not isinstance(env_set, dict):
            chk.problem(where, "`set` must be a mapping")
            continue
        serve_remove = serve.get("remove") or []
        env_unset = env.get("unset") or []
        if not isinstance(serve_remove, list) or not isinstance(env_unset, list):
            chk.problem(where, "`remove`/`unset` must be lists")
            continue
        result.append(
            Workaround(
                title=item["title"],
                serve_set={str(k).lstrip("-"): v for k, v in serve_set.items()},
                serve_remove=tuple(str(x).lstrip("-") for x in serve_remove),
                env_set={str(k): str(v) for k, v in env_set.items()},
                env_unset=tuple(str(x) for x in env_unset),
                cost=str(item.get("cost", "")),
                serve_compute=tuple(str(x) for x in compute),
            )
        )
    return tuple(result)


def _fix(chk: _Checker, raw: Any) -> Fix | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        chk.problem("fix", "must be a mapping")
        return None
    unknown = set(raw) - {"status", "version", "pr", "commit", "note"}
    if unknown:
        chk.problem("fix", f"unknown keys {sorted(unknown)}")
    status = chk.string(raw, "status", FIX_STATUSES)
    version = chk.version("fix.version", raw["version"]) if raw.get("version") else None
    if status == "released" and not version:
        chk.problem("fix.version", "a released fix needs the release version")
    pr = raw.get("pr")
    if pr is not None and not isinstance(pr, int):
        chk.problem("fix.pr", "must be the pull-request number")
        pr = None
    return Fix(status or "none", version, pr, raw.get("commit"))


def parse_rule(data: Any, path: Path, strict: bool = True) -> tuple[Rule | None, list[str]]:
    """Validate one rule mapping; returns the rule (or None) and the problems found.

    ``strict=False`` leaves the signature and fingerprint regexes to be compiled on first use.
    """
    chk = _Checker(str(path), strict)
    if not isinstance(data, dict):
        chk.problem("(top)", "a rule file must be a YAML mapping")
        return None, chk.problems
    for key in sorted(set(data) - ALLOWED_KEYS):
        chk.problem(key, "unknown field")
    for key in REQUIRED_KEYS:
        if key not in data:
            chk.problem(key, "missing required field")
    code = chk.string(data, "code")
    if code and not CODE_RE.match(code):
        chk.problem(
            "code", f"{code!r} must be a category prefix ({', '.join(CATEGORIES)}) + 3 digits"
        )
    if code and path.name not in (f"{code}.yaml", f"{code}.yml"):
        chk.problem("code", f"{code!r} does not match the file name {path.name!r}")
    slug = chk.string(data, "slug")
    if slug and not SLUG_RE.match(slug):
        chk.problem("slug", "must be kebab-case")
    status = chk.string(data, "status", STATUSES)
    severity = chk.string(data, "severity", SEVERITIES)
    confidence = chk.string(data, "confidence", CONFIDENCES)
    summary = chk.string(data, "summary")
    phase = chk.string(data, "phase", PHASES)
    details = chk.string(data, "details") or ""
    for section in DETAIL_SECTIONS:
        if details and not re.search(rf"^#+\s*{re.escape(section)}\s*$", details, re.MULTILINE):
            chk.problem("details", f"missing section '## {section}'")
    when = None
    if "when" in data:
        try:
            when = compile_condition(data["when"])
        except ConditionError as err:
            chk.problem(err.field, err.problem)
    warn_when = None
    if "warn_when" in data:  # an applying finding is a warning where this holds
        try:
            warn_when = compile_condition(data["warn_when"])
        except ConditionError as err:
            chk.problem("warn_when." + err.field, err.problem)
    affected = data.get("affected")
    ranges = None
    fingerprints: tuple[Fingerprint, ...] = ()
    if affected is not None:
        if not isinstance(affected, dict) or set(affected) - {"ranges", "fingerprints"}:
            chk.problem("affected", "takes `ranges` and `fingerprints`")
        else:
            ranges = _ranges(chk, affected)
            fingerprints = _fingerprints(chk, affected)
    signatures_raw = data.get("signatures", [])
    signatures = []
    if not isinstance(signatures_raw, list):
        chk.problem("signatures", "must be a list of regexes")
    else:
        for i, sig in enumerate(signatures_raw):
            compiled = chk.signature(f"signatures[{i}]", sig)
            if compiled is not None:
                signatures.append(compiled)
    log_only = data.get("log_only", False)
    if not isinstance(log_only, bool):
        chk.problem("log_only", "must be true or false")
        log_only = False
    elif log_only and not signatures_raw:
        chk.problem("log_only", "a log-only rule needs signatures")
    references = chk.string_list(data, "references")
    for i, ref in enumerate(references):
        if not ref.startswith("https://"):
            chk.problem(f"references[{i}]", "must be an https URL")
    if "references" in data and not references:
        chk.problem("references", "a rule needs at least one upstream reference")
    # why no case of the rule can run on an input seen upstream (engine/cases.py)
    chk.string(data, "no_real_input")
    related = chk.string_list(data, "related")
    for i, other in enumerate(related):
        if not CODE_RE.match(other):
            chk.problem(f"related[{i}]", f"{other!r} is not a rule code")
    for i, other in enumerate(chk.string_list(data, "defers_to")):
        if not CODE_RE.match(other):
            chk.problem(f"defers_to[{i}]", f"{other!r} is not a rule code")
    probe = data.get("probe")
    if probe is not None and (not isinstance(probe, str) or not SLUG_RE.match(probe)):
        chk.problem("probe", "must be a probe name")
    fix = _fix(chk, data.get("fix"))
    workarounds = _workarounds(chk, data.get("workarounds"))
    aliases = chk.string_list(data, "aliases")
    reader = data.get("reader")
    if reader is not None:
        from vllm_doctor.logreaders import READERS

        if reader not in READERS:
            chk.problem(
                "reader", f"unknown log reader {reader!r} (one of {', '.join(sorted(READERS))})"
            )
        elif not log_only:
            chk.problem("reader", "a log reader needs log_only: true")
    if chk.problems:
        return None, chk.problems
    rule = Rule(  # the fields are checked above (chk.problems): none of them is None here
        code=code,  # type: ignore[arg-type]
        slug=slug,  # type: ignore[arg-type]
        status=status,  # type: ignore[arg-type]
        severity=severity,  # type: ignore[arg-type]
        confidence=confidence,  # type: ignore[arg-type]
        summary=summary,  # type: ignore[arg-type]
        phase=phase,  # type: ignore[arg-type]
        when=when,
        ranges=ranges,
        fingerprints=fingerprints,
        signatures=tuple(signatures),
        fix=fix,
        workarounds=workarounds,
        probe=probe,
        references=references,
        aliases=aliases,
        related=related,
        details=details,
        path=path,
        raw=data,
        log_only=log_only,
        reader=reader,
        warn_when=warn_when,
    )
    return rule, []


def load_rule_file(path: Path, strict: bool = True) -> tuple[Rule | None, list[str]]:
    """One rule file as a ``Rule``, or None and ``file:field: problem`` lines for each
    mistake (``strict``: also what only ``rules validate`` insists on)."""
    data, problems = _read_rule_data(path)
    if problems:
        return None, problems
    return parse_rule(data, path, strict)


def _read_rule_data(path: Path) -> tuple[Any, list[str]]:
    """A rule file's YAML as plain data, or the problems that stop it being read."""
    from vllm_doctor import yaml_io

    try:
        text = read_text(path, "rule file", "yaml")
    except InputError as err:
        return None, [f"{path}:(file): cannot read: {err.problem}"]
    try:
        data = yaml_io.safe_load(text)
    except yaml_io.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else "(yaml)"
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        return None, [f"{path}:{where}: YAML does not parse: {problem}"]
    bad_key = _non_string_key(data)
    if bad_key is not None:
        return None, [
            f"{path}:{bad_key[0]}: key {bad_key[1]!r} is not text (every key of a rule "
            "file is a name)"
        ]
    return data, []


def _non_string_key(data: Any) -> tuple[str, Any] | None:
    """(where, key) of the first mapping key that is not a string (`1: x`, `true: y`), else None."""
    stack: list[tuple[str, Any]] = [("(top)", data)]
    while stack:
        where, node = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                if not isinstance(key, str):
                    return where, key
                stack.append((key if where == "(top)" else f"{where}.{key}", value))
        elif isinstance(node, list):
            stack.extend((f"{where}[{i}]", item) for i, item in enumerate(node))
    return None


# A rules directory is a handful of folders of YAML files; `rules-dir = "/"` or a tree
# 1200 levels deep is a mistake, refused (exit 2) before it is walked for long.
MAX_RULES_DEPTH = 16
MAX_RULES_ENTRIES = 20_000


def rule_files(directory: Path) -> list[Path]:
    """The rule files under ``directory`` (not the cases files), walked without following
    links, at most ``MAX_RULES_DEPTH`` levels deep and ``MAX_RULES_ENTRIES`` entries."""
    import os

    found, seen = [], 0
    stack = [(Path(directory), 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError as err:
            raise InputError(
                str(folder), f"cannot read the rule directory: {err.strerror or err}"
            ) from None
        seen += len(entries)
        if seen > MAX_RULES_ENTRIES:
            raise InputError(
                str(directory),
                f"holds more than {MAX_RULES_ENTRIES:,} files and folders: "
                "name the folder that holds the rule files",
            )
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                if depth + 1 > MAX_RULES_DEPTH:
                    raise InputError(
                        str(directory),
                        f"is nested more than {MAX_RULES_DEPTH} folders "
                        "deep: name the folder that holds the rule files",
                    )
                stack.append((Path(entry.path), depth + 1))
            elif (
                entry.name.endswith((".yaml", ".yml"))
                and not entry.name.endswith((".cases.yaml", ".cases.yml"))
                and entry.is_file()
            ):
                found.append(Path(entry.path))
    return sorted(found)


def _compact_rule_data(directory: Path) -> dict[str, Any] | None:
    """Every rule file's YAML as plain data and every signature's matching plan, from the
    compact build (vllm_doctor.compact) checked against the files' bytes; None when a file
    cannot be read (the problems are then reported file by file)."""
    from vllm_doctor.compact import cached

    files = rule_files(directory)
    try:
        sources = [(p.relative_to(directory).as_posix(), p.read_bytes()) for p in files]
        package = Path(__file__).resolve().parent.parent
        sources += [(f"({name})", (package / name).read_bytes()) for name in _BUILDERS]
    except OSError:
        return None

    def build() -> dict[str, Any] | None:
        from vllm_doctor.engine.logmatch import SignatureError, signature_plan

        texts, plans = {}, {}
        for path in files:
            data, problems = _read_rule_data(path)
            if problems:
                return None
            texts[path.relative_to(directory).as_posix()] = data
            for pattern in (data.get("signatures") or []) if isinstance(data, dict) else []:
                with contextlib.suppress(SignatureError, TypeError):  # parse_rule reports it
                    plans[pattern] = signature_plan(pattern)
        return {"files": texts, "plans": plans}

    name = "rules-" + digest([(str(directory), b"")])[:12]
    built: dict[str, Any] | None = cached(name, sources, build, valid=_rule_data_shape)
    return built


def _rule_data_shape(value: Any) -> bool:
    """A compact rule build has this shape (or is None: the files had problems)."""
    return value is None or (
        isinstance(value, dict)
        and isinstance(value.get("files"), dict)
        and isinstance(value.get("plans"), dict)
    )


# the modules whose code shapes the compact rule data (a change to them is a rebuild)
_BUILDERS = (
    "yaml_io.py",
    "engine/logmatch/signature.py",
    "engine/logmatch/text.py",
    "engine/loader.py",
)


def validate_dir(
    directory: Path, strict: bool = True, other_codes: frozenset[str] = frozenset()
) -> tuple[list[Rule], list[str]]:
    """All rules of a directory and every problem found (duplicate codes/slugs included).

    ``related:`` and ``defers_to:`` may name a rule of the directory or one of
    ``other_codes`` (the shipped rules, for a ``--rules-dir``): a rule from another directory
    is judged exactly like a shipped one."""
    rules, problems = [], []
    seen_codes: dict[str, Path] = {}
    seen_slugs: dict[str, Path] = {}
    compact = None if strict else _compact_rule_data(directory)
    if compact is not None:
        from vllm_doctor.engine.rule import SIGNATURE_PLANS

        SIGNATURE_PLANS.update(compact["plans"])
    for path in rule_files(directory):
        if compact is not None:
            rule, found = parse_rule(
                compact["files"][path.relative_to(directory).as_posix()], path, strict
            )
        else:
            rule, found = load_rule_file(path, strict)
        problems.extend(found)
        if rule is None:
            continue
        if rule.code in seen_codes:
            problems.append(f"{path}:code: {rule.code} is also used by {seen_codes[rule.code]}")
            continue
        if rule.slug in seen_slugs:
            problems.append(f"{path}:slug: {rule.slug} is also used by {seen_slugs[rule.slug]}")
            continue
        seen_codes[rule.code] = path
        seen_slugs[rule.slug] = path
        rules.append(rule)
    codes = set(seen_codes) | set(other_codes)
    for rule in rules:
        for other in rule.related:
            if other not in codes:
                problems.append(f"{rule.path}:related: {other} is not a known rule")
        for other in rule.defers_to:
            if other not in codes:
                problems.append(f"{rule.path}:defers_to: {other} is not a known rule")
    return rules, problems


@lru_cache(maxsize=8)
def _load_cached(directory: str) -> tuple[Rule, ...]:
    shipped = default_rules_dir().resolve()
    other = frozenset() if Path(directory) == shipped else shipped_codes()
    rules, problems = validate_dir(Path(directory), strict=False, other_codes=other)
    if problems:
        raise RuleFileError(problems)
    return tuple(rules)


def shipped_codes() -> frozenset[str]:
    """The codes of the shipped rules (a --rules-dir rule may name them in related:)."""
    return frozenset(rule.code for rule in _load_cached(str(default_rules_dir().resolve())))


def load_rules(directories: list[Path] | None = None) -> list[Rule]:
    """The rules of the given directories (default: the shipped rule base); bad files → exit 2."""
    dirs = directories or [default_rules_dir()]
    rules: list[Rule] = []
    for directory in dirs:
        if not directory.is_dir():
            raise InputError(str(directory), "rule directory does not exist")
        rules.extend(_load_cached(str(directory.resolve())))
    codes = [r.code for r in rules]
    dupes = sorted({c for c in codes if codes.count(c) > 1})
    if dupes:
        raise InputError("rules", f"duplicate rule codes across directories: {', '.join(dupes)}")
    return sorted(rules, key=lambda r: r.code)


def one_machine(rules: list[Rule]) -> list[Rule]:
    """The rules one machine's facts can decide: all but the FLEET rules, which compare the
    nodes of a fleet (`vllm-doctor fleet`)."""
    return [r for r in rules if r.category != "FLEET"]


def select_rules(
    rules: list[Rule], select: list[str] | None, ignore: list[str] | None
) -> list[Rule]:
    """ruff-style prefix selection: `--select SPEC,QUANT001 --ignore SPEC010`."""

    def matches(rule: Rule, prefixes: list[str]) -> bool:
        return any(rule.code.startswith(p.strip().upper()) for p in prefixes if p.strip())

    chosen = [
        r
        for r in rules
        if r.status not in ("withdrawn", "deprecated") or (select and matches(r, select))
    ]
    if select:
        chosen = [r for r in chosen if matches(r, select)]
    if ignore:
        chosen = [r for r in chosen if not matches(r, ignore)]
    return chosen
