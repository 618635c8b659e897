"""The KV cache vLLM allocates, layer by layer, and how many tokens it holds.

Every layer that keeps state gets a spec, as vLLM's ``get_kv_cache_spec`` builds them
(``vllm/v1/kv_cache_interface.py`` of the 0.10.0–0.33.0 wheels):

* full attention: ``2 × KV heads per GPU × head size × dtype bytes`` per token (K and V);
  KV heads are split over TP, one head per GPU at least (replicated when TP > KV heads);
* sliding window / chunked local attention: the same bytes per token, but a request holds
  at most ``window − 1 + max_num_batched_tokens`` tokens (``SlidingWindowSpec``,
  ``ChunkedLocalAttentionSpec``);
* MLA: ``(kv_lora_rank + qk_rope_head_dim) × dtype bytes``, the latent cache replicated on
  every TP rank (``MLAAttentionSpec``; ``fp8_ds_mla`` stores 656 bytes per token); sparse MLA
  (DeepSeek-V3.2's DSA, any config with ``index_topk``) adds the lightning indexer's key cache
  on every MLA layer: ``index_head_dim`` FP8 values + one fp32 scale per 128, uint8
  (``DeepseekV32IndexerCache``, 132 bytes for index_head_dim 128, 0.11.0–0.33.0); the two
  specs are one ``UniformTypeKVCacheSpecs`` group, so their bytes add per layer;
  vLLM takes the MLA path only for the model types ``is_deepseek_mla`` lists (MLA_MODEL_TYPES);
  another config with ``kv_lora_rank`` (MiniCPM3) decompresses K and V and caches them as plain
  attention: every attention head a KV head of ``qk_nope_head_dim + qk_rope_head_dim`` (V padded
  to it; ``MiniCPM3Attention``), split over TP;
* Mamba / SSM and linear attention (GDN): a fixed state per request and layer (conv state +
  SSM or recurrent state), split over TP (``MambaSpec``); the attention block size is raised so
  one attention page is at least one Mamba state ("Setting attention block size to N tokens");
  a request holds 1, 2 ('align' prefix caching) or one per block ('all') state blocks per
  group, plus one per speculative token, by release (``MambaStateMode``);
* cross-attention (Whisper, BART decoders): the encoder's tokens per request,
  ``max_num_encoder_input_tokens`` (``CrossAttentionSpec``), taken as the larger of the
  encoder length (``max_source_positions``) and ``max_num_batched_tokens``;
* parallel hybrids (Falcon-H1): an attention layer and a Mamba layer per decoder layer;
* encoder-only models (BERT, RoBERTa, ModernBERT, ...): no KV cache (ENCODER_ONLY attention).

Layers are grouped as ``_get_kv_cache_groups_uniform_page_size`` groups them: layers of one
spec form groups of ``group_size`` layers (the smallest count of one spec, or the largest when
it is below 1.5 × the smallest); all groups share one pool of ``num_blocks = available //
page_size // group_size`` blocks. One request needs ``cdiv(tokens it can hold, block_size)``
blocks per group; concurrency is ``num_blocks / Σ blocks per request``
(``get_max_concurrency_for_kv_cache_config``). The printed token count is
``num_blocks // groups × block_size`` up to 0.20.0 and ``int(concurrency × max_model_len)``
from 0.20.1 (v1/core/kv_cache_utils.py ``_report_kv_cache_config``, ``get_kv_cache_capacity``
from 0.24.0).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from vllm_doctor.facts.model_config import _int

DEFAULT_BLOCK_SIZE = 16  # CacheConfig.DEFAULT_BLOCK_SIZE
# the attention block size for hybrid Mamba models is a multiple of the kernel's alignment
KERNEL_BLOCK_ALIGNMENT = 16
FP8_DS_MLA_BYTES = 656  # DeepSeek V3.2 sparse MLA fp8 cache entry per token (kv_cache_interface)
# the indexer quantizes its keys to FP8 with one fp32 scale per block of this many values
# (Indexer.quant_block_size in vllm/model_executor/models/deepseek_v2.py, 0.11.0–0.33.0)
INDEXER_QUANT_BLOCK = 128

# the model types vLLM serves with the MLA latent cache (``is_deepseek_mla``: vllm/config.py
# 0.8.0-0.10.x, vllm/config/model.py and vllm/transformers_utils/model_arch_config_convertor.py
# up to 0.33.0; a type joins the list with the release that supports the model)
MLA_MODEL_TYPES = frozenset(
    {
        "axk1",
        "bailing_hybrid",
        "bailing_hybrid_mtp",
        "bailing_hybrid_v3_mtp",
        "deepseek_mtp",
        "deepseek_v2",
        "deepseek_v3",
        "deepseek_v32",
        "deepseek_v4",
        "deepseek_v41",
        "dots3_note",
        "glm4_moe_lite",
        "glm4_moe_lite_mtp",
        "glm5_next",
        "glm5_next_text",
        "glm_moe_dsa",
        "hy_v4",
        "hy_v4_mtp",
        "k3_dspark",
        "kimi_k2",
        "kimi_linear",
        "longcat_flash",
        "pangu_ultra_moe",
        "pangu_ultra_moe_mtp",
    }
)

FULL, SLIDING, CHUNKED, MLA, MAMBA, CROSS = (
    "full",
    "sliding-window",
    "chunked-local",
    "mla",
    "mamba",
    "cross-attention",
)

DTYPE_BYTES: dict[str, float] = {
    "float32": 4,
    "float": 4,
    "fp32": 4,
    "bfloat16": 2,
    "bf16": 2,
    "float16": 2,
    "fp16": 2,
    "half": 2,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "fp8_inc": 1,
    "fp8_ds_mla": 1,
    "int8": 1,
    "float8_e4m3fn": 1,
    "nvfp4": 0.5,
}


@dataclass(frozen=True)
class LayerSpec:
    """The KV state of one layer on one GPU."""

    kind: str
    bytes_per_token: int = 0  # attention kinds
    window: int | None = None  # sliding-window / chunked-local tokens
    state_bytes: int = 0  # Mamba / linear attention: bytes per request

    def key(self) -> tuple[str, int, int | None, int]:
        return self.kind, self.bytes_per_token, self.window, self.state_bytes


@dataclass
class KvLayout:
    """The layers of one GPU (the largest pipeline stage) and how they were read."""

    layers: list[LayerSpec] = field(default_factory=list)
    how: list[str] = field(default_factory=list)
    encoder_only: bool = False

    def counts(self) -> dict[str, int]:
        return dict(Counter(layer.kind for layer in self.layers))

    def bytes_per_token(self) -> int:
        """Attention bytes per token over every layer (state and cross-attention layers,
        which hold a fixed amount per request, excluded)."""
        return sum(
            layer.bytes_per_token for layer in self.layers if layer.kind not in (MAMBA, CROSS)
        )

    def describe(self) -> str:
        parts = [f"{n} {kind}" for kind, n in sorted(self.counts().items())]
        return ", ".join(parts) + (f" ({'; '.join(self.how)})" if self.how else "")


@dataclass(frozen=True)
class KvCapacity:
    num_blocks: int
    block_size: int
    groups: int
    tokens: int
    concurrency: float
    blocks_per_request: int
    page_bytes: int
    group_size: int


def dim(value: Any) -> int | None:
    """A size from a config: an int, or the largest of a per-layer list (Gemma 3n's
    intermediate_size)."""
    if isinstance(value, list):
        sizes = [v for v in (_int(x) for x in value) if v is not None]
        return max(sizes) if sizes else None
    return _int(value)


def pp_partitions(layers: int, pp: int, override: str | None = None) -> list[int]:
    """Decoder layers per pipeline stage as vLLM splits them (``get_pp_indices`` in
    vllm/distributed/utils.py): even, the remainder one each on the stages before the last
    (from the second-to-last backwards); ``VLLM_PP_LAYER_PARTITION`` ("10,12,10") wins."""
    if override:
        try:
            parts = [int(p) for p in override.split(",")]
        except ValueError:
            parts = []
        if len(parts) == pp and sum(parts) == layers:
            return parts
    parts = [layers // pp] * pp
    for i in range(2, layers % pp + 2):
        parts[-i] += 1
    return parts


def _word_kind(word: str) -> str:
    """A layer-type word of a config (layer_types, layers_block_type) as a KV kind."""
    word = word.lower()
    if "sliding" in word:
        return "sliding"
    if "chunk" in word:
        return "chunked"
    # newer transformers name Mamba mixers "linear_attention" too (Granite 4, Nemotron-H)
    if any(w in word for w in ("linear", "mamba", "conv", "ssm", "kda", "delta")):
        return "state"
    if "hybrid" in word:  # Zamba2: a Mamba block with the shared attention; the attention KV
        return "full"
    if "attention" in word or word in ("full", "global", "attn"):
        return "full"
    return "none"  # mlp, moe, ...


# encoder-only models: vLLM gives their attention no KV cache (AttentionType.ENCODER_ONLY)
ENCODER_ONLY_TYPES = frozenset(
    {
        "bert",
        "roberta",
        "xlm-roberta",
        "modernbert",
        "nomic_bert",
        "distilbert",
        "electra",
        "deberta",
        "deberta-v2",
        "camembert",
        "jina_bert",
        "new",
        "gte",
        "bert_with_rope",
    }
)


def _kinds_of_layers(text: dict[str, Any], n_layers: int) -> tuple[list[str], str]:
    """One entry per decoder layer: full | sliding | chunked | state | cross | none."""
    if text.get("model_type") == "falcon_h1":  # every layer: attention and Mamba in parallel
        return ["full"] * n_layers + ["state"] * n_layers, "parallel attention + Mamba layers"
    if text.get("is_encoder_decoder") and _int(text.get("decoder_layers")):  # Whisper, BART
        decoder = _int(text.get("decoder_layers")) or n_layers
        return (
            ["full"] * decoder + ["cross"] * decoder,
            "decoder self-attention + cross-attention layers",
        )
    linear = text.get("linear_attn_config")
    kda = linear.get("kda_layers") if isinstance(linear, dict) else None
    if isinstance(kda, list) and kda:  # Kimi Linear / K3: 1-based KDA layer numbers, MLA else
        numbers = {n for n in kda if isinstance(n, int)}
        return (
            ["state" if i + 1 in numbers else "full" for i in range(n_layers)],
            "linear_attn_config.kda_layers",
        )
    for key in ("layer_types", "layers_block_type"):
        types = text.get(key)
        if isinstance(types, list) and len(types) == n_layers:
            return [_word_kind(str(t)) for t in types], key
    pattern = text.get("hybrid_override_pattern")
    if isinstance(pattern, str) and pattern:  # Nemotron-H: M mamba, * attention, - MLP, E MoE
        mapped = ["state" if c == "M" else "full" if c == "*" else "none" for c in pattern]
        return mapped, "hybrid_override_pattern"
    period, offset = _int(text.get("attn_layer_period")), _int(text.get("attn_layer_offset"))
    if period and offset is not None:  # Jamba
        return (
            ["full" if i % period == offset else "state" for i in range(n_layers)],
            "attn_layer_period/offset",
        )
    interval = _int(text.get("full_attention_interval"))
    if interval and text.get("linear_num_value_heads"):  # Qwen3-Next without layer_types
        return (
            ["full" if (i + 1) % interval == 0 else "state" for i in range(n_layers)],
            "full_attention_interval",
        )
    if text.get("model_type") in ("mamba", "mamba2", "falcon_mamba"):
        return ["state"] * n_layers, "attention-free Mamba"
    chunk = _int(text.get("attention_chunk_size"))
    no_rope = text.get("no_rope_layers")
    if chunk and isinstance(no_rope, list) and len(no_rope) == n_layers:  # Llama 4
        return ["chunked" if use_rope else "full" for use_rope in no_rope], "no_rope_layers"
    window = _int(text.get("sliding_window"))
    swp = _int(text.get("sliding_window_pattern"))
    if window and swp:  # Gemma 3: every swp-th layer is global
        return (
            ["full" if (i + 1) % swp == 0 else "sliding" for i in range(n_layers)],
            "sliding_window_pattern",
        )
    if window and text.get("model_type") in ("gemma2", "cohere2"):
        return (
            ["sliding" if i % 2 == 0 else "full" for i in range(n_layers)],
            "alternating sliding window",
        )
    if window and text.get("use_sliding_window") is not False:
        max_window = _int(text.get("max_window_layers"))
        if text.get("use_sliding_window") and max_window is not None:  # Qwen2
            return (
                ["full" if i < max_window else "sliding" for i in range(n_layers)],
                "use_sliding_window/max_window_layers",
            )
        if "use_sliding_window" not in text:  # Mistral-style: every layer
            return ["sliding"] * n_layers, "sliding_window"
    return ["full"] * n_layers, "full attention"


def layer_kinds(text: dict[str, Any], n_layers: int) -> list[str]:
    """One entry per decoder layer's token mixer: full | sliding | chunked | state | cross | none
    (Falcon-H1: an attention and a state entry per layer)."""
    return _kinds_of_layers(text, n_layers)[0]


@dataclass(frozen=True)
class StateGeometry:
    """One Mamba / linear-attention token mixer's geometry as config.json names it (the one
    reader of its aliases for the state cache here and the mixer's weights in weights.py).

    ``kind``: "Gated DeltaNet" (Qwen3-Next / Qwen3.5: ``linear_num_key/value_heads``,
    ``linear_key/value_head_dim``), "KDA" (Kimi Linear: ``linear_num_heads``,
    ``linear_head_dim``), "Mamba2" (state size, heads and head size: Nemotron-H, Falcon-H1,
    Granite 4.0-H, Zamba2, mamba2...), "Mamba" (state size and ``expand``: Jamba, mamba) or
    "short conv" (LFM2's ``conv_L_cache``)."""

    kind: str
    conv_kernel: int  # the causal conv's width (short conv: its cache length)
    heads: int = 0  # value heads (Gated DeltaNet), heads (KDA, Mamba2)
    head_dim: int = 0  # value head size (Gated DeltaNet), head size (KDA, Mamba2)
    key_heads: int = 0  # Gated DeltaNet
    key_dim: int = 0  # Gated DeltaNet
    d_state: int = 0  # Mamba2, Mamba
    groups: int = 1  # Mamba2's B/C groups
    inner: int = 0  # Mamba2 (mamba_d_ssm or heads × head size), Mamba (expand × hidden)
    dt_rank: int = 0  # Mamba's time_step_rank, 0 where the config leaves it out


def state_geometry(text: dict[str, Any]) -> StateGeometry | None:
    """The token mixer's geometry, None where the config names no state mixer."""
    g = text.get
    kernel = _int(g("linear_conv_kernel_dim")) or 4
    k_heads, v_heads = _int(g("linear_num_key_heads")), _int(g("linear_num_value_heads"))
    k_dim, v_dim = _int(g("linear_key_head_dim")), _int(g("linear_value_head_dim"))
    if k_heads and v_heads and k_dim and v_dim:
        return StateGeometry(
            "Gated DeltaNet", kernel, v_heads, v_dim, key_heads=k_heads, key_dim=k_dim
        )
    heads, head_dim = _int(g("linear_num_heads")), _int(g("linear_head_dim"))
    if heads and head_dim:
        return StateGeometry("KDA", kernel, heads, head_dim)
    linear = g("linear_attn_config")
    if isinstance(linear, dict) and linear.get("kda_layers"):
        # Kimi Linear / K3 nest the KDA geometry (KimiLinearConfig.linear_attn_config)
        heads, head_dim = _int(linear.get("num_heads")), _int(linear.get("head_dim"))
        if heads and head_dim:
            width = _int(linear.get("short_conv_kernel_size")) or kernel
            return StateGeometry("KDA", width, heads, head_dim)
    d_state = _int(g("mamba_d_state") or g("ssm_state_size") or g("state_size") or g("d_state"))
    d_conv = (
        _int(g("mamba_d_conv") or g("conv_kernel") or g("d_conv") or g("mamba_conv_kernel")) or 4
    )
    mamba2 = g("model_type") == "mamba2"
    n_heads = _int(
        g("mamba_num_heads")
        or g("mamba_n_heads")
        or g("n_mamba_heads")
        or (g("num_heads") if mamba2 else None)
    )
    m_head = _int(
        g("mamba_head_dim")
        or g("mamba_d_head")
        or g("mamba_headdim")
        or (g("head_dim") if mamba2 else None)
    )
    if d_state and n_heads and m_head:
        groups = _int(g("mamba_n_groups") or g("n_groups") or g("mamba_ngroups")) or 1
        inner = _int(g("mamba_d_ssm")) or n_heads * m_head
        return StateGeometry(
            "Mamba2", d_conv, n_heads, m_head, d_state=d_state, groups=groups, inner=inner
        )
    expand = g("mamba_expand") or g("expand")
    hidden = _int(g("hidden_size"))
    if d_state and hidden and isinstance(expand, (int, float)):
        rank = _int(g("time_step_rank") or g("mamba_dt_rank")) or 0
        return StateGeometry(
            "Mamba", d_conv, d_state=d_state, inner=int(expand * hidden), dt_rank=rank
        )
    cache = _int(g("conv_L_cache"))
    if cache and hidden:
        return StateGeometry("short conv", cache)
    return None


def _state_bytes(text: dict[str, Any], tp: int, dtype_bytes: float) -> tuple[int, str] | None:
    """One state layer's bytes per request on one GPU, as MambaStateShapeCalculator sizes it
    (vllm/model_executor/layers/mamba/mamba_utils.py, 0.33.0): conv state + temporal state."""
    geo = state_geometry(text)
    if geo is None:
        return None
    # the temporal (SSM / recurrent) state's dtype: --mamba-ssm-cache-dtype, or for Qwen3.5 the
    # config's mamba_ssm_dtype (Qwen3_5ForConditionalGenerationConfig.verify_and_update_config,
    # model_executor/models/config.py, 0.17.0–0.33.0); else the model dtype
    ssm_dtype = str(text.get("mamba_ssm_cache_dtype") or text.get("mamba_ssm_dtype") or "auto")
    ssm_bytes = float(DTYPE_BYTES.get(ssm_dtype, dtype_bytes))
    width = geo.conv_kernel - 1
    if geo.kind == "Gated DeltaNet":  # gated_delta_net_state_shape
        key, value = geo.key_heads * geo.key_dim, geo.heads * geo.head_dim
        conv = width * ((2 * key + value) // tp)
        recurrent = geo.heads // tp * geo.head_dim * geo.key_dim
        return int(conv * dtype_bytes + recurrent * ssm_bytes), geo.kind
    if geo.kind == "KDA":  # kda_state_shape (Kimi Linear)
        conv = width * (3 * geo.heads * geo.head_dim // tp)
        return int((conv + geo.heads // tp * geo.head_dim * geo.head_dim) * dtype_bytes), geo.kind
    if geo.kind == "Mamba2":  # mamba2_state_shape
        groups = geo.groups
        groups += 0 if groups % tp == 0 else tp - groups  # extra_groups_for_head_shards
        conv = width * ((geo.inner + 2 * groups * geo.d_state) // tp)
        ssm = geo.heads // tp * geo.head_dim * geo.d_state
        return int(conv * dtype_bytes + ssm * ssm_bytes), geo.kind
    if geo.kind == "Mamba":  # mamba1_state_shape
        inner = geo.inner // tp
        return int(width * inner * dtype_bytes + inner * geo.d_state * ssm_bytes), geo.kind
    # short_conv_state_shape (LFM2)
    hidden = _int(text.get("hidden_size")) or 0
    return int(width * (hidden // tp) * dtype_bytes), geo.kind


def indexer_bytes(text: dict[str, Any]) -> int:
    """Bytes per token of a sparse-MLA layer's indexer key cache (0 without one): FP8 keys
    plus a 4-byte scale per INDEXER_QUANT_BLOCK values (``Indexer.__init__`` builds
    ``DeepseekV32IndexerCache(head_dim=index_head_dim + index_head_dim // 128 * 4, uint8)``
    when the config has ``index_topk``)."""
    if text.get("index_topk") is None:
        return 0
    dim = _int(text.get("index_head_dim")) or 128
    return dim + dim // INDEXER_QUANT_BLOCK * 4


def kv_layout(
    text: dict[str, Any],
    *,
    n_layers: int,
    kv_heads: int | None,
    head_dim: int | None,
    tp: int,
    pp: int,
    kv_bytes: float,
    state_bytes: float,
    kv_dtype: str,
    extra_layers: int = 0,
    pp_partition: str | None = None,
) -> KvLayout:
    """The KV layers of the largest pipeline stage on one GPU."""
    layout = KvLayout()
    if text.get("model_type") in ENCODER_ONLY_TYPES:
        layout.encoder_only = True
        layout.how.append(
            f"{text.get('model_type')} is encoder-only: vLLM allocates no KV cache for it"
        )
        return layout
    kinds, source = _kinds_of_layers(text, n_layers)
    if source != "full attention":
        layout.how.append(f"layer kinds from {source}")
    shared = _int(text.get("num_kv_shared_layers")) or 0
    if shared:  # Gemma 3n / 4: the last layers reuse earlier layers' KV
        kinds = kinds[: max(0, n_layers - shared)]
        layout.how.append(f"{shared} KV-shared layers allocate nothing")
    kinds += ["full"] * extra_layers  # MTP / EAGLE draft layers are attention layers
    # the largest pipeline stage bounds every GPU's KV pool (vLLM keeps the fewest blocks)
    parts = pp_partitions(len(kinds), pp, pp_partition) if pp > 1 else [len(kinds)]
    largest = max(range(len(parts)), key=lambda i: parts[i])
    start = sum(parts[:largest])
    stage = kinds[start : start + parts[largest]]
    if pp > 1:
        layout.how.append(f"PP stages {parts}: stage {largest} holds {parts[largest]} layers")
    window = _int(text.get("sliding_window"))
    chunk = _int(text.get("attention_chunk_size"))
    lora = _int(text.get("kv_lora_rank"))
    state = _state_bytes(text, tp, state_bytes) if "state" in stage else None
    if "state" in stage:
        if state is None:
            raise ValueError("a Mamba / linear-attention layer's state size is not in the config")
        layout.how.append(f"{state[1]} state {state[0]} B per request and layer")
    if lora and text.get("model_type") not in MLA_MODEL_TYPES:
        # not an MLA type for vLLM: the decompressed per-head K and V are cached
        nope, rope_dim = _int(text.get("qk_nope_head_dim")), _int(text.get("qk_rope_head_dim"))
        heads = _int(text.get("num_attention_heads"))
        if nope and rope_dim and heads:
            kv_heads, head_dim = heads, nope + rope_dim
            layout.how.append(
                f"{text.get('model_type')} is not an MLA model type for vLLM: {heads} heads × "
                f"{head_dim} (qk_nope + qk_rope) cached as plain attention"
            )
        lora = None
    if lora:
        rope = _int(text.get("qk_rope_head_dim")) or 64
        per = FP8_DS_MLA_BYTES if kv_dtype == "fp8_ds_mla" else int((lora + rope) * kv_bytes)
        if kv_dtype == "fp8_ds_mla":
            layout.how.append(f"MLA fp8_ds_mla {FP8_DS_MLA_BYTES} B, replicated over TP")
        else:
            layout.how.append(f"MLA ({lora} + {rope}) × {kv_bytes:g} B, replicated over TP")
        indexer = indexer_bytes(text)
        if indexer:
            per += indexer
            layout.how.append(f"+ sparse-attention indexer keys {indexer} B per layer")
        for kind in stage:  # Kimi Linear: MLA layers between linear-attention (KDA) ones
            if kind == "state" and state is not None:
                layout.layers.append(LayerSpec(MAMBA, state_bytes=state[0]))
            elif kind != "none":
                layout.layers.append(LayerSpec(MLA, per))
        return layout
    if kv_heads is None or head_dim is None:
        raise ValueError("the KV heads and head size are unknown")
    kv_per_gpu = max(1, kv_heads // tp) if kv_heads >= tp else 1
    full_bytes = int(2 * kv_per_gpu * head_dim * kv_bytes)
    global_dim = _int(text.get("global_head_dim"))
    global_kv = _int(text.get("num_global_key_value_heads"))
    global_bytes = full_bytes
    if global_dim:  # Gemma 4: the full-attention layers have their own head size / KV heads
        gkv = max(1, (global_kv or kv_heads) // tp)
        global_bytes = int(2 * gkv * global_dim * kv_bytes)
        layout.how.append(f"full layers: {global_kv or kv_heads} KV heads × {global_dim}")
    for kind in stage:
        if kind == "full":
            layout.layers.append(LayerSpec(FULL, global_bytes))
        elif kind == "sliding":
            layout.layers.append(LayerSpec(SLIDING, full_bytes, window or None))
        elif kind == "chunked":
            layout.layers.append(LayerSpec(CHUNKED, full_bytes, chunk))
        elif kind == "cross":  # holds the encoder's tokens of each request
            encoder = _int(text.get("max_source_positions")) or 1500
            layout.layers.append(LayerSpec(CROSS, full_bytes, encoder))
        elif kind == "state" and state is not None:
            layout.layers.append(LayerSpec(MAMBA, state_bytes=state[0]))
    return layout


# Models that implement SupportsMambaPrefixCaching (vllm/model_executor/models/*.py, 0.15.0–0.32.0):
# with prefix caching on they keep one state per block ('all' mode) instead of two ('align')
MAMBA_ALL_MODE_TYPES = frozenset(
    {"bamba", "falcon_h1", "granitemoehybrid", "jamba", "mamba", "mamba2", "nemotron_h", "zamba2"}
)


@dataclass(frozen=True)
class MambaStateMode:
    """How a release holds a request's Mamba / linear-attention state (the blocks one request
    takes in each state group, ``MambaSpec.max_memory_usage_bytes`` / ``page_size_bytes``)."""

    release: str = "0.33.0"
    # 0.11.1–0.14.x: prefix caching stays on only for MAMBA_ALL_MODE_TYPES (else "disabling");
    # there the state group's block is mamba_block_size = the attention block (else
    # max_model_len): cdiv(max_model_len, block) blocks. (0.11.1 rounds that attention block to
    # the Mamba2 chunk size with prefix caching, which block_size_for does not model.)
    per_block_state: bool = True
    # from 0.15.0: mamba_cache_mode none (1 + speculative blocks) | align (2 + speculative) | all
    cache_modes: bool = True
    # from 0.26.0 ModelConfig.is_prefix_caching_supported is True for generative hybrid models,
    # so prefix caching (and with it 'align') is on unless --no-enable-prefix-caching
    hybrid_prefix_caching_default: bool = True
    # 'all' for MAMBA_ALL_MODE_TYPES (0.15.0–0.32.0; MambaModelConfig.verify_and_update_config)
    all_mode: bool = False
    # from 0.20.0 those models fall back to 'align' when speculative decoding is on
    all_mode_without_spec: bool = True

    def cache_mode(
        self, *, model_type: str, prefix_caching: bool | None, spec_tokens: int
    ) -> str | None:
        """The mamba_cache_mode the release resolves for a hybrid model (none, align or all:
        MambaModelConfig / HybridAttentionMambaModelConfig.verify_and_update_config), or None
        for a release without the modes (before 0.15.0)."""
        if not self.per_block_state or not self.cache_modes:
            return None
        caching = self.hybrid_prefix_caching_default if prefix_caching is None else prefix_caching
        if not caching:
            return "none"
        all_mode = self.all_mode and model_type in MAMBA_ALL_MODE_TYPES
        if all_mode and not (self.all_mode_without_spec and spec_tokens):
            return "all"
        return "align"

    def blocks_per_request(
        self,
        *,
        model_type: str,
        prefix_caching: bool | None,
        spec_tokens: int,
        max_model_len: int,
        block: int,
    ) -> tuple[int, str]:
        """(blocks one request holds in each state group, how)."""
        caching = self.hybrid_prefix_caching_default if prefix_caching is None else prefix_caching
        whole = math.ceil(max_model_len / block)
        if not self.per_block_state:
            return 1, f"vLLM {self.release}: one state block per request (MambaSpec)"
        if not self.cache_modes:
            if caching and model_type in MAMBA_ALL_MODE_TYPES:
                return whole, (
                    f"vLLM {self.release} with prefix caching: mamba_block_size = block size, "
                    f"cdiv({max_model_len}, {block}) state blocks per request"
                )
            return 1, f"vLLM {self.release}: mamba_block_size = max_model_len, one state block"
        mode = self.cache_mode(
            model_type=model_type, prefix_caching=prefix_caching, spec_tokens=spec_tokens
        )
        if mode == "none":
            return 1 + spec_tokens, (
                f"vLLM {self.release}, mamba_cache_mode none: 1 + {spec_tokens} speculative "
                "state block(s) per request"
            )
        if mode == "all":
            return whole, (
                f"vLLM {self.release}, mamba_cache_mode all (prefix caching): "
                f"cdiv({max_model_len}, {block}) state blocks per request"
            )
        return 2 + spec_tokens, (
            f"vLLM {self.release}, mamba_cache_mode align (prefix caching): 2 + {spec_tokens} "
            "speculative state blocks per request"
        )


def block_size_for(layout: KvLayout, requested: int | None) -> tuple[int, int]:
    """(block size of the attention layers, page bytes per layer)."""
    attention = [layer for layer in layout.layers if layer.kind != MAMBA]
    states = [layer.state_bytes for layer in layout.layers if layer.kind == MAMBA]
    per_token = max((layer.bytes_per_token for layer in attention), default=0)
    block = requested or DEFAULT_BLOCK_SIZE
    if states and per_token:
        # HybridAttentionMambaModelConfig: attention page ≥ the largest state, in kernel steps
        state = max(states)
        block = KERNEL_BLOCK_ALIGNMENT * math.ceil(state / (KERNEL_BLOCK_ALIGNMENT * per_token))
        block = max(block, requested or 0)
        return block, block * per_token
    if states:
        return 1, max(states)
    return block, block * per_token


def capacity(
    layout: KvLayout,
    available: int,
    *,
    max_model_len: int,
    max_num_batched_tokens: int,
    tokens_from_concurrency: bool,
    block_size: int | None = None,
    state_blocks: int = 1,
) -> KvCapacity:
    """Blocks, tokens and concurrency of the pool ``available`` bytes buy on one GPU."""
    if not layout.layers:
        raise ValueError(
            "the model allocates no KV cache"
            + (f" ({'; '.join(layout.how)})" if layout.how else "")
        )
    block, page = block_size_for(layout, block_size)
    by_spec = Counter(layer.key() for layer in layout.layers)
    smallest, largest = min(by_spec.values()), max(by_spec.values())
    group_size = largest if largest < smallest * 1.5 else smallest
    if len(by_spec) == 1:
        group_size = largest
    groups: list[tuple[str, int | None]] = []
    for (kind, _, window, _), count in by_spec.items():
        groups += [(kind, window)] * math.ceil(count / group_size)
    num_blocks = max(0, available // page // group_size)
    per_request = 0
    for kind, window in groups:
        if kind == MAMBA:  # a fixed state, or one per block with prefix caching
            per_request += state_blocks
        elif kind == CROSS and window:  # CrossAttentionSpec: the encoder's input tokens
            per_request += math.ceil(max(window, max_num_batched_tokens) / block)
        elif kind in (SLIDING, CHUNKED) and window:
            held = min(window - 1 + max_num_batched_tokens, max_model_len)
            per_request += math.ceil(held / block) + (1 if kind == SLIDING else 0)
        else:
            per_request += math.ceil(max_model_len / block)
    concurrency = num_blocks / per_request if per_request else 0.0
    if tokens_from_concurrency:
        tokens = int(concurrency * max_model_len)
    else:
        tokens = num_blocks // len(groups) * block
    return KvCapacity(
        num_blocks, block, len(groups), tokens, concurrency, per_request, page, group_size
    )
