"""Quantization / attention release knowledge: the extractors on real release trees, the
shipped tables, the release.quant.* / release.attention.* facts and the generated rules."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from packaging.version import Version

from vllm_doctor import knowledge
from vllm_doctor.engine.evaluate import APPLIES, NOT_APPLIES, UNDECIDED, evaluate_rules
from vllm_doctor.engine.loader import load_rules
from vllm_doctor.facts.model import Facts
from vllm_doctor.facts.release_kernels import collect_release_kernels, judge_backend, quant_floor

REPO = Path(__file__).resolve().parents[1]
WHEELS = Path("/work/wheels/src")
needs_wheels = pytest.mark.skipif(
    not (WHEELS / "0.12.0").is_dir(), reason="unpacked release wheels not available"
)


def _extractor(name: str):
    path = REPO / "tools" / "extractors" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"extractors_{name}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _release(version: str):
    sys.path.insert(0, str(REPO / "tools"))
    from wheelsrc import ReleaseSource

    return ReleaseSource(Version(version), WHEELS / version)


def _facts(**flat) -> Facts:
    facts = Facts.from_flat({k.replace("__", "."): v for k, v in flat.items()})
    collect_release_kernels(facts)
    return facts


# -- extractors on real release trees ---------------------------------------------------------
# Each check reads the values of a release, from the shipped table (generated from the release
# wheels by tools/gen_knowledge.py: runs everywhere) and, where the wheels are unpacked, from
# the extractor run on the release's own tree.

SOURCES = ["shipped-table", pytest.param("release-wheel", marks=needs_wheels)]


def _values(source: str, kind: str, release: str) -> dict:
    if source == "shipped-table":
        return knowledge.load(kind).at(release)
    return _extractor(kind).extract(_release(release))


@pytest.mark.parametrize("source", SOURCES)
def test_quantization_extractor_reads_the_fp8_floor_change_of_0_14(source):
    old, new = _values(source, "quantization", "0.13.0"), _values(source, "quantization", "0.14.0")
    assert old["method:fp8"]["min_capability"] == 80
    assert new["method:fp8"]["min_capability"] == 75  # PR 29901 (Turing via Marlin)
    assert new["method:fbgemm_fp8"]["deprecated"] is True
    assert old["method:fbgemm_fp8"]["deprecated"] is False
    assert "gptq_marlin" in new["method:gptq"]["overridable_by"]
    assert new["method:ipex"].get("overrides_off_cuda") is True  # XPU-only override
    assert new["ct_scheme:CompressedTensorsW8A8Fp8"]["min_capability"] == 89
    assert new["gate:fp8_marlin_below"] == 89
    assert "bitsandbytes" in new["platform:rocm"]["added_when"]


@pytest.mark.parametrize("source", SOURCES)
def test_quantization_extractor_records_what_it_cannot_read(source):
    values = _values(source, "quantization", "0.33.0")
    assert values["method:deepseek_v4_fp8"]["min_capability"] is None
    assert any(u.startswith("deepseek_v4_fp8:") for u in values["unresolved"])
    # online shorthands map to OnlineQuantizationConfig through the registration loop
    assert values["method:fp8_per_block"]["config"] == "OnlineQuantizationConfig"


@pytest.mark.parametrize("source", SOURCES)
def test_attention_extractor_reads_checks_and_priorities(source):
    values = _values(source, "attention", "0.12.0")
    flashinfer = values["backend:FLASHINFER"]
    assert flashinfer["head_sizes"] == [64, 128, 256]
    assert 80 in flashinfer["head_size_check"]["no"]
    fa = values["backend:FLASH_ATTN"]
    assert 75 in fa["capabilities"]["no"] and 90 in fa["capabilities"]["yes"]
    assert values["cuda_priority:std:90"][0] == "FLASH_ATTN"
    assert values["cuda_priority:std:100"][0] == "FLASHINFER"
    assert values["check:forced_backend_validated"] == "platforms/cuda.py"
    old = _values(source, "attention", "0.8.0")
    assert "cuda_priority:std:90" not in old and "backend:FLASH_ATTN" in old["cuda_considered"]


# -- the shipped tables ---------------------------------------------------------------------


def test_shipped_tables_cover_every_release():
    releases = knowledge.covered_releases()
    for kind in ("quantization", "attention"):
        table = knowledge.load(kind)
        assert table.releases == releases
    quant = knowledge.load("quantization")
    assert quant.get("method:awq", "0.20.0").value["min_capability"] == 75
    assert quant.last_release("method:gguf") == "0.23.0"  # gguf removed in 0.24.0
    assert quant.last_release("method:bitsandbytes") == "0.27.1"  # removed in 0.28.0


def test_quant_floor_takes_the_overrides_into_account():
    values = knowledge.load("quantization").at("0.20.0")
    floor = quant_floor(values, "gptq")
    assert floor.value == values["method:gptq"]["min_capability"] == 60
    assert quant_floor(values, "no_such_method").value is None


# -- facts ----------------------------------------------------------------------------------


def test_awq_on_volta_is_refused_and_the_curated_rule_wins():
    facts = _facts(vllm__version="0.20.0", gpu__min_capability=70, model__quant_method="awq")
    assert facts.value("release.quant.min_capability") == 75
    assert facts.value("release.quant.capability_ok") is False
    findings = {f.rule.code: f for f in evaluate_rules(load_rules(), facts)}
    assert findings["QUANT003"].verdict == APPLIES
    assert findings["QUANT100"].verdict == NOT_APPLIES
    assert findings["QUANT100"].deferred_to == "QUANT003"


def test_method_no_curated_rule_names_gets_the_generated_finding():
    # ModelOpt MXFP8 (modelopt_mxfp8, minimum 80 in 0.33.0) on a T4
    facts = _facts(
        vllm__version="0.33.0",
        gpu__min_capability=75,
        model__quant_method="modelopt",
        model__quant_algo="MXFP8",
    )
    assert facts.value("release.quant.method") == "modelopt_mxfp8"
    assert facts.value("release.quant.capability_ok") is False
    findings = {f.rule.code: f for f in evaluate_rules(load_rules(), facts)}
    assert findings["QUANT100"].verdict == APPLIES
    assert not any(
        f.verdict == APPLIES
        for code, f in findings.items()
        if code.startswith("QUANT0") and code != "QUANT001"
    )


def test_gptq_on_volta_passes_and_unknown_method_is_reported():
    facts = _facts(vllm__version="0.20.0", gpu__min_capability=70, model__quant_method="gptq")
    assert facts.value("release.quant.capability_ok") is True
    facts = _facts(vllm__version="0.10.0", gpu__min_capability=90, model__quant_method="mxfp8")
    assert facts.value("release.quant.known") is False
    findings = {f.rule.code: f for f in evaluate_rules(load_rules(), facts)}
    assert findings["QUANT101"].verdict == APPLIES


def test_bitsandbytes_after_removal_defers_to_quant012():
    facts = _facts(
        vllm__version="0.28.0", gpu__min_capability=90, model__quant_method="bitsandbytes"
    )
    findings = {f.rule.code: f for f in evaluate_rules(load_rules(), facts)}
    assert findings["QUANT012"].verdict == APPLIES
    assert findings["QUANT101"].deferred_to == "QUANT012"


def test_outside_coverage_and_missing_gpu_cannot_decide():
    facts = _facts(vllm__version="0.7.3", gpu__min_capability=70, model__quant_method="awq")
    assert "release.quant.capability_ok" not in facts
    assert "older than the oldest" in facts.why_missing("release.quant.capability_ok")
    facts = Facts.from_flat({"vllm.version": "0.20.0", "model.quant_method": "awq"})
    facts.mark_missing("gpu", "NVML not available")
    collect_release_kernels(facts)
    assert facts.value("release.quant.min_capability") == 75
    assert "NVML" in facts.why_missing("release.quant.capability_ok")
    findings = {f.rule.code: f for f in evaluate_rules(load_rules(), facts)}
    assert findings["QUANT100"].verdict == UNDECIDED


def test_unquantized_model_leaves_the_quant_facts_absent():
    facts = _facts(vllm__version="0.20.0", gpu__min_capability=90, model__model_type="llama")
    assert not [p for p in facts.values if p.startswith("release.quant")]
    assert not [p for p in facts.missing if p.startswith("release.quant")]


def test_dev_build_is_judged_by_the_release_it_descends_from():
    facts = _facts(
        vllm__version="0.13.1.dev20+g0d8097964", gpu__min_capability=75, model__quant_method="fp8"
    )
    assert facts.value("release.quant.judged_release") == "0.13.0"
    assert facts.value("release.quant.capability_ok") is False  # fp8 needs 80 before 0.14


# -- attention ------------------------------------------------------------------------------


def _attn(**flat) -> Facts:
    base = {"model__head_dim": 128, "model__dtype": "bfloat16", "serve__kv_cache_dtype": "auto"}
    base.update(flat)
    return _facts(**base)


def test_ordinary_model_has_a_backend():
    facts = _attn(vllm__version="0.20.0", gpu__min_capability=90)
    assert facts.value("release.attention.any_supports") is True
    assert "FLASH_ATTN" in facts.value("release.attention.candidates")


def test_forced_flashinfer_with_head_size_80_is_refused():
    facts = _attn(
        vllm__version="0.20.0",
        gpu__min_capability=90,
        model__head_dim=80,
        serve__attention_backend="FLASHINFER",
    )
    assert facts.value("release.attention.forced_supports") is False
    assert any("head size 80" in r for r in facts.value("release.attention.forced_rejections"))
    findings = {f.rule.code: f for f in evaluate_rules(load_rules(), facts)}
    assert findings["ATTN101"].verdict == APPLIES


def test_gemma4_forced_flashinfer_defers_to_attn003():
    facts = _attn(
        vllm__version="0.20.0",
        gpu__min_capability=90,
        model__head_dim=256,
        model__global_head_dim=512,
        model__architectures=["Gemma4ForCausalLM"],
        serve__attention_backend="FLASHINFER",
    )
    assert facts.value("release.attention.forced_supports") is False
    findings = {f.rule.code: f for f in evaluate_rules(load_rules(), facts)}
    assert findings["ATTN003"].verdict == APPLIES
    assert findings["ATTN101"].deferred_to == "ATTN003"


def test_runtime_checks_are_not_rejections():
    # FLASH_ATTN with head size 512 on Hopper: allowed only where FA4 is installed
    facts = _attn(
        vllm__version="0.22.0",
        gpu__min_capability=90,
        model__head_dim=512,
        serve__attention_backend="FLASH_ATTN",
    )
    assert "release.attention.forced_supports" not in facts
    assert "run time" in facts.why_missing("release.attention.forced_supports")


def test_old_release_and_mla_cannot_decide():
    facts = _attn(vllm__version="0.10.0", gpu__min_capability=90)
    assert "if-chain" in facts.why_missing("release.attention.any_supports")
    facts = _attn(vllm__version="0.20.0", gpu__min_capability=90, model__kv_lora_rank=512)
    assert "MLA" in facts.why_missing("release.attention.any_supports")


def test_judge_backend_reasons():
    record = {
        "capabilities": {"yes": [80, 90], "no": [75]},
        "head_sizes": [64, 128],
        "head_size_check": {"yes": [64, 128], "no": [80]},
        "dtypes": ["bfloat16"],
        "kv_cache_dtypes": ["auto", "fp8"],
    }
    assert judge_backend(record, 128, "bfloat16", "auto", 90) == (True, [])
    verdict, reasons = judge_backend(record, 80, "float32", "fp8_e5m2", 75)
    assert verdict is False and len(reasons) == 4
    assert judge_backend(record, 128, None, "auto", 90)[0] is None  # dtype unknown


# -- defers_to in the rule format -----------------------------------------------------------


def test_defers_to_is_validated(tmp_path):
    from vllm_doctor.engine.loader import validate_dir

    rule = (
        (REPO / "rules" / "quant" / "QUANT101.yaml")
        .read_text()
        .replace("defers_to: [QUANT012, ARGS101]", "defers_to: [QUANT012]")
    )
    folder = tmp_path / "quant"
    folder.mkdir()
    (folder / "QUANT101.yaml").write_text(
        rule.replace("defers_to: [QUANT012]", "defers_to: [QUANT999, nonsense]")
    )
    _rules, problems = validate_dir(tmp_path)
    assert any("defers_to[1]" in p for p in problems)
    (folder / "QUANT101.yaml").write_text(
        rule.replace("defers_to: [QUANT012]", "defers_to: [QUANT999]")
    )
    _rules, problems = validate_dir(tmp_path)
    assert any("defers_to: QUANT999 is not a known rule" in p for p in problems)


def test_generated_rules_defer_only_to_curated_rules():
    rules = {r.code: r for r in load_rules()}
    for code in ("QUANT100", "QUANT101", "ATTN100", "ATTN101"):
        assert rules[code].defers_to, code
        for other in rules[code].defers_to:
            assert other in rules and not rules[other].defers_to


def test_auto_round_flag_is_decided_by_the_checkpoint():
    # vLLM 0.27.1 has no method "auto_round": an AutoRound checkpoint is taken as inc
    # (INCConfig.override_quantization_method), whatever --quantization says
    facts = _facts(
        vllm__version="0.27.1",
        gpu__min_capability=120,
        serve__quantization="auto_round",
        model__quant_method="auto-round",
    )
    assert facts.value("release.quant.method") == "inc"
    assert facts.value("release.quant.known") is True
    # 0.14.1 still lists auto-round itself
    facts = _facts(vllm__version="0.14.1", gpu__min_capability=90, model__quant_method="auto-round")
    assert facts.value("release.quant.method") == "auto-round"
    # without the checkpoint's config the flag cannot be judged
    facts = Facts.from_flat(
        {"vllm.version": "0.27.1", "gpu.min_capability": 120, "serve.quantization": "auto_round"}
    )
    facts.mark_missing("model", "no config.json")
    collect_release_kernels(facts)
    assert "release.quant.known" not in facts
    assert "checkpoint's quantization_config" in facts.why_missing("release.quant.known")
    findings = {f.rule.code: f for f in evaluate_rules(load_rules(), facts)}
    assert findings["QUANT101"].verdict == UNDECIDED
    # a checkpoint read without a quantization_config: vLLM refuses the unknown name
    facts = _facts(
        vllm__version="0.27.1",
        gpu__min_capability=120,
        serve__quantization="auto_round",
        model__model_type="qwen3",
        model__inferred=False,  # config.json read
    )
    assert facts.value("release.quant.known") is False


def test_fp8_below_sm89_is_marlin_info_except_where_cutlass_is_elected():
    """QUANT002's weight-only Marlin note steps back where QUANT020's start-up failure applies
    (0.29.0-0.30.x elect CUTLASS FP8 before Marlin), so one cause gives one finding."""
    kept = dict(gpu__min_capability=80, model__quant_method="fp8")
    findings = {
        f.rule.code: f for f in evaluate_rules(load_rules(), _facts(vllm__version="0.29.0", **kept))
    }
    assert findings["QUANT020"].verdict == APPLIES
    assert findings["QUANT002"].verdict == NOT_APPLIES
    assert findings["QUANT002"].deferred_to == "QUANT020"
    findings = {
        f.rule.code: f for f in evaluate_rules(load_rules(), _facts(vllm__version="0.28.0", **kept))
    }
    assert findings["QUANT020"].verdict == NOT_APPLIES
    assert findings["QUANT002"].verdict == APPLIES
