"""The multimodal profile's encoder outputs in the memory model (vllm_doctor/memory/multimodal.py),
on the real Qwen3-VL-30B-A3B-Instruct config of the corpus and the budget line vLLM prints."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from vllm_doctor.logreaders.memory_figures import read_memory_figures
from vllm_doctor.memory import multimodal as mm
from vllm_doctor.memory.corpus import entry_facts
from vllm_doctor.memory.facts import compute_memory
from vllm_doctor.memory.formula import GIB

CONFIG = "memory-logs/configs/Qwen3-VL-30B-A3B-Instruct/config.json"
FIXTURES = Path(__file__).parent / "fixtures"
BUDGET_LINE = (
    "(Worker_TP0 pid=41699) INFO 10-06 15:57:18 [gpu_model_runner.py:3344] Encoder cache will be "
    "initialized with a budget of 153600 tokens, and profiled with 1 video items of the maximum "
    "feature size.\n"
)


def _entry(serve: str, version: str = "0.11.0", log: str = "", config=CONFIG) -> dict:
    return {
        "model": "Qwen/Qwen3-VL-30B-A3B-Instruct",
        "vllm_version": version,
        "gpu": "NVIDIA GeForce RTX 3090",
        "gpu_count": 4,
        "serve": serve,
        "config": config,
        "log": log,
    }


def _activation(entry: dict) -> float:
    facts = entry_facts(entry)
    facts.set("release.judged", entry["vllm_version"], "test")
    compute_memory(facts)
    value = facts.value("memory.activation_peak_gib")
    assert value is not None, facts.why_missing("memory.activation_peak_gib")
    return float(value)


SERVE = "vllm serve Qwen/Qwen3-VL-30B-A3B-Instruct -tp 4 --max-model-len 65536"


def test_the_budget_line_is_read_back():
    figures = read_memory_figures(BUDGET_LINE)
    assert figures.encoder_budget_tokens == 153600
    assert figures.encoder_items == 1


def test_held_encoder_outputs_raise_the_activation_peak(tmp_path):
    # the text-only model of the same checkpoint: no vision_config, no encoder profile
    cfg = json.loads((FIXTURES / CONFIG).read_text())
    text_only = copy.deepcopy(cfg)
    del text_only["vision_config"]
    with_vision = _activation(_entry(SERVE, log=BUDGET_LINE))
    without = _activation(_entry(SERVE, log=BUDGET_LINE, config=text_only))
    # 153,600 rows × 2048 × (1 + 3 DeepStack levels) × 2 B = 2.34 GiB on top of the text peak
    held = 153600 * 2048 * 4 * 2 / GIB
    assert abs((with_vision - without) - held) < 0.02


def test_deepstack_levels_widen_the_rows():
    cfg = json.loads((FIXTURES / CONFIG).read_text())
    assert mm.embedding_width(cfg, 2048) == 2048 * 4
    del cfg["vision_config"]["deepstack_visual_indexes"]
    assert mm.embedding_width(cfg, 2048) == 2048


def test_releases_that_widen_each_output_to_the_budget():
    cfg = json.loads((FIXTURES / CONFIG).read_text())
    args = dict(hidden=2048, dtype_bytes=2, batched=8192, seqs=5, max_model_len=4096)
    # five items in an 8192-token budget: 0.11.0-0.12.0 keep 5 × 8192 rows, later releases 8192
    widened = mm.encoder_profile(cfg, version="0.11.0", printed_budget=(8192, 5), **args)
    plain = mm.encoder_profile(cfg, version="0.13.0", printed_budget=(8192, 5), **args)
    assert widened is not None and plain is not None
    assert abs(widened.held_gib / plain.held_gib - 5) < 1e-9


def test_max_pixels_sets_the_tokens_per_image():
    cfg = json.loads((FIXTURES / CONFIG).read_text())
    # Qwen3-VL: patch 16 × merge 2 → one token per 32 × 32 pixels
    assert mm.tokens_per_image(cfg, '{"max_pixels": 1003520}') == 980
    profile = mm.encoder_profile(
        cfg,
        hidden=2048,
        dtype_bytes=2,
        batched=2048,
        seqs=256,
        max_model_len=4096,
        version="0.13.0",
        processor_kwargs='{"max_pixels": 1003520}',
    )
    assert profile is not None
    # budget 2048 → two images of 980 rows
    assert abs(profile.held_gib - 2 * 980 * 8192 * 2 / GIB) < 1e-9


def test_no_encoder_profile_when_profiling_is_skipped_or_every_modality_is_off():
    base = _activation(_entry(SERVE, log=BUDGET_LINE))
    skipped = _activation(_entry(SERVE + " --skip-mm-profiling", log=BUDGET_LINE))
    off = _activation(
        _entry(SERVE + ' --limit-mm-per-prompt \'{"image": 0, "video": 0}\'', log=BUDGET_LINE)
    )
    assert base - skipped > 2.3
    assert skipped == off


def test_without_a_log_the_budget_floor_is_the_batched_tokens():
    # 0.11.0 on a 24 GiB GPU: 2048 batched tokens → at least 2048 rows × 8192 × 2 B
    with_log = _activation(_entry(SERVE, log=BUDGET_LINE))
    without_log = _activation(_entry(SERVE))
    assert abs((with_log - without_log) - (153600 - 2048) * 8192 * 2 / GIB) < 0.02


def _weights(cfg: dict, tp: int = 1, vision_tp: bool = True) -> float:
    from vllm_doctor.facts.model_config import text_config_of
    from vllm_doctor.memory import weights as wmod

    text, _ = text_config_of(cfg)
    return wmod.from_config(
        cfg,
        text,
        tp=tp,
        pp=1,
        dtype_bytes=2,
        qcfg=None,
        scheme=None,
        online_quant=None,
        vision_tp=vision_tp,
    ).bytes_per_gpu


def test_parameter_count_with_the_vision_tower_and_its_mergers():
    # gogongxt/python's report of the checkpoint (the config's source) counts 31,070,754,032
    # parameters: the 27-block tower, patch/position embeddings, the merger and 3 DeepStack mergers
    cfg = json.loads((FIXTURES / CONFIG).read_text())
    assert abs(_weights(cfg) / 2 / 31_070_754_032 - 1) < 0.001


def test_gated_vision_mlp_and_patch_merger_of_qwen2_5_vl():
    from vllm_doctor.memory.corpus import load_entry
    from vllm_doctor.memory.weights import _vision_params

    entry = load_entry(FIXTURES / "memory-logs" / "gh-qwen3vl-1057-qwen2.5-vl-7b-h100.yaml")
    # donghaozhang/qwen-parameter (the config's source): "Vision Encoder | 676.55M"
    assert abs(_vision_params(entry["config"]) / 676.55e6 - 1) < 0.002


def test_the_vision_tower_is_split_over_tp_unless_its_tp_mode_is_data():
    from vllm_doctor.memory.weights import _vision_params

    cfg = json.loads((FIXTURES / CONFIG).read_text())
    vision = _vision_params(cfg)
    split, replicated = _weights(cfg, tp=4), _weights(cfg, tp=4, vision_tp=False)
    assert abs((replicated - split) - vision * 2 * 3 / 4) < 16


QWEN25_VL = FIXTURES / "memory-logs" / "gh-qwen3vl-1057-qwen2.5-vl-7b-h100.yaml"


def test_the_vision_forward_over_a_long_dummy_video_is_the_peak():
    from vllm_doctor.memory.corpus import load_entry

    cfg = load_entry(QWEN25_VL)["config"]
    # 3 × 2 × 14² pixels per patch in float32 and bf16, and the gated MLP's 2 × 3420 + 3420
    # beside 2 × 1280 of residual stream, bf16
    assert mm.forward_bytes_per_patch(cfg, 2, 1) == 1176 * 6 + (2 * 1280 + 3 * 3420) * 2
    profile = mm.encoder_profile(
        cfg,
        hidden=3584,
        dtype_bytes=2,
        batched=2048,
        seqs=256,
        max_model_len=128000,
        version="0.23.0",
        printed_budget=(114688, 1),
        modality="video",
    )
    assert profile is not None
    # 114,688 tokens × 2² patches: the forward (≈ 14 GiB) outweighs 1 GiB of text peak + held
    assert abs(profile.forward_gib - 114688 * 4 * 32696 / GIB) < 1e-6
    assert profile.peak(1.0) == profile.forward_gib


def test_qwen3_vl_videos_budgeted_at_12_5_times_their_vision_tokens_in_0_11():
    cfg = json.loads((FIXTURES / CONFIG).read_text())
    args = dict(hidden=2048, dtype_bytes=2, batched=2048, seqs=256, max_model_len=65536, tp=4)
    old = mm.encoder_profile(
        cfg, version="0.11.0", printed_budget=(153600, 1), modality="video", **args
    )
    new = mm.encoder_profile(
        cfg, version="0.13.0", printed_budget=(153600, 1), modality="video", **args
    )
    assert old is not None and new is not None
    per_patch = mm.forward_bytes_per_patch(cfg, 2, 4)
    assert abs(old.forward_gib - 12288 * 4 * per_patch / GIB) < 1e-6
    assert abs(new.forward_gib - 153600 * 4 * per_patch / GIB) < 1e-6


GEMMA4 = FIXTURES / "memory-logs" / "configs" / "gemma-4-31B-it" / "config.json"


def test_a_modality_left_out_of_the_limits_keeps_the_profile():
    gemma4 = json.loads(GEMMA4.read_text())
    # gemma-4 at image 0 and audio 0 still profiles video (web-johnpfeiffer-gemma-4-31b-it-b300)
    assert not mm.limits_all_zero('{"image": 0, "audio": 0}', gemma4)
    assert mm.limits_all_zero('{"image": 0, "video": 0}', gemma4)
    assert not mm.limits_all_zero('{"image": 0, "video": 1}', gemma4)


def test_gemma4_vision_tower_gated_and_pooled():
    from vllm_doctor.memory.weights import vision_mlp_gated

    gemma4 = json.loads(GEMMA4.read_text())
    assert vision_mlp_gated(gemma4["vision_config"])  # gelu gate/up/down in its structure
    profile = mm.encoder_profile(
        gemma4,
        hidden=5376,
        dtype_bytes=2,
        batched=8192,
        seqs=1024,
        max_model_len=16384,
        version="0.26.0",
        printed_budget=(8192, 3),
        modality="video",
    )
    assert profile is not None
    # 3 × 3 patches of 16 × 16 pixels pooled into one token
    per_patch = 768 * 6 + (2 * 1152 + 3 * 4304) * 2
    assert abs(profile.forward_gib - 8192 * 9 * per_patch / GIB) < 1e-6


def test_explain_log_estimates_with_the_logs_encoder_budget():
    from vllm_doctor.commands.explain import _memory_readback
    from vllm_doctor.memory.corpus import load_entry

    entry = load_entry(FIXTURES / "memory-logs" / "web-sipeed-qwen3-vl-30b-a3b-rtx3090x4.yaml")
    args = (
        "0.11.0",
        FIXTURES / CONFIG,
        "NVIDIA GeForce RTX 3090",
        4,
        "vllm serve m -tp 4 --max-model-len 65536",
    )
    with_budget = _memory_readback(entry["log"], *args)
    without = _memory_readback(
        "\n".join(line for line in entry["log"].splitlines() if "Encoder cache" not in line),
        *args,
    )
    assert with_budget is not None and without is not None
    kv = {row["fact"]: row["estimate"] for row in with_budget["comparison"]}
    kv_floor = {row["fact"]: row["estimate"] for row in without["comparison"]}
    # 153,600 widened rows of 8192 held instead of the 2048-token floor: 2.3 GiB less KV
    assert kv_floor["memory.kv_cache_gib"] - kv["memory.kv_cache_gib"] > 2.2
