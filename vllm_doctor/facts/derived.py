"""Facts computed from other facts: memory estimates, divisibility, driver vs torch CUDA.

A derived fact is only set when every input exists; otherwise it is marked missing with a
reason that names the missing input (and why that one is missing), so "cannot decide" verdicts
point at what to supply.

Estimates (documented, deliberately simple):
  KV bytes per token (whole model)  = layers × KV heads × head_dim × 2 (K and V) × dtype bytes
  with MLA (``kv_lora_rank``)        = layers × (kv_lora_rank + qk rope dim) × dtype bytes
    (the rope dim is 64 for the DeepSeek-V2/V3 family; ``model.qk_rope_head_dim`` wins when
    present). Sliding-window layers, cross-layer KV sharing and per-layer head dims are not
    modelled: models that have them (Gemma 4) get an estimate computed with ``head_dim``.
  KV dtype bytes: ``--kv-cache-dtype fp8*`` → 1, else the model dtype (``--dtype`` when set).
  Per GPU: KV heads are split over TP (at least one head per GPU: heads are replicated when
    TP > KV heads); MLA's latent cache is replicated on every TP rank; PP splits the layers.
  Weights per GPU = weights_bytes / (TP × PP).
  KV memory available per GPU = total memory × gpu_memory_utilization − weights per GPU
    (activation peaks, CUDA graphs and the sampler are not subtracted: an upper bound).
    A memory inferred from the GPU's name is a range (facts/hardware.py): "fits" and "does not
    fit" are decided only where the whole range agrees. Without the weights' size, "does not
    fit" is still decided when one request's KV cache exceeds total × utilisation alone.
  Expert-parallel size = TP × DP with --enable-expert-parallel, else 1.
  The model's maximum context is derived as vLLM does (the smallest context-length key of the
    config.json that was read, scaled by RoPE scaling that extends it, --hf-overrides applied);
    without the file, ``model.max_position_embeddings``.
"""

from __future__ import annotations

import math
from typing import Any

from vllm_doctor.facts.model import Fact, Facts, Source

MIB = 1024 * 1024
DEFAULT_GPU_MEMORY_UTILIZATION = 0.9  # vLLM's default
DEFAULT_MLA_ROPE_DIM = 64

_DTYPE_BYTES = {
    "float32": 4,
    "float": 4,
    "fp32": 4,
    "bfloat16": 2,
    "bf16": 2,
    "float16": 2,
    "fp16": 2,
    "half": 2,
    "float8": 1,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "fp8_inc": 1,
    "fp8_ds_mla": 1,
}

DERIVED_PATHS = (
    "derived.kv_bytes_per_token",
    "derived.kv_bytes_needed",
    "derived.kv_bytes_available",
    "derived.kv_fits_one_request",
    "derived.max_model_len_estimate",
    "derived.weights_bytes_per_gpu",
    "derived.free_memory_below_utilization",
    "derived.tp_divides_heads",
    "derived.tp_divides_kv_heads",
    "derived.driver_supports_torch_cuda",
    "derived.expert_parallel_size",
    "derived.max_model_len_above_model",
)


class _Missing(Exception):
    def __init__(self, path: str, reason: str):
        super().__init__(path)
        self.path = path
        self.reason = reason


def _need_fact(facts: Facts, path: str) -> Fact:
    fact = facts.get(path)
    if fact is None:
        why = facts.why_missing(path) or "not collected"
        raise _Missing(path, why)
    return fact


def _need(facts: Facts, path: str) -> Any:
    return _need_fact(facts, path).value


def _tp(facts: Facts) -> int:
    return int(_need(facts, "serve.tensor_parallel_size") or 1)


def _pp(facts: Facts) -> int:
    fact = facts.get("serve.pipeline_parallel_size")
    return int(fact.value or 1) if fact is not None else 1


def _utilization(facts: Facts) -> tuple[float, str]:
    fact = facts.get("serve.gpu_memory_utilization")
    if fact is not None and fact.value is not None:
        return float(fact.value), f"gpu_memory_utilization {fact.value}"
    return DEFAULT_GPU_MEMORY_UTILIZATION, (
        f"gpu_memory_utilization {DEFAULT_GPU_MEMORY_UTILIZATION} (vLLM default)"
    )


