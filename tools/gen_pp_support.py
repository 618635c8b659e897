#!/usr/bin/env python3
"""Which model architectures of vLLM lack pipeline-parallel support, per release.

vLLM rejects ``--pipeline-parallel-size > 1`` for a model whose class does not implement
the ``SupportsPP`` interface (``ModelConfig.verify_with_parallel_config``). This script
reads unpacked release trees (``<root>/<version>/vllm/``) statically, never importing
vLLM: it takes the architecture -> (module, class) table of
``vllm/model_executor/models/registry.py`` and follows each class's bases through the
module's imports until it finds ``SupportsPP`` (or a class body setting
``supports_pp = True``).

Output (``--out``, YAML): for every architecture, the releases that register it and
those in which it supports PP; then the architectures that never support PP in any
release that registers them (the list rule PAR004 uses), and the ones whose support
changed between releases.

Usage:
    python tools/gen_pp_support.py --root /work/wheels/src --out tools/data/pp_support.yaml
    python tools/gen_pp_support.py --root /work/wheels/src --print-never-pp
"""

from __future__ import annotations

import argparse
import ast
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from packaging.version import Version

REGISTRY = "vllm/model_executor/models/registry.py"
PP_INTERFACE = "SupportsPP"


@dataclass
class Module:
    path: Path
    name: str
    tree: ast.Module
    # name -> ("class", ClassDef) | ("import", module, attr or None) | ("alias", expr)
    bindings: dict[str, tuple] = field(default_factory=dict)


