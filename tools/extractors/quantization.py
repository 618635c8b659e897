"""Every quantization method of one release and what its source states (KIND "quantization").

Read statically from ``model_executor/layers/quantization/__init__.py`` (``QUANTIZATION_METHODS``
as a list or ``get_args(QuantizationMethods)``, the ``method_to_config`` map of
``get_quantization_config``, ``DEPRECATED_QUANTIZATION_METHODS``), each config class's
``get_min_capability`` / ``get_supported_act_dtypes`` / ``override_quantization_method``
(inherited ones followed through the base classes), the compressed-tensors schemes, the
platforms' ``supported_quantization`` lists and the Marlin capability gates.

Keys (values hold in the release; ``null`` where the source computes the value at run time,
with the reason under ``unresolved``):

* ``method:<name>`` — ``{"config": class, "file": path, "min_capability": int|null,
  "act_dtypes": [..]|null, "deprecated": bool, "overridable_by": [..]}``. ``overridable_by``
  lists the methods whose ``override_quantization_method`` names this one (vLLM may pick
  them instead, e.g. ``gptq`` → ``gptq_marlin``): a rule must judge the whole set.
* ``override:<name>`` — ``{"config", "file", "literals", "returns": [[checkpoint method,
  --quantization, result], ...]}``: what the method's ``override_quantization_method``
  answers for each pair of names its literals spell (``*`` any other name, user ``null`` not
  given; pairs not listed answer None; ``?`` where more than the names decides), run by the
  interpreter (``_quant_chain.py``).
* ``verify`` — how ``ModelConfig._verify_quantization`` of the release turns the names into
  the method it loads: ``chain`` (the overrides in the order vLLM asks them), ``user_first``,
  ``lower_user``, ``aliases`` (library spellings replaced in the checkpoint's method),
  ``mismatch_refused`` (a --quantization that differs from the checkpoint's method after the
  override step is refused), ``file``.
* ``ct_scheme:<Class>`` — ``{"min_capability": int|null}`` for compressed-tensors schemes.
* ``platform:<file>`` — the ``supported_quantization`` list of a platform class (CUDA has
  none: every method is allowed there).
* ``gate:<name>`` — a capability gate the source states as a constant (see META).
* ``check:min_capability`` / ``check:deprecated`` — the file where vLLM enforces it.
* ``unresolved`` — what could not be read statically in this release, and why.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _interp import UNKNOWN, Interp
from _quant_chain import chain, override_table, verify_step
from _static import (
    ClassFinder,
    Unresolved,
    class_attribute,
    evaluate,
    imports_of,
    may_return_value_on_cuda,
    module_constants,
    returned_constant,
    string_literals,
)

KIND = "quantization"
QUANT_DIR = "model_executor/layers/quantization"
INIT = f"{QUANT_DIR}/__init__.py"
META = {
    "key": "method:<name> | override:<name> | verify | ct_scheme:<class> | platform:<file> | "
    "gate:<name> | check:<what> | unresolved",
    "value": {
        "method": "config class and file, min_capability (get_min_capability, 80 = sm_80), "
        "act_dtypes (get_supported_act_dtypes), deprecated (refused without "
        "--allow-deprecated-quantization), overridable_by (methods whose "
        "override_quantization_method names this one)",
        "override": "override_quantization_method as a table: [checkpoint method, "
        "--quantization, answer] for the names its literals spell (* any other, null user: not "
        "given; unlisted pairs answer None; ? where more than the names decides)",
        "verify": "ModelConfig._verify_quantization: chain (overrides in asking order), "
        "user_first, lower_user, aliases, mismatch_refused, file",
        "ct_scheme": "min_capability of a compressed-tensors scheme (get_min_capability)",
        "platform": "supported_quantization of a platform class (CUDA has no list: all)",
        "gate:fp8_marlin_below": "FP8 runs weight-only on Marlin below this capability",
        "gate:marlin_int_min": "integer Marlin kernels (GPTQ/AWQ Marlin) need this capability",
        "gate:marlin_fp8_min": "FP8 Marlin needs this capability",
        "gate:marlin_fp4_min": "FP4 (NVFP4/MXFP4) Marlin needs this capability",
        "check": "the file where vLLM refuses the method (min capability, deprecated)",
        "unresolved": "what could not be read statically, with the reason",
    },
    "sources": [
        INIT,
        f"{QUANT_DIR}/*.py",
        f"{QUANT_DIR}/compressed_tensors/schemes/*.py",
        "platforms/*.py",
        f"{QUANT_DIR}/utils/marlin_utils*.py",
        "config*.py",
    ],
}

_BASE_NAMES = {"QuantizationConfig", "object", "ABC"}


def _methods(tree: ast.Module) -> list[str] | None:
    """QUANTIZATION_METHODS: a list literal, or ``list(get_args(QuantizationMethods))``."""
    consts = module_constants(tree)
    value = consts.get("QUANTIZATION_METHODS")
    if isinstance(value, list):
        return [str(v) for v in value]
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "QuantizationMethods" for t in node.targets
        ):
            sub = node.value
            if isinstance(sub, ast.Subscript):
                inner = sub.slice
                if isinstance(inner, ast.Tuple):
                    return [e.value for e in inner.elts if isinstance(e, ast.Constant)]
    return None


def _method_map(tree: ast.Module, methods: list[str]):
    """``{method: class name}`` from get_quantization_config, the function's imports, and
    what could not be mapped."""
    fn = next(
        (
            n
            for n in tree.body
            if isinstance(n, ast.FunctionDef) and n.name == "get_quantization_config"
        ),
        None,
    )
    if fn is None:
        return {}, {}, ["get_quantization_config not found"]
    mapping: dict[str, str] = {}
    problems: list[str] = []
    for node in ast.walk(fn):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Dict):
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            if isinstance(target, ast.Name) and target.id == "method_to_config":
                for k, v in zip(node.value.keys, node.value.values, strict=True):
                    if isinstance(k, ast.Constant) and isinstance(v, ast.Name):
                        mapping[k.value] = v.id
        # for shorthand in X: method_to_config.setdefault(shorthand, Config) / [shorthand] = C
        # (online shorthands: the remaining methods of the list)
        if isinstance(node, ast.For) and isinstance(node.target, ast.Name):
            for inner in ast.walk(node):
                config = None
                if (
                    isinstance(inner, ast.Call)
                    and isinstance(inner.func, ast.Attribute)
                    and inner.func.attr == "setdefault"
                    and len(inner.args) == 2
                    and isinstance(inner.args[1], ast.Name)
                ):
                    config = inner.args[1].id
                elif (
                    isinstance(inner, ast.Assign)
                    and isinstance(inner.value, ast.Name)
                    and isinstance(inner.targets[0], ast.Subscript)
                    and ast.unparse(inner.targets[0].value) == "method_to_config"
                ):
                    config = inner.value.id
                if config:
                    for m in methods:
                        mapping.setdefault(m, config)
    return mapping, imports_of(fn), problems


def _gate(text: str | None, pattern: str) -> int | None:
    if not text:
        return None
    m = re.search(pattern, text, re.DOTALL)
    return int(m.group(1)) if m else None


def _gates(release) -> dict[str, int]:
    out: dict[str, int] = {}
    fp8 = release.text(f"{QUANT_DIR}/fp8.py")
    below = _gate(
        fp8,
        r"use_marlin\s*=\s*\(?\s*not\s+current_platform\.has_device_capability"
        r"\(\s*(\d+)\s*\)",
    )
    if below is None:
        for path in release.glob(
            "model_executor/kernels/linear/scaled_mm/marlin.py"
        ) + release.glob("model_executor/layers/quantization/kernels/scaled_mm/marlin.py"):
            below = _gate(release.text(path), r"compute_capability\s*>=\s*(\d+)")
            if below is not None:
                break
    if below is not None:
        out["gate:fp8_marlin_below"] = below
    marlin = release.text(f"{QUANT_DIR}/utils/marlin_utils.py")
    value = _gate(
        marlin,
        r"def query_marlin_supported_quant_types.*?device_capability\s*<\s*"
        r"(\d+)\s*:\s*return\s*\[\]",
    )
    if value is not None:
        out["gate:marlin_int_min"] = value
    value = _gate(
        release.text(f"{QUANT_DIR}/utils/marlin_utils_fp8.py"),
        r"def is_fp8_marlin_supported\(\):\s*return[^\n]*has_device_capability\((\d+)\)",
    )
    if value is not None:
        out["gate:marlin_fp8_min"] = value
    value = _gate(
        release.text(f"{QUANT_DIR}/utils/marlin_utils_fp4.py"),
        r"def is_fp4_marlin_supported\(\):\s*return[^\n]*has_device_capability\((\d+)\)",
    )
    if value is not None:
        out["gate:marlin_fp4_min"] = value
    return out


def _platforms(release) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path in release.glob("platforms/*.py"):
        tree = release.tree(path)
        if tree is None:
            continue
        for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
            node = class_attribute(cls, "supported_quantization")
            if node is None:
                continue
            try:
                listed = [str(x) for x in evaluate(node, {})]
            except ValueError:
                continue
            if not listed:
                continue
            added = sorted(
                {
                    s
                    for n in ast.walk(cls)
                    if isinstance(n, ast.AugAssign)
                    and isinstance(n.target, ast.Name)
                    and n.target.id == "supported_quantization"
                    for s in string_literals(n.value)
                }
            )
            entry: dict[str, Any] = {"class": cls.name, "methods": listed}
            if added:
                entry["added_when"] = added  # appended under a run-time condition
            out[f"platform:{Path(path).stem}"] = entry
    return out


def _check_files(release) -> dict[str, str]:
    out = {}
    for path in release.glob("config*.py") + release.glob("config/*.py"):
        text = release.text(path) or ""
        if "get_min_capability()" in text and "Minimum capability" in text:
            out["check:min_capability"] = path
        if "DEPRECATED_QUANTIZATION_METHODS" in text:
            out["check:deprecated"] = path
    return out


def extract(release) -> dict[str, Any]:
    out: dict[str, Any] = {}
    unresolved: list[str] = []
    tree = release.tree(INIT)
    if tree is None:
        return {"unresolved": [f"{INIT} missing or unparsable"]}
    methods = _methods(tree)
    if methods is None:
        return {"unresolved": ["QUANTIZATION_METHODS is not a literal list or Literal[...]"]}
    consts = module_constants(tree)
    deprecated = set(consts.get("DEPRECATED_QUANTIZATION_METHODS") or ())
    mapping, fn_imports, problems = _method_map(tree, methods)
    unresolved.extend(problems)
    classes = ClassFinder(release)
    records: dict[str, dict[str, Any]] = {}
    override_names: dict[str, set[str]] = {}
    answers: dict[str, dict[str, Any]] = {}  # method -> its override's decision table
    for method in methods:
        record: dict[str, Any] = {
            "deprecated": method in deprecated,
            "min_capability": None,
            "act_dtypes": None,
        }
        cls_name = mapping.get(method)
        located = classes.locate(cls_name, INIT, fn_imports) if cls_name else None
        if cls_name is None:
            unresolved.append(f"{method}: no entry in get_quantization_config's map")
        elif located is None:
            unresolved.append(
                f"{method}: class {cls_name} not found statically "
                "(assigned at run time or imported from outside vllm)"
            )
            record["config"] = cls_name
        if located is not None:
            file, cls = located
            record["config"], record["file"] = cls.name, file
            for fact, fn_name in (
                ("min_capability", "get_min_capability"),
                ("act_dtypes", "get_supported_act_dtypes"),
            ):
                hit = classes.method(file, cls, fn_name)
                if hit is None:
                    value: Any = Unresolved(f"{fn_name} not found")
                else:
                    value = returned_constant(hit[2], classes.constants(hit[0], hit[1]))
                if isinstance(value, Unresolved):
                    unresolved.append(f"{method}: {fn_name} of {cls.name} — {value.why}")
                    value = None
                record[fact] = value
            hit = classes.method(file, cls, "override_quantization_method")
            if hit is not None and hit[1].name not in _BASE_NAMES:
                answers[method] = {
                    "config": cls.name,
                    "file": hit[0],
                    **override_table(classes, file, cls, hit[2]),
                }
                if not may_return_value_on_cuda(hit[2]):
                    record["overrides_off_cuda"] = True  # only CPU/XPU/... pick it
                elif _only_when_asked(hit[2]):
                    record["overrides_only_when_asked"] = True  # needs --quantization <it>
                else:
                    override_names[method] = string_literals(hit[2]) & set(methods)
        records[method] = record
    for method, record in records.items():
        record["overridable_by"] = sorted(
            other
            for other, names in override_names.items()
            if other != method
            and method in names
            and records[other].get("config") != record.get("config")
        )
        out[f"method:{method}"] = record
    verify = verify_step(release)
    if verify is None:
        unresolved.append("ModelConfig._verify_quantization not found: the override chain")
    else:
        verify["chain"] = chain(verify, list(answers), methods)
        out["verify"] = verify
    for method, answer in answers.items():
        out[f"override:{method}"] = answer
    out.update(_schemes(release, classes, unresolved))
    out.update(_platforms(release))
    out.update(_gates(release))
    out.update(_check_files(release))
    if unresolved:
        out["unresolved"] = sorted(set(unresolved))
    return out


def _only_when_asked(fn: ast.FunctionDef) -> bool:
    """The override returns None whenever the user gave no --quantization (user_quant None):
    it never replaces a checkpoint's method on its own."""
    params = [a.arg for a in fn.args.args if a.arg not in ("cls", "self")]
    if len(params) < 2:
        return False
    env = dict.fromkeys(params, UNKNOWN)
    env[params[1]] = None  # (hf_quant_cfg, user_quant, ...)
    results = Interp(env, {}).run(fn)
    return bool(results) and all(r is None for r in results)