def _kv_dtype_bytes(facts: Facts) -> tuple[int, str]:
    kv = facts.value("serve.kv_cache_dtype")
    if isinstance(kv, str) and kv.lower() not in ("auto", ""):
        key = kv.lower()
        if key.startswith("fp8"):
            return 1, f"kv_cache_dtype {kv}"
        if key in _DTYPE_BYTES:
            return _DTYPE_BYTES[key], f"kv_cache_dtype {kv}"
    serve_dtype = facts.value("serve.dtype")
    if isinstance(serve_dtype, str) and serve_dtype.lower() in _DTYPE_BYTES:
        return _DTYPE_BYTES[serve_dtype.lower()], f"dtype {serve_dtype}"
    model_dtype = _need(facts, "model.dtype")
    size = _DTYPE_BYTES.get(str(model_dtype).lower())
    if size is None:
        raise _Missing("model.dtype", f"unknown dtype {model_dtype!r}")
    # vLLM computes in bf16/fp16 for float32 checkpoints only when asked; keep the checkpoint's
    return size, f"model dtype {model_dtype}"


def _kv_per_token(facts: Facts, per_gpu: bool = True) -> tuple[int, int, str]:
    """(whole-model bytes per token, per-GPU bytes per token (0 unless asked), how)."""
    layers = int(_need(facts, "model.num_hidden_layers"))
    dbytes, dwhy = _kv_dtype_bytes(facts)
    tp, pp = (_tp(facts), _pp(facts)) if per_gpu else (1, 1)
    layers_per_gpu = math.ceil(layers / pp)
    rank = facts.value("model.kv_lora_rank")
    if rank:
        rope = facts.value("model.qk_rope_head_dim")
        rope_why = "qk_rope_head_dim"
        if not rope:
            rope, rope_why = DEFAULT_MLA_ROPE_DIM, f"rope dim {DEFAULT_MLA_ROPE_DIM} assumed"
        per = int(rank) + int(rope)
        total = layers * per * dbytes
        gpu = layers_per_gpu * per * dbytes if per_gpu else 0
        how = f"MLA: {layers} layers × ({rank} + {rope}) × {dbytes} B ({dwhy}; {rope_why})"
        return total, gpu, how
    kv = int(_need(facts, "model.num_key_value_heads"))
    head_dim = int(_need(facts, "model.head_dim"))
    total = layers * kv * head_dim * 2 * dbytes
    kv_per_gpu = max(1, math.ceil(kv / tp))
    gpu = layers_per_gpu * kv_per_gpu * head_dim * 2 * dbytes if per_gpu else 0
    how = f"{layers} layers × {kv} KV heads × {head_dim} × 2 × {dbytes} B ({dwhy})"
    if facts.value("model.global_head_dim"):
        how += "; global-layer head dim not modelled"
    return total, gpu, how


def _max_model_len(facts: Facts) -> tuple[int, str]:
    fact = facts.get("serve.max_model_len")
    if fact is not None and fact.value:
        return int(fact.value), f"max_model_len {fact.value}"
    length, how = _model_max_len(facts)
    return length, f"{how} (no --max-model-len: the model's own limit)"


def _weights_per_gpu(facts: Facts) -> tuple[int, str]:
    total = int(_need(facts, "model.weights_bytes"))
    tp, pp = _tp(facts), _pp(facts)
    return total // (tp * pp), f"{total} B / (TP {tp} × PP {pp})"


def _memory_range(facts: Facts) -> tuple[int, int, str]:
    """(lowest, highest) total MiB of the smallest GPU and how it is known: measured, one
    value; inferred from a GPU name, the range its variants and NVML's reporting allow."""
    total = _need_fact(facts, "gpu.memory_total_mib")
    bounds = facts.value("gpu.memory_bounds_mib")
    if total.inferred and isinstance(bounds, list) and len(bounds) == 2:
        low, high = int(bounds[0]), int(bounds[1])
        return low, high, f"{low}–{high} MiB (inferred: {total.detail})"
    return int(total.value), int(total.value), f"{total.value} MiB"


