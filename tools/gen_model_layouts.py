"""Generate where each model type keeps its heads and sizes, and the config corpus.

Maintainer tool (imports transformers; the doctor itself never does):

    pip install transformers            # configs only, no torch needed
    python tools/gen_model_layouts.py   # both outputs below
    python tools/gen_model_layouts.py --layouts-only

Outputs
  vllm_doctor/knowledge/data/model_layouts.json
      per model_type: the config keys transformers' ``attribute_map`` reads for the names vLLM
      asks for (``num_attention_heads`` is ``n_head`` in GPT-2, ``n_heads`` in MPT/DBRX,
      ``encoder_attention_heads`` in Whisper and BART), and where ``get_text_config()`` finds
      the language model of a composite config (``thinker_config.text_config``). vLLM's own
      config classes (``vllm/transformers_utils/configs/*.py`` of the newest wheel) are read
      from source and override transformers' for their model types, as vLLM registers them.
  tests/fixtures/model-configs/corpus.jsonl.gz
      one config.json per architecture of the newest vLLM registry that transformers has a
      config class for (``AutoConfig.for_model(model_type).to_dict()`` with ``architectures``
      set), plus the real configs in tests/fixtures/models; each line carries what
      transformers itself reads from the config (the oracle the CI test checks against).
  tests/fixtures/model-configs/not-covered.json
      registry architectures with no transformers config class, and why.
"""

from __future__ import annotations

import argparse
import ast
import gzip
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYOUTS = ROOT / "vllm_doctor" / "knowledge" / "data" / "model_layouts.json"
CORPUS_DIR = ROOT / "tests" / "fixtures" / "model-configs"
REAL_MODELS = ROOT / "tests" / "fixtures" / "models"
WHEELS = Path("/work/wheels")

# the names vLLM reads from the text config (ModelArchConfigConvertorBase, CONFIG_FIELD_ALIASES)
FIELDS = (
    "num_attention_heads",
    "num_key_value_heads",
    "num_kv_heads",
    "head_dim",
    "hidden_size",
    "num_hidden_layers",
    "vocab_size",
    "max_position_embeddings",
    "num_experts",
    "num_local_experts",
    "n_routed_experts",
)
# registry dictionaries that make up _VLLM_MODELS
REGISTRY_DICTS = (
    "_TEXT_GENERATION_MODELS",
    "_EMBEDDING_MODELS",
    "_LATE_INTERACTION_MODELS",
    "_REWARD_MODELS",
    "_TOKEN_CLASSIFICATION_MODELS",
    "_SEQUENCE_CLASSIFICATION_MODELS",
    "_MULTIMODAL_MODELS",
    "_SPECULATIVE_DECODING_MODELS",
    "_TRANSFORMERS_SUPPORTED_MODELS",
    "_TRANSFORMERS_BACKEND_MODELS",
)
# vLLM's base convertor: KV-head keys in the order it tries them (config.CONFIG_FIELD_ALIASES)
KV_KEYS = (
    "n_head_kv",
    "num_kv_heads",
    "num_key_value_heads",
    "multi_query_group_num",
    "num_attention_groups",
)


def newest_vllm_source() -> Path:
    sys.path.insert(0, str(ROOT))
    from tools.wheelsrc import find_releases

    newest = find_releases(WHEELS)[-1]
    src = WHEELS / "src" / str(newest.version) / "vllm"
    if not src.is_dir():
        sys.exit(f"{src}: unpack the newest wheel first")
    return src


# -- vLLM's own config classes (read from source, never imported) -------------------------


def vllm_config_classes(vllm_src: Path) -> dict[str, dict[str, str]]:
    """model_type -> attribute_map of the config classes vLLM registers itself
    (``_CONFIG_REGISTRY`` in transformers_utils/config.py: ``RefinedWeb="RWConfig"``)."""
    by_class: dict[str, dict[str, str]] = {}
    for path in sorted((vllm_src / "transformers_utils" / "configs").rglob("*.py")):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except SyntaxError:
            continue
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            for stmt in cls.body:
                if (
                    isinstance(stmt, ast.Assign)
                    and len(stmt.targets) == 1
                    and getattr(stmt.targets[0], "id", None) == "attribute_map"
                    and isinstance(stmt.value, ast.Dict)
                ):
                    by_class[cls.name] = {
                        k.value: v.value
                        for k, v in zip(stmt.value.keys, stmt.value.values, strict=True)
                        if isinstance(k, ast.Constant) and isinstance(v, ast.Constant)
                    }
            by_class.setdefault(cls.name, {})
    found: dict[str, dict[str, str]] = {}
    tree = ast.parse((vllm_src / "transformers_utils" / "config.py").read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.AnnAssign)
            and getattr(node.target, "id", None) == "_CONFIG_REGISTRY"
            and isinstance(node.value, ast.Call)
        ):
            for kw in node.value.keywords:
                if kw.arg and isinstance(kw.value, ast.Constant):
                    found[kw.arg] = by_class.get(kw.value.value, {})
    return found


