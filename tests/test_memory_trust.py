"""The memory model decides only on a weights figure it is sure of (issue 29) and refuses the
memory inputs vLLM refuses (issue 37), on real configs: a value the config does not state is
shown as an assumption and decides nothing; a count the model's name contradicts is doubted;
every quantization scheme is read as the release's loader reads it, or the weights are
unknown; the experts split over the prefill-context-parallel ranks; the weights need no
context length."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from doctor_forks import doctor_run

from vllm_doctor.commands.check import judge
from vllm_doctor.engine.loader import default_rules_dir, load_rules
from vllm_doctor.facts.collect import CollectOptions
from vllm_doctor.facts.hardware import TargetHardware
from vllm_doctor.memory import quant as qmod
from vllm_doctor.memory import weights as wmod

FIXTURES = Path(__file__).parent / "fixtures"
CONFIGS = FIXTURES / "calibration" / "configs"
GEMMA = FIXTURES / "real-configs" / "gemma-4-26B-A4B"


@pytest.fixture(scope="module")
def rules():
    return load_rules([default_rules_dir()])


def _doc(rules, serve: str, config: Path, gpu: str, version: str, gpus: int = 1):
    options = CollectOptions(
        serve_string=serve,
        model_config=config,
        vllm_version=version,
        probe_machine=False,
        target=TargetHardware(gpu=gpu, count=gpus),
    )
    return judge(options, rules)


def _verdict(doc, code: str) -> str:
    """applies (also where a more precise rule it defers to applies), undecided or
    not-applies."""
    if any(f.rule.code == code and f.deferred_to for f in doc.findings):
        return "applies"
    for name in ("applies", "undecided"):
        if any(f.rule.code == code for f in getattr(doc, name)):
            return name
    return "not-applies"


def _config_dir(tmp_path: Path, source: Path, drop: tuple[str, ...] = (), **changes) -> Path:
    cfg = json.loads((source / "config.json").read_text())
    text = cfg.get("text_config", cfg)
    for key in drop:
        text.pop(key, None)
    text.update(changes)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    for side in ("hf_quant_config.json",):
        if (source / side).is_file():
            (tmp_path / side).write_bytes((source / side).read_bytes())
    return tmp_path


# -- an assumed value decides nothing ------------------------------------------------------


def test_gemma4_without_its_mlp_sizes_is_shown_but_decides_nothing(rules, tmp_path):
    # issue 29: gemma-4-26B-A4B's config.json without intermediate_size/moe_intermediate_size
    # was counted as 4 × hidden (367.9 B parameters, 685 GiB) and MEM003 became an error
    config = _config_dir(tmp_path, GEMMA, drop=("intermediate_size", "moe_intermediate_size"))
    doc = _doc(rules, "vllm serve google/gemma-4-26B-A4B", config, "H100 80GB", "0.33.0")
    assert _verdict(doc, "MEM003") == "undecided"
    assert _verdict(doc, "MEM001") == "undecided"
    [mem003] = [f for f in doc.undecided if f.rule.code == "MEM003"]
    reason = " ".join(m.reason for m in mem003.missing)
    assert "no intermediate_size" in reason and "no moe_intermediate_size" in reason
    assert "the size the model's name states (26B)" in reason
    weights = doc.facts.get("memory.weights_gib")
    assert weights.value > 600 and weights.detail.startswith("assuming ")
    assert doc.facts.value("memory.estimate_line").endswith(
        "(rests on assumed values: decides nothing)"
    )


def test_gemma4_with_its_real_config_is_counted_as_its_name_says(rules):
    doc = _doc(rules, "vllm serve google/gemma-4-26B-A4B", GEMMA, "H100 80GB", "0.33.0")
    weights = doc.facts.get("memory.weights_gib")
    assert not weights.detail.startswith("assuming ")
    # 128 experts and a dense MLP beside them in every layer (gemma4.py): 25.7 B parameters
    assert "30 dense MLPs" in weights.detail and "25.7" in weights.detail
    assert doc.facts.value("memory.kv_room") is not None


def test_an_assumed_figure_still_decides_what_holds_without_weights(rules, tmp_path):
    # one 131072-token request of Llama-3.1-8B needs 16 GiB of KV, more than a 16 GB T4 has
    # even with no weights at all: that holds whatever the (assumed) MLP size makes them
    config = _config_dir(
        tmp_path, FIXTURES / "models" / "Llama-3.1-8B-Instruct", drop=("intermediate_size",)
    )
    doc = _doc(
        rules,
        "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 131072",
        config,
        "T4",
        "0.33.0",
    )
    verdict = doc.facts.get("memory.kv_verdict")
    assert verdict.value == "does-not-fit" and verdict.detail.startswith("even with no weights")
    assert _verdict(doc, "MEM001") == "applies"
    assert doc.facts.value("memory.kv_room") is None  # the room needs the weights


@pytest.mark.parametrize(
    ("name", "size"),
    [
        ("google/gemma-4-26B-A4B-it", 26e9),
        ("Qwen/Qwen3-8B", 8e9),
        ("facebook/opt-125m", 125e6),
        ("meta-llama/Llama-2-13b-chat-hf", 13e9),
        ("deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B", 1.5e9),
        ("nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8", 120e9),
        # active or effective counts, experts × size: not a total
        ("meta-llama/Llama-4-Scout-17B-16E-Instruct", None),
        ("mistralai/Mixtral-8x7B-v0.1", None),
        ("google/gemma-4-E2B-it", None),
        ("deepseek-ai/DeepSeek-V3.2", None),
    ],
)
def test_the_size_a_name_states(name, size):
    found = wmod.named_parameters(name)
    assert (found[0] if found else None) == size


def test_a_count_far_from_the_named_size_is_doubted():
    assert wmod.size_doubt(int(25.7e9), (26e9, "26B")) is None
    assert "14.2 ×" in wmod.size_doubt(int(367.9e9), (26e9, "26B"))
    assert wmod.size_doubt(int(1e9), (26e9, "26B")) is not None  # far below as well


# -- quantization read as the loader reads it -------------------------------------------------


def test_modelopt_mixed_precision_on_an_rtx_5090(rules):
    # issue 29's working setup: nvidia/Qwen3.6-27B-NVFP4 (NVFP4 MLPs, FP8 attention per layer,
    # its real config.json and hf_quant_config.json) serves on a 32 GB RTX 5090; read as
    # unquantized it was 51 GiB and MEM003 an error
    doc = _doc(
        rules,
        "vllm serve nvidia/Qwen3.6-27B-NVFP4 --max-model-len 32768",
        CONFIGS / "nvidia--Qwen3.6-27B-NVFP4",
        "RTX 5090",
        "0.24.0",
    )
    weights = doc.facts.get("memory.weights_gib")
    assert 18 < weights.value < 21 and "MIXED_PRECISION" in weights.detail
    assert _verdict(doc, "MEM003") == "not-applies"
    assert doc.facts.value("memory.kv_room") == "room"


def test_mixed_precision_per_kind_of_layer():
    cfg = json.loads((CONFIGS / "nvidia--Qwen3.6-27B-NVFP4" / "config.json").read_text())
    counts = qmod.LayerCounts(mixer=64, mlp=64, experts=0, layers=64)
    read = qmod.linear_bytes(cfg["quantization_config"], "mixed", 2.0, counts, version="0.24.0")
    assert read.per["mlp"] == pytest.approx(qmod.NVFP4)
    assert read.per["mixer"] == pytest.approx(1.0)
    # ModelOptMixedPrecisionConfig arrived in 0.17.0: an older release does not load it
    with pytest.raises(qmod.UnknownQuantization, match=r"0\.17\.0"):
        qmod.linear_bytes(cfg["quantization_config"], "mixed", 2.0, counts, version="0.16.0")


def test_an_unknown_scheme_leaves_the_weights_unknown(rules, tmp_path):
    config = _config_dir(
        tmp_path,
        FIXTURES / "models" / "Qwen3-32B",
        quantization_config={"quant_method": "quark", "global_quant_config": {}},
    )
    doc = _doc(rules, "vllm serve Qwen/Qwen3-32B", config, "L4", "0.33.0")
    assert doc.facts.value("memory.weights_gib") is None
    assert "quark" in doc.facts.why_missing("memory.weights_gib")
    assert _verdict(doc, "MEM003") == "undecided"


def test_deepseek_v4_fp4_experts_match_the_recipes_checkpoint(rules):
    # vllm-project/recipes DeepSeek-V4-Flash.yaml (MI325X, vLLM 0.25.0): "This configuration
    # loaded the 148.66 GiB checkpoint"; config.json says quant_method fp8 and expert_dtype fp4
    # (DeepseekV4FP8Config: MXFP4 experts); read as 8-bit it was about 275 GiB
    doc = _doc(
        rules,
        "vllm serve deepseek-ai/DeepSeek-V4-Flash --max-model-len 4096",
        CONFIGS / "deepseek-ai--DeepSeek-V4-Flash",
        "MI325X",
        "0.25.0",
    )
    weights = doc.facts.get("memory.weights_gib")
    assert abs(weights.value / 148.66 - 1) < 0.03 and "MXFP4 experts" in weights.detail


def test_a_latent_moe_counts_its_experts_at_the_latent_size(rules):
    # Nemotron-3-Super-120B-A12B (moe_latent_size 1024): 458.6 B parameters when the latent
    # size was ignored; 120 B as its name says; the FP8 recipe on 4 × H100 fits
    doc = _doc(
        rules,
        "vllm serve nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8 --kv-cache-dtype fp8 -tp 4",
        CONFIGS / "nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-FP8",
        "H100 80GB",
        "0.17.1",
        gpus=4,
    )
    weights = doc.facts.get("memory.weights_gib")
    assert "120.6" in weights.detail and "latent MoE" in weights.detail
    assert not weights.detail.startswith("assuming ")
    assert _verdict(doc, "MEM003") == "not-applies"


# -- parallelism ------------------------------------------------------------------------------


def test_experts_split_over_the_prefill_context_parallel_ranks():
    # FusedMoEParallelConfig.flatten_tp_across_dp_and_pcp (0.12.0 on): the MoE layer's ranks
    # are TP × DP × PCP, with and without --enable-expert-parallel
    ep = wmod.MoeParallel(expert_parallel=True, pcp=2)
    assert ep.split(64, 2)[2] == 16
    assert wmod.MoeParallel(pcp=2).split(64, 2)[0] == pytest.approx(1 / 4)
    cfg = json.loads(
        (FIXTURES / "memory-logs" / "configs" / "DeepSeek-V2-Lite-Chat" / "config.json").read_text()
    )

    def per_gpu(moe: wmod.MoeParallel) -> int:
        return wmod.from_config(
            cfg, cfg, tp=2, pp=1, dtype_bytes=2, qcfg=None, scheme=None, online_quant=None, moe=moe
        ).bytes_per_gpu

    assert per_gpu(ep) < per_gpu(wmod.MoeParallel(expert_parallel=True)) * 0.75


def test_pcp_on_the_serve_line_splits_the_experts(rules):
    serve = "vllm serve deepseek-ai/DeepSeek-V4-Flash -tp 4 --enable-expert-parallel"
    config = CONFIGS / "deepseek-ai--DeepSeek-V4-Flash"
    plain = _doc(rules, serve, config, "H200", "0.33.0", gpus=8)
    pcp = _doc(rules, serve + " -pcp 2", config, "H200", "0.33.0", gpus=8)
    assert "PCP 2" in pcp.facts.get("memory.weights_gib").detail
    assert pcp.facts.value("memory.weights_gib") < plain.facts.value("memory.weights_gib") * 0.6


# -- inputs the weights do not need -----------------------------------------------------------


def test_weights_without_max_position_embeddings(rules, tmp_path):
    # issue 29: the weights do not depend on the context length
    config = _config_dir(
        tmp_path, FIXTURES / "models" / "Qwen3-32B", drop=("max_position_embeddings",)
    )
    doc = _doc(rules, "vllm serve Qwen/Qwen3-32B", config, "H100 80GB", "0.33.0")
    assert doc.facts.value("memory.weights_gib") == pytest.approx(61.0, abs=0.5)
    assert doc.facts.value("memory.kv_bytes_per_token") > 0
    assert "max_position_embeddings" in doc.facts.why_missing("memory.kv_cache_tokens")
    assert _verdict(doc, "MEM001") == "undecided"


# -- what vLLM refuses is bad input (issue 37) ------------------------------------------------


def _cli(*args: str) -> subprocess.CompletedProcess:
    return doctor_run("check", "--offline", *args, timeout=120)


QWEN32 = str(FIXTURES / "models" / "Qwen3-32B")


@pytest.mark.parametrize("value", ["0", "1.5", "-1"])
def test_a_utilization_outside_zero_to_one_is_refused_as_vllm_refuses_it(value):
    result = _cli(
        "--model-config",
        QWEN32,
        "--gpu",
        "H100 80GB",
        "--vllm-version",
        "0.33.0",
        "--",
        "vllm",
        "serve",
        "Qwen/Qwen3-32B",
        "--gpu-memory-utilization",
        value,
    )
    assert result.returncode == 2, result.stdout[-2000:]
    [line] = result.stderr.strip().splitlines()
    assert "(0, 1]" in line and f"--gpu-memory-utilization {float(value):g}" in line


def test_utilization_zero_before_0_11_1_runs_out_of_kv_memory(rules):
    # CacheConfig refused only values above 1 up to 0.11.0: 0 starts and finds no memory
    doc = _doc(
        rules,
        "vllm serve Qwen/Qwen3-32B --gpu-memory-utilization 0",
        Path(QWEN32),
        "H100 80GB",
        "0.10.2",
    )
    assert _verdict(doc, "MEM003") == "applies"


def test_kv_cache_memory_bytes_beyond_the_gpu_is_a_finding(rules):
    doc = _doc(
        rules,
        "vllm serve Qwen/Qwen3-32B --kv-cache-memory-bytes 200G",
        Path(QWEN32),
        "H100 80GB",
        "0.33.0",
    )
    assert _verdict(doc, "MEM004") == "applies"
    assert doc.facts.value("memory.kv_cache_gib") == pytest.approx(200.0)  # 200G = 200 GiB


@pytest.mark.parametrize(
    ("key", "value"), [("vocab_size", 1e308), ("hidden_size", -5120), ("num_hidden_layers", -1)]
)
def test_impossible_config_sizes_are_bad_input(tmp_path, key, value):
    _config_dir(tmp_path, Path(QWEN32), **{key: value})
    result = _cli("--model-config", str(tmp_path), "--gpu", "H100 80GB", "--", "vllm", "serve", "m")
    assert result.returncode == 2
    [line] = result.stderr.strip().splitlines()
    assert key in line and "not a size a model can have" in line


# -- the facts-dropping audit over the memory model's inputs ----------------------------------

MEMORY_RULES = ("MEM001", "MEM003", "MEM004")
AUDITED = [
    # (real config, serve line, GPU, count): one that draws MEM003, one MEM001, one that fits
    (FIXTURES / "models" / "Qwen3-32B", "vllm serve Qwen/Qwen3-32B", "L4", 1),
    (
        FIXTURES / "models" / "Llama-3.1-8B-Instruct",
        "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 131072",
        "T4",
        1,
    ),
    (
        CONFIGS / "nvidia--Qwen3.6-27B-NVFP4",
        "vllm serve nvidia/Qwen3.6-27B-NVFP4 --max-model-len 32768",
        "RTX 5090",
        1,
    ),
    (GEMMA, "vllm serve google/gemma-4-26B-A4B", "H100 80GB", 1),
]


@pytest.mark.parametrize(("config", "serve", "gpu", "gpus"), AUDITED, ids=lambda v: str(v)[-30:])
def test_dropping_a_config_value_never_makes_another_memory_error(
    rules, tmp_path, config, serve, gpu, gpus
):
    """Each value of config.json the memory model reads, taken away one at a time: a memory
    error stays or becomes undecided, and no memory rule that did not apply starts to."""
    base = _doc(rules, serve, config, gpu, "0.33.0", gpus)
    before = {code: _verdict(base, code) for code in MEMORY_RULES}
    cfg = json.loads((config / "config.json").read_text())
    text = cfg.get("text_config", cfg)
    keys = [
        k
        for k, v in text.items()
        if isinstance(v, (int, float)) or k in ("quantization_config", "layer_types")
    ]
    assert len(keys) >= 10
    for key in keys:
        case = tmp_path / key
        case.mkdir()
        _config_dir(case, config, drop=(key,))
        doc = _doc(rules, serve, case, gpu, "0.33.0", gpus)
        for code in MEMORY_RULES:
            now = _verdict(doc, code)
            assert now == before[code] or now == "undecided", (key, code, before[code], now)


# -- configs as the Hub serves them (bench/reports2026: config_source names each copy) ----------

REPORTS = Path(__file__).parents[1] / "bench" / "reports2026" / "reports"
NEMOTRON = REPORTS / "vllm-54652"  # nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4
KIMI_K3 = REPORTS / "vast-ai-base-image-233"  # moonshotai/Kimi-K3


def _count(config: dict, tp: int = 1) -> wmod.WeightEstimate:
    text = config.get("text_config", config)
    qcfg = config.get("quantization_config") or text.get("quantization_config")
    return wmod.from_config(
        config, text, tp=tp, pp=1, dtype_bytes=2, qcfg=qcfg, scheme=None, online_quant=None
    )


def test_nemotron_h_layer_words_are_its_pattern():
    # transformers 5 writes Nemotron-H's layers as words (layers_block_type): the MoE blocks
    # are the 23 'moe' layers, not all 52; the same count as the pattern string gives
    cfg = json.loads((NEMOTRON / "config.json").read_text())
    letters = {"mamba": "M", "attention": "*", "mlp": "-", "moe": "E"}
    as_pattern = {k: v for k, v in cfg.items() if k != "layers_block_type"}
    as_pattern["hybrid_override_pattern"] = "".join(letters[w] for w in cfg["layers_block_type"])
    words, pattern = _count(cfg), _count(as_pattern)
    assert words.params == pattern.params
    assert 28e9 < words.params < 34e9  # "30B-A3B"; counting every layer as MoE gave 69 B
    # a list of other words (Zamba's 'hybrid') is not Nemotron-H's convention
    assert wmod.hybrid_pattern({"layers_block_type": ["mamba", "hybrid"]}) is None
    assert wmod.hybrid_pattern({"layers_block_type": ["mamba", "attention"]}) is None


def test_a_quantized_name_without_its_quantization_config_decides_nothing(rules, tmp_path):
    # the NVFP4 checkpoint keeps its quantization in hf_quant_config.json; a config.json read
    # alone counts it at 2 B a weight, more than two RTX 4090s hold: an assumption, no error
    serve = (
        "vllm serve nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4 -tp 2 --max-model-len 2048"
    )
    doc = _doc(rules, serve, NEMOTRON / "config.json", "RTX 4090", "0.26.0", gpus=2)
    assert _verdict(doc, "MEM003") == "undecided"
    assert "states a quantized checkpoint (NVFP4)" in doc.facts.why_missing("memory.kv_room")
    # the same count under a name that states no quantization decides
    plain = _doc(
        rules, serve.replace("-NVFP4", ""), NEMOTRON / "config.json", "RTX 4090", "0.26.0", gpus=2
    )
    assert _verdict(plain, "MEM003") == "applies"
    assert wmod.named_quantization("Qwen/Qwen3-8B-FP8") == "FP8"
    assert wmod.named_quantization("Qwen/Qwen2.5-7B-Instruct-GPTQ-Int4") == "GPTQ"
    assert wmod.named_quantization("meta-llama/Llama-3.1-8B-Instruct") is None


def test_kimi_k3_experts_run_at_their_latent_width(rules):
    # Kimi K3's routed experts run at routed_expert_hidden_size (3584), not hidden_size (7168):
    # on 8 x B300 the MXFP4 checkpoint fits (the setup served once NCCL was pinned)
    cfg = json.loads((KIMI_K3 / "config.json").read_text())
    count = _count(cfg, tp=8)
    assert "expert width 3584" in count.how
    assert 2.6e12 < count.params < 2.9e12  # 5.5 T when the experts were counted at 7168
    doc = _doc(
        rules,
        "vllm serve moonshotai/Kimi-K3 -tp 8",
        KIMI_K3 / "config.json",
        "B300",
        "0.26.0",
        gpus=8,
    )
    assert _verdict(doc, "MEM003") == "not-applies"
    assert doc.facts.value("memory.kv_room") == "room"
    # 69 of its 93 layers are KDA (linear_attn_config.kda_layers, 1-based): a fixed state per
    # request, no KV per token; the default context (1,048,576 tokens) fits the 24 MLA layers
    assert doc.facts.value("memory.kv_layers").startswith("69 mamba, 24 mla")
    assert _verdict(doc, "MEM001") == "not-applies"
