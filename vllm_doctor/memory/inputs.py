"""What the memory estimate reads of the facts: the model's config.json (its text config
and the facts the collectors set from it), the serve line's sizes and options, the GPU's
usable memory, the weights per GPU (memory/weights.py), the KV-cache layout per attention
layer (memory/kv.py) and the multimodal encoder's profile (memory/multimodal.py). A figure
that rests on a missing input raises ``Missing`` with the path and the reason."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from vllm_doctor.facts.model import Fact, Facts, Source
from vllm_doctor.memory import kv as kvmod
from vllm_doctor.memory import multimodal as mmmod
from vllm_doctor.memory import profile as profmod
from vllm_doctor.memory import weights as wmod
from vllm_doctor.memory.formula import usable_table

DEFAULT_DTYPE = "bfloat16"  # vLLM's "auto" for a config without torch_dtype


class Missing(Exception):
    def __init__(self, path: str, reason: str):
        super().__init__(path)
        self.path = path
        self.reason = reason


# -- inputs ------------------------------------------------------------------------------------


def argv_value(facts: Facts, *names: str) -> str | None:
    argv = facts.value("serve.argv") or []
    for i, word in enumerate(argv):
        for name in names:
            if word == name and i + 1 < len(argv):
                return str(argv[i + 1])
            if isinstance(word, str) and word.startswith(name + "="):
                return word.split("=", 1)[1]
    return None


def int_fact(facts: Facts, path: str, default: int) -> int:
    value = facts.value(path)
    return int(value) if isinstance(value, (int, float)) and value else default


def read_config(facts: Facts) -> tuple[dict[str, Any], dict[str, Any]]:
    """The raw config.json and its language-model part ({} when only facts are known)."""
    path = facts.value("model.config_path")
    if not path:
        return {}, {}
    from vllm_doctor import bounds
    from vllm_doctor.errors import InputError
    from vllm_doctor.facts.model_config import text_config_of

    try:
        cfg = bounds.json_loads(bounds.read_text(path, "config.json", "json"), non_finite="null")
    except (InputError, ValueError, OSError):
        return {}, {}
    if not isinstance(cfg, dict):
        return {}, {}
    text, _ = text_config_of(cfg)
    return cfg, text


def text_config_with_facts(facts: Facts, text: dict[str, Any]) -> dict[str, Any]:
    """The text config with the values the doctor's reader resolved (aliases, nesting)."""
    merged = dict(text)
    for key in (
        "num_hidden_layers",
        "num_attention_heads",
        "num_key_value_heads",
        "head_dim",
        "hidden_size",
        "vocab_size",
        "kv_lora_rank",
        "qk_rope_head_dim",
        "global_head_dim",
    ):
        value = facts.value(f"model.{key}")
        if value is not None:
            merged[key] = value
    ssm_dtype = argv_value(facts, "--mamba-ssm-cache-dtype")
    if ssm_dtype and ssm_dtype != "auto":  # the flag wins over the config (kv._state_bytes)
        merged["mamba_ssm_cache_dtype"] = ssm_dtype
    return merged


def need(facts: Facts, path: str) -> Any:
    fact = facts.get(path)
    if fact is None or fact.value is None:
        raise Missing(path, facts.why_missing(path) or "not collected")
    return fact.value


