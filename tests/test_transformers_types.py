"""Which transformers knows which model type and which package versions it checks when
imported (tools/transformers_types.py, the transformers_types table read from the real
transformers and vLLM wheels), and how facts/release_transformers.py judges them (ENV122,
ENV123)."""

from __future__ import annotations

import sys
from pathlib import Path

from packaging.version import Version

from vllm_doctor.engine.evaluate import APPLIES, NOT_APPLIES, evaluate_rule
from vllm_doctor.engine.loader import load_rule_file
from vllm_doctor.facts.collect import CollectOptions, collect_facts
from vllm_doctor.facts.model import Facts, Source
from vllm_doctor.knowledge import load

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))
import transformers_types  # noqa: E402


def verdict(code: str, facts: Facts) -> str:
    rule, problems = load_rule_file(next(REPO.glob(f"rules/*/{code}.yaml")))
    assert rule is not None, problems
    return evaluate_rule(rule, facts).verdict


# -- transformers' model types (tools/transformers_types.py, ENV122) ---------------------------


def test_model_types_read_every_form_of_config_mapping_names():
    configuration_auto = (
        "from collections import OrderedDict\n"
        "from .auto_mappings import CONFIG_MAPPING_NAMES\n"
        'CONFIG_MAPPING_NAMES.update({"mlcd": "MLCDVisionConfig"})\n'
        'CONFIG_MAPPING_NAMES = OrderedDict(**{"gpt-sw3": "GPT2Config"}, **CONFIG_MAPPING_NAMES)\n'
    )
    auto_mappings = 'CONFIG_MAPPING_NAMES = OrderedDict([("gemma4", "Gemma4Config")])\n'
    older = 'CONFIG_MAPPING_NAMES = OrderedDict(\n    [\n        ("albert", "AlbertConfig"),\n    ]\n)\n'
    assert transformers_types.model_types({"a": configuration_auto, "b": auto_mappings}) == [
        "gemma4",
        "gpt-sw3",
        "mlcd",
    ]
    assert transformers_types.model_types({"a": older}) == ["albert"]


def test_vllm_config_registry_reads_the_dict_and_the_lazy_forms():
    old = '_CONFIG_REGISTRY: dict[str, type] = {"chatglm": ChatGLMConfig, "dbrx": DbrxConfig}\n'
    new = (
        '_CONFIG_REGISTRY: dict = LazyConfigDict(chatglm="ChatGLMConfig", RefinedWeb="RWConfig")\n'
    )
    assert transformers_types.vllm_config_registry(old) == ["chatglm", "dbrx"]
    assert transformers_types.vllm_config_registry(new) == ["RefinedWeb", "chatglm"]


GEMMA4 = REPO / "tests" / "fixtures" / "models" / "gemma-4-31B-it" / "config.json"


def gemma4_facts(vllm: str, transformers: str, serve: str = "vllm serve google/gemma-4-31B-it"):
    given = Facts()
    given.set("vllm.version", vllm, Source.REPORT, "test")
    given.set("packages.transformers", transformers, Source.REPORT, "test")
    return collect_facts(
        CollectOptions(
            serve_string=serve,
            model_config=GEMMA4,
            probe_machine=False,
            environ={},
            offline=True,
            given=given,
        )
    )


def test_gemma4_on_transformers_4_57_names_the_releases_that_know_it():
    table = load("transformers_types")
    knowing = [r for r in table.releases if table.get("gemma4", r) is not None]
    assert knowing and Version(knowing[0]) >= Version("5.0.0")  # vLLM PR 38828: 4.57.5 fails
    facts = gemma4_facts("0.19.0", "4.57.5")
    lines = facts.value("release.stack.model_type_unknown")
    assert lines and "transformers 4.57.5 does not know model_type gemma4" in lines[0]
    assert knowing[0] in lines[0]
    # vLLM 0.19.0 requires transformers<5: the fix is a newer vLLM, named
    fix = facts.value("release.stack.model_type_fix")
    assert "upgrade vLLM" in fix and "0.19.1" in fix
    assert verdict("ENV122", facts) == APPLIES


