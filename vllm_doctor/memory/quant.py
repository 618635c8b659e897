"""Bytes per weight of each kind of linear layer, read from the checkpoint's quantization
config the way the release's loader reads it; a scheme the doctor does not understand leaves
the weights unknown (``UnknownQuantization``), never read as unquantized.

The kinds (``COMPONENTS``): the token mixers (attention, linear attention, Mamba), the dense
MLPs, the routed experts, the shared experts and the LM head. Embeddings and norms stay in the
compute dtype.

* a uniform scheme (``quant_method`` fp8 / awq / gptq / bitsandbytes / mxfp4, a ModelOpt
  ``quant_algo``, one compressed-tensors group): every linear layer at that scheme's bytes,
  except the modules its exclude list names (ModelOpt ``exclude_modules``, compressed-tensors
  and ModelOpt ``ignore``, ``modules_to_not_convert``: ``is_layer_excluded`` /
  ``is_layer_skipped``), which stay in the dtype;
* ModelOpt ``MIXED_PRECISION`` (``ModelOptMixedPrecisionConfig``, quantization/modelopt.py,
  from 0.17.0): each module at the ``quant_algo`` its ``quantized_layers`` entry names, the
  modules it does not name unquantized (nvidia/Qwen3.6-27B-NVFP4: NVFP4 MLPs, FP8 attention);
* compressed-tensors with several ``config_groups``: each group's scheme on the kinds of
  layers its ``targets`` name;
* DeepSeek-V4 with ``quant_method`` fp8 (``DeepseekV4FP8Config``, models/deepseek_v4 from
  0.20.0, deepseek_v41/quant_config.py later): FP8 block linears and MXFP4 routed experts
  (``expert_dtype`` "fp4", its default; "fp8" keeps them FP8), or NVFP4 ones under
  ``moe_quant_algo`` NVFP4;
* MXFP4 (gpt-oss, ``Mxfp4Config``): the fused MoE only, attention in the dtype.

An exclude or target pattern is mapped to the kinds of layers it covers by the module names
vLLM and the checkpoints use (``self_attn``, ``linear_attn``, ``mixer``, ``mlp``, ``experts``,
``shared_expert``, ``lm_head``) and to the layer it names (``layers.N``); a pattern covering
part of the layers quantizes that share of them.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from packaging.version import InvalidVersion, Version

from vllm_doctor.facts.model_config import _int

COMPONENTS = ("mixer", "mlp", "experts", "shared", "lm_head")
LINEAR = ("mixer", "mlp", "experts", "shared")  # the kinds a uniform scheme quantizes

NVFP4 = 0.5 + 1 / 16  # 4 bits + one FP8 scale per 16
MXFP4 = 0.5 + 1 / 32  # 4 bits + one E8M0 scale per 32
MXFP8 = 1 + 1 / 32

# ModelOpt quant_algo → (bytes per weight, name); the per-layer algorithms of MIXED_PRECISION
# (modelopt.py: ModelOptFp8Config, ModelOptNvFp4Config, its W4A16 sibling, ModelOptMxFp8Config,
# the block-FP8 MoE algorithms) and the uniform ones
MODELOPT_ALGOS: dict[str, tuple[float, str]] = {
    "FP8": (1.0, "FP8"),
    "FP8_PB_WO": (1.0, "block FP8"),
    "FP8_BLOCK": (1.0, "block FP8"),
    "FP8_PER_CHANNEL_PER_TOKEN": (1.0, "FP8 per channel"),
    "NVFP4": (NVFP4, "NVFP4"),
    "W4A16_NVFP4": (NVFP4, "NVFP4 (W4A16)"),
    "MXFP8": (MXFP8, "MXFP8"),
    "MXFP4": (MXFP4, "MXFP4"),
    "W4A8_AWQ": (0.5 + 2 / 128, "W4A8 AWQ"),
    "W4A16_AWQ": (0.5 + 2 / 128, "W4A16 AWQ"),
    "NVFP4_AWQ": (NVFP4, "NVFP4 AWQ"),
    "UNQUANTIZED": (0.0, "unquantized"),  # 0.0: the dtype's bytes
}
# the release that first reads MIXED_PRECISION (ModelOptMixedPrecisionConfig)
MIXED_PRECISION_SINCE = Version("0.17.0")


class UnknownQuantization(ValueError):
    """A quantization scheme whose bytes per weight the doctor does not know."""


@dataclass
class LinearBytes:
    """Bytes per weight of each kind of linear layer (``per``), and how they were read."""

    per: dict[str, float]
    how: str
    mxfp4_moe: bool = False  # the MXFP4 MoE layout (padding, kept scales) applies
    fp8: bool = False  # FP8 linears (Marlin's block-scale expansion below SM89)
    notes: list[str] = field(default_factory=list)
    assumed: list[str] = field(default_factory=list)  # values taken that the config lacks

    def uniform(self) -> float | None:
        values = {self.per[c] for c in LINEAR}
        return values.pop() if len(values) == 1 else None


# -- which kinds of layers a module name or a pattern covers -----------------------------------

_LAYER_INDEX = re.compile(r"(?:^|\.)(?:layers|h|blocks)\.(\d+)(?=$|[.*?\[])")
_MLP_LEAF = re.compile(
    r"(?:^|\.)(?:gate_up_proj|gate_proj|up_proj|down_proj|fc1|fc2|w1|w2|w3|"
    r"dense_h_to_4h|dense_4h_to_h|c_fc|c_proj)(?:$|[.*])"
)
_MIXER_WORDS = re.compile(
    r"self_attn|linear_attn|cross_attn|\battn\b|attention|mamba|conv1d|in_proj|out_proj|"
    r"q_proj|k_proj|v_proj|o_proj|qkv|query_key_value|kv_a_proj|kv_b_proj|q_a_proj|q_b_proj|"
    r"wq|wkv|indexer|index_"
)


def covered_kinds(pattern: str) -> set[str]:
    """The kinds of linear layer a module name or a wildcard pattern covers ({} for what the
    memory model does not count separately: embeddings, norms, routers, vision, MTP)."""
    name = pattern.lower().strip()
    if not name:
        return set()
    if re.search(r"(?:^|[.*])(?:lm_head|head|output_layer)$", name) or name in ("lm_head", "head"):
        return {"lm_head"}
    if re.search(
        r"(?:^|\.)mtp(?:$|[.*])|visual|vision|multi_modal|mm_projector|audio|patch_merge", name
    ):
        return set()
    if re.search(r"embed|norm(?:$|[.*])|(?:^|\.)gate$|router|e_score", name):
        return set()
    if "shared_expert" in name:
        return {"shared"}
    if "expert" in name:
        return {"experts"}
    wildcard_tail = name.endswith(("*", ".*"))
    stem = name.rstrip("*").rstrip(".")
    if _MLP_LEAF.search(name) or re.search(r"(?:^|\.)(?:mlp|feed_forward|ffn)$", stem):
        if _MLP_LEAF.search(name):
            return {"mlp"}
        # a whole MLP block: in an MoE model it holds the experts too
        return {"mlp", "experts", "shared"} if wildcard_tail else {"mlp"}
    if re.search(r"(?:^|\.)(?:block_sparse_moe|moe)$", stem):
        return {"experts", "shared"}
    if _MIXER_WORDS.search(name):
        if re.search(r"(?:^|\.)mixer$", stem) and wildcard_tail:
            return set(LINEAR)  # Nemotron-H: every layer's one block is its "mixer"
        return {"mixer"}
    if re.search(r"(?:^|\.)mixer(?:$|[.*])", name):
        return set(LINEAR)
    if re.search(r"(?:^|\.)(?:layers|h|blocks)\.\d+\.?\*?$", name) or name in ("*", "linear"):
        return set(LINEAR)  # a whole layer, or every linear layer
    return set()


def layer_of(pattern: str) -> int | None:
    match = _LAYER_INDEX.search(pattern)
    return int(match.group(1)) if match else None


@dataclass
class LayerCounts:
    """How many layers hold each kind of linear layer (the share a per-layer pattern covers)."""

    mixer: int
    mlp: int
    experts: int
    layers: int  # the model's decoder layers (indexes beyond are MTP / draft layers)

    def of(self, kind: str) -> int:
        if kind in ("experts", "shared"):
            return self.experts
        if kind == "lm_head":
            return 1
        return self.mixer if kind == "mixer" else self.mlp


def _coverage(patterns: list[str], counts: LayerCounts) -> dict[str, float]:
    """The share of each kind of layer the patterns cover (1.0: all of them)."""
    layers: dict[str, set[int]] = defaultdict(set)
    whole: set[str] = set()
    for pattern in patterns:
        if not isinstance(pattern, str):
            continue
        kinds = covered_kinds(pattern)
        index = layer_of(pattern)
        for kind in kinds:
            if index is None or kind == "lm_head":
                whole.add(kind)
            elif index < counts.layers:
                layers[kind].add(index)
    share = {}
    for kind in COMPONENTS:
        if kind in whole:
            share[kind] = 1.0
        elif layers[kind]:
            share[kind] = min(1.0, len(layers[kind]) / max(counts.of(kind), 1))
        else:
            share[kind] = 0.0
    return share


# -- the schemes ---------------------------------------------------------------------------------


def _uniform(
    per_weight: float, how: str, dtype_bytes: float, excluded: list[str], counts: LayerCounts
) -> LinearBytes:
    """Every linear layer at one scheme, the excluded ones in the dtype; the LM head stays in
    the dtype unless a scheme quantizes it (none of the uniform ones here does by default)."""
    share = _coverage(excluded, counts) if excluded else dict.fromkeys(COMPONENTS, 0.0)
    per = {kind: per_weight * (1 - share[kind]) + dtype_bytes * share[kind] for kind in LINEAR}
    per["lm_head"] = dtype_bytes
    kept = [f"{kind} {share[kind]:.0%}" for kind in LINEAR if share[kind]]
    if kept:
        how += f"; in the dtype as the exclude list names them: {', '.join(kept)}"
    return LinearBytes(per, how)


def _mixed_precision(
    layers_cfg: dict[str, Any], dtype_bytes: float, counts: LayerCounts, version: str | None
) -> LinearBytes:
    """ModelOpt MIXED_PRECISION: each named module at its own algorithm, the rest unquantized."""
    if version:
        try:
            if Version(version.split("+")[0]) < MIXED_PRECISION_SINCE:
                raise UnknownQuantization(
                    f"ModelOpt MIXED_PRECISION is read from vLLM {MIXED_PRECISION_SINCE} on "
                    f"(ModelOptMixedPrecisionConfig); vLLM {version} does not load it"
                )
        except InvalidVersion:
            pass
    per_layer: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    whole: dict[str, list[float]] = defaultdict(list)
    algos: set[str] = set()
    unplaced = 0
    for name, recipe in layers_cfg.items():
        algo = (
            str((recipe or {}).get("quant_algo") or "").upper() if isinstance(recipe, dict) else ""
        )
        if algo not in MODELOPT_ALGOS:
            raise UnknownQuantization(
                f"MIXED_PRECISION names {algo or 'no quant_algo'} for {name}: "
                "a per-layer algorithm the doctor does not know"
            )
        per_weight = MODELOPT_ALGOS[algo][0] or dtype_bytes
        algos.add(MODELOPT_ALGOS[algo][1])
        kinds = covered_kinds(name)
        if not kinds:
            unplaced += 1
            continue
        index = layer_of(name)
        for kind in kinds:
            if index is None or kind == "lm_head":
                whole[kind].append(per_weight)
            elif index < counts.layers:
                per_layer[kind][index].append(per_weight)
    per: dict[str, float] = {}
    parts = []
    for kind in COMPONENTS:
        if whole[kind]:
            per[kind] = sum(whole[kind]) / len(whole[kind])
            share = 1.0
        elif per_layer[kind]:
            values = [sum(v) / len(v) for v in per_layer[kind].values()]
            share = min(1.0, len(values) / max(counts.of(kind), 1))
            per[kind] = share * sum(values) / len(values) + (1 - share) * dtype_bytes
        else:
            per[kind], share = dtype_bytes, 0.0
        if share:
            parts.append(f"{kind} {per[kind]:.3f} B ({share:.0%} quantized)")
    how = (
        f"ModelOpt MIXED_PRECISION ({', '.join(sorted(algos))} per layer, "
        f"{len(layers_cfg)} quantized_layers entries): "
        + (", ".join(parts) or "none placed")
        + "; the modules it does not name unquantized"
    )
    result = LinearBytes(per, how)
    if unplaced:
        result.notes.append(f"{unplaced} entries on layers not counted (embeddings, MTP, vision)")
    return result


_CT_BYTES = {  # compressed-tensors group scheme (model_config._ct_group) → bytes per weight
    "fp8": 1.0,
    "fp8-dynamic": 1.0,
    "fp8-w8a16": 1.0,
    "w8a8-fp8": 1.0,
    "w8a8-int8": 1.0,
    "w8a16": 1.0 + 2 / 128,
    "w4a16": 0.5 + 2 / 128,
    "w4a8": 0.5 + 2 / 128,
    "nvfp4": NVFP4,
    "nvfp4a16": NVFP4,
}


def _compressed_tensors_groups(
    qcfg: dict[str, Any], dtype_bytes: float, counts: LayerCounts
) -> LinearBytes:
    """Several compressed-tensors config_groups: each on the kinds of layers its targets name
    (``Linear`` is every linear layer), the ignore list in the dtype."""
    from vllm_doctor.facts.model_config import _ct_group

    per = dict.fromkeys(COMPONENTS, dtype_bytes)
    parts = []
    for group_name, group in (qcfg.get("config_groups") or {}).items():
        if not isinstance(group, dict):
            continue
        weights = group.get("weights") if isinstance(group.get("weights"), dict) else {}
        acts = group.get("input_activations")
        scheme = _ct_group(weights or {}, acts if isinstance(acts, dict) else {})
        if scheme not in _CT_BYTES:
            raise UnknownQuantization(
                f"compressed-tensors group {group_name}: a scheme the doctor does not know "
                f"({scheme or weights})"
            )
        kinds: set[str] = set()
        for named in group.get("targets") or []:
            target = str(named)
            text = target.removeprefix("re:")
            found = set(LINEAR) if text.lower() == "linear" else covered_kinds(text)
            if not found and text.lower() != "linear":
                raise UnknownQuantization(
                    f"compressed-tensors group {group_name} targets {target!r}: the doctor "
                    "cannot tell which layers that is"
                )
            kinds |= found
        for kind in kinds:
            per[kind] = _CT_BYTES[scheme]
        parts.append(f"{group_name} {scheme} on {', '.join(sorted(kinds))}")
    ignored = [str(p) for p in qcfg.get("ignore") or [] if isinstance(p, str)]
    share = _coverage([p.removeprefix("re:") for p in ignored], counts)
    for kind in COMPONENTS:
        if share[kind] and kind != "lm_head":
            per[kind] = per[kind] * (1 - share[kind]) + dtype_bytes * share[kind]
    return LinearBytes(per, "compressed-tensors groups: " + "; ".join(parts))


# integer weight-only methods whose config states bits and group_size (GPTQConfig, AWQConfig,
# INCConfig for AutoRound: ``get_from_keys(config, ["bits"])``)
_INT_METHODS = ("awq", "gptq", "awq_marlin", "gptq_marlin", "auto-round", "auto_round", "inc")


def _first_group_weights(qcfg: dict[str, Any]) -> dict[str, Any]:
    for group in (qcfg.get("config_groups") or {}).values():
        if isinstance(group, dict) and isinstance(group.get("weights"), dict):
            return group["weights"]
    return {}


def _excluded(qcfg: dict[str, Any], hf_quant: dict[str, Any] | None) -> list[str]:
    """The modules a checkpoint keeps unquantized, from every list the loaders read."""
    found: list[str] = []
    for source in (qcfg, (hf_quant or {}).get("quantization") or {}):
        for key in ("exclude_modules", "ignore", "modules_to_not_convert", "ignored_layers"):
            value = source.get(key) if isinstance(source, dict) else None
            if isinstance(value, list):
                found.extend(str(v) for v in value if isinstance(v, str))
    return found


def linear_bytes(
    qcfg: dict[str, Any] | None,
    scheme: str | None,
    dtype_bytes: float,
    counts: LayerCounts,
    *,
    model_type: str = "",
    text: dict[str, Any] | None = None,
    hf_quant: dict[str, Any] | None = None,
    version: str | None = None,
) -> LinearBytes:
    """Bytes per weight of each kind of linear layer; UnknownQuantization for a scheme the
    doctor does not know. ``qcfg``: config.json's quantization_config (or the online method
    as ``{"quant_method": ...}``), ``hf_quant``: ModelOpt's hf_quant_config.json."""
    text = text or {}
    modelopt = (hf_quant or {}).get("quantization") if isinstance(hf_quant, dict) else None
    qcfg = qcfg if isinstance(qcfg, dict) else {}
    if not qcfg and not scheme and not isinstance(modelopt, dict):
        return LinearBytes(
            dict.fromkeys(COMPONENTS, dtype_bytes), f"{dtype_bytes:g} B (unquantized)"
        )
    method = str(qcfg.get("quant_method") or "").lower()
    algo = str(qcfg.get("quant_algo") or (modelopt or {}).get("quant_algo") or "").upper()
    scheme_l = (scheme or "").lower()
    excluded = _excluded(qcfg, hf_quant)

    if model_type.startswith("deepseek_v4") and method in ("fp8", "deepseek_v4_fp8"):
        moe_algo = str(qcfg.get("moe_quant_algo") or "").upper()
        expert_dtype = str(text.get("expert_dtype") or qcfg.get("expert_dtype") or "fp4")
        if moe_algo == "NVFP4":
            experts, what = NVFP4, "NVFP4 experts (moe_quant_algo)"
        elif expert_dtype == "fp4":
            experts, what = MXFP4, "MXFP4 experts (expert_dtype fp4, the default)"
        elif expert_dtype == "fp8":
            experts, what = 1.0, "FP8 block experts (expert_dtype fp8)"
        else:
            raise UnknownQuantization(f"DeepSeek-V4 expert_dtype {expert_dtype!r}")
        per = {"mixer": 1.0, "mlp": 1.0, "experts": experts, "shared": 1.0, "lm_head": dtype_bytes}
        return LinearBytes(per, f"DeepseekV4FP8Config: FP8 block linears, {what}", fp8=True)

    if algo == "MIXED_PRECISION" or scheme_l == "mixed":
        layers_cfg = qcfg.get("quantized_layers") or (modelopt or {}).get("quantized_layers")
        if isinstance(layers_cfg, dict) and layers_cfg:
            return _mixed_precision(layers_cfg, dtype_bytes, counts, version)
        if method == "compressed-tensors":
            return _compressed_tensors_groups(qcfg, dtype_bytes, counts)
        raise UnknownQuantization(
            "a mixed-precision checkpoint without a quantized_layers mapping the doctor can read"
        )

    group = _int(qcfg.get("group_size")) or _int(qcfg.get("q_group_size"))
    bits = _int(qcfg.get("bits") or qcfg.get("w_bit"))
    if "nvfp4" in scheme_l or "nvfp4" in method or method == "modelopt_fp4" or algo == "NVFP4":
        return _uniform(
            NVFP4, "NVFP4: 4 bits + one FP8 scale per 16", dtype_bytes, excluded, counts
        )
    if "mxfp4" in scheme_l or method == "mxfp4":
        per = {
            "mixer": dtype_bytes,
            "mlp": MXFP4,
            "experts": MXFP4,
            "shared": MXFP4,
            "lm_head": dtype_bytes,
        }
        return LinearBytes(
            per,
            "MXFP4: 4 bits + one E8M0 scale per 32; attention unquantized "
            "(Mxfp4Config quantizes the MoE experts only)",
            mxfp4_moe=True,
        )
    integer = method in _INT_METHODS
    if integer or scheme_l in ("awq", "gptq", "w4a16", "w8a16", "w4a8"):
        assumed = []
        if integer and (bits is None or group is None):
            # vLLM's loader requires both: a config without them is a partial copy
            assumed = [
                f"the {method} config has no {key}: {value} assumed"
                for key, value, known in (("bits", 4, bits), ("group_size", 128, group))
                if known is None
            ]
            bits, group = bits or 4, group or 128
        else:  # a compressed-tensors scheme: its group's own figures
            weights = _first_group_weights(qcfg)
            bits = _int(weights.get("num_bits")) or (8 if scheme_l == "w8a16" else 4)
            group = _int(weights.get("group_size")) or group or 128
        if group <= 0:  # -1: one scale per output channel
            group = 1 << 30
        per_weight = bits / 8 + (2 + bits / 8) / group
        shown = group if group < 1 << 30 else "per channel"
        result = _uniform(
            per_weight,
            f"{method or scheme_l} {bits}-bit, group {shown}: {per_weight:.3f} B",
            dtype_bytes,
            excluded,
            counts,
        )
        result.assumed.extend(assumed)
        return result
    if method in ("bitsandbytes", "bnb") or scheme_l == "bnb":
        if qcfg.get("load_in_8bit"):
            return _uniform(1 + 4 / 4096, "bitsandbytes 8-bit", dtype_bytes, excluded, counts)
        return _uniform(
            0.5 + 4 / 64,
            "bitsandbytes 4-bit, one float32 scale per 64",
            dtype_bytes,
            excluded,
            counts,
        )
    if algo in MODELOPT_ALGOS and algo != "UNQUANTIZED":
        per_weight, name = MODELOPT_ALGOS[algo]
        result = _uniform(per_weight, f"ModelOpt {name}", dtype_bytes, excluded, counts)
        result.fp8 = per_weight == 1.0
        return result
    if (
        "fp8" in method
        or "fp8" in scheme_l
        or scheme_l in ("w8a8-int8", "mxfp8", "fp8-dynamic")
        or method in ("experts_int8", "int8")
    ):
        per_weight = MXFP8 if scheme_l == "mxfp8" else 1.0
        result = _uniform(per_weight, "8-bit weights", dtype_bytes, excluded, counts)
        result.fp8 = "fp8" in method or "fp8" in scheme_l
        return result
    if method == "compressed-tensors" and isinstance(qcfg.get("config_groups"), dict):
        return _compressed_tensors_groups(qcfg, dtype_bytes, counts)
    raise UnknownQuantization(
        f"quantization {method or algo or scheme_l!r}"
        + (f" / {algo}" if algo and method else "")
        + ": a scheme whose bytes per weight the doctor does not know"
    )
