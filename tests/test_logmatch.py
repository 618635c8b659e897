"""Crash-log matching: linear-time signatures, curated messages in their real variants, and the
error catalogue naming vLLM's own messages."""

from __future__ import annotations

import time

import pytest
import yaml

from vllm_doctor.engine.cases import cases_path
from vllm_doctor.engine.loader import load_rules, parse_rule
from vllm_doctor.engine.logmatch import (
    SignatureError,
    compile_signature,
    scan_log,
    signature_problem,
    signature_spans,
)

RULES = load_rules(None)
SIGNATURES = [(rule.code, s.pattern) for rule in RULES for s in rule.signatures]

# Inputs that make backtracking engines explode: nothing but newlines, one long line of one
# character, a signature's literal prefix repeated without its end, long runs of spaces.
ADVERSARIAL = {
    "newlines-400k": "\n" * 400_000,
    "one-char-400k": "a" * 400_000,
    "spaces-200k": " " * 200_000 + "x",
    "digits-lines": "1 2 3 4 5 6 7 8 9 0\n" * 20_000,
}


def _prefix_bomb(pattern: str) -> str:
    """The signature's first literal repeated 20k times on one line and on many lines."""
    sig = compile_signature(pattern)
    literal = sig.parts[0].literal
    return (literal * 20_000)[:400_000] + "\n" + (literal + "\n") * 10_000


@pytest.mark.parametrize(
    "code, pattern", SIGNATURES, ids=[f"{c}-{i}" for i, (c, _) in enumerate(SIGNATURES)]
)
def test_every_shipped_signature_runs_in_linear_time(code, pattern):
    sig = compile_signature(pattern)
    # A catastrophic backtrack takes minutes on these (ARGS003 took 58 s on 200 KB of
    # newlines with the old engine); the bound is generous for a loaded CI machine.
    for name, text in [*ADVERSARIAL.items(), ("prefix-bomb", _prefix_bomb(pattern))]:
        started = time.perf_counter()
        scan = scan_log(text, [sig])
        scan.signature_lines([sig])
        elapsed = time.perf_counter() - started
        assert elapsed < 3.0, f"{code} took {elapsed:.1f} s on {name}"


def test_the_loader_rejects_what_a_linear_engine_cannot_run(tmp_path):
    assert "RE2" in signature_problem(r"(a+)\1 repeated")  # back-reference
    assert "RE2" in signature_problem(r"(?<=foo)bar baz qux")  # look-behind
    assert "literal" in signature_problem(r"\d+\s+\w+")  # nothing to prefilter on
    assert signature_problem(r"\A(?![\s\S]*speculative\.py)[\s\S]*?Pipeline parallelism") is None
    with pytest.raises(SignatureError):
        compile_signature(r"\A(?!foo)bar baz")  # only "X nowhere in the log" is supported
    rule = yaml.safe_load((cases_path(RULES[0]).parent / f"{RULES[0].code}.yaml").read_text())
    rule["signatures"] = [r"(some text)\1"]
    _, problems = parse_rule(rule, cases_path(RULES[0]).parent / f"{RULES[0].code}.yaml")
    assert any("signatures[0]" in p and "RE2" in p for p in problems)


def test_gaps_are_bounded_and_unless_excludes():
    near = compile_signature(r"alpha one[\s\S]{0,20}?omega two")
    text = "alpha one" + "x" * 15 + "omega two\n" + "alpha one" + "x" * 50 + "omega two\n"
    spans = signature_spans(near, text, scan_log(text, [near]).hits)
    assert spans == [(0, 33)]  # the second pair is 50 characters apart: beyond the bound
    far = compile_signature(r"alpha one[\s\S]*?omega two")
    assert len(signature_spans(far, text, scan_log(text, [far]).hits)) == 2
    unless = compile_signature(r"\A(?![\s\S]*speculative\.py)[\s\S]*?omega two")
    assert signature_spans(unless, text, scan_log(text, [unless]).hits)
    blocked = text + 'File "speculative.py", line 3\n'
    assert signature_spans(unless, blocked, scan_log(blocked, [unless]).hits) == []


# -- the curated non-vLLM messages, each in the variants users paste ----------------------------
ANSI_RED, ANSI_RESET = "\x1b[31m", "\x1b[0m"


def _variants(log: str) -> dict[str, str]:
    lines = log.rstrip("\n").split("\n")
    return {
        "as-is": log,
        "engine-core-prefix": "\n".join(
            f"(EngineCore_DP0 pid=1234) ERROR 11-23 05:10:11 [core.py:123] {ln}" for ln in lines
        )
        + "\n",
        "worker-prefix": "\n".join(f"(Worker_TP1 pid=77) {ln}" for ln in lines) + "\n",
        "kubectl-timestamps": "\n".join(f"2026-11-23T05:10:11.123456789Z {ln}" for ln in lines)
        + "\n",
        "ansi-colour": "\n".join(
            f"{ANSI_RED}ERROR{ANSI_RESET} {ANSI_RED}{ln}{ANSI_RESET}" for ln in lines
        )
        + "\n",
        "crlf": "\r\n".join(lines) + "\r\n",
        "inside-a-long-log": "INFO 11-23 05:10:00 [api_server.py:1] vLLM API server version 0.20.0\n"
        * 2000
        + log
        + "INFO shutting down\n" * 100,
    }


