"""Every architecture in a release's model registry, read statically (KIND "registry").

Source: ``model_executor/models/registry.py`` — the dicts merged into ``_VLLM_MODELS``
(architecture -> (module, class)). Each class is followed through its module's imports and
bases (the resolver of ``tools/gen_pp_support.py``) to the interfaces it declares:
``SupportsPP`` (or ``supports_pp = True``), ``SupportsLoRA`` (``supports_lora``),
``SupportsMultiModal`` (``supports_multimodal``), ``SupportsQuant``, ``VllmModelForPooling``
(``is_pooling_model = True``: ``--runner auto`` picks pooling). A class that cannot be
followed statically gives ``null`` for those, never ``false``. A multimodal class also gets
``modalities``: the keys of ``get_supported_mm_limits`` of the processing info its
``@MULTIMODAL_REGISTRY.register_processor(..., info=...)`` names (followed through bases and
info builder functions).

Value per architecture::

    {"module": "llama", "class": "LlamaForCausalLM", "group": "text_generation",
     "multimodal": false, "pp": true, "lora": true, "quant": false}

One more key, ``@release``, holds what the release does for an architecture it does not
register: ``{"transformers_fallback": bool, "where": file, "previously_supported": {arch:
last release}}`` (see ``fallback()``).
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import gen_pp_support

KIND = "registry"
RELEASE_KEY = "@release"
REGISTRY = "model_executor/models/registry.py"
META = {
    "key": "architecture name as config.json writes it; '@release' holds release-wide facts",
    "value": {
        "module": "module under vllm.model_executor.models (or a dotted vllm path)",
        "class": "the class vLLM instantiates",
        "group": "the registry dict it is listed in (text_generation, multimodal, embedding, "
        "speculative_decoding, transformers_backend, ...)",
        "multimodal": "listed as multimodal or the class implements SupportsMultiModal",
        "pp": "the class implements SupportsPP (null: the class could not be followed)",
        "lora": "the class implements SupportsLoRA (null: could not be followed)",
        "quant": "the class implements SupportsQuant (null: could not be followed)",
        "pooling": "the class is a pooling model (VllmModelForPooling / is_pooling_model = True): "
        "runner auto picks pooling for it (null: could not be followed)",
        "modalities": "multimodal classes: the modalities get_supported_mm_limits of the "
        "processing info registered for the class returns (every return "
        "merged; null: not a literal, or could not be followed)",
        "@release.transformers_fallback": "an architecture the registry lacks is tried with "
        "vLLM's Transformers backend (model_impl auto)",
        "@release.convert_suffixes": "suffixes swapped to find a registered base class to "
        "convert (XForSequenceClassification -> XForCausalLM)",
    },
    "sources": [REGISTRY, "model_executor/model_loader/utils.py"],
}
INTERFACES = {
    "pp": ("SupportsPP", "supports_pp"),
    "lora": ("SupportsLoRA", "supports_lora"),
    "multimodal": ("SupportsMultiModal", "supports_multimodal"),
    "quant": ("SupportsQuant", None),
    "pooling": ("VllmModelForPooling", "is_pooling_model"),
}


class ReleaseResolver(gen_pp_support.Resolver):
    """gen_pp_support's resolver, reading modules out of a ReleaseSource (wheel or tree)."""

    def __init__(self, release):
        super().__init__(Path("/"))
        self.release = release

    def module(self, dotted: str):
        if dotted in self._modules:
            return self._modules[dotted]
        mod = None
        parts = dotted.split(".")
        if parts[0] == "vllm":
            rel = "/".join(parts[1:])
            for candidate in (f"{rel}.py", f"{rel}/__init__.py" if rel else "__init__.py"):
                tree = self.release.tree(candidate)
                if tree is not None:
                    mod = gen_pp_support.Module(Path(candidate), dotted, tree)
                    self._bind(mod, tree.body)
                    break
        self._modules[dotted] = mod
        return mod


def registry_entries(tree: ast.Module) -> dict[str, tuple[str, str, str]] | None:
    """architecture -> (module, class, group) from the dicts merged into _VLLM_MODELS."""
    dicts: dict[str, ast.Dict] = {}
    for stmt in tree.body:
        target, value = gen_pp_support._single_assignment(stmt)
        if isinstance(target, ast.Name) and isinstance(value, ast.Dict):
            dicts[target.id] = value
    merged = dicts.get("_VLLM_MODELS")
    if merged is None:
        return None
    out: dict[str, tuple[str, str, str]] = {}
    for key, value in zip(merged.keys, merged.values, strict=True):
        if key is not None or not isinstance(value, ast.Name) or value.id not in dicts:
            continue
        group = value.id.strip("_").lower().removesuffix("_models").removesuffix("_model")
        for k, v in zip(dicts[value.id].keys, dicts[value.id].values, strict=True):
            try:
                arch = ast.literal_eval(k) if k is not None else None
                mod_cls = ast.literal_eval(v)
            except ValueError:
                continue
            if isinstance(arch, str) and isinstance(mod_cls, tuple) and len(mod_cls) == 2:
                out[arch] = (mod_cls[0], mod_cls[1], group)
    return out


