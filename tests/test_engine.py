"""Engine: conditions in three-valued logic, rule validation, fix detection, cases, ignores."""

from __future__ import annotations

import datetime as dt
import textwrap
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vllm_doctor.engine.cases import case_file_problems, run_cases
from vllm_doctor.engine.conditions import ConditionError, compile_condition
from vllm_doctor.engine.evaluate import APPLIES, NOT_APPLIES, UNDECIDED, evaluate_rule
from vllm_doctor.engine.fixstate import fix_state
from vllm_doctor.engine.ignore import apply_ignores, load_ignore_file
from vllm_doctor.engine.loader import RuleFileError, load_rules, parse_rule, validate_dir
from vllm_doctor.errors import InputError
from vllm_doctor.facts.model import Facts, Source

DETAILS = "## What happens\na\n## Why\nb\n## How to confirm\nc\n## Known false positives\nd\n"


def rule_data(**over):
    data = {
        "code": "MODEL901",
        "slug": "diffusion-tp",
        "status": "stable",
        "severity": "error",
        "confidence": "high",
        "summary": "DiffusionGemma TP>1 crash",
        "phase": "warmup",
        "affected": {
            "ranges": [{"events": [{"introduced": "0.22.0"}, {"fixed": "0.24.0"}]}],
            "fingerprints": [
                {
                    "path": "model_executor/models/diffusion_gemma.py",
                    "pattern": "sc_vocab_start",
                    "means": "fixed",
                }
            ],
        },
        "when": {
            "all": [
                {"fact": "model.architectures", "contains": "DiffusionGemmaForBlockDiffusion"},
                {"fact": "serve.tensor_parallel_size", "gt": 1},
            ]
        },
        "signatures": [r"a and b must have same reduction dim, but got \[[^\]]*\] X \[\d+, \d+\]"],
        "fix": {"status": "released", "version": "0.24.0", "pr": 46177},
        "workarounds": [
            {"title": "TP 1", "serve": {"set": {"tensor-parallel-size": 1}}, "cost": "one GPU"}
        ],
        "references": ["https://github.com/vllm-project/vllm/pull/46177"],
        # a rule made by the test: no upstream input of its own
        "no_real_input": "a test's own rule",
        "details": DETAILS,
    }
    data.update(over)
    return data


def make_rule(**over):
    rule, problems = parse_rule(rule_data(**over), Path("MODEL901.yaml"))
    assert not problems, problems
    return rule


def facts_of(**flat):
    return Facts.from_flat({k.replace("__", "."): v for k, v in flat.items()})


BASE = dict(model__architectures=["DiffusionGemmaForBlockDiffusion"], serve__tensor_parallel_size=2)


# -- conditions ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "cond, value, expected",
    [
        ({"eq": "FP8"}, "fp8", True),
        ({"ne": "auto"}, "auto", False),
        ({"in": ["fp8", "fp8_e4m3"]}, "FP8_E4M3", True),
        ({"not_in": ["auto"]}, "fp8", True),
        ({"lt": 80}, 75, True),
        ({"ge": 89}, 86, False),
        ({"contains": "Gemma4ForCausalLM"}, ["Gemma4ForCausalLM"], True),
        ({"contains": "nvfp4"}, "nvidia/model-NVFP4", True),
        ({"contains_any": ["a", "b"]}, ["c"], False),
        ({"matches": r"^0\.25\.0$"}, "0.25.0", True),
        ({"version": ">=0.25.0,<0.25.1"}, "0.25.0+cu130", True),
        # PEP 440: `<V` excludes pre-releases of V itself
        ({"version": ">=0.25.0,<0.25.1"}, "0.25.1rc1.dev3+gabc", False),
        ({"version": "<2.9"}, "2.11.0+cu130", False),
        ({"divisible_by": 4}, 64, True),
        ({"divisible_by": 3}, 64, False),
    ],
)
def test_operators(cond, value, expected):
    condition = compile_condition({"fact": "serve.kv_cache_dtype", **cond})
    facts = Facts.from_flat({"serve.kv_cache_dtype": value})
    assert condition.evaluate(facts).value is expected


