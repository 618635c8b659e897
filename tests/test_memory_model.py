"""The memory model (vllm_doctor/memory/) on real configs and the figures real vLLM logs print."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vllm_doctor.facts.model import Facts
from vllm_doctor.memory import kv as kvmod
from vllm_doctor.memory import weights as wmod
from vllm_doctor.memory.corpus import entry_facts
from vllm_doctor.memory.estimate import estimate_line
from vllm_doctor.memory.facts import compute_memory
from vllm_doctor.memory.formula import GIB, formula_for

MODELS = Path(__file__).parent / "fixtures" / "models"


def _config(name: str) -> dict:
    cfg = json.loads((MODELS / name / "config.json").read_text())
    return cfg.get("text_config", cfg)


def _layout(name: str, tp: int = 1, **kw) -> kvmod.KvLayout:
    text = _config(name)
    return kvmod.kv_layout(
        text,
        n_layers=text["num_hidden_layers"],
        kv_heads=text.get("num_key_value_heads"),
        head_dim=text.get("head_dim") or text["hidden_size"] // text["num_attention_heads"],
        tp=tp,
        pp=kw.get("pp", 1),
        kv_bytes=kw.get("kv_bytes", 2),
        state_bytes=2,
        kv_dtype=kw.get("kv_dtype", "bfloat16"),
        extra_layers=kw.get("extra", 0),
    )


def test_llama_kv_bytes_and_the_logged_token_count():
    # "the rest of the memory reserved for KV Cache is 51.33GiB" → "GPU KV cache size:
    # 420,480 tokens", "Maximum concurrency for 32,768 tokens per request: 12.83x"
    # (Llama-3.1-8B on an H100, the log quoted in issue 21)
    layout = _layout("Llama-3.1-8B-Instruct")
    assert layout.bytes_per_token() == 32 * 8 * 128 * 2 * 2
    cap = kvmod.capacity(
        layout,
        int(51.33 * GIB),
        max_model_len=32768,
        max_num_batched_tokens=8192,
        tokens_from_concurrency=False,
    )
    assert abs(cap.tokens - 420_480) / 420_480 < 0.001
    assert round(cap.concurrency, 2) == 12.83


def test_tp_splits_kv_heads_and_replicates_below_one_head():
    assert _layout("Llama-3.1-8B-Instruct", tp=2).bytes_per_token() == 32 * 4 * 128 * 2 * 2
    # 8 KV heads over TP 16: one head per GPU, not half of one
    assert _layout("Llama-3.1-8B-Instruct", tp=16).bytes_per_token() == 32 * 1 * 128 * 2 * 2


def test_fp8_kv_halves_and_draft_layers_add():
    assert _layout("Llama-3.1-8B-Instruct", kv_bytes=1).bytes_per_token() == 32 * 8 * 128 * 2
    assert len(_layout("Llama-3.1-8B-Instruct", extra=1).layers) == 33


def test_mla_latent_cache_is_replicated_over_tp():
    layout = _layout("DeepSeek-V3.2", tp=8)
    assert {layer.kind for layer in layout.layers} == {kvmod.MLA}
    # DeepSeek-V3.2 is sparse MLA: every layer also caches the indexer's FP8 keys with one
    # fp32 scale per 128 (DeepseekV32IndexerCache, head_dim 128 + 128 // 128 × 4 = 132 B)
    assert layout.bytes_per_token() == 61 * ((512 + 64) * 2 + 132)
    assert _layout("DeepSeek-V3.2", kv_dtype="fp8_ds_mla").bytes_per_token() == 61 * (656 + 132)
    assert _layout("DeepSeek-V3.2", extra=1, kv_dtype="fp8_ds_mla").bytes_per_token() == 62 * 788
    dense_mla = {k: v for k, v in _config("DeepSeek-V3.2").items() if not k.startswith("index_")}
    assert kvmod.indexer_bytes(dense_mla) == 0


# MiniCPM3-4B as gkarfakis19/Rapid-LLM's tests quote its published config.json
# (tests/test_qif_model_matrix.py, MINICPM3_4B_HF, commit 6c2d238ad8d9bd69c25bf9978127c24da2487033)
MINICPM3_4B = {
    "model_type": "minicpm3",
    "hidden_size": 2560,
    "num_hidden_layers": 62,
    "num_attention_heads": 40,
    "num_key_value_heads": 40,
    "intermediate_size": 6400,
    "vocab_size": 73448,
    "q_lora_rank": 768,
    "kv_lora_rank": 256,
    "qk_nope_head_dim": 64,
    "qk_rope_head_dim": 32,
    "max_position_embeddings": 32768,
}


@pytest.mark.parametrize("tp", [1, 2])
def test_kv_lora_rank_outside_vllms_mla_types_caches_plain_heads(tp):
    # is_deepseek_mla does not list minicpm3: MiniCPM3Attention caches K and V of every head at
    # qk_nope + qk_rope = 96 (V padded to it), 40 heads split over TP — not a 288-value latent
    layout = kvmod.kv_layout(
        MINICPM3_4B,
        n_layers=62,
        kv_heads=40,
        head_dim=None,
        tp=tp,
        pp=1,
        kv_bytes=2,
        state_bytes=2,
        kv_dtype="bfloat16",
    )
    assert layout.counts() == {kvmod.FULL: 62}
    assert layout.bytes_per_token() == 62 * 2 * (40 // tp) * 96 * 2
    # the same fields under an MLA model type keep the latent cache
    mla = kvmod.kv_layout(
        dict(MINICPM3_4B, model_type="deepseek_v2"),
        n_layers=62,
        kv_heads=40,
        head_dim=None,
        tp=tp,
        pp=1,
        kv_bytes=2,
        state_bytes=2,
        kv_dtype="bfloat16",
    )
    assert mla.bytes_per_token() == 62 * (256 + 32) * 2


@pytest.mark.parametrize(
    ("version", "requested", "expected"),
    [
        ("0.11.0", "auto", "fp8_ds_mla"),  # auto and fp8 both become DeepSeek's layout
        ("0.11.0", "fp8", "fp8_ds_mla"),
        ("0.11.1", "auto", None),  # from 0.11.1 auto stays the model dtype
        ("0.19.1", "fp8_e4m3", "fp8_ds_mla"),
        ("0.20.0", "fp8", None),  # the attention backend decides from 0.20.0
        ("0.10.2", "fp8", None),
    ],
)
def test_sparse_mla_cache_dtype_per_release(version, requested, expected):
    from vllm_doctor.memory.inputs import sparse_mla_cache_dtype

    text = _config("DeepSeek-V3.2")
    assert sparse_mla_cache_dtype(text, requested, version) == expected
    dense = {k: v for k, v in text.items() if k != "index_topk"}
    assert sparse_mla_cache_dtype(dense, requested, version) is None


def test_sliding_window_layers_from_layer_types():
    counts = _layout("gpt-oss-120b").counts()
    assert counts == {kvmod.SLIDING: 18, kvmod.FULL: 18}
    gemma = _layout("gemma-4-31B-it")
    assert gemma.counts()[kvmod.FULL] == 10 and gemma.counts()[kvmod.SLIDING] == 50
    # a hybrid pool: a request holds its whole length only on the full-attention layers
    cap = kvmod.capacity(
        _layout("gpt-oss-120b"),
        40 * GIB,
        max_model_len=131072,
        max_num_batched_tokens=8192,
        tokens_from_concurrency=True,
    )
    per_full = -(-131072 // 16)
    per_sliding = -(-(128 - 1 + 8192) // 16) + 1
    assert cap.groups == 2 and cap.blocks_per_request == per_full + per_sliding


def test_qwen2_use_sliding_window_false_is_full_attention():
    layout = _layout("Qwen2.5-7B-Instruct-AWQ")
    assert layout.counts() == {kvmod.FULL: 28}


def test_mamba_hybrid_raises_the_attention_block():
    text = {
        "hybrid_override_pattern": "M-M*-M-M*",
        "hidden_size": 4096,
        "mamba_num_heads": 128,
        "mamba_head_dim": 64,
        "ssm_state_size": 128,
        "conv_kernel": 4,
        "n_groups": 8,
        "num_key_value_heads": 8,
        "head_dim": 128,
    }
    layout = kvmod.kv_layout(
        text,
        n_layers=9,
        kv_heads=8,
        head_dim=128,
        tp=1,
        pp=1,
        kv_bytes=2,
        state_bytes=2,
        kv_dtype="bfloat16",
    )
    assert layout.counts() == {kvmod.MAMBA: 4, kvmod.FULL: 2}
    cap = kvmod.capacity(
        layout,
        10 * GIB,
        max_model_len=8192,
        max_num_batched_tokens=2048,
        tokens_from_concurrency=True,
    )
    state = max(layer.state_bytes for layer in layout.layers)
    assert cap.block_size % kvmod.KERNEL_BLOCK_ALIGNMENT == 0
    assert cap.page_bytes >= state > (cap.block_size - 16) * 8 * 128 * 2 * 2


def test_weights_from_config_match_the_checkpoint():
    cfg = json.loads((MODELS / "Llama-3.1-8B-Instruct" / "config.json").read_text())
    index = json.loads(
        (MODELS / "Llama-3.1-8B-Instruct" / "model.safetensors.index.json").read_text()
    )
    total = index["metadata"]["total_size"]
    est = wmod.from_config(
        cfg, cfg, tp=1, pp=1, dtype_bytes=2, qcfg=None, scheme=None, online_quant=None
    )
    assert abs(est.bytes_per_gpu - total) / total < 0.01
    half = wmod.from_config(
        cfg, cfg, tp=2, pp=1, dtype_bytes=2, qcfg=None, scheme=None, online_quant=None
    )
    assert abs(half.bytes_per_gpu - total / 2) / (total / 2) < 0.01


def test_moe_weights_from_config_match_the_checkpoint():
    cfg = json.loads((MODELS / "Qwen3-30B-A3B" / "config.json").read_text())
    total = json.loads((MODELS / "Qwen3-30B-A3B" / "model.safetensors.index.json").read_text())[
        "metadata"
    ]["total_size"]
    est = wmod.from_config(
        cfg, cfg, tp=1, pp=1, dtype_bytes=2, qcfg=None, scheme=None, online_quant=None
    )
    assert abs(est.bytes_per_gpu - total) / total < 0.05


def test_awq_weights_are_about_a_quarter():
    cfg = json.loads((MODELS / "Qwen2.5-7B-Instruct-AWQ" / "config.json").read_text())
    dense = wmod.from_config(
        cfg, cfg, tp=1, pp=1, dtype_bytes=2, qcfg=None, scheme=None, online_quant=None
    )
    awq = wmod.from_config(
        cfg,
        cfg,
        tp=1,
        pp=1,
        dtype_bytes=2,
        qcfg=cfg["quantization_config"],
        scheme="awq",
        online_quant=None,
    )
    assert 0.25 < awq.bytes_per_gpu / dense.bytes_per_gpu < 0.45


def test_release_formulas_from_the_wheels():
    assert not formula_for("0.19.1").cuda_graph_subtracted  # opt-in there, default "0"
    assert formula_for("0.20.0").cuda_graph_subtracted  # default "1" from 0.20.0
    # v1/core/kv_cache_utils.py: `num_tokens = int(max_concurrency * max_model_len)` from 0.20.1
    assert not formula_for("0.20.0").tokens_from_concurrency
    assert formula_for("0.20.1").tokens_from_concurrency
    assert formula_for("0.23.0").tokens_from_concurrency


def _facts(
    serve: str,
    gpu: str = "NVIDIA H100 80GB HBM3",
    version: str = "0.33.0",
    config: str = "models/Llama-3.1-8B-Instruct",
) -> Facts:
    facts = entry_facts(
        {"gpu": gpu, "gpu_count": 1, "vllm_version": version, "serve": serve, "config": config}
    )
    facts.set("release.judged", version, "test")
    compute_memory(facts)
    return facts


def test_the_done_when_command_figures():
    facts = _facts("vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 32768")
    assert facts.value("memory.usable_gib") == 79.18  # measured on an H100 80GB HBM3
    assert facts.value("memory.weights_gib") == pytest.approx(14.96, abs=0.01)
    assert 40 < facts.value("memory.kv_cache_gib") < 60
    tokens = facts.value("memory.kv_cache_tokens")
    assert (
        tokens == int(facts.value("memory.kv_cache_gib") * GIB // 131072 // 16 * 16)
        or abs(tokens / (facts.value("memory.kv_cache_gib") * 8192) - 1) < 0.01
    )
    assert facts.value("memory.kv_verdict") == "fits"
    assert facts.value("memory.estimate_line").startswith("KV cache ≈ ")
    assert "of 32k" in facts.value("memory.estimate_line")


def test_no_room_and_tight_verdicts():
    # one 131072-token request needs 16 GiB of KV: an L4 keeps about 3 GiB after the weights
    facts = _facts("vllm serve x --max-model-len 131072", gpu="NVIDIA L4")
    assert facts.value("memory.kv_verdict") == "does-not-fit"
    # the KV budget flag replaces the profile; vLLM's human_readable_int reads an upper-case
    # suffix as binary (8G = 8 GiB) and a lower-case one as decimal (8g = 8e9 bytes)
    facts = _facts("vllm serve x --max-model-len 32768 --kv-cache-memory-bytes 8G")
    assert facts.value("memory.kv_cache_gib") == pytest.approx(8.0, abs=0.01)
    facts = _facts("vllm serve x --max-model-len 32768 --kv-cache-memory-bytes 8g")
    assert facts.value("memory.kv_cache_gib") == pytest.approx(8e9 / GIB, abs=0.01)


def test_config_without_torch_dtype_takes_vllm_default(tmp_path):
    cfg = json.loads((MODELS / "Llama-3.1-8B-Instruct" / "config.json").read_text())
    cfg.pop("torch_dtype", None)
    cfg.pop("dtype", None)
    facts = entry_facts(
        {
            "gpu": "NVIDIA H100 80GB HBM3",
            "vllm_version": "0.33.0",
            "serve": "vllm serve x --max-model-len 8192",
            "config": cfg,
        },
        tmp_path,
    )
    compute_memory(facts)
    assert facts.value("memory.kv_bytes_per_token") == 32 * 8 * 128 * 2 * 2
    assert "vLLM's auto dtype" in facts.get("memory.kv_layers").detail


def test_missing_inputs_name_what_to_supply():
    facts = Facts.from_flat({"serve.max_model_len": 4096})
    compute_memory(facts)
    assert "memory.kv_cache_gib" not in facts
    assert "gpu.memory_total_mib" in (facts.why_missing("memory.kv_cache_gib") or "")


def test_estimate_line_format():
    assert estimate_line(51.33, 420_480, 12.83, 32768) == (
        "KV cache ≈ 51 GiB ≈ 420k tokens ≈ 12.8 concurrent requests of 32k"
    )
    # below one request (MEM001: it cannot hold one) the line never reads 1.0
    assert estimate_line(2.1, 31_784, 0.97, 32768).endswith("≈ 0.97 concurrent requests of 32k")
    assert "≈ 0.99 concurrent" in estimate_line(2.1, 32_700, 0.998, 32768)
    assert "≈ 1.00 concurrent" in estimate_line(2.1, 32_768, 1.0, 32768)
    assert "≈ 9.99 concurrent" in estimate_line(20.0, 327_000, 9.999, 32768)


def test_uneven_pipeline_stages_as_vllm_splits_them():
    # get_pp_indices: the remainder one each on the stages before the last, backwards
    assert kvmod.pp_partitions(61, 4) == [15, 15, 16, 15]
    assert kvmod.pp_partitions(32, 3) == [11, 11, 10]
    assert kvmod.pp_partitions(32, 3, "12,10,10") == [12, 10, 10]
    layout = _layout("Llama-3.1-8B-Instruct", pp=3)
    assert len(layout.layers) == 11
    est = wmod.from_checkpoint(16_000_000_000, tp=1, pp=3, where="index", layers=32)
    assert est.bytes_per_gpu == 16_000_000_000 * 11 // 32


def _corpus_config(architecture: str) -> dict:
    import gzip

    with gzip.open(FIXTURES_CONFIGS, "rt") as lines:
        for line in lines:
            row = json.loads(line)
            if row["architecture"] == architecture:
                return row["config"]
    raise AssertionError(architecture)


FIXTURES_CONFIGS = Path(__file__).parent / "fixtures" / "model-configs" / "corpus.jsonl.gz"


def _corpus_facts(architecture: str, tmp_path: Path) -> Facts:
    tmp_path.mkdir()
    facts = entry_facts(
        {
            "gpu": "NVIDIA H100 80GB HBM3",
            "gpu_count": 8,
            "vllm_version": "0.33.0",
            "serve": "vllm serve x --max-model-len 4096 -tp 8",
            "config": _corpus_config(architecture),
        },
        tmp_path,
    )
    compute_memory(facts)
    return facts


def test_hybrid_and_encoder_layouts_of_real_config_classes(tmp_path):
    # Falcon-H1: attention and Mamba in every layer
    falcon = _corpus_facts("FalconH1ForCausalLM", tmp_path / "f").value("memory.kv_layers")
    assert falcon.startswith("32 full, 32 mamba")
    # Kimi Linear: MLA layers between KDA linear-attention layers
    kimi = _corpus_facts("KimiLinearForCausalLM", tmp_path / "k").value("memory.kv_layers")
    assert "mla" in kimi and "mamba" in kimi and "KDA state" in kimi
    # Whisper: decoder self-attention plus cross-attention over the encoder's tokens
    whisper = _corpus_facts("WhisperForConditionalGeneration", tmp_path / "w")
    assert "cross-attention" in whisper.value("memory.kv_layers")
    # Nemotron-H names its Mamba layers linear_attention: state, not attention
    nemotron = _corpus_facts("NemotronHForCausalLM", tmp_path / "n").value("memory.kv_layers")
    assert "mamba" in nemotron
    # BERT: encoder-only, no KV cache, so nothing to run out of
    bert = _corpus_facts("BertModel", tmp_path / "b")
    assert bert.value("memory.kv_verdict") == "fits"
    assert "encoder-only" in (bert.why_missing("memory.kv_cache_tokens") or "")


def test_a_filled_in_utilization_default_is_the_judged_releases():
    # `explain --log --vllm-version 0.11.0`: the serve line is parsed before the release is
    # known and fills in 0.92 (0.20.0's default); 0.11.0 ran at 0.9
    from vllm_doctor.facts.collect import CollectOptions, collect_facts
    from vllm_doctor.facts.hardware import TargetHardware

    def kv(serve: str) -> float:
        facts = collect_facts(
            CollectOptions(
                serve_string=serve,
                model_config=MODELS / "Llama-3.1-8B-Instruct",
                target=TargetHardware(gpu="NVIDIA H100 80GB HBM3", count=1),
                vllm_version="0.11.0",
                probe_machine=False,
                offline=True,
            )
        )
        value = facts.value("memory.kv_cache_gib")
        assert value is not None, facts.why_missing("memory.kv_cache_gib")
        return float(value)

    base = "vllm serve m --max-model-len 8192"
    assert kv(base) == kv(base + " --gpu-memory-utilization 0.9")
    assert kv(base) < kv(base + " --gpu-memory-utilization 0.92")


def test_without_the_gpu_the_config_figures_are_still_given():
    # the weights per GPU and the KV layout depend on config.json, the serve line and the
    # release only: an unknown GPU leaves the budget figures missing, not these
    facts = entry_facts(
        {
            "gpu": None,
            "vllm_version": "0.33.0",
            "serve": "vllm serve x --max-model-len 8192 --tensor-parallel-size 2",
            "config": "models/Llama-3.1-8B-Instruct",
        }
    )
    compute_memory(facts)
    assert facts.value("memory.kv_bytes_per_token") == 32 * (8 // 2) * 128 * 2 * 2
    assert facts.value("memory.kv_layers") == "32 full"
    assert facts.value("memory.weights_gib") == pytest.approx(16060522496 / 2 / GIB, abs=0.01)
    assert "gpu.memory_total_mib" in (facts.why_missing("memory.kv_cache_gib") or "")


def test_routed_experts_split_over_tp_times_dp_the_rest_over_tp():
    # FusedMoEParallelConfig.make flattens TP across DP for the MoE layers: whole experts over
    # EP = TP × DP with --enable-expert-parallel (determine_expert_map), each expert sharded
    # over TP × DP without it; attention, dense layers and embeddings stay split over TP
    cfg = json.loads((MODELS / "DeepSeek-V3.2" / "config.json").read_text())

    def per_gpu(tp: int, moe: wmod.MoeParallel = wmod.NO_MOE_SPLIT) -> int:
        qcfg = cfg["quantization_config"]
        return wmod.from_config(
            cfg, cfg, tp=tp, pp=1, dtype_bytes=2, qcfg=qcfg, scheme=None, online_quant=None, moe=moe
        ).bytes_per_gpu

    # 58 MoE layers × 256 experts × gate/up/down of 7168 × 2048, FP8: one byte a weight
    routed = 58 * 256 * 3 * 7168 * 2048
    whole = per_gpu(1)
    tp8 = per_gpu(8)
    dp8_ep = per_gpu(1, wmod.MoeParallel(dp=8, expert_parallel=True))
    assert tp8 == pytest.approx(whole / 8, rel=1e-6)
    # the same eighth of the experts on each GPU; the rest whole on every DP rank
    assert dp8_ep == pytest.approx(routed / 8 + (whole - routed), rel=1e-6)
    assert dp8_ep - tp8 == pytest.approx((whole - routed) * 7 / 8, rel=1e-6)
    # without --enable-expert-parallel the experts are sharded over the same 8 GPUs
    assert per_gpu(1, wmod.MoeParallel(dp=8)) == dp8_ep
    # TP 2 × DP 4 with EP: the experts over 8 ranks, the rest over TP 2
    tp2_dp4 = per_gpu(2, wmod.MoeParallel(dp=4, expert_parallel=True))
    assert tp2_dp4 == pytest.approx(routed / 8 + (whole - routed) / 2, rel=1e-6)
    # EPLB's redundant experts are physical experts: 256 + 32 over 8 ranks = 36 per GPU
    eplb = per_gpu(1, wmod.MoeParallel(dp=8, expert_parallel=True, redundant_experts=32))
    assert eplb - dp8_ep == pytest.approx(routed * 4 / 256, rel=1e-6)


@pytest.mark.parametrize(
    ("flags", "experts_per_gpu"),
    [
        ("-dp 8 -ep", 32),
        ("--data-parallel-size 8 --enable-expert-parallel", 32),
        ("-dp 8", 32),
        # 0.10.2-0.33.0 --eplb-config, 0.9.2-0.11.2 --num-redundant-experts, only under EPLB
        ("-dp 8 -ep --enable-eplb --eplb-config '{\"num_redundant_experts\": 32}'", 36),
        ("-dp 8 -ep --enable-eplb --eplb-config.num_redundant_experts 32", 36),
        ("-dp 8 -ep --enable-eplb --num-redundant-experts 32", 36),
        ("-dp 8 -ep --eplb-config '{\"num_redundant_experts\": 32}'", 32),
    ],
)
def test_the_serve_lines_dp_and_ep_reach_the_weights(flags, experts_per_gpu):
    base = "vllm serve deepseek-ai/DeepSeek-V3.2 --max-model-len 4096 "
    tp8 = _facts(base + "-tp 8", config="models/DeepSeek-V3.2")
    split = _facts(base + flags, config="models/DeepSeek-V3.2")
    # the checkpoint (index total_size) scaled by the config count's ratio
    detail = split.get("memory.weights_gib").detail
    assert "the config count's ratio" in detail and "TP 1 × DP 8" in detail
    assert f"{experts_per_gpu} whole experts" in detail or "sharded over TP 1 × DP 8" in detail
    # one eighth of the experts either way; the dense share whole instead of an eighth
    ratio = split.value("memory.weights_gib") / tp8.value("memory.weights_gib")
    assert 1.15 < ratio < (1.25 if experts_per_gpu == 32 else 1.4)


@pytest.mark.parametrize(
    ("spec", "layers", "uncounted"),
    [
        ('{"method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"}', "33 full", False),
        # no method: SpeculativeConfig infers it from the draft's name
        (
            '{"model": "yuhuili/EAGLE-LLaMA3-Instruct-8B", "num_speculative_tokens": 3}',
            "33 full",
            False,
        ),
        ('{"method": "ngram", "num_speculative_tokens": 4}', "32 full", False),
        (
            '{"model": "meta-llama/Llama-3.2-1B-Instruct", "num_speculative_tokens": 4}',
            "32 full",
            True,
        ),
    ],
)
def test_speculative_draft_layers_from_the_serve_line(spec, layers, uncounted):
    facts = _facts(f"vllm serve m --max-model-len 8192 --speculative-config '{spec}'")
    assert facts.value("memory.kv_layers").startswith(layers)
    assert ("not counted here" in facts.value("memory.kv_layers")) is uncounted
    if layers == "33 full":
        plain = _facts("vllm serve m --max-model-len 8192")
        ratio = plain.value("memory.kv_cache_tokens") / facts.value("memory.kv_cache_tokens")
        assert ratio == pytest.approx(33 / 32, rel=0.01)


def test_mtp_draft_layers_are_the_models_own():
    facts = _facts(
        "vllm serve m --max-model-len 8192 -tp 8 "
        '--speculative-config \'{"method": "mtp", "num_speculative_tokens": 1}\'',
        config="models/DeepSeek-V3.2",
    )
    assert facts.value("memory.kv_layers").startswith("62 mla")  # 61 + num_nextn_predict_layers


def test_the_json_docs_example_is_what_the_model_prints():
    from vllm_doctor.memory.summary import report_line, report_summary

    facts = _facts("vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 32768")
    doc = (Path(__file__).parents[1] / "docs" / "json-output.md").read_text(encoding="utf-8")
    assert f'"estimate": "{report_line(facts)}"' in doc
    summary = report_summary(facts)
    assert summary is not None
    for name in ("activation_peak_gib", "kv_cache_gib", "kv_cache_tokens", "margin_gib"):
        assert f'"{name}": {summary["figures"][name]},' in doc


def test_estimate_line_without_room_says_so():
    # a negative KV budget is not a cache of "-3 GiB": vLLM stops before allocating one
    line = estimate_line(-3.07, 0, 0.0, 8192)
    assert line == "no KV cache: the weights and the profile exceed the budget by 3.1 GiB"


def test_estimate_line_shows_every_possible_gpu_size():
    # the RTX 5060 Ti ships with 8 or 16 GiB: Llama-3.1-8B's 15 GiB of weights fit neither one
    # the same way, so the line gives both sizes' figures, not the smallest's alone
    facts = _facts(
        "vllm serve x --max-model-len 8192 --tensor-parallel-size 2",
        gpu="NVIDIA GeForce RTX 5060 Ti",
    )
    line = facts.value("memory.estimate_line")
    assert line.startswith("with 8 GiB: ") and "; with 16 GiB: KV cache ≈ " in line
    assert "memory.kv_verdict" not in facts


def test_without_the_gpu_size_every_report_shows_what_is_known():
    """No GPU given: the weights per GPU and the KV bytes per token are known, the KV cache is
    not; text, markdown and JSON show those figures and name what would give the rest."""
    from vllm_doctor.commands.check import render_document
    from vllm_doctor.memory.summary import report_line, report_summary
    from vllm_doctor.report.document import CheckDocument

    facts = entry_facts(
        {
            "vllm_version": "0.33.0",
            "serve": "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 32768",
            "config": "models/Llama-3.1-8B-Instruct",
        }
    )
    facts.set("release.judged", "0.33.0", "test")
    compute_memory(facts)
    assert "memory.kv_cache_gib" not in facts and "memory.estimate_line" not in facts
    line = report_line(facts)
    assert line == (
        f"weights {facts.value('memory.weights_gib')} GiB per GPU; KV 128.00 KiB per token "
        "(32 full layers); the KV cache needs the GPU's memory size: --gpu NAME or "
        "--report collect-env.txt"
    )
    summary = report_summary(facts)
    assert summary is not None and summary["estimate"] == line
    assert summary["figures"]["kv_bytes_per_token"] == 32 * 8 * 128 * 2 * 2
    assert summary["figures"]["kv_cache_gib"] is None
    doc = CheckDocument(facts, [], "error", 0, 0.0)
    assert f"Memory: {line}" in render_document(doc, "text", to_file=True)
    assert f"**Memory:** {line}" in render_document(doc, "markdown")
    assert json.loads(render_document(doc, "json"))["memory"]["estimate"] == line
    # a GPU named whose memory its name does not give (unified memory): the line says why
    jetson = _facts(
        "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 32768", gpu="Jetson AGX Orin"
    )
    line = report_line(jetson) or ""
    assert line.startswith("weights ") and "--gpu NAME" not in line
    assert "(Jetson AGX Orin shares unified memory with the CPU" in line
