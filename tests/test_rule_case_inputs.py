"""Rule cases with real inputs (`serve:`, `serve_config:`, `model_config:`, `report:`, `log:`)
run through the collectors `check` uses, so a case can show what a rule written against the
facts alone would miss."""

from __future__ import annotations

import tempfile
import textwrap
from pathlib import Path

import pytest
from doctor_forks import doctor_run

from vllm_doctor.engine.cases import collect_case_facts, run_cases
from vllm_doctor.engine.loader import load_rules
from vllm_doctor.facts.model import Facts

ROOT = Path(__file__).resolve().parents[1]
REPORTS = ROOT / "tests" / "fixtures" / "reports"
SECTIONS = "".join(
    f"  ## {s}\n  text\n"
    for s in ("What happens", "Why", "How to confirm", "Known false positives")
)


def write_rule(root: Path, when: str, cases: str, code: str = "PAR901") -> Path:
    """A rule (and its cases) in ``root/par``; returns the cases file."""
    folder = root / "par"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{code}.yaml").write_text(
        f"code: {code}\nslug: case-inputs-{code.lower()}\nstatus: preview\nseverity: warning\n"
        "confidence: low\nsummary: a rule for the case-input tests\nphase: startup\n"
        f"when:\n{textwrap.indent(textwrap.dedent(when).strip(), '  ')}\n"
        "no_real_input: a rule made by the test\n"
        "references: [https://github.com/vllm-project/vllm/issues/1]\n"
        f"details: |\n{SECTIONS}"
    )
    path = folder / f"{code}.cases.yaml"
    path.write_text(textwrap.dedent(cases))
    return path


def results_of(root: Path) -> dict[str, tuple[bool, str]]:
    (rule,) = load_rules([root])
    results, coverage = run_cases(rule)
    assert coverage == []
    return {r.name: (r.ok, r.message) for r in results}


EPLB_CASES = """
    cases:
      - name: given
        expect: applies
        serve: "vllm serve m --enable-eplb"
      - name: negated
        expect: not-applies
        serve: "vllm serve m --no-enable-eplb"
"""


def test_a_rule_on_the_plain_flag_name_fails_the_negated_serve_line(tmp_path):
    # written naively: "the flag was given" read from serve.flags
    write_rule(tmp_path / "naive", "fact: serve.flags\ncontains: enable-eplb", EPLB_CASES)
    naive = results_of(tmp_path / "naive")
    assert naive["given"] == (True, "ok")
    assert not naive["negated"][0] and "expected not-applies, got applies" in naive["negated"][1]
    # the serve-line collector records the negation's value under the option's own fact
    write_rule(tmp_path / "right", "fact: serve.enable_eplb\neq: true", EPLB_CASES)
    assert results_of(tmp_path / "right") == {"given": (True, "ok"), "negated": (True, "ok")}


def test_model_config_inline_and_from_a_fixture_path(tmp_path):
    fixture = tmp_path / "fixtures" / "llama" / "config.json"
    fixture.parent.mkdir(parents=True)
    fixture.write_text(
        (ROOT / "tests/fixtures/models/Llama-3.1-8B-Instruct/config.json").read_text()
    )
    write_rule(
        tmp_path,
        """
        all:
          - {fact: serve.tensor_parallel_size, gt: 1}
          - not: {fact: model.num_attention_heads, divisible_by: {fact: serve.tensor_parallel_size}}
    """,
        """
        cases:
          - name: fixture-tp6
            expect: applies
            serve: "vllm serve meta-llama/Llama-3.1-8B-Instruct -tp 6"
            model_config: fixtures/llama
          - name: inline-tp4
            expect: not-applies
            serve: "vllm serve meta-llama/Llama-3.1-8B-Instruct -tp 4"
            model_config: {architectures: [LlamaForCausalLM], model_type: llama,
                           num_attention_heads: 32, num_key_value_heads: 8}
          - name: no-config
            expect: undecided
            serve: "vllm serve meta-llama/Llama-3.1-8B-Instruct -tp 6"
    """,
    )
    results = results_of(tmp_path)
    assert results["fixture-tp6"] == (True, "ok")
    assert results["inline-tp4"] == (True, "ok")
    # no config given: the model collector finds none (no cache, no Hub) and says so
    assert results["no-config"] == (True, "ok")


@pytest.mark.parametrize("path", ["../outside/config.json", "{abs}", "link/config.json"])
def test_fixture_paths_stay_inside_the_repository(tmp_path, path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "config.json").write_text('{"num_attention_heads": 32}')
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "pyproject.toml").write_text("")
    (repo / "link").symlink_to(outside)
    path = path.replace("{abs}", str(outside / "config.json"))
    write_rule(
        repo / "rules",
        "fact: model.num_attention_heads\neq: 32",
        f"""
        cases:
          - {{name: pos, expect: applies, model_config: {path!r}}}
          - {{name: neg, expect: not-applies, facts: {{model.num_attention_heads: 8}}}}
    """,
    )
    ok, message = results_of(repo / "rules")["pos"]
    assert (
        not ok
        and "model_config" in message
        and ("leaves the repository" in message or "relative to" in message)
    ), message