def test_divisible_by_fact_and_missing_divisor():
    cond = compile_condition(
        {
            "fact": "model.num_attention_heads",
            "divisible_by": {"fact": "serve.tensor_parallel_size"},
        }
    )
    assert (
        cond.evaluate(facts_of(model__num_attention_heads=32, serve__tensor_parallel_size=3)).value
        is False
    )
    assert (
        cond.evaluate(facts_of(model__num_attention_heads=32, serve__tensor_parallel_size=4)).value
        is True
    )
    out = cond.evaluate(facts_of(model__num_attention_heads=32))
    assert out.value is None and out.missing == ["serve.tensor_parallel_size"]


def test_three_valued_logic():
    known_false = {"fact": "serve.tensor_parallel_size", "gt": 1}
    missing = {"fact": "model.architectures", "contains": "X"}
    facts = facts_of(serve__tensor_parallel_size=1)
    facts.mark_missing("model", "no config.json found")
    assert compile_condition({"all": [known_false, missing]}).evaluate(facts).value is False
    out = compile_condition({"any": [known_false, missing]}).evaluate(facts)
    assert out.value is None and out.missing == ["model.architectures"]
    assert compile_condition({"not": missing}).evaluate(facts).value is None
    true_any = compile_condition(
        {"any": [{"fact": "serve.tensor_parallel_size", "eq": 1}, missing]}
    )
    decided = true_any.evaluate(facts)
    assert decided.value is True and decided.missing == []


def test_support_is_the_decided_tests_that_make_a_condition_hold():
    tp_gt_1 = {"fact": "serve.tensor_parallel_size", "gt": 1}  # false: argues against
    tp_is_1 = {"fact": "serve.tensor_parallel_size", "eq": 1}  # true
    missing = {"fact": "model.architectures", "contains": "X"}
    facts = facts_of(serve__tensor_parallel_size=1)
    facts.mark_missing("model", "no config.json found")

    def support(node):
        out = compile_condition(node).evaluate(facts)
        return [t.op for t in out.evidence], [t.op for t in out.support]

    # an undecided `any`: its false part was checked, and supports nothing
    assert support({"any": [tp_gt_1, missing]}) == (["gt"], [])
    assert support({"any": [tp_gt_1, tp_is_1]}) == (["eq"], ["eq"])
    assert support({"all": [tp_is_1, missing]}) == (["eq"], ["eq"])
    # under `not` a false test is what makes the negation hold
    assert support({"not": tp_gt_1}) == (["gt"], ["gt"])
    assert support({"not": {"any": [tp_gt_1, tp_is_1]}}) == (["eq"], [])


@pytest.mark.parametrize(
    "cond, expected",
    [
        ({"eq": "fp8"}, False),
        ({"ne": "fp8"}, True),
        ({"in": ["fp8"]}, False),
        ({"not_in": ["fp8"]}, True),
        ({"gt": 1}, False),
        ({"contains": "x"}, False),
        ({"matches": "None|.*"}, False),
        ({"version": ">=0"}, False),
        ({"divisible_by": 2}, False),
    ],
)
def test_absent_facts_only_satisfy_negative_tests(cond, expected):
    # serve line known, flag not given: the fact is absent, not missing
    facts = facts_of(serve__tensor_parallel_size=1)
    outcome = compile_condition({"fact": "serve.quantization", **cond}).evaluate(facts)
    assert outcome.value is expected and outcome.missing == []
    facts.mark_missing("serve", "no serve line given")
    assert compile_condition({"fact": "serve.quantization", **cond}).evaluate(facts).value is None


