"""What each release uses of the packages around it (KIND "companion_uses"): the names it
imports from FlashInfer, LMCache, instanttensor, humming-kernels, quack-kernels and DeepGEMM,
the attributes it reads from their modules, and the keyword arguments of its calls to them.

Read from every Python file of the release (vendored ``third_party/`` copies left out), by
the AST only:

* ``from flashinfer.decode import BatchDecodeWithPagedKVCacheWrapper as W`` → key
  ``flashinfer.decode:BatchDecodeWithPagedKVCacheWrapper``; ``W(..., backend=...)`` and
  ``W.plan(...)`` are calls to it and to ``BatchDecodeWithPagedKVCacheWrapper.plan``, and so
  is ``self.w.plan(...)`` in a file that assigns ``self.w = W(...)``;
* ``import instanttensor`` / ``import flashinfer.sampling as fs`` / ``dg =
  importlib.import_module("deep_gemm")``: the attribute chains read from the alias
  (``instanttensor.safe_open(..., copy=True)`` → ``instanttensor:safe_open``), and
  ``getattr(dg, "fp8_gemm_nt", None)``;
* a call whose first two arguments are a companion module and a name as string constants
  (``_lazy_import_wrapper("flashinfer.fused_moe", "cutlass_fused_moe")``): a lazy import; a
  module-level wrapper made so (``flashinfer_x = _lazy_import_wrapper("flashinfer.decode",
  "x")`` in ``vllm/utils/flashinfer.py``) is followed into the modules that import it, whose
  calls' keywords are the function's.

Key ``<module>:<dotted name>``: ``{"package": distribution or None, "keywords": [the
keywords of the calls], "files": [up to three files], "guarded": true when every use is
inside a ``try`` that catches ImportError/AttributeError (or Exception), a ``getattr`` with a
default, or a lazy import: a missing name there is a fallback, not a crash; a keyword the
function lacks is a TypeError all the same}``.

``tools/gen_stack_knowledge.py`` resolves every key against each companion version's own
names and signatures (``api:`` keys of ``data/stack/<distribution>.json``).
"""

from __future__ import annotations

import ast
from typing import Any

KIND = "companion_uses"

# the top-level module → the distribution whose wheels provide it (None: no wheel on the
# package index: DeepGEMM is built from source or vendored as vllm.third_party.deep_gemm)
COMPANION_MODULES: dict[str, str | None] = {
    "flashinfer": "flashinfer-python",
    "lmcache": "lmcache",
    "instanttensor": "instanttensor",
    "humming": "humming-kernels",
    "quack": "quack-kernels",
    "deep_gemm": None,
}
MAX_FILES = 3
_CATCHES = {"ImportError", "ModuleNotFoundError", "AttributeError", "Exception", "BaseException"}

META = {
    "key": "<module>:<dotted name> (a name a release imports or reads from a companion)",
    "value": {
        "package": "the distribution that provides the module (None: no wheel read)",
        "keywords": "keyword arguments of the release's calls to it",
        "files": "up to three files of the release that use it",
        "guarded": "every use falls back when the name is missing (try/except, getattr "
        "default, lazy import)",
    },
    "modules": COMPANION_MODULES,
}


def _top(module: str) -> str:
    return module.split(".", 1)[0]


def _dotted(node: ast.AST) -> list[str] | None:
    """``a.b.c`` → [a, b, c]; None for anything but names and attributes."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return parts[::-1]


def _str(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


class _Uses:
    def __init__(self) -> None:
        self.found: dict[str, dict[str, Any]] = {}

    def add(
        self,
        key: str,
        path: str,
        guarded: bool,
        keywords: set[str] = frozenset(),
        lazy: bool = False,
    ) -> None:
        module = key.split(":", 1)[0]
        entry = self.found.setdefault(
            key,
            {
                "package": COMPANION_MODULES[_top(module)],
                "keywords": set(),
                "files": set(),
                "lazy_files": set(),
                "guarded": True,
            },
        )
        entry["keywords"] |= set(keywords)
        # a lazy import's file is where the name is looked up, not where it is called
        entry["lazy_files" if lazy else "files"].add(path)
        entry["guarded"] = entry["guarded"] and guarded

    def result(self) -> dict[str, dict[str, Any]]:
        return {
            key: {
                "package": value["package"],
                "keywords": sorted(value["keywords"]),
                "files": sorted(value["files"] or value["lazy_files"])[:MAX_FILES],
                "guarded": value["guarded"],
            }
            for key, value in sorted(self.found.items())
        }


def _guarded_nodes(tree: ast.Module) -> set[int]:
    """ids of the nodes inside a ``try`` body whose handlers catch a missing name."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Try):
            continue
        names: set[str] = set()
        for handler in node.handlers:
            if handler.type is None:
                names.add("BaseException")
            for part in ast.walk(handler.type) if handler.type is not None else ():
                if isinstance(part, ast.Name):
                    names.add(part.id)
                elif isinstance(part, ast.Attribute):
                    names.add(part.attr)
        if names & _CATCHES:
            for stmt in node.body:
                inside |= {id(n) for n in ast.walk(stmt)}
    return inside


