"""Hybrid attention / state-space KV pools (memory/kv.py) against figures derived by hand from
the release source in /work/wheels/src/<version>/vllm.

Geometry of the checkpoints (config.json as transformers printed it in gogongxt/python,
scripts/models/qwen3_next_80b_a3b_instruct.md and scripts/models/qwen3.6_35b_a3b.md at
cbff706dc959707a9944e38e8164783122dfa32a):
Qwen3-Next-80B-A3B-Instruct 48 layers (every 4th full attention), 2 KV heads × 256, Gated
DeltaNet 16 key / 32 value heads × 128, conv kernel 4; Qwen3.6-35B-A3B 40 layers, the same
attention and DeltaNet heads, mamba_ssm_dtype float32.
"""

from __future__ import annotations

import pytest

from vllm_doctor.memory import kv as kvmod
from vllm_doctor.memory import weights as wmod
from vllm_doctor.memory.formula import GIB, formula_for

GDN = {
    "full_attention_interval": 4,
    "linear_num_key_heads": 16,
    "linear_num_value_heads": 32,
    "linear_key_head_dim": 128,
    "linear_value_head_dim": 128,
    "linear_conv_kernel_dim": 4,
    "num_key_value_heads": 2,
    "head_dim": 256,
}
QWEN3_NEXT = {**GDN, "model_type": "qwen3_next", "hidden_size": 2048, "num_hidden_layers": 48}
QWEN36_35B = {
    **GDN,
    "model_type": "qwen3_5_moe_text",
    "hidden_size": 2048,
    "num_hidden_layers": 40,
    "mamba_ssm_dtype": "float32",
}


def _layout(text: dict, tp: int, kv_bytes: float) -> kvmod.KvLayout:
    return kvmod.kv_layout(
        text,
        n_layers=text["num_hidden_layers"],
        kv_heads=2,
        head_dim=256,
        tp=tp,
        pp=1,
        kv_bytes=kv_bytes,
        state_bytes=2,
        kv_dtype="fp8" if kv_bytes == 1 else "bfloat16",
    )


def test_qwen3_next_tp2_on_0_10_2():
    # 0.10.2 HybridAttentionMambaModelConfig.verify_and_update_config (model_executor/models/
    # config.py): attention page per token 2 × 1 head × 256 × 2 B = 1024 B; Gated DeltaNet state
    # per TP rank (mamba_utils.gated_delta_net_state_shape) conv 3 × (2·16·128 + 32·128)/2 =
    # 12288 + recurrent 16 × 128 × 128 = 262144 elements × 2 B = 548864 B; block
    # 16 × cdiv(548864, 16 × 1024) = 544 ("Padding mamba page size by 1.49%").
    layout = _layout(QWEN3_NEXT, tp=2, kv_bytes=2)
    assert layout.counts() == {kvmod.FULL: 12, kvmod.MAMBA: 36}
    assert max(layer.state_bytes for layer in layout.layers) == 548864
    mode = formula_for("0.10.2").mamba
    blocks, _ = mode.blocks_per_request(
        model_type="qwen3_next",
        prefix_caching=None,
        spec_tokens=0,
        max_model_len=262144,
        block=544,
    )
    assert blocks == 1  # 0.10.2 MambaSpec.max_memory_usage_bytes = page_size_bytes
    # v1/core/kv_cache_utils.py (0.10.2): 12 attention + 36 state layers → groups of 12 layers
    # (1 attention, 3 state), num_blocks = 44.59 GiB // 557056 B // 12 = 7162; tokens
    # 7162 // 4 × 544 = 973,760; concurrency 7162 / (cdiv(262144, 544) + 3) = 14.77
    cap = kvmod.capacity(
        layout,
        int(44.59 * GIB),
        max_model_len=262144,
        max_num_batched_tokens=8192,
        tokens_from_concurrency=False,
        state_blocks=blocks,
    )
    assert (cap.block_size, cap.page_bytes, cap.groups, cap.num_blocks) == (544, 557056, 4, 7162)
    assert cap.tokens == 973_760
    assert round(cap.concurrency, 2) == 14.77


def test_qwen3_5_float32_recurrent_state_sets_the_block():
    # 0.20.0 Qwen3_5ForConditionalGenerationConfig.verify_and_update_config: the config's
    # mamba_ssm_dtype float32 becomes mamba_ssm_cache_dtype, so the recurrent state is
    # 32 × 128 × 128 × 4 B = 2097152 B and the conv state 3 × 8192 × 2 B = 49152 B; with an fp8
    # KV cache (1024 B per token on the 2 KV heads) the block is 16 × cdiv(2146304, 16384) = 2096
    # ("Setting attention block size to 2096 tokens"); bf16 state would give 1072.
    layout = _layout(QWEN36_35B, tp=1, kv_bytes=1)
    assert max(layer.state_bytes for layer in layout.layers) == 2_146_304
    assert kvmod.block_size_for(layout, None) == (2096, 2096 * 1024)