def _schemes(release, classes: ClassFinder, unresolved: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path in release.glob(f"{QUANT_DIR}/compressed_tensors/schemes/*.py"):
        tree = release.tree(path)
        if tree is None:
            continue
        for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
            if not cls.name.startswith("CompressedTensors") or cls.name.endswith("Scheme"):
                continue
            hit = classes.method(path, cls, "get_min_capability")
            if hit is None:
                continue
            value = returned_constant(hit[2], classes.constants(hit[0], hit[1]))
            if isinstance(value, Unresolved):
                unresolved.append(f"ct_scheme {cls.name}: get_min_capability — {value.why}")
                value = None
            out[f"ct_scheme:{cls.name}"] = {"min_capability": value}
    return out


# -- audit against the curated rules ---------------------------------------------------------


def audit(table: dict, rules_dir: Path) -> list[str]:
    """Contradictions between the generated minimum capabilities and the curated QUANT rules.

    For every release, every method the curated capability rules name and every capability
    of a real GPU generation, the curated rules are evaluated with the engine: a curated
    error that says "refused" where the release's get_min_capability (taking the methods
    that may override it into account) says the GPU is enough is a contradiction, and so is
    the reverse for the floors QUANT003 claims for every release.
    """
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from vllm_doctor.engine.evaluate import APPLIES, evaluate_rules
    from vllm_doctor.engine.loader import load_rules
    from vllm_doctor.facts.model import Facts
    from vllm_doctor.facts.release_kernels import quant_floor
    from vllm_doctor.knowledge import Table

    tab = Table(KIND, table)
    rules = [r for r in load_rules([rules_dir]) if r.code in _CURATED_CAPABILITY_RULES]
    problems: list[str] = []
    for release in tab.releases:
        values = tab.at(release)
        for method, algo in _AUDIT_METHODS:
            if f"method:{method}" not in values and method != "modelopt":
                continue
            floor = quant_floor(values, _effective_method(method, algo))
            if floor.value is None:
                continue
            for cap in _CAPABILITIES:
                flat = {
                    "vllm.version": release,
                    "gpu.min_capability": cap,
                    "model.quant_method": method,
                }
                if algo:
                    flat["model.quant_algo"] = algo
                facts = Facts.from_flat(flat)
                curated = [
                    f.rule.code for f in evaluate_rules(rules, facts) if f.verdict == APPLIES
                ]
                refused = cap < floor.value
                if curated and not refused:
                    problems.append(
                        f"{release} {method}{'/' + algo if algo else ''} on "
                        f"capability {cap}: {', '.join(curated)} says refused, the "
                        f"release's minimum is {floor.value} ({floor.why})"
                    )
                if refused and not curated and method in _CURATED_COMPLETE:
                    problems.append(
                        f"{release} {method} on capability {cap}: refused by the "
                        f"release (minimum {floor.value}) but no curated rule says so"
                    )
    return problems


def _effective_method(method: str, algo: str | None) -> str:
    # ModelOpt checkpoints name "modelopt"; vLLM picks modelopt_fp4 for NVFP4 (override)
    if method == "modelopt" and algo == "NVFP4":
        return "modelopt_fp4"
    return method


_CURATED_CAPABILITY_RULES = {"QUANT003", "QUANT004", "QUANT005", "QUANT006", "QUANT009"}
# (checkpoint quant_method, ModelOpt quant_algo) pairs the curated capability rules speak of
_AUDIT_METHODS = [
    ("fp8", None),
    ("awq", None),
    ("awq_marlin", None),
    ("torchao", None),
    ("gptq", None),
    ("gptq_marlin", None),
    ("moe_wna16", None),
    ("bitsandbytes", None),
    ("fbgemm_fp8", None),
    ("experts_int8", None),
    ("fp_quant", None),
    ("mxfp4", None),
    ("modelopt_fp4", None),
    ("modelopt", "NVFP4"),
]
# methods whose every refusal below the release's floor a curated rule claims
_CURATED_COMPLETE = {
    "fp8",
    "awq",
    "gptq",
    "moe_wna16",
    "fbgemm_fp8",
    "experts_int8",
    "fp_quant",
    "mxfp4",
}
_CAPABILITIES = [60, 61, 70, 75, 80, 86, 89, 90, 100, 120]