class Resolver:
    """Resolves classes of one release tree statically."""

    def __init__(self, root: Path):
        self.root = root  # the directory holding the `vllm` package
        self._modules: dict[str, Module | None] = {}

    # -- modules -----------------------------------------------------------------------
    def module(self, dotted: str) -> Module | None:
        if dotted in self._modules:
            return self._modules[dotted]
        rel = Path(*dotted.split("."))
        mod = None
        for candidate in (self.root / rel.with_suffix(".py"), self.root / rel / "__init__.py"):
            if candidate.is_file():
                try:
                    tree = ast.parse(candidate.read_text(encoding="utf-8", errors="replace"))
                except SyntaxError:
                    break
                mod = Module(candidate, dotted, tree)
                self._bind(mod, tree.body)
                break
        self._modules[dotted] = mod
        return mod

    def _package_of(self, mod: Module) -> str:
        if mod.path.name == "__init__.py":
            return mod.name
        return mod.name.rsplit(".", 1)[0]

    def _bind(self, mod: Module, body: list[ast.stmt]) -> None:
        """Top-level bindings in source order; later ones win (the last branch of an
        ``if/elif/else`` import chain is the CUDA default in vLLM's platform switches)."""
        for stmt in body:
            if isinstance(stmt, ast.ClassDef):
                mod.bindings[stmt.name] = ("class", stmt)
            elif isinstance(stmt, ast.ImportFrom):
                base = stmt.module or ""
                if stmt.level:
                    pkg = self._package_of(mod).split(".")
                    pkg = pkg[: len(pkg) - (stmt.level - 1)]
                    base = ".".join(pkg + ([base] if base else []))
                for alias in stmt.names:
                    if alias.name == "*":
                        continue
                    mod.bindings[alias.asname or alias.name] = ("import", base, alias.name)
            elif isinstance(stmt, ast.Import):
                for alias in stmt.names:
                    if alias.asname:
                        mod.bindings[alias.asname] = ("import", alias.name, None)
                    else:
                        top = alias.name.split(".")[0]
                        mod.bindings[top] = ("import", top, None)
            elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                target = stmt.targets[0]
                if isinstance(target, ast.Name) and isinstance(
                    stmt.value, (ast.Name, ast.Attribute, ast.Call)
                ):
                    mod.bindings[target.id] = ("alias", stmt.value)
            elif isinstance(stmt, ast.If):
                self._bind(mod, stmt.body)
                self._bind(mod, stmt.orelse)
            elif isinstance(stmt, ast.Try):
                self._bind(mod, stmt.body)

    # -- names -----------------------------------------------------------------------
    def lookup(self, mod: Module, name: str, depth: int = 0):
        """-> ("class", Module, ClassDef) | ("module", dotted) | ("external", text) | None"""
        if depth > 30:
            return None
        binding = mod.bindings.get(name)
        if binding is None:
            return None
        kind = binding[0]
        if kind == "class":
            return ("class", mod, binding[1])
        if kind == "import":
            _, base, attr = binding
            if attr is None:
                return ("module", base)
            return self.lookup_in(base, attr, depth + 1)
        if kind == "alias":
            return self.lookup_expr(mod, binding[1], depth + 1)
        return None

    def lookup_in(self, dotted: str, attr: str, depth: int):
        if not dotted.startswith("vllm"):
            return ("external", f"{dotted}.{attr}")
        target = self.module(dotted)
        if target is not None:
            found = self.lookup(target, attr, depth + 1)
            if found is not None:
                return found
        # `from pkg import submodule`
        if self.module(f"{dotted}.{attr}") is not None:
            return ("module", f"{dotted}.{attr}")
        return None

    def lookup_expr(self, mod: Module, expr: ast.expr, depth: int = 0):
        if isinstance(expr, ast.Subscript):  # Generic[T], Protocol[...]
            return self.lookup_expr(mod, expr.value, depth)
        if isinstance(expr, ast.Call) and expr.args:
            # Class adapters (`as_embedding_model(LlamaForCausalLM)`,
            # `as_seq_cls_model(...)`) return a subclass of their first argument.
            return self.lookup_expr(mod, expr.args[0], depth + 1)
        if isinstance(expr, ast.Name):
            return self.lookup(mod, expr.id, depth)
        if isinstance(expr, ast.Attribute):
            owner = self.lookup_expr(mod, expr.value, depth + 1)
            if owner and owner[0] == "module":
                return self.lookup_in(owner[1], expr.attr, depth + 1)
            if owner and owner[0] == "external":
                return ("external", f"{owner[1]}.{expr.attr}")
        return None

    # -- the question ------------------------------------------------------------------
    def supports_pp(self, dotted: str, cls_name: str) -> bool | None:
        """True/False, or None when the class cannot be found statically."""
        return self.implements(dotted, cls_name, PP_INTERFACE, "supports_pp")

    def implements(
        self, dotted: str, cls_name: str, interface: str, flag: str | None
    ) -> bool | None:
        """Whether the class derives from ``interface`` (an interfaces module's class) or
        sets ``flag = True`` in its body, here or in a base; None when it cannot be found."""
        mod = self.module(dotted)
        if mod is None:
            return None
        found = self.lookup(mod, cls_name)
        if found is None or found[0] != "class":
            return None
        return self._class_implements(found[1], found[2], interface, flag, set())

    def _class_implements(
        self, mod: Module, cls: ast.ClassDef, interface: str, flag: str | None, seen: set
    ) -> bool:
        key = (mod.name, cls.name)
        if key in seen:
            return False
        seen.add(key)
        if cls.name == interface and mod.name.endswith("interfaces"):
            return True
        if flag is not None and _sets_true(cls, flag):
            return True
        for base in cls.bases:
            if isinstance(base, ast.Name) and base.id == interface:
                return True
            if isinstance(base, ast.Attribute) and base.attr == interface:
                return True
            found = self.lookup_expr(mod, base)
            if (
                found
                and found[0] == "class"
                and self._class_implements(found[1], found[2], interface, flag, seen)
            ):
                return True
        return False


