"""Model facts from config.json fixtures, the HF cache layout and the model name."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from vllm_doctor.errors import InputError
from vllm_doctor.facts.model import Facts, Source
from vllm_doctor.facts.model_config import family_of, quant_scheme
from vllm_doctor.facts.model_source import collect_model, find_in_hf_cache, hf_hub_cache

MODELS = Path(__file__).parent / "fixtures" / "models"

# fixture → expected facts (None: the fact must be absent)
EXPECTED = {
    "diffusiongemma-26B-A4B-IT-NVFP4": dict(
        architectures=["DiffusionGemmaForBlockDiffusion"],
        model_type="diffusion_gemma",
        text_model_type="diffusion_gemma_text",
        family="diffusion_gemma",
        num_attention_heads=16,
        num_key_value_heads=8,
        head_dim=256,
        global_head_dim=512,
        hidden_size=2816,
        vocab_size=262144,
        num_hidden_layers=30,
        num_experts=128,
        dtype="bfloat16",
        quant_method="modelopt",
        quant_algo="NVFP4",
        quant_scheme="nvfp4",
        weights_bytes=17_384_245_248,
    ),
    "gemma-4-E2B-it": dict(
        architectures=["Gemma4ForConditionalGeneration"],
        model_type="gemma4",
        text_model_type="gemma4_text",
        family="gemma4",
        num_attention_heads=8,
        num_key_value_heads=1,
        head_dim=256,
        global_head_dim=512,
        hidden_size=1536,
        num_hidden_layers=35,
        num_experts=None,
        quant_method=None,
        max_position_embeddings=131072,
    ),
    "gemma-4-26B-A4B-it": dict(
        family="gemma4",
        num_attention_heads=16,
        num_key_value_heads=8,
        num_experts=128,
        hidden_size=2816,
        num_hidden_layers=30,
        max_position_embeddings=262144,
    ),
    "gemma-4-31B-it": dict(
        family="gemma4",
        num_attention_heads=32,
        num_key_value_heads=16,
        num_experts=None,
        hidden_size=5376,
        num_hidden_layers=60,
        global_head_dim=512,
    ),
    "gemma-4-E2B-it-assistant": dict(
        architectures=["Gemma4MTPModel"], family="gemma4", num_hidden_layers=4
    ),
    "DeepSeek-V3.2": dict(
        architectures=["DeepseekV32ForCausalLM"],
        model_type="deepseek_v32",
        text_model_type=None,
        family="deepseek_v32",
        num_attention_heads=128,
        kv_lora_rank=512,
        head_dim=192,
        num_experts=256,
        num_mtp_layers=1,
        quant_method="fp8",
        quant_scheme="fp8-dynamic",
        dtype="bfloat16",
        vocab_size=129280,
    ),
    "DeepSeek-V3.2-NVFP4": dict(
        family="deepseek_v32",
        quant_method="modelopt",
        quant_algo="NVFP4",
        quant_scheme="nvfp4",
        kv_lora_rank=512,
    ),
    "Llama-3.1-8B-Instruct": dict(
        architectures=["LlamaForCausalLM"],
        family="llama",
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=128,
        hidden_size=4096,
        vocab_size=128256,
        num_hidden_layers=32,
        max_position_embeddings=131072,
        quant_method=None,
        weights_bytes=16_060_522_496,
    ),
    "Meta-Llama-3.1-8B-Instruct-FP8-dynamic": dict(
        quant_method="compressed-tensors", quant_scheme="fp8-dynamic", quant_algo=None
    ),
    "Qwen3-32B": dict(
        family="qwen3",
        num_attention_heads=64,
        num_key_value_heads=8,
        head_dim=128,
        num_hidden_layers=64,
        max_position_embeddings=40960,
    ),
    "Qwen3-32B-quantized.w4a16": dict(quant_method="compressed-tensors", quant_scheme="w4a16"),
    "Qwen3-30B-A3B": dict(
        family="qwen3",
        model_type="qwen3_moe",
        num_experts=128,
        num_key_value_heads=4,
        num_hidden_layers=48,
    ),
    "gpt-oss-120b": dict(
        architectures=["GptOssForCausalLM"],
        family="gpt_oss",
        num_experts=128,
        head_dim=64,
        quant_method="mxfp4",
        quant_scheme="mxfp4",
    ),
    "Llama-3.1-8B-Instruct-FP4": dict(
        quant_method="modelopt", quant_algo="NVFP4", quant_scheme="nvfp4"
    ),
    "Phi-3.5-vision-instruct-FP8-dynamic": dict(
        architectures=["Phi3VForCausalLM"],
        model_type="phi3_v",
        family="phi3",
        num_attention_heads=32,
        num_key_value_heads=32,
        head_dim=96,
        quant_method="compressed-tensors",
        quant_scheme="fp8-dynamic",
    ),
    "Qwen2.5-7B-Instruct-AWQ": dict(
        quant_method="awq", quant_scheme="awq", dtype="float16", num_key_value_heads=4
    ),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_configs(name):
    facts = Facts()
    collect_model(facts, MODELS / name)
    assert facts.value("model.inferred") is False
    assert facts.value("model.config_path") == str(MODELS / name / "config.json")
    for key, expected in EXPECTED[name].items():
        path = f"model.{key}"
        if expected is None:
            assert path not in facts, path
        else:
            assert facts.value(path) == expected, path
    assert not facts.missing, facts.missing


def test_every_fixture_is_checked():
    assert {p.name for p in MODELS.iterdir() if p.is_dir()} == set(EXPECTED)


def test_nested_text_config_is_named_in_the_source():
    facts = Facts()
    collect_model(facts, MODELS / "gemma-4-26B-A4B-it" / "config.json")
    assert facts.get("model.num_attention_heads").source == Source.CONFIG
    assert "text_config" in facts.get("model.num_attention_heads").detail


def test_explicit_config_missing_or_invalid(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        collect_model(Facts(), tmp_path / "absent.json")
    with pytest.raises(InputError, match=r"no config\.json"):
        collect_model(Facts(), tmp_path)
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    with pytest.raises(InputError, match="not valid JSON"):
        collect_model(Facts(), bad)
    bad.write_text("[1, 2]")
    with pytest.raises(InputError, match="not an object"):
        collect_model(Facts(), bad)


def test_no_model_at_all():
    facts = Facts()
    collect_model(facts, None, None)
    assert "--model-config" in facts.why_missing("model.architectures")


def test_local_model_directory_from_serve(tmp_path):
    shutil.copytree(MODELS / "Qwen3-32B", tmp_path / "models" / "qwen")
    facts = Facts()
    collect_model(facts, None, "models/qwen", cwd=tmp_path, environ={})
    assert facts.value("model.id") == "models/qwen"
    assert facts.value("model.num_attention_heads") == 64


def test_local_directory_without_config(tmp_path):
    (tmp_path / "weights").mkdir()
    facts = Facts()
    collect_model(facts, None, "weights", cwd=tmp_path, environ={})
    assert "has no config.json" in facts.why_missing("model.architectures")


def make_snapshot(cache: Path, repo: str, rev: str, source: str, mtime: float) -> Path:
    snap = cache / ("models--" + repo.replace("/", "--")) / "snapshots" / rev
    snap.mkdir(parents=True)
    for f in (MODELS / source).iterdir():
        shutil.copy(f, snap / f.name)
    os.utime(snap, (mtime, mtime))
    return snap


def test_hf_cache_newest_snapshot_and_refs_main(tmp_path):
    cache = tmp_path / "hub"
    now = time.time()
    make_snapshot(cache, "google/gemma-4-31B-it", "aaa", "gemma-4-E2B-it", now - 100)
    make_snapshot(cache, "google/gemma-4-31B-it", "bbb", "gemma-4-31B-it", now)
    facts = Facts()
    collect_model(
        facts, None, "google/gemma-4-31B-it", cwd=tmp_path, environ={"HF_HUB_CACHE": str(cache)}
    )
    assert facts.value("model.num_hidden_layers") == 60  # newest snapshot
    assert facts.value("model.weights_bytes") == 62_546_841_600
    assert "HF cache" in facts.get("model.architectures").detail
    # refs/main wins over the newest snapshot
    (cache / "models--google--gemma-4-31B-it" / "refs").mkdir()
    (cache / "models--google--gemma-4-31B-it" / "refs" / "main").write_text("aaa")
    facts = Facts()
    collect_model(
        facts, None, "google/gemma-4-31B-it", cwd=tmp_path, environ={"HF_HUB_CACHE": str(cache)}
    )
    assert facts.value("model.num_hidden_layers") == 35


def test_hf_cache_case_insensitive(tmp_path):
    cache = tmp_path / "hub"
    make_snapshot(cache, "Qwen/Qwen3-32B", "r1", "Qwen3-32B", time.time())
    assert find_in_hf_cache("qwen/qwen3-32b", cache) is not None
    assert find_in_hf_cache("not-a-repo-id", cache) is None


@pytest.mark.parametrize(
    "env, expected",
    [
        ({"HF_HUB_CACHE": "/a/hub", "HF_HOME": "/b"}, "/a/hub"),
        ({"HF_HOME": "/b"}, "/b/hub"),
        ({"XDG_CACHE_HOME": "/x"}, "/x/huggingface/hub"),
        ({"HOME": "/home/u"}, "/home/u/.cache/huggingface/hub"),
    ],
)
def test_hf_hub_cache_location(env, expected):
    assert hf_hub_cache(env) == Path(expected)


def test_inference_from_the_name_only(tmp_path):
    facts = Facts()
    collect_model(
        facts,
        None,
        "nvidia/diffusiongemma-26B-A4B-IT-NVFP4",
        cwd=tmp_path,
        environ={"HF_HUB_CACHE": str(tmp_path / "empty")},
    )
    assert facts.value("model.inferred") is True
    assert facts.value("model.quant_scheme") == "nvfp4"
    assert facts.value("model.family") == "diffusion_gemma"
    assert facts.get("model.family").source == Source.INFERRED
    assert "model.architectures" not in facts
    reason = facts.why_missing("model.architectures")
    assert "not in the Hugging Face cache" in reason and "--model-config" in reason


@pytest.mark.parametrize(
    "model_id, scheme, family",
    [
        ("RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8-dynamic", "fp8-dynamic", "llama"),
        ("Qwen/Qwen3-32B-FP8", "fp8", "qwen3"),
        ("Qwen/Qwen2.5-7B-Instruct-AWQ", "awq", "qwen2"),
        ("openai/gpt-oss-120b", "mxfp4", "gpt_oss"),
        ("deepseek-ai/DeepSeek-V3.2", None, "deepseek_v32"),
        ("nvidia/DeepSeek-V3.2-NVFP4", "nvfp4", "deepseek_v32"),
        ("RedHatAI/Qwen3-32B-quantized.w4a16", "w4a16", "qwen3"),
        ("neuralmagic/Llama-3.1-8B-Instruct-quantized.w8a8", "w8a8-int8", "llama"),
    ],
)
def test_name_hints(model_id, scheme, family):
    facts = Facts()
    collect_model(facts, None, model_id, environ={}, use_hf_cache=False)
    assert facts.value("model.quant_scheme") == scheme
    assert facts.value("model.family") == family
    assert "not searched" in facts.why_missing("model.num_attention_heads")


def test_hf_quant_config_only(tmp_path):
    model = tmp_path / "m"
    shutil.copytree(MODELS / "Llama-3.1-8B-Instruct-FP4", model)
    (model / "hf_quant_config.json").write_text("{broken")
    facts = Facts()
    collect_model(facts, model)
    assert "model.quant_method" not in facts
    assert any("hf_quant_config.json" in n for n in facts.notes)


def test_weights_size_from_safetensors_files(tmp_path):
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "llama"}))
    (model / "model.safetensors").write_bytes(b"\0" * 1234)
    facts = Facts()
    collect_model(facts, model)
    assert facts.value("model.weights_bytes") == 1234
    empty = tmp_path / "n"
    empty.mkdir()
    (empty / "config.json").write_text("{}")
    facts = Facts()
    collect_model(facts, empty)
    assert "no safetensors" in facts.why_missing("model.weights_bytes")


@pytest.mark.parametrize(
    "qcfg, expected",
    [
        ({"quant_method": "fp8", "activation_scheme": "static"}, ("fp8", None, "fp8")),
        ({"quant_method": "modelopt", "quant_algo": "FP8"}, ("modelopt", "FP8", "fp8")),
        (
            {"quant_method": "modelopt_fp4", "quant_algo": "NVFP4"},
            ("modelopt_fp4", "NVFP4", "nvfp4"),
        ),
        ({"quant_method": "gptq_marlin", "bits": 4}, ("gptq_marlin", None, "gptq")),
        ({"quant_method": "bitsandbytes", "load_in_4bit": True}, ("bitsandbytes", None, "bnb")),
        (
            {
                "quant_method": "compressed-tensors",
                "config_groups": {
                    "g": {
                        "weights": {"num_bits": 4, "type": "float"},
                        "input_activations": {"num_bits": 4, "type": "float"},
                    }
                },
            },
            ("compressed-tensors", None, "nvfp4"),
        ),
        (
            {
                "quant_method": "compressed-tensors",
                "config_groups": {
                    "g": {
                        "weights": {"num_bits": 4, "type": "int"},
                        "input_activations": {"num_bits": 8, "type": "float", "dynamic": True},
                    }
                },
            },
            ("compressed-tensors", None, "w4a8"),
        ),
        (
            {
                "quant_method": "compressed-tensors",
                "config_groups": {
                    "g": {
                        "weights": {"num_bits": 8, "type": "int"},
                        "input_activations": {"num_bits": 8, "type": "int", "dynamic": True},
                    }
                },
            },
            ("compressed-tensors", None, "w8a8-int8"),
        ),
        (
            {
                "quant_method": "compressed-tensors",
                "config_groups": {
                    "a": {
                        "weights": {"num_bits": 8, "type": "float"},
                        "input_activations": {"num_bits": 8, "type": "float", "dynamic": True},
                    },
                    "b": {
                        "weights": {"num_bits": 4, "type": "float"},
                        "input_activations": {"num_bits": 4, "type": "float"},
                    },
                },
            },
            ("compressed-tensors", None, "mixed"),
        ),
    ],
)
def test_quant_schemes(qcfg, expected):
    assert quant_scheme(qcfg) == expected


def test_quant_from_hf_quant_config_alone():
    assert quant_scheme({}, {"quantization": {"quant_algo": "NVFP4"}}) == (
        "modelopt",
        "NVFP4",
        "nvfp4",
    )


@pytest.mark.parametrize(
    "model_type, family",
    [
        ("gemma4_text", "gemma4"),
        ("qwen3_moe", "qwen3"),
        ("phi3_v", "phi3"),
        ("deepseek_v32", "deepseek_v32"),
        ("llama", "llama"),
        (None, None),
    ],
)
def test_family_of(model_type, family):
    assert family_of(model_type) == family
