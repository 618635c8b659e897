"""The registries argparse does not show (knowledge tables ``parsers`` and ``checks``, the
registry's LoRA field), the facts facts/release_model.py and release_startup.py read from them,
and the rules ARGS103, ARGS104 and MODEL102, over the shipped tables (generated from the real
release wheels), real model configs (tests/fixtures/models) and the messages the releases
raise."""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import pytest
from test_cli_check import doctor
from test_release_facts import facts_for, verdict

from vllm_doctor import knowledge
from vllm_doctor.engine.evaluate import APPLIES, NOT_APPLIES, UNDECIDED
from vllm_doctor.engine.loader import load_rule_file
from vllm_doctor.engine.logmatch import scan_log

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools" / "extractors"))
import parsers as parsers_extractor  # noqa: E402
import speculative as speculative_extractor  # noqa: E402

# -- the tables ---------------------------------------------------------------------------


def test_parser_names_per_release():
    table = knowledge.load("parsers")
    assert table.first_release("tool:glm45") == "0.10.1"
    assert table.get("tool:glm4_moe", "0.10.0") is not None
    assert table.last_release("tool:glm4_moe") == "0.10.0"  # renamed glm45 in 0.10.1
    assert table.first_release("reasoning:deepseek_r1") == "0.8.0"
    assert table.get("tool:hermes", "0.33.0").value["class"] == "Hermes2ProToolParser"
    checks = table.get("@release", "0.10.0").value
    assert checks["tool_choices"] == "entrypoints/openai/cli_args.py"  # argparse choices
    assert checks["tool_check"]["requires"] == ["enable-auto-tool-choice"]
    assert checks["reasoning_check"]["requires"] == []
    # up to 0.8.x the reasoning parser was checked only with --enable-reasoning
    assert table.get("@release", "0.8.5").value["reasoning_check"]["requires"] == [
        "enable-reasoning"
    ]
    assert "tool_choices" not in table.get("@release", "0.10.1").value


def test_startup_checks_per_release():
    table = knowledge.load("checks")
    assert table.first_release("enable-eplb:enable-expert-parallel") == "0.10.0"
    assert table.first_release("enable-auto-tool-choice:tool-call-parser") == "0.8.0"
    site = table.get("enable-eplb:enable-expert-parallel", "0.33.0").value
    assert site["file"] == "config/parallel.py"
    assert site["message"] == "enable_expert_parallel must be True to use EPLB."


class _Release:
    """A release of a few files, as tools/wheelsrc.ReleaseSource reads one."""

    def __init__(self, files: dict[str, str]):
        self.files = files
        self.names = sorted(files)
        self.problems: list[str] = []

    def text(self, rel):
        return self.files.get(rel)

    def tree(self, rel):
        return ast.parse(self.files[rel]) if rel in self.files else None

    def problem(self, reason):
        self.problems.append(reason)


def test_parser_extractor_reads_every_registration_form():
    release = _Release(
        {
            "tool_parsers/a.py": "@ToolParserManager.register_module(['a1', 'a2'])\nclass A: ...\n"
            "@ToolParserManager.register_module()\nclass Bare: ...\n",
            "tool_parsers/__init__.py": "_TOOL_PARSERS_TO_REGISTER = {'lazy': ('f', 'Lazy')}\n"
            "ToolParserManager.register_lazy_module("
            "name='direct', module_path='m', class_name='D')\n",
            "reasoning/r.py": "@ReasoningParserManager.register_module(name=NAME)\nclass R: ...\n",
            "entrypoints/openai/api_server.py": "def validate(args):\n"
            "    if args.enable_auto_tool_choice and args.tool_call_parser not in v:\n"
            "        raise KeyError(f'invalid tool call parser: {args.tool_call_parser} ')\n",
        }
    )
    out = parsers_extractor.extract(release)
    assert {k for k in out if k.startswith("tool:")} == {
        "tool:a1",
        "tool:a2",
        "tool:Bare",
        "tool:lazy",
        "tool:direct",
    }
    assert out["tool:lazy"] == {"class": "Lazy", "file": "tool_parsers/__init__.py"}
    assert out["@release"]["tool_check"]["requires"] == ["enable-auto-tool-choice"]
    # a name that is not a literal is recorded, never guessed
    assert any("not literal" in p for p in release.problems)
    assert any("reasoning_check" in p for p in release.problems)


