"""Tests written while triaging the mutation run's survivors (bench/mutation/RESULTS.md): each
checks a behaviour a surviving mutant changed without any selected test noticing."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from vllm_doctor.engine.evaluate import Finding
from vllm_doctor.engine.loader import load_rules
from vllm_doctor.facts.collect import CollectOptions, collect_facts
from vllm_doctor.facts.context_length import derived_max_model_len
from vllm_doctor.facts.hardware import _compat, driver_cuda_version
from vllm_doctor.facts.model import Facts, Source
from vllm_doctor.facts.model_config import (
    _read_kv_heads,
    quant_scheme,
    read_model_config,
    text_config_of,
)
from vllm_doctor.facts.release import SOURCE as RELEASE_SOURCE
from vllm_doctor.facts.release import _accepts, judged_between_releases
from vllm_doctor.facts.release_model import _effective_dtype
from vllm_doctor.logreaders import LogReading
from vllm_doctor.report.document import CheckDocument
from vllm_doctor.report.facts_view import SECTIONS, _digest_parts, format_value, render_facts
from vllm_doctor.report.output import dump_json
from vllm_doctor.report.text import _fmt, render_text


def test_a_driver_exactly_at_a_cuda_minimum_supports_that_cuda():
    # the table's minimum is inclusive: driver 455.23 is the first that runs CUDA 11.1
    rows = _compat()["driver_min"]
    for row in rows:
        cuda, basis = driver_cuda_version(row["driver"])
        assert cuda == row["cuda"] and basis.endswith(f"the minimum for CUDA {row['cuda']}")


@pytest.mark.parametrize(
    "algo, scheme",
    [("NVFP4", "nvfp4"), ("W4A16_AWQ", "w4a16"), ("W4A8_AWQ", "w4a8"), ("FP8", "fp8")],
)
def test_modelopt_algorithms_map_to_their_scheme(algo, scheme):
    assert quant_scheme({"quant_method": "modelopt", "quant_algo": algo}) == (
        "modelopt",
        algo,
        scheme,
    )


def _ct_config(weights: dict, activations: dict | None) -> dict:
    group = {"weights": weights, "targets": ["Linear"]}
    if activations is not None:
        group["input_activations"] = activations
    return {"quant_method": "compressed-tensors", "config_groups": {"group_0": group}}


@pytest.mark.parametrize(
    "weights, activations, scheme",
    [
        ({"num_bits": 8, "type": "float"}, {"num_bits": 8, "type": "float"}, "fp8"),
        (
            {"num_bits": 8, "type": "float"},
            {"num_bits": 8, "type": "float", "dynamic": True},
            "fp8-dynamic",
        ),
        ({"num_bits": 8, "type": "float"}, {"num_bits": 8, "type": "int"}, "fp8-w8a16"),
        ({"num_bits": 8, "type": "float"}, None, "fp8-w8a16"),
        ({"num_bits": 8, "type": "int"}, {"num_bits": 8, "type": "float"}, "w8a8-fp8"),
        ({"num_bits": 8, "type": "int"}, {"num_bits": 8, "type": "int"}, "w8a8-int8"),
    ],
)
def test_compressed_tensors_activation_type_decides_the_scheme(weights, activations, scheme):
    assert quant_scheme(_ct_config(weights, activations))[2] == scheme


def test_the_document_summary_counts_each_severity():
    rules = load_rules(None)
    by_severity = {}
    for rule in rules:
        by_severity.setdefault(rule.severity, []).append(rule)
    findings = (
        [Finding(r, "applies", "high") for r in by_severity["error"][:1]]
        + [Finding(r, "applies", "high") for r in by_severity["warning"][:3]]
        + [Finding(r, "applies", "high") for r in by_severity["info"][:2]]
    )
    summary = CheckDocument(Facts(), findings, "error", len(findings), 0.0).to_dict()["summary"]
    assert (summary["errors"], summary["warnings"], summary["infos"]) == (1, 3, 2)


@pytest.mark.parametrize(
    "word, accepted",
    [
        ("--tensor-parallel-size", True),
        ("--tensor_parallel_size", True),  # argparse in vLLM accepts the underscore spelling
        ("--tensor-parallel", True),  # a prefix of one option string only (allow_abbrev)
        ("--max", False),  # a prefix of several: argparse refuses it as ambiguous
    ],
)
def test_the_release_parser_accepts_exact_underscore_and_unique_prefix_forms(word, accepted):
    assert _accepts("0.10.0", word, "tensor_parallel_size") is accepted


def _section(title: str):
    return next(s for s in SECTIONS if s.title == title)


def test_the_gpu_digest_counts_identical_gpus_and_lists_mixed_ones():
    facts = Facts()
    facts.set("gpu.names", ["NVIDIA H100 80GB HBM3"] * 2, Source.NVML)
    assert _digest_parts(facts, _section("GPUs and links"))[0] == "2 × NVIDIA H100 80GB HBM3"
    facts.set("gpu.names", ["NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"], Source.NVML)
    assert _digest_parts(facts, _section("GPUs and links"))[0] == (
        "NVIDIA H100 80GB HBM3, NVIDIA A100-SXM4-80GB"
    )


def _serve_digest(options: dict) -> list[str]:
    facts = Facts()
    for key, value in options.items():
        facts.set(f"serve.{key}", value, Source.SERVE)
    return _digest_parts(facts, _section("Serve arguments"))


def test_the_serve_digest_shows_six_options_then_counts_the_rest():
    six = {f"option_{i}": i for i in range(6)}
    assert _serve_digest(six) == [f"option_{i}={i}" for i in range(6)]
    seven = {**six, "option_6": 6}
    assert _serve_digest(seven) == [f"option_{i}={i}" for i in range(6)] + ["… 1 more"]


def test_the_serve_digest_puts_the_summary_knobs_before_the_rest():
    # "block_size" sorts before "tensor_parallel_size" but is no summary knob
    shown = _serve_digest({"block_size": 16, "max_model_len": 4096, "tensor_parallel_size": 2})
    assert shown == ["tensor_parallel_size=2", "max_model_len=4096", "block_size=16"]


def test_json_output_writes_values_json_has_no_type_for_as_text():
    assert dump_json({"path": Path("/models/llama")}) == '{\n  "path": "/models/llama"\n}\n'


@pytest.mark.parametrize(
    "checkpoint, capability, effective",
    [
        ("float16", 80, "float16"),  # a half-precision checkpoint keeps its dtype on sm_80
        ("bfloat16", 80, "bfloat16"),
        ("float32", 80, "bfloat16"),  # float32 goes to the GPU's first supported dtype
        ("float32", 75, "float16"),  # sm_75 has no bfloat16
        ("bfloat16", 75, "float16"),
    ],
)
def test_dtype_auto_keeps_a_supported_checkpoint_dtype(checkpoint, capability, effective):
    facts = Facts()
    facts.set("model.dtype", checkpoint, Source.CONFIG)
    facts.set("gpu.min_capability", capability, Source.NVML)
    _effective_dtype(facts, "0.33.0")
    fact = facts.get("release.effective_dtype")
    assert (fact.value, fact.source) == (effective, RELEASE_SOURCE)
    assert f"compute capability {capability}" in fact.detail


def test_an_empty_mapping_reads_as_braces_in_the_text_report():
    assert (_fmt({}), _fmt({"a": 1, "b": [True, False]})) == ("{}", "a=1, b=yes, no")


@pytest.mark.parametrize(
    "rope_scaling, length",
    [
        ({"type": "dynamic", "factor": 2.0}, 8192),  # the legacy "type" key, factor 2
        ({"type": "llama3", "factor": 8.0}, 4096),  # llama3 scaling does not extend the length
        ({"rope_type": "linear", "factor": 4.0}, 16384),
        ({"rope_type": "linear"}, 4096),  # no factor: 1
    ],
)
def test_rope_scaling_extends_the_derived_context(rope_scaling, length):
    config = {"max_position_embeddings": 4096, "rope_scaling": rope_scaling}
    assert derived_max_model_len(config)[0] == length


def test_the_stack_gpu_and_model_digests_name_their_values():
    facts = Facts()
    for path, value, source in [
        ("vllm.version", "0.10.0", Source.USER),
        ("torch.version", "2.7.1", Source.USER),
        ("torch.cuda_version", "12.8", Source.USER),
        ("driver.version", "570.86.15", Source.NVML),
        ("driver.cuda_version", "12.9", Source.NVML),
        ("gpu.names", ["NVIDIA H100 80GB HBM3"] * 2, Source.NVML),
        ("topology.worst_link", "PHB", Source.NVML),
        ("model.id", "nvidia/Llama-3.1-8B-Instruct-FP4", Source.USER),
        ("model.architectures", ["LlamaForCausalLM"], Source.CONFIG),
        ("model.quant_method", "modelopt", Source.CONFIG),
        ("model.quant_algo", "NVFP4", Source.CONFIG),
    ]:
        facts.set(path, value, source)
    assert _digest_parts(facts, _section("Stack")) == [
        "vLLM 0.10.0",
        "torch 2.7.1 (CUDA 12.8)",
        "driver 570.86.15 (CUDA 12.9)",
    ]
    assert _digest_parts(facts, _section("GPUs and links")) == [
        "2 × NVIDIA H100 80GB HBM3",
        "worst link PHB",
    ]
    assert _digest_parts(facts, _section("Model")) == [
        "nvidia/Llama-3.1-8B-Instruct-FP4",
        "LlamaForCausalLM",
        "modelopt NVFP4",
    ]


def test_the_serve_digest_names_the_unknown_flags():
    shown = _serve_digest({"tensor_parallel_size": 2, "unknown_flags": ["--tensor-paralel-size"]})
    assert shown == ["tensor_parallel_size=2", "unknown flags: --tensor-paralel-size"]


def test_the_text_report_shows_each_probe_with_its_reason_and_verdict_levels():
    doc = CheckDocument(Facts(), [], "error", 3, 0.0)
    doc.probes = [
        {
            "name": "nccl_allreduce",
            "status": "failed",
            "reason": "timed out after 60 s",
            "verdicts": [{"rule": "PAR002", "level": "error", "text": "all-reduce hangs"}],
        }
    ]
    out = io.StringIO()
    render_text(doc, Console(file=out, width=200, color_system=None))
    text = out.getvalue()
    assert "Known failures (3 rules)" in text  # no rule base: nothing after the count
    assert "nccl_allreduce: failed timed out after 60 s" in text
    assert "PAR002 error: all-reduce hangs" in text


DEEPSEEK = Path(__file__).parent / "fixtures" / "models" / "DeepSeek-V3.2" / "config.json"


def test_an_mla_head_size_is_nope_plus_rope_and_undecided_without_them():
    # the real DeepSeek-V3.2 config.json (tests/fixtures/models/README.md); an MLA model's
    # head size is qk_nope_head_dim + qk_rope_head_dim, and without one of them it is not
    # hidden/heads but unknown, with the field it lacks named
    config = json.loads(DEEPSEEK.read_text())
    facts = Facts()
    read_model_config(facts, DEEPSEEK, config, str(DEEPSEEK))
    assert facts.value("model.head_dim") == 128 + 64
    del config["qk_nope_head_dim"]
    facts = Facts()
    read_model_config(facts, DEEPSEEK, config, str(DEEPSEEK))
    assert facts.value("model.head_dim") is None
    assert "config.json lacks qk_nope_head_dim" in facts.why_missing("model.head_dim")


@pytest.mark.parametrize(
    "model_type, text, kv_heads, source",
    [
        ("mpt", {"attn_config": {"kv_n_heads": 8}}, 8, Source.CONFIG),
        ("dbrx", {"attn_config": {"kv_n_heads": 8}}, 8, Source.CONFIG),
        (
            "cohere_asr",
            {"transf_decoder": {"config_dict": {"num_attention_heads": 8}}},
            8,
            Source.CONFIG,
        ),
        (
            "nemotron-nas",
            {
                "block_configs": [
                    {"attention": {"no_op": True}},
                    {"attention": {"n_heads_in_group": 8}},
                ]
            },
            64 // 8,
            Source.DERIVED,
        ),
        ("llama", {"num_key_value_heads": 8}, 8, Source.CONFIG),
        ("llama", {}, 64, Source.DERIVED),  # no KV-head key: one KV head per attention head
    ],
)
def test_kv_heads_are_read_where_each_model_type_keeps_them(model_type, text, kv_heads, source):
    facts = Facts()
    assert _read_kv_heads(facts, text, model_type, 64, "config.json") == kv_heads
    fact = facts.get("model.num_key_value_heads")
    assert (fact.value, fact.source) == (kv_heads, source)


def _collect_differing_answers(facts: Facts) -> None:
    """A release collector whose answers differ between 0.23.0 and 0.24.0 on two paths."""
    newer = str(facts.value("vllm.version")).startswith("0.24")
    facts.set("release.same", 1, RELEASE_SOURCE)
    facts.set("release.changed", "B" if newer else "A", RELEASE_SOURCE)
    if newer:
        facts.set("release.new_in_0_24", True, RELEASE_SOURCE)
    else:
        facts.mark_missing("release.new_in_0_24", "0.23.0 has no such table")


def test_a_nightly_keeps_only_what_the_releases_it_may_resemble_agree_on():
    facts = Facts()
    facts.set("vllm.version", "0.23.1rc1.dev20", Source.MACHINE)
    facts.set("release.earlier", "kept", RELEASE_SOURCE)  # another collector's, before this one
    judged_between_releases(facts, _collect_differing_answers)
    assert facts.value("release.same") == 1
    assert facts.value("release.earlier") == "kept"
    assert facts.value("vllm.version") == "0.23.1rc1.dev20"
    assert facts.value("release.changed") is None
    # 0.23.1rc1.dev20 may be any of 0.23.0-0.26.0: each answer named, equal neighbours joined
    assert "(0.23.0: A; 0.24.0: B; 0.25.0–0.26.0: A)" in facts.why_missing("release.changed")
    # open at its base for a reason of its own: that reason first, the answers after it
    reason = facts.why_missing("release.new_in_0_24")
    assert reason.startswith("0.23.0 has no such table; ")
    assert "(0.23.0: not known; 0.24.0: True; 0.25.0–0.26.0: not known)" in reason


def test_a_release_is_judged_by_itself_alone():
    facts = Facts()
    facts.set("vllm.version", "0.23.0", Source.MACHINE)
    judged_between_releases(facts, _collect_differing_answers)
    assert (facts.value("release.changed"), facts.value("release.same")) == ("A", 1)


def test_the_text_config_is_found_under_the_layout_path_of_its_model_type():
    # ColPali keeps its language model under vlm_config.text_config, a key the generic
    # search does not look under
    text = {"num_hidden_layers": 18, "num_attention_heads": 8, "hidden_size": 2048}
    config = {"model_type": "colpali", "vlm_config": {"text_config": text}}
    assert text_config_of(config) == (text, "vlm_config.text_config")


@pytest.mark.parametrize(
    "config, experts, layers",
    [
        (  # DBRX keeps its expert count under ffn_config (DbrxConfig)
            {
                "model_type": "dbrx",
                "architectures": ["DbrxForCausalLM"],
                "d_model": 6144,
                "n_heads": 48,
                "n_layers": 40,
                "ffn_config": {"moe_num_experts": 16, "moe_top_k": 4},
                "attn_config": {"kv_n_heads": 8},
            },
            16,
            40,
        ),
        (  # LongCat-Flash counts its layers under num_layers
            {
                "model_type": "longcat_flash",
                "architectures": ["LongcatFlashForCausalLM"],
                "num_layers": 28,
                "num_attention_heads": 64,
                "hidden_size": 6144,
            },
            None,
            28,
        ),
    ],
)
def test_expert_and_layer_counts_under_model_specific_keys(config, experts, layers):
    path = Path("/models/m/config.json")
    facts = Facts()
    read_model_config(facts, path, config, str(path))
    assert (facts.value("model.num_experts"), facts.value("model.num_hidden_layers")) == (
        experts,
        layers,
    )


def test_a_finding_in_the_text_report_shows_its_log_lines_and_what_its_reader_read():
    rule = next(r for r in load_rules(None) if r.severity == "error")
    finding = Finding(
        rule,
        "applies",
        "high",
        log_matches=["torch.OutOfMemoryError: CUDA out of memory."],
        reading=LogReading(
            cause="the KV cache does not fit",
            fixes=["--max-model-len 8192"],
            read=["Available KV cache memory: -1.5 GiB"],
        ),
    )
    out = io.StringIO()
    render_text(CheckDocument(Facts(), [finding], "error", 1, 0.0), Console(file=out, width=200))
    text = out.getvalue()
    assert "seen in the log: torch.OutOfMemoryError: CUDA out of memory." in text
    assert "cause: the KV cache does not fit" in text
    assert "read: Available KV cache memory: -1.5 GiB" in text


def test_a_byte_count_shows_its_exact_value_only_under_verbose():
    assert format_value("model.weights_bytes", 16060522496) == "14.96 GiB"
    assert format_value("model.weights_bytes", 16060522496, verbose=True) == (
        "14.96 GiB (16060522496)"
    )


def _facts_view(facts: Facts, **options) -> str:
    out = io.StringIO()
    render_facts(facts, Console(file=out, width=200), **options)
    return out.getvalue()


def test_the_facts_view_shows_the_summary_facts_the_notes_and_a_crash_log_only_when_given():
    facts = Facts()
    facts.set("serve.tensor_parallel_size", 2, Source.SERVE)
    facts.set("serve.block_size", 16, Source.SERVE)
    facts.notes.append("pynvml is not installed: GPU facts come from the report")
    text = _facts_view(facts)
    assert "serve.tensor_parallel_size" in text and "serve.block_size" not in text
    assert "… 1 more fact(s): -v shows them" in text
    assert "note: pynvml is not installed: GPU facts come from the report" in text
    assert "Crash log" not in text  # no log given
    assert "note:" not in _facts_view(facts, notes=False)
    facts.set("log.path", "/tmp/vllm.log", Source.LOG)
    assert "Crash log" in _facts_view(facts)


def test_every_release_fact_names_the_release_knowledge_as_its_source():
    facts = collect_facts(
        CollectOptions(
            serve_string="vllm serve m --tool-call-parser glm45 --tensor-parallel-size 2",
            vllm_version="0.10.0",
            probe_machine=False,
            model_config=Path(__file__).parent / "fixtures" / "models" / "Qwen3-32B",
        )
    )
    release = dict(facts.area("release"))
    assert "release.unknown_parsers" in release and len(release) > 10
    assert {path: fact.source for path, fact in release.items()} == dict.fromkeys(
        release, RELEASE_SOURCE
    )


@pytest.mark.parametrize(
    "impl, fallback",
    [("", True), (" --model-impl transformers", True), (" --model-impl vllm", False)],
)
def test_only_model_impl_vllm_turns_the_transformers_fallback_off(impl, fallback):
    facts = collect_facts(
        CollectOptions(
            serve_string="vllm serve m" + impl,
            vllm_version="0.10.0",
            probe_machine=False,
            model_config=Path(__file__).parent / "fixtures" / "models" / "Qwen3-32B",
        )
    )
    assert facts.value("release.transformers_fallback") is fallback


MODELS = Path(__file__).parent / "fixtures" / "models"


def _speculative_facts(method: str, release: str, model: str | None = None) -> Facts:
    config = json.dumps({"method": method, "num_speculative_tokens": 3})
    return collect_facts(
        CollectOptions(
            serve_string=f"vllm serve m --speculative-config '{config}'",
            vllm_version=release,
            probe_machine=False,
            model_config=MODELS / model if model else None,
        )
    )


def test_a_validated_release_accepts_its_own_speculative_methods_and_refuses_others():
    assert _speculative_facts("eagle3", "0.33.0").value("release.unknown_spec_methods") == []
    [refused] = _speculative_facts("bogus", "0.33.0").value("release.unknown_spec_methods")
    assert "'bogus': vLLM 0.33.0 refuses it" in refused
    # ngram has no target check: nothing refused, decided
    assert _speculative_facts("ngram", "0.33.0").value("release.spec_target_refused") == []


def test_eagle3_targets_in_0_8_5_are_judged_by_the_text_model_type():
    # 0.8.5's SpeculativeConfig._verify_args accepts EAGLE-3 only on llama targets
    [refused] = _speculative_facts("eagle3", "0.8.5", "Qwen3-32B").value(
        "release.spec_target_refused"
    )
    assert "on a qwen3 model" in refused
    llama = _speculative_facts("eagle3", "0.8.5", "Llama-3.1-8B-Instruct")
    assert llama.value("release.spec_target_refused") == []
    unknown = _speculative_facts("eagle3", "0.8.5")
    assert unknown.value("release.spec_target_refused") is None
    assert "the model's text model_type is not known" in unknown.why_missing(
        "release.spec_target_refused"
    )


@pytest.mark.parametrize("method, deprecated", [("fbgemm_fp8", True), ("fp8", False)])
def test_a_quantization_method_deprecated_in_the_release_is_marked_so(method, deprecated):
    facts = collect_facts(
        CollectOptions(
            serve_string=f"vllm serve m --quantization {method}",
            vllm_version="0.33.0",
            probe_machine=False,
        )
    )
    assert facts.value("release.quant.method") == method
    assert facts.value("release.quant.deprecated") is deprecated