def usable_gib(facts: Facts, nominal_mib: int | None = None) -> tuple[float, str]:
    """Total memory per GPU as vLLM sees it (torch.cuda.mem_get_info's total); ``nominal_mib``:
    one of the sizes an inferred GPU memory leaves possible."""
    table = usable_table()
    reserve_mib = float(table["driver_reserve_mib"])
    total = facts.get("gpu.memory_total_mib")
    if nominal_mib is None and total is not None and total.inferred and total.possible:
        # a name that leaves several sizes: the figures are for the size the fact holds
        # (the smallest), never a table row of another size of the same name
        nominal_mib = int(total.value)
    if total is not None and nominal_mib is not None:
        total = Fact(nominal_mib, total.source, total.detail, total.possible)
    names = facts.value("gpu.names") or []
    if total is not None and not total.inferred:
        mib = float(total.value)
        return (
            (mib - reserve_mib) / 1024,
            f"{mib:.0f} MiB measured − {reserve_mib:.0f} MiB the driver keeps "
            f"(knowledge/data/gpu_usable_memory.json)",
        )
    from vllm_doctor.knowledge.gpus import lookup

    for row in table["gpus"]:
        for name in names:
            sized = nominal_mib is None or row.get("nominal_gib", 0) * 1024 == nominal_mib
            if sized and re.search(row["match"], str(name), re.IGNORECASE):
                if row.get("usable_gib"):
                    return float(row["usable_gib"]), (
                        f"{name}: vLLM prints {row['usable_gib']} GiB ({row['source']})"
                    )
                mib = float(row["nvml_mib"])
                return (
                    (mib - reserve_mib) / 1024,
                    f"{name}: nvidia-smi {mib:.0f} MiB ({row['source']}) − "
                    f"{reserve_mib:.0f} MiB the driver keeps",
                )
    if total is not None:
        match = lookup(str(names[0])) if names else None
        mib = float(total.value)
        segment = match.family.segment if match else "datacenter"
        if segment == "embedded":
            # vllm/utils/mem_utils.py MemorySnapshot: on Tegra the total is the system's memory
            # as cudaMemGetInfo reports it (and from 0.13.0 the free figure psutil's
            # MemAvailable): neither follows from the module's name or nominal size
            raise Missing(
                "gpu.memory_total_mib",
                f"{names[0]} shares unified memory with the CPU: vLLM sizes the KV cache from "
                "the total cudaMemGetInfo reports there (the system memory less the carve-outs), "
                f"which its nominal size ({total.detail}) does not tell: only a figure measured "
                "on the device gives it",
            )
        if segment in ("consumer", "workstation"):  # ECC off: NVML shows about all of it
            share = float(table["nominal_share_consumer"])
        elif names and re.search(table["gddr_match"], str(names[0])):  # ECC on GDDR
            share = float(table["nominal_share_gddr"])
        else:
            share = float(table["nominal_share"])
        return (mib * share - reserve_mib) / 1024, (
            f"{mib:.0f} MiB nominal ({total.detail}) × {share} as NVML reports it − "
            f"{reserve_mib:.0f} MiB the driver keeps (no measured figure for this GPU)"
        )
    raise Missing(
        "gpu.memory_total_mib", facts.why_missing("gpu.memory_total_mib") or "the GPU is not known"
    )


