"""Speculative-decoding methods each release accepts, and the target models a drafter needs
(KIND "speculative").

Read from the release's ``SpeculativeConfig`` (``config/speculative.py``, before 0.11
``config/__init__.py`` or ``config.py``):

* ``method:<name>``: every value of the ``SpeculativeMethod`` ``Literal`` (the aliases it
  nests — ``EagleModelTypes``, ``MTPModelTypes``, ... — flattened); value ``{"file"}``;
* ``target:<method>``: the target-model check of a method that reads the target's hidden
  states (EAGLE-3 and, later, extract_hidden_states / dflash): ``if self.method ... and not
  any(m in target_model_config.hf_text_config.model_type for m in LIST): raise`` (or
  ``"llama" not in ...model_type``); value ``{"model_types": LIST, "match": "substring of
  hf_text_config.model_type", "file", "function"}``;
* ``@release``: ``{"file", "validated"}``. ``validated``: the class is a pydantic dataclass
  (its ``@dataclass`` from ``pydantic.dataclasses``, or the ``@config`` decorator that makes
  one), so a method outside the ``Literal`` is refused when the config is built; a plain
  dataclass (0.9.0-0.9.1) or no ``Literal`` (0.8.x) proves nothing.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _static import find_class, guarded_raises

KIND = "speculative"
RELEASE_KEY = "@release"
CANDIDATES = ("config/speculative.py", "config/__init__.py", "config.py")
PYDANTIC_DATACLASS = "from pydantic.dataclasses import dataclass"
META = {
    "key": "method:<name> (a speculative_config method), target:<method> (the target models "
    "the method needs), '@release'",
    "value": {
        "file": "the file defining SpeculativeConfig (relative to the vllm package)",
        "model_types": "target:<method>: names one of which hf_text_config.model_type must contain",
        "@release.validated": "SpeculativeConfig is a pydantic dataclass: a method outside the "
        "Literal is refused",
    },
    "sources": list(CANDIDATES),
}


def _literal_aliases(tree: ast.Module) -> dict[str, list[str]]:
    """Module-level ``Name = Literal[...]`` aliases, nested aliases flattened."""
    raw: dict[str, list[ast.expr]] = {}
    for stmt in tree.body:
        if (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
            and isinstance(stmt.value, ast.Subscript)
            and isinstance(stmt.value.value, ast.Name)
            and stmt.value.value.id == "Literal"
        ):
            items = stmt.value.slice
            raw[stmt.targets[0].id] = list(items.elts) if isinstance(items, ast.Tuple) else [items]

    def flatten(name: str, seen: frozenset[str]) -> list[str]:
        out: list[str] = []
        for item in raw.get(name, []):
            if isinstance(item, ast.Constant) and isinstance(item.value, str):
                out.append(item.value)
            elif isinstance(item, ast.Name) and item.id in raw and item.id not in seen:
                out += flatten(item.id, seen | {item.id})
        return out

    return {name: flatten(name, frozenset({name})) for name in raw}


def _validated(release, rel: str, cls: ast.ClassDef) -> bool:
    text = release.text(rel) or ""
    names = {
        d.id if isinstance(d, ast.Name) else getattr(d, "attr", None) for d in cls.decorator_list
    }
    if "dataclass" in names and PYDANTIC_DATACLASS in text:
        return True
    utils = release.text("config/utils.py") or ""
    return "config" in names and "dataclass" not in names and PYDANTIC_DATACLASS in utils


def _methods_tested(test: ast.expr) -> list[str]:
    """The methods a condition tests ``self.method`` against (== or in a literal tuple)."""
    found: list[str] = []
    for node in ast.walk(test):
        if (
            isinstance(node, ast.Compare)
            and isinstance(node.left, ast.Attribute)
            and node.left.attr == "method"
            and len(node.ops) == 1
        ):
            try:
                value = ast.literal_eval(node.comparators[0])
            except ValueError:
                continue
            if isinstance(node.ops[0], ast.Eq) and isinstance(value, str):
                found.append(value)
            elif isinstance(node.ops[0], ast.In) and isinstance(value, (tuple, list)):
                found += [v for v in value if isinstance(v, str)]
    return found


def _model_types(test: ast.expr, function: ast.AST) -> list[str] | None:
    """The target model types a condition accepts: ``"llama" not in X.model_type`` or
    ``not any(m in X.model_type for m in NAME)`` with NAME a list literal in the function."""
    for node in ast.walk(test):
        if (
            isinstance(node, ast.Compare)
            and len(node.ops) == 1
            and isinstance(node.ops[0], ast.NotIn)
            and isinstance(node.comparators[0], ast.Attribute)
            and node.comparators[0].attr == "model_type"
            and isinstance(node.left, ast.Constant)
        ):
            return [node.left.value]
        if (
            isinstance(node, ast.GeneratorExp)
            and node.generators
            and isinstance(node.generators[0].iter, ast.Name)
        ):
            name = node.generators[0].iter.id
            for stmt in ast.walk(function):
                if (
                    isinstance(stmt, ast.Assign)
                    and len(stmt.targets) == 1
                    and isinstance(stmt.targets[0], ast.Name)
                    and stmt.targets[0].id == name
                ):
                    try:
                        value = ast.literal_eval(stmt.value)
                    except ValueError:
                        return None
                    return [v for v in value if isinstance(v, str)]
    return None


def extract(release) -> dict[str, Any]:
    for rel in CANDIDATES:
        tree = release.tree(rel)
        cls = find_class(tree, "SpeculativeConfig") if tree is not None else None
        if cls is not None:
            break
    else:
        release.problem("no SpeculativeConfig class found")
        return {}
    out: dict[str, Any] = {RELEASE_KEY: {"file": rel, "validated": _validated(release, rel, cls)}}
    methods = _literal_aliases(tree).get("SpeculativeMethod")
    if not methods:
        release.problem(f"{rel}: no SpeculativeMethod Literal (methods not listed)")
    for method in methods or ():
        out[f"method:{method}"] = {"file": rel}
    functions = {f.name: f for f in ast.walk(cls) if isinstance(f, ast.FunctionDef)}
    for func, test, raised in guarded_raises(cls):  # type: ignore[arg-type]
        if "only supported for" not in raised:
            continue
        types = _model_types(test, functions[func])
        if types is None:
            release.problem(f"{rel} {func}: a target check whose model types are not literal")
            continue
        for method in _methods_tested(test):
            out[f"target:{method}"] = {
                "model_types": types,
                "match": "substring of hf_text_config.model_type",
                "file": rel,
                "function": f"SpeculativeConfig.{func}",
            }
    return out
