"""Heads and sizes read from every layout vLLM reads, and missing (never absent) otherwise.

The configs are excerpts of public config.json files (the keys that matter here, values as
published): gpt2, tiiuae/falcon-7b (current and the original RefinedWebModel layout),
tiiuae/falcon-40b, databricks/dbrx-instruct, mosaicml/mpt-7b, THUDM/chatglm3-6b,
openai/whisper-large-v3, bigcode/starcoder, google/t5-v1_1-xl, llava-hf/llava-1.5-7b-hf.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from vllm_doctor.facts.model import Facts
from vllm_doctor.facts.model_config import keys_for, layout_of, read_model_config

CONFIGS = {
    "gpt2": (
        {
            "architectures": ["GPT2LMHeadModel"],
            "model_type": "gpt2",
            "n_head": 12,
            "n_embd": 768,
            "n_layer": 12,
            "n_positions": 1024,
            "vocab_size": 50257,
        },
        {
            "num_attention_heads": 12,
            "num_key_value_heads": 12,
            "hidden_size": 768,
            "num_hidden_layers": 12,
            "head_dim": 64,
            "max_position_embeddings": 1024,
        },
    ),
    "falcon-7b": (
        {
            "architectures": ["FalconForCausalLM"],
            "model_type": "falcon",
            "hidden_size": 4544,
            "num_attention_heads": 71,
            "num_hidden_layers": 32,
            "multi_query": True,
            "new_decoder_architecture": False,
            "vocab_size": 65024,
        },
        {"num_attention_heads": 71, "num_key_value_heads": 1, "head_dim": 64},
    ),
    "falcon-7b-refinedweb": (
        {
            "architectures": ["RWForCausalLM"],
            "model_type": "RefinedWebModel",
            "hidden_size": 4544,
            "n_head": 71,
            "n_layer": 32,
            "multi_query": True,
            "vocab_size": 65024,
        },
        {"num_attention_heads": 71, "num_key_value_heads": 1, "num_hidden_layers": 32},
    ),
    "falcon-40b": (
        {
            "architectures": ["FalconForCausalLM"],
            "model_type": "falcon",
            "hidden_size": 8192,
            "num_attention_heads": 128,
            "num_kv_heads": 8,
            "num_hidden_layers": 60,
            "new_decoder_architecture": True,
            "vocab_size": 65024,
        },
        {"num_attention_heads": 128, "num_key_value_heads": 8},
    ),
    "dbrx": (
        {
            "architectures": ["DbrxForCausalLM"],
            "model_type": "dbrx",
            "d_model": 6144,
            "n_heads": 48,
            "n_layers": 40,
            "max_seq_len": 32768,
            "vocab_size": 100352,
            "attn_config": {"kv_n_heads": 8, "clip_qkv": 8, "rope_theta": 500000},
            "ffn_config": {"moe_num_experts": 16, "moe_top_k": 4},
        },
        {
            "num_attention_heads": 48,
            "num_key_value_heads": 8,
            "hidden_size": 6144,
            "num_hidden_layers": 40,
            "max_position_embeddings": 32768,
            "num_experts": 16,
        },
    ),
    "mpt-7b": (
        {
            "architectures": ["MPTForCausalLM"],
            "model_type": "mpt",
            "d_model": 4096,
            "n_heads": 32,
            "n_layers": 32,
            "max_seq_len": 2048,
            "vocab_size": 50432,
            "attn_config": {"alibi": True, "attn_impl": "torch"},
        },
        {
            "num_attention_heads": 32,
            "num_key_value_heads": 32,
            "hidden_size": 4096,
            "num_hidden_layers": 32,
            "max_position_embeddings": 2048,
        },
    ),
    "chatglm3-6b": (
        {
            "architectures": ["ChatGLMModel"],
            "model_type": "chatglm",
            "num_layers": 28,
            "hidden_size": 4096,
            "num_attention_heads": 32,
            "multi_query_attention": True,
            "multi_query_group_num": 2,
            "padded_vocab_size": 65024,
            "seq_length": 8192,
            "kv_channels": 128,
        },
        {
            "num_attention_heads": 32,
            "num_key_value_heads": 2,
            "num_hidden_layers": 28,
            "vocab_size": 65024,
            "max_position_embeddings": 8192,
        },
    ),
    "whisper-large-v3": (
        {
            "architectures": ["WhisperForConditionalGeneration"],
            "model_type": "whisper",
            "d_model": 1280,
            "encoder_attention_heads": 20,
            "decoder_attention_heads": 20,
            "encoder_layers": 32,
            "decoder_layers": 32,
            "vocab_size": 51866,
            "max_target_positions": 448,
            "max_source_positions": 1500,
        },
        {
            "num_attention_heads": 20,
            "num_key_value_heads": 20,
            "hidden_size": 1280,
            "num_hidden_layers": 32,
            "head_dim": 64,
        },
    ),
    "starcoder": (
        {
            "architectures": ["GPTBigCodeForCausalLM"],
            "model_type": "gpt_bigcode",
            "n_head": 48,
            "n_embd": 6144,
            "n_layer": 40,
            "multi_query": True,
            "n_positions": 8192,
            "vocab_size": 49152,
        },
        {"num_attention_heads": 48, "num_key_value_heads": 1, "hidden_size": 6144},
    ),
    "t5-v1_1-xl": (
        {
            "architectures": ["T5ForConditionalGeneration"],
            "model_type": "t5",
            "d_model": 2048,
            "d_kv": 64,
            "num_heads": 32,
            "num_layers": 24,
            "vocab_size": 32128,
        },
        {"num_attention_heads": 32, "head_dim": 64, "hidden_size": 2048, "num_hidden_layers": 24},
    ),
    "llava-1.5-7b": (
        {
            "architectures": ["LlavaForConditionalGeneration"],
            "model_type": "llava",
            "text_config": {
                "model_type": "llama",
                "num_attention_heads": 32,
                "num_key_value_heads": 32,
                "hidden_size": 4096,
                "num_hidden_layers": 32,
                "vocab_size": 32064,
            },
            "vision_config": {
                "model_type": "clip_vision_model",
                "num_attention_heads": 16,
                "hidden_size": 1024,
            },
        },
        {"num_attention_heads": 32, "hidden_size": 4096, "vocab_size": 32064},
    ),
}


def read(cfg: dict) -> Facts:
    facts = Facts()
    read_model_config(facts, Path("/models/m/config.json"), cfg, "test")
    return facts


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_layouts_read_like_vllm(name):
    cfg, expected = CONFIGS[name]
    facts = read(cfg)
    got = {k: facts.value(f"model.{k}") for k in expected}
    assert got == expected


def test_layout_table_is_generated_from_the_config_classes():
    assert keys_for("num_attention_heads", "gpt2")[0] == "n_head"
    assert keys_for("num_attention_heads", "whisper")[0] == "encoder_attention_heads"
    assert keys_for("num_hidden_layers", "chatglm")[0] == "num_layers"  # vLLM's own class
    assert layout_of("qwen2_5_omni")["text"] == "thinker_config.text_config"
    assert layout_of("no-such-type") is None


@pytest.mark.parametrize(
    "cfg, path, needle",
    [
        # attention-free: no heads anywhere
        (
            {
                "architectures": ["MambaForCausalLM"],
                "model_type": "mamba",
                "hidden_size": 768,
                "num_hidden_layers": 24,
                "vocab_size": 50280,
            },
            "model.num_attention_heads",
            "attention-free",
        ),
        # a remote-code type with its heads under a key nobody reads
        (
            {
                "architectures": ["WeirdForCausalLM"],
                "model_type": "weird",
                "attn_heads": 40,
                "hidden_size": 5120,
                "num_hidden_layers": 40,
                "vocab_size": 32000,
            },
            "model.num_attention_heads",
            "no layout",
        ),
        (
            {"model_type": "llama", "num_attention_heads": 32, "hidden_size": 4096},
            "model.architectures",
            "no architectures",
        ),
        (
            {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096},
            "model.num_key_value_heads",
            "KV-head count",
        ),
    ],
)
def test_a_field_the_config_lacks_is_missing_with_a_reason(cfg, path, needle):
    facts = read(cfg)
    assert path not in facts
    assert needle in (facts.why_missing(path) or ""), facts.why_missing(path)


def test_optional_features_stay_absent():
    cfg, _ = CONFIGS["gpt2"]
    facts = read(cfg)
    for path in ("model.num_experts", "model.kv_lora_rank", "model.quant_method"):
        assert path not in facts and facts.why_missing(path) is None
