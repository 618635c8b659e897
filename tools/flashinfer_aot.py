"""Which FlashInfer JIT modules a flashinfer-python version builds ahead of time, and which
modules each of its entry points loads, read from the wheel with ``ast`` (never imported).

flashinfer-jit-cache is FlashInfer's ahead-of-time build: its wheel of version V is
``python -m flashinfer.aot`` of flashinfer-python V's source, which compiles every JIT module
that ``flashinfer/aot.py``'s ``gen_all_modules`` yields, for the architectures of
``FLASHINFER_CUDA_ARCH_LIST``. A module outside that list (or gated on a capability the build
did not have) is compiled with nvcc at first use. So from each flashinfer-python wheel:

* ``aot``: ``{generator: [condition, ...]}`` — every ``gen_*_module`` the AOT build yields and
  the condition of each place that yields it: a list of clauses, each clause the capabilities
  (``sm90``, ``sm100``, ``sm121``, ...) of which one must be present (``if has_sm120 or
  has_sm121:``); ``[]`` is unconditional (built for every architecture of the build). Helper
  generators (``gen_attention``, ``gen_fa3``, ``gen_xqa``) are followed with their call-site
  conditions. The parameter grid (head dims, dtypes) is not evaluated: an attention generator
  listed here is prebuilt for some of its variants only.
* ``capabilities``: ``{capability: {"compute": "compute_121", "cuda": "12.9"}}`` —
  ``detect_sm_capabilities``: a capability is on in the build when the arch list names its
  compute target and the build's CUDA is at least this version.
* ``uses``: ``{"<module>:<name>": [generator, ...]}`` — the ``gen_*_module`` functions each
  name vLLM uses of the package (``data/companion_uses.json``) reaches through its calls (bare names resolved
  in their module, then through its imports, then by a name defined once in the package;
  ``self.<method>`` in the class), so ``flashinfer.sampling:top_k_top_p_sampling_from_logits``
  → ``gen_sampling_module``.

"""

from __future__ import annotations

import ast
import re
import zipfile
from collections import defaultdict
from pathlib import PurePosixPath
from typing import Any

AOT_FORMAT = 2
AOT_FILE = "flashinfer/aot.py"
_GENERATOR = re.compile(r"^gen_\w+_module$")
_CAPABILITY = re.compile(r"^has_(sm\w+)$")
_SKIP_DIRS = {"data", "tests", "test", "experimental", "kernel_src"}
# FlashInfer's API logging: its statistics kernel is built only at FLASHINFER_LOGLEVEL 5 and a
# failed build is a warning, so what the logging wrappers reach is no entry point's need
_NOT_FOLLOWED = {"flashinfer.api_logging"}


def _called(node: ast.Call) -> str | None:
    func = node.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _clause(test: ast.expr) -> list[str] | None:
    """The capabilities named by one ``if`` test (``has_sm120 or has_sm121`` → one clause of
    both), or None when the test names none (a config flag, a dtype check)."""
    names = sorted(
        m.group(1)
        for n in ast.walk(test)
        if isinstance(n, ast.Name) and (m := _CAPABILITY.match(n.id))
    )
    if not names or any(isinstance(n, ast.UnaryOp) for n in ast.walk(test)):
        return None  # `if not has_sm90` gates nothing the build could have
    return names


def _yields(fn: ast.FunctionDef) -> list[tuple[str, list[list[str]]]]:
    """(called name, conditions) for every call in ``fn``, with the capability clauses of the
    ``if`` statements around it (their body, not their ``else``)."""
    out: list[tuple[str, list[list[str]]]] = []

    def visit(node: ast.AST, conds: list[list[str]]) -> None:
        if isinstance(node, ast.If):
            clause = _clause(node.test)
            inner = [*conds, clause] if clause else conds
            for child in node.body:
                visit(child, inner)
            for child in node.orelse:
                visit(child, conds)
            return
        if isinstance(node, ast.Call):
            name = _called(node)
            if name:
                out.append((name, conds))
        for child in ast.iter_child_nodes(node):
            visit(child, conds)

    for stmt in fn.body:
        visit(stmt, [])
    return out


