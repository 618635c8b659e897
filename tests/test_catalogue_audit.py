"""`rules validate`'s audit of rule ranges against the error catalogue and the model registry,
on the shipped rule base and on copies of a shipped rule with its range or condition changed."""

from __future__ import annotations

import shutil
from pathlib import Path

from doctor_forks import doctor_run

from vllm_doctor.engine.catalogue_audit import range_warnings
from vllm_doctor.engine.loader import default_rules_dir, validate_dir

SHIPPED = default_rules_dir()


def test_the_shipped_rules_pass_validate_strict():
    run = doctor_run("rules", "validate", "--strict", timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().endswith("rules valid") and not run.stderr, run.stderr


def env008_copy(tmp_path: Path, edit) -> list[str]:
    """The audit's warnings for ENV008 (DeepSeek-V3.2's indexer needs DeepGEMM) with ``edit``
    applied to its YAML text."""
    (tmp_path / "env").mkdir()
    shutil.copy(SHIPPED / "env" / "ENV008.cases.yaml", tmp_path / "env")
    # alone in its directory: the rule it is related to is not there
    text = (SHIPPED / "env" / "ENV008.yaml").read_text(encoding="utf-8")
    text = text.replace("related: [ENV002]\n", "")
    (tmp_path / "env" / "ENV008.yaml").write_text(edit(text), encoding="utf-8")
    rules, problems = validate_dir(tmp_path)
    assert not problems and len(rules) == 1, problems
    return range_warnings(rules)


def test_a_message_older_than_the_rule_s_architectures_is_no_contradiction(tmp_path):
    # "DeepGEMM backend is not available ..." is in the catalogue from 0.10.0 (any DeepGEMM
    # kernel); DeepseekV32ForCausalLM is registered from 0.11.0, where the rule's range starts
    assert env008_copy(tmp_path, lambda text: text) == []


def test_a_range_after_the_architectures_arrive_is_still_a_contradiction(tmp_path):
    late = env008_copy(
        tmp_path, lambda text: text.replace('introduced: "0.11.0"', 'introduced: "0.12.0"')
    )
    assert len(late) == 1
    assert "ENV008.yaml:signatures[2]" in late[0] and "from 0.10.0" in late[0]
    assert "registry has DeepseekV32ForCausalLM/GlmMoeDsaForCausalLM from 0.11.0" in late[0]
    assert "starts at 0.12.0" in late[0]


def test_an_architecture_the_rule_does_not_require_sets_no_bound(tmp_path):
    # the architecture test under `any`: the rule could apply to another model, from 0.10.0
    def optional(text: str) -> str:
        test = (
            "    - {fact: model.architectures, contains_any: [DeepseekV32ForCausalLM, "
            "GlmMoeDsaForCausalLM]}\n"
        )
        assert test in text
        return text.replace(
            test,
            "    - any:\n    "
            + test
            + "        - {fact: model.architectures, contains: SomeOtherModel}\n",
        )

    (line,) = env008_copy(tmp_path, optional)
    assert "from 0.10.0" in line and "starts at 0.11.0" in line and "registry" not in line