def weights_estimate(
    facts: Facts,
    cfg: dict[str, Any],
    text: dict[str, Any],
    tp: int,
    pp: int,
    dtype_bytes: float,
    version: str | None,
) -> wmod.WeightEstimate:
    online = facts.value("serve.quantization")
    checkpoint = facts.get("model.weights_bytes")
    quantized_online = (
        isinstance(online, str)
        and online.lower() in ("fp8", "bitsandbytes", "mxfp4")
        and not facts.value("model.quant_method")
    )
    partition = facts.value("env.VLLM_PP_LAYER_PARTITION")
    layers = facts.value("model.num_hidden_layers")
    moe = moe_parallel(facts)
    qcfg = (
        cfg.get("quantization_config")
        or cfg.get("compression_config")
        or text.get("quantization_config")
    )
    capability = facts.value("gpu.min_capability")
    hf_quant = hf_quant_config(facts)

    def count(split: wmod.MoeParallel) -> wmod.WeightEstimate:
        """The weights per GPU counted from config.json."""
        return wmod.from_config(
            cfg,
            text,
            tp=tp,
            pp=pp,
            dtype_bytes=dtype_bytes,
            qcfg=qcfg if isinstance(qcfg, dict) else None,
            scheme=facts.value("model.quant_scheme"),
            online_quant=online.lower() if isinstance(online, str) else None,
            pp_partition=partition,
            moe_backend=wmod.mxfp4_backend(int(capability) if capability else None, version),
            vision_tp=argv_value(facts, "--mm-encoder-tp-mode") != "data",
            version=version,
            fp8_marlin=wmod.fp8_runs_on_marlin(int(capability) if capability else None, version),
            moe=split,
            hf_quant=hf_quant,
        )

    if checkpoint is not None and not quantized_online:
        est = wmod.from_checkpoint(
            int(checkpoint.value),
            tp=tp,
            pp=pp,
            where=checkpoint.describe_source(),
            layers=int(layers) if layers else 0,
            pp_partition=partition,
        )
        if moe == wmod.NO_MOE_SPLIT or not wmod.routed_experts(text):
            return est
        # the checkpoint does not say which of its bytes are routed experts (split over
        # TP × DP) and which the rest (over TP): scale by the config count's ratio
        try:
            over_tp, split = count(wmod.NO_MOE_SPLIT), count(moe)
        except ValueError as err:
            raise Missing(
                "model.weights_bytes",
                f"the checkpoint's size is known, but not its routed experts' part ({err}), "
                f"which {moe.describe(tp)} splits differently from the rest",
            ) from None
        ratio = split.bytes_per_gpu / over_tp.bytes_per_gpu
        return wmod.WeightEstimate(
            int(est.bytes_per_gpu * ratio),
            f"{est.how} × {ratio:.3f}, the config count's ratio with the routed experts "
            f"{moe.describe(tp)} ({split.how})",
            split.assumptions,
        )
    if not text:
        raise Missing(
            "model.weights_bytes",
            facts.why_missing("model.weights_bytes")
            or "no checkpoint size and no config.json to count parameters from",
        )
    try:
        counted = count(moe)
    except ValueError as err:  # a "does not fit" can still hold whatever the weights weigh
        raise Missing("model.weights_bytes", f"no checkpoint size, and {err}") from None
    model_name = str(facts.value("model.id") or facts.value("serve.model") or "")
    doubts = [wmod.size_doubt(counted.params, wmod.named_parameters(model_name))]
    stated = wmod.named_quantization(model_name)
    if stated and not qcfg and not hf_quant and not online:
        # ModelOpt keeps its quantization in hf_quant_config.json, which a config.json read
        # alone does not bring: the name's word is evidence the count at full width is not
        doubts.append(
            f"the name states a quantized checkpoint ({stated}) but no quantization config "
            "was read (config.json's quantization_config, or ModelOpt's hf_quant_config.json "
            "beside it): the weights are counted unquantized"
        )
    found = [d for d in doubts if d]
    if found:
        return wmod.WeightEstimate(
            counted.bytes_per_gpu, counted.how, (*counted.assumptions, *found), counted.params
        )
    return counted


def hf_quant_config(facts: Facts) -> dict[str, Any] | None:
    """ModelOpt's hf_quant_config.json beside the config.json read, or None."""
    path = facts.value("model.config_path")
    if not path:
        return None
    from vllm_doctor.facts.model_config import _read_side_json

    side = Path(path).parent / "hf_quant_config.json"
    try:
        data = _read_side_json(side) if side.is_file() else None
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def moe_parallel(facts: Facts) -> wmod.MoeParallel:
    """How the serve line spreads the routed experts: ``--data-parallel-size`` / ``-dp``,
    ``--prefill-context-parallel-size`` / ``-pcp`` (0.12.0 on), ``--enable-expert-parallel`` /
    ``-ep``, and under ``--enable-eplb`` the redundant experts
    (``--eplb-config '{"num_redundant_experts": N}'`` from 0.10.2, ``--num-redundant-experts``
    0.9.2-0.11.2; vLLM refuses them without EPLB: ParallelConfig's check, config/parallel.py)."""
    dp = int_fact(facts, "serve.data_parallel_size", 1)
    ep = bool(facts.value("serve.enable_expert_parallel"))
    redundant = 0
    if ep and facts.value("serve.enable_eplb"):
        raw = argv_value(facts, "--eplb-config")
        try:
            loaded = json.loads(raw) if raw else {}
        except ValueError:
            loaded = {}
        value = (loaded.get("num_redundant_experts") if isinstance(loaded, dict) else None) or (
            argv_value(facts, "--eplb-config.num_redundant_experts", "--num-redundant-experts")
        )
        try:
            redundant = max(int(value or 0), 0)
        except (TypeError, ValueError):
            redundant = 0
    pcp_arg = argv_value(facts, "--prefill-context-parallel-size", "-pcp")
    pcp = int(pcp_arg) if pcp_arg and pcp_arg.isdigit() else 1
    return wmod.MoeParallel(
        dp=max(dp, 1), expert_parallel=ep, redundant_experts=redundant, pcp=max(pcp, 1)
    )