def aot_modules(source: str) -> dict[str, list[list[list[str]]]]:
    """``aot`` of the module docstring, from the text of ``flashinfer/aot.py``."""
    tree = ast.parse(source)
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    found: dict[str, list[list[list[str]]]] = defaultdict(list)

    def walk(name: str, outer: list[list[str]], seen: tuple[str, ...]) -> None:
        for called, conds in _yields(functions[name]):
            where = outer + conds
            if _GENERATOR.match(called):
                clauses = sorted({tuple(c) for c in where})
                entry = [list(c) for c in clauses]
                if entry not in found[called]:
                    found[called].append(entry)
            elif called in functions and called not in seen and called.startswith("gen_"):
                walk(called, where, (*seen, called))

    if "gen_all_modules" in functions:
        walk("gen_all_modules", [], ("gen_all_modules",))
    return {name: sorted(conds) for name, conds in sorted(found.items())}


def capabilities(source: str) -> dict[str, dict[str, str]]:
    """``capabilities`` of the module docstring: the dict ``detect_sm_capabilities`` returns,
    each value ``has_sm("compute_XY", "<cuda>")``."""
    tree = ast.parse(source)
    out: dict[str, dict[str, str]] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.FunctionDef) and node.name == "detect_sm_capabilities"):
            continue
        for sub in ast.walk(node):
            if not isinstance(sub, ast.Dict):
                continue
            for key, value in zip(sub.keys, sub.values, strict=True):
                if (
                    isinstance(key, ast.Constant)
                    and isinstance(value, ast.Call)
                    and len(value.args) == 2
                    and all(isinstance(a, ast.Constant) for a in value.args)
                ):
                    compute, cuda = (a.value for a in value.args)
                    out[str(key.value)] = {"compute": str(compute), "cuda": str(cuda)}
    return dict(sorted(out.items()))


# -- the entry points -------------------------------------------------------------------------


def _module_of(path: str) -> str | None:
    parts = PurePosixPath(path).with_suffix("").parts
    if not all(p.isidentifier() for p in parts) or _SKIP_DIRS & set(parts[1:-1]):
        return None
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


