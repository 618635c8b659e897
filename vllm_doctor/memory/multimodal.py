"""What a multimodal model's profile run adds to the activation peak: the dummy encoder outputs
it holds, or the vision tower's forward over them where that is larger.

vLLM's V1 ``GPUModelRunner.profile_run`` (v1/worker/gpu_model_runner.py, 0.8.0-0.33.0) first runs
the multimodal encoder on a dummy batch and keeps its outputs in the encoder cache
(``encoder_cache["tmp"]``, from 0.13.0 ``encoder_cache[f"tmp_{i}"]``) while the language model's
dummy run over ``max_num_batched_tokens`` and the sampler run; the cache is cleared only after
both. The outputs therefore sit on top of the text-only peak:

    held = items × rows per item × embedding width × dtype bytes

* the budget (``compute_mm_encoder_budget`` in v1/core/encoder_cache_manager.py): max(
  ``max_num_batched_tokens``, the largest item's tokens); vLLM prints it ("Encoder cache will
  be initialized with a budget of B tokens, and profiled with K <modality> items");
* items (``MultiModalBudget.get_max_items`` in v1/worker/utils.py): max(1, min(budget //
  tokens per item, max_num_seqs × max(1, min(limit per prompt, max_model_len // tokens per
  item))));
* rows per item: the item's tokens; 0.11.0-0.12.0 widen each output below the budget to
  ``encoder_budget`` rows (``new_zeros((encoder_budget, hidden))`` in ``profile_run``);
* the embedding width: the language model's hidden size, times (1 + the DeepStack levels) for
  Qwen3-VL, whose vision tower concatenates its DeepStack features to the output
  (``Qwen3_VisionTransformer``: ``out_hidden_size * (1 + len(deepstack_visual_indexes))``,
  model_executor/models/qwen3_vl.py, 0.11.0-).

Before that the encoder's own forward peaks over the dummy batch: per patch (budget tokens ×
``spatial_merge_size``², the tokens the tower sees) its pixels as the processor returns them
(float32) and their model-dtype copy (``_process_image_input``/``_process_video_input`` cast
them), and in a block's MLP the residual stream and its norm beside the MLP's up projection
and activation (``forward_bytes_per_patch``), split over TP as the tower's linears are. The
profile's peak is the larger of that forward and the text peak plus the held outputs. A long
dummy video makes the forward the peak (tens of GiB for Qwen2.5-VL). 0.11.0-0.12.0 budget a
Qwen3-VL video at 12.5 × its vision tokens (``get_max_video_tokens``: the timestamp text each
token becomes), so the tower sees a twelfth of the budget there. This term is derived, not
fitted: no log in the corpus prints an encoder-bound profile with an attributable source yet.

The tokens of one item come from the processor, not config.json: from the log's budget line
when a start-up log is given (exact), from ``--mm-processor-kwargs`` ``max_pixels`` for the
Qwen-VL family (``max_pixels / (patch_size × spatial_merge_size)²``), else the budget is taken
as ``max_num_batched_tokens`` — a floor: an item larger than that raises it. The encoder's own
forward is transient and, on the logs seen, below this held memory plus the text peak.

Nothing is added with ``--skip-mm-profiling`` (0.10.1-) or when ``--limit-mm-per-prompt`` sets
every modality to 0 (vLLM then leaves the encoder cache uninitialized: ``compute_mm_encoder_budget``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from packaging.version import InvalidVersion, Version

from vllm_doctor.memory.weights import vision_mlp_gated

GIB = 1024**3
# Qwen2-VL, Qwen2.5-VL, Qwen3-VL (dense and MoE): tokens per image = pixels / (patch × merge)²
_QWEN_VL = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe")


@dataclass(frozen=True)
class EncoderProfile:
    held_gib: float  # the dummy outputs kept through the LM's dummy run
    forward_gib: float  # the vision tower's own peak while it encodes them
    how: str

    def peak(self, text_gib: float) -> float:
        """The profile's activation peak given the text-only one."""
        return max(text_gib + self.held_gib, self.forward_gib)