def _without_weights(facts: Facts, failure: Exception | None) -> tuple[int, str] | None:
    """(bytes, how): the most KV memory a GPU could have whatever the weights weigh, when
    only the weights' size is what is missing."""
    if not (isinstance(failure, _Missing) and failure.path == "model.weights_bytes"):
        return None
    try:
        _, high_mib, mwhy = _memory_range(facts)
    except _Missing:
        return None
    util, uwhy = _utilization(facts)
    return int(high_mib * MIB * util), (
        f"{mwhy} × {util} ({uwhy}), even with no weights: {failure.reason}"
    )


def _model_max_len(facts: Facts) -> tuple[int, str]:
    path = facts.value("model.config_path")
    if path:
        from vllm_doctor import bounds
        from vllm_doctor.errors import InputError
        from vllm_doctor.facts.model_config import derived_max_model_len

        try:
            cfg = bounds.json_loads(
                bounds.read_text(path, "config.json", "json"), non_finite="null"
            )
        except (InputError, ValueError):
            cfg = None
        if isinstance(cfg, dict):
            overrides = facts.value("serve.hf_overrides")
            length, how = derived_max_model_len(
                cfg, overrides if isinstance(overrides, dict) else None
            )
            if length is not None:
                return length, how
    value = _need(facts, "model.max_position_embeddings")
    return int(value), f"max_position_embeddings {value}"


def _compare_versions(a: str, b: str) -> bool:
    from packaging.version import Version

    def major_minor(text: str) -> Version:
        parts = str(text).split(".")
        return Version(".".join(parts[:2]))

    return major_minor(a) >= major_minor(b)


def _free_below(facts: Facts) -> tuple[bool, str]:
    util, uwhy = _utilization(facts)
    devices = facts.value("gpu.devices")
    pairs: list[tuple[int, int, int]] = []
    if (
        isinstance(devices, list)
        and devices
        and all(
            isinstance(d, dict)
            and d.get("memory_total_mib") is not None
            and d.get("memory_free_mib") is not None
            for d in devices
        )
    ):
        pairs = [
            (int(d.get("index", i)), int(d["memory_total_mib"]), int(d["memory_free_mib"]))
            for i, d in enumerate(devices)
        ]
    else:
        total = int(_need(facts, "gpu.memory_total_mib"))
        free = int(_need(facts, "gpu.memory_free_mib"))
        pairs = [(-1, total, free)]
    short = [(i, t, f) for i, t, f in pairs if f < t * util]
    if short:
        i, t, f = short[0]
        which = f"GPU {i}" if i >= 0 else "a GPU"
        return True, f"{which}: {f} MiB free < {t} MiB × {util} ({uwhy})"
    return False, f"every GPU has at least total × {util} free ({uwhy})"