def kv_cache_dtype_of(facts: Facts, model_dtype: str) -> tuple[str, float]:
    kv = facts.value("serve.kv_cache_dtype")
    if isinstance(kv, str) and kv.lower() not in ("auto", ""):
        return kv.lower(), float(kvmod.DTYPE_BYTES.get(kv.lower(), 1 if "fp8" in kv else 2))
    return model_dtype, float(kvmod.DTYPE_BYTES.get(model_dtype, 2))


# what the config reader derives where config.json does not state the KV heads
# (facts/model_config): transformers fills the missing key from the model type's config class,
# whose default the doctor does not know (every head its own KV head for Llama, two for
# Qwen3-Next), so the KV layout built on it decides nothing. (A missing head_dim is taken as
# hidden / heads, what most classes derive; a wrong guess there only shrinks the KV cache of
# the classes whose default is larger.)
_DERIVED_KV = {"model.num_key_value_heads": "no KV-head key"}


def kv_assumptions(facts: Facts, text: dict[str, Any]) -> str | None:
    """The KV layout's inputs config.json does not state, or None."""
    if text.get("kv_lora_rank"):  # MLA: the latent rank, not the heads, sizes the KV cache
        return None
    found = []
    for path, derived in _DERIVED_KV.items():
        fact = facts.get(path)
        if fact is not None and fact.source == Source.DERIVED and derived in (fact.detail or ""):
            found.append(f"{path.split('.', 1)[1]} ({fact.detail}: {fact.value} taken)")
    if text.get("global_head_dim") and text.get("num_global_key_value_heads") is None:
        found.append("num_global_key_value_heads (the KV heads taken for the full layers)")
    layer_types = text.get("layer_types")
    if (
        isinstance(layer_types, list)
        and any("sliding" in str(kind) for kind in layer_types)
        and not text.get("sliding_window")
    ):
        found.append("sliding_window (its layers taken as full attention)")
    return "config.json states no " + "; no ".join(found) if found else None


def sparse_mla_cache_dtype(text: dict[str, Any], requested: str, version: str | None) -> str | None:
    """The cache dtype a release's ``DeepseekV32ForCausalLM.verify_and_update_config``
    (vllm/model_executor/models/config.py) sets for a sparse-MLA model (``index_topk``):
    0.11.0 turns "auto" and every fp8 dtype into DeepSeek's ``fp8_ds_mla`` layout,
    0.11.1–0.19.x the fp8 dtypes only; from 0.20.0 the attention backend decides
    (``mla_attention.py``: FLASHMLA_SPARSE only), which the estimate does not know: None."""
    if text.get("index_topk") is None or not text.get("kv_lora_rank") or not version:
        return None
    try:
        v = Version(str(version).split("+")[0])
    except InvalidVersion:
        return None
    if not Version("0.11.0") <= v < Version("0.20.0"):
        return None
    if requested.startswith("fp8") or (requested == "auto" and v < Version("0.11.1")):
        return "fp8_ds_mla"
    return None


def model_dtype(facts: Facts) -> tuple[str, str]:
    serve = facts.value("serve.dtype")
    if isinstance(serve, str) and serve.lower() not in ("auto", ""):
        return serve.lower(), f"--dtype {serve}"
    model = facts.value("model.dtype")
    if isinstance(model, str) and model.lower() in kvmod.DTYPE_BYTES:
        name = model.lower()
        if name in ("float32", "float", "fp32"):  # vLLM's "auto" serves float32 as bfloat16
            return DEFAULT_DTYPE, f"config {model}: vLLM's auto dtype computes in {DEFAULT_DTYPE}"
        return name, f"config.json torch_dtype {model}"
    return DEFAULT_DTYPE, f"no torch_dtype in config.json: vLLM's auto dtype ({DEFAULT_DTYPE})"


