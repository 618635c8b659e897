"""Run each rule's test cases (the `<CODE>.cases.yaml` beside the rule file)."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from vllm_doctor import yaml_io
from vllm_doctor.engine.evaluate import APPLIES, NOT_APPLIES, UNDECIDED, evaluate_rule
from vllm_doctor.engine.rule import Rule
from vllm_doctor.facts.model import Facts
from vllm_doctor.facts.schema import is_known_path

EXPECTS = (APPLIES, NOT_APPLIES, UNDECIDED)
# a case's real inputs, each run through the collector `check` uses for it
INPUT_KEYS = ("serve", "serve_config", "model_config", "report")


@dataclass
class CaseResult:
    code: str
    name: str
    ok: bool
    message: str


def cases_path(rule: Rule) -> Path:
    return rule.path.with_name(f"{rule.code}.cases.yaml")


def tree_path(rel: Any) -> PurePosixPath:
    """A ``vllm_files`` name as a path inside the fake package; ValueError for one that is
    absolute or climbs out of it (``/abs/x.pth``, ``../../site-packages/x.pth``): `rules test`
    writes only inside its temporary tree."""
    if not isinstance(rel, str) or not rel.strip():
        raise ValueError(f"vllm_files name {rel!r} must be a non-empty relative path")
    path = PurePosixPath(rel.removeprefix("vllm/"))
    if path.is_absolute() or not path.parts or ".." in path.parts or "\\" in rel:
        raise ValueError(
            f"vllm_files name {rel!r} must stay inside the vllm package (no absolute path, no `..`)"
        )
    return path


def vllm_files_problems(case: Any) -> list[str]:
    """What is wrong with a case's ``vllm_files`` (a mapping of relative path → text)."""
    files = case.get("vllm_files") if isinstance(case, dict) else None
    if files is None:
        return []
    if not isinstance(files, dict):
        return ["vllm_files must be a mapping of relative path to text"]
    problems = []
    for rel in files:
        try:
            tree_path(rel)
        except ValueError as err:
            problems.append(str(err))
    return problems


def repository_root(cases_file: Path) -> Path:
    """Where a case's fixture paths are read from, and which they may not leave: the
    repository around the cases file (the nearest folder with ``.git`` or ``pyproject.toml``),
    else the rule directory the cases file's category folder is in."""
    start = cases_file.resolve().parent
    for folder in (start, *start.parents):
        if (folder / ".git").exists() or (folder / "pyproject.toml").exists():
            return folder
    return start.parent


def input_path(cases_file: Path, key: str, rel: str) -> Path:
    """A fixture path a case names, inside the repository; ValueError otherwise."""
    root = repository_root(cases_file)
    if PurePosixPath(rel).is_absolute() or "\\" in rel:
        raise ValueError(f"{key}: {rel!r} must be a path relative to {root}")
    path = (root / rel).resolve()  # links resolved: a link out of the repository is refused
    if not path.is_relative_to(root):
        raise ValueError(f"{key}: {rel!r} leaves the repository {root}")
    if not path.exists():
        raise ValueError(f"{key}: no file {rel!r} in {root}")
    return path


def _inline_or_path(cases_file: Path, tmp: Path, key: str, value: Any, name: str) -> Path:
    """A case's ``serve_config`` / ``model_config`` / ``report``: a one-line string is a
    fixture path in the repository; a mapping (written as YAML or JSON) or a multi-line
    string is the input itself, written into the case's temporary folder."""
    import json

    if isinstance(value, str) and "\n" not in value.strip():
        return input_path(cases_file, key, value.strip())
    if isinstance(value, dict):
        text = json.dumps(value)  # JSON is YAML too: one writer for both
    elif isinstance(value, str):
        text = value
    else:
        raise ValueError(f"{key} must be a path, a mapping or a text")
    target = tmp / "inputs" / name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    return target


def collect_case_facts(rule: Rule, case: dict[str, Any], given: Facts, tmp: Path) -> Facts:
    """The facts of a case with real inputs, through the real collectors (serve line, serve
    config, model config, collect-env report, crash log), nothing of this machine examined,
    the case's ``facts:`` standing for the machine's. ValueError for a bad input path;
    InputError for an input the collector refuses."""
    from vllm_doctor.facts.collect import CollectOptions, collect_facts

    cases_file = cases_path(rule)
    serve = case.get("serve")
    if serve is not None and not isinstance(serve, str):
        raise ValueError("serve must be a serve line (a string)")
    options = CollectOptions(
        serve_string=serve, probe_machine=False, environ={}, offline=True, given=given
    )
    if case.get("serve_config") is not None:
        options.serve_config = _inline_or_path(
            cases_file, tmp, "serve_config", case["serve_config"], "serve.yaml"
        )
    if case.get("model_config") is not None:
        options.model_config = _inline_or_path(
            cases_file, tmp, "model_config", case["model_config"], "config.json"
        )
    if case.get("report") is not None:
        options.report = _inline_or_path(
            cases_file, tmp, "report", case["report"], "collect-env.txt"
        )
    if isinstance(case.get("log"), str):
        options.log = tmp / "inputs" / "crash.log"
        options.log.parent.mkdir(parents=True, exist_ok=True)
        options.log.write_text(case["log"], encoding="utf-8")
    facts = collect_facts(options)
    # as in the facts-only form, a machine area the case lists facts of is not "unknown"
    for area in {path.split(".", 1)[0] for path in given.values}:
        facts.missing.pop(area, None)
    return facts