def _log_only_cases():
    for rule in RULES:
        if not rule.log_only:
            continue
        for case in yaml.safe_load(cases_path(rule).read_text())["cases"]:
            if case.get("log") and case["expect"] == "applies":
                yield rule, case["name"], case["log"]


CURATED = list(_log_only_cases())


@pytest.mark.parametrize("rule, name, log", CURATED, ids=[f"{r.code}-{n}" for r, n, _ in CURATED])
def test_curated_message_matches_in_every_variant(rule, name, log):
    from vllm_doctor.engine.evaluate import match_signatures

    for variant, text in _variants(log).items():
        assert match_signatures(rule, text), (
            f"{rule.code} {name}: no match in the {variant} variant"
        )


def test_every_curated_code_range_has_log_only_rules_with_real_messages():
    codes = {r.code for r, _, _ in CURATED}
    assert {
        "ENV201",
        "ENV202",
        "ENV203",
        "ENV204",
        "ENV205",
        "ENV206",
        "HW201",
        "HW202",
        "HW203",
        "HW204",
        "HW205",
        "HW206",
    } <= codes


def test_a_log_only_rule_needs_its_message():
    from vllm_doctor.engine.evaluate import evaluate_rule
    from vllm_doctor.facts.model import Facts

    rule = next(r for r in RULES if r.code == "HW203")
    facts = Facts.from_flat({"gpu.min_capability": 80, "gpu.max_capability": 80})
    assert evaluate_rule(rule, facts).verdict == "not-applies"  # an A100 alone is no error
    seen = evaluate_rule(
        rule,
        facts,
        'ValueError("type fp8e4nv not supported in this architecture. '
        "The supported fp8 dtypes are ('fp8e4b15', 'fp8e5')\")\n",
    )
    assert seen.verdict == "applies" and seen.confidence == "high"
    assert [e.path for e in seen.evidence] == ["gpu.min_capability"]  # the confirming fact
    hopper = Facts.from_flat({"gpu.min_capability": 90, "gpu.max_capability": 90})
    contradicted = evaluate_rule(rule, hopper, "type fp8e4nv not supported in this architecture\n")
    assert contradicted.verdict == "applies" and contradicted.confidence == "medium"


def test_splitting_reads_character_classes_the_way_the_regex_engine_does():
    """A ``]`` first in a class (``[]x]``, ``[^]x]``) is one of its characters, and a ``(`` or
    ``)`` or gap inside a class is not structure: both scanners agree with ``re``."""
    from vllm_doctor.engine.logmatch.signature import _closing_paren, _top_level_spans

    for pattern, close in [("(a[)]b)c", 6), ("(a[]a)]b)", 8), ("(a[^])]b)", 8), ("(a(b)c)", 6)]:
        assert _closing_paren(pattern, 0) == close, pattern
    gap = r"[\s\S]*?"
    pattern = f"a[]{gap}]b{gap}c"  # only the gap after b is one
    assert _top_level_spans(pattern) == [(pattern.index("b") + 1, pattern.index("c"), None)]
    assert _top_level_spans(f"x[^]({gap}]y({gap})z") == []
    assert _top_level_spans(r"p[\s\S]{0,40}q") == [(1, 13, 40)]


# -- sizes and edges: the small-log index, the automaton, the RE2 set of a log over 4 MB ---------
from vllm_doctor.engine import logmatch  # noqa: E402
from vllm_doctor.engine.evaluate import match_signatures  # noqa: E402

MODEL001 = next(rule for rule in RULES if rule.code == "MODEL001")
# the crash from vLLM issue 45719 (rules/model/MODEL001.cases.yaml)
CRASH = (
    "INFO [model.py:598] Resolved architecture: DiffusionGemmaForBlockDiffusion\n"
    "RuntimeError: a and b must have same reduction dim, but got [s88, s3] X [65536, 2816].\n"
)
FILLER = "INFO 11-23 05:10:00 [loader.py:42] Loading weights took 3.21 seconds\n"


