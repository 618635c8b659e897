"""Which code the release's profile run executes: the model runner and the dummy sampler's path.

The KV cache is what is left after vLLM's profile run (``determine_available_memory`` in
``vllm/v1/worker/gpu_worker.py``); its activation peak is the larger of the forward pass over
``max_num_batched_tokens`` tokens and the dummy sampler run over ``max_num_seqs`` rows of logits.
What that sampler run allocates depends on the model runner and on the top-k/top-p path, each
chosen per release (read in the 0.8.0–0.33.0 wheels):

Model runner (``VllmConfig.use_v2_model_runner`` in ``vllm/config/vllm.py``;
``VLLM_USE_V2_MODEL_RUNNER`` overrides it):

* before 0.22.0: V1 unless the variable is set;
* 0.22.0: V2 for ``Qwen3ForCausalLM``, 0.23.0 for Llama/Mistral/Qwen3, when the model is neither
  MoE nor quantized (``_is_default_v2_model_runner_model``);
* 0.24.0: V2 for the listed architectures (``DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES``);
* 0.25.0–0.28.0: V2 for the listed architectures and every model that is not MoE (from 0.27.0
  not for a hybrid model outside the list, nor an attention-free one);
* from 0.29.0: V2 (unless a feature it lacks is on).

The V2 runner's ``_dummy_sampler_run`` (``vllm/v1/worker/gpu/model_runner.py``) samples with
a dummy batch whose sampling states are the defaults (top-k = vocabulary, top-p = 1,
temperature 0): ``Sampler.sample`` applies no top-k/top-p and ``gumbel_sample`` keeps per-block
maxima only, so the sampler adds nothing beyond the logits tensor itself. Its
``profile_cudagraph_memory`` returns 0 before 0.29.0: no CUDA-graph estimate is subtracted. Its
sampler keeps ``PenaltiesState.output_bin_counts``, an int32 [max_num_seqs, vocabulary] tensor
allocated with the model runner, so after the start-up snapshot (``v1/worker/gpu/sample/
penalties.py``, 0.22.0–0.33.0): 4 B per sequence × vocabulary entry of persistent memory.

V1 top-k/top-p (``TopKTopPSampler.__init__`` in ``vllm/v1/sample/ops/topk_topp_sampler.py``),
run on the dummy metadata of ``_dummy_sampler_run`` (top-k = vocabulary − 1, top-p 0.9):

* 0.9.0–0.11.0: FlashInfer's when the ``flashinfer`` package is installed (the wheel lists it
  as the ``flashinfer`` extra only; the project's container image installs it) unless
  ``VLLM_USE_FLASHINFER_SAMPLER=0``; 0.8.x only with a FlashInfer older than 0.2.3;
* 0.11.1–0.20.x: FlashInfer's only with ``VLLM_USE_FLASHINFER_SAMPLER=1``;
* from 0.21.0 (the variable defaults to 1): FlashInfer's on CUDA GPUs whose capability
  ``FlashInferBackend.supports_compute_capability`` accepts (7.5–12.1; 8.0–12.1 from 0.25.0);
* otherwise PyTorch's: a sort of the logits before 0.17.0, from 0.17.0 a Triton kernel for 8
  rows or more (``apply_top_k_top_p``).

Every path logs "Using FlashInfer for top-p & top-k sampling." when it takes FlashInfer's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

# compute capabilities vLLM treats as sharing system memory with the CPU (Orin, Thor, Spark:
# ``shared_sysmem_device_mem_sms`` in vllm/utils/mem_utils.py MemorySnapshot.measure, 0.13.0;
# ``is_integrated_gpu`` later): there the free memory it profiles with is the system's
# (psutil's MemAvailable), so host allocations during the profile count as non-torch memory
UNIFIED_MEMORY_CAPABILITIES = (87, 110, 121)

# sampler paths
SORT, TRITON, FLASHINFER, LOGITS_ONLY = "sort", "triton", "flashinfer", "logits-only"
CALIBRATED_PATHS = (SORT, TRITON)

_V2_ARCHS: tuple[tuple[str, frozenset[str]], ...] = (
    # (first release, DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES of vllm/config/vllm.py)
    ("0.22.0", frozenset({"Qwen3ForCausalLM"})),
    ("0.23.0", frozenset({"LlamaForCausalLM", "MistralForCausalLM", "Qwen3ForCausalLM"})),
    (
        "0.24.0",
        frozenset(
            {
                "Qwen3ForCausalLM",
                "DeepseekV2ForCausalLM",
                "Qwen2MoeForCausalLM",
                "GraniteMoeForCausalLM",
                "LlamaForCausalLM",
                "MistralForCausalLM",
            }
        ),
    ),
    (
        "0.25.0",
        frozenset({"DeepseekV2ForCausalLM", "Qwen2MoeForCausalLM", "GraniteMoeForCausalLM"}),
    ),
    (
        "0.26.0",
        frozenset(
            {
                "DeepseekV2ForCausalLM",
                "GraniteMoeForCausalLM",
                "InklingForCausalLM",
                "InklingForConditionalGeneration",
                "LongcatFlashNgramForCausalLM",
                "Qwen2MoeForCausalLM",
            }
        ),
    ),
    (
        "0.27.0",
        frozenset(
            {
                "DeepseekV2ForCausalLM",
                "GraniteMoeForCausalLM",
                "InklingForCausalLM",
                "InklingForConditionalGeneration",
                "KimiK3ForConditionalGeneration",
                "LongcatFlashNgramForCausalLM",
                "Qwen2MoeForCausalLM",
            }
        ),
    ),
)
_AMD = re.compile(r"\b(AMD|Radeon|Instinct|MI\d{3})", re.IGNORECASE)


def _version(version: str | None) -> Version:
    try:
        return Version(str(version).split("+")[0]) if version else Version("0.33.0")
    except InvalidVersion:
        return Version("0.33.0")


def _flag(value: object) -> bool | None:
    """An environment variable as vLLM's ``bool(int(...))`` reads it; None when unset."""
    if value is None or str(value).strip() == "":
        return None
    try:
        return bool(int(str(value).strip()))
    except ValueError:
        return None