def is_multimodal(cfg: dict[str, Any]) -> bool:
    return isinstance(cfg.get("vision_config"), dict)


def embedding_width(cfg: dict[str, Any], hidden: int) -> int:
    """The width of one encoder output row: the LM's hidden size, Qwen3-VL's DeepStack levels
    concatenated to it."""
    vision = cfg.get("vision_config") or {}
    levels = vision.get("deepstack_visual_indexes") if isinstance(vision, dict) else None
    return hidden * (1 + (len(levels) if isinstance(levels, list) else 0))


def widens_to_budget(version: str | None) -> bool:
    """0.11.0-0.12.0 widen each dummy output below the budget to the budget's rows."""
    try:
        v = Version(str(version).split("+")[0]) if version else None
    except InvalidVersion:
        return False
    return v is not None and Version("0.11.0") <= v < Version("0.13.0")


def limits_all_zero(text: str | None, cfg: dict[str, Any] | None = None) -> bool:
    """``--limit-mm-per-prompt`` as JSON setting every modality the model may take to 0 (or
    {"count": 0}). A modality the JSON leaves out keeps its default limit, and which ones a
    model takes is in its processor, not config.json: image and video count as possible for a
    vision tower, audio for an ``audio_config`` (so ``{"image": 0}`` alone keeps the profile;
    gemma-4 at ``{"image": 0, "audio": 0}`` still profiles video)."""
    if not text:
        return False
    try:
        limits = json.loads(text)
    except ValueError:
        return False
    if not isinstance(limits, dict) or not limits:
        return False
    needed = {"image", "video"}
    if isinstance((cfg or {}).get("audio_config"), dict):
        needed.add("audio")
    counts = [v.get("count", 1) if isinstance(v, dict) else v for v in limits.values()]
    zero = all(isinstance(c, int) and c == 0 for c in counts)
    return zero and needed <= set(limits)


def limit_per_prompt(text: str | None) -> int:
    """The largest per-prompt limit ``--limit-mm-per-prompt`` sets (vLLM's default: 1)."""
    try:
        limits = json.loads(text) if text else {}
    except ValueError:
        return 1
    if not isinstance(limits, dict) or not limits:
        return 1
    counts = [v.get("count", 1) if isinstance(v, dict) else v for v in limits.values()]
    return max((c for c in counts if isinstance(c, int)), default=1)


