"""Every attention backend of one release and what its source states (KIND "attention").

Backends: the ``AttentionBackendEnum`` registry (0.12.0 on: name → class path), else every
class under ``v1/attention/backends/`` (and V0 ``attention/backends/``) whose ``get_name``
returns a constant. Per backend, read statically (inherited definitions followed through
the bases, down to ``AttentionBackend``'s defaults):

* ``head_sizes`` — ``get_supported_head_sizes`` (``[]`` means any), and ``head_size_check``:
  ``supports_head_size`` evaluated for common head sizes → ``{"yes": [..], "no": [..],
  "unknown": [..]}`` (unknown: decided at run time, e.g. whether FA4 is installed);
* ``dtypes`` — ``supported_dtypes`` / ``get_supported_dtypes``;
* ``kv_cache_dtypes`` — ``supported_kv_cache_dtypes`` and ``kv_cache_dtype_runtime`` (a
  ``supports_kv_cache_dtype`` override that also asks the installed kernels);
* ``capabilities`` — ``supports_compute_capability`` evaluated for every GPU generation
  (same yes/no/unknown layout; absent where the release has no such method);
* ``block_sizes`` — ``get_supported_kernel_block_sizes`` / ``supported_kernel_block_sizes``;
* ``mla`` — an MLA backend (file under ``mla/`` or ``is_mla``).

Selection on CUDA: ``cuda_priority:<std|mla>:<capability>`` — the ordered backends
``_get_backend_priorities`` may return (0.12.0 on; branches the interpreter cannot decide
contribute all their backends), ``cuda_considered`` — the backends ``get_attn_backend_cls``
names before 0.12.0 (an if-chain: the set, not the order). ``unresolved`` says what could
not be read and why.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _interp import UNKNOWN, Cap, Interp, _Enum, enum_items
from _static import (
    ClassFinder,
    Unresolved,
    class_attribute,
    evaluate,
    find_class,
    module_constants,
    returned_constant,
)

KIND = "attention"
HEAD_SIZES = [32, 48, 64, 72, 80, 96, 112, 120, 128, 160, 192, 224, 256, 320, 512, 576]
# capability grid: Pascal, Volta, Turing, Ampere, Ada, Hopper, Blackwell DC, Thor, RTX 50
CAPABILITIES = [60, 61, 70, 75, 80, 86, 87, 89, 90, 100, 103, 110, 120, 121]
KV_DTYPES = [
    "auto",
    "float16",
    "bfloat16",
    "fp8",
    "fp8_e4m3",
    "fp8_e5m2",
    "fp8_ds_mla",
    "fp8_inc",
    "nvfp4",
]
DTYPES = ["float16", "bfloat16", "float32"]
META = {
    "key": "backend:<NAME> (V1 or registry) | backend_v0:<NAME> | cuda_priority:<std|mla>:"
    "<capability> | cuda_considered | unresolved",
    "value": {
        "backend": "class, file, mla, head_sizes ([] = any), head_size_check "
        "{yes,no,unknown} over common head sizes, dtypes, kv_cache_dtypes, "
        "kv_cache_dtype_runtime, kv_cache_check / dtype_check {yes,no,unknown} "
        "(supports_kv_cache_dtype / supports_dtype evaluated), capabilities "
        "{yes,no,unknown} over GPU generations, block_sizes",
        "cuda_priority": "backends _get_backend_priorities may return, in order",
        "cuda_considered": "backends get_attn_backend_cls names (before 0.12.0)",
    },
    "head_sizes_probed": HEAD_SIZES,
    "capabilities_probed": CAPABILITIES,
    "kv_cache_dtypes_probed": KV_DTYPES,
    "sources": [
        "v1/attention/backends/**/*.py",
        "attention/backends/*.py",
        "*/backends/registry.py",
        "platforms/cuda.py",
    ],
}
_BASES = (
    "v1/attention/backend.py",
    "attention/backends/abstract.py",
    "v1/attention/backends/abstract.py",
)


def _registry(release) -> dict[str, str] | None:
    for path in ("v1/attention/backends/registry.py", "attention/backends/registry.py"):
        tree = release.tree(path)
        if tree is None:
            continue
        cls = find_class(tree, "AttentionBackendEnum") or find_class(tree, "_Backend")
        if cls is None:
            continue
        out = {}
        for node in cls.body:
            if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
                try:
                    value = evaluate(node.value, {})
                except ValueError:
                    continue
                if isinstance(value, str):
                    out[node.targets[0].id] = value
        if out:
            return out
    return None


def _class_from_path(release, dotted: str):
    module, _, name = dotted.rpartition(".")
    rel = "/".join(module.split(".")[1:]) + ".py"
    tree = release.tree(rel)
    if tree is None:
        return None
    cls = find_class(tree, name)
    return (rel, cls) if cls is not None else None


def _scan(release) -> dict[str, tuple[str, ast.ClassDef, bool]]:
    """Before the registry: ``name -> (file, class, is_v0)`` from get_name constants."""
    out: dict[str, tuple[str, ast.ClassDef, bool]] = {}
    files = (
        release.glob("v1/attention/backends/*.py")
        + release.glob("v1/attention/backends/mla/*.py")
        + release.glob("attention/backends/*.py")
        + release.glob("attention/backends/mla/*.py")
    )
    for path in files:
        tree = release.tree(path)
        if tree is None:
            continue
        v0 = not path.startswith("v1/")
        for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
            fn = next(
                (f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "get_name"),
                None,
            )
            if fn is None:
                continue
            name = returned_constant(fn, {})
            if not isinstance(name, str):
                continue
            key = ("v0:" if v0 else "") + name.removesuffix("_VLLM_V1")
            if key in out or "rocm" in path or "aiter" in path:
                # two classes answer the same name (a ROCm twin): the plain name keeps the
                # CUDA one, the other is told apart by its class
                if key in out and ("rocm" in out[key][0] or "aiter" in out[key][0]):
                    twin = out.pop(key)
                    out[f"{key}~{twin[1].name}"] = twin
                else:
                    key = f"{key}~{cls.name}" if key in out else key
            out[key] = (path, cls, v0)
    return out


def _grid(values: dict[int, Any]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {"yes": [], "no": [], "unknown": []}
    for key, value in values.items():
        out["yes" if value is True else "no" if value is False else "unknown"].append(key)
    return {k: v for k, v in out.items() if v}


def _predicate(
    finder: ClassFinder,
    file: str,
    cls: ast.ClassDef,
    method: str,
    bind: dict[str, Any],
    cls_attrs: dict[str, Any] | None = None,
) -> Any:
    hit = finder.method(file, cls, method)
    if hit is None:
        return None
    hfile, hcls, fn = hit
    if hfile in _BASES and method == "supports_compute_capability":
        return True  # the base class accepts every GPU

    def lookup(name: str, from_super: bool):
        if from_super:
            for base in hcls.bases:
                if isinstance(base, ast.Name):
                    found = finder.locate(base.id, hfile)
                    if found:
                        sub = finder.method(found[0], found[1], name)
                        if sub:
                            return sub[2]
            return None
        sub = finder.method(file, cls, name)
        return sub[2] if sub else None

    params = [a.arg for a in fn.args.args if a.arg not in ("cls", "self")]
    env = dict.fromkeys(params, UNKNOWN)
    if params:
        env[params[0]] = bind["value"]
    if "__capability__" in bind:
        env["__capability__"] = bind["__capability__"]
    names = finder.constants(hfile, hcls)
    values = Interp(env, names, lookup, cls_attrs=cls_attrs).run(fn)
    if values and all(v is True for v in values):
        return True
    if values and all(v is False for v in values):
        return False
    return UNKNOWN


def _backend(
    finder: ClassFinder, file: str, cls: ast.ClassDef, problems: list[str], label: str
) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "class": cls.name,
        "file": file,
        "mla": "/mla/" in file or "MLA" in cls.name.upper(),
    }

    def const(method: str, attr: str | None = None) -> Any:
        # a class attribute (this class or a base) wins over a method of the same meaning
        if attr is not None:
            here = (file, cls)
            for _ in range(6):
                node = class_attribute(here[1], attr)
                if node is not None:
                    try:
                        return evaluate(node, finder.constants(*here))
                    except ValueError as err:
                        return Unresolved(f"{attr} = {err}")
                base = next((b for b in here[1].bases if isinstance(b, ast.Name)), None)
                found = finder.locate(base.id, here[0]) if base is not None else None
                if found is None:
                    break
                here = found
        hit = finder.method(file, cls, method)
        if hit is None:
            return None
        return returned_constant(hit[2], finder.constants(hit[0], hit[1]))

    for field, method, attr in (
        ("head_sizes", "get_supported_head_sizes", None),
        ("dtypes", "get_supported_dtypes", "supported_dtypes"),
        ("kv_cache_dtypes", "get_supported_kv_cache_dtypes", "supported_kv_cache_dtypes"),
        ("block_sizes", "get_supported_kernel_block_sizes", "supported_kernel_block_sizes"),
    ):
        value = const(method, attr)
        if isinstance(value, Unresolved):
            problems.append(f"{label}: {field} — {value.why}")
            value = None
        if field == "block_sizes" and isinstance(value, list):
            value = [v if isinstance(v, int) else str(v) for v in value]
        if value is not None:
            rec[field] = value
    heads = {
        h: _predicate(finder, file, cls, "supports_head_size", {"value": h}) for h in HEAD_SIZES
    }
    if any(v is not None for v in heads.values()):
        rec["head_size_check"] = _grid(heads)
    caps = {
        c: _predicate(
            finder,
            file,
            cls,
            "supports_compute_capability",
            {"value": Cap(c // 10, c % 10), "__capability__": Cap(c // 10, c % 10)},
        )
        for c in CAPABILITIES
    }
    if any(v is not None for v in caps.values()):
        rec["capabilities"] = _grid(caps)
    hit = finder.method(file, cls, "supports_kv_cache_dtype")
    if hit is not None and hit[0] not in _BASES:
        rec["kv_cache_dtype_runtime"] = True  # an override: the list alone does not decide
    attrs = {
        k: rec[f]
        for k, f in (
            ("supported_kv_cache_dtypes", "kv_cache_dtypes"),
            ("supported_dtypes", "dtypes"),
        )
        if f in rec
    }
    for field, method, grid in (
        ("kv_cache_check", "supports_kv_cache_dtype", KV_DTYPES),
        ("dtype_check", "supports_dtype", DTYPES),
    ):
        states = {v: _predicate(finder, file, cls, method, {"value": v}, attrs) for v in grid}
        if any(s is not None for s in states.values()):
            rec[field] = _grid(states)
    return rec


def _composite(
    release, finder: ClassFinder, dotted: str, problems: list[str], label: str
) -> dict[str, Any] | None:
    """A backend made by ``create_composite_attention_backend(general, causal, ...)``: it
    supports what both parts support (composite.py: ``all(backend.supports_... for backend
    in (general_backend, causal_backend))``), narrowed by its own head_sizes/device_major."""
    module, _, name = dotted.rpartition(".")
    rel = "/".join(module.split(".")[1:]) + ".py"
    tree = release.tree(rel)
    if tree is None:
        return None
    call = None
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id == name
            and isinstance(node.value, ast.Call)
            and ast.unparse(node.value.func) == "create_composite_attention_backend"
        ):
            call = node.value
    if call is None or len(call.args) < 2:
        return None
    parts = []
    for arg in call.args[:2]:
        found = finder.locate(arg.id, rel) if isinstance(arg, ast.Name) else None
        if found is None:
            problems.append(f"{label}: composite part {ast.unparse(arg)} not found")
            return None
        parts.append(_backend(finder, found[0], found[1], problems, f"{label}/{arg.id}"))
    kw = {k.arg: k.value for k in call.keywords}
    rec: dict[str, Any] = {
        "class": name,
        "file": rel,
        "mla": False,
        "composite_of": [p["class"] for p in parts],
    }
    for field in ("dtypes", "kv_cache_dtypes"):
        if all(field in p for p in parts):
            first = parts[0][field]
            rec[field] = [x for x in first if all(x in p[field] for p in parts[1:])]
    try:
        own_heads = evaluate(kw["head_sizes"], {}) if "head_sizes" in kw else []
        device_major = evaluate(kw["device_major"], {}) if "device_major" in kw else None
    except ValueError as err:
        problems.append(f"{label}: composite arguments not constant ({err})")
        return rec
    rec["head_sizes"] = list(own_heads)

    def both(field: str, grid: list[int], own) -> dict[str, list[int]]:
        values = {}
        for x in grid:
            states = [
                (
                    "yes"
                    if x in p.get(field, {}).get("yes", [])
                    else "no"
                    if x in p.get(field, {}).get("no", [])
                    else "yes"
                    if field not in p
                    else "unknown"
                )
                for p in parts
            ]
            if not own(x) or "no" in states:
                values[x] = False
            elif all(s == "yes" for s in states):
                values[x] = True
            else:
                values[x] = UNKNOWN
        return _grid(values)

    rec["head_size_check"] = both(
        "head_size_check", HEAD_SIZES, lambda h: not own_heads or h in own_heads
    )
    rec["capabilities"] = both(
        "capabilities", CAPABILITIES, lambda c: device_major is None or c // 10 == device_major
    )
    return rec


def _priorities(release, problems: list[str]) -> dict[str, Any]:
    tree = release.tree("platforms/cuda.py")
    if tree is None:
        return {}
    fn = next(
        (
            n
            for n in tree.body
            if isinstance(n, ast.FunctionDef) and n.name == "_get_backend_priorities"
        ),
        None,
    )
    out: dict[str, Any] = {}
    if fn is not None:
        params = [a.arg for a in fn.args.args]
        for mla in (False, True):
            for c in CAPABILITIES:
                env = dict.fromkeys(params, UNKNOWN)
                env["use_mla"] = mla
                env["device_capability"] = Cap(c // 10, c % 10)
                values = Interp(env, module_constants(tree)).run(fn)
                names: list[str] = []
                ok = bool(values)
                for v in values:
                    items = enum_items(v)
                    if items is None:
                        ok = False
                        break
                    names += [n for n in items if n not in names]
                key = f"cuda_priority:{'mla' if mla else 'std'}:{c}"
                if ok:
                    out[key] = names
                else:
                    problems.append(f"{key}: _get_backend_priorities not readable statically")
        return out
    # before 0.12.0: an if-chain returning class paths; keep the set it names
    method = None
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        method = (
            next(
                (
                    f
                    for f in cls.body
                    if isinstance(f, ast.FunctionDef) and f.name == "get_attn_backend_cls"
                ),
                None,
            )
            or method
        )
    if method is None:
        problems.append("platforms/cuda.py has no get_attn_backend_cls")
        return out
    named = set()
    for node in ast.walk(method):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value.startswith("vllm.")
            and node.value.endswith("Backend")
        ):
            named.add(node.value)
        if (
            isinstance(node, ast.JoinedStr)
            and node.values
            and isinstance(node.values[0], ast.Constant)
            and str(node.values[0].value).startswith("vllm.")
        ):
            # a class path assembled from pieces (not a log message)
            problems.append(
                "get_attn_backend_cls builds a class path at run time "
                f"({' '.join(ast.unparse(node).split())[:80]})"
            )
    out["cuda_considered"] = sorted(named)
    problems.append(
        "selection before 0.12.0 is an if-chain in get_attn_backend_cls: the "
        "backends it names are recorded (cuda_considered), not an order"
    )
    return out


def extract(release) -> dict[str, Any]:
    out: dict[str, Any] = {}
    problems: list[str] = []
    finder = ClassFinder(release)
    registry = _registry(release)
    if registry is not None:
        for name, dotted in registry.items():
            found = _class_from_path(release, dotted)
            if found is None:
                composite = _composite(release, finder, dotted, problems, name)
                if composite is not None:
                    out[f"backend:{name}"] = composite
                elif dotted:
                    problems.append(f"backend {name}: class {dotted} not found in the release")
                continue
            out[f"backend:{name}"] = _backend(finder, found[0], found[1], problems, name)
    else:
        for name, (file, cls, _v0) in _scan(release).items():
            key = f"backend_v0:{name[3:]}" if name.startswith("v0:") else f"backend:{name}"
            out[key] = _backend(finder, file, cls, problems, name)
    prio = _priorities(release, problems)
    if "cuda_considered" in prio:
        by_class = {
            (v["file"].removesuffix(".py").replace("/", "."), v["class"]): k
            for k, v in out.items()
            if k.startswith("backend")
        }
        named = []
        for dotted in prio["cuda_considered"]:
            module, _, cls_name = dotted.rpartition(".")
            key = by_class.get((module.removeprefix("vllm."), cls_name))
            named.append(key.split(":", 1)[0] + ":" + key.split(":", 1)[1] if key else dotted)
        prio["cuda_considered"] = sorted(set(named))
    out.update(prio)
    cuda = release.text("platforms/cuda.py") or ""
    if "validate_configuration" in cuda:
        # a forced backend is checked up front and refused with its reasons
        out["check:forced_backend_validated"] = "platforms/cuda.py"
    if "_get_backend_priorities" in cuda and "No valid attention backend" in cuda:
        out["check:no_valid_backend"] = "platforms/cuda.py"
    if problems:
        out["unresolved"] = sorted(set(problems))
    return out


__all__ = ["KIND", "META", "_Enum", "extract"]


# -- audit against the curated rules ---------------------------------------------------------


def audit(table: dict, rules_dir: Path) -> list[str]:
    """Contradictions between the backends' recorded checks and ATTN001 / ATTN003.

    For every release that validates a forced backend, every GPU generation and the cases the
    two curated rules speak of (FP8 KV caches with FLASH_ATTN; Gemma 4's head size 512 with
    FLASHINFER or FLASH_ATTN), the curated rule is evaluated with the engine and the forced
    backend is judged from the table: the rule saying "refused" where the table's checks all
    accept, or "fine" where a check definitely refuses, is a contradiction. A check the table
    leaves to run time (installed FA version) contradicts nothing.
    """
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from packaging.version import Version

    from vllm_doctor.engine.evaluate import APPLIES, evaluate_rule
    from vllm_doctor.engine.fixstate import in_ranges
    from vllm_doctor.engine.loader import load_rules
    from vllm_doctor.facts.model import Facts
    from vllm_doctor.facts.release_kernels import judge_backend
    from vllm_doctor.knowledge import Table

    tab = Table(KIND, table)
    rules = {r.code: r for r in load_rules([rules_dir]) if r.code in ("ATTN001", "ATTN003")}
    problems: list[str] = []
    scenarios = []
    for kv in ("fp8", "fp8_e4m3", "fp8_e5m2"):
        scenarios.append(
            (
                "ATTN001",
                "FLASH_ATTN",
                [128],
                kv,
                {"serve.kv_cache_dtype": kv, "model.head_dim": 128},
            )
        )
    for backend in ("FLASHINFER", "FLASH_ATTN"):
        scenarios.append(
            (
                "ATTN003",
                backend,
                [256, 512],
                "auto",
                {
                    "model.architectures": ["Gemma4ForCausalLM"],
                    "model.head_dim": 256,
                    "model.global_head_dim": 512,
                },
            )
        )
    for release in tab.releases:
        values = tab.at(release)
        if "check:forced_backend_validated" not in values:
            continue
        for code, backend, heads, kv, extra in scenarios:
            record = values.get(f"backend:{backend}")
            if record is None or code not in rules:
                continue
            rule = rules[code]
            if rule.ranges and not in_ranges(Version(release), rule.ranges)[0]:
                continue  # the rule's subject (Gemma 4, validation) is not in this release
            for cap in CAPABILITIES:
                if cap < 80:
                    continue  # both backends need sm_80; the curated rules speak of 8.0+
                facts = Facts.from_flat(
                    {
                        "vllm.version": release,
                        "gpu.min_capability": cap,
                        "serve.attention_backend": backend,
                        **extra,
                    }
                )
                curated = evaluate_rule(rules[code], facts).verdict == APPLIES
                verdicts = [judge_backend(record, h, "bfloat16", kv, cap)[0] for h in heads]
                refused = False in verdicts
                accepted = all(v is True for v in verdicts)
                if curated and accepted:
                    problems.append(
                        f"{release} {backend} cap {cap} kv {kv} heads {heads}: "
                        f"{code} says refused, the release's checks accept"
                    )
                if refused and not curated:
                    problems.append(
                        f"{release} {backend} cap {cap} kv {kv} heads {heads}: "
                        f"the release's checks refuse, {code} does not say so"
                    )
    return problems