def test_exists_distinguishes_absent_from_uncollected():
    cond = compile_condition({"fact": "packages.deep-gemm", "exists": False})
    assert cond.evaluate(Facts()).value is True  # looked for, not installed
    facts = Facts()
    facts.mark_missing("packages", "no Python environment to inspect")
    assert cond.evaluate(facts).value is None


@pytest.mark.parametrize(
    "node, field",
    [
        ({"fact": "gpu.bogus", "eq": 1}, "when.fact"),
        ({"fact": "gpu.count", "between": 1}, "when.between"),
        ({"fact": "gpu.count", "eq": 1, "ne": 2}, "when"),
        ({"all": []}, "when.all"),
        ({"all": [{"fact": "gpu.names", "matches": "("}]}, "when.all[0].matches"),
        ({"fact": "vllm.version", "version": "~~1"}, "when.version"),
        ({"fact": "gpu.count", "divisible_by": {"fact": "nope.x"}}, "when.divisible_by"),
    ],
)
def test_condition_errors_name_the_field(node, field):
    with pytest.raises(ConditionError) as err:
        compile_condition(node)
    assert err.value.field == field


# -- loader --------------------------------------------------------------------------------


def test_loader_reports_every_problem_with_file_and_field():
    bad = rule_data(
        severity="fatal",
        code="XX1",
        when={"fact": "model.nope", "eq": 1},
        signatures=["("],
        references=["http://insecure"],
        extra=1,
    )
    bad["details"] = "## What happens\nonly this"
    _, problems = parse_rule(bad, Path("rules/model/MODEL901.yaml"))
    text = "\n".join(problems)
    for needle in (
        "MODEL901.yaml:severity:",
        "MODEL901.yaml:code:",
        "when.fact: unknown fact path",
        "signatures[0]: bad regex",
        "references[0]",
        "extra: unknown field",
        "details: missing section '## Why'",
    ):
        assert needle in text, (needle, text)


def test_fixed_must_follow_introduced():
    data = rule_data(
        affected={"ranges": [{"events": [{"introduced": "0.25.0"}, {"fixed": "0.24.0"}]}]}
    )
    _, problems = parse_rule(data, Path("MODEL901.yaml"))
    assert any("is not after introduced" in p for p in problems)


def test_bad_rule_dir_raises_input_error(tmp_path):
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "MODEL901.yaml").write_text("code: [unclosed\n")
    with pytest.raises(RuleFileError) as err:
        load_rules([tmp_path])
    assert "MODEL901.yaml" in str(err.value) and "YAML does not parse" in str(err.value)


def test_duplicate_codes_rejected(tmp_path):
    for sub in ("a", "b"):
        (tmp_path / sub).mkdir()
        (tmp_path / sub / "MODEL901.yaml").write_text(yaml.safe_dump(rule_data(slug=f"s-{sub}")))
    _, problems = validate_dir(tmp_path)
    assert any("is also used by" in p for p in problems)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=20),
        lambda children: (
            st.lists(children, max_size=4)
            | st.dictionaries(
                st.sampled_from(
                    [*sorted(rule_data()), "fact", "all", "any", "not", "eq", "events"]
                ),
                children,
                max_size=6,
            )
        ),
        max_leaves=25,
    )
)
def test_fuzz_rule_loader_only_reports_problems(data):
    # Any YAML-shaped data: a rule or a list of problems, never an exception.
    rule, problems = parse_rule(data, Path("MODEL901.yaml"))
    assert (rule is None) == bool(problems)


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.sampled_from(sorted(rule_data())), st.text(max_size=10), max_size=5))
def test_fuzz_rule_loader_mutated_fields(mutation):
    data = rule_data()
    data.update(mutation)
    rule, problems = parse_rule(data, Path("MODEL901.yaml"))
    assert (rule is None) == bool(problems)


# -- fix state and verdicts ---------------------------------------------------------------------


