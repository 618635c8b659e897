"""Small static readers shared by the extractors (quantization, attention, parsers, checks).

Everything here reads ASTs of one release's files (``ReleaseSource.tree``); nothing is
imported or executed. A value that cannot be read as a constant comes back as ``Unresolved``
with the source text that decided it, so the tables record why instead of guessing.
"""

from __future__ import annotations

import ast
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

# torch dtype attribute -> the name vLLM users write (--dtype / config.json torch_dtype)
TORCH_DTYPES = {
    "half": "float16",
    "float16": "float16",
    "bfloat16": "bfloat16",
    "float": "float32",
    "float32": "float32",
    "float8_e4m3fn": "float8_e4m3fn",
    "float8_e5m2": "float8_e5m2",
    "uint8": "uint8",
    "int8": "int8",
}


@dataclass(frozen=True)
class Unresolved:
    """A value the source computes at run time: ``why`` quotes the deciding code."""

    why: str


def _short(node: ast.AST, limit: int = 160) -> str:
    text = " ".join(ast.unparse(node).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def module_constants(tree: ast.Module) -> dict[str, Any]:
    """Module-level ``NAME = <literal>`` assignments (ints, strings, lists of them)."""
    out: dict[str, Any] = {}
    for node in tree.body:
        target, value = None, None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        if isinstance(target, ast.Name) and value is not None:
            try:
                out[target.id] = ast.literal_eval(value)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                continue
    return out


def evaluate(node: ast.AST, names: dict[str, Any]) -> Any:
    """A constant expression: literals, + - * // on ints, names bound to constants,
    ``torch.<dtype>``. Raises ValueError otherwise."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name) and node.id in names:
        return names[node.id]
    if (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "torch"
        and node.attr in TORCH_DTYPES
    ):
        return TORCH_DTYPES[node.attr]
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "MultipleOf"
        and len(node.args) == 1
    ):
        value = evaluate(node.args[0], names)
        if isinstance(value, int):
            return f"multiple_of:{value}"  # any block size divisible by it
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return [evaluate(e, names) for e in node.elts]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = evaluate(node.operand, names)
        if isinstance(value, int):
            return -value
    if isinstance(node, ast.BinOp) and isinstance(
        node.op, (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv)
    ):
        left, right = evaluate(node.left, names), evaluate(node.right, names)
        if isinstance(left, int) and isinstance(right, int):
            return {
                ast.Add: left + right,
                ast.Sub: left - right,
                ast.Mult: left * right,
                ast.FloorDiv: left // right if right else 0,
            }[type(node.op)]
        if isinstance(left, list) and isinstance(right, list) and isinstance(node.op, ast.Add):
            return left + right
    raise ValueError(_short(node))


def body_without_docstring(fn: ast.FunctionDef) -> list[ast.stmt]:
    body = list(fn.body)
    if (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        body = body[1:]
    return body


def returned_constant(fn: ast.FunctionDef, names: dict[str, Any]) -> Any:
    """The value of a function whose body is one ``return <constant expression>``,
    else ``Unresolved`` quoting the body."""
    body = body_without_docstring(fn)
    if len(body) == 1 and isinstance(body[0], ast.Return) and body[0].value is not None:
        try:
            return evaluate(body[0].value, names)
        except ValueError as err:
            return Unresolved(f"returns {err}")
    if len(body) == 1 and isinstance(body[0], ast.Raise):
        return Unresolved("not implemented (raises)")
    return Unresolved("computed: " + _short(ast.Module(body=body, type_ignores=[]), 200))


def find_class(tree: ast.Module, name: str) -> ast.ClassDef | None:
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    return None


def find_function(node: ast.AST, name: str) -> ast.FunctionDef | None:
    for child in getattr(node, "body", []):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) and child.name == name:
            return child  # type: ignore[return-value]
    return None


def class_attribute(cls: ast.ClassDef, name: str) -> ast.expr | None:
    for node in cls.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            return node.value
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and node.target.id == name
            and node.value is not None
        ):
            return node.value
    return None


def imports_of(tree: ast.Module | ast.AST) -> dict[str, tuple[str, int, str]]:
    """``name -> (module, level, original name)`` for every ``from X import Y`` below node."""
    out: dict[str, tuple[str, int, str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                out[alias.asname or alias.name] = (node.module or "", node.level, alias.name)
    return out


def module_path(current: str, module: str, level: int) -> str | None:
    """The package-relative file of an import made in ``current`` (``a/b/c.py``)."""
    if level == 0:
        if not module.startswith("vllm."):
            return None
        parts = module.split(".")[1:]
    else:
        base = current.split("/")[:-1]
        if level > 1:
            base = base[: len(base) - (level - 1)]
        parts = base + (module.split(".") if module else [])
    return "/".join(parts)


def candidate_files(dotted: str) -> Iterator[str]:
    yield f"{dotted}.py"
    yield f"{dotted}/__init__.py"


def string_literals(node: ast.AST) -> set[str]:
    return {
        n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    }


def guarded_raises(tree: ast.Module) -> Iterator[tuple[str, ast.expr, str]]:
    """(function, if-test, raised text) for every ``if test: raise X("...")`` in a module's
    functions: the string literals of the raise (an f-string's literal parts included)."""
    for func in ast.walk(tree):
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(func):
            if isinstance(node, ast.If):
                for stmt in node.body:
                    if isinstance(stmt, ast.Raise):
                        text = "".join(
                            c.value
                            for c in ast.walk(stmt)
                            if isinstance(c, ast.Constant) and isinstance(c.value, str)
                        )
                        yield func.name, node.test, text


def args_read(test: ast.expr, base: str = "args") -> set[str]:
    """The attributes a condition reads off ``base`` (``args.enable_auto_tool_choice``)."""
    return {
        n.attr
        for n in ast.walk(test)
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == base
    }


# -- can a function return something other than None on a CUDA platform? ----------------------

_PLATFORM_TRUE_ON_CUDA = {"is_cuda", "is_cuda_alike"}
_PLATFORM_FALSE_ON_CUDA = {
    "is_cpu",
    "is_xpu",
    "is_tpu",
    "is_rocm",
    "is_hpu",
    "is_neuron",
    "is_out_of_tree",
}


def _tri(node: ast.AST) -> bool | None:
    """True/False where platform tests decide the expression on CUDA, None otherwise."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and not node.args:
        if node.func.attr in _PLATFORM_TRUE_ON_CUDA:
            return True
        if node.func.attr in _PLATFORM_FALSE_ON_CUDA:
            return False
        return None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        inner = _tri(node.operand)
        return None if inner is None else not inner
    if isinstance(node, ast.BoolOp):
        return three_valued(node.op, [_tri(v) for v in node.values])
    return None


def three_valued(op: ast.boolop, values: list[bool | None]) -> bool | None:
    """``and``/``or`` over True, False and None (unknown), as Kleene's logic has it."""
    if isinstance(op, ast.And):
        if False in values:
            return False
        return True if all(v is True for v in values) else None
    if True in values:
        return True
    return False if all(v is False for v in values) else None


def _walk_returns(stmts: list[ast.stmt], reachable: bool, out: list[tuple[bool, bool]]) -> bool:
    """Appends (returns None, reachable) per return; returns whether control falls through."""
    for stmt in stmts:
        if isinstance(stmt, ast.Return):
            none = stmt.value is None or (
                isinstance(stmt.value, ast.Constant) and stmt.value.value is None
            )
            out.append((none, reachable))
            return False
        if isinstance(stmt, ast.If):
            test = _tri(stmt.test)
            body_falls = _walk_returns(stmt.body, reachable and test is not False, out)
            else_falls = _walk_returns(stmt.orelse, reachable and test is not True, out)
            if (
                (test is True and not body_falls)
                or (test is False and not else_falls)
                or (not body_falls and not else_falls)
            ):
                reachable = False
        elif isinstance(stmt, (ast.For, ast.While, ast.With, ast.Try)):
            for block in ("body", "orelse", "finalbody"):
                _walk_returns(getattr(stmt, block, []) or [], reachable, out)
            for handler in getattr(stmt, "handlers", []):
                _walk_returns(handler.body, reachable, out)
    return True


def may_return_value_on_cuda(fn: ast.FunctionDef) -> bool:
    """False only when every non-None return sits behind a platform test false on CUDA."""
    returns: list[tuple[bool, bool]] = []
    _walk_returns(body_without_docstring(fn), True, returns)
    return any(not none and reachable for none, reachable in returns)


class ClassFinder:
    """Finds config classes across the release and walks their bases."""

    def __init__(self, release):
        self.release = release

    def locate(self, name: str, in_file: str, imports: dict | None = None):
        """``(file, ClassDef)`` of ``name`` as seen from ``in_file``."""
        tree = self.release.tree(in_file)
        if tree is None:
            return None
        cls = find_class(tree, name)
        if cls is not None:
            return in_file, cls
        imports = imports if imports is not None else imports_of(tree)
        if name not in imports:
            return None
        module, level, original = imports[name]
        dotted = module_path(in_file, module, level)
        if dotted is None:
            return None
        for path in candidate_files(dotted):
            target = self.release.tree(path)
            if target is None:
                continue
            cls = find_class(target, original)
            if cls is not None:
                return path, cls
            # re-exported from a package __init__
            found = self.locate(original, path)
            if found:
                return found
        return None

    def method(self, file: str, cls: ast.ClassDef, name: str, depth: int = 0):
        """``(file, class, FunctionDef)`` where ``name`` is defined, following the bases."""
        fn = find_function(cls, name)
        if fn is not None:
            return file, cls, fn
        if depth > 5:
            return None
        for base in cls.bases:
            base_name = (
                base.id
                if isinstance(base, ast.Name)
                else (base.attr if isinstance(base, ast.Attribute) else None)
            )
            if base_name is None:
                continue
            found = self.locate(base_name, file)
            if found is None:
                continue
            hit = self.method(found[0], found[1], name, depth + 1)
            if hit is not None:
                return hit
        return None

    def constants(self, file: str, cls: ast.ClassDef) -> dict[str, Any]:
        tree = self.release.tree(file)
        names = module_constants(tree) if tree is not None else {}
        for node in cls.body:  # class-level constants read as bare names by the method
            if (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
            ):
                with contextlib.suppress(ValueError, TypeError, SyntaxError):
                    names[node.targets[0].id] = ast.literal_eval(node.value)
        return names
