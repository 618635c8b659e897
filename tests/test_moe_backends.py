"""The GPUs each --moe-backend choice runs on (tools/extractors/moe_backends.py, the shipped
table moe_backends read from the real wheels), facts/release_moe_backend.py and rule HW145."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from judging import facts_with, verdict

from vllm_doctor.engine.evaluate import APPLIES, NOT_APPLIES, UNDECIDED
from vllm_doctor.facts.collect import CollectOptions, collect_facts
from vllm_doctor.facts.model import Facts, Source
from vllm_doctor.facts.release_moe_backend import _eval
from vllm_doctor.knowledge import load

REPO = Path(__file__).resolve().parent.parent


def test_table_reads_the_trtllm_gen_experts_as_the_10x_family_only():
    at = load("moe_backends").at("0.26.0")
    entry = at["nvfp4:flashinfer_trtllm"]
    assert entry["backend"] == "FLASHINFER_TRTLLM"
    for program in entry["classes"].values():
        assert ["family", 100] in program
    assert _eval(next(iter(entry["classes"].values())), 103) is True
    assert _eval(next(iter(entry["classes"].values())), 121) is False


def test_flashinfer_cutlass_drops_the_11x_family_in_0_21_0():
    """vLLM pull request 40808 (no SM110 MoE cubins in FlashInfer): read from the code."""
    old = load("moe_backends").at("0.20.0")["nvfp4:flashinfer_cutlass"]["classes"]
    new = load("moe_backends").at("0.21.0")["nvfp4:flashinfer_cutlass"]["classes"]
    assert all(_eval(p, 110) is True for p in old.values())
    assert all(_eval(p, 110) is False for p in new.values())


def test_no_table_before_the_option():
    table = load("moe_backends")
    assert not table.at("0.16.0")
    assert table.at("0.17.0")


@pytest.mark.parametrize(
    ("serve", "capability", "quant", "expected"),
    [
        ("--moe-backend flashinfer_trtllm", 121, ("modelopt_fp4", "nvfp4"), APPLIES),
        ("--moe-backend flashinfer_trtllm", 120, ("modelopt_fp4", "nvfp4"), APPLIES),
        ("--moe-backend flashinfer_trtllm", 100, ("modelopt_fp4", "nvfp4"), NOT_APPLIES),
        ("--moe-backend FLASHINFER_CUTLASS", 121, ("modelopt_fp4", "nvfp4"), NOT_APPLIES),
        ("--moe-backend flashinfer_trtllm", 90, ("fp8", "fp8"), APPLIES),
        ("--moe-backend triton", 90, ("fp8", "fp8"), NOT_APPLIES),
        ("", 121, ("modelopt_fp4", "nvfp4"), NOT_APPLIES),  # not forced
    ],
)
def test_forced_backend_against_the_gpu(serve, capability, quant, expected):
    method, scheme = quant
    facts = facts_with(
        {
            "vllm.version": "0.26.0",
            "gpu.capabilities": [capability],
            "gpu.min_capability": capability,
            "model.num_experts": 128,
            "model.quant_method": method,
            "model.quant_scheme": scheme,
        },
        f"vllm serve some/moe-model {serve}".strip(),
    )
    assert verdict("HW145", facts) == expected


def test_dense_model_asks_no_moe_backend(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "architectures": ["Qwen3ForCausalLM"],
                "model_type": "qwen3",
                "torch_dtype": "bfloat16",
                "hidden_size": 4096,
                "num_attention_heads": 32,
                "num_key_value_heads": 8,
                "head_dim": 128,
                "num_hidden_layers": 36,
                "intermediate_size": 12288,
                "vocab_size": 151936,
                "max_position_embeddings": 40960,
                "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]},
            }
        )
    )
    given = Facts()
    for path, value in {"vllm.version": "0.26.0", "gpu.capabilities": [90]}.items():
        given.set(path, value, Source.REPORT, "test")
    facts = collect_facts(
        CollectOptions(
            serve_string=f"vllm serve {tmp_path} --moe-backend flashinfer_trtllm",
            model_config=config,
            probe_machine=False,
            environ={},
            given=given,
        )
    )
    assert facts.value("release.moe_backend.refused_on_gpu") is False
    assert "dense model" in facts.get("release.moe_backend.refused_on_gpu").detail
    assert verdict("HW145", facts) == NOT_APPLIES


def test_an_unread_device_test_leaves_it_open():
    facts = facts_with(
        {
            "vllm.version": "0.26.0",
            "gpu.capabilities": [90],
            "gpu.min_capability": 90,
            "model.num_experts": 128,
            "model.quant_method": "fp8",
            "model.quant_scheme": "fp8",
        },
        "vllm serve some/moe-model --moe-backend deep_gemm",
    )
    assert facts.value("release.moe_backend.refused_on_gpu") is None
    assert "could not read" in facts.why_missing("release.moe_backend.refused_on_gpu")
    assert verdict("HW145", facts) == UNDECIDED