def _single_assignment(stmt: ast.stmt) -> tuple[ast.expr | None, ast.expr | None]:
    """(target, value) of ``x = v`` or ``x: T = v``; (None, None) for any other statement."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        return stmt.targets[0], stmt.value
    if isinstance(stmt, ast.AnnAssign):
        return stmt.target, stmt.value
    return None, None


def _sets_true(cls: ast.ClassDef, attr: str) -> bool:
    """The class body sets ``attr = True`` (``supports_pp = True``)."""
    for stmt in cls.body:
        target, value = _single_assignment(stmt)
        if (
            isinstance(target, ast.Name)
            and target.id == attr
            and isinstance(value, ast.Constant)
            and value.value is True
        ):
            return True
    return False


def registry_table(registry_path: Path) -> dict[str, tuple[str, str]]:
    """architecture -> (dotted module, class) from the dicts merged into _VLLM_MODELS."""
    tree = ast.parse(registry_path.read_text(encoding="utf-8"))
    dicts: dict[str, ast.Dict] = {}
    for stmt in tree.body:
        target, value = _single_assignment(stmt)
        if isinstance(target, ast.Name) and isinstance(value, ast.Dict):
            dicts[target.id] = value
    merged = dicts.get("_VLLM_MODELS")
    if merged is None:
        raise SystemExit(f"{registry_path}: no _VLLM_MODELS")
    table: dict[str, tuple[str, str]] = {}
    for key, value in zip(merged.keys, merged.values, strict=True):
        if key is not None or not isinstance(value, ast.Name):
            continue
        part = dicts.get(value.id)
        if part is None:
            continue
        for k, v in zip(part.keys, part.values, strict=True):
            try:
                arch = ast.literal_eval(k) if k is not None else None
                mod_cls = ast.literal_eval(v)
            except ValueError:
                continue
            if not isinstance(arch, str) or not (isinstance(mod_cls, tuple) and len(mod_cls) == 2):
                continue
            mod_rel, cls_name = mod_cls
            dotted = (
                mod_rel
                if mod_rel.startswith("vllm.")
                else (f"vllm.model_executor.models.{mod_rel}")
            )
            table[arch] = (dotted, cls_name)
    return table


def analyse(root: Path) -> dict:
    versions = sorted((p.name for p in root.iterdir() if (p / REGISTRY).is_file()), key=Version)
    per_arch: dict[str, dict[str, list[str]]] = {}
    for version in versions:
        resolver = Resolver(root / version)
        for arch, (dotted, cls_name) in registry_table(root / version / REGISTRY).items():
            entry = per_arch.setdefault(arch, {"registered": [], "pp": [], "unresolved": []})
            entry["registered"].append(version)
            result = resolver.supports_pp(dotted, cls_name)
            if result is None:
                entry["unresolved"].append(version)
            elif result:
                entry["pp"].append(version)
    never, changed = [], {}
    for arch, entry in sorted(per_arch.items()):
        resolved = [v for v in entry["registered"] if v not in entry["unresolved"]]
        if not resolved:
            continue
        if not entry["pp"]:
            never.append(arch)
        elif len(entry["pp"]) != len(resolved):
            changed[arch] = {
                "pp": entry["pp"],
                "no_pp": [v for v in resolved if v not in entry["pp"]],
            }
    return {
        "releases": versions,
        "never_pp": never,
        "changed": changed,
        "unresolved": {a: e["unresolved"] for a, e in sorted(per_arch.items()) if e["unresolved"]},
        "architectures": {
            a: {
                "first": e["registered"][0],
                "last": e["registered"][-1],
                "pp_in": len(e["pp"]),
                "registered_in": len(e["registered"]),
            }
            for a, e in sorted(per_arch.items())
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--root",
        type=Path,
        required=True,
        help="directory with one unpacked release per sub-directory",
    )
    parser.add_argument("--out", type=Path, help="write the analysis as YAML here")
    parser.add_argument(
        "--print-never-pp",
        action="store_true",
        help="print the never-PP architectures as a YAML list",
    )
    args = parser.parse_args(argv)
    result = analyse(args.root)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        header = (
            "# Generated by tools/gen_pp_support.py from the release trees of "
            f"{result['releases'][0]}..{result['releases'][-1]}; do not edit by hand.\n"
        )
        args.out.write_text(header + yaml.safe_dump(result, sort_keys=False, width=100))
    if args.print_never_pp:
        yaml.safe_dump(result["never_pp"], sys.stdout, default_flow_style=False)
    if not args.out and not args.print_never_pp:
        print(
            f"{len(result['never_pp'])} never-PP, {len(result['changed'])} changed, "
            f"{len(result['unresolved'])} with unresolved classes"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