def compute_derived(facts: Facts, only: tuple[str, ...] | None = None) -> None:
    """Set (or mark missing) every derived.* fact from the facts collected so far (``only``:
    just these, the others kept as they are)."""
    for path in DERIVED_PATHS if only is None else only:
        facts.values.pop(path, None)
        facts.missing.pop(path, None)

    def attempt(path: str, fn: Any) -> Any:
        if only is not None and path not in only:
            return facts.value(path)
        try:
            value, how = fn()
        except _Missing as miss:
            facts.mark_missing(path, f"needs {miss.path}: {miss.reason}")
            return None
        except (TypeError, ValueError, ZeroDivisionError) as err:
            facts.mark_missing(path, f"could not be computed: {err}")
            return None
        facts.set(path, value, Source.DERIVED, how)
        return value

    def per_token() -> tuple[int, str]:
        total, _, how = _kv_per_token(facts, per_gpu=False)
        return total, how

    attempt("derived.kv_bytes_per_token", per_token)

    def needed() -> tuple[int, str]:
        _, per_gpu, how = _kv_per_token(facts)
        length, lwhy = _max_model_len(facts)
        return per_gpu * length, f"{per_gpu} B/token per GPU × {length} ({lwhy}); {how}"

    need = attempt("derived.kv_bytes_needed", needed)
    attempt("derived.weights_bytes_per_gpu", lambda: _weights_per_gpu(facts))

    def available_range() -> tuple[int, int, str]:
        low_mib, high_mib, mwhy = _memory_range(facts)
        util, uwhy = _utilization(facts)
        weights, wwhy = _weights_per_gpu(facts)
        low, high = (max(0, int(mib * MIB * util) - weights) for mib in (low_mib, high_mib))
        return (
            low,
            high,
            (f"{mwhy} × {util} − weights {weights} B ({uwhy}; {wwhy}); activations not subtracted"),
        )

    span: tuple[int, int, str] | None = None
    failure: Exception = _Missing("derived.kv_bytes_available", "not computed")
    try:
        span = available_range()
    except (_Missing, TypeError, ValueError, ZeroDivisionError) as err:
        failure = err  # raised again by each fact that needs the span

    def available() -> tuple[int, str]:
        if span is None:
            raise failure
        low, high, how = span
        if low > 0 or high <= 0:
            # the whole range agrees on "room left" / "no room": the low end is what is sure
            return low, how if low == high else f"at least {low} B: {how}"
        raise _Missing(
            "gpu.memory_total_mib",
            f"between {low} and {high} B ({how}): the "
            "GPU's memory decides (run on the host or pass nvidia-smi's total)",
        )

    attempt("derived.kv_bytes_available", available)

    def fits() -> tuple[bool, str]:
        if need is None:
            raise _Missing(
                "derived.kv_bytes_needed",
                facts.why_missing("derived.kv_bytes_needed") or "not computed",
            )
        if span is None:
            ceiling = _without_weights(facts, failure)
            if ceiling is not None and need > ceiling[0]:
                # the KV cache alone exceeds the memory: no weight size could make it fit
                return False, f"needs {need} B, at most {ceiling[0]} B per GPU ({ceiling[1]})"
            raise failure
        low, high, how = span
        if need <= low or need > high:
            shown = f"{low} B" if low == high else f"{low}–{high} B"
            return need <= low, f"needs {need} B, about {shown} available per GPU ({how})"
        raise _Missing(
            "gpu.memory_total_mib",
            f"needs {need} B, {low}–{high} B available per GPU ({how}): the GPU's memory decides",
        )

    attempt("derived.kv_fits_one_request", fits)

    def estimate() -> tuple[int, str]:
        if span is None:
            raise failure
        low, high, _ = span
        _, per_gpu, _how = _kv_per_token(facts)
        at_least = "at least " if low != high else ""
        return low // per_gpu, f"{at_least}{low} B / {per_gpu} B per token per GPU"

    attempt("derived.max_model_len_estimate", estimate)
    attempt("derived.free_memory_below_utilization", lambda: _free_below(facts))

    def tp_heads() -> tuple[bool, str]:
        heads = int(_need(facts, "model.num_attention_heads"))
        tp = _tp(facts)
        return heads % tp == 0, f"{heads} attention heads, TP {tp}"

    def tp_kv_heads() -> tuple[bool, str]:
        kv = int(_need(facts, "model.num_key_value_heads"))
        tp = _tp(facts)
        return kv % tp == 0 or tp % kv == 0, f"{kv} KV heads, TP {tp}"

    attempt("derived.tp_divides_heads", tp_heads)
    attempt("derived.tp_divides_kv_heads", tp_kv_heads)

    def driver_cuda() -> tuple[bool, str]:
        driver = str(_need(facts, "driver.cuda_version"))
        torch_cuda = str(_need(facts, "torch.cuda_version"))
        return _compare_versions(driver, torch_cuda), (
            f"driver supports CUDA {driver}, torch built with CUDA {torch_cuda}"
        )

    attempt("derived.driver_supports_torch_cuda", driver_cuda)

    def ep_size() -> tuple[int, str]:
        enabled = _need(facts, "serve.enable_expert_parallel")
        if not enabled:
            return 1, "expert parallelism is off"
        tp = _tp(facts)
        dp_fact = facts.get("serve.data_parallel_size")
        dp = int(dp_fact.value or 1) if dp_fact is not None else 1
        return tp * dp, f"TP {tp} × DP {dp} with --enable-expert-parallel"

    attempt("derived.expert_parallel_size", ep_size)

    def above_model() -> tuple[bool, str]:
        requested = _need(facts, "serve.max_model_len")
        limit, how = _model_max_len(facts)
        return int(requested) > limit, f"--max-model-len {requested} vs the model's {limit} ({how})"

    attempt("derived.max_model_len_above_model", above_model)