def _log_of_size(size: int, where: str) -> str:
    """A log of exactly ``size`` characters with the crash at its start, middle or end."""
    filler = (FILLER * (size // len(FILLER) + 2))[: size - len(CRASH)]
    if where == "start":
        return CRASH + filler
    if where == "end":
        return filler + CRASH
    middle = filler.rfind("\n", 0, len(filler) // 2) + 1
    return filler[:middle] + CRASH + filler[middle:]


def _every_occurrence(text: str, literals) -> dict[str, list[int]]:
    found = {}
    for literal in literals:
        at, positions = text.find(literal), []
        while at != -1 and len(positions) < logmatch.MAX_HITS_PER_LITERAL:
            positions.append(at)
            at = text.find(literal, at + 1)
        if positions:
            found[literal] = positions
    return found


SIZES = [
    logmatch.SMALL_LOG - 1,
    logmatch.SMALL_LOG,
    logmatch.SMALL_LOG + 1,
    logmatch.LARGE_LOG - 1,
    logmatch.LARGE_LOG,
    logmatch.LARGE_LOG + 1,
    4_300_000,
]


@pytest.mark.parametrize("where", ["start", "middle", "end"])
@pytest.mark.parametrize("size", SIZES)
def test_the_literal_scan_finds_every_occurrence_on_each_side_of_a_size_edge(size, where):
    # Each size takes one of three paths (a prefix index up to SMALL_LOG characters, the
    # automaton up to LARGE_LOG, an RE2 set over more); all must give the positions str.find
    # gives, for every literal the signatures need, and the rule must match.
    text = _log_of_size(size, where)
    assert len(text) == size
    signatures = [s.compiled() for rule in RULES for s in rule.signatures]
    scan = scan_log(text, signatures)
    literals = set().union(*(sig.literals() for sig in signatures))
    assert scan.hits == _every_occurrence(scan.text, literals)
    assert match_signatures(MODEL001, scan) == [
        "RuntimeError: a and b must have same reduction dim, but got [s88, s3] X [65536, 2816]."
    ]


def test_a_4_3_mb_log_with_the_catalogue_still_matches_the_rule():
    from vllm_doctor.engine.logmatch import load_catalogue

    # vLLM's own message too, so that the catalogue's literals are found beside the rule's
    message = (
        "ValueError: Total number of attention heads (64) must be divisible by tensor "
        "parallel size (3).\n"
    )
    text = message + _log_of_size(4_300_000 - len(message), "middle")
    catalogue = load_catalogue()
    scan = scan_log(text, [s.compiled() for s in MODEL001.signatures], catalogue)
    wanted = set().union(*(s.compiled().literals() for s in MODEL001.signatures))
    assert {k: v for k, v in scan.hits.items() if k in wanted} == _every_occurrence(
        scan.text, wanted
    )
    # the RE2 set's answers mapped back to their own literals: each position holds its literal
    assert len(scan.hits) > len(wanted)
    for literal, positions in scan.hits.items():
        assert all(scan.text.startswith(literal, at) for at in positions), literal
    assert match_signatures(MODEL001, scan)


@pytest.mark.parametrize(
    "gap, matches", [(0, True), (19_999, True), (20_000, True), (20_001, False)]
)
def test_a_bounded_gap_holds_at_its_bound(gap, matches):
    # MODEL001's second signature allows at most 20000 characters between the traceback frame
    # and the error: exactly 20000 matches, one more does not
    pattern = MODEL001.signatures[1].pattern
    assert "{0,20000}?" in pattern
    sig = compile_signature(pattern)
    frame = (
        'File "/v/vllm/model_executor/models/diffusion_gemma.py", line 88, in _compiled_sample_step'
    )
    error = "a and b must have same reduction dim, but got [s88, s3] X [65536, 2816]"
    text = FILLER + frame + "x" * gap + error + "\n" + FILLER
    assert bool(signature_spans(sig, text, scan_log(text, [sig]).hits)) is matches


@pytest.mark.parametrize("shift", [-1, 0, 1])
def test_a_part_match_at_the_edge_of_its_window(shift):
    # a part's regex runs PART_WINDOW characters either side of its literal: a match that
    # starts that far before the literal is found, one character further is not
    sig = compile_signature(r"error code=\d+ in worker_main_loop")
    digits = logmatch.PART_WINDOW - len("error code=") + shift
    text = "error code=" + "7" * digits + " in worker_main_loop\n"
    found = bool(signature_spans(sig, text, scan_log(text, [sig]).hits))
    assert found is (shift <= 0)


def test_the_version_from_vllm_serves_banners():
    from pathlib import Path

    from vllm_doctor.engine.logmatch import version_in_log

    # the logo line of a real start-up log (tests/fixtures/memory-logs, guardkit's Qwen3.5 run)
    entry = Path(__file__).parent / "fixtures" / "memory-logs"
    log = yaml.safe_load(
        (entry / "web-guardkit-qwen3.5-35b-a3b-fp8-gb10.yaml").read_text(encoding="utf-8")
    )["log"]
    assert version_in_log(log) == "0.18.1rc1.dev147+g290809456"
    # log_version_and_model (0.15.0-0.33.0): the logo in colour, and without the logo
    colour = (
        " \x1b[93m▄▄\x1b[0m \x1b[94m▄█\x1b[0m \x1b[97;1m█     █     █ ▀▄▀ █\x1b[0m  "
        "version \x1b[97;1m0.20.1\x1b[0m\n"
    )
    assert version_in_log(colour) == "0.20.1"
    plain = "INFO 05-01 [utils.py:279] vLLM server version 0.33.0, serving model Qwen/Qwen3-8B\n"
    assert version_in_log(plain) == "0.33.0"
    assert version_in_log("INFO [api_server.py:1] vLLM API server version 0.8.5\n") == "0.8.5"
