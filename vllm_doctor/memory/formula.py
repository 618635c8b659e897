"""The release's memory formula and its calibrated terms: what each vLLM release subtracts
before the KV cache (``formula_for``), the usable memory of each GPU and the terms fitted on
real start-up logs (knowledge/data/gpu_usable_memory.json, memory_calibration.json: the
activation peak, non-torch memory, the CUDA-graph pool, the sampler), and the default batch
sizes of ``vllm serve``. The estimate (memory/estimate.py) applies them."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from vllm_doctor.memory import kv as kvmod
from vllm_doctor.memory import profile as profmod

GIB = 1024**3


DATA = Path(__file__).resolve().parents[1] / "knowledge" / "data"


USABLE_DATA = DATA / "gpu_usable_memory.json"


CALIBRATION_DATA = DATA / "memory_calibration.json"


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


# GB10 (DGX Spark, compute capability 12.1): its ~120 GiB would put it on the 8192/1024 tier,
# but get_batch_defaults (engine/arg_utils.py) keeps it on the small one in every release that
# sizes the defaults by memory (0.8.5 on): up to 0.32.0 NVML reports no memory size for it
# (nvidia-smi: [N/A]), platforms/cuda.py get_device_total_memory raises and the memory reads 0;
# from 0.33.0 that falls back to the device properties, and `is_gb10 =
# current_platform.is_device_capability((12, 1))` excludes it from the large tier by name
_SMALL_TIER_GPU = re.compile(r"\bGB10\b")


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