# -- parser names -------------------------------------------------------------------------


def test_glm45_on_0_10_0_is_an_error_naming_the_parsers_and_the_first_release():
    facts = facts_for("vllm serve M --tool-call-parser glm45", "0.10.0")
    [text] = facts.value("release.unknown_parsers")
    assert "vLLM 0.10.0 has no tool-call parser 'glm45'" in text
    assert "it has: deepseek_v3, glm4_moe, granite" in text
    assert "first release with 'glm45': 0.10.1" in text
    assert verdict("ARGS103", facts) == APPLIES
    assert (
        verdict("ARGS103", facts_for("vllm serve M --tool-call-parser glm45", "0.10.1"))
        == NOT_APPLIES
    )


def test_a_tool_parser_is_checked_only_where_the_release_checks_it():
    # 0.11.0 checks the tool parser only with --enable-auto-tool-choice
    quiet = facts_for("vllm serve M --tool-call-parser nosuch", "0.11.0")
    assert quiet.value("release.unknown_parsers") == []
    assert verdict("ARGS103", quiet) == NOT_APPLIES
    loud = facts_for("vllm serve M --enable-auto-tool-choice --tool-call-parser nosuch", "0.11.0")
    [text] = loud.value("release.unknown_parsers")
    assert "with --enable-auto-tool-choice" in text and "no release 0.8.0–0.33.0" in text
    assert verdict("ARGS103", loud) == APPLIES


def test_reasoning_parser_and_plugins():
    facts = facts_for("vllm serve M --reasoning-parser glm45", "0.10.0")
    [text] = facts.value("release.unknown_parsers")
    assert "reasoning parser 'glm45'" in text and "first release with 'glm45': 0.10.1" in text
    plugin = facts_for(
        "vllm serve M --enable-auto-tool-choice --tool-call-parser mine "
        "--tool-parser-plugin /p/mine.py",
        "0.12.0",
    )
    assert "release.unknown_parsers" not in plugin
    assert "plugin" in plugin.why_missing("release.unknown_parsers")
    assert verdict("ARGS103", plugin) == UNDECIDED
    # 0.8.0-0.8.2 fix --reasoning-parser's choices in argparse: ARGS101 names the value
    old = facts_for("vllm serve M --enable-reasoning --reasoning-parser qwen3", "0.8.0")
    assert old.value("release.unknown_parsers") == []
    assert verdict("ARGS101", old) == APPLIES


def test_unknown_version_cannot_decide():
    facts = facts_for("vllm serve M --tool-call-parser glm45 --enable-eplb", None)
    assert verdict("ARGS103", facts) == UNDECIDED
    assert verdict("ARGS104", facts) == UNDECIDED


# -- start-up dependencies ----------------------------------------------------------------


def test_option_dependencies_per_release():
    eplb = facts_for("vllm serve M -tp 2 --enable-eplb", "0.10.0")
    [text] = eplb.value("release.unmet_requirements")
    assert text.startswith("--enable-eplb without --enable-expert-parallel: vLLM 0.10.0")
    assert verdict("ARGS104", eplb) == APPLIES
    # 0.9.2 accepts --enable-eplb alone (its check came in 0.10.0)
    assert (
        facts_for("vllm serve M --enable-eplb", "0.9.2").value("release.unmet_requirements") == []
    )
    assert (
        verdict(
            "ARGS104",
            facts_for("vllm serve M -tp 2 --enable-eplb --enable-expert-parallel", "0.10.0"),
        )
        == NOT_APPLIES
    )
    tools = facts_for("vllm serve M --enable-auto-tool-choice", "0.33.0")
    [text] = tools.value("release.unmet_requirements")
    assert "--enable-auto-tool-choice without --tool-call-parser" in text
    assert verdict("ARGS104", tools) == APPLIES