def tokens_per_image(cfg: dict[str, Any], processor_kwargs: str | None) -> int | None:
    """One image's tokens from ``--mm-processor-kwargs`` ``max_pixels``, for the Qwen-VL
    family (its processor resizes to at most max_pixels, one token per merged patch)."""
    if str(cfg.get("model_type")) not in _QWEN_VL or not processor_kwargs:
        return None
    try:
        kwargs = json.loads(processor_kwargs)
    except ValueError:
        return None
    pixels = kwargs.get("max_pixels") if isinstance(kwargs, dict) else None
    vision = cfg.get("vision_config") or {}
    patch = int(vision.get("patch_size") or 14)
    merge = int(vision.get("spatial_merge_size") or 2)
    if not isinstance(pixels, int) or pixels <= 0:
        return None
    return max(1, pixels // (patch * merge) ** 2)


def _qwen3_vl_video_formatting(
    cfg: dict[str, Any], modality: str | None, version: str | None
) -> bool:
    """0.11.0-0.12.0 budget a Qwen3-VL video at 12.5 × its vision tokens (the timestamp text each
    token becomes: ``get_max_video_tokens`` in model_executor/models/qwen3_vl.py); the encoder
    sees the vision tokens only."""
    return (
        modality == "video"
        and str(cfg.get("model_type")) in ("qwen3_vl", "qwen3_vl_moe")
        and widens_to_budget(version)
    )


def forward_bytes_per_patch(cfg: dict[str, Any], dtype_bytes: float, tp: int) -> float:
    """What one patch holds at the vision tower's peak: its pixels as the processor gives them
    (float32) and their model-dtype copy, and in a block's MLP the residual stream and its norm
    (2 × hidden) beside the MLP's up projection and activation (gated: 2 × intermediate and
    intermediate; plain: intermediate twice), split over TP (Column/RowParallelLinear)."""
    vision = cfg.get("vision_config") or {}
    hidden = int(vision.get("hidden_size") or vision.get("embed_dim") or 0)
    inter = int(vision.get("intermediate_size") or 4 * hidden)
    gated = vision_mlp_gated(vision)
    channels = int(vision.get("in_channels") or vision.get("in_chans") or 3)
    pixels = (
        channels
        * int(vision.get("temporal_patch_size") or 1)
        * int(vision.get("patch_size") or 14) ** 2
    )
    mlp = (3 if gated else 2) * inter / max(tp, 1)
    return pixels * (4 + dtype_bytes) + (2 * hidden + mlp) * dtype_bytes


def encoder_profile(
    cfg: dict[str, Any],
    *,
    hidden: int,
    dtype_bytes: float,
    batched: int,
    seqs: int,
    max_model_len: int,
    version: str | None,
    tp: int = 1,
    limits: str | None = None,
    processor_kwargs: str | None = None,
    printed_budget: tuple[int, int] | None = None,
    modality: str | None = None,
) -> EncoderProfile | None:
    """The multimodal profile's encoder memory, or None for a text-only model.

    ``printed_budget``: (budget tokens, items) from the start-up log's budget line, with the
    ``modality`` it profiled."""
    if not is_multimodal(cfg):
        return None
    if limits_all_zero(limits, cfg):
        return EncoderProfile(0.0, 0.0, "--limit-mm-per-prompt disables every modality: no profile")
    width = embedding_width(cfg, hidden)
    widen = widens_to_budget(version)
    if printed_budget:
        budget, items = printed_budget
        # encoder-limited: the items fill the budget; the widened releases give each a budget
        rows = items * budget if widen else budget
        encoded = budget
        source = f"the log's budget line: {budget} tokens, {items} {modality or ''} item(s)"
        if _qwen3_vl_video_formatting(cfg, modality, version):
            encoded = int(budget / 12.5)
            source += f"; a Qwen3-VL video budgeted at 12.5 × its {encoded} vision tokens"
    else:
        per_item = tokens_per_image(cfg, processor_kwargs)
        budget = max(batched, per_item or 0)
        if per_item:
            per_prompt = max(1, min(limit_per_prompt(limits), max_model_len // per_item))
            items = max(1, min(budget // per_item, seqs * per_prompt))
            rows = items * (budget if widen else per_item)
            encoded = items * per_item
            source = (
                f"{per_item} tokens per image (--mm-processor-kwargs max_pixels), budget "
                f"max({batched} batched tokens, {per_item}) = {budget}, {items} item(s)"
            )
        else:
            rows = encoded = budget
            source = (
                f"budget {budget} tokens (max_num_batched_tokens; an item larger than that, "
                "as the log's 'Encoder cache will be initialized with a budget' line shows, "
                "raises it)"
            )
    vision = cfg.get("vision_config") or {}
    # patches per token: Qwen-VL's spatial merge, gemma-4's pooling kernel (k × k patches)
    merge = int(vision.get("spatial_merge_size") or vision.get("pooling_kernel_size") or 1)
    patches = encoded * merge * merge
    per_patch = forward_bytes_per_patch(cfg, dtype_bytes, tp)
    held = rows * width * dtype_bytes / GIB
    forward = patches * per_patch / GIB
    how = (
        f"the larger of the dummy encoder outputs held through the LM run ({rows} rows × width "
        f"{width} × {dtype_bytes:g} B = {held:.2f} GiB"
        + ("; each output widened to the budget, 0.11.0-0.12.0" if widen and printed_budget else "")
        + f") on top of the text peak, and the vision tower's forward over {patches} patches × "
        f"{per_patch:.0f} B = {forward:.2f} GiB ({source}; gpu_model_runner.profile_run)"
    )
    return EncoderProfile(held, forward, how)