def test_gemma4_on_a_transformers_that_knows_it():
    facts = gemma4_facts("0.19.1", "5.5.0")
    assert facts.value("release.stack.model_type_unknown") == []
    assert verdict("ENV122", facts) == NOT_APPLIES


def test_unknown_transformers_version_cannot_decide():
    facts = collect_facts(
        CollectOptions(
            serve_string="vllm serve google/gemma-4-31B-it",
            model_config=GEMMA4,
            probe_machine=False,
            environ={},
            offline=True,
            given=Facts.from_flat({"vllm.version": "0.19.0"}),
        )
    )
    assert facts.get("release.stack.model_type_unknown") is None


def test_unread_transformers_build_is_known_through_the_release_before_never_an_error():
    known = gemma4_facts("0.28.0", "5.16.2")  # no such wheel: 5.16.1 knows gemma4
    assert known.value("release.stack.model_type_unknown") == []
    unread = gemma4_facts("0.19.0", "4.57.9")  # 4.57.6 does not know it: not decided
    assert unread.get("release.stack.model_type_unknown") is None
    assert "not among the releases read" in unread.why_missing("release.stack.model_type_unknown")


CHECK = """
from .dependency_versions_table import deps
pkgs_to_check_at_runtime = ["python", "tqdm", "tokenizers", "huggingface-hub", "accelerate"]
for pkg in pkgs_to_check_at_runtime:
    if pkg in deps:
        if pkg == "tokenizers":
            if not is_tokenizers_available():
                continue
        elif pkg == "accelerate":
            if not is_accelerate_available():
                continue
        require_version_core(deps[pkg])
"""
TABLE = """deps = {
    "python": "python>=3.10.0",
    "tqdm": "tqdm>=4.27",
    "tokenizers": "tokenizers>=0.22.0,<=0.23.0",
    "huggingface-hub": "huggingface-hub>=1.5.0,<2.0",
    "accelerate": "accelerate>=1.1.0",
}
"""


def test_runtime_checks_read_the_specs_and_the_optional_packages():
    checks = transformers_types.runtime_checks(
        {transformers_types.CHECK_FILES[0]: CHECK, transformers_types.CHECK_FILES[1]: TABLE}
    )
    assert checks == {
        "tqdm": {"spec": ">=4.27", "optional": False},
        "tokenizers": {"spec": ">=0.22.0,<=0.23.0", "optional": True},
        "huggingface-hub": {"spec": ">=1.5.0,<2.0", "optional": False},
        "accelerate": {"spec": ">=1.1.0", "optional": True},
    }


def transformers_facts(values: dict) -> Facts:
    given = Facts()
    for path, value in values.items():
        given.set(path, value, Source.REPORT, "test")
    return collect_facts(
        CollectOptions(
            serve_string="vllm serve Qwen/Qwen3-8B",
            probe_machine=False,
            environ={},
            offline=True,
            given=given,
        )
    )


def test_shipped_checks_of_transformers_5_8_1():
    table = load("transformers_types")
    assert table.get("check:tokenizers", "5.8.1").value["optional"] is True
    assert table.get("check:huggingface-hub", "5.8.1").value["spec"].startswith(">=1.")


def test_tokenizers_behind_transformers_is_refused_with_the_spec():
    facts = transformers_facts(
        {
            "vllm.version": "0.28.0",
            "packages.transformers": "5.8.1",
            "packages.tokenizers": "0.21.1",
        }
    )
    lines = facts.value("release.stack.transformers_refuses")
    spec = load("transformers_types").get("check:tokenizers", "5.8.1").value["spec"]
    assert lines == [
        f"tokenizers 0.21.1: transformers 5.8.1 requires tokenizers{spec} when it is imported "
        "(dependency_versions_check: ImportError)"
    ]
    assert (
        facts.value("release.stack.transformers_refuses_fix") == f"pip install 'tokenizers{spec}'"
    )
    assert verdict("ENV123", facts) == APPLIES


def test_packages_of_unknown_version_are_not_judged():
    facts = transformers_facts({"vllm.version": "0.28.0", "packages.transformers": "5.8.1"})
    assert facts.value("release.stack.transformers_refuses") == []
    assert verdict("ENV123", facts) == NOT_APPLIES