# -- LoRA ---------------------------------------------------------------------------------


def test_lora_on_an_architecture_without_it_is_an_error():
    # Qwen3MoeForCausalLM implements SupportsLoRA from 0.10.0 (0.9.2: SupportsPP only)
    old = facts_for("vllm serve Qwen/Qwen3-30B-A3B --enable-lora", "0.9.2", model="Qwen3-30B-A3B")
    assert old.value("release.lora_architecture") == "Qwen3MoeForCausalLM"
    assert old.value("release.lora_supported") is False
    assert "does not implement SupportsLoRA" in old.get("release.lora_supported").detail
    assert verdict("MODEL102", old) == APPLIES
    new = facts_for("vllm serve Qwen/Qwen3-30B-A3B --enable-lora", "0.10.0", model="Qwen3-30B-A3B")
    assert new.value("release.lora_supported") is True
    assert verdict("MODEL102", new) == NOT_APPLIES
    # gpt-oss: SupportsLoRA from 0.11.1
    gpt = facts_for("vllm serve openai/gpt-oss-120b --enable-lora", "0.11.0", model="gpt-oss-120b")
    assert verdict("MODEL102", gpt) == APPLIES
    without = facts_for("vllm serve Qwen/Qwen3-30B-A3B", "0.9.2", model="Qwen3-30B-A3B")
    assert verdict("MODEL102", without) == NOT_APPLIES


def test_lora_without_the_model_config_cannot_decide():
    facts = facts_for("vllm serve /nonexistent/model --enable-lora", "0.9.2")
    assert verdict("MODEL102", facts) == UNDECIDED
    other = facts_for(
        "vllm serve Qwen/Qwen3-30B-A3B --enable-lora --model-impl transformers",
        "0.9.2",
        model="Qwen3-30B-A3B",
    )
    assert verdict("MODEL102", other) == UNDECIDED


# -- modalities, pooling, options only multimodal models take ----------------------------


def test_modalities_and_pooling_of_the_loaded_architecture():
    vision = facts_for(
        "vllm serve microsoft/Phi-3.5-vision-instruct",
        "0.10.0",
        model="Phi-3.5-vision-instruct-FP8-dynamic",
    )
    assert vision.value("release.model_modalities") == ["image"]
    assert vision.value("release.pooling_model") is False
    text = facts_for(
        "vllm serve meta-llama/Llama-3.1-8B-Instruct", "0.10.0", model="Llama-3.1-8B-Instruct"
    )
    assert text.value("release.model_modalities") == []
    registry = knowledge.load("registry")
    assert registry.get("Qwen2VLForConditionalGeneration", "0.10.0").value["modalities"] == [
        "image",
        "video",
    ]
    assert registry.get("BertModel", "0.10.0").value["pooling"] is True
    assert registry.get("LlamaForCausalLM", "0.10.0").value["pooling"] is False


def test_limit_mm_per_prompt_on_a_text_model_until_0_10_0():
    line = """vllm serve meta-llama/Llama-3.1-8B-Instruct --limit-mm-per-prompt '{"image": 2}'"""
    old = facts_for(line, "0.10.0", model="Llama-3.1-8B-Instruct")
    [text] = old.value("release.unmet_requirements")
    assert text.startswith("--limit-mm-per-prompt on LlamaForCausalLM, which is not multimodal")
    assert verdict("ARGS104", old) == APPLIES
    # 0.10.1 ignores the option for a text-only model
    assert (
        verdict("ARGS104", facts_for(line, "0.10.1", model="Llama-3.1-8B-Instruct")) == NOT_APPLIES
    )
    vision = facts_for(
        """vllm serve microsoft/Phi-3.5-vision-instruct --limit-mm-per-prompt """
        """'{"image": 2}'""",
        "0.10.0",
        model="Phi-3.5-vision-instruct-FP8-dynamic",
    )
    assert verdict("ARGS104", vision) == NOT_APPLIES
    # without the model's config the check cannot be judged
    assert verdict("ARGS104", facts_for(line, "0.10.0")) == UNDECIDED