def _import_module_call(node: ast.AST) -> str | None:
    """``importlib.import_module("deep_gemm")`` / ``import_module("x")`` → the module."""
    if not isinstance(node, ast.Call) or not node.args:
        return None
    func = _dotted(node.func)
    if func and func[-1] == "import_module":
        module = _str(node.args[0])
        if module and _top(module) in COMPANION_MODULES:
            return module
    return None


def file_uses(
    tree: ast.Module, path: str, uses: _Uses, wrappers: dict[str, str] | None = None
) -> None:
    """The companion names one file uses, added to ``uses``; ``wrappers`` are vLLM's lazy
    wrappers of companion functions (``lazy_wrappers``), whose calls pass their keywords on."""
    guarded = _guarded_nodes(tree)
    modules: dict[str, str] = {}  # local name → companion module it stands for
    names: dict[str, str] = {}  # local name → "<module>:<name>" imported from a companion
    wrapped: dict[str, str] = {}  # local name → the companion function a lazy wrapper calls
    wrappers = wrappers or {}
    own = _module_of(path)
    for key, target in wrappers.items():
        if key.startswith(f"{own}:"):
            wrapped[key.split(":", 1)[1]] = target
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                target = wrappers.get(f"{node.module}:{alias.name}")
                if target is not None:
                    wrapped[alias.asname or alias.name] = target
    if wrapped:
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                target = wrapped.get(node.func.id)
                keywords = {k.arg for k in node.keywords if k.arg is not None}
                if target is not None and keywords:
                    # the wrapper falls back when the name is missing, not for a keyword
                    uses.add(target, path, True, keywords)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if _top(node.module) not in COMPANION_MODULES:
                continue
            for alias in node.names:
                if alias.name == "*":
                    continue
                key = f"{node.module}:{alias.name}"
                names[alias.asname or alias.name] = key
                uses.add(key, path, id(node) in guarded)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if _top(alias.name) in COMPANION_MODULES:
                    # `import a.b` binds a; `import a.b as c` binds c to a.b
                    local = alias.asname or _top(alias.name)
                    modules[local] = alias.name if alias.asname else _top(alias.name)
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            module = _import_module_call(node.value)
            target = node.targets[0]
            if module and isinstance(target, ast.Name):
                modules[target.id] = module
    if not modules and not names:
        _lazy_imports(tree, path, uses)
        return
    # `self.wrapper = BatchDecodeWithPagedKVCacheWrapper(...)`: later `self.wrapper.plan(...)`
    # in the same file is a call to the class's method
    instances: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            cls = _class_key(node.value.func, modules, names)
            if cls is None:
                continue
            for target in node.targets:
                parts = _dotted(target)
                if parts:
                    instances[".".join(parts)] = cls
    # a chain's inner links (``alias.a`` of ``alias.a.b``) are not uses of their own
    inner = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            _call(node, path, modules, names, uses, guarded, instances)
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Load)
            and id(node) not in inner
        ):
            key = _attribute_key(node, modules, names)
            if key is not None:
                uses.add(key, path, id(node) in guarded)
    _lazy_imports(tree, path, uses)