def test_release_ranges():
    rule = make_rule()
    assert evaluate_rule(rule, facts_of(**BASE, vllm__version="0.23.0")).verdict == APPLIES
    assert evaluate_rule(rule, facts_of(**BASE, vllm__version="0.24.0")).verdict == NOT_APPLIES
    assert evaluate_rule(rule, facts_of(**BASE, vllm__version="0.21.0")).verdict == NOT_APPLIES


def test_nightly_versions_span_their_base_release_and_the_next():
    rule = make_rule()  # affected 0.22.0 <= v < 0.24.0
    finding = evaluate_rule(rule, facts_of(**BASE, vllm__version="0.23.1rc1.dev20+g0d8097964"))
    assert finding.verdict == APPLIES
    assert finding.confidence == "medium"
    assert finding.fix_state.method == "dev-version"
    # a nightly after the fixing release's base is clear
    after = evaluate_rule(rule, facts_of(**BASE, vllm__version="0.24.1rc1.dev3+gabcdef0"))
    assert after.verdict == NOT_APPLIES and after.fix_state.method == "dev-version"
    # the base release, when known, places the build; the fix in the next release may be in it
    facts = facts_of(**BASE, vllm__version="0.24.0rc1.dev5+gabc", vllm__base_release="0.23.0")
    state = evaluate_rule(rule, facts).fix_state
    assert state.state == "affected" and "descends from 0.23.0" in state.detail
    assert "the fix came in 0.24.0" in state.detail
    # a bug introduced in the next release may already be in a nightly of the base
    late = make_rule(
        affected={"ranges": [{"events": [{"introduced": "0.24.0"}, {"fixed": "0.25.0"}]}]}
    )
    facts = facts_of(
        **BASE, vllm__version="0.23.1rc1.dev20+g0d8097964", vllm__base_release="0.23.0"
    )
    state = evaluate_rule(late, facts).fix_state
    assert state.state == "affected" and "the bug came in 0.24.0, after 0.23.0" in state.detail
    # a nightly of 0.20.0 resembles 0.20.0-0.23.0 at most (knowledge.match_release)
    old = facts_of(**BASE, vllm__version="0.20.1rc1.dev2+gabc", vllm__base_release="0.20.0")
    assert evaluate_rule(late, old).verdict == NOT_APPLIES


def test_fingerprint_beats_version(tmp_path):
    tree = tmp_path / "vllm"
    target = tree / "model_executor" / "models"
    target.mkdir(parents=True)
    (target / "diffusion_gemma.py").write_text("x = 1\n\ndef f(sc_vocab_start):\n    pass\n")
    rule = make_rule()
    facts = facts_of(**BASE, vllm__version="0.23.1rc1.dev20+g0d8097964", vllm__location=str(tree))
    finding = evaluate_rule(rule, facts)
    assert finding.verdict == NOT_APPLIES
    assert finding.fix_state.method == "fingerprint"
    assert "diffusion_gemma.py:3" in finding.fix_state.detail
    (target / "diffusion_gemma.py").write_text("def f(vocab_start): pass\n")
    from vllm_doctor.engine import fixstate

    fixstate._read.cache_clear()
    assert evaluate_rule(rule, facts).verdict == APPLIES


def test_fingerprint_file_absent_falls_back_to_version(tmp_path):
    tree = tmp_path / "vllm"
    tree.mkdir()
    state = fix_state(make_rule(), facts_of(**BASE, vllm__version="0.23.0"), vllm_tree=tree)
    assert state.method == "release-range" and state.state == "affected"


def test_what_if_version_ignores_installed_tree(tmp_path):
    tree = tmp_path / "vllm" / "model_executor" / "models"
    tree.mkdir(parents=True)
    (tree / "diffusion_gemma.py").write_text("sc_vocab_start")
    facts = facts_of(**BASE, vllm__location=str(tmp_path / "vllm"))
    facts.set("vllm.version", "0.23.0", Source.USER)
    assert evaluate_rule(make_rule(), facts).verdict == APPLIES