# -- speculative decoding ----------------------------------------------------------------

EAGLE3 = (
    """--speculative-config '{"method":"eagle3","model":"AngelSlim/Qwen3-32B_eagle3","""
    """"num_speculative_tokens":3}'"""
)


def test_speculative_methods_per_release():
    table = knowledge.load("speculative")
    assert table.first_release("method:mtp") == "0.11.0"
    assert table.first_release("method:suffix") == "0.11.1"
    assert table.get("@release", "0.9.1").value["validated"] is True
    assert "method:eagle" not in table.at("0.8.0")  # 0.8.x lists no methods
    assert table.get("target:eagle3", "0.10.0").value["model_types"] == ["llama"]
    assert "qwen" in table.get("target:eagle3", "0.10.1").value["model_types"]


def test_speculative_extractor_flattens_aliases_and_reads_the_target_check():
    source = (
        "from pydantic.dataclasses import dataclass\n"
        "MTP = Literal['a_mtp', 'mtp']\nEagle = Literal['eagle', 'eagle3', MTP]\n"
        "SpeculativeMethod = Literal['ngram', Eagle]\n"
        "@config\n@dataclass\nclass SpeculativeConfig:\n"
        "    def _verify_args(self):\n"
        "        ok = ['llama', 'qwen']\n"
        "        if self.method in ('eagle3', 'dflash') and not any(m in self.t.model_type "
        "for m in ok):\n"
        "            raise ValueError(f'{self.method} is only supported for {ok} models.')\n"
    )
    out = speculative_extractor.extract(_Release({"config/speculative.py": source}))
    assert {k for k in out if k.startswith("method:")} == {
        "method:ngram",
        "method:eagle",
        "method:eagle3",
        "method:a_mtp",
        "method:mtp",
    }
    assert out["target:dflash"]["model_types"] == ["llama", "qwen"]
    assert out["@release"]["validated"] is True


def test_a_method_the_release_lacks_is_an_error():
    mtp = """--speculative-config '{"method":"mtp","num_speculative_tokens":1}'"""
    old = facts_for(f"vllm serve m {mtp}", "0.10.0")
    [text] = old.value("release.unknown_spec_methods")
    assert "first release with 'mtp': 0.11.0" in text and "deepseek_mtp" in text
    assert verdict("SPEC100", old) == APPLIES
    assert verdict("SPEC100", facts_for(f"vllm serve m {mtp}", "0.11.0")) == NOT_APPLIES
    # 0.9.0's SpeculativeConfig is a plain dataclass: an unknown method proves nothing
    assert verdict("SPEC100", facts_for(f"vllm serve m {mtp}", "0.9.0")) == UNDECIDED
    assert verdict("SPEC100", facts_for("vllm serve m", "0.10.0")) == NOT_APPLIES


def test_eagle3_target_model_per_release():
    old = facts_for(f"vllm serve Qwen/Qwen3-32B {EAGLE3}", "0.10.0", model="Qwen3-32B")
    [text] = old.value("release.spec_target_refused")
    assert "on a qwen3 model" in text and "one of llama" in text
    assert verdict("SPEC101", old) == APPLIES
    new = facts_for(f"vllm serve Qwen/Qwen3-32B {EAGLE3}", "0.10.1", model="Qwen3-32B")
    assert verdict("SPEC101", new) == NOT_APPLIES
    llama = facts_for(
        f"vllm serve meta-llama/Llama-3.1-8B-Instruct {EAGLE3}",
        "0.10.0",
        model="Llama-3.1-8B-Instruct",
    )
    assert verdict("SPEC101", llama) == NOT_APPLIES
    # from 0.22.0 the model runner checks the loaded class instead: not decided here
    later = facts_for(f"vllm serve Qwen/Qwen3-32B {EAGLE3}", "0.22.0", model="Qwen3-32B")
    assert verdict("SPEC101", later) == UNDECIDED
    # without the model config the model type is not known
    assert (
        verdict("SPEC101", facts_for(f"vllm serve Qwen/Qwen3-32B {EAGLE3}", "0.10.0")) == UNDECIDED
    )