@dataclass(frozen=True)
class ModelTraits:
    architectures: tuple[str, ...] = ()
    moe: bool = False
    quantized: bool = False
    hybrid: bool = False


def uses_v2_runner(version: str | None, model: ModelTraits, env: object = None) -> tuple[bool, str]:
    """Whether the release runs this model on the V2 model runner, and why."""
    forced = _flag(env)
    if forced is not None:
        return forced, f"VLLM_USE_V2_MODEL_RUNNER={int(forced)}"
    v = _version(version)
    if v < Version("0.22.0"):
        return False, f"{v}: the V1 model runner (V2 only with VLLM_USE_V2_MODEL_RUNNER=1)"
    if v >= Version("0.29.0"):
        return True, f"{v}: the V2 model runner by default"
    archs: frozenset[str] = frozenset()
    for first, listed in _V2_ARCHS:
        if v >= Version(first):
            archs = listed
    listed_arch = any(a in archs for a in model.architectures)
    if v < Version("0.24.0"):
        v2 = listed_arch and not model.moe and not model.quantized
        why = "a listed architecture, neither MoE nor quantized"
    elif v < Version("0.25.0"):
        v2, why = listed_arch, "a listed architecture"
    else:
        v2 = listed_arch or not model.moe
        why = "a listed architecture or not MoE"
        if v >= Version("0.27.0") and model.hybrid and not listed_arch:
            v2, why = False, "a hybrid model outside the list"
    runner = "V2" if v2 else "V1"
    return v2, (
        f"{v}: the {runner} model runner ({why}: {'yes' if v2 else 'no'}; "
        "config/vllm.py _is_default_v2_model_runner_model)"
    )


