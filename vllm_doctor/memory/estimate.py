"""vLLM's start-up memory figures, estimated per release: the ``memory.*`` facts.

What vLLM does (``determine_available_memory`` in ``vllm/v1/worker/gpu_worker.py``, read in the
0.10.0–0.33.0 wheels):

    requested = total GPU memory × gpu_memory_utilization
    KV cache  = requested − weights − activation peak − non-torch memory
                − CUDA-graph estimate (from 0.20.0)

* ``total`` is what ``torch.cuda.mem_get_info`` reports (``memory.usable_gib``): less than
  nvidia-smi's total by what the driver keeps (knowledge/data/gpu_usable_memory.json);
* ``weights`` is "Model loading took X GiB" (memory/weights.py);
* the activation peak (the profile run over ``max_num_batched_tokens`` tokens and the sampler
  over ``max_num_seqs`` rows; for a multimodal model plus the dummy encoder outputs the profile
  holds meanwhile, derived in memory/multimodal.py), non-torch memory (CUDA context, NCCL and custom all-reduce
  buffers, which grow with TP) and the CUDA-graph pool are calibrated on real start-up logs
  (knowledge/data/memory_calibration.json, fitted by tools/calibrate_memory.py);
* the CUDA-graph estimate is subtracted when ``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS`` is
  on: opt-in (default "0") in 0.18.0–0.19.1, on (default "1") from 0.20.0 (vllm/envs.py; the
  log line says "default since v0.21.0"), absent before 0.18.0; never with --enforce-eager,
  nor on the V2 model runner before 0.29.0 (memory/profile.py: which runner and which sampler
  path the release's profile run takes);
* ``--kv-cache-memory-bytes`` replaces the whole computation (from 0.11.0).

Then memory/kv.py turns the KV bytes into blocks, tokens and concurrency as the release does.
Defaults the release fills in (``EngineArgs.get_batch_defaults``): ``vllm serve`` runs with
max_num_batched_tokens 8192 / max_num_seqs 1024 on GPUs of ≥ 70 GiB other than the A100,
16384 / 1024 on ≥ 160 GiB from 0.28.0, else (and on GB10 in every release) 2048 / 256.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from vllm_doctor.facts.model import Fact, Facts, Source
from vllm_doctor.memory import kv as kvmod
from vllm_doctor.memory import multimodal as mmmod
from vllm_doctor.memory import profile as profmod
from vllm_doctor.memory import weights as wmod

GIB = 1024**3
DATA = Path(__file__).resolve().parents[1] / "knowledge" / "data"
USABLE_DATA = DATA / "gpu_usable_memory.json"
CALIBRATION_DATA = DATA / "memory_calibration.json"
DEFAULT_DTYPE = "bfloat16"  # vLLM's "auto" for a config without torch_dtype
DEFAULT_UTILIZATIONS = profmod.DEFAULT_UTILIZATIONS  # up to 0.19.1, from 0.20.0

MEMORY_PATHS = (
    "memory.usable_gib",
    "memory.weights_gib",
    "memory.activation_peak_gib",
    "memory.non_torch_gib",
    "memory.cuda_graph_gib",
    "memory.kv_cache_gib",
    "memory.kv_cache_tokens",
    "memory.max_concurrency",
    "memory.kv_bytes_per_token",
    "memory.kv_layers",
    "memory.margin_gib",
    "memory.kv_verdict",
    "memory.kv_room",
    "memory.kv_budget_room",
    "memory.estimate_line",
)
# a hybrid (Mamba / linear-attention) model only: absent for every other model
MAMBA_PATHS = ("memory.mamba_cache_blocks", "memory.max_num_seqs", "memory.mamba_blocks_verdict")
# the verdicts rules decide on; a weights figure resting on an assumption decides none of them
VERDICT_PATHS = (
    "memory.kv_verdict",
    "memory.kv_room",
    "memory.kv_budget_room",
    "memory.mamba_blocks_verdict",
)


class Missing(Exception):
    def __init__(self, path: str, reason: str):
        super().__init__(path)
        self.path = path
        self.reason = reason


@lru_cache(maxsize=1)
def usable_table() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(USABLE_DATA.read_text(encoding="utf-8"))
    return data


@lru_cache(maxsize=1)
def calibration() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(CALIBRATION_DATA.read_text(encoding="utf-8"))
    return data


# -- the release's formula -------------------------------------------------------------------


@dataclass(frozen=True)
class ReleaseFormula:
    version: str
    cuda_graph_subtracted: bool
    tokens_from_concurrency: bool
    large_tier_160: bool
    default_utilization: float  # CacheConfig.gpu_memory_utilization: 0.92 from 0.20.0
    # how a Mamba / linear-attention layer holds a request's state (kv.MambaStateMode)
    mamba: kvmod.MambaStateMode = field(default_factory=kvmod.MambaStateMode)

    def describe(self, graph_subtracted: bool | None = None) -> str:
        subtracted = self.cuda_graph_subtracted if graph_subtracted is None else graph_subtracted
        graph = "− CUDA-graph estimate " if subtracted else ""
        tokens = (
            "tokens = int(concurrency × max_model_len)"
            if self.tokens_from_concurrency
            else "tokens = num_blocks // groups × block_size"
        )
        return (
            f"vLLM {self.version}: KV = total × utilization − weights − activation peak − "
            f"non-torch {graph}(gpu_worker.determine_available_memory); {tokens}"
        )


def formula_for(version: str | None) -> ReleaseFormula:
    """The formula of a release (the newest covered one when the version is unknown)."""
    shown = version or "0.33.0 (version unknown: the newest release's formula)"
    try:
        v = Version(str(version).split("+")[0]) if version else Version("0.33.0")
    except InvalidVersion:
        v = Version("0.33.0")
    return ReleaseFormula(
        version=shown,
        cuda_graph_subtracted=v >= Version("0.20.0"),
        tokens_from_concurrency=v >= Version("0.20.1"),
        large_tier_160=v >= Version("0.28.0"),
        default_utilization=profmod.default_utilization(str(v)),
        mamba=kvmod.MambaStateMode(
            str(v),
            per_block_state=v >= Version("0.11.1"),
            cache_modes=v >= Version("0.15.0"),
            hybrid_prefix_caching_default=v >= Version("0.26.0"),
            all_mode=Version("0.15.0") <= v < Version("0.33.0"),
            all_mode_without_spec=v >= Version("0.20.0"),
        ),
    )


# -- inputs ------------------------------------------------------------------------------------


def _argv_value(facts: Facts, *names: str) -> str | None:
    argv = facts.value("serve.argv") or []
    for i, word in enumerate(argv):
        for name in names:
            if word == name and i + 1 < len(argv):
                return str(argv[i + 1])
            if isinstance(word, str) and word.startswith(name + "="):
                return word.split("=", 1)[1]
    return None


def kv_budget(facts: Facts) -> tuple[str | None, int | None]:
    """``--kv-cache-memory-bytes`` as written and in bytes, as vLLM's ``human_readable_int``
    reads it (``200G`` = 200 GiB, ``200g`` = 200 GB); (None, None) when not given."""
    from vllm_doctor.serveline.parser import human_readable_int

    budget = _argv_value(facts, "--kv-cache-memory-bytes", "--kv-cache-memory")
    if budget is None:
        return None, None
    try:
        value = human_readable_int(budget)
    except (ValueError, OverflowError):
        value = None
    if value == 0:  # `if kv_cache_memory_bytes := ...` in gpu_worker: 0 profiles as unset
        return None, None
    if value is None or value < 0:
        from vllm_doctor.errors import InputError

        raise InputError(
            f"--kv-cache-memory-bytes {budget}", "not a size in bytes (like 8G, 8000000000)"
        )
    return budget, value


def _put_budget_room(
    out: Estimate,
    usable: float,
    uhow: str,
    kv_gib: float,
    held: float,
    weights_gib: float,
    margin: float,
) -> None:
    """memory.kv_budget_room: with --kv-cache-memory-bytes vLLM reserves that KV cache
    whatever else the GPU holds (gpu_worker.determine_available_memory skips the
    utilization budget), so the weights, the profile's peak, non-torch memory, the CUDA graphs
    and the KV cache together must fit in the GPU's memory, or an allocation runs out
    (vllm#56698)."""
    left = usable - held - kv_gib

    def room(gib: float) -> str:
        return "none" if gib + margin <= 0 else "tight" if gib - margin <= 0 else "room"

    out.put(
        "memory.kv_budget_room",
        room(left),
        f"{usable:.2f} GiB total ({uhow}) − KV cache {kv_gib:.2f} (--kv-cache-memory-bytes) "
        f"− weights {weights_gib:.2f} − profile, non-torch and CUDA graphs "
        f"{held - weights_gib:.2f} GiB = {left:.2f} ± {margin:.2f} GiB",
    )
    out.bound["memory.kv_budget_room"] = room(left + weights_gib)
    out.inputs["budget_left_gib"] = left


def _int_fact(facts: Facts, path: str, default: int) -> int:
    value = facts.value(path)
    return int(value) if isinstance(value, (int, float)) and value else default


def _config(facts: Facts) -> tuple[dict[str, Any], dict[str, Any]]:
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


def _text_with_facts(facts: Facts, text: dict[str, Any]) -> dict[str, Any]:
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
    ssm_dtype = _argv_value(facts, "--mamba-ssm-cache-dtype")
    if ssm_dtype and ssm_dtype != "auto":  # the flag wins over the config (kv._state_bytes)
        merged["mamba_ssm_cache_dtype"] = ssm_dtype
    return merged


def _need(facts: Facts, path: str) -> Any:
    fact = facts.get(path)
    if fact is None or fact.value is None:
        raise Missing(path, facts.why_missing(path) or "not collected")
    return fact.value


@dataclass
class Estimate:
    """Every figure of one estimate with its evidence (``how``)."""

    values: dict[str, Any] = field(default_factory=dict)
    how: dict[str, str] = field(default_factory=dict)
    # the weights' size was not known: the figures are upper bounds, only a "does not fit"
    # holds whatever the weights weigh
    weights_unknown: Missing | None = None
    # the weights' figure rests on a value config.json does not state, or disagrees with the
    # size the model's name states: the figures are shown with it, and only what holds with
    # no weights at all decides (the verdicts with zero weights below)
    weights_doubt: str | None = None
    # the KV layout rests on a value config.json does not state (the KV heads or head size):
    # the figures are shown with it, and no verdict decides (not even with no weights)
    kv_doubt: str | None = None
    bound: dict[str, Any] = field(default_factory=dict)  # verdicts with zero weights
    # what the calibration fits on (tools/calibrate_memory.py): the terms' inputs
    inputs: dict[str, Any] = field(default_factory=dict)

    def put(self, path: str, value: Any, how: str) -> None:
        self.values[path] = value
        self.how[path] = how


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


def _weights(
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
    hf_quant = _hf_quant_config(facts)

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
            vision_tp=_argv_value(facts, "--mm-encoder-tp-mode") != "data",
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
    named = wmod.named_parameters(str(facts.value("model.id") or facts.value("serve.model") or ""))
    doubt = wmod.size_doubt(counted.params, named)
    if doubt:
        return wmod.WeightEstimate(
            counted.bytes_per_gpu, counted.how, (*counted.assumptions, doubt), counted.params
        )
    return counted


def _hf_quant_config(facts: Facts) -> dict[str, Any] | None:
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
    dp = _int_fact(facts, "serve.data_parallel_size", 1)
    ep = bool(facts.value("serve.enable_expert_parallel"))
    redundant = 0
    if ep and facts.value("serve.enable_eplb"):
        raw = _argv_value(facts, "--eplb-config")
        try:
            loaded = json.loads(raw) if raw else {}
        except ValueError:
            loaded = {}
        value = (loaded.get("num_redundant_experts") if isinstance(loaded, dict) else None) or (
            _argv_value(facts, "--eplb-config.num_redundant_experts", "--num-redundant-experts")
        )
        try:
            redundant = max(int(value or 0), 0)
        except (TypeError, ValueError):
            redundant = 0
    pcp_arg = _argv_value(facts, "--prefill-context-parallel-size", "-pcp")
    pcp = int(pcp_arg) if pcp_arg and pcp_arg.isdigit() else 1
    return wmod.MoeParallel(
        dp=max(dp, 1), expert_parallel=ep, redundant_experts=redundant, pcp=max(pcp, 1)
    )


def _kv_dtype(facts: Facts, model_dtype: str) -> tuple[str, float]:
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


def _model_dtype(facts: Facts) -> tuple[str, str]:
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


# GB10 (DGX Spark, compute capability 12.1): its ~120 GiB would put it on the 8192/1024 tier,
# but get_batch_defaults (engine/arg_utils.py) keeps it on the small one in every release that
# sizes the defaults by memory (0.8.5 on): up to 0.32.0 NVML reports no memory size for it
# (nvidia-smi: [N/A]), platforms/cuda.py get_device_total_memory raises and the memory reads 0;
# from 0.33.0 that falls back to the device properties, and `is_gb10 =
# current_platform.is_device_capability((12, 1))` excludes it from the large tier by name
_SMALL_TIER_GPU = re.compile(r"\bGB10\b")


def _put_mamba_blocks(
    out: Any, cap: Any, kv_gib: float, margin: float, seqs: int, seqs_default: int
) -> None:
    """A hybrid (Mamba / linear-attention) model: each running sequence holds one Mamba cache
    block, and vLLM refuses to capture full CUDA graphs for more sequences than blocks
    (compilation.py: "max_num_seqs (N) exceeds available Mamba cache blocks (M)")."""
    per_block = cap.page_bytes * cap.group_size

    def blocks(gib: float) -> int:
        return max(0, int(gib * GIB) // per_block) if per_block else 0

    low, high = blocks(kv_gib - margin), blocks(kv_gib + margin)
    out.put(
        "memory.mamba_cache_blocks",
        cap.num_blocks,
        f"{cap.num_blocks} blocks of {cap.page_bytes} B × {cap.group_size} layers in "
        f"{kv_gib:.2f} GiB ({low}-{high} within the estimate's margin of {margin:.2f} GiB)",
    )
    out.put(
        "memory.max_num_seqs",
        seqs,
        "--max-num-seqs" if seqs != seqs_default else f"vLLM's default on this GPU ({seqs})",
    )
    verdict = "below" if high < seqs else "tight" if low < seqs else "enough"
    out.put(
        "memory.mamba_blocks_verdict",
        verdict,
        f"{low}-{high} Mamba cache blocks for {seqs} sequences",
    )


def batch_defaults(usable: float, names: list[str], formula: ReleaseFormula) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) vLLM fills in for `vllm serve` on this GPU."""
    a100 = any("a100" in str(n).lower() for n in names)
    if any(_SMALL_TIER_GPU.search(str(n)) for n in names):
        return 2048, 256
    if formula.large_tier_160 and usable >= 160:
        return 16384, 1024
    if usable >= 70 and not a100:
        return 8192, 1024
    return 2048, 256


def calibrated_terms(
    *,
    tp: int,
    hidden: int,
    inter: int,
    vocab: int,
    layers_gpu: int,
    batched: int,
    seqs: int,
    act_bytes: float,
    eager: bool,
    graph_subtracted: bool,
    cal: dict[str, Any] | None = None,
    sampler: str = profmod.SORT,
    state_bytes: float = 0.0,
) -> tuple[dict[str, float], dict[str, str]]:
    """Activation peak, non-torch and CUDA-graph GiB from the calibration's coefficients
    (``cal``: another calibration than the shipped one, for leave-one-out tests); ``sampler``:
    the dummy sampler run's top-k/top-p path (memory/profile.py)."""
    cal = cal or calibration()
    act = cal["activation"]
    f_mlp = batched * (2 * inter / tp + 4 * hidden) * act_bytes / GIB
    f_logits = seqs * vocab * 4 / GIB
    per_logits, sampler_how = sampler_coefficient(act, sampler, act_bytes)
    forward, sampler_gib = act["per_mlp_gib"] * f_mlp, per_logits * f_logits
    combine_max = act.get("combine") == "max"  # the peak is the forward's or the sampler's
    # sampler state the model runner keeps (V2: output_bin_counts) is there at either peak
    state_gib = seqs * vocab * state_bytes / GIB
    activation = (
        act["intercept_gib"]
        + (max(forward, sampler_gib) if combine_max else forward + sampler_gib)
        + state_gib
    )
    nt = cal["non_torch"]
    non_torch = nt["intercept_gib"] + (nt["tp_gib"] if tp > 1 else 0.0)
    cg = cal["cuda_graph"]
    graph = 0.0 if eager else cg["intercept_gib"] + cg["per_layer_gib"] * layers_gpu
    fitted = f"fitted on {cal['fitted_on']} start-up logs (knowledge/data/memory_calibration.json)"
    how = {
        "activation": (
            f"{act['intercept_gib']:.3f} + "
            + ("the larger of " if combine_max else "")
            + f"{act['per_mlp_gib']:.3f} × MLP activations {f_mlp:.3f} GiB "
            f"({batched} batched tokens × (2 × {inter}/TP {tp} + 4 × {hidden}) × "
            f"{act_bytes:g} B) "
            + ("and " if combine_max else "+ ")
            + f"{per_logits:.3f} × sampler logits {f_logits:.3f} GiB "
            f"({seqs} seqs × {vocab} × 4 B; {sampler_how}); "
            + (
                f"+ the sampler state the runner keeps {state_gib:.3f} GiB ({seqs} × "
                f"{vocab} × {state_bytes:g} B); "
                if state_gib
                else ""
            )
            + (
                f"the MLP and sorting coefficients {act['measured']}, the rest "
                if act.get("measured")
                else ""
            )
            + fitted
        ),
        "non_torch": (
            f"{nt['intercept_gib']:.3f} GiB"
            + (f" + {nt['tp_gib']:.3f} GiB for TP {tp} (NCCL, custom all-reduce)" if tp > 1 else "")
            + f"; {fitted}"
        ),
        "cuda_graph": (
            "--enforce-eager: no CUDA graphs"
            if eager
            else f"{cg['intercept_gib']:.3f} + {cg['per_layer_gib']:.4f} × {layers_gpu} "
            f"layers per GPU; {fitted}"
            + (
                ""
                if graph_subtracted
                else "; captured after the KV cache: not subtracted in this release"
            )
        ),
    }
    return {
        "activation": max(0.0, activation),
        "non_torch": max(0.0, non_torch),
        "cuda_graph": max(0.0, graph),
        "f_mlp": f_mlp,
        "f_logits": f_logits,
    }, how


def sampler_coefficient(
    act: dict[str, Any], sampler: str, logits_bytes: float
) -> tuple[float, str]:
    """GiB of the sampler's peak per GiB of float32 logits on this path, and where it is from:
    the source's bytes where memory/profile.py derives them, else the calibration's."""
    derived = profmod.sampler_bytes_per_entry(sampler, logits_bytes)
    if derived is not None:
        return derived / 4, f"{sampler} sampler: {derived:g} B per entry (memory/profile.py)"
    if sampler == profmod.SORT:
        return float(act["per_logits_gib"]), "top-k/top-p by sorting"
    return float(act.get("per_logits_triton_gib", act["per_logits_gib"])), (
        "top-k/top-p by the Triton kernel"
    )


PROBE_DATA = DATA / "memory_probe.json"
PROBE_SAMPLER_BYTES = 40.0  # fallback: bytes per sequence × vocabulary entry


def _probe_sampler_bytes() -> tuple[float, str]:
    """The sampler's peak per sequence × vocabulary entry that `vllm-doctor probe memory`
    measured (knowledge/data/memory_probe.json), the first GPU it lists."""
    try:
        gpus = json.loads(PROBE_DATA.read_text(encoding="utf-8")).get("gpus") or {}
        for name, row in gpus.items():
            value = (row.get("activation") or {}).get("sampler_bytes_per_seq_vocab")
            if isinstance(value, (int, float)):
                return float(value), f"measured by the memory probe on {name}"
    except (OSError, ValueError, AttributeError):
        pass
    return PROBE_SAMPLER_BYTES, "the memory probe's figure"


def cuda_context_gib() -> tuple[float, str]:
    """One process's device memory once its CUDA context exists, the largest the memory probe
    measured (knowledge/data/memory_probe.json)."""
    found: list[tuple[float, str]] = []
    try:
        gpus = json.loads(PROBE_DATA.read_text(encoding="utf-8")).get("gpus") or {}
        for name, row in gpus.items():
            value = row.get("cuda_context_gib")
            if isinstance(value, (int, float)):
                found.append((float(value), f"measured by the memory probe on {name}"))
    except (OSError, ValueError, AttributeError):
        pass
    return max(found) if found else (0.5, "about what the memory probe measures")


def margin_gib(
    cal: dict[str, Any], terms: dict[str, float], calibrated: float, seqs: int, vocab: int
) -> tuple[float, str]:
    """The estimate's margin: the fit's spread, at least share_of_terms × the calibrated
    terms, and — where the deployment lies beyond what the calibration saw (more sequences
    × vocabulary, more batched tokens) — the sampler's peak the memory probe measured."""
    spread = cal["spread"]
    margin = max(float(spread["overhead_gib"]), float(spread["share_of_terms"]) * calibrated)
    how = (
        f"the larger of the calibration's spread ({spread['overhead_gib']} GiB: 90th "
        f"percentile of the fit's error on the start-up logs) and "
        f"{spread['share_of_terms']} × the calibrated terms ({calibrated:.2f} GiB)"
    )
    seen = cal.get("range") or {}
    beyond = terms["f_logits"] > 1.1 * float(seen.get("logits_gib_max", 0.0)) or terms[
        "f_mlp"
    ] > 1.1 * float(seen.get("mlp_gib_max", 0.0))
    if beyond:
        per, source = _probe_sampler_bytes()
        sampler = per * seqs * vocab / GIB
        if sampler > margin:
            margin = sampler
            how += (
                f"; beyond the logs the calibration saw ({seqs} sequences × {vocab} "
                f"vocabulary, {terms['f_mlp']:.2f} GiB of MLP activations): the "
                f"sampler's peak {per:g} B per sequence × vocabulary entry ({source}) "
                f"= {sampler:.2f} GiB"
            )
    return margin, how


def _prefix_caching(facts: Facts) -> bool | None:
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


def _argv_has(facts: Facts, name: str) -> bool:
    argv = facts.value("serve.argv") or []
    return any(word == name or str(word).startswith(name + "=") for word in argv)


def _encoder_profile(
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
    if _argv_has(facts, "--skip-mm-profiling") or _argv_has(facts, "--language-model-only"):
        return mmmod.EncoderProfile(0.0, 0.0, "multimodal profiling skipped by the serve line")
    figures = facts.value("log.memory_figures")
    printed, modality = None, None
    if isinstance(figures, dict) and figures.get("encoder_budget_tokens"):
        printed = (int(figures["encoder_budget_tokens"]), int(figures.get("encoder_items") or 1))
        modality = str(figures.get("encoder_modality") or "") or None
    try:
        max_len, _ = _max_model_len(facts)
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
        limits=_argv_value(facts, "--limit-mm-per-prompt"),
        processor_kwargs=_argv_value(facts, "--mm-processor-kwargs"),
        printed_budget=printed,
        modality=modality,
        tp=tp,
    )


def _max_model_len(facts: Facts) -> tuple[int, str]:
    value = facts.value("serve.max_model_len")
    if value:
        return int(value), f"--max-model-len {value}"
    # a start-up log names the length it ran with: "Maximum concurrency for N tokens per
    # request" is max_model_len (kv_cache_utils, every release)
    figures = facts.value("log.memory_figures")
    logged = figures.get("max_concurrency_tokens") if isinstance(figures, dict) else None
    if isinstance(logged, int) and logged > 0:
        return logged, f"the log's 'Maximum concurrency for {logged:,} tokens per request'"
    from vllm_doctor.facts.model_config import model_max_len

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
        return _int_fact(facts, "model.num_mtp_layers", 1), method, None
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


def _kv_layout(
    facts: Facts, text: dict[str, Any], layers: int, tp: int, pp: int, release: str | None
) -> tuple[kvmod.KvLayout, str]:
    """The KV-cache layers one GPU holds, and how their dtype was chosen: config.json, the
    serve line and the release decide them; the GPU's size does not."""
    dtype, dhow = _model_dtype(facts)
    dbytes = float(kvmod.DTYPE_BYTES.get(dtype, 2))
    kv_dtype, kv_bytes = _kv_dtype(facts, dtype)
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


def estimate(
    facts: Facts, nominal_mib: int | None = None, cal: dict[str, Any] | None = None
) -> Estimate:
    """Every memory figure of this deployment, or Missing naming the first input it lacks
    (``cal``: another calibration than the shipped one)."""
    formula = formula_for(facts.value("release.judged") or facts.value("vllm.version"))
    cfg, raw_text = _config(facts)
    text = _text_with_facts(facts, raw_text)
    tp = _int_fact(facts, "serve.tensor_parallel_size", 1)
    pp = _int_fact(facts, "serve.pipeline_parallel_size", 1)
    util_fact = facts.get("serve.gpu_memory_utilization")
    # a default the serve line filled in before the judged release was known (check/explain
    # --vllm-version) is that release's default, not the newest one's
    util = (
        float(util_fact.value)
        if util_fact is not None
        and isinstance(util_fact.value, (int, float))
        and util_fact.source != Source.DEFAULT
        else formula.default_utilization
    )
    out = Estimate()

    usable, uhow = usable_gib(facts, nominal_mib)
    out.put("memory.usable_gib", round(usable, 2), uhow)
    dtype, _ = _model_dtype(facts)
    dbytes = float(kvmod.DTYPE_BYTES.get(dtype, 2))
    try:
        version = facts.value("release.judged") or facts.value("vllm.version")
        weights = _weights(facts, cfg, text, tp, pp, dbytes, str(version) if version else None)
    except Missing as miss:
        # still a bound: with no weights at all, does one request fit?
        weights = wmod.WeightEstimate(0, f"unknown ({miss.path}: {miss.reason}): 0 assumed")
        out.weights_unknown = miss
    weights_gib = weights.bytes_per_gpu / GIB
    out.put("memory.weights_gib", round(weights_gib, 2), weights.how)
    if weights.assumptions:
        out.weights_doubt = "; ".join(weights.assumptions)

    layers = int(_need(facts, "model.num_hidden_layers"))
    hidden = int(_need(facts, "model.hidden_size"))
    vocab = int(_need(facts, "model.vocab_size"))
    inter = activation_width(text, hidden)
    names = [str(n) for n in facts.value("gpu.names") or []]
    batched_default, seqs_default = batch_defaults(usable, names, formula)
    batched = _int_fact(facts, "serve.max_num_batched_tokens", batched_default)
    seqs = _int_fact(facts, "serve.max_num_seqs", seqs_default)
    eager = (
        bool(facts.value("serve.enforce_eager")) or facts.value("serve.cudagraph_mode") == "NONE"
    )
    layers_gpu = max(kvmod.pp_partitions(layers, pp, facts.value("env.VLLM_PP_LAYER_PARTITION")))
    release = str(version) if version else None
    v2, runner_how = profmod.uses_v2_runner(
        release, model_traits(facts, text, layers), facts.value("env.VLLM_USE_V2_MODEL_RUNNER")
    )
    capability = facts.value("gpu.min_capability")
    sampler, sampler_how = profmod.sampler_path(
        release,
        v2=v2,
        capability=int(capability) if capability else None,
        gpu_names=names,
        env=facts.value("env.VLLM_USE_FLASHINFER_SAMPLER"),
        flashinfer_installed=flashinfer_installed(facts),
    )
    graph_on, graph_how = profmod.graph_estimate_subtracted(
        release, v2=v2, eager=eager, env=facts.value("env.VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS")
    )
    terms, thow = calibrated_terms(
        tp=tp,
        hidden=hidden,
        inter=inter,
        vocab=vocab,
        layers_gpu=layers_gpu,
        batched=batched,
        seqs=seqs,
        act_bytes=dbytes,
        eager=eager,
        graph_subtracted=graph_on,
        cal=cal,
        sampler=sampler,
        state_bytes=profmod.persistent_bytes_per_entry(v2),
    )
    thow["activation"] += f"; sampler path: {sampler_how}; {runner_how}"
    thow["cuda_graph"] += f"; {graph_how}"
    out.inputs = {
        "tp": tp,
        "hidden": hidden,
        "intermediate": inter,
        "vocab": vocab,
        "sampler": sampler,
        "state_bytes": profmod.persistent_bytes_per_entry(v2),
        "unified_memory": capability in profmod.UNIFIED_MEMORY_CAPABILITIES,
        "layers_gpu": layers_gpu,
        "batched": batched,
        "seqs": seqs,
        "dtype_bytes": dbytes,
        "utilization": util,
        "usable_gib": usable,
        "graph_subtracted": graph_on,
    }
    mm = _encoder_profile(facts, cfg, hidden, dbytes, batched, seqs, version, tp)
    text_peak = terms["activation"]
    if mm is not None:
        terms["activation"] = mm.peak(text_peak)
        thow["activation"] = f"text-only peak {text_peak:.2f} GiB ({thow['activation']}); {mm.how}"
    # what the multimodal profile adds to the text-only peak (the calibration leaves it out)
    out.inputs["mm_gib"] = terms["activation"] - text_peak
    out.put("memory.activation_peak_gib", round(terms["activation"], 2), thow["activation"])
    out.put("memory.non_torch_gib", round(terms["non_torch"], 2), thow["non_torch"])
    out.put("memory.cuda_graph_gib", round(terms["cuda_graph"], 2), thow["cuda_graph"])

    budget, budget_bytes = kv_budget(facts)
    graph = terms["cuda_graph"] if graph_on else 0.0
    # what the GPU holds besides the KV cache: weights, the profile's peak, non-torch memory
    # and the CUDA graphs (captured after the KV cache is allocated, in the same memory)
    held = weights_gib + terms["activation"] + terms["non_torch"] + terms["cuda_graph"]
    if budget_bytes:
        kv_gib = budget_bytes / GIB
        kv_how = f"--kv-cache-memory-bytes {budget}: the profile is skipped (gpu_worker)"
    else:
        kv_gib = usable * util - weights_gib - terms["activation"] - terms["non_torch"] - graph
        kv_how = (
            f"{usable:.2f} GiB × {util} − weights {weights_gib:.2f} − activation "
            f"{terms['activation']:.2f} − non-torch {terms['non_torch']:.2f}"
            + (f" − CUDA graphs {graph:.2f}" if graph_on else "")
            + f" GiB; {formula.describe(graph_on)}"
        )
    out.put("memory.kv_cache_gib", round(kv_gib, 2), kv_how)

    layout, layers_how = _kv_layout(facts, text, layers, tp, pp, release)
    out.put("memory.kv_layers", layout.describe(), layers_how)
    out.put(
        "memory.kv_bytes_per_token",
        layout.bytes_per_token(),
        f"per GPU, attention layers summed ({layout.describe()})",
    )
    out.inputs["uniform_kv"] = len({layer.key() for layer in layout.layers}) == 1
    if layout.encoder_only:  # no KV cache: nothing to run out of
        why = "; ".join(layout.how)
        out.put("memory.kv_verdict", "fits", why)
        out.put("memory.kv_room", "room", why)
        for path in (
            "memory.kv_cache_tokens",
            "memory.max_concurrency",
            "memory.margin_gib",
            "memory.estimate_line",
        ):
            out.how[path] = why  # missing, with this reason
        return out
    out.kv_doubt = kv_assumptions(facts, raw_text)
    max_len, lhow = _max_model_len(facts)
    block_arg = _argv_value(facts, "--block-size")
    requested_block = int(block_arg) if block_arg and block_arg.isdigit() else None
    state_blocks = 1
    if any(layer.kind == kvmod.MAMBA for layer in layout.layers):
        state_blocks, state_how = formula.mamba.blocks_per_request(
            model_type=str(text.get("model_type") or ""),
            prefix_caching=_prefix_caching(facts),
            spec_tokens=_int_fact(facts, "serve.num_speculative_tokens", 0),
            max_model_len=max_len,
            block=kvmod.block_size_for(layout, requested_block)[0],
        )
        layout.how.append(state_how)
    cap = kvmod.capacity(
        layout,
        max(0, int(kv_gib * GIB)),
        max_model_len=max_len,
        max_num_batched_tokens=batched,
        tokens_from_concurrency=formula.tokens_from_concurrency,
        block_size=requested_block,
        state_blocks=state_blocks,
    )
    out.put(
        "memory.kv_cache_tokens",
        cap.tokens,
        f"{cap.num_blocks} blocks of {cap.block_size} tokens ({cap.groups} group(s) of "
        f"{cap.group_size} layers, {cap.page_bytes} B per layer page); {formula.describe()}",
    )
    out.put(
        "memory.max_concurrency",
        round(cap.concurrency, 2),
        f"{cap.num_blocks} blocks / {cap.blocks_per_request} blocks per request of "
        f"{max_len} tokens ({lhow})",
    )

    calibrated = (
        terms["activation"] + terms["non_torch"] + (terms["cuda_graph"] if graph_on else 0.0)
    )
    margin, margin_how = margin_gib(cal or calibration(), terms, calibrated, seqs, vocab)
    need_gib = cap.blocks_per_request * cap.page_bytes * cap.group_size / GIB

    def judge(kv: float) -> tuple[str, str]:
        """(the verdict on one request, the room) for a KV cache of ``kv`` GiB."""
        if kv <= -margin or (kv + margin) < need_gib:
            verdict = "does-not-fit"
        elif kv <= margin or kv < need_gib + margin:
            verdict = "tight"
        else:
            verdict = "fits"
        return verdict, "none" if kv + margin <= 0 else "tight" if kv - margin <= 0 else "room"

    verdict, room = judge(kv_gib)
    # with no weights at all (the KV cache is then larger by them, unless a budget fixes it)
    out.bound["memory.kv_verdict"], out.bound["memory.kv_room"] = judge(
        kv_gib if budget_bytes else kv_gib + weights_gib
    )
    out.put("memory.margin_gib", round(margin, 2), margin_how)
    if any(layer.kind == kvmod.MAMBA for layer in layout.layers):
        _put_mamba_blocks(out, cap, kv_gib, margin, seqs, seqs_default)
    if budget_bytes:
        _put_budget_room(out, usable, uhow, kv_gib, held, weights_gib, margin)
    out.put(
        "memory.kv_room",
        room,
        f"estimated KV cache {kv_gib:.2f} ± {margin:.2f} GiB "
        '(vLLM stops with "No available memory for the cache blocks" at ≤ 0); total '
        f"{usable:.2f} GiB ({uhow})",
    )
    out.put(
        "memory.kv_verdict",
        verdict,
        f"one request of {max_len} tokens needs {need_gib:.2f} GiB; estimated KV cache "
        f"{kv_gib:.2f} ± {margin:.2f} GiB; total {usable:.2f} GiB ({uhow})",
    )
    line = estimate_line(kv_gib, cap.tokens, cap.concurrency, max_len)
    if out.values.get("memory.kv_budget_room") in ("none", "tight"):
        left = out.inputs["budget_left_gib"]
        line += (
            f"; asked of the GPU by --kv-cache-memory-bytes {budget}, which with the weights and "
            + (
                f"the profile is {-left:.1f} GiB more than it holds"
                if left < 0
                else f"the profile leaves {left:.1f} GiB"
            )
        )
    out.put(
        "memory.estimate_line",
        line,
        "memory.kv_cache_gib, memory.kv_cache_tokens, memory.max_concurrency",
    )
    return out


def _short_tokens(n: int) -> str:
    if n >= 1_000_000:
        return f"{n / 1e6:.2f}M"
    if n >= 1000:
        return f"{n / 1000:.0f}k"
    return str(n)


def _short_concurrency(concurrency: float) -> str:
    """Two decimals below 10, one above, rounded down: 0.97 requests never reads as 1.0 (MEM001
    decides on the unrounded figure)."""
    places = 2 if concurrency < 10 else 1
    scale = 10**places
    return f"{math.floor(concurrency * scale + 1e-9) / scale:.{places}f}"


def estimate_line(kv_gib: float, tokens: int, concurrency: float, max_len: int) -> str:
    if kv_gib <= 0:  # vLLM stops: "No available memory for the cache blocks"
        return f"no KV cache: the weights and the profile exceed the budget by {-kv_gib:.1f} GiB"
    length = f"{max_len // 1024}k" if max_len % 1024 == 0 else _short_tokens(max_len)
    return (
        f"KV cache ≈ {kv_gib:.0f} GiB ≈ {_short_tokens(tokens)} tokens ≈ "
        f"{_short_concurrency(concurrency)} concurrent requests of {length}"
    )


def _decide_over_possible_sizes(
    facts: Facts, result: Estimate, cal: dict[str, Any] | None = None
) -> None:
    """A GPU memory inferred from a name may be several sizes (8 or 16 GiB): the figures are
    the smallest's, and a verdict stands only where every size gives it."""
    total = facts.get("gpu.memory_total_mib")
    if total is None or not total.inferred or not isinstance(total.possible, list):
        return
    others = [
        estimate(facts, int(size), cal) for size in total.possible if int(size) != int(total.value)
    ]
    for path in ("memory.kv_verdict", "memory.kv_room", "memory.mamba_blocks_verdict"):
        seen = {result.values.get(path)} | {o.values.get(path) for o in others}
        if len(seen) > 1:
            result.values.pop(path, None)
            result.how[path] = (
                f"the GPU's memory decides ({total.detail}): "
                f"{' or '.join(sorted(str(v) for v in seen))}"
            )
    sizes = " or ".join(f"{int(s) // 1024} GiB" for s in total.possible)
    # the one line shows every size where they differ, not only the smallest's figures
    lines = [result.values.get("memory.estimate_line")] + [
        o.values.get("memory.estimate_line") for o in others
    ]
    if all(lines) and len(set(lines)) > 1:
        result.values["memory.estimate_line"] = "; ".join(
            f"with {int(size) // 1024} GiB: {line}"
            for size, line in zip(
                [total.value] + [s for s in total.possible if int(s) != int(total.value)],
                lines,
                strict=True,
            )
        )
    for path in result.how:
        if path in result.values:
            result.how[path] += f"; for the smallest of {sizes} ({total.detail})"


def _partial_figures(facts: Facts) -> None:
    """The figures that need neither the GPU's memory size nor the context length (the
    weights per GPU, the KV layers and their bytes per token), where the whole estimate could
    not be made."""
    cfg, raw_text = _config(facts)
    text = _text_with_facts(facts, raw_text)
    tp = _int_fact(facts, "serve.tensor_parallel_size", 1)
    pp = _int_fact(facts, "serve.pipeline_parallel_size", 1)
    dtype, _ = _model_dtype(facts)
    version = facts.value("release.judged") or facts.value("vllm.version")
    release = str(version) if version else None
    try:
        weights = _weights(
            facts, cfg, text, tp, pp, float(kvmod.DTYPE_BYTES.get(dtype, 2)), release
        )
    except (Missing, ValueError, TypeError, KeyError):
        pass
    else:
        facts.missing.pop("memory.weights_gib", None)
        facts.set(
            "memory.weights_gib",
            round(weights.bytes_per_gpu / GIB, 2),
            Source.DERIVED,
            (
                f"assuming {'; '.join(weights.assumptions)}: {weights.how}"
                if weights.assumptions
                else weights.how
            ),
        )
    try:
        layers = int(_need(facts, "model.num_hidden_layers"))
        layout, layers_how = _kv_layout(facts, text, layers, tp, pp, release)
    except (Missing, ValueError, TypeError, KeyError):
        return
    if not any(layer.kind == kvmod.MAMBA for layer in layout.layers):
        for path in MAMBA_PATHS:  # not a hybrid model: it has no Mamba cache to size
            facts.missing.pop(path, None)
    for path, value, how in (
        ("memory.kv_layers", layout.describe(), layers_how),
        (
            "memory.kv_bytes_per_token",
            layout.bytes_per_token(),
            f"per GPU, attention layers summed ({layout.describe()})",
        ),
    ):
        facts.missing.pop(path, None)
        facts.set(path, value, Source.DERIVED, how)


def check_memory_arguments(facts: Facts) -> None:
    """Refuse, as bad input, the memory arguments the judged release refuses before it
    starts: ``--gpu-memory-utilization`` above 1 (every release: ``CacheConfig._verify_args``
    up to 0.11.0, then ``Field(gt=0, le=1)``) or at most 0 (from 0.11.1; before, vLLM starts
    and finds no memory for the KV cache, which MEM003 says)."""
    fact = facts.get("serve.gpu_memory_utilization")
    if fact is None or fact.source == Source.DEFAULT or not isinstance(fact.value, (int, float)):
        return
    value = float(fact.value)
    release = facts.value("release.judged") or facts.value("vllm.version")
    try:
        since_gt0 = Version(str(release).split("+")[0]) >= Version("0.11.1") if release else True
    except InvalidVersion:
        since_gt0 = True
    if value > 1 or (value <= 0 and since_gt0) or value != value:
        from vllm_doctor.errors import InputError

        shown = f"vLLM {release}" if release else "vLLM (every release from 0.11.1)"
        raise InputError(
            f"--gpu-memory-utilization {fact.value:g}",
            f"{shown} refuses it: the share of GPU memory must be in (0, 1] "
            "(CacheConfig.gpu_memory_utilization)",
        )


def compute_memory(facts: Facts, cal: dict[str, Any] | None = None) -> None:
    """Set every memory.* fact, or mark each missing with the input it lacks. InputError for
    memory arguments the judged release refuses."""
    for path in (*MEMORY_PATHS, *MAMBA_PATHS):
        facts.values.pop(path, None)
        facts.missing.pop(path, None)
    check_memory_arguments(facts)
    try:
        result = estimate(facts, cal=cal)
        _decide_over_possible_sizes(facts, result, cal)
    except Missing as miss:
        for path in (*MEMORY_PATHS, *MAMBA_PATHS):
            facts.mark_missing(path, f"needs {miss.path}: {miss.reason}")
        # the weights and the KV bytes per token need neither the GPU nor the context length
        _partial_figures(facts)
        return
    except (ValueError, TypeError, KeyError, ZeroDivisionError, OverflowError) as err:
        for path in MEMORY_PATHS:
            facts.mark_missing(path, f"could not be estimated: {err}")
        return
    unknown, doubt = result.weights_unknown, result.weights_doubt
    if result.kv_doubt:  # no verdict holds whatever the KV layout is
        for path in VERDICT_PATHS:
            if path in result.values:
                result.values.pop(path)
                result.how[path] = f"{DOUBT_PREFIX.replace('weights', 'KV')}{result.kv_doubt}"
        doubt = "; ".join(d for d in (doubt, result.kv_doubt) if d)
    hybrid = [p for p in MAMBA_PATHS if p in result.values or p in result.how]
    for path in (*MEMORY_PATHS, *hybrid):
        bound_holds = (
            path in VERDICT_PATHS
            and path in result.values
            and result.bound.get(path, result.values.get(path)) in ("does-not-fit", "none")
        )
        if unknown is not None and not bound_holds:
            facts.mark_missing(path, f"needs {unknown.path}: {unknown.reason}")
        elif doubt is not None and path in VERDICT_PATHS and path in result.values:
            if bound_holds:  # holds with no weights at all
                facts.set(
                    path,
                    result.bound[path],
                    Source.DERIVED,
                    f"even with no weights (their figure rests on an assumption: {doubt})",
                )
            else:
                facts.mark_missing(path, f"{DOUBT_PREFIX}{doubt}. {DOUBT_HINT}")
        elif path not in result.values and path in result.how:
            facts.mark_missing(path, result.how[path])
        elif path in result.values:
            how = result.how[path]
            value = result.values[path]
            if unknown is not None:
                how = f"even with no weights (their size is unknown): {how}"
            elif doubt is not None:
                how = f"assuming {doubt}: {how}"
                if path == "memory.estimate_line":
                    value = f"{value} (rests on assumed values: decides nothing)"
            facts.set(path, value, Source.DERIVED, how)
        else:
            facts.mark_missing(path, "not estimated")


# a weights figure resting on an assumption: why the verdicts are undecided, and the way out
DOUBT_PREFIX = "the weights figure rests on an assumption, so it decides nothing: "
DOUBT_HINT = (
    "Give the checkpoint's size (its model.safetensors.index.json beside config.json, or the "
    "Hub) or a config.json that states it"
)


# -- the one line every report shows -----------------------------------------------------------

# every figure but the verdict on room and the line itself, in MEMORY_PATHS' order
SUMMARY_PATHS = tuple(
    path for path in MEMORY_PATHS if path not in ("memory.kv_room", "memory.estimate_line")
)


def report_line(facts: Facts) -> str | None:
    """ "KV cache ≈ 51 GiB ≈ 420k tokens ≈ 12.8 concurrent requests of 32k (…)", or None;
    with a start-up log, what vLLM printed beside it."""
    line = facts.value("memory.estimate_line")
    figures = facts.value("log.memory_figures")
    if not line:
        if isinstance(figures, dict):
            from vllm_doctor.memory.readback import describe

            return f"vLLM printed: {describe(figures)} (no estimate: {_why_no_estimate(facts)})"
        return _partial_line(facts)
    weights, usable = facts.value("memory.weights_gib"), facts.value("memory.usable_gib")
    margin = facts.value("memory.margin_gib")
    total = facts.get("gpu.memory_total_mib")
    sizes = ""
    if total is not None and total.inferred and isinstance(total.possible, list):
        sizes = (
            " (the smallest of "
            + " or ".join(f"{int(s) // 1024}" for s in total.possible)
            + " GiB)"
        )
    line = (
        f"{line} (per GPU: weights {weights} GiB of {usable} GiB usable{sizes}; "
        f"± {margin} GiB margin)"
    )
    if isinstance(figures, dict):
        from vllm_doctor.memory.readback import compare

        rows = compare(figures, facts)
        shown = ", ".join(
            f"{r['figure']} {r['printed']} ({r['error']:+.1%})"
            for r in rows
            if r["error"] is not None
        )
        if shown:
            line += f"; vLLM printed {shown}"
    return line


def _partial_line(facts: Facts) -> str | None:
    """What _partial_figures found where the whole estimate could not be made: "weights
    15.26 GiB per GPU; KV 144.00 KiB per token (36 full layers); the KV cache needs …"."""
    weights, per_token = facts.value("memory.weights_gib"), facts.value("memory.kv_bytes_per_token")
    if weights is None and per_token is None:
        return None
    from vllm_doctor.report.facts_view import format_bytes

    known = []
    if weights is not None:
        fact = facts.get("memory.weights_gib")
        detail = (fact.detail if fact is not None else None) or ""
        assumed = " (rests on an assumed value)" if detail.startswith("assuming ") else ""
        known.append(f"weights {weights} GiB per GPU{assumed}")
    if per_token is not None:
        layers = str(facts.value("memory.kv_layers") or "").split(" (")[0]
        known.append(f"KV {format_bytes(int(per_token))} per token ({layers} layers)")
    reason = _why_no_estimate(facts)
    if not reason.startswith("needs gpu.memory_total_mib"):
        need = f"the KV cache {reason}"
    elif facts.value("gpu.names"):  # a GPU whose size the name does not tell: say why
        reason = reason.removeprefix("needs gpu.memory_total_mib: ")
        need = f"the KV cache needs the GPU's memory size ({reason})"
    else:
        need = "the KV cache needs the GPU's memory size: --gpu NAME or --report collect-env.txt"
    return "; ".join([*known, need])


def _why_no_estimate(facts: Facts) -> str:
    reason = facts.why_missing("memory.kv_cache_gib") or "not collected"
    return reason if len(reason) <= 160 else reason[:159] + "…"


def report_summary(facts: Facts) -> dict[str, Any] | None:
    """The estimate for the JSON document: the line, its figures and, with a start-up log,
    vLLM's printed figures compared with them; None when there is neither."""
    line = report_line(facts)
    if line is None:
        return None
    figures = facts.value("log.memory_figures")
    data: dict[str, Any] = {
        "estimate": line,
        "figures": {path.split(".", 1)[1]: facts.value(path) for path in SUMMARY_PATHS},
    }
    if isinstance(figures, dict):
        from vllm_doctor.memory.readback import compare

        data["printed"] = figures
        data["comparison"] = compare(figures, facts)
    return data
