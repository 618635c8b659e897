"""The names and signatures a companion wheel exports, read as a zip archive with ``ast``
(never installed or imported), and their resolution against what vLLM uses of them.

``api_in(archive, tops)`` reads every module of the top-level packages ``tops`` (vendored and
test folders left out) into ``{module: {name: entry}}``:

* a function: ``{"params": [its parameter names], "kwargs": true when it takes **kwargs}``;
* a class: ``{"class": true, "params": __init__'s parameters (without self) or None when it
  defines none (a dataclass's fields, an inherited __init__: not read), "kwargs": ...}``;
  its methods are entries ``Class.method``; its other attributes ``{"value": true}``;
* a top-level assignment: ``{"value": true}``;
* an import: ``{"ref": "<module>:<name>"}`` (``from .x import y``) or ``{"module":
  "<module>"}`` (``import a.b as c``); ``from .x import *`` adds ``x`` to the module's
  ``"*"`` list; a module that defines ``__getattr__`` (lazy exports) is marked ``"?": true``.

Definitions under ``if``/``try`` at module level count (they exist in some environment).

``resolve(api, "<module>:<dotted name>")`` follows the imports and re-exports and gives the
entry, ``MISSING`` (the package's own code shows the name does not exist), or None (not
decidable here: a name re-exported from another distribution, a lazy ``__getattr__``, an
attribute of a value).
"""

from __future__ import annotations

import ast
import zipfile
from pathlib import PurePosixPath
from typing import Any

API_FORMAT = 1
MISSING: dict[str, Any] = {"missing": True}
_SKIP_DIRS = {"data", "third_party", "3rdparty", "tests", "test", "csrc", "include"}
_MAX_DEPTH = 12


def _module_name(path: str) -> str | None:
    parts = PurePosixPath(path).with_suffix("").parts
    if not all(p.isidentifier() for p in parts):
        return None
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts) if parts else None


def _signature(fn: ast.FunctionDef | ast.AsyncFunctionDef, method: bool) -> dict[str, Any]:
    args = fn.args
    names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
    if (
        method
        and names
        and not any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in fn.decorator_list)
    ):
        names = names[1:]  # self / cls
    return {"params": names, "kwargs": args.kwarg is not None}


def _absolute(module: str, is_package: bool, level: int, target: str | None) -> str:
    if level == 0:
        return target or ""
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (level - 1)] if level > 1 else base
    return ".".join([*base, *([target] if target else [])])


def _class_entries(node: ast.ClassDef) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    init = None
    for stmt in node.body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            out[f"{node.name}.{stmt.name}"] = _signature(stmt, method=True)
            if stmt.name == "__init__":
                init = out[f"{node.name}.{stmt.name}"]
        elif isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    out[f"{node.name}.{target.id}"] = {"value": True}
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            out[f"{node.name}.{stmt.target.id}"] = {"value": True}
    out[node.name] = {
        "class": True,
        "params": None if init is None else init["params"],
        "kwargs": True if init is None else init["kwargs"],
        # the class's bases: a method not defined here may be inherited
        "bases": len(node.bases) > 0,
    }
    return out


