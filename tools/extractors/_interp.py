"""A tiny three-valued interpreter for the capability and head-size predicates of vLLM's
attention backends and for ``_get_backend_priorities`` (platforms/cuda.py).

It runs a function body with some parameters bound (the GPU's capability, a head size,
``use_mla``) on a CUDA platform and everything else unknown. A condition it cannot decide
sends it down both branches; the possible return values are collected, so a predicate comes
out True, False or unknown, and a priority list comes out as every backend any branch may
return (an over-approximation: the union is what vLLM could consider). Nothing is imported
or executed.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from _static import TORCH_DTYPES, body_without_docstring, three_valued


class _Unknown:
    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN = _Unknown()
_CUDA_TRUE = {"is_cuda", "is_cuda_alike"}
_CUDA_FALSE = {"is_cpu", "is_xpu", "is_tpu", "is_rocm", "is_hpu", "is_neuron", "is_out_of_tree"}


@dataclass(frozen=True, order=True)
class Cap:
    major: int
    minor: int

    def to_int(self) -> int:
        return self.major * 10 + self.minor


class _Return(Exception):
    pass


MethodLookup = Callable[[str, bool], "ast.FunctionDef | None"]  # (name, from_super) -> def


class Interp:
    def __init__(
        self,
        env: dict[str, Any],
        names: dict[str, Any],
        methods: MethodLookup | None = None,
        enum_names: tuple[str, ...] = ("AttentionBackendEnum", "_Backend"),
        cls_attrs: dict[str, Any] | None = None,
    ):
        self.env = dict(env)
        self.names = names
        self.methods = methods
        self.enum_names = enum_names
        self.cls_attrs = cls_attrs or {}  # ``cls.<attr>`` values read from the class
        self.depth = 0

    # -- statements ----------------------------------------------------------------------
    def run(self, fn: ast.FunctionDef) -> list[Any]:
        """Every value the function may return (UNKNOWN among them where undecidable)."""
        results: list[Any] = []
        self._block(body_without_docstring(fn), dict(self.env), results)
        return results

    def _block(self, stmts: list[ast.stmt], env: dict[str, Any], results: list[Any]) -> bool:
        """Runs statements; returns False when every path returned."""
        for stmt in stmts:
            if isinstance(stmt, ast.Return):
                results.append(self.eval(stmt.value, env) if stmt.value is not None else None)
                return False
            if isinstance(stmt, ast.If):
                test = self.truth(self.eval(stmt.test, env))
                if test is True:
                    if not self._block(stmt.body, env, results):
                        return False
                elif test is False:
                    if not self._block(stmt.orelse, env, results):
                        return False
                else:
                    left, right = dict(env), dict(env)
                    falls_l = self._block(stmt.body, left, results)
                    falls_r = self._block(stmt.orelse, right, results)
                    if not falls_l and not falls_r:
                        return False
                    # continue with whichever environment fell through (merged: unknown)
                    for key in set(left) | set(right):
                        a, b = left.get(key, UNKNOWN), right.get(key, UNKNOWN)
                        if falls_l and falls_r:
                            env[key] = a if _same(a, b) else _merge(a, b)
                        else:
                            env[key] = a if falls_l else b
                continue
            if (
                isinstance(stmt, ast.Assign)
                and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)
            ):
                env[stmt.targets[0].id] = self.eval(stmt.value, env)
                continue
            if (
                isinstance(stmt, ast.AnnAssign)
                and isinstance(stmt.target, ast.Name)
                and stmt.value is not None
            ):
                env[stmt.target.id] = self.eval(stmt.value, env)
                continue
            if (
                isinstance(stmt, ast.Expr)
                and isinstance(stmt.value, ast.Call)
                and isinstance(stmt.value.func, ast.Attribute)
                and isinstance(stmt.value.func.value, ast.Name)
                and stmt.value.func.attr in ("append", "insert", "extend")
                and isinstance(env.get(stmt.value.func.value.id), list)
            ):
                # a list grown in place: keep every item (order approximate)
                target = list(env[stmt.value.func.value.id])
                args = [self.eval(a, env) for a in stmt.value.args]
                if stmt.value.func.attr == "extend" and args and isinstance(args[-1], list):
                    target.extend(args[-1])
                elif args:
                    target.append(args[-1])
                env[stmt.value.func.value.id] = target
                continue
            if isinstance(stmt, (ast.Expr, ast.Pass, ast.ImportFrom, ast.Import, ast.Assert)):
                continue
            # loops, try blocks, raises, mutations: the rest of the body is unknown
            results.append(UNKNOWN)
            return False
        return True

    @staticmethod
    def truth(value: Any) -> bool | None:
        if value is UNKNOWN or isinstance(value, _Maybe):
            return None
        try:
            return bool(value)
        except Exception:
            return None

    # -- expressions ---------------------------------------------------------------------
    def eval(self, node: ast.AST, env: dict[str, Any]) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            if node.id in env:
                return env[node.id]
            if node.id in self.names:
                return self.names[node.id]
            return UNKNOWN
        if isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id in self.enum_names:
                return _Enum(node.attr)
            if (
                isinstance(node.value, ast.Name)
                and node.value.id == "torch"
                and node.attr in TORCH_DTYPES
            ):
                return TORCH_DTYPES[node.attr]
            if (
                isinstance(node.value, ast.Name)
                and node.value.id in ("cls", "self")
                and "cls" not in env
            ):
                return self.cls_attrs.get(node.attr, UNKNOWN)
            base = self.eval(node.value, env)
            if isinstance(base, Cap) and node.attr in ("major", "minor"):
                return getattr(base, node.attr)
            return UNKNOWN
        if isinstance(node, (ast.List, ast.Tuple)):
            out: list[Any] = []
            for elt in node.elts:
                if isinstance(elt, ast.Starred):
                    inner = self.eval(elt.value, env)
                    if isinstance(inner, _Maybe):
                        out.extend(inner.items)
                    elif isinstance(inner, (list, tuple)):
                        out.extend(inner)
                    else:
                        return UNKNOWN
                else:
                    out.append(self.eval(elt, env))
            return out if isinstance(node, ast.List) else tuple(out)
        if isinstance(node, ast.IfExp):
            test = self.truth(self.eval(node.test, env))
            if test is True:
                return self.eval(node.body, env)
            if test is False:
                return self.eval(node.orelse, env)
            a, b = self.eval(node.body, env), self.eval(node.orelse, env)
            return a if _same(a, b) else _merge(a, b)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            inner = self.truth(self.eval(node.operand, env))
            return UNKNOWN if inner is None else not inner
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            inner = self.eval(node.operand, env)
            return -inner if isinstance(inner, int) else UNKNOWN
        if isinstance(node, ast.BoolOp):
            value = three_valued(node.op, [self.truth(self.eval(v, env)) for v in node.values])
            return UNKNOWN if value is None else value
        if isinstance(node, ast.BinOp):
            a, b = self.eval(node.left, env), self.eval(node.right, env)
            if isinstance(a, int) and isinstance(b, int) and not isinstance(a, bool):
                ops = {
                    ast.Add: lambda: a + b,
                    ast.Sub: lambda: a - b,
                    ast.Mult: lambda: a * b,
                    ast.Mod: lambda: a % b if b else UNKNOWN,
                    ast.FloorDiv: lambda: a // b if b else UNKNOWN,
                }
                fn = ops.get(type(node.op))
                return fn() if fn else UNKNOWN
            if isinstance(a, list) and isinstance(b, list) and isinstance(node.op, ast.Add):
                return a + b
            return UNKNOWN
        if isinstance(node, ast.Compare):
            left = self.eval(node.left, env)
            for op, comp in zip(node.ops, node.comparators, strict=True):
                right = self.eval(comp, env)
                result = _compare(op, left, right)
                if result is not True:
                    return result
                left = right
            return True
        if isinstance(node, ast.Call):
            return self._call(node, env)
        return UNKNOWN

    def _call(self, node: ast.Call, env: dict[str, Any]) -> Any:
        func = node.func
        name = (
            func.attr
            if isinstance(func, ast.Attribute)
            else (func.id if isinstance(func, ast.Name) else None)
        )
        if name in _CUDA_TRUE and not node.args:
            return True
        if name in _CUDA_FALSE and not node.args:
            return False
        if name == "DeviceCapability":
            args = [self.eval(a, env) for a in node.args]
            kw = {k.arg: self.eval(k.value, env) for k in node.keywords}
            major = args[0] if args else kw.get("major")
            minor = args[1] if len(args) > 1 else kw.get("minor", 0)
            if isinstance(major, int) and isinstance(minor, int):
                return Cap(major, minor)
            return UNKNOWN
        if name in ("startswith", "endswith", "lower", "upper") and isinstance(func, ast.Attribute):
            base = self.eval(func.value, env)
            args = [self.eval(a, env) for a in node.args]
            if isinstance(base, str) and all(isinstance(a, (str, tuple)) for a in args):
                return getattr(base, name)(*args)
            return UNKNOWN
        if name == "to_int" and isinstance(func, ast.Attribute):
            base = self.eval(func.value, env)
            return base.to_int() if isinstance(base, Cap) else UNKNOWN
        if name == "is_quantized_kv_cache" and len(node.args) == 1:
            value = self.eval(node.args[0], env)
            return value.startswith("fp8") if isinstance(value, str) else UNKNOWN
        if name == "has_device_capability" and len(node.args) == 1:
            want = self.eval(node.args[0], env)
            cap = env.get("__capability__")
            if isinstance(cap, Cap):
                if isinstance(want, int):
                    return cap.to_int() >= want
                if isinstance(want, tuple) and len(want) == 2:
                    return (cap.major, cap.minor) >= want
            return UNKNOWN
        if name == "is_device_capability" and len(node.args) == 1:
            want = self.eval(node.args[0], env)
            cap = env.get("__capability__")
            if isinstance(cap, Cap) and isinstance(want, int):
                return cap.to_int() == want
            return UNKNOWN
        if self.methods is not None and isinstance(func, ast.Attribute) and self.depth < 4:
            from_super = (
                isinstance(func.value, ast.Call)
                and isinstance(func.value.func, ast.Name)
                and func.value.func.id == "super"
            )
            on_cls = isinstance(func.value, ast.Name) and func.value.id == "cls"
            if from_super or on_cls:
                target = self.methods(func.attr, from_super)
                if target is not None:
                    params = [a.arg for a in target.args.args if a.arg not in ("cls", "self")]
                    sub_env = dict(env)
                    for p, a in zip(params, node.args, strict=False):
                        sub_env[p] = self.eval(a, env)
                    self.depth += 1
                    try:
                        values = type(self)(
                            sub_env, self.names, self.methods, self.enum_names, self.cls_attrs
                        ).run(target)
                    finally:
                        self.depth -= 1
                    return _combine(values)
        return UNKNOWN


@dataclass(frozen=True)
class _Enum:
    name: str


@dataclass(frozen=True)
class _Maybe:
    """Either of two lists (an undecided conditional list): its items, as a union."""

    items: tuple[Any, ...]


def _same(a: Any, b: Any) -> bool:
    try:
        return a is not UNKNOWN and b is not UNKNOWN and type(a) is type(b) and a == b
    except Exception:
        return False


def _merge(a: Any, b: Any) -> Any:
    if isinstance(a, (list, tuple, _Maybe)) and isinstance(b, (list, tuple, _Maybe)):
        items = list(a.items if isinstance(a, _Maybe) else a)
        items += [x for x in (b.items if isinstance(b, _Maybe) else b) if x not in items]
        return _Maybe(tuple(items))
    return UNKNOWN


def _combine(values: list[Any]) -> Any:
    if not values:
        return UNKNOWN
    first = values[0]
    if all(_same(first, v) for v in values[1:]):
        return first
    return UNKNOWN


def _compare(op: ast.cmpop, a: Any, b: Any) -> Any:
    if a is UNKNOWN or b is UNKNOWN or isinstance(a, _Maybe) or isinstance(b, _Maybe):
        return UNKNOWN
    if isinstance(a, Cap) and isinstance(b, tuple):
        a = (a.major, a.minor)
    if isinstance(b, Cap) and isinstance(a, tuple):
        b = (b.major, b.minor)
    try:
        if isinstance(op, ast.Eq):
            return a == b
        if isinstance(op, ast.NotEq):
            return a != b
        if isinstance(op, ast.Lt):
            return a < b
        if isinstance(op, ast.LtE):
            return a <= b
        if isinstance(op, ast.Gt):
            return a > b
        if isinstance(op, ast.GtE):
            return a >= b
        if isinstance(op, ast.In):
            return a in b if not any(x is UNKNOWN for x in b) or a in b else UNKNOWN
        if isinstance(op, ast.NotIn):
            return a not in b if not any(x is UNKNOWN for x in b) else UNKNOWN
        if isinstance(op, ast.Is):
            return a is b
        if isinstance(op, ast.IsNot):
            return a is not b
    except TypeError:
        return UNKNOWN
    return UNKNOWN


def enum_items(value: Any) -> list[str] | None:
    """Backend names of a returned priority list (a union where branches differ)."""
    items = value.items if isinstance(value, _Maybe) else value
    if not isinstance(items, (list, tuple)):
        return None
    names = []
    for item in items:
        if not isinstance(item, _Enum):
            return None
        if item.name not in names:
            names.append(item.name)
    return names