def test_report_serve_config_and_log_through_their_collectors(tmp_path):
    report = (REPORTS / "rtx5060ti_x2_pcie.txt").read_text()
    write_rule(
        tmp_path,
        """
        all:
          - {fact: gpu.count, eq: 2}
          - {fact: torch.version, version: ">=2.11"}
          - {fact: serve.tensor_parallel_size, eq: 2}
    """,
        f"""
        cases:
          - name: report-config-log
            expect: applies
            report: {str(REPORTS.relative_to(ROOT) / "rtx5060ti_x2_pcie.txt")!r}
            serve_config: {{model: m, tensor-parallel-size: 2}}
          - name: inline-report-tp1
            expect: not-applies
            report: |
{textwrap.indent(report, " " * 14)}
            serve_config: {{model: m, tensor-parallel-size: 1}}
            log: "line one\\nline two\\n"
    """,
    )
    # no repository around tmp_path: fixture paths are read from the rule directory
    target = tmp_path / REPORTS.relative_to(ROOT) / "rtx5060ti_x2_pcie.txt"
    target.parent.mkdir(parents=True)
    target.write_text(report)
    assert results_of(tmp_path) == {
        "report-config-log": (True, "ok"),
        "inline-report-tp1": (True, "ok"),
    }
    (rule,) = load_rules([tmp_path])
    case = {"report": report, "log": "line one\nline two\n"}
    with tempfile.TemporaryDirectory() as tmp:
        facts = collect_case_facts(rule, case, Facts(), Path(tmp))
    assert facts.value("log.lines") == 2 and facts.get("gpu.count").source == "collect-env report"
    assert facts.why_missing("serve")  # no serve line given: unknown, with the reason


def test_a_bad_serve_line_fails_the_case_with_one_line(tmp_path):
    write_rule(
        tmp_path,
        "fact: serve.tensor_parallel_size\ngt: 1",
        """
        cases:
          - {name: bad, expect: applies, serve: "vllm serve m -tp 0"}
          - {name: neg, expect: not-applies, serve: "vllm serve m"}
    """,
    )
    results = results_of(tmp_path)
    assert not results["bad"][0] and "-tp: 0 is out of range" in results["bad"][1]
    assert results["neg"] == (True, "ok")


# -- rules validate: ranges against the error catalogue --------------------------------------


def eplb_rule(root: Path, introduced: str) -> None:
    write_rule(root, "fact: serve.enable_eplb\neq: true", EPLB_CASES, code="PAR902")
    path = root / "par" / "PAR902.yaml"
    path.write_text(
        path.read_text()
        + textwrap.dedent(f"""\
        affected:
          ranges:
            - events:
                - introduced: "{introduced}"
        signatures:
          - 'enable_expert_parallel must be True to use EPLB'
    """)
    )


def validate(root: Path, *extra: str):

    return doctor_run("rules", "validate", "--rules-dir", str(root), *extra, timeout=120)


def test_validate_warns_on_a_range_the_error_catalogue_contradicts(tmp_path):
    # vLLM raises "enable_expert_parallel must be True to use EPLB." from 0.10.0 (errors.json)
    eplb_rule(tmp_path / "late", "0.18.0")
    run = validate(tmp_path / "late")
    assert run.returncode == 0, run.stderr
    (line,) = [ln for ln in run.stderr.splitlines() if ln.startswith("warning: ")]
    assert (
        "PAR902.yaml:signatures[0]" in line and "from 0.10.0" in line and "starts at 0.18.0" in line
    )
    assert "enable_expert_parallel must be True to use EPLB" in line
    strict = validate(tmp_path / "late", "--strict")
    assert strict.returncode == 2 and "starts at 0.18.0" in strict.stderr
    eplb_rule(tmp_path / "right", "0.10.0")
    right = validate(tmp_path / "right", "--strict")
    assert right.returncode == 0 and "warning" not in right.stderr, right.stderr


def test_a_signature_names_a_catalogue_message_as_vllm_prints_it():
    from vllm_doctor.engine.catalogue_audit import _first_releases, named_messages

    first = _first_releases()
    # a placeholder a generic class takes: the message is named (PAR001's signature)
    heads = named_messages(
        r"Total number of attention heads \(\d+\) must be divisible by "
        r"tensor parallel size \(\d+\)",
        first,
    )
    assert heads and all("must be divisible by tensor parallel size" in k for k in heads)
    # a signature that spells out the value of a placeholder is about that value only
    # (QUANT012: bitsandbytes and gguf among every method "Unknown quantization method" names)
    assert (
        named_messages(
            r"Unknown quantization method: (?:bitsandbytes|gguf)\. Must be one of", first
        )
        == []
    )
    assert named_messages(r"Unknown quantization method: \S+\. Must be one of", first)