def test_undecided_lists_missing_facts_and_how():
    facts = Facts.from_flat({"serve.tensor_parallel_size": 2, "vllm.version": "0.23.0"})
    facts.mark_missing("model", "no config.json found")
    finding = evaluate_rule(make_rule(), facts)
    assert finding.verdict == UNDECIDED
    assert [m.path for m in finding.missing] == ["model.architectures"]
    assert finding.missing[0].reason == "no config.json found"
    assert "--model-config" in finding.missing[0].how
    no_version = evaluate_rule(make_rule(), facts_of(**BASE))
    assert no_version.verdict == UNDECIDED and no_version.missing[0].path == "vllm.version"


def test_log_signature_applies_and_evidence_shown():
    log = "INFO warmup\nRuntimeError: a and b must have same reduction dim, but got [s88, s3] X [65536, 2816].\n"
    finding = evaluate_rule(make_rule(), Facts(), log)
    assert finding.verdict == APPLIES
    assert finding.log_matches == [
        "RuntimeError: a and b must have same reduction dim, but got [s88, s3] X [65536, 2816]."
    ]
    applied = evaluate_rule(make_rule(), facts_of(**BASE, vllm__version="0.23.0"))
    assert {e.path for e in applied.evidence} == {
        "model.architectures",
        "serve.tensor_parallel_size",
    }


def test_unversioned_rule_applies_on_conditions_alone():
    rule_no_affected, _ = parse_rule(
        {k: v for k, v in rule_data().items() if k != "affected"}, Path("MODEL901.yaml")
    )
    assert evaluate_rule(rule_no_affected, facts_of(**BASE)).verdict == APPLIES


# -- cases runner ----------------------------------------------------------------------------------


def test_cases_runner_catches_wrong_expectations(tmp_path):
    rules = tmp_path / "model"
    rules.mkdir()
    (rules / "MODEL901.yaml").write_text(yaml.safe_dump(rule_data()))
    (rules / "MODEL901.cases.yaml").write_text(
        textwrap.dedent("""
        cases:
          - name: right
            expect: applies
            facts: {model.architectures: [DiffusionGemmaForBlockDiffusion], serve.tensor_parallel_size: 2, vllm.version: "0.23.0"}
          - name: wrong
            expect: applies
            facts: {model.architectures: [DiffusionGemmaForBlockDiffusion], serve.tensor_parallel_size: 1, vllm.version: "0.23.0"}
          - name: fingerprint
            expect: not-applies
            facts: {model.architectures: [DiffusionGemmaForBlockDiffusion], serve.tensor_parallel_size: 2, vllm.version: "0.23.0"}
            vllm_files: {model_executor/models/diffusion_gemma.py: "sc_vocab_start"}
          - name: bad-log
            expect: applies
            facts: {}
            log: "some other error"
    """)
    )
    (rule,) = load_rules([tmp_path])
    results, coverage = run_cases(rule)
    assert [r.ok for r in results] == [True, False, True, False]
    assert "expected applies, got not-applies" in results[1].message
    assert "does not match any signature" in results[3].message
    assert coverage == []