def test_align_mode_holds_two_state_blocks_per_request():
    # 0.20.0 with --enable-prefix-caching on Qwen3.5 (no SupportsMambaPrefixCaching):
    # MambaModelConfig sets mamba_cache_mode 'align', MambaSpec.max_memory_usage_bytes =
    # page × (2 + num_speculative_blocks). 40 layers → groups of 10 (1 attention, 3 state);
    # a pool of 147 blocks: tokens 147 // 4 × 2096 = 75,456 (kv_cache_utils._report_kv_cache_config)
    # and concurrency 147 / (cdiv(65536, 2096) + 3 × 2) = 147 / 38 = 3.87 at 65,536 tokens.
    layout = _layout(QWEN36_35B, tp=1, kv_bytes=1)
    blocks, how = formula_for("0.20.0").mamba.blocks_per_request(
        model_type="qwen3_5_moe_text",
        prefix_caching=True,
        spec_tokens=0,
        max_model_len=65536,
        block=2096,
    )
    assert blocks == 2 and "align" in how
    cap = kvmod.capacity(
        layout,
        147 * 10 * 2096 * 1024,
        max_model_len=65536,
        max_num_batched_tokens=8192,
        tokens_from_concurrency=False,
        state_blocks=blocks,
    )
    assert cap.num_blocks == 147 and cap.tokens == 75_456
    assert round(cap.concurrency, 2) == 3.87


@pytest.mark.parametrize(
    ("release", "model_type", "caching", "spec", "expected"),
    [
        # 0.11.0: MambaSpec holds one block per request whatever the flags
        ("0.11.0", "qwen3_next", True, 0, 1),
        # 0.13.0 with prefix caching: kept only for SupportsMambaPrefixCaching models, whose
        # mamba_block_size = block size → cdiv(8192, 544) = 16; disabled for the others
        ("0.13.0", "nemotron_h", True, 0, 16),
        ("0.13.0", "qwen3_next", True, 0, 1),
        ("0.13.0", "nemotron_h", False, 0, 1),
        # 0.15.0: 'all' for SupportsMambaPrefixCaching models (Nemotron-H), 'align' for the rest
        ("0.15.0", "nemotron_h", True, 0, 16),
        ("0.15.0", "qwen3_next", True, 0, 2),
        # 0.20.0: speculative decoding sends 'all' models to 'align' (2 + 2 speculative blocks)
        ("0.20.0", "nemotron_h", True, 2, 4),
        ("0.20.0", "qwen3_next", False, 2, 3),
        # prefix caching not given: off for hybrids up to 0.25.1, on from 0.26.0
        ("0.25.1", "qwen3_next", None, 0, 1),
        ("0.26.0", "qwen3_next", None, 0, 2),
        # 0.33.0 drops 'all': every model aligns
        ("0.33.0", "nemotron_h", True, 0, 2),
    ],
)
def test_state_blocks_per_request_by_release(release, model_type, caching, spec, expected):
    blocks, _ = formula_for(release).mamba.blocks_per_request(
        model_type=model_type,
        prefix_caching=caching,
        spec_tokens=spec,
        max_model_len=8192,
        block=544,
    )
    assert blocks == expected


def _weights(text: dict, tp: int = 1) -> float:
    estimate = wmod.from_config(
        text, text, tp=tp, pp=1, dtype_bytes=2, qcfg=None, scheme=None, online_quant=None
    )
    return estimate.bytes_per_gpu / GIB


def test_hybrid_weights_count_each_layers_own_mixer():
    # Granite-4.0-H-1B (the config Rapid-LLM's tests/test_qif_model_matrix.py quotes): 36 Mamba2
    # mixers (model_executor/layers/mamba/mamba_mixer2.py: in_proj 1536 × (2·3072 + 2·128 + 48),
    # conv1d 3328 × (4 + 1), out_proj 3072 × 1536, A/D/dt_bias 3 × 48, norm 3072) = 14.64 M each, 4
    # attention layers (1536 × (12 + 8) × 128 + 12 × 128 × 1536) = 6.29 M, 40 gated MLPs
    # 3 × 1536 × 4096, tied embeddings 100352 × 1536: 1.461 B parameters, 2.72 GiB in bf16 — what
    # "Model loading took 2.72 GiB" prints; counting every layer as attention gives 2.16 GiB.
    layer_types = ["mamba"] * 5 + (["attention"] + ["mamba"] * 9) * 3 + ["attention"]
    layer_types += ["mamba"] * 4
    granite = {
        "model_type": "granitemoehybrid",
        "hidden_size": 1536,
        "num_hidden_layers": 40,
        "num_attention_heads": 12,
        "num_key_value_heads": 4,
        "intermediate_size": 4096,
        "shared_intermediate_size": 4096,
        "num_local_experts": 0,
        "vocab_size": 100352,
        "tie_word_embeddings": True,
        "mamba_d_state": 128,
        "mamba_n_groups": 1,
        "mamba_n_heads": 48,
        "mamba_d_head": 64,
        "mamba_d_conv": 4,
        "layer_types": layer_types,
    }
    assert wmod.state_mixer_params(granite, 1536) == (14_642_576, "Mamba2")
    assert round(_weights(granite), 2) == 2.72