def activation_width(text: dict[str, Any], hidden: int) -> int:
    """The MLP width one token's activations span: the intermediate size of a dense model; of
    a MoE model the routed experts' intermediate size × the experts each token is routed to
    (the fused MoE's intermediate caches hold a row per token and chosen expert), plus any
    shared experts'."""
    experts = kvmod.dim(
        text.get("n_routed_experts") or text.get("num_experts") or text.get("num_local_experts")
    )
    moe_inter = kvmod.dim(text.get("moe_intermediate_size"))
    top_k = kvmod.dim(
        text.get("num_experts_per_tok") or text.get("moe_topk") or text.get("top_k_experts")
    )
    if experts and top_k:
        per_expert = moe_inter or kvmod.dim(text.get("intermediate_size")) or 4 * hidden
        shared = kvmod.dim(text.get("shared_expert_intermediate_size")) or per_expert * (
            kvmod.dim(text.get("n_shared_experts")) or 0
        )
        return per_expert * top_k + shared
    return moe_inter or kvmod.dim(text.get("intermediate_size")) or 4 * hidden


def model_traits(facts: Facts, text: dict[str, Any], layers: int) -> profmod.ModelTraits:
    """What vLLM's model-runner choice reads of the model (``ModelConfig.is_moe``,
    ``is_quantized``, ``is_hybrid``)."""
    experts = kvmod.dim(
        text.get("n_routed_experts") or text.get("num_experts") or text.get("num_local_experts")
    )
    kinds, _ = kvmod._kinds_of_layers(text, layers) if text else ([], "")
    quantized = bool(facts.value("model.quant_method") or facts.value("serve.quantization"))
    return profmod.ModelTraits(
        architectures=tuple(str(a) for a in facts.value("model.architectures") or []),
        moe=bool(experts),
        quantized=quantized,
        hybrid="state" in kinds and any(k != "state" for k in kinds),
    )


def flashinfer_installed(facts: Facts) -> bool | None:
    """True where the flashinfer package is installed or a start-up log shows FlashInfer's
    sampler running; None where nothing tells."""
    if facts.value("packages.flashinfer-python") or facts.value("log.flashinfer_sampler"):
        return True
    return None


def prefix_caching(facts: Facts) -> bool | None:
    """--enable-prefix-caching / --no-enable-prefix-caching as given, else None (the release's
    default for the model)."""
    value = facts.value("serve.enable_prefix_caching")
    if isinstance(value, bool):
        return value
    argv = [str(word) for word in facts.value("serve.argv") or []]
    if "--no-enable-prefix-caching" in argv:
        return False
    if "--enable-prefix-caching" in argv:
        return True
    return None


def argv_has(facts: Facts, name: str) -> bool:
    argv = facts.value("serve.argv") or []
    return any(word == name or str(word).startswith(name + "=") for word in argv)


def encoder_profile(
    facts: Facts,
    cfg: dict[str, Any],
    hidden: int,
    dtype_bytes: float,
    batched: int,
    seqs: int,
    version: Any,
    tp: int,
) -> mmmod.EncoderProfile | None:
    """The multimodal profile's held encoder outputs (memory/multimodal.py), or None."""
    if not mmmod.is_multimodal(cfg):
        return None
    if argv_has(facts, "--skip-mm-profiling") or argv_has(facts, "--language-model-only"):
        return mmmod.EncoderProfile(0.0, 0.0, "multimodal profiling skipped by the serve line")
    figures = facts.value("log.memory_figures")
    printed, modality = None, None
    if isinstance(figures, dict) and figures.get("encoder_budget_tokens"):
        printed = (int(figures["encoder_budget_tokens"]), int(figures.get("encoder_items") or 1))
        modality = str(figures.get("encoder_modality") or "") or None
    try:
        max_len, _ = max_model_len_of(facts)
    except Missing:
        max_len = batched
    return mmmod.encoder_profile(
        cfg,
        hidden=hidden,
        dtype_bytes=dtype_bytes,
        batched=batched,
        seqs=seqs,
        max_model_len=max_len,
        version=str(version) if version else None,
        limits=argv_value(facts, "--limit-mm-per-prompt"),
        processor_kwargs=argv_value(facts, "--mm-processor-kwargs"),
        printed_budget=printed,
        modality=modality,
        tp=tp,
    )