def fallback(release) -> dict[str, Any]:
    """Whether an unregistered architecture is tried with the Transformers backend.

    0.8.0-0.10.0: ``model_loader/utils.py: resolve_transformers_fallback`` (later
    ``resolve_transformers_arch``; model_impl auto or transformers); from 0.10.1: ``_ModelRegistry._try_resolve_transformers`` in registry.py. Both
    need the class in the transformers library (``getattr(transformers, arch)``) or an
    ``AutoModel`` entry in config.json's ``auto_map`` (custom code, --trust-remote-code),
    and a backend-compatible class; ``--model-impl vllm`` turns the fallback off.
    """
    registry = release.text(REGISTRY) or ""
    loader = release.text("model_executor/model_loader/utils.py") or ""
    where = None
    if "def _try_resolve_transformers" in registry:
        where = REGISTRY
    elif re.search(r"def resolve_transformers_(fallback|arch)\(", loader):
        where = "model_executor/model_loader/utils.py"
    info: dict[str, Any] = {"transformers_fallback": where is not None}
    if where:
        info["where"] = where
    suffixes = _convert_suffixes(release, registry)
    if suffixes:
        info["convert_suffixes"] = suffixes
    tree = release.tree(REGISTRY)
    if tree is not None:
        for stmt in tree.body:
            target, value = gen_pp_support._single_assignment(stmt)
            if isinstance(target, ast.Name) and target.id == "_PREVIOUSLY_SUPPORTED_MODELS":
                try:
                    info["previously_supported"] = ast.literal_eval(value)
                except ValueError:
                    release.problem("_PREVIOUSLY_SUPPORTED_MODELS is not a literal")
    return info


def _convert_suffixes(release, registry_text: str) -> list[str]:
    """Architecture suffixes vLLM swaps to find a registered base class to convert
    (``XForSequenceClassification`` served by ``XForCausalLM`` through an adapter):
    ``_SUFFIX_TO_DEFAULTS`` of the model config (0.10.1+), or the one hard-coded
    ForSequenceClassification -> ForCausalLM swap of earlier ``_normalize_archs``."""
    for rel in ["config/model.py", "config/__init__.py", "config.py"]:
        tree = release.tree(rel)
        if tree is None:
            continue
        for stmt in tree.body:
            target, value = gen_pp_support._single_assignment(stmt)
            if isinstance(target, ast.Name) and target.id == "_SUFFIX_TO_DEFAULTS":
                try:
                    pairs = ast.literal_eval(value)
                except ValueError:
                    release.problem(f"{rel}: _SUFFIX_TO_DEFAULTS is not a literal")
                    return []
                return [p[0] for p in pairs if isinstance(p, tuple) and isinstance(p[0], str)]
    if 'replace("ForSequenceClassification"' in registry_text.replace("\n", "").replace(" ", ""):
        return ["ForSequenceClassification", "ForCausalLM"]
    return []


def _class_and_bases(resolver, mod, cls: ast.ClassDef, depth: int = 0):
    """The class, then its bases (depth first), as (module, ClassDef)."""
    yield mod, cls
    if depth > 12:
        return
    for base in cls.bases:
        found = resolver.lookup_expr(mod, base)
        if found and found[0] == "class":
            yield from _class_and_bases(resolver, found[1], found[2], depth + 1)


def _mm_limit_keys(resolver, mod, cls: ast.ClassDef) -> list[str] | None:
    """The keys every ``return {...}`` of ``get_supported_mm_limits`` gives (the class or its
    nearest base defining it); None when a return is not a literal dict."""
    for _owner_mod, owner in _class_and_bases(resolver, mod, cls):
        for stmt in owner.body:
            if isinstance(stmt, ast.FunctionDef) and stmt.name == "get_supported_mm_limits":
                keys: set[str] = set()
                for node in ast.walk(stmt):
                    if isinstance(node, ast.Return):
                        if not isinstance(node.value, ast.Dict) or not all(
                            isinstance(k, ast.Constant) and isinstance(k.value, str)
                            for k in node.value.keys
                        ):
                            return None
                        keys |= {k.value for k in node.value.keys}
                return sorted(keys)
    return None