def test_cases_coverage_requires_a_case_on_real_input_or_a_reason(tmp_path):
    rules = tmp_path / "model"
    rules.mkdir()
    data = rule_data()
    del data["no_real_input"]
    (rules / "MODEL901.yaml").write_text(yaml.safe_dump(data))
    cases = rules / "MODEL901.cases.yaml"
    applies = (
        "  - {name: a, expect: applies, facts: {model.architectures: "
        "[DiffusionGemmaForBlockDiffusion], serve.tensor_parallel_size: 2, vllm.version: '0.23.0'}}\n"
    )
    real = (
        "  - name: real\n    expect: not-applies\n"
        "    source: https://github.com/vllm-project/vllm/issues/45719\n"
        "    serve: vllm serve google/gemma-3-1b-it\n    facts: {vllm.version: '0.23.0'}\n"
    )
    cases.write_text("cases:\n" + applies + "  - {name: b, expect: not-applies, facts: {}}\n")
    (rule,) = load_rules([tmp_path])
    _, coverage = run_cases(rule)
    assert len(coverage) == 1 and "MODEL901: no case on real input" in coverage[0]
    # a case with its input and the URL where the input was seen satisfies it
    cases.write_text("cases:\n" + applies + real)
    results, coverage = run_cases(rule)
    assert coverage == [] and all(r.ok for r in results), results
    # a source without an input, or one that is not a URL, is a failing case
    cases.write_text(
        "cases:\n" + applies + real.replace("    serve: vllm serve google/gemma-3-1b-it\n", "")
    )
    results, coverage = run_cases(rule)
    assert "the case gives none" in results[1].message and coverage
    assert case_file_problems(rule) == [
        f"{cases}:cases[1].source: names where an input was seen, but the case gives none "
        "(serve, serve_config, manifest, model_config, report, log)"
    ]


def test_cases_coverage_requires_both_kinds(tmp_path):
    rules = tmp_path / "model"
    rules.mkdir()
    (rules / "MODEL901.yaml").write_text(yaml.safe_dump(rule_data()))
    (rules / "MODEL901.cases.yaml").write_text(
        "cases:\n  - {name: a, expect: undecided, facts: {}}\n"
    )
    (rule,) = load_rules([tmp_path])
    _, coverage = run_cases(rule)
    assert len(coverage) == 2


# -- ignore file ----------------------------------------------------------------------------------


def test_ignore_file_suppresses_and_expires(tmp_path):
    path = tmp_path / "ignore.yaml"
    path.write_text(
        "ignore:\n  - {code: MODEL9, reason: accepted}\n"
        "  - {code: MODEL901, reason: old, expires: 2020-01-01}\n"
    )
    entries = load_ignore_file(path)
    finding = evaluate_rule(make_rule(), facts_of(**BASE, vllm__version="0.23.0"))
    notes = apply_ignores([finding], entries, today=dt.date(2026, 11, 22))
    assert finding.suppressed == "accepted"
    assert notes and "expired on 2020-01-01" in notes[0]


@pytest.mark.parametrize(
    "text, problem, where",
    [
        ("ignore: [unclosed", "does not parse", ""),
        ("- a\n", "needs a top-level `ignore:` list", ""),
        ("ignore:\n  - {reason: r}\n", "needs `code`", ":ignore[0]"),
        ("ignore:\n  - {code: X}\n", "needs a `reason`", ":ignore[0]"),
        (
            "ignore:\n  - {code: X, reason: r}\n  - {code: X, reason: r, expires: soon}\n",
            "is not a date",
            ":ignore[1]",
        ),
    ],
)
def test_bad_ignore_file(tmp_path, text, problem, where):
    path = tmp_path / "ignore.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as err:
        load_ignore_file(path)
    assert problem in str(err.value)
    # the message names the file, and the entry where there is one
    assert err.value.source == f"{path}{where}", err.value.source


def test_lazy_regexes_fail_as_input_errors(tmp_path):
    data = rule_data(signatures=["(unclosed"])
    rule, problems = parse_rule(data, Path("rules/model/MODEL901.yaml"), strict=False)
    assert rule is not None and problems == []  # not compiled while loading for `check`
    assert evaluate_rule(rule, facts_of(**BASE, vllm__version="0.23.0")).verdict == APPLIES
    with pytest.raises(InputError) as err:
        evaluate_rule(rule, Facts(), "some log")
    assert "MODEL901.yaml" in str(err.value) and "signatures[0]: bad regex" in str(err.value)
    _, strict_problems = parse_rule(data, Path("rules/model/MODEL901.yaml"))
    assert strict_problems and "signatures[0]: bad regex" in strict_problems[0]