def max_model_len_of(facts: Facts) -> tuple[int, str]:
    value = facts.value("serve.max_model_len")
    if value:
        return int(value), f"--max-model-len {value}"
    # a start-up log names the length it ran with: "Maximum concurrency for N tokens per
    # request" is max_model_len (kv_cache_utils, every release)
    figures = facts.value("log.memory_figures")
    logged = figures.get("max_concurrency_tokens") if isinstance(figures, dict) else None
    if isinstance(logged, int) and logged > 0:
        return logged, f"the log's 'Maximum concurrency for {logged:,} tokens per request'"
    from vllm_doctor.facts.context_length import model_max_len

    found = model_max_len(facts)
    if found is None:
        path = "model.max_position_embeddings"
        raise Missing(path, facts.why_missing(path) or "not collected")
    length, how = found
    return length, f"the model's own limit ({how})"


def speculative_layers(facts: Facts) -> tuple[int, str, str | None]:
    """(the draft's KV layers on the target's KV cache, the speculative method, a note on
    what is not counted). The method as SpeculativeConfig.__post_init__ (config/speculative.py)
    infers it when only a draft model is named: "eagle-" / "eagle3" in its name, "ngram",
    else a separate draft model. MTP drafts are the model's own ``num_nextn_predict_layers``;
    an EAGLE head is one decoder layer; n-gram, suffix, Medusa and MLP speculators cache
    nothing; a separate draft model's layers (and weights) need its config.json, not given."""
    method = str(facts.value("serve.speculative_method") or "").lower()
    draft = str(facts.value("serve.speculative_model") or "")
    if not method and draft:
        lowered = draft.lower()
        if "eagle-" in lowered:
            method = "eagle"
        elif "eagle3" in lowered:
            method = "eagle3"
        elif lowered in ("ngram", "[ngram]"):
            method = "ngram"
        else:
            method = "draft_model"
    if not method:
        return 0, "", None
    if "mtp" in method:
        return int_fact(facts, "model.num_mtp_layers", 1), method, None
    if "eagle" in method:
        return 1, method, None
    if method in ("ngram", "suffix", "medusa", "mlp_speculator", "ngram_gpu"):
        return 0, method, None
    return (
        0,
        method,
        (
            f"the speculative draft ({method}{': ' + draft if draft else ''}) keeps its own KV "
            "layers and weights on these GPUs, not counted here (its config.json is not given): "
            "the KV cache is smaller than estimated"
        ),
    )


def kv_layout(
    facts: Facts, text: dict[str, Any], layers: int, tp: int, pp: int, release: str | None
) -> tuple[kvmod.KvLayout, str]:
    """The KV-cache layers one GPU holds, and how their dtype was chosen: config.json, the
    serve line and the release decide them; the GPU's size does not."""
    dtype, dhow = model_dtype(facts)
    dbytes = float(kvmod.DTYPE_BYTES.get(dtype, 2))
    kv_dtype, kv_bytes = kv_cache_dtype_of(facts, dtype)
    requested = str(facts.value("serve.kv_cache_dtype") or "auto").lower()
    ds_mla = sparse_mla_cache_dtype(text, requested, release)
    if ds_mla:
        kv_dtype, kv_bytes = ds_mla, 1.0
    spec_layers, method, spec_note = speculative_layers(facts)
    heads = facts.value("model.num_key_value_heads")
    head_dim = facts.value("model.head_dim")
    layout = kvmod.kv_layout(
        text,
        n_layers=layers,
        kv_heads=int(heads) if heads else None,
        head_dim=int(head_dim) if head_dim else None,
        tp=tp,
        pp=pp,
        kv_bytes=kv_bytes,
        state_bytes=dbytes,
        kv_dtype=kv_dtype,
        extra_layers=spec_layers,
        pp_partition=facts.value("env.VLLM_PP_LAYER_PARTITION"),
    )
    if spec_layers:
        layout.how.append(f"{spec_layers} speculative draft layer(s) ({method})")
    if spec_note:
        layout.how.append(spec_note)
    if ds_mla:
        layout.how.append(f"vLLM {release} stores a sparse-MLA model's {requested} KV as {ds_mla}")
    return (
        layout,
        f"KV dtype {kv_dtype} ({kv_bytes:g} B); model dtype {dtype} ({dhow}); TP {tp}, PP {pp}",
    )
