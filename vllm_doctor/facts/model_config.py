"""The model's Hugging Face ``config.json`` read into ``model.*`` (``read_model_config``);
facts/model_source.py finds the config (a path, a local model, the cache, the Hub) and
facts/context_length.py derives the context vLLM allows from it.

Multimodal configs keep the language model in a nested config (``text_config``,
``language_config``, ``llm_config``, ``thinker_config`` → ``text_config``, ...): heads, KV heads,
head dims, hidden size, layers, experts and vocab are read from there, falling back to the
top level. Which key holds a value depends on the model type, as vLLM reads it through the
transformers config class: GPT-2 keeps its heads in ``n_head``, MPT and DBRX in ``n_heads``
(KV heads in ``attn_config.kv_n_heads``), Whisper and BART in ``encoder_attention_heads``,
ChatGLM its KV heads in ``multi_query_group_num``. ``knowledge/data/model_layouts.json``
(generated from the transformers config classes and vLLM's own by tools/gen_model_layouts.py)
names those keys and the nested text config per model type; it is read on first use.

A value every model has (heads, KV heads, head dim, hidden size, layers, vocabulary, context,
dtype, architectures) that the config does not show under any key vLLM reads is marked
missing with the reason — unknown, never absent — so no rule can prove an error from it.
Optional features (experts, MTP layers, MLA ranks, quantization) are absent when not there.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from vllm_doctor.errors import InputError
from vllm_doctor.facts.model import Facts, Source

# nested configs holding the language model, in the order they are tried when the model
# type's layout is not known (transformers' get_text_config looks for decoder, generator,
# text_config and text_encoder; vLLM's own configs use llm_config, language_config, ...)
TEXT_CONFIG_KEYS = (
    "text_config",
    "language_config",
    "llm_config",
    "thinker_config",
    "text_model_config",
    "language_model_config",
    "decoder_config",
    "decoder",
    "generator",
    "text_encoder",
)


_LAYER_KEYS = (
    "num_attention_heads",
    "num_hidden_layers",
    "hidden_size",
    "n_head",
    "n_layer",
    "n_heads",
    "num_heads",
    "d_model",
)


# Keys tried, in order, when the model type has no known layout (remote code, a type newer
# than the generated table): the names transformers' attribute_maps most often point to.
_GENERIC_KEYS = {
    "num_attention_heads": ("num_attention_heads", "n_head", "n_heads", "num_heads"),
    "hidden_size": ("hidden_size", "d_model", "n_embd"),
    "num_hidden_layers": ("num_hidden_layers", "n_layer", "n_layers", "num_layers"),
    "vocab_size": ("vocab_size", "padded_vocab_size"),
    "max_position_embeddings": (
        "max_position_embeddings",
        "max_sequence_length",
        "seq_length",
        "n_positions",
        "max_seq_len",
    ),
    "head_dim": ("head_dim", "hidden_size_per_head", "attention_head_dim"),
}


# vLLM's KV-head keys in the order it tries them (CONFIG_FIELD_ALIASES["total_num_kv_heads"])
_KV_KEYS = (
    "n_head_kv",
    "num_kv_heads",
    "num_key_value_heads",
    "multi_query_group_num",
    "num_attention_groups",
)


_FALCON_TYPES = ("falcon", "RefinedWeb", "RefinedWebModel")


_ATTENTION_FREE_TYPES = ("mamba", "mamba2", "falcon_mamba", "rwkv", "xlstm", "timm_wrapper")


# facts every model has: marked missing with a reason when the config does not show them
_STRUCTURAL = {
    "model.num_attention_heads": "attention-head count",
    "model.num_key_value_heads": "KV-head count",
    "model.head_dim": "head dimension",
    "model.hidden_size": "hidden size",
    "model.num_hidden_layers": "layer count",
    "model.vocab_size": "vocabulary size",
    "model.max_position_embeddings": "context length",
    "model.dtype": "dtype (torch_dtype)",
}


LAYOUTS_PATH = Path(__file__).resolve().parents[1] / "knowledge" / "data" / "model_layouts.json"


@lru_cache(maxsize=1)
def model_layouts() -> dict[str, dict[str, Any]]:
    """model_type -> {aliases: {name vLLM reads: config key}, text: nested text-config path}."""
    try:
        data = json.loads(LAYOUTS_PATH.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # a broken install: fall back to the generic keys
        return {}
    types = data.get("types")
    return types if isinstance(types, dict) else {}


# The model types vLLM reads as MLA models (ModelArchConfigConvertor.is_deepseek_mla /
# ModelConfig.is_deepseek_mla of the 0.8.0-0.33.0 wheels), their attention shaped by
# kv_lora_rank and qk_{nope,rope}_head_dim rather than hidden_size / heads.
MLA_MODEL_TYPES = frozenset(
    {
        "AXK1",
        "axk1",
        "deepseek_v2",
        "deepseek_v3",
        "deepseek_v32",
        "deepseek_v4",
        "deepseek_v41",
        "dots3_note",
        "deepseek_mtp",
        "k3_dspark",
        "glm5_next",
        "glm5_next_text",
        "glm_moe_dsa",
        "glm4_moe_lite",
        "glm4_moe_lite_mtp",
        "kimi_k2",
        "kimi_linear",
        "longcat_flash",
        "pangu_ultra_moe",
        "pangu_ultra_moe_mtp",
        "bailing_hybrid",
        "bailing_hybrid_mtp",
        "bailing_hybrid_v3_mtp",
        "hy_v4",
        "hy_v4_mtp",
    }
)


def layout_of(model_type: Any) -> dict[str, Any] | None:
    """The known layout of a model type, or None when the table does not know the type."""
    return model_layouts().get(model_type) if isinstance(model_type, str) else None


def keys_for(name: str, model_type: Any) -> tuple[str, ...]:
    """The config keys that hold ``name`` (a name vLLM reads) for this model type, in order."""
    layout = layout_of(model_type)
    if layout is None:
        return _GENERIC_KEYS.get(name, (name,))
    alias = (layout.get("aliases") or {}).get(name)
    keys = ((alias,) if alias else ()) + (name,)
    if name in ("head_dim", "vocab_size", "max_position_embeddings"):
        # vLLM itself tries these keys whatever the model type (get_head_size,
        # derive_max_model_len_and_key); ChatGLM's vocabulary is padded_vocab_size
        keys += tuple(k for k in _GENERIC_KEYS[name] if k not in keys)
    return keys


def _read_side_json(path: Path) -> object:
    """A JSON file beside config.json, within the same bounds; any problem is a ValueError."""
    from vllm_doctor import bounds

    try:
        return bounds.json_loads(bounds.read_text(path, path.name, "json"), non_finite="null")
    except InputError as err:
        raise ValueError(err.problem) from None


# -- reading ----------------------------------------------------------------------------


def text_config_of(cfg: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """The language-model part of a config and the key path it was found under."""
    path = (layout_of(cfg.get("model_type")) or {}).get("text")
    if path:  # where transformers' get_text_config() finds it for this model type
        node: Any = cfg
        for part in path.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            return node, path
    for key in TEXT_CONFIG_KEYS:
        sub = cfg.get(key)
        if isinstance(sub, dict):
            inner, inner_key = text_config_of(sub)
            if any(k in inner for k in _LAYER_KEYS):
                return inner, key + ("." + inner_key if inner_key else "")
            if any(k in sub for k in _LAYER_KEYS):
                return sub, key
    return cfg, None


def _first(cfgs: list[dict[str, Any]], *keys: str) -> tuple[Any, str | None]:
    for cfg in cfgs:
        for key in keys:
            value = cfg.get(key)
            if value is not None:
                return value, key
    return None, None


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def family_of(model_type: str | None) -> str | None:
    """gemma4_text → gemma4, qwen3_moe → qwen3, phi3_v → phi3, gemma4_mtp → gemma4."""
    if not model_type:
        return None
    family = model_type.lower()
    for suffix in ("_text", "_mtp", "_moe", "_vl", "_v"):
        if family.endswith(suffix) and len(family) > len(suffix):
            family = family[: -len(suffix)]
    return family


def quant_scheme(
    qcfg: dict[str, Any], hf_quant: dict[str, Any] | None = None
) -> tuple[str | None, str | None, str | None]:
    """(quant_method, quant_algo, normalised scheme) of a quantization_config."""
    method = str(qcfg.get("quant_method") or "").lower() or None
    algo = qcfg.get("quant_algo")
    if hf_quant and not algo:
        algo = (hf_quant.get("quantization") or {}).get("quant_algo")
        if algo and not method:
            method = "modelopt"
    algo = str(algo) if algo else None
    scheme: str | None = None
    if method in ("modelopt", "modelopt_fp4", "modelopt_mxfp8") or algo:
        scheme = {
            "NVFP4": "nvfp4",
            "FP8": "fp8",
            "W4A8_AWQ": "w4a8",
            "W4A16_AWQ": "w4a16",
            "MXFP8": "mxfp8",
            "MIXED_PRECISION": "mixed",
            "FP8_PB_WO": "fp8",
            "FP8_PER_CHANNEL_PER_TOKEN": "fp8-dynamic",
        }.get((algo or "").upper(), (algo or "").lower() or None)
        if scheme is None and method == "modelopt_fp4":
            scheme = "nvfp4"
    elif method == "compressed-tensors":
        scheme = _compressed_tensors_scheme(qcfg)
    elif method == "fp8":
        scheme = (
            "fp8-dynamic" if str(qcfg.get("activation_scheme", "")).lower() == "dynamic" else "fp8"
        )
    elif method == "fbgemm_fp8":
        scheme = "fp8-dynamic"
    elif method == "mxfp4":
        scheme = "mxfp4"
    elif method in ("awq", "awq_marlin"):
        scheme = "awq"
    elif method in ("gptq", "gptq_marlin"):
        scheme = "gptq"
    elif method in ("bitsandbytes", "bnb"):
        scheme = "bnb"
    elif method:
        scheme = method
    return method, algo, scheme


def _compressed_tensors_scheme(qcfg: dict[str, Any]) -> str | None:
    fmt = str(qcfg.get("format") or "").lower()
    groups = qcfg.get("config_groups")
    schemes = set()
    if isinstance(groups, dict):
        for group in groups.values():
            if not isinstance(group, dict):
                continue
            w = group.get("weights") or {}
            a = group.get("input_activations") or {}
            for key, part in (("weights", w), ("input_activations", a)):
                if not isinstance(part, dict):  # compressed-tensors writes a mapping here
                    raise InputError(
                        "config.json",
                        f"quantization_config.config_groups: {key} is "
                        f"{type(part).__name__} {str(part)[:40]!r}, not a mapping",
                    )
            schemes.add(_ct_group(w, a))
    schemes.discard(None)
    if len(schemes) == 1:
        return schemes.pop()
    if len(schemes) > 1:
        return "mixed"
    if "nvfp4" in fmt:
        return "nvfp4"
    if "float-quantized" in fmt:
        return "fp8"
    if "pack-quantized" in fmt:
        return "w4a16"
    return None


def _ct_group(w: dict[str, Any], a: dict[str, Any]) -> str | None:
    if not w:
        return None
    wbits, wtype = w.get("num_bits"), str(w.get("type") or "int").lower()
    abits = a.get("num_bits") if a else None
    atype = str(a.get("type") or "int").lower() if a else None
    if wtype == "float" and wbits == 8:
        if a and atype == "float" and abits == 8:
            return "fp8-dynamic" if a.get("dynamic") else "fp8"
        return "fp8-w8a16"
    if wtype == "float" and wbits == 4:
        if a and atype == "float" and abits == 4:
            return "nvfp4"
        return "nvfp4a16"
    if wtype == "int" and wbits == 4:
        if a and abits == 8:
            return "w4a8"
        return "w4a16"
    if wtype == "int" and wbits == 8:
        if a and atype == "int" and abits == 8:
            return "w8a8-int8"
        if a and atype == "float" and abits == 8:
            return "w8a8-fp8"
        return "w8a16"
    return None


def weights_size(model_dir: Path) -> tuple[int | None, str | None]:
    """Total weight bytes: the safetensors index's metadata.total_size, else the files' sizes."""
    for index_name in ("model.safetensors.index.json", "pytorch_model.bin.index.json"):
        index = model_dir / index_name
        if index.is_file():
            try:
                data = _read_side_json(index)
                metadata = data.get("metadata") if isinstance(data, dict) else None
                total = _int((metadata or {}).get("total_size"))
            except (OSError, ValueError, AttributeError):
                total = None
            if total:
                return total, str(index)
    try:
        files = sorted(model_dir.glob("*.safetensors"))
    except OSError:
        files = []
    if files:
        try:
            return sum(f.stat().st_size for f in files), f"{len(files)} safetensors file(s)"
        except OSError:
            return None, None
    return None, None


# sizes the doctor reads from a config.json (the facts above and the memory model's count):
# a negative one, or one no tensor could have, is not a model vLLM can build
SIZE_KEYS = (
    "hidden_size",
    "intermediate_size",
    "intermediate_size_mlp",
    "moe_intermediate_size",
    "expert_intermediate_size",
    "shared_expert_intermediate_size",
    "moe_shared_expert_intermediate_size",
    "moe_latent_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "vocab_size",
    "max_position_embeddings",
    "n_routed_experts",
    "num_experts",
    "num_local_experts",
    "n_shared_experts",
    "num_experts_per_tok",
    "kv_lora_rank",
    "q_lora_rank",
    "qk_nope_head_dim",
    "qk_rope_head_dim",
    "v_head_dim",
)


MAX_SIZE = 2**40  # above any dimension or count a real checkpoint has (and a float's exact range)


def check_sizes(cfg: dict[str, Any], where: str) -> None:
    """InputError for a size in the config (or its language-model part) that no model can
    have: negative, or beyond MAX_SIZE (``vocab_size: 1e308``)."""
    text, _ = text_config_of(cfg)
    for part in (cfg, text) if text is not cfg else (cfg,):
        for key in SIZE_KEYS:
            value = part.get(key)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            if value < 0 or value > MAX_SIZE:
                raise InputError(
                    where, f"{key} {value:g} in config.json is not a size a model can have"
                )


def read_model_config(
    facts: Facts, config_path: Path, cfg: dict[str, Any], source_detail: str
) -> None:
    """Write model.* from a parsed config.json (and files beside it); InputError for sizes
    no model can have. In order: what the model is, its geometry (heads, sizes, layers,
    experts, head size, dtype), its quantization, the weights' size beside it, and the keys
    it has that the doctor does not read."""
    check_sizes(cfg, source_detail)
    facts.set("model.config_path", str(config_path), Source.CONFIG)
    reader = _ConfigReader(facts, cfg, source_detail)
    _read_identity(reader)
    _read_geometry(reader)
    _read_quantization(reader, config_path.parent)
    _read_weights_size(facts, config_path, source_detail)
    _mark_unread(facts, cfg, reader.text_type, config_path)


class _ConfigReader:
    """One config.json being read: its text config (the language model's part of a
    multimodal config), where each value came from, and the model type whose key names
    apply."""

    def __init__(self, facts: Facts, cfg: dict[str, Any], detail: str):
        self.facts = facts
        self.cfg = cfg
        self.detail = detail
        self.text, self.text_key = text_config_of(cfg)
        self.cfgs = [self.text, cfg] if self.text is not cfg else [cfg]
        self.tdetail = f"{detail}: {self.text_key}" if self.text_key else detail
        self.model_type = cfg.get("model_type") or self.text.get("model_type")
        self.text_type = self.text.get("model_type") or self.model_type

    def put(self, path: str, *keys: str) -> int | None:
        """The first of ``keys`` the config has, as an integer fact ``path``."""
        value, key = _first(self.cfgs, *keys)
        value = _int(value)
        if value is not None:
            where = self.tdetail if key in self.text and self.text is not self.cfg else self.detail
            self.facts.set(path, value, Source.CONFIG, f"{where}: {key}")
        return value

    def put_named(self, path: str, name: str) -> int | None:
        """A value vLLM reads by ``name``, from the key the model type keeps it under."""
        return self.put(path, *keys_for(name, self.text_type))


def _read_identity(reader: _ConfigReader) -> None:
    """The model's architectures, model type (and its text model's) and family."""
    facts, cfg, text, src = reader.facts, reader.cfg, reader.text, Source.CONFIG
    detail, tdetail = reader.detail, reader.tdetail
    archs = cfg.get("architectures")
    if isinstance(archs, list):
        facts.set("model.architectures", [str(a) for a in archs], src, detail)
    elif isinstance(text.get("architectures"), list):
        facts.set("model.architectures", [str(a) for a in text["architectures"]], src, tdetail)
    model_type = reader.model_type
    facts.set("model.model_type", model_type, src, detail)
    auto_map = cfg.get("auto_map")
    facts.set(
        "model.remote_config",
        isinstance(auto_map, dict) and "AutoConfig" in auto_map,
        src,
        f"{detail}: auto_map" if isinstance(auto_map, dict) else detail,
    )
    if reader.text_key:
        facts.set("model.text_model_type", text.get("model_type"), src, tdetail)
    facts.set(
        "model.family",
        family_of(str(model_type)) if model_type else None,
        Source.DERIVED,
        f"model_type {model_type}",
    )


def _read_geometry(reader: _ConfigReader) -> None:
    """Heads, KV heads, sizes, layers, context length, experts, MTP layers, MLA ranks, the
    head size and the dtype."""
    facts, text, text_type, tdetail = reader.facts, reader.text, reader.text_type, reader.tdetail
    put, put_named = reader.put, reader.put_named
    heads = put_named("model.num_attention_heads", "num_attention_heads")
    decoder = text.get("transf_decoder")
    if (
        heads is None
        and text_type == "cohere_asr"
        and isinstance(decoder, dict)
        and isinstance(decoder.get("config_dict"), dict)
    ):  # vLLM's CohereAsr convertor
        heads = _int(decoder["config_dict"].get("num_attention_heads"))
        facts.set(
            "model.num_attention_heads",
            heads,
            Source.CONFIG,
            f"{tdetail}: transf_decoder.config_dict.num_attention_heads",
        )
    _read_kv_heads(facts, text, text_type, heads, tdetail)
    hidden = put_named("model.hidden_size", "hidden_size")
    put_named("model.vocab_size", "vocab_size")
    if text_type == "longcat_flash":  # vLLM's convertor: num_hidden_layers counts sublayers
        put("model.num_hidden_layers", "num_layers")
    if put_named("model.num_hidden_layers", "num_hidden_layers") is None:
        # transformers derives it for hybrid models (NemotronH): one entry per layer
        for key in ("layers_block_type", "hybrid_override_pattern"):
            pattern = text.get(key)
            if isinstance(pattern, (list, str)) and pattern:
                facts.set(
                    "model.num_hidden_layers",
                    len(pattern),
                    Source.DERIVED,
                    f"{tdetail}: len({key})",
                )
                break
    put_named("model.max_position_embeddings", "max_position_embeddings")
    put("model.global_head_dim", "global_head_dim")
    put(
        "model.num_experts",
        "n_routed_experts",
        "num_experts",
        "num_local_experts",
        "moe_num_experts",
    )
    if "model.num_experts" not in facts and isinstance(text.get("ffn_config"), dict):
        put_experts = _int(text["ffn_config"].get("moe_num_experts"))  # DBRX
        facts.set(
            "model.num_experts",
            put_experts,
            Source.CONFIG,
            f"{tdetail}: ffn_config.moe_num_experts",
        )
    if "model.num_experts" in facts:
        put("model.moe_intermediate_size", "moe_intermediate_size", "expert_intermediate_size")
        put("model.num_experts_per_tok", "num_experts_per_tok", "moe_topk", "moe_top_k")
        put("model.num_shared_experts", "n_shared_experts", "num_shared_experts")
    put(
        "model.num_mtp_layers",
        "num_nextn_predict_layers",
        "mtp_num_hidden_layers",
        "num_mtp_layers",
        "mtp_num_layers",
    )
    # DeepSeek-V4 DSpark checkpoints carry the drafter's block in the target's own config
    put("model.dspark_block_size", "dspark_block_size")
    kv_lora = put("model.kv_lora_rank", "kv_lora_rank")
    put("model.qk_rope_head_dim", "qk_rope_head_dim")
    _read_head_dim(reader, hidden, heads, kv_lora)
    dtype, dtype_key = _first(reader.cfgs, "torch_dtype", "dtype")
    if isinstance(dtype, str):
        facts.set(
            "model.dtype",
            dtype.replace("torch.", ""),
            Source.CONFIG,
            f"{reader.detail}: {dtype_key}",
        )


def _read_head_dim(
    reader: _ConfigReader, hidden: int | None, heads: int | None, kv_lora: int | None
) -> None:
    """The attention head size: as config.json states it, else MLA's nope + rope sizes, else
    hidden / heads (never for an MLA model whose config lacks its MLA fields)."""
    facts, text_type = reader.facts, reader.text_type
    head_dim = reader.put_named("model.head_dim", "head_dim")
    if head_dim is not None and head_dim <= 0:  # some classes write 0 for "not set"
        facts.values.pop("model.head_dim", None)
        head_dim = None
    if head_dim is not None:
        return
    nope, _ = _first(reader.cfgs, "qk_nope_head_dim")
    rope, _ = _first(reader.cfgs, "qk_rope_head_dim")
    if kv_lora is not None and (nope_dim := _int(nope)) and (rope_dim := _int(rope)):
        facts.set(
            "model.head_dim",
            nope_dim + rope_dim,
            Source.DERIVED,
            "MLA: qk_nope_head_dim + qk_rope_head_dim",
        )
    elif text_type in MLA_MODEL_TYPES:
        # transformers fills the missing MLA fields from its config class's defaults, which
        # config.json does not show: hidden/heads would be a wrong head size
        facts.mark_missing(
            "model.head_dim",
            (
                f"model_type {text_type} is an MLA model (vLLM's is_deepseek_mla) but "
                "config.json lacks "
                + ", ".join(
                    k
                    for k, v in (
                        ("kv_lora_rank", kv_lora),
                        ("qk_nope_head_dim", nope),
                        ("qk_rope_head_dim", rope),
                    )
                    if v is None
                )
                + ": transformers fills them from its config class; pass a config.json "
                "that states them"
            ),
        )
    elif hidden and heads:
        facts.set(
            "model.head_dim",
            hidden // heads,
            Source.DERIVED,
            "hidden_size / num_attention_heads",
        )


def _read_quantization(reader: _ConfigReader, model_dir: Path) -> None:
    """The quantization method, algorithm and scheme, from quantization_config (or
    compression_config) and ModelOpt's hf_quant_config.json beside config.json."""
    facts, cfg, text, detail, src = (
        reader.facts,
        reader.cfg,
        reader.text,
        reader.detail,
        Source.CONFIG,
    )
    qcfg = (
        cfg.get("quantization_config")
        or cfg.get("compression_config")
        or text.get("quantization_config")
    )
    hf_quant = None
    hf_quant_path = model_dir / "hf_quant_config.json"
    if hf_quant_path.is_file():
        try:
            hf_quant = _read_side_json(hf_quant_path)
        except (OSError, ValueError):
            facts.notes.append(f"{hf_quant_path}: not valid JSON, ignored")
    if not (isinstance(qcfg, dict) or isinstance(hf_quant, dict)):
        return
    method, algo, scheme = quant_scheme(
        qcfg if isinstance(qcfg, dict) else {}, hf_quant if isinstance(hf_quant, dict) else None
    )
    qdetail = f"{detail}: quantization_config" if isinstance(qcfg, dict) else str(hf_quant_path)
    facts.set("model.quant_method", method, src, qdetail)
    block = qcfg.get("weight_block_size") if isinstance(qcfg, dict) else None
    if (
        isinstance(block, list)
        and len(block) == 2
        and all(isinstance(b, int) and not isinstance(b, bool) and b > 0 for b in block)
    ):
        facts.set("model.quant_block_n", block[0], src, f"{qdetail}.weight_block_size")
        facts.set("model.quant_block_k", block[1], src, f"{qdetail}.weight_block_size")
    if algo:
        algo_src = (
            qdetail if isinstance(qcfg, dict) and qcfg.get("quant_algo") else str(hf_quant_path)
        )
        facts.set("model.quant_algo", algo, src, algo_src)
    facts.set(
        "model.quant_scheme",
        scheme,
        Source.DERIVED,
        f"from {method}" + (f" / {algo}" if algo else ""),
    )