def _attribute_key(node: ast.AST, modules: dict[str, str], names: dict[str, str]) -> str | None:
    """``alias.a.b`` → ``<module>:a.b``; ``Imported.method`` → ``<module>:Imported.method``.
    Only the full chain counts (``alias.a`` of ``alias.a.b`` is its prefix)."""
    parts = _dotted(node)
    if not parts or len(parts) < 2:
        return None
    head, rest = parts[0], parts[1:]
    if head in modules:
        return f"{modules[head]}:{'.'.join(rest)}"
    if head in names and len(rest) == 1:  # a class's method or attribute
        return f"{names[head]}.{rest[0]}"
    return None


def _call(
    node: ast.Call,
    path: str,
    modules: dict[str, str],
    names: dict[str, str],
    uses: _Uses,
    guarded: set[int],
    instances: dict[str, str],
) -> None:
    keywords = {k.arg for k in node.keywords if k.arg is not None}
    func = node.func
    key: str | None = None
    if isinstance(func, ast.Name) and func.id in names:
        key = names[func.id]
    elif isinstance(func, ast.Attribute):
        key = _attribute_key(func, modules, names)
        owner = _dotted(func.value)
        if key is None and owner and ".".join(owner) in instances:
            key = f"{instances['.'.join(owner)]}.{func.attr}"
            uses.add(key, path, id(node) in guarded, keywords)
            return
    elif isinstance(func, ast.Name) and func.id == "getattr" and len(node.args) >= 2:
        head, attr = node.args[0], _str(node.args[1])
        if isinstance(head, ast.Name) and head.id in modules and attr:
            with_default = len(node.args) > 2
            uses.add(f"{modules[head.id]}:{attr}", path, with_default or id(node) in guarded)
        return
    if key is not None and keywords:
        uses.add(key, path, id(node) in guarded, keywords)


def _class_key(func: ast.AST, modules: dict[str, str], names: dict[str, str]) -> str | None:
    """The key of a companion class a call constructs (a capitalised name), else None."""
    key = names.get(func.id) if isinstance(func, ast.Name) else _attribute_key(func, modules, names)
    if key is None:
        return None
    last = key.rsplit(":", 1)[-1].rsplit(".", 1)[-1]
    return key if last[:1].isupper() else None


def _lazy_imports(tree: ast.Module, path: str, uses: _Uses) -> None:
    """``wrapper("flashinfer.fused_moe", "cutlass_fused_moe")``: a module and a name as the
    first two string arguments of a call (vLLM's lazy imports, which fall back)."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or len(node.args) < 2:
            continue
        module, name = _str(node.args[0]), _str(node.args[1])
        if (
            module
            and name
            and name.isidentifier()
            and _top(module) in COMPANION_MODULES
            and all(part.isidentifier() for part in module.split("."))
        ):
            uses.add(f"{module}:{name}", path, True, lazy=True)


def _module_of(path: str) -> str:
    parts = path[: -len(".py")].split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(["vllm", *parts])


def lazy_wrappers(tree: ast.Module, path: str) -> dict[str, str]:
    """``flashinfer_x = _lazy_import_wrapper("flashinfer.decode", "x", ...)`` at module level:
    ``vllm.utils.flashinfer:flashinfer_x`` → ``flashinfer.decode:x``. vLLM's other modules
    import the wrapper and call it with the keywords the companion's function receives."""
    out = {}
    for stmt in tree.body:
        if not (isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call)):
            continue
        args = stmt.value.args
        module = _str(args[0]) if args else None
        name = _str(args[1]) if len(args) > 1 else None
        if not (module and name and _top(module) in COMPANION_MODULES and name.isidentifier()):
            continue
        for target in stmt.targets:
            if isinstance(target, ast.Name):
                out[f"{_module_of(path)}:{target.id}"] = f"{module}:{name}"
    return out


def extract(release) -> dict[str, Any]:
    uses = _Uses()
    trees: dict[str, ast.Module] = {}
    wrappers: dict[str, str] = {}
    for path in release.names:
        if not path.endswith(".py") or path.startswith("third_party/"):
            continue
        text = release.text(path)
        if text is None or not any(m in text for m in (*COMPANION_MODULES, "utils.flashinfer")):
            continue
        tree = release.tree(path)
        if tree is None:
            release.problem(f"{path}: does not parse")
            continue
        trees[path] = tree
        wrappers.update(lazy_wrappers(tree, path))
    for path, tree in trees.items():
        file_uses(tree, path, uses, wrappers)
    return uses.result()