class _Package:
    """Every function and class of the package, its calls and the imports of its module."""

    def __init__(self, archive: zipfile.ZipFile) -> None:
        self.calls: dict[str, set[str]] = {}  # "<module>:<name>" → called names
        self.imports: dict[str, dict[str, str]] = {}  # module → local name → "<module>:<name>"
        self.defined: dict[str, list[str]] = defaultdict(list)  # name → "<module>:<name>" keys
        self.modules: set[str] = set()
        for info in archive.infolist():
            if not info.filename.startswith("flashinfer/") or not info.filename.endswith(".py"):
                continue
            module = _module_of(info.filename)
            if module is None:
                continue
            try:
                tree = ast.parse(archive.read(info).decode("utf-8", "replace"))
            except SyntaxError:
                continue
            self.modules.add(module)
            self._read(module, info.filename.endswith("__init__.py"), tree)

    def _read(self, module: str, package: bool, tree: ast.Module) -> None:
        imports = self.imports.setdefault(module, {})
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = module.split(".")
                base = base[: len(base) - node.level + (1 if package else 0)]
                target = ".".join(base + ([node.module] if node.module else []))
                for alias in node.names:
                    imports[alias.asname or alias.name] = f"{target}:{alias.name}"
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("flashinfer"):
                for alias in node.names:
                    imports[alias.asname or alias.name] = f"{node.module}:{alias.name}"
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self._define(module, node.name, node)
            elif isinstance(node, ast.ClassDef):
                self._define(module, node.name, node)
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        self._define(module, f"{node.name}.{item.name}", item)

    def _define(self, module: str, name: str, node: ast.AST) -> None:
        key = f"{module}:{name}"
        cls = name.split(".")[0] if "." in name or isinstance(node, ast.ClassDef) else None
        called: set[str] = set()
        # the body only: a decorator (``@flashinfer_api``'s log statistics) runs at import
        body = ast.Module(body=list(getattr(node, "body", [])), type_ignores=[])
        for sub in ast.walk(body):
            if not isinstance(sub, ast.Call):
                continue
            func = sub.func
            if isinstance(func, ast.Name):
                called.add(func.id)
            elif (
                isinstance(func, ast.Attribute)
                and isinstance(func.value, ast.Name)
                and func.value.id == "self"
                and cls
            ):
                called.add(f"{cls}.{func.attr}")
        self.calls[key] = called
        self.defined[name].append(key)

    def resolve(self, module: str, name: str, depth: int = 0) -> str | None:
        """The key defining ``name`` as seen from ``module``."""
        key = f"{module}:{name}"
        if key in self.calls:
            return key
        head = name.split(".")[0]
        ref = self.imports.get(module, {}).get(head)
        if ref and depth < 8:
            target, _, imported = ref.partition(":")
            rest = name[len(head) :]
            if f"{target}.{imported}" in self.modules and rest:  # `from . import sampling`
                return self.resolve(f"{target}.{imported}", rest.lstrip("."), depth + 1)
            return self.resolve(target, imported + rest, depth + 1)
        if "." in name and f"{module}.{head}" in self.modules:  # `flashinfer:sampling.x`
            return self.resolve(f"{module}.{head}", name[len(head) + 1 :], depth + 1)
        unique = self.defined.get(name, [])
        return unique[0] if len(unique) == 1 else None

    def generators(self, key: str) -> list[str]:
        """The ``gen_*_module`` functions ``key`` reaches (a class: through all its methods)."""
        start = [k for k in self.calls if k == key or k.startswith(f"{key}.")]
        found: set[str] = set()
        seen: set[str] = set()
        todo = list(start)
        while todo:
            current = todo.pop()
            if current in seen:
                continue
            seen.add(current)
            here = current.partition(":")[0]
            for called in self.calls.get(current, ()):
                if _GENERATOR.match(called.split(".")[-1]):
                    found.add(called.split(".")[-1])
                    continue
                target = self.resolve(here, called)
                if target is not None and target.partition(":")[0] not in _NOT_FOLLOWED:
                    todo.append(target)
        return sorted(found)


def read(archive: zipfile.ZipFile, used: list[str]) -> dict[str, Any]:
    """The reading kept for one flashinfer-python wheel: ``aot``, ``capabilities`` and
    ``uses`` (each name of ``used`` — the names vLLM's releases use — that the package's code
    defines, with the generators it reaches; a name not followed here has no key)."""
    names = set(archive.namelist())
    out: dict[str, Any] = {
        "aot": {},
        "capabilities": {},
        "uses": {},
        "format": AOT_FORMAT,
        "asked": sorted(used),
    }
    if AOT_FILE in names:
        source = archive.read(AOT_FILE).decode("utf-8", "replace")
        out["aot"] = aot_modules(source)
        out["capabilities"] = capabilities(source)
    package = _Package(archive)
    for key in sorted(used):
        modules = modules_for(package, key)
        if modules is not None:
            out["uses"][key] = modules
    return out


def modules_for(package: _Package, key: str) -> list[str] | None:
    """The generators a name vLLM uses reaches (``flashinfer:sampling.top_p_renorm_prob``,
    ``flashinfer.decode:BatchDecodeWithPagedKVCacheWrapper.run``); None when the package's
    code does not define it."""
    module, _, name = key.partition(":")
    target = package.resolve(module, name)
    if target is None:
        return None
    return package.generators(target)