def sampler_path(
    version: str | None,
    *,
    v2: bool,
    capability: int | None,
    gpu_names: list[str],
    env: object = None,
    flashinfer_installed: bool | None = None,
) -> tuple[str, str]:
    """The top-k/top-p path of the profile's dummy sampler run, and why.

    ``flashinfer_installed``: whether the ``flashinfer`` package is there (an installed-package
    fact, or a start-up log that says "Using FlashInfer for top-p & top-k sampling"); it only
    decides 0.9.0–0.11.0, where the wheel does not require it."""
    v = _version(version)
    if v2:
        return LOGITS_ONLY, (
            "the V2 runner's dummy sampler run applies no top-k/top-p (default sampling "
            "states; v1/worker/gpu/sample/sampler.py): the logits alone"
        )
    native = SORT if v < Version("0.17.0") else TRITON
    native_how = (
        "PyTorch's top-k/top-p sorts the logits"
        if native == SORT
        else "the Triton top-k/top-p kernel (8 rows or more)"
    )
    flag = _flag(env)
    rocm = any(_AMD.search(str(n)) for n in gpu_names)
    if flag is False:
        return native, f"VLLM_USE_FLASHINFER_SAMPLER=0: {native_how}"
    if rocm:
        return native, f"not CUDA (ROCm): {native_how}"
    if v >= Version("0.21.0"):
        low = 80 if v >= Version("0.25.0") else 75
        if capability is not None and low <= capability <= 121:
            return FLASHINFER, (
                f"{v}: FlashInfer's top-k/top-p by default on compute capability "
                f"{capability / 10:g} (VLLM_USE_FLASHINFER_SAMPLER defaults to 1)"
            )
        if capability is None:
            return native, f"the GPU's compute capability is not known: {native_how} assumed"
        return native, (
            f"compute capability {capability / 10:g} outside FlashInfer's {low / 10:g}–12.1: "
            f"{native_how}"
        )
    if v >= Version("0.11.1"):
        if flag:
            return FLASHINFER, "VLLM_USE_FLASHINFER_SAMPLER=1: FlashInfer's top-k/top-p"
        return native, f"{v}: FlashInfer's sampler is opt-in (unset): {native_how}"
    if v >= Version("0.9.0") and flashinfer_installed:
        return FLASHINFER, f"{v} with flashinfer installed: FlashInfer's top-k/top-p"
    if v >= Version("0.9.0"):
        return native, (
            f"{v}: FlashInfer's top-k/top-p only when flashinfer is installed (not known to "
            f"be): {native_how}"
        )
    if flashinfer_installed:
        return FLASHINFER, "the log says FlashInfer's top-k/top-p runs"
    return native, f"{v}: {native_how}"


def sampler_bytes_per_entry(path: str, logits_bytes: float) -> float | None:
    """The dummy sampler run's peak in bytes per (sequence × vocabulary entry) where the source
    gives it; None for the calibrated paths (sort, Triton).

    FlashInfer (V1 ``Sampler.forward`` then flashinfer's ``top_k_top_p_sampling_from_logits``
    with a tensor top-k, 0.2.11 and 0.6.x alike): the model-dtype logits, their float32 copy
    (``logits.to(torch.float32)``, none when they are float32 already), the top-k masked copy
    (``top_k_mask_logits``) and ``torch.softmax`` of it, all live at once. The V2 runner's
    (logits only): the logits tensor."""
    if path == FLASHINFER:
        return logits_bytes + (0 if logits_bytes == 4 else 4) + 4 + 4
    if path == LOGITS_ONLY:
        return logits_bytes
    return None


def persistent_bytes_per_entry(v2: bool) -> float:
    """Sampler state the model runner keeps per (sequence × vocabulary entry), counted in the
    profile's non-KV memory: the V2 runner's ``output_bin_counts`` (int32), none in V1."""
    return 4.0 if v2 else 0.0


# CacheConfig.gpu_memory_utilization's default (vllm/config/cache.py): up to 0.19.1, from 0.20.0
DEFAULT_UTILIZATIONS = (0.9, 0.92)


def default_utilization(version: str | None) -> float:
    """The release's default --gpu-memory-utilization (the newest's when unknown)."""
    return DEFAULT_UTILIZATIONS[1 if _version(version) >= Version("0.20.0") else 0]


# VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS in vllm/envs.py: (first release, default); absent
# before 0.18.0, read in gpu_worker.py determine_available_memory
_GRAPH_ESTIMATE_DEFAULTS = (("0.18.0", False), ("0.20.0", True))


def graph_estimate_subtracted(
    version: str | None, *, v2: bool, eager: bool, env: object = None
) -> tuple[bool, str]:
    """Whether the release subtracts a CUDA-graph estimate before sizing the KV cache;
    ``env``: VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS as the serve environment sets it."""
    v = _version(version)
    if eager:
        return False, "--enforce-eager: no CUDA graphs"
    default = None
    for first, on in _GRAPH_ESTIMATE_DEFAULTS:
        if v >= Version(first):
            default = on
    if default is None:
        return False, (
            f"{v}: no VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS (from 0.18.0): graphs are "
            "captured after the KV cache"
        )
    flag = _flag(env)
    on = default if flag is None else flag
    how = (
        f"{v}: VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS={int(flag)}"
        if flag is not None
        else f"{v}: VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS unset (defaults to {int(default)})"
    )
    if not on:
        return False, f"{how}: graphs are captured after the KV cache"
    if v2 and v < Version("0.29.0"):
        return (
            False,
            f"{how}, but the V2 model runner's profile_cudagraph_memory returns 0 (before 0.29.0)",
        )
    return True, f"{how}: the CUDA-graph estimate is subtracted"