def registry_architectures(vllm_src: Path) -> dict[str, str]:
    """Architecture -> the vLLM module implementing it, for every registered architecture."""
    tree = ast.parse((vllm_src / "model_executor" / "models" / "registry.py").read_text())
    archs: dict[str, str] = {}
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        if getattr(target, "id", None) in REGISTRY_DICTS and isinstance(node.value, ast.Dict):
            for key, value in zip(node.value.keys, node.value.values, strict=True):
                if isinstance(key, ast.Constant):
                    module = (
                        value.elts[0].value
                        if isinstance(value, ast.Tuple) and isinstance(value.elts[0], ast.Constant)
                        else ""
                    )
                    archs.setdefault(key.value, module)
    return dict(sorted(archs.items()))


def why_no_config(arch: str, module: str, vllm_src: Path) -> str:
    configs = vllm_src / "transformers_utils" / "configs"
    for name in (module, module.split("_")[0]):
        if name and ((configs / f"{name}.py").is_file() or (configs / name).is_dir()):
            return (
                f"no transformers config class: vLLM ships it "
                f"(transformers_utils/configs/{name}.py)"
            )
    return (
        "no transformers config class: the checkpoint brings its own (trust_remote_code) "
        f"or reuses another model's config; vLLM module models/{module}.py"
    )


# -- transformers ---------------------------------------------------------------------------


def _path_of(root, target, depth: int = 2) -> str | None:
    """The attribute path from ``root`` to the sub-config object ``target``."""
    from transformers import PretrainedConfig

    if depth == 0:
        return None
    for key, value in vars(root).items():
        if value is target:
            return key
        if isinstance(value, PretrainedConfig):
            inner = _path_of(value, target, depth - 1)
            if inner:
                return f"{key}.{inner}"
    return None


def layouts(vllm_src: Path) -> dict:
    import transformers
    from transformers import CONFIG_MAPPING

    types: dict[str, dict] = {}
    for model_type in sorted(CONFIG_MAPPING.keys()):
        try:
            cls = CONFIG_MAPPING[model_type]
        except Exception:  # a lazily imported module that fails: skip the type
            continue
        entry: dict = {}
        amap = {k: v for k, v in (getattr(cls, "attribute_map", None) or {}).items() if k in FIELDS}
        if amap:
            entry["aliases"] = amap
        try:
            cfg = cls()
            text = cfg.get_text_config()
        except Exception:
            text = None
        if text is not None and text is not cfg:
            path = _path_of(cfg, text)
            if path:
                entry["text"] = path
        types[model_type] = entry  # an empty entry still says: the layout is known
    for model_type, all_aliases in vllm_config_classes(vllm_src).items():
        amap = {k: v for k, v in all_aliases.items() if k in FIELDS}
        entry = types.setdefault(model_type, {})
        if amap:
            entry["aliases"] = amap
        entry["source"] = "vllm"
        if not entry.get("aliases"):
            entry.pop("aliases", None)
    return {
        "kind": "model_layouts",
        "format": 1,
        "generated_by": "tools/gen_model_layouts.py",
        "transformers": transformers.__version__,
        "vllm": vllm_src.parent.name,
        "meaning": "model_type -> aliases: {name vLLM reads: config key that holds it} from "
        "the config class's attribute_map; text: the key path of the language-model "
        "config that get_text_config() returns; source: vllm when vLLM ships the "
        "config class itself",
        "types": types,
    }


def arch_to_model_type() -> dict[str, str]:
    """Architecture class name -> model_type, from transformers' auto mappings."""
    import transformers.models.auto.modeling_auto as auto

    candidates: dict[str, list[str]] = {}
    for attr in dir(auto):
        mapping = getattr(auto, attr)
        if attr.endswith("_MAPPING_NAMES") and isinstance(mapping, dict):
            for model_type, classes in mapping.items():
                for cls in classes if isinstance(classes, (list, tuple)) else [classes]:
                    if model_type not in candidates.setdefault(cls, []):
                        candidates[cls].append(model_type)

    def best(cls: str, types: list[str]) -> str:
        # GPT2LMHeadModel serves gpt2 and gpt-sw3: take the type the class is named after
        arch = _normal(cls)
        named = [t for t in types if arch.startswith(_normal(t))]
        return max(named, key=len) if named else types[0]

    return {cls: best(cls, types) for cls, types in candidates.items()}