def module_api(
    tree: ast.Module, module: str, is_package: bool, type_checking: bool = True
) -> dict[str, Any]:
    """The names of one module; ``type_checking=False`` leaves out what ``if TYPE_CHECKING:``
    defines (it does not exist at run time: an import from there fails)."""
    names: dict[str, Any] = {}
    stars: list[str] = []

    def visit(body: list[ast.stmt]) -> None:
        for stmt in body:
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
                names[stmt.name] = _signature(stmt, method=False)
            elif isinstance(stmt, ast.ClassDef):
                names.update(_class_entries(stmt))
            elif isinstance(stmt, ast.Assign):
                for target in stmt.targets:
                    for node in ast.walk(target):
                        if isinstance(node, ast.Name):
                            names.setdefault(node.id, {"value": True})
            elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                names.setdefault(stmt.target.id, {"value": True})
            elif isinstance(stmt, ast.ImportFrom):
                source = _absolute(module, is_package, stmt.level, stmt.module)
                for alias in stmt.names:
                    if alias.name == "*":
                        stars.append(source)
                    else:
                        names[alias.asname or alias.name] = {"ref": f"{source}:{alias.name}"}
            elif isinstance(stmt, ast.Import):
                for alias in stmt.names:
                    if alias.asname:
                        names[alias.asname] = {"module": alias.name}
                    else:
                        top = alias.name.split(".", 1)[0]
                        names.setdefault(top, {"module": top})
            elif isinstance(stmt, ast.If):
                if type_checking or not _is_type_checking(stmt.test):
                    visit(stmt.body)
                visit(stmt.orelse)
            elif isinstance(stmt, ast.Try):
                visit(stmt.body)
                for handler in stmt.handlers:
                    visit(handler.body)
                visit(stmt.orelse)
                visit(stmt.finalbody)
            elif isinstance(stmt, ast.With):
                visit(stmt.body)

    visit(tree.body)
    if stars:
        names["*"] = stars
    if "__getattr__" in names:
        names["?"] = True
    return names


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def api_in(archive: zipfile.ZipFile, tops: set[str]) -> dict[str, dict[str, Any]]:
    """{module: its names} for every module of the top-level packages ``tops``."""
    out: dict[str, dict[str, Any]] = {}
    for name in archive.namelist():
        parts = name.split("/")
        if not name.endswith(".py") or parts[0] not in tops or _SKIP_DIRS & set(parts[1:-1]):
            continue
        module = _module_name(name)
        if module is None:
            continue
        try:
            tree = ast.parse(archive.read(name).decode("utf-8", "replace"))
        except (SyntaxError, ValueError):
            out[module] = {"?": True}  # present, not readable: no name is missing
            continue
        out[module] = module_api(tree, module, name.endswith("__init__.py"))
    return out


def resolve(api: dict[str, dict[str, Any]], key: str, depth: int = 0) -> dict[str, Any] | None:
    """The entry of ``<module>:<dotted name>``, ``MISSING``, or None (not decidable)."""
    module, _, dotted = key.partition(":")
    if depth > _MAX_DEPTH:
        return None
    if module not in api:
        top = module.split(".", 1)[0]
        if not any(m == top or m.startswith(f"{top}.") for m in api):
            return None  # another distribution's module
        return MISSING if not _parent_is_lazy(api, module) else None
    if not dotted:
        return {"module": module}
    names = api[module]
    first, _, rest = dotted.partition(".")
    entry = names.get(first)
    if entry is None:
        if f"{module}.{first}" in api:  # a submodule
            return resolve(api, f"{module}.{first}:{rest}", depth + 1)
        for star in names.get("*", ()):
            if star not in api:
                return None  # a star import from elsewhere: any name may come from it
            found = resolve(api, f"{star}:{dotted}", depth + 1)
            if found is not None and found is not MISSING:
                return found
        return None if names.get("?") else MISSING
    if "ref" in entry:
        source, _, name = entry["ref"].partition(":")
        target = f"{source}.{name}"
        if target in api:  # `from . import submodule`
            return resolve(api, f"{target}:{rest}", depth + 1)
        return resolve(api, f"{source}:{name}{'.' + rest if rest else ''}", depth + 1)
    if "module" in entry:
        return resolve(api, f"{entry['module']}:{rest}", depth + 1)
    if not rest:
        return entry
    if entry.get("class"):
        member = names.get(f"{first}.{rest}")
        if member is not None:
            return member
        # an enum member, an inherited method, a class attribute set elsewhere
        return None
    return None  # an attribute of a value


def _parent_is_lazy(api: dict[str, dict[str, Any]], module: str) -> bool:
    parent = module.rsplit(".", 1)[0]
    return bool(api.get(parent, {}).get("?")) if parent != module else False


def lacks(entry: dict[str, Any] | None, keywords: list[str]) -> list[str] | None:
    """The keywords a resolved entry does not accept: None when not decidable."""
    if entry is None or entry is MISSING or entry.get("missing"):
        return None
    params = entry.get("params")
    if params is None or entry.get("kwargs"):
        return []
    return [k for k in keywords if k not in params]