def _read_weights_size(facts: Facts, config_path: Path, detail: str) -> None:
    """The checkpoint's size from the files beside config.json; and that the model's facts
    were read, not inferred from its name."""
    size, size_detail = weights_size(config_path.parent)
    if size:
        facts.set("model.weights_bytes", size, Source.CONFIG, size_detail)
    else:
        facts.mark_missing(
            "model.weights_bytes", f"no safetensors index or weight files beside {config_path}"
        )
    facts.set("model.inferred", False, Source.CONFIG, detail)


def _read_kv_heads(
    facts: Facts, text: dict[str, Any], model_type: Any, heads: int | None, where: str
) -> int | None:
    """KV heads as vLLM counts them (ModelConfig.get_total_num_kv_heads and its convertors)."""
    src = Source.CONFIG
    if (
        model_type in (*_FALCON_TYPES, "gpt_bigcode")
        and text.get("multi_query")
        and not text.get("new_decoder_architecture")
    ):
        facts.set("model.num_key_value_heads", 1, src, f"{where}: multi_query (one KV head)")
        return 1
    attn = text.get("attn_config")
    if model_type in ("dbrx", "mpt") and isinstance(attn, dict):
        value = _int(attn.get("kv_n_heads"))
        if value is not None:
            facts.set("model.num_key_value_heads", value, src, f"{where}: attn_config.kv_n_heads")
            return value
    decoder = text.get("transf_decoder")  # Cohere ASR: the decoder's own config
    if (
        model_type == "cohere_asr"
        and isinstance(decoder, dict)
        and isinstance(decoder.get("config_dict"), dict)
    ):
        value = _int(decoder["config_dict"].get("num_attention_heads"))
        if value is not None:
            facts.set(
                "model.num_key_value_heads",
                value,
                src,
                f"{where}: transf_decoder.config_dict.num_attention_heads",
            )
            return value
    if model_type == "nemotron-nas" and heads and isinstance(text.get("block_configs"), list):
        for block in text["block_configs"]:
            attention = block.get("attention") if isinstance(block, dict) else None
            if (
                isinstance(attention, dict)
                and not attention.get("no_op")
                and (group := _int(attention.get("n_heads_in_group")))
            ):
                value = heads // group
                facts.set(
                    "model.num_key_value_heads",
                    value,
                    Source.DERIVED,
                    "num_attention_heads / block_configs[].attention.n_heads_in_group",
                )
                return value
        return None
    layout = layout_of(model_type) or {}
    aliases = layout.get("aliases") or {}
    keys = [aliases[k] for k in ("num_key_value_heads", "num_kv_heads") if k in aliases]
    for key in [*keys, *_KV_KEYS]:
        value = _int(text.get(key))
        if value is not None:
            facts.set("model.num_key_value_heads", value, src, f"{where}: {key}")
            return value
    if heads is not None:  # no grouped-query key: every head has its own KV head
        facts.set(
            "model.num_key_value_heads",
            heads,
            Source.DERIVED,
            "no KV-head key in config: equal to the attention heads",
        )
    return heads