# -- the vLLM messages name the rules -----------------------------------------------------

# catalogue key (knowledge/data/errors.json) -> the rule whose signatures claim it
CATALOGUED = {
    "KeyError: invalid tool call parser:{*}(chose from {{*}})": "ARGS103",
    "KeyError: invalid reasoning parser:{*}(chose from {{*}})": "ARGS103",
    "TypeError: Error: --enable-auto-tool-choice requires tool_parser:'{*}' which has not "
    "been registered": "ARGS103",
    "TypeError: Error: --enable-auto-tool-choice requires --tool-call-parser": "ARGS104",
    "ValueError: enable_expert_parallel must be True to use EPLB.": "ARGS104",
    "ValueError: `limit_mm_per_prompt` is only supported for multimodal models.": "ARGS104",
    "ValueError: {*}does not support LoRA yet.": "MODEL102",
    "AssertionError: {*}does not support LoRA yet.": "MODEL102",
    "ValueError: Eagle3 is only supported for Llama models. Got "
    "self.target_model_config.hf_text_config.model_type={*}": "SPEC101",
    "ValueError: Eagle3 is only supported for{*}models. Got "
    "self.target_model_config.hf_text_config.model_type={*}": "SPEC101",
    "RuntimeError: Model does not support EAGLE3 interface but aux_hidden_state_outputs was "
    "requested": "SPEC101",
}


def _rule(code: str):
    rule, problems = load_rule_file(next(REPO.glob(f"rules/*/{code}.yaml")))
    assert rule is not None, problems
    return rule


@pytest.mark.parametrize("key", sorted(CATALOGUED))
def test_each_catalogued_message_names_its_rule(key):
    spans = knowledge.load("errors").spans(key)
    assert spans, f"{key} is not in the error catalogue"
    # the message as the release prints it: placeholders filled as vLLM fills them
    cls, template = key.split(": ", 1)
    line = f"{cls}: " + template.replace("{{*}}", "{ a,b }").replace("'{*}'", "'glm45'").replace(
        "{*}", " glm45 "
    ).replace("  ", " ")
    if "does not support LoRA" in key:
        line = f"{cls}: DeepseekV2ForCausalLM does not support LoRA yet."
    rule = _rule(CATALOGUED[key])
    scan = scan_log(line, [s.compiled() for s in rule.signatures], None)
    assert scan.signature_lines([s.compiled() for s in rule.signatures]), line


def test_argparse_refusal_of_0_10_0_names_args103(tmp_path):
    log = tmp_path / "crash.log"
    log.write_text(
        "usage: vllm serve [model_tag] [options]\nvllm serve: error: argument "
        "--tool-call-parser: invalid choice: 'glm45' (choose from 'deepseek_v3', "
        "'glm4_moe', 'hermes')\n"
    )
    run = doctor("explain", "--log", str(log))
    assert run.returncode == 1, run.stderr
    assert "ARGS103 [error]" in run.stdout


def test_check_log_names_the_rules(tmp_path):
    log = tmp_path / "crash.log"
    log.write_text(
        "(EngineCore_0 pid=211) ValueError: DeepseekV2ForCausalLM does not support LoRA yet.\n"
        "ValueError: enable_expert_parallel must be True to use EPLB.\n"
    )
    run = doctor("check", "--log", str(log), "--format", "json")
    codes = {f["code"] for f in json.loads(run.stdout)["findings"] if f["verdict"] == "applies"}
    assert {"MODEL102", "ARGS104"} <= codes, run.stdout[-2000:]