def _write_tree(root: Path, files: dict[str, str]) -> Path:
    tree = root / "vllm"
    tree.mkdir(parents=True, exist_ok=True)
    for rel, text in files.items():
        target = tree.joinpath(*tree_path(rel).parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        # O_EXCL|O_NOFOLLOW: a name given twice, or a link, is never followed out of the tree
        fd = os.open(
            target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600
        )
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(str(text))
    return tree


def _run_case(rule: Rule, case: dict[str, Any], index: int) -> CaseResult:
    name = str(case.get("name", f"case[{index}]"))
    expect = case.get("expect")
    if expect not in EXPECTS:
        return CaseResult(rule.code, name, False, f"expect must be one of {', '.join(EXPECTS)}")
    flat = case.get("facts") or {}
    if not isinstance(flat, dict):
        return CaseResult(rule.code, name, False, "facts must be a mapping of fact paths")
    unknown = [p for p in flat if not is_known_path(str(p))]
    if unknown:
        return CaseResult(rule.code, name, False, f"unknown fact paths {unknown}")
    facts = Facts.from_flat(flat)
    for path, reason in (case.get("missing") or {}).items():
        facts.mark_missing(str(path), str(reason))
    log = case.get("log")
    files = case.get("vllm_files")
    bad_files = vllm_files_problems(case)
    if bad_files:
        return CaseResult(rule.code, name, False, "; ".join(bad_files))
    with tempfile.TemporaryDirectory(prefix="vllm-doctor-case-") as tmp:
        try:
            tree = _write_tree(Path(tmp), files) if isinstance(files, dict) else None
        except (
            OSError
        ) as err:  # the same file named twice (`a.py` and `vllm/a.py`), a name too long
            return CaseResult(
                rule.code, name, False, f"cannot write vllm_files: {err.strerror or err}"
            )
        if case.get("nodes") is not None:  # a fleet rule's case: its nodes side by side
            from vllm_doctor.errors import InputError
            from vllm_doctor.fleet.cases import case_facts

            def document(rel: str) -> Path:
                return input_path(cases_path(rule), "document", rel)

            try:
                facts = case_facts(case["nodes"], case.get("serve"), document)
            except (ValueError, InputError) as err:
                return CaseResult(rule.code, name, False, str(err))
        elif any(case.get(key) is not None for key in INPUT_KEYS):
            from vllm_doctor.errors import InputError

            try:
                facts = collect_case_facts(rule, case, facts, Path(tmp))
            except ValueError as err:
                return CaseResult(rule.code, name, False, str(err))
            except InputError as err:
                return CaseResult(rule.code, name, False, str(err))
        finding = evaluate_rule(rule, facts, log, vllm_tree=tree)
    problems = []
    if finding.verdict != expect:
        detail = finding.fix_state.detail if finding.fix_state else ""
        missing = ", ".join(m.path for m in finding.missing)
        problems.append(
            f"expected {expect}, got {finding.verdict}"
            + (f" ({detail})" if detail else "")
            + (f" missing: {missing}" if missing else "")
        )
    if log:
        hits = finding.log_matches  # evaluate_rule matched the signatures already
        if expect == APPLIES and not hits:
            problems.append("the log does not match any signature")
        if expect == NOT_APPLIES and hits:
            problems.append(f"the log matches a signature: {hits[0]!r}")
    # a rule with a log reader: the cause and the fix it must name
    for key, got in (
        ("cause_contains", [finding.reading.cause] if finding.reading else []),
        ("fix_contains", finding.reading.fixes if finding.reading else []),
    ):
        wanted = case.get(key)
        if wanted is not None and not any(str(wanted) in text for text in got):
            problems.append(f"{key}: {wanted!r} not in {got!r}")
    return CaseResult(rule.code, name, not problems, "; ".join(problems) or "ok")


def _load_cases(rule: Rule) -> tuple[list[Any] | None, list[str]]:
    """The `cases:` list of a rule's cases file, or None and the problem."""
    path = cases_path(rule)
    if not path.exists():
        return None, [f"{rule.code}: no cases file {path.name}"]
    from vllm_doctor.bounds import read_text
    from vllm_doctor.errors import InputError

    try:
        data = yaml_io.safe_load(read_text(path, "cases file", "yaml"))
    except InputError as err:
        return None, [f"{path}: cannot load cases: {err.problem}"]
    except yaml_io.YAMLError as err:
        return None, [f"{path}: cannot load cases: {str(err).splitlines()[0]}"]
    cases = data.get("cases") if isinstance(data, dict) else None
    if not isinstance(cases, list):
        return None, [f"{path}: needs a top-level `cases:` list"]
    return cases, []


def case_file_problems(rule: Rule) -> list[str]:
    """`rules validate`'s reading of a cases file: the files a case would write stay inside
    the case's temporary tree (a missing cases file is `rules test`'s coverage problem)."""
    cases, _ = _load_cases(rule)
    return [
        f"{cases_path(rule)}:cases[{i}].vllm_files: {problem}"
        for i, case in enumerate(cases or [])
        for problem in vllm_files_problems(case)
    ]


def run_cases(rule: Rule) -> tuple[list[CaseResult], list[str]]:
    """Results of a rule's cases, and coverage problems (no positive / no negative case)."""
    cases, problems = _load_cases(rule)
    if cases is None:
        return [], problems
    results = [
        _run_case(rule, case, i)
        if isinstance(case, dict)
        else CaseResult(rule.code, f"case[{i}]", False, "a case must be a mapping")
        for i, case in enumerate(cases)
    ]
    expects = {c.get("expect") for c in cases if isinstance(c, dict)}
    coverage = []
    if APPLIES not in expects:
        coverage.append(f"{rule.code}: no positive (applies) case")
    if NOT_APPLIES not in expects:
        coverage.append(f"{rule.code}: no negative (not-applies) case")
    return results, coverage
