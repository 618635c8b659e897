"""The weights one GPU holds, in bytes, as vLLM's "Model loading took X GiB" counts them.

From the checkpoint when its size is known (the safetensors index's ``total_size`` or the
headers, local or from the Hub): that size split over TP × PP. Otherwise from config.json:
parameters counted per architecture family, times the bytes per weight of the quantization.

* dense decoder: embeddings (vocabulary × hidden; the LM head again unless
  ``tie_word_embeddings``), per layer q/k/v/o (``hidden × (heads + 2 × KV heads) × head size``
  and back) and the gated MLP (``3 × hidden × intermediate``);
* MoE: every routed expert (``3 × hidden × moe_intermediate``), shared experts and the router;
  the first ``first_k_dense_replace`` layers dense; the routed experts are split over
  TP × DP (``MoeParallel``), everything else over TP only;
* MLA: the low-rank q/kv projections (``q_lora_rank``, ``kv_lora_rank``,
  ``qk_nope/rope_head_dim``, ``v_head_dim``);
* hybrids: each layer's own token mixer (``state_mixer_params``: Gated DeltaNet, Mamba2, Mamba,
  short conv in place of attention; Falcon-H1 both), Nemotron-H's MLP/MoE only on its ``-``/``E``
  layers and its up/down-only (relu2) MLPs; Qwen3-Next/3.5 attention with the output gate;
* a vision tower (``vision_config``): its layers as a ViT (``4 × h²`` attention and the MLP:
  ``2 × h × intermediate``, ``3 ×`` where the tower's MLP is gated, ``hidden_act`` silu, as
  Qwen2.5-VL's ``Qwen2_5_VisionMLP`` gate_up/down and Pixtral's w1/w2/w3), the patch embedding,
  and the Qwen-VL patch merger (``(h·m²)² + h·m² × out_hidden_size``, once more per Qwen3-VL
  DeepStack level: ``deepstack_merger_list``); split over TP like the language model (the towers'
  QKV/MLP are Column/RowParallelLinear with ``disable_tp`` only under ``--mm-encoder-tp-mode
  data``, model_executor/models/qwen2_5_vl.py and qwen3_vl.py, 0.11.0), replicated with it;
* bytes per weight of the linear layers: the checkpoint dtype (2 for bf16/fp16), 1 for FP8
  (plus a scale per channel), AWQ/GPTQ ``bits / 8`` plus a 16-bit scale and a packed zero per
  group of ``group_size``, NVFP4 0.5 + one FP8 scale per 16, MXFP4 0.5 + one E8M0 scale per 32,
  bitsandbytes 4-bit 0.5 + one scale per 64; embeddings and norms stay in the compute dtype.

MXFP4 MoE experts are stored padded to what the release's kernel backend needs
(``Mxfp4MoEMethod.create_weights`` in model_executor/layers/quantization/mxfp4.py, 0.10.1-0.31;
``mxfp4_round_up_hidden_size_and_intermediate_size`` in fused_moe/oracle/mxfp4.py later):
Marlin rounds the intermediate size per TP rank up to 128 and the hidden size to 256
(gpt-oss: 2880 → 2944 and 3072). See ``mxfp4_backend`` for when Marlin runs.

Pipeline stages split the layers as vLLM does (``get_pp_indices``: even, the remainder on the
first stages); the embeddings live on the first stage and the LM head on the last, so the
largest stage is reported.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from vllm_doctor.facts.model_config import _int
from vllm_doctor.memory import quant as qmod
from vllm_doctor.memory.kv import DTYPE_BYTES, dim, layer_kinds, pp_partitions, state_geometry


@dataclass(frozen=True)
class WeightEstimate:
    bytes_per_gpu: int
    how: str
    # values the count took that config.json does not state (a figure that rests on them
    # is shown with them and decides nothing)
    assumptions: tuple[str, ...] = ()
    params: int = 0  # the parameters counted (0: from the checkpoint's size)


@dataclass(frozen=True)
class MoeParallel:
    """How the routed experts spread over the GPUs, as ``FusedMoEParallelConfig.make`` builds it
    (fused_moe/layer.py 0.9.0, fused_moe/config.py 0.10.0-0.33.0; ``FusedMoE.__init__`` 0.8.x):
    the MoE layer flattens TP across DP (``flatten_tp_across_dp``), and from 0.12.0 across the
    prefill-context-parallel ranks too (``flatten_tp_across_dp_and_pcp``: TP × DP × PCP ranks,
    "PCP serves the same function as DP here"), so without ``--enable-expert-parallel`` every
    expert's intermediate size is sharded over those ranks, and with it each of the EP ranks
    holds whole experts (``determine_expert_map``: the physical experts, the logical ones plus
    EPLB's ``num_redundant_experts``, split evenly). Attention, dense MLPs, shared experts and
    embeddings stay split over TP and are replicated on every DP and PCP rank; either way a
    GPU holds 1 / (TP × DP × PCP) of the routed experts' weights (plus its redundant experts
    under EPLB). Decode context parallelism reuses the TP ranks and splits nothing more."""

    dp: int = 1
    expert_parallel: bool = False
    redundant_experts: int = 0
    pcp: int = 1  # prefill-context-parallel ranks the experts are flattened over

    def _ranks(self, tp: int) -> tuple[int, str]:
        shown = f"TP {tp} × DP {self.dp}" + (f" × PCP {self.pcp}" if self.pcp > 1 else "")
        return tp * self.dp * self.pcp, shown

    def split(self, experts: int, tp: int) -> tuple[float, int, int, str]:
        """(the share of the routed experts' weights one GPU holds, the TP the experts are
        sharded over, the experts one GPU holds, how)."""
        ranks, shown = self._ranks(tp)
        if self.expert_parallel and ranks > 1:
            physical = experts + self.redundant_experts
            local = -(-physical // ranks)  # the largest rank's (an uneven split is rare)
            extra = (
                f" ({experts} + {self.redundant_experts} redundant)"
                if self.redundant_experts
                else ""
            )
            return (
                local / experts,
                1,
                local,
                f"{local} whole experts per GPU: {physical}{extra} over EP = {shown}",
            )
        how = f"experts sharded over {shown}" if ranks > tp else ""
        return 1 / ranks, ranks, experts, how

    def describe(self, tp: int) -> str:
        ranks, shown = self._ranks(tp)
        if self.expert_parallel and ranks > 1:
            extra = f" + {self.redundant_experts} redundant" if self.redundant_experts else ""
            return f"as whole experts{extra} over EP = {shown}"
        return f"sharded over {shown}"


NO_MOE_SPLIT = MoeParallel()  # one DP rank: the experts split over TP as the rest


def routed_experts(text: dict[str, Any]) -> int:
    """The routed experts of each MoE layer, 0 for a dense model."""
    return (
        _int(
            text.get("n_routed_experts") or text.get("num_experts") or text.get("num_local_experts")
        )
        or 0
    )


def round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def mxfp4_backend(capability: int | None, version: str | None) -> tuple[str | None, str]:
    """The MXFP4 MoE backend a release picks on this GPU by default, and why; None where the
    release's choice is not derivable from the GPU and release alone.

    Below compute capability 9.0 every release (0.10.1-0.33.0) runs MXFP4 MoE on Marlin: the
    Triton (triton_kernels) and FlashInfer MXFP4 kernels are for SM90/SM100 only. On SM90,
    releases up to 0.11.2 fall back to Marlin when ``triton_kernels`` cannot be imported
    (``_should_use_marlin``), and their wheels neither require nor vendor it; from 0.12.0 the
    wheel vendors it (vllm/third_party/triton_kernels) and the Triton backend runs."""
    if capability is None:
        return None, "the GPU's compute capability is not known"
    if not version:
        return None, "the release is not known"
    if capability < 90:
        return "marlin", (
            f"compute capability {capability / 10:g} < 9.0: Marlin "
            "(the Triton/FlashInfer MXFP4 kernels need SM90/SM100)"
        )
    if capability == 90 and version:
        from packaging.version import InvalidVersion, Version

        try:
            v = Version(version.split("+")[0])
        except InvalidVersion:
            return None, f"release {version} not understood"
        if v < Version("0.12.0"):
            return "marlin", (
                f"SM90 under {version}: triton_kernels is not in the wheel, "
                "so _should_use_marlin falls back to Marlin"
            )
        return "triton", (
            f"SM90 under {version}: the wheel vendors triton_kernels, so the Triton backend runs"
        )
    return None, f"compute capability {capability / 10:g}: the backend is not modelled"


# vision towers whose MLP is gated (gate, up and down projections) with a non-SiLU activation:
# gemma-4's, which vLLM runs as transformers' Gemma4VisionModel (gemma4_mm.py, 0.26.0)
_GATED_VISION_TYPES = ("gemma4_vision",)


def vision_mlp_gated(vision: dict[str, Any]) -> bool:
    """A gated vision MLP: SiLU towers (Qwen2.5-VL's Qwen2_5_VisionMLP gate_up/down, Pixtral's
    w1/w2/w3) and the types listed above; the others (Qwen2-VL, Qwen3-VL, SigLIP) are plain."""
    act = str(vision.get("hidden_act") or vision.get("hidden_activation") or "").lower()
    return act == "silu" or str(vision.get("model_type")) in _GATED_VISION_TYPES


def fp8_runs_on_marlin(capability: int | None, version: str | None) -> bool:
    """Whether FP8 checkpoints run weight-only on Marlin: GPUs below compute capability 8.9
    have no FP8 compute (``Fp8LinearMethod``: ``not has_device_capability(89)``; the FP8 MoE
    picks MARLIN there), and block-quantized layers are converted from 0.9.0 (the block-wise →
    group-wise path of ``marlin_utils_fp8``)."""
    from packaging.version import InvalidVersion, Version

    if capability is None or capability >= 89 or not version:
        return False
    try:
        return Version(str(version).split("+")[0]) >= Version("0.9.0")
    except InvalidVersion:
        return False


def triton_keeps_loaded_scales(version: str | None) -> bool:
    """Whether the release's MXFP4 Triton backend keeps the loaded block scales beside their
    swizzled copy: ``process_weights_after_loading`` (quantization/mxfp4.py, then
    fused_moe/oracle/mxfp4.py ``convert_to_mxfp4_moe_kernel_format``) deletes the loaded
    ``w13_weight``/``w2_weight`` only, 0.12.0–0.24.x; 0.25.0 deletes ``w13_weight_scale`` and
    ``w2_weight_scale`` too ("drop the now-dead weight/scale Parameters")."""
    from packaging.version import InvalidVersion, Version

    try:
        v = Version(str(version).split("+")[0])
    except InvalidVersion:
        return False
    return Version("0.12.0") <= v < Version("0.25.0")


def hopper_swizzled_scale_bytes(experts: int, hidden: int, inter_rank: int) -> int:
    """One MoE layer's MXFP4 block scales per GPU in triton_kernels' Hopper layout
    (``HopperMXScaleLayout.swizzle_data`` with num_warps 8, vllm/third_party/triton_kernels):
    each expert's [N, K / 32] scale matrix padded to N % 256 == 0 and (K / 32) % 2 == 0, for
    w13 (N = 2 × intermediate, K = hidden) and w2 (N = hidden, K = intermediate), the
    intermediate per TP rank padded to 64 as Mxfp4MoEMethod does for this backend."""
    inter = round_up(inter_rank, 64)
    w13 = round_up(2 * inter, 256) * round_up(-(-hidden // 32), 2)
    w2 = round_up(hidden, 256) * round_up(-(-inter // 32), 2)
    return experts * (w13 + w2)


def _vision_assumption(cfg: dict[str, Any]) -> str | None:
    """What _vision_params assumes of the tower that its config does not state."""
    vision = cfg.get("vision_config")
    if not isinstance(vision, dict) or _int(vision.get("intermediate_size")):
        return None
    hidden = _int(vision.get("hidden_size") or vision.get("embed_dim") or vision.get("width"))
    return (
        f"vision_config has no intermediate_size: 4 × its hidden size ({4 * hidden}) assumed"
        if hidden
        else None
    )


def _vision_params(cfg: dict[str, Any]) -> int:
    vision = cfg.get("vision_config")
    if not isinstance(vision, dict):
        return 0
    hidden = _int(vision.get("hidden_size") or vision.get("embed_dim") or vision.get("width"))
    layers = _int(vision.get("num_hidden_layers") or vision.get("depth") or vision.get("layers"))
    inter = _int(vision.get("intermediate_size")) or (4 * hidden if hidden else None)
    if not (hidden and layers and inter):
        return 0
    gated = vision_mlp_gated(vision)
    blocks = layers * (4 * hidden * hidden + (3 if gated else 2) * hidden * inter)
    patch = _int(vision.get("patch_size")) or 0
    channels = _int(
        vision.get("in_channels") or vision.get("in_chans") or vision.get("num_channels")
    )
    embed = (channels or 3) * (_int(vision.get("temporal_patch_size")) or 1) * patch**2 * hidden
    embed += (_int(vision.get("num_position_embeddings")) or 0) * hidden
    merge = _int(vision.get("spatial_merge_size"))
    out = _int(vision.get("out_hidden_size"))
    merger = 0
    if merge and out:
        merged = hidden * merge * merge
        levels = vision.get("deepstack_visual_indexes")
        merger = (merged * merged + merged * out) * (
            1 + (len(levels) if isinstance(levels, list) else 0)
        )
    return blocks + embed + merger


def state_mixer_params(text: dict[str, Any], hidden: int) -> tuple[int, str] | None:
    """Parameters of one Mamba / linear-attention token mixer, as vLLM builds its layers:
    Gated DeltaNet (qwen3_next.py / qwen3_5.py: in_proj_qkvz 2·key + 2·value, in_proj_ba
    2·value heads, the conv over 2·key + value, out_proj value × hidden), Mamba2
    (mamba_mixer2.py: in_proj hidden × (2·inner + 2·groups·state + heads), conv1d over
    inner + 2·groups·state, out_proj, A/D/dt_bias), Mamba1 (mamba_mixer.py: in_proj 2·inner,
    x_proj dt_rank + 2·state, dt_proj, A inner × state) and LFM2's short conv (short_conv.py:
    in_proj 3·hidden, out_proj); None where the config names none of them (Kimi's KDA)."""
    geo = state_geometry(text)
    if geo is None or geo.kind == "KDA":
        return None
    if geo.kind == "Gated DeltaNet":
        key, value = geo.key_heads * geo.key_dim, geo.heads * geo.head_dim
        params = (
            hidden * (2 * key + 2 * value + 2 * geo.heads) + (2 * key + value) * geo.conv_kernel
        )
        return params + value * hidden + 2 * geo.heads + geo.head_dim, geo.kind
    if geo.kind == "Mamba2":
        inner, heads = geo.inner, geo.heads
        conv_dim = inner + 2 * geo.groups * geo.d_state
        params = hidden * (inner + conv_dim + heads) + conv_dim * (geo.conv_kernel + 1)
        return params + inner * hidden + 3 * heads + inner, geo.kind
    if geo.kind == "Mamba":
        inner, d_state = geo.inner, geo.d_state
        rank = geo.dt_rank or -(-hidden // 16)
        params = hidden * 2 * inner + inner * (geo.conv_kernel + 1) + inner * (rank + 2 * d_state)
        return params + rank * inner + inner * (d_state + 2) + inner * hidden, geo.kind
    cache = geo.conv_kernel  # short conv
    return hidden * 3 * hidden + hidden * cache + hidden * hidden, geo.kind


def _layer_mix(
    text: dict[str, Any], layers: int, hidden: int, attn: int
) -> tuple[int, int, str] | None:
    """(token-mixer parameters over all layers, layers with an MLP, how) for hybrid models,
    None for attention-only ones (every layer: attention + MLP)."""
    kinds = layer_kinds(text, layers)
    if "state" not in kinds:
        return None
    state = state_mixer_params(text, hidden)
    if state is None:
        return None
    mixers = sum(state[0] if kind == "state" else attn if kind != "none" else 0 for kind in kinds)
    pattern = hybrid_pattern(text)
    # Nemotron-H: a layer is a mixer (M, *) or an MLP (-) / MoE (E), never both
    mlp_layers = sum(c in "-E" for c in pattern) if pattern is not None else layers
    n_state = kinds.count("state")
    return mixers, mlp_layers, f"{n_state} {state[1]} mixers of {state[0] / 1e6:.1f} M"


# Nemotron-H's layer kinds as hybrid_override_pattern letters: configs written by transformers 5
# list them as words (layers_block_type) instead of the pattern string
_BLOCK_LETTERS = {"mamba": "M", "attention": "*", "mlp": "-", "moe": "E"}


def hybrid_pattern(text: dict[str, Any]) -> str | None:
    """Nemotron-H's layer pattern (M mamba, * attention, - MLP, E MoE: a layer is a mixer or
    an MLP, never both): ``hybrid_override_pattern``, else ``layers_block_type`` where its
    words are those kinds and name an MLP or MoE layer; None for other models."""
    pattern = text.get("hybrid_override_pattern")
    if isinstance(pattern, str) and pattern:
        return pattern
    kinds = text.get("layers_block_type")
    if not isinstance(kinds, list) or not kinds:
        return None
    words = [str(kind).lower() for kind in kinds]
    if not all(word in _BLOCK_LETTERS for word in words) or not {"mlp", "moe"} & set(words):
        return None
    return "".join(_BLOCK_LETTERS[word] for word in words)


# model types whose MoE layers keep a dense MLP beside the routed experts (gemma4.py: Gemma4MLP
# of intermediate_size and, with num_experts, a FusedMoE block in every decoder layer)
_DENSE_BESIDE_MOE = ("gemma4",)


def _positive(name: str, value: int | None) -> int | None:
    if value is not None and value <= 0:
        raise ValueError(f"{name} {value} in config.json is not a size")
    return value


def from_config(
    cfg: dict[str, Any],
    text: dict[str, Any],
    *,
    tp: int,
    pp: int,
    dtype_bytes: float,
    qcfg: dict[str, Any] | None,
    scheme: str | None,
    online_quant: str | None,
    pp_partition: str | None = None,
    moe_backend: tuple[str | None, str] = (None, ""),
    vision_tp: bool = True,
    version: str | None = None,
    fp8_marlin: bool = False,
    moe: MoeParallel = NO_MOE_SPLIT,
    hf_quant: dict[str, Any] | None = None,
) -> WeightEstimate:
    """Weights per GPU counted from the config (no checkpoint size known); ``vision_tp``:
    the vision tower is split over TP (False: ``--mm-encoder-tp-mode data`` replicates it);
    ``moe``: how the routed experts spread over TP × DP; ``hf_quant``: ModelOpt's
    hf_quant_config.json. ValueError where a size is missing or impossible, or the
    quantization is not understood (memory/quant.py)."""
    hidden = _positive("hidden_size", _int(text.get("hidden_size")))
    layers = _positive("num_hidden_layers", _int(text.get("num_hidden_layers")))
    vocab = _positive("vocab_size", _int(text.get("vocab_size") or cfg.get("vocab_size")))
    heads = _positive("num_attention_heads", _int(text.get("num_attention_heads")))
    if not (hidden and layers and vocab and heads):
        raise ValueError("hidden size, layers, vocabulary or heads missing from config.json")
    assumed: list[str] = []
    kv = _positive("num_key_value_heads", _int(text.get("num_key_value_heads"))) or heads
    head_dim = _positive("head_dim", _int(text.get("head_dim"))) or hidden // heads
    model_type = str(text.get("model_type") or cfg.get("model_type") or "")
    experts = routed_experts(text)
    if experts < 0:
        raise ValueError(f"the expert count {experts} in config.json is not a count")
    pattern = hybrid_pattern(text)
    first_dense = _int(text.get("first_k_dense_replace")) or 0
    dense_beside = bool(experts) and model_type.startswith(_DENSE_BESIDE_MOE)
    # layers with a dense MLP and with an MoE block
    if pattern is not None:  # Nemotron-H: a layer is a mixer (M, *) or an MLP (-) / MoE (E)
        dense_layers, moe_layers = pattern.count("-"), pattern.count("E") if experts else 0
        if not experts:
            dense_layers += pattern.count("E")
    elif experts:
        # Llama 4: an MoE block every interleave_moe_layer_step-th layer (llama4.py
        # is_moe_layer: (layer_idx + 1) % step == 0), a dense MLP on the others
        step = _int(text.get("interleave_moe_layer_step")) or 1
        moe_layers = max(layers - first_dense, 0) // max(step, 1)
        dense_layers = layers - moe_layers + (moe_layers if dense_beside else 0)
    else:
        dense_layers, moe_layers = layers, 0
    inter = _positive("intermediate_size", dim(text.get("intermediate_size")))
    moe_inter = _positive(
        "moe_intermediate_size",
        dim(text.get("moe_intermediate_size") or text.get("expert_intermediate_size")),
    )
    # Llama 4 names the dense MLPs' size intermediate_size_mlp, the experts' intermediate_size
    dense_inter = _positive("intermediate_size_mlp", dim(text.get("intermediate_size_mlp")))
    if dense_inter is not None:
        moe_inter = moe_inter or inter
        inter = dense_inter
    if moe_layers and moe_inter is None:
        if inter is not None and not dense_layers:
            moe_inter = inter  # no dense MLP: intermediate_size is the experts' (Mixtral)
        else:
            moe_inter = 4 * hidden
            assumed.append(
                f"config.json has no moe_intermediate_size: the experts' intermediate size "
                f"taken as 4 × hidden ({moe_inter})"
            )
    if dense_layers and inter is None:
        inter = 4 * hidden
        assumed.append(
            f"config.json has no intermediate_size: 4 × hidden ({inter}) assumed for the MLPs"
        )
    inter = inter or 0
    moe_inter = moe_inter or 0
    lora = _int(text.get("kv_lora_rank"))
    if lora:
        q_lora = _int(text.get("q_lora_rank"))
        mla: dict[str, int] = {}
        for key, default in (
            ("qk_nope_head_dim", 128),
            ("qk_rope_head_dim", 64),
            ("v_head_dim", 128),
        ):
            stated = _positive(key, _int(text.get(key)))
            if stated is None:
                assumed.append(f"config.json has no {key}: {default} assumed (MLA)")
            mla[key] = default if stated is None else stated
        nope, rope, v_dim = mla["qk_nope_head_dim"], mla["qk_rope_head_dim"], mla["v_head_dim"]
        q = (
            (hidden * q_lora + q_lora * heads * (nope + rope))
            if q_lora
            else hidden * heads * (nope + rope)
        )
        attn = q + hidden * (lora + rope) + lora * heads * (nope + v_dim) + heads * v_dim * hidden
        attn_how = "MLA attention"
    else:
        # attn_output_gate: q_proj also yields the output gate; on by default for Qwen3-Next
        # and Qwen3.5 (getattr(config, "attn_output_gate", True) in qwen3_next.py)
        family_gate = model_type.startswith(("qwen3_next", "qwen3_5"))
        q_heads = heads * (2 if text.get("attn_output_gate", family_gate) else 1)
        attn = hidden * (q_heads + 2 * kv) * head_dim + heads * head_dim * hidden
        attn_how = "attention"
    mix = _layer_mix(text, layers, hidden, attn)
    mixers = mix[0] if mix else layers * attn
    if mix:
        attn_how += f" and {mix[2]}"
    # Nemotron-H's MLPs and experts are up/down only (relu2, NemotronHMLP), others gated
    mats = 2 if text.get("mlp_hidden_act") == "relu2" else 3
    counts = qmod.LayerCounts(
        mixer=sum(kind != "none" for kind in layer_kinds(text, layers)) or layers,
        mlp=dense_layers,
        experts=moe_layers,
        layers=layers,
    )
    online = online_quant in ("fp8", "fp8_e4m3", "mxfp4", "bitsandbytes")
    lb = qmod.linear_bytes(
        {"quant_method": online_quant} if online else qcfg,
        None if online else scheme,
        dtype_bytes,
        counts,
        model_type=model_type,
        text=text,
        hf_quant=None if online else hf_quant,
        version=version,
    )
    per, qhow = dict(lb.per), lb.how
    assumed.extend(lb.assumed)
    block = (qcfg or {}).get("weight_block_size") if not online else None
    if fp8_marlin and lb.fp8 and isinstance(block, list) and len(block) == 2:
        # marlin_utils_fp8.prepare_fp8_layer_for_marlin / prepare_fp8_moe_layer_for_marlin
        # (0.9.0-0.33.0): block scales become group scales, one per block_k input values and
        # every output channel, in the model dtype
        block_k = _int(block[1]) or 128
        for kind in qmod.LINEAR:
            if per[kind] == 1.0:
                per[kind] += dtype_bytes / block_k
        qhow += (
            f"; Marlin FP8 (no FP8 on this GPU): the {block[0]}×{block_k} block scales "
            f"expanded to one {dtype_bytes:g}-byte scale per {block_k} weights of each output "
            "channel"
        )
    padding = 0.0  # MoE weights stored beyond their count (Marlin's MXFP4 layout)
    scales_kept = 0  # bytes per GPU (before the PP share) of MXFP4 scales held twice
    routed = shared_total = router = latent_total = 0
    expert_share, moe_tp, split_how = 1 / tp, tp, ""
    # latent MoE: the routed experts run at a smaller width between a down and an up
    # projection (Nemotron-H's moe_latent_size; Kimi K3's routed_expert_hidden_size, its
    # LatentMoE(hidden_size, routed_expert_hidden_size, moe_intermediate_size, ...))
    latent = _positive(
        "moe_latent_size",
        _int(text.get("moe_latent_size") or text.get("routed_expert_hidden_size")),
    )
    expert_hidden = latent or hidden
    if experts and moe_layers:
        expert_share, moe_tp, local_experts, split_how = moe.split(experts, tp)
        # Llama 4's MoE block has one shared expert of the experts' size (Llama4MoE)
        shared = (
            _int(text.get("n_shared_experts"))
            or _int(text.get("num_shared_experts"))  # Kimi Linear / K3
            or (1 if model_type.startswith("llama4") else 0)
        )
        shared_inter = (
            _int(
                text.get("shared_expert_intermediate_size")
                or text.get("shared_intermediate_size")  # Granite 4.0 hybrid
                or text.get("moe_shared_expert_intermediate_size")  # Nemotron-H
            )
            or moe_inter * shared
        )
        # the experts' stored (padded) size over their true one: Marlin's MXFP4 layout
        pad = 1.0
        if lb.mxfp4_moe and moe_backend[0] == "marlin":
            padded_inter = round_up(-(-moe_inter // moe_tp), 128) * moe_tp
            pad = round_up(expert_hidden, 256) * padded_inter / (expert_hidden * moe_inter)
            qhow += (
                f"; experts padded for Marlin to hidden {round_up(expert_hidden, 256)} × "
                f"intermediate {padded_inter // moe_tp} per rank ({moe_backend[1]})"
            )
        elif lb.mxfp4_moe and moe_backend[0] == "triton":
            qhow += f"; experts unpadded ({moe_backend[1]})"
            if triton_keeps_loaded_scales(version):
                kept = hopper_swizzled_scale_bytes(
                    local_experts, expert_hidden, -(-moe_inter // moe_tp)
                )
                scales_kept = moe_layers * kept  # per GPU before the PP share
                qhow += (
                    f"; the loaded block scales stay beside their swizzled copy under {version} "
                    f"(+{kept * moe_layers / 2**30:.2f} GiB per GPU: "
                    "mxfp4 process_weights_after_loading, 0.12.0–0.24.x)"
                )
        elif lb.mxfp4_moe and moe_backend[1]:
            qhow += f"; experts unpadded ({moe_backend[1]})"
        routed = moe_layers * experts * mats * expert_hidden * moe_inter
        padding = routed * (pad - 1)  # stored, not counted
        shared_total = moe_layers * mats * hidden * shared_inter
        router = moe_layers * hidden * experts
        if latent:  # fc1/fc2_latent_proj: ReplicatedLinear, whole on every GPU (nemotron_h.py)
            latent_total = moe_layers * 2 * hidden * latent
        mlp_how = f"{experts} experts × {mats} × {expert_hidden} × {moe_inter}"
        if latent:
            mlp_how += f" (latent MoE: expert width {latent}, projections from {hidden})"
        if split_how:
            mlp_how += f", {split_how}"
        if dense_layers:
            mlp_how += f", {dense_layers} dense MLPs {mats} × {hidden} × {inter}"
    else:
        mlp_how = f"MLP {mats} × {hidden} × {inter}"
    dense_total = dense_layers * mats * hidden * inter
    tied = bool(cfg.get("tie_word_embeddings", text.get("tie_word_embeddings", False)))
    embed = vocab * hidden * (1 if tied else 2)
    vision = _vision_params(cfg)
    if vision and (vision_assumed := _vision_assumption(cfg)):
        assumed.append(vision_assumed)
    # the largest pipeline stage: its share of the layers, plus the embeddings on the first
    parts = pp_partitions(layers, pp, pp_partition)
    stage_layers = max(parts)
    stage = stage_layers / layers
    # the routed experts over TP × DP (MoeParallel), the rest over TP
    routed_gpu = (routed + padding) * expert_share
    linear_bytes = stage * (
        mixers / tp * per["mixer"]
        + dense_total / tp * per["mlp"]
        + shared_total / tp * per["shared"]
        + router / tp * dtype_bytes
        + latent_total * per["shared"]
        + routed_gpu * per["experts"]
    )
    head_gpu = 0 if tied or pp > 1 else vocab * hidden / tp
    embed_gpu = vocab * hidden / tp
    vision_gpu = vision / tp if vision_tp else vision
    kept_gpu = scales_kept * stage_layers / layers
    total = int(
        linear_bytes
        + embed_gpu * dtype_bytes
        + head_gpu * per["lm_head"]
        + vision_gpu * dtype_bytes
        + kept_gpu
    )
    params = mixers + dense_total + routed + shared_total + router + latent_total + embed + vision
    how = (
        f"{params / 1e9:.2f} B parameters from config.json ({attn_how}, {mlp_how}, "
        f"{'tied' if tied else 'untied'} embeddings {vocab} × {hidden}"
        + (
            f", vision tower {vision / 1e9:.2f} B "
            + ("split over TP" if vision_tp else "replicated (--mm-encoder-tp-mode data)")
            if vision
            else ""
        )
        + f"); linear layers at {qhow}; split over TP {tp}"
        + (f", the largest of PP stages {parts} ({stage_layers} layers)" if pp > 1 else "")
        + (f"; {'; '.join(lb.notes)}" if lb.notes else "")
        + (f"; assumed: {'; '.join(assumed)}" if assumed else "")
    )
    return WeightEstimate(total, how, tuple(assumed), params)


def from_checkpoint(
    total_bytes: int,
    *,
    tp: int,
    pp: int,
    where: str,
    layers: int = 0,
    pp_partition: str | None = None,
) -> WeightEstimate:
    """Weights per GPU from the checkpoint's size: split over TP, and over PP in proportion to
    the largest stage's share of the layers."""
    if pp > 1 and layers:
        parts = pp_partitions(layers, pp, pp_partition)
        per_gpu = int(total_bytes * max(parts) / layers / tp)
        return WeightEstimate(
            per_gpu,
            f"{total_bytes} B ({where}) × {max(parts)}/{layers} "
            f"layers of the largest PP stage {parts} / TP {tp}",
        )
    per_gpu = total_bytes // (tp * pp)
    return WeightEstimate(per_gpu, f"{total_bytes} B ({where}) / (TP {tp} × PP {pp})")


def dtype_bytes(name: str | None) -> float | None:
    return DTYPE_BYTES.get(str(name).lower().replace("torch.", "")) if name else None


# "Qwen3-8B", "gemma-4-26B-A4B", "opt-125m", "Llama-2-13b-chat-hf": the total parameters the
# name states. Not read: an active count ("A4B"), an effective one (Gemma's "E2B"), experts
# times a size ("8x7B"), and a size followed by an expert count ("17B-16E": Llama 4 names its
# active parameters that way)
_NAMED_SIZE = re.compile(r"^(\d+(?:\.\d+)?)([bm])$", re.IGNORECASE)
_EXPERT_COUNT = re.compile(r"^\d+e$", re.IGNORECASE)
# how far a count may stray from the size a name states before it is doubtful: names round
# (Llama-3.1-8B is 8.03 B, gpt-oss-20b 20.9 B) and some leave the vision or audio tower out
SIZE_TOLERANCE = 2.5


def named_parameters(model_id: str) -> tuple[float, str] | None:
    """(parameters, the word that states them) from a model's name, or None."""
    name = model_id.rstrip("/").rsplit("/", 1)[-1]
    words = re.split(r"[-_\s]+", name)
    if any(re.fullmatch(r"\d+x\d+(?:\.\d+)?[bm]", w, re.IGNORECASE) for w in words):
        return None
    for i, word in enumerate(words):
        match = _NAMED_SIZE.match(word)
        if not match:
            continue
        if i + 1 < len(words) and _EXPERT_COUNT.match(words[i + 1]):
            return None
        scale = 1e9 if match.group(2).lower() == "b" else 1e6
        return float(match.group(1)) * scale, word
    return None


# a word of a model's name that states a quantized checkpoint (Qwen3-8B-FP8, ...-NVFP4,
# ...-AWQ, ...-GPTQ-Int4, ...-W4A16, ...-bnb-4bit)
_QUANT_WORD = re.compile(
    r"^(?:nv|mx)?fp[468]|^int[348]$|^w[48]a(?:8|16)$|^awq$|^gptq$|^bnb$|^[48]bit$|^autoround$",
    re.IGNORECASE,
)


def named_quantization(model_id: str) -> str | None:
    """The word of a model's name that states a quantized checkpoint, or None."""
    name = model_id.rstrip("/").rsplit("/", 1)[-1]
    return next((w for w in re.split(r"[-_.\s]+", name) if _QUANT_WORD.match(w)), None)


def size_doubt(counted: int, named: tuple[float, str] | None) -> str | None:
    """Why a count from config.json is doubtful against the size the name states, or None."""
    if not counted or named is None:
        return None
    size, word = named
    ratio = counted / size
    if 1 / SIZE_TOLERANCE <= ratio <= SIZE_TOLERANCE:
        return None
    return (
        f"the count from config.json ({counted / 1e9:.1f} B parameters) is {ratio:.1f} × the "
        f"size the model's name states ({word}): the config is not read as the checkpoint is"
    )