# Layouts the doctor must read although the newest registry has no architecture for them:
# supported by older releases, or served through a plugin (architecture -> model_type, why).
EXTRA_ARCHITECTURES = {
    "MptForCausalLM": (
        "mpt",
        "in the registry until 0.27.x (heads under n_heads, KV heads under attn_config.kv_n_heads)",
    ),
    "RwkvForCausalLM": ("rwkv", "attention-free: no head count at all"),
    "T5ForConditionalGeneration": ("t5", "encoder-decoder: heads under num_heads"),
    "BartForConditionalGeneration": (
        "bart",
        "served by the bart plugin (_OOT_SUPPORTED_MODELS): heads under encoder_attention_heads",
    ),
}


def _normal(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


_ARCH_SUFFIX = re.compile(
    r"(ForCausalLM|ForConditionalGeneration|LMHeadModel|ForSequenceClassification|"
    r"ForTokenClassification|ForMaskedLM|ForRetrieval|ForEmbedding|EmbeddingModel|"
    r"ForRewardModel|ForProcessRewardModel|ForSpeechSeq2Seq|Model|MTP)$"
)


# Architectures whose checkpoints carry the config of another model type: drafters, MTP heads,
# bidirectional/embedding variants and vLLM's Transformers backend (any transformers model).
_BASED_ON = [
    (r"^(Eagle3?|Peagle|PEagle)?(Llama|LlamaForCausalLMEagle3)", "llama"),
    (r"^Eagle3?(DeepseekV[23]|DeepSeekMTP)|^DeepSeekMTPModel|^DeepseekV32MTP", "deepseek_v3"),
    (r"^Eagle3?Qwen3vl", "qwen3_vl"),
    (r"^Eagle3?Qwen2_5vl", "qwen2_5_vl"),
    (r"^(Eagle3?|Peagle)Qwen3|^Qwen3XPress|^VoyageQwen3", "qwen3"),
    (r"^EagleMistral", "mistral"),
    (r"^EagleCohere", "cohere"),
    (r"^EagleLlama4", "llama4"),
    (r"^Glm4MoeMTP|^GlmOcrMTP", "glm4_moe"),
    (r"^Glm4MoeLiteMTP", "glm4_moe_lite"),
    (r"^ErnieMTP", "ernie4_5_moe"),
    (r"^NemotronHMTP|^NemotronHPuzzle", "nemotron_h"),
    (r"^Phi3V", "phi3"),
    (r"^Gemma4(MTP|DSpark)", "gemma4_text"),
    (r"^Lfm2Bidirectional|^ColBERTLfm2", "lfm2"),
    (r"^ColBERTModernBert", "modernbert"),
    (r"^ColBERTJinaRoberta|^HF_ColBERT|^BgeM3|^BertSplade", "xlm-roberta"),
    (r"^Transformers(MultiModal)?(MoE)?", "llama"),
]


def guess_model_type(arch: str, known: list[str]) -> tuple[str | None, str]:
    """A model_type for an architecture: its stem (Qwen3MoeForCausalLM -> qwen3_moe), else the
    base model whose config its checkpoints carry. Returns (model_type, how)."""
    stem = _normal(_ARCH_SUFFIX.sub("", arch))
    by_norm = {_normal(t): t for t in known}
    if stem in by_norm:
        return by_norm[stem], "architecture stem"
    for pattern, model_type in _BASED_ON:
        if re.search(pattern, arch) and model_type in known:
            return model_type, "config of the base model"
    return None, ""


def oracle(cfg_dict: dict) -> dict:
    """What transformers itself reads from a config dict, in the way vLLM asks for it."""
    from transformers import AutoConfig

    data = dict(cfg_dict)
    model_type = data.pop("model_type")
    cfg = AutoConfig.for_model(model_type, **data)
    try:
        text = cfg.get_text_config()
    except ValueError:
        text = cfg
    heads = getattr(text, "num_attention_heads", None)
    kv = None
    if (
        model_type in ("falcon", "RefinedWeb", "RefinedWebModel")
        and not getattr(text, "new_decoder_architecture", False)
        and getattr(text, "multi_query", False)
    ):
        kv = 1
    elif model_type in ("dbrx", "mpt"):
        attn = getattr(text, "attn_config", None)
        kv = attn.get("kv_n_heads") if isinstance(attn, dict) else getattr(attn, "kv_n_heads", None)
    else:
        for key in KV_KEYS:
            value = getattr(text, key, None)
            if value is not None:
                kv = value
                break
    if kv is None:
        kv = heads
    layers = getattr(text, "num_hidden_layers", None)
    if model_type == "longcat_flash":  # vLLM's LongCatFlash convertor reads num_layers
        layers = getattr(text, "num_layers", layers)
    result = {
        "num_attention_heads": heads,
        "num_key_value_heads": kv,
        "hidden_size": getattr(text, "hidden_size", None),
        "num_hidden_layers": layers,
        "vocab_size": getattr(text, "vocab_size", None),
    }
    return {k: v for k, v in result.items() if isinstance(v, int) and not isinstance(v, bool)}


_DROP = ("id2label", "label2id", "transformers_version", "_name_or_path")


def _compact(value):
    """Drop the keys that only bloat the corpus (label maps, version stamps)."""
    if isinstance(value, dict):
        return {k: _compact(v) for k, v in value.items() if k not in _DROP}
    return value


def corpus(vllm_src: Path) -> tuple[list[dict], list[dict]]:
    from transformers import CONFIG_MAPPING, AutoConfig

    known = list(CONFIG_MAPPING.keys())
    by_class = arch_to_model_type()
    lines, not_covered = [], []
    archs = registry_architectures(vllm_src)
    for arch in EXTRA_ARCHITECTURES:
        archs.setdefault(arch, "")
    for arch, module in archs.items():
        model_type, how = by_class.get(arch), "transformers auto mapping"
        if arch in EXTRA_ARCHITECTURES:
            model_type, how = EXTRA_ARCHITECTURES[arch][0], EXTRA_ARCHITECTURES[arch][1]
        if model_type is None:
            model_type, how = guess_model_type(arch, known)
        if model_type is None:
            not_covered.append(
                {"architecture": arch, "reason": why_no_config(arch, module, vllm_src)}
            )
            continue
        try:
            cfg = AutoConfig.for_model(model_type)
            data = _compact(cfg.to_dict())
        except Exception as err:
            not_covered.append(
                {
                    "architecture": arch,
                    "reason": f"transformers {model_type} config has no usable defaults: "
                    f"{type(err).__name__}: {str(err)[:120]}",
                }
            )
            continue
        data["architectures"] = [arch]
        data["model_type"] = model_type
        try:
            truth = oracle(data)
        except Exception as err:
            not_covered.append(
                {
                    "architecture": arch,
                    "reason": f"transformers cannot reload "
                    f"its own {model_type} defaults: {type(err).__name__}",
                }
            )
            continue
        lines.append(
            {
                "name": f"{arch} ({model_type} defaults)",
                "architecture": arch,
                "source": f"transformers {type(cfg).__name__}() defaults ({how})",
                "config": data,
                "transformers_reads": truth,
            }
        )
    for path in sorted(REAL_MODELS.glob("*/config.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        try:
            truth = oracle(data)
        except Exception:
            truth = {}
        for arch in data.get("architectures") or [None]:
            lines.append(
                {
                    "name": path.parent.name,
                    "architecture": arch,
                    "source": f"tests/fixtures/models/{path.parent.name}/config.json",
                    "config": _compact(data),
                    "transformers_reads": truth,
                }
            )
            break
    return lines, not_covered


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layouts-only", action="store_true")
    args = parser.parse_args()
    vllm_src = newest_vllm_source()
    LAYOUTS.write_text(
        json.dumps(layouts(vllm_src), sort_keys=True, separators=(",", ":")) + "\n",
        encoding="utf-8",
    )
    print(f"wrote {LAYOUTS.relative_to(ROOT)}")
    if args.layouts_only:
        return 0
    lines, not_covered = corpus(vllm_src)
    CORPUS_DIR.mkdir(parents=True, exist_ok=True)
    with gzip.open(CORPUS_DIR / "corpus.jsonl.gz", "wt", encoding="utf-8", compresslevel=9) as out:
        for line in lines:
            out.write(json.dumps(line, sort_keys=True, separators=(",", ":"), default=str) + "\n")
    (CORPUS_DIR / "not-covered.json").write_text(
        json.dumps(not_covered, indent=1) + "\n", encoding="utf-8"
    )
    archs = {line["architecture"] for line in lines}
    print(
        f"wrote {len(lines)} configs ({len(archs)} architectures); "
        f"{len(not_covered)} architectures not covered"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