def test_gated_deltanet_and_gated_attention_weights():
    # Qwen3-Next-80B-A3B (qwen3_next.py): a Gated DeltaNet mixer is in_proj_qkvz 2048 × 12288,
    # in_proj_ba 2048 × 64, conv1d 8192 × 4, out_proj 4096 × 2048, A_log/dt_bias 32, norm 128
    # = 33.72 M; its attention's q_proj carries the output gate (attn_output_gate defaults to
    # True): 2048 × (2·16 + 2·2) × 256 + 16 × 256 × 2048. 79.67 B parameters over TP 2 in bf16.
    text = {
        **QWEN3_NEXT,
        "num_attention_heads": 16,
        "vocab_size": 151936,
        "intermediate_size": 5120,
        "moe_intermediate_size": 512,
        "num_experts": 512,
        "shared_expert_intermediate_size": 512,
        "tie_word_embeddings": False,
        "layer_types": (["linear_attention"] * 3 + ["full_attention"]) * 12,
    }
    assert wmod.state_mixer_params(text, 2048) == (33_718_464, "Gated DeltaNet")
    assert round(_weights(text, tp=2), 1) == 74.2


def test_tokens_from_concurrency_with_aligned_state_blocks():
    # 0.24.0 kv_cache_utils.get_kv_cache_capacity prints int(concurrency × max_model_len), with
    # concurrency = num_blocks / Σ cdiv(max_memory_usage_bytes, page) over the groups
    # (get_max_concurrency_for_kv_cache_config) and 'align' state groups at 2 blocks. Qwen3.6-35B
    # with an fp8 KV cache and prefix caching at 131,072 tokens from a 5.98 GiB pool: 299 blocks
    # of 10 × 2,146,304 B; 299 / (cdiv(131072, 2096) + 3 × 2) = 4.33 → 567,978 tokens, the figures
    # noonghunna/club-3090#612 prints under 0.24.0 ("Available KV cache memory: 5.98 GiB").
    layout = _layout(QWEN36_35B, tp=1, kv_bytes=1)
    blocks, _ = formula_for("0.24.0").mamba.blocks_per_request(
        model_type="qwen3_5_moe_text",
        prefix_caching=True,
        spec_tokens=0,
        max_model_len=131072,
        block=2096,
    )
    cap = kvmod.capacity(
        layout,
        int(5.98 * GIB),
        max_model_len=131072,
        max_num_batched_tokens=8192,
        tokens_from_concurrency=True,
        state_blocks=blocks,
    )
    assert (cap.num_blocks, cap.blocks_per_request) == (299, 69)
    assert cap.tokens == 567_978 and round(cap.concurrency, 2) == 4.33


def test_one_reader_of_the_state_mixers_aliases():
    # Nemotron-H's, Zamba2's and mamba2's names for one Mamba2 geometry read alike
    nemotron = {"mamba_num_heads": 64, "mamba_head_dim": 64, "ssm_state_size": 128, "n_groups": 8}
    zamba = {"n_mamba_heads": 64, "mamba_headdim": 64, "mamba_d_state": 128, "mamba_ngroups": 8}
    mamba2 = {"model_type": "mamba2", "num_heads": 64, "head_dim": 64, "state_size": 128}
    geos = [kvmod.state_geometry(dict(t, hidden_size=2048)) for t in (nemotron, zamba)]
    assert geos[0] == geos[1]
    assert geos[0].kind == "Mamba2" and geos[0].inner == 4096 and geos[0].conv_kernel == 4
    assert kvmod.state_geometry(dict(mamba2, n_groups=8, conv_kernel=4)) == geos[0]
    # Falcon-H1's mamba_d_ssm sets the inner size apart from heads × head size
    assert kvmod.state_geometry(dict(nemotron, mamba_d_ssm=3072)).inner == 3072
    # the weights and the state cache read the same geometry
    text = dict(nemotron, hidden_size=2048)
    assert wmod.state_mixer_params(text, 2048)[1] == kvmod._state_bytes(text, 1, 2)[1] == "Mamba2"
    # Kimi's KDA: a state cache, but no mixer weights counted
    kda = {"linear_num_heads": 32, "linear_head_dim": 128, "hidden_size": 2304}
    assert kvmod.state_geometry(kda).kind == "KDA"
    assert wmod.state_mixer_params(kda, 2304) is None