def _mark_unread(facts: Facts, cfg: dict[str, Any], model_type: Any, config_path: Path) -> None:
    """Mark every value a model must have but this config did not show as missing."""
    kind = f"model_type {model_type}" if model_type else "no model_type"
    if layout_of(model_type) is None and model_type:
        kind += ", a type the doctor has no layout for"
    for path, what in _STRUCTURAL.items():
        if path in facts or path in facts.missing:  # known, or unknown with its own reason
            continue
        note = kind
        if model_type in _ATTENTION_FREE_TYPES and path in (
            "model.num_attention_heads",
            "model.num_key_value_heads",
            "model.head_dim",
        ):
            note += ", attention-free: vLLM counts 0 heads"
        keys = (
            keys_for(path.split(".", 1)[1], model_type)
            if path != "model.dtype"
            else ("torch_dtype", "dtype")
        )
        if path == "model.num_key_value_heads":
            keys = _KV_KEYS
        facts.mark_missing(
            path,
            f"{config_path.name} ({note}) has no {what} under any key "
            f"vLLM reads ({', '.join(keys)})",
        )
    if "model.architectures" not in facts:
        facts.mark_missing("model.architectures", f"{config_path.name} has no architectures list")
    if "model.model_type" not in facts:
        facts.mark_missing("model.model_type", f"{config_path.name} has no model_type")
