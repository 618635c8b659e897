"""The tool-call and reasoning parsers each release registers, and how it checks the names
(KIND "parsers").

`--tool-call-parser` and `--reasoning-parser` take a free string in argparse (0.10.0 alone
fixes the tool parsers as argparse choices); the names a release knows are the ones its
parser managers register, read statically:

* ``@ToolParserManager.register_module("name")`` / ``(["a", "b"])`` / ``(name=...)`` (a bare
  decorator registers the class name), likewise ``ReasoningParserManager``: every
  ``tool_parsers/*.py`` and ``reasoning/*.py`` of the release;
* the lazy tables ``_TOOL_PARSERS_TO_REGISTER`` / ``_REASONING_PARSERS_TO_REGISTER``
  (name -> (file, class)) and literal ``register_lazy_module("name", ...)`` calls (0.11.2+).

Every registration form found counts (a decorated class in a module nobody imports would
not register: counting it can only hide an error, never invent one).

Key ``tool:<name>`` / ``reasoning:<name>``: ``{"class", "file"}``. Key ``@release``: how the
release validates the names at start-up, each ``{"file", "function", "condition",
"requires"}`` (``requires``: the other options the check's ``if`` reads, e.g.
``enable-auto-tool-choice``: the name is checked only when those are set):

* ``tool_check``: ``KeyError: invalid tool call parser: X (chose from { ... })``;
* ``reasoning_check``: ``KeyError: invalid reasoning parser: X (chose from { ... })``;
* ``tool_choices``: the file where argparse is given the registered names as ``choices``
  (argparse then refuses any other name, whatever else the line says).
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _static import args_read, guarded_raises

KIND = "parsers"
RELEASE_KEY = "@release"
MANAGERS = {"ToolParserManager": "tool", "ReasoningParserManager": "reasoning"}
LAZY_TABLES = {"_TOOL_PARSERS_TO_REGISTER": "tool", "_REASONING_PARSERS_TO_REGISTER": "reasoning"}
# the start-up checks: message template prefix in the error catalogue -> @release field
CHECKS = {"invalid tool call parser:": "tool_check", "invalid reasoning parser:": "reasoning_check"}
# the names in a check's condition that are the parser itself, not another option
SELF_NAMES = {
    "tool_call_parser",
    "reasoning_parser",
    "structured_outputs_config",
    "args",
    "valid_tool_parses",
    "valid_reasoning_parses",
    "valid_reasoning_parsers",
}
_CHOICES = re.compile(r"""\[\s*["']tool_call_parser["']\s*\]\s*\[\s*["']choices["']\s*\]\s*=""")
META = {
    "key": "tool:<name> or reasoning:<name> as --tool-call-parser / --reasoning-parser take it; "
    "'@release' holds how the release checks the names",
    "value": {
        "class": "the parser class registered under the name",
        "file": "the file registering it (relative to the vllm package)",
        "@release.tool_check": "where 'invalid tool call parser' is raised: file, function, "
        "condition, requires (other options the condition needs set)",
        "@release.reasoning_check": "likewise for 'invalid reasoning parser'",
        "@release.tool_choices": "file where argparse gets the registered tool parsers as choices",
    },
    "sources": [
        "entrypoints/openai/tool_parsers/",
        "tool_parsers/",
        "reasoning/",
        "entrypoints/openai/api_server.py",
        "entrypoints/openai/cli_args.py",
    ],
}


def _literal_names(node: ast.expr | None) -> list[str] | None:
    """A registered name or list of names written as literals (None: not literal)."""
    if node is None:
        return None
    try:
        value = ast.literal_eval(node)
    except ValueError:
        return None
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return list(value)
    return None


def _manager_call(node: ast.expr, method: str) -> str | None:
    """The parser kind when ``node`` is ``<Manager>.<method>(...)``."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == method
        and isinstance(node.func.value, ast.Name)
    ):
        return MANAGERS.get(node.func.value.id)
    return None


def _name_argument(call: ast.Call) -> ast.expr | None:
    if call.args:
        return call.args[0]
    return next((k.value for k in call.keywords if k.arg == "name"), None)


def registrations(rel: str, tree: ast.Module, release) -> list[tuple[str, str, str]]:
    """(kind, name, class) for every parser one file registers."""
    found: list[tuple[str, str, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for deco in node.decorator_list:
                kind = _manager_call(deco, "register_module")
                if kind is None:
                    continue
                arg = _name_argument(deco)
                names = [node.name] if arg is None else _literal_names(arg)
                if names is None:
                    release.problem(f"{rel}: {node.name} registered under a name not literal")
                    continue
                found += [(kind, n, node.name) for n in names]
        elif (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id in LAZY_TABLES
        ):
            kind = LAZY_TABLES[node.targets[0].id]
            try:
                table = ast.literal_eval(node.value)
            except ValueError:
                release.problem(f"{rel}: {node.targets[0].id} is not a literal")
                continue
            found += [
                (kind, name, value[1])
                for name, value in table.items()
                if isinstance(name, str) and isinstance(value, tuple) and len(value) == 2
            ]
        elif isinstance(node, ast.Call):
            kind = _manager_call(node, "register_lazy_module")
            names = _literal_names(_name_argument(node)) if kind else None
            if kind and names:
                cls = (
                    node.args[2]
                    if len(node.args) > 2
                    else next((k.value for k in node.keywords if k.arg == "class_name"), None)
                )
                cls_name = cls.value if isinstance(cls, ast.Constant) else "?"
                found += [(kind, n, cls_name) for n in names]
    return found


def _requires(test: ast.expr) -> list[str]:
    """The options (other than the parser itself) a check's condition reads: ``args.X``."""
    return sorted(n.replace("_", "-") for n in args_read(test) - SELF_NAMES)


def checks(release) -> dict[str, Any]:
    """How the release checks the parser names (see the module docstring)."""
    out: dict[str, Any] = {}
    for rel in release.names:
        # the start-up path of vllm serve (run_batch repeats the reasoning check for itself)
        if not rel.endswith(".py") or not rel.startswith("entrypoints/") or "run_batch" in rel:
            continue
        text = release.text(rel) or ""
        if _CHOICES.search(text):
            out["tool_choices"] = rel
        tree = release.tree(rel) if any(prefix in text for prefix in CHECKS) else None
        for func, test, raised in guarded_raises(tree) if tree is not None else ():
            for prefix, field in CHECKS.items():
                if raised.startswith(prefix) and field not in out:
                    out[field] = {
                        "file": rel,
                        "function": func,
                        "condition": ast.unparse(test),
                        "requires": _requires(test),
                    }
    return out


def extract(release) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for rel in release.names:
        if not rel.endswith(".py") or not re.search(
            r"(^|/)(tool_parsers|reasoning|reasoning_parsers)/", rel
        ):
            continue
        tree = release.tree(rel)
        if tree is None:
            release.problem(f"{rel} does not parse")
            continue
        for kind, name, cls in registrations(rel, tree, release):
            out.setdefault(f"{kind}:{name}", {"class": cls, "file": rel})
    info = checks(release)
    for field in CHECKS.values():
        if field not in info:
            release.problem(
                f"no '{field}' found: the release does not check those names "
                "at start-up (or the message moved)"
            )
    out[RELEASE_KEY] = info
    return out
