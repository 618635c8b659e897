"""The steps by which one release turns ``--quantization`` and the checkpoint's
``quantization_config`` into the method it loads (``ModelConfig._verify_quantization``), read
statically for the quantization extractor:

1. the names: ``--quantization`` lower-cased (``validate_quantization_before``, or
   ``self.quantization.lower()`` in older releases); the checkpoint's ``quant_method``
   lower-cased and its library spellings replaced (``compressed_tensors`` →
   ``compressed-tensors``: the alias step, read from the ``.replace`` calls next to it);
2. the override step: every method whose config class overrides
   ``override_quantization_method`` is asked in vLLM's order (the methods outside the
   ``overrides`` list first, then that list; a method the user names first where the release
   says so) with (checkpoint config, ``--quantization``); the first non-None answer replaces
   both names (``auto-round`` → ``inc``, ``gptq`` → ``gptq_marlin`` or ``auto_gptq``);
3. a ``--quantization`` that still differs from the checkpoint's method is refused
   ("does not match"), and a name outside ``QUANTIZATION_METHODS`` is "Unknown".

Each override function is run by the three-valued interpreter (``_interp.Interp``) on every
checkpoint method and user value its own string literals name, plus "any other" (``*``) and,
for the user value, "not given" (``None``). A result decided by something else in the
checkpoint (its bits, the model type) is ``?``: the doctor then cannot decide from the names
alone. Nothing is imported or executed.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from _interp import UNKNOWN, Interp
from _static import body_without_docstring, string_literals

OTHER = "*"  # any name the function's literals do not spell
_OTHER_VALUE = "\x00other"  # stands for OTHER while interpreting: equal to no literal
UNDECIDED = "?"
_VERIFY = "_verify_quantization"


class _QuantConfig:
    """The checkpoint's quantization_config as the interpreter sees it: its ``quant_method``
    is known, every other key is not."""

    def __init__(self, method: str):
        self.method = method

    def get(self, key: Any, default: Any = None) -> Any:
        if key == "quant_method":
            return self.method
        return UNKNOWN


class _ConfigInterp(Interp):
    """The interpreter with a checkpoint config: ``cfg.get(k)``, ``cfg[k]``,
    ``isinstance(cfg, dict)``."""

    def eval(self, node: ast.AST, env: dict[str, Any]) -> Any:
        if isinstance(node, ast.Subscript):
            base = self.eval(node.value, env)
            key = self.eval(node.slice, env)
            return base.get(key) if isinstance(base, _QuantConfig) else UNKNOWN
        return super().eval(node, env)

    def _call(self, node: ast.Call, env: dict[str, Any]) -> Any:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "get":
            base = self.eval(func.value, env)
            if isinstance(base, _QuantConfig):
                args = [self.eval(a, env) for a in node.args]
                if not args or not isinstance(args[0], str):
                    return UNKNOWN
                return base.get(args[0], args[1] if len(args) > 1 else None)
        if isinstance(func, ast.Name) and func.id == "isinstance" and len(node.args) == 2:
            base = self.eval(node.args[0], env)
            if isinstance(base, _QuantConfig):
                return ast.unparse(node.args[1]) in ("dict", "Mapping", "(dict, Mapping)")
            return UNKNOWN
        return super()._call(node, env)


def _method_lookup(classes, file: str, cls: ast.ClassDef):
    def lookup(name: str, from_super: bool) -> ast.FunctionDef | None:
        if from_super:
            return None  # a base class's version: not followed
        hit = classes.method(file, cls, name)
        return hit[2] if hit is not None else None

    return lookup


def _called_methods(fn: ast.FunctionDef, lookup) -> list[ast.FunctionDef]:
    """The ``cls.<name>(...)`` methods the function calls (one level), for their literals."""
    out = []
    for node in ast.walk(fn):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "cls"
        ):
            target = lookup(node.func.attr, False)
            if target is not None and target is not fn:
                out.append(target)
    return out


def _key_literals(fn: ast.FunctionDef) -> set[str]:
    """Strings used as keys (``cfg.get("bits")``, ``cfg["quant_method"]``, ``getattr(x,
    "model_type")``): never a method name."""
    keys = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else None
            if name in ("get", "pop", "setdefault"):
                keys.add(node.args[0].value)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "hasattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
        ):
            keys.add(node.args[1].value)
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            keys.add(node.slice.value)
    return {k for k in keys if isinstance(k, str)}


def override_table(classes, file: str, cls: ast.ClassDef, fn: ast.FunctionDef) -> dict[str, Any]:
    """``{"literals": [...], "returns": [[checkpoint, user, result], ...]}`` for one
    ``override_quantization_method``: every (checkpoint method, --quantization) pair over the
    function's literals (``*``: any other name; user ``None``: not given) whose answer is not
    None — a method name, or ``?`` where the names alone do not decide it."""
    lookup = _method_lookup(classes, file, cls)
    literals = set(string_literals(fn))
    for called in _called_methods(fn, lookup):
        literals |= string_literals(called)
    # keep what can be a method name: not messages, and not the config's keys
    keys = set()
    for node in [fn, *_called_methods(fn, lookup)]:
        keys |= _key_literals(node)
    domain = sorted(x for x in literals - keys if re.fullmatch(r"[a-z0-9_.:/-]{1,40}", x))
    params = [a.arg for a in fn.args.args if a.arg not in ("cls", "self")]
    if len(params) < 2:
        return {"literals": domain, "returns": [], "unread": "fewer than two parameters"}
    returns: list[list[Any]] = []
    for ckpt in [*domain, OTHER]:
        for user in [*domain, OTHER, None]:
            env = dict.fromkeys(params, UNKNOWN)
            env[params[0]] = _QuantConfig(_OTHER_VALUE if ckpt == OTHER else ckpt)
            env[params[1]] = _OTHER_VALUE if user == OTHER else user
            results = _ConfigInterp(env, {}, lookup).run(fn)
            result = _combine(results)
            if result is not None:
                returns.append([ckpt, user, result])
    return {"literals": domain, "returns": returns}


def _combine(results: list[Any]) -> str | None:
    if not results:
        return UNDECIDED
    values = set()
    for value in results:
        if value is None:
            values.add(None)
        elif isinstance(value, str) and value != _OTHER_VALUE:
            values.add(value)
        else:
            return UNDECIDED
    return values.pop() if len(values) == 1 else UNDECIDED


def _verify_function(release) -> tuple[str, ast.FunctionDef] | None:
    for path in release.glob("config/*.py") + release.glob("config*.py"):
        tree = release.tree(path)
        if tree is None:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name == _VERIFY:
                return path, node
    return None


def _list_literal(node: ast.AST) -> list[str] | None:
    if isinstance(node, (ast.List, ast.Tuple)) and all(
        isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts
    ):
        return [e.value for e in node.elts]
    return None


def verify_step(release) -> dict[str, Any] | None:
    """How the release's ``_verify_quantization`` orders and checks the names (see the module
    docstring); None where the function is not found."""
    found = _verify_function(release)
    if found is None:
        return None
    path, fn = found
    text = release.text(path) or ""
    overrides: list[str] | None = None
    user_first: list[str] = []
    for node in ast.walk(fn):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id == "overrides"
        ):
            listed = _list_literal(node.value)
            if listed is not None and overrides is None:
                overrides = listed
            # `overrides = ["humming"] + overrides`: asked first when the user names it
            if (
                isinstance(node.value, ast.BinOp)
                and isinstance(node.value.op, ast.Add)
                and _list_literal(node.value.left) is not None
            ):
                user_first += _list_literal(node.value.left) or []
    source = ast.unparse(fn)
    lower_user = "self.quantization.lower()" in source or bool(
        re.search(
            r"field_validator\(\s*[\"']quantization[\"'][^)]*\)\s*@classmethod\s*def \w+\([^)]*\)"
            r"[^:]*:\s*if isinstance\(value, str\):\s*return value\.lower\(\)",
            text,
        )
    )
    # the alias step: library spellings replaced in the checkpoint's quant_method
    aliases: list[list[str]] = []
    for rel in [path, *release.glob("transformers_utils/model_arch_config_convertor.py")]:
        for a, b in re.findall(
            r"quant_method\s*=\s*quant_method\.replace\(\s*[\"']([^\"']+)[\"']\s*,\s*"
            r"[\"']([^\"']+)[\"']\s*\)",
            release.text(rel) or "",
        ):
            if [a, b] not in aliases:
                aliases.append([a, b])
    return {
        "file": path,
        "overrides": overrides,
        "user_first": user_first,
        "lower_user": lower_user,
        "checkpoint_lower": ".lower()" in source or 'quant_method", "").lower()' in text,
        "aliases": aliases,
        "mismatch_refused": "does not match the quantization" in source,
    }


def chain(verify: dict[str, Any] | None, with_override: list[str], methods: list[str]) -> list[str]:
    """The methods whose override vLLM asks, in its order (the user-first ones left to the
    caller): those outside the ``overrides`` list (in QUANTIZATION_METHODS order), then that
    list."""
    overrides = (verify or {}).get("overrides") or []
    outside = [m for m in methods if m not in overrides and m in with_override]
    return outside + [m for m in overrides if m in with_override]


__all__ = ["OTHER", "UNDECIDED", "body_without_docstring", "chain", "override_table", "verify_step"]