def _info_classes(resolver, mod, expr: ast.expr):
    """The processing-info classes an ``info=`` argument names: a class, or a builder
    function's returned classes."""
    found = resolver.lookup_expr(mod, expr)
    if found and found[0] == "class":
        return [(found[1], found[2])]
    if isinstance(expr, ast.Name):  # a builder function of this module
        for stmt in mod.tree.body:
            if isinstance(stmt, ast.FunctionDef) and stmt.name == expr.id:
                out = []
                for node in ast.walk(stmt):
                    if isinstance(node, ast.Return) and isinstance(node.value, ast.Call):
                        cls = resolver.lookup_expr(mod, node.value.func)
                        if not cls or cls[0] != "class":
                            return None
                        out.append((cls[1], cls[2]))
                return out or None
    return None


def modalities(resolver, dotted: str, cls_name: str) -> list[str] | None:
    """The modalities a multimodal class's registered processing info supports."""
    mod = resolver.module(dotted)
    found = resolver.lookup(mod, cls_name) if mod is not None else None
    if not found or found[0] != "class":
        return None
    for owner_mod, owner in _class_and_bases(resolver, found[1], found[2]):
        for deco in owner.decorator_list:
            if (
                isinstance(deco, ast.Call)
                and isinstance(deco.func, ast.Attribute)
                and deco.func.attr == "register_processor"
            ):
                info = next(
                    (k.value for k in deco.keywords if k.arg == "info"),
                    deco.args[1] if len(deco.args) > 1 else None,
                )
                classes = _info_classes(resolver, owner_mod, info) if info is not None else None
                if not classes:
                    return None
                keys: set[str] = set()
                for info_mod, info_cls in classes:
                    these = _mm_limit_keys(resolver, info_mod, info_cls)
                    if these is None:
                        return None
                    keys |= set(these)
                return sorted(keys)
    return None


def extract(release) -> dict[str, Any]:
    tree = release.tree(REGISTRY)
    if tree is None:
        release.problem(f"{REGISTRY} is missing or does not parse")
        return {}
    entries = registry_entries(tree)
    if entries is None:
        release.problem(f"{REGISTRY} has no _VLLM_MODELS dict")
        return {}
    resolver = ReleaseResolver(release)
    out: dict[str, Any] = {RELEASE_KEY: fallback(release)}
    unresolved = []
    for arch, (module, cls, group) in entries.items():
        dotted = module if module.startswith("vllm.") else f"vllm.model_executor.models.{module}"
        value: dict[str, Any] = {"module": module, "class": cls, "group": group}
        for field, (interface, flag) in INTERFACES.items():
            value[field] = resolver.implements(dotted, cls, interface, flag)
        if value["pp"] is None:
            unresolved.append(arch)
        if group == "multimodal":
            value["multimodal"] = True
        if value["multimodal"]:
            value["modalities"] = modalities(resolver, dotted, cls)
        out[arch] = value
    if unresolved:
        release.problem(
            f"{len(unresolved)} classes could not be followed statically "
            f"(interfaces unknown): {', '.join(sorted(unresolved)[:8])}"
            + (" ..." if len(unresolved) > 8 else "")
        )
    return out


def audit(table: dict[str, Any], rules_dir: Path) -> list[str]:
    """PAR004's never-PP list against SupportsPP in the releases it covers (0.10.0+)."""
    import yaml
    from packaging.version import Version

    rule = yaml.safe_load((rules_dir / "par" / "PAR004.yaml").read_text(encoding="utf-8"))
    listed: set[str] = set()
    for cond in rule["when"]["all"]:
        if cond.get("fact") == "model.architectures":
            listed = set(cond.get("contains_any") or [])
    releases = table["releases"]
    problems = []
    for arch in sorted(listed):
        spans = [
            s for s in table["entries"].get(arch, []) if Version(s["last"]) >= Version("0.10.0")
        ]
        pp_in = [f"{s['first']}..{s['last']}" for s in spans if s["value"].get("pp") is True]
        if pp_in:
            problems.append(
                f"PAR004 lists {arch} as never supporting PP, but its class "
                f"implements SupportsPP in {', '.join(pp_in)}"
            )
    # the other direction: registered from 0.10.0 on, resolved, never PP, and not listed
    for arch, spans in table["entries"].items():
        if arch.startswith("@") or arch in listed:
            continue
        recent = [s for s in spans if Version(s["last"]) >= Version("0.10.0")]
        if recent and all(s["value"].get("pp") is False for s in recent):
            first = max(recent[0]["first"], "0.10.0", key=Version)
            problems.append(
                f"{arch} never implements SupportsPP ({first}..{recent[-1]['last']}) "
                "but PAR004 does not list it"
            )
    del releases
    return problems
