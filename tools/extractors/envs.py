"""vLLM's own environment variables per release (KIND "envs"), read from ``vllm/envs.py``.

Every release declares its variables in the ``environment_variables`` dict: a name and a
function that reads ``os.environ`` and turns the text into the value vLLM uses. The function
is turned into a small expression over the variable's text (``program``), which the doctor
evaluates for the value a user set, or for no value (the release's default), without running
vLLM's code (``vllm_doctor/knowledge/envs.py`` is the interpreter):

* ``["env", NAME, DEFAULT]``: the variable's text, DEFAULT (a string or null) when unset;
* ``["lower" | "upper" | "strip", X]``, ``["int" | "float" | "bool", X]`` (``int`` of a
  word that is no number raises, as ``bool(int(os.getenv(...)))`` does on ``true``),
  ``["in", X, [..]]``, ``["eq" | "ne", X, V]``, ``["or", X, Y]``, ``["map", X, {..}]``;
* ``["ifset", NAME, X, Y]``: X when the variable is set, else Y;
* ``["maybe_int" | "maybe_bool", X]`` (null stays null), ``["choices", NAME, DEFAULT,
  [..], CASE_SENSITIVE]`` and ``["list_choices", ...]`` (vLLM's ``env_with_choices`` /
  ``env_list_with_choices``: a value outside the list raises ValueError);
* ``["opaque", "source text"]``: computed by code the interpreter does not follow (a path
  under the cache root, a port): its value is not known.

Key: the variable's name. Value: ``{"program": [...], "type": "the annotation in the
TYPE_CHECKING block"}``, and for a variable whose default is None (unset) ``"none_reads"``:
how the release's code reads that None, from every ``envs.NAME`` in its package (``_none_reads``):

* ``"off"``: every read is a truth test (``if envs.X:``, ``not envs.X``, ``envs.X and ...``,
  ``bool(envs.X)``): None behaves as false, i.e. the switch is off;
* ``"own"``: some read tells None apart (``envs.X is None``, ``is not None``) or hands the value
  on (an argument, an assignment, a comparison): None has a meaning of its own there;
* ``"unread"``: nothing in the package reads it through ``envs``. A release without the key does not read the variable through
``vllm.envs`` (vLLM >= 0.11 warns on an unknown ``VLLM_*`` name in some releases; it is
ignored in every one).
"""

from __future__ import annotations

import ast
import re
from typing import Any

KIND = "envs"
META = {
    "key": "environment variable name (vllm/envs.py environment_variables)",
    "value": {
        "program": "how the release turns the variable's text into its value (see the "
        "extractor's docstring; evaluated by vllm_doctor/knowledge/envs.py)",
        "type": "the annotation vllm/envs.py gives the variable",
    },
    "sources": ["vllm/envs.py"],
}

_STRING_METHODS = {"lower", "upper", "strip"}
_CONVERSIONS = {"int", "float", "bool"}
_MAYBE = {"maybe_convert_int": "maybe_int", "maybe_convert_bool": "maybe_bool"}


class _Opaque(Exception):
    """Code the interpreter does not follow."""


def _literal(node: ast.AST) -> Any:
    try:
        value = ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        raise _Opaque from None
    if isinstance(value, (tuple, set, frozenset)):
        value = sorted(value, key=str) if not isinstance(value, tuple) else list(value)
    return value


def _getenv(call: ast.Call) -> list[Any] | None:
    """``os.getenv(NAME, D)`` / ``os.environ.get(NAME, D)`` as ["env", NAME, D]."""
    func = ast.unparse(call.func)
    if func not in ("os.getenv", "os.environ.get", "getenv"):
        return None
    if not call.args or not isinstance(call.args[0], ast.Constant):
        raise _Opaque
    default = _literal(call.args[1]) if len(call.args) > 1 else None
    if default is not None and not isinstance(default, str):
        default = str(default)
    return ["env", call.args[0].value, default]


def _environ_item(node: ast.AST) -> str | None:
    """``os.environ["NAME"]`` → NAME."""
    if (
        isinstance(node, ast.Subscript)
        and ast.unparse(node.value) == "os.environ"
        and isinstance(node.slice, ast.Constant)
        and isinstance(node.slice.value, str)
    ):
        return node.slice.value
    return None


def _is_set_test(node: ast.AST) -> str | None:
    """``"NAME" in os.environ`` → NAME."""
    if (
        isinstance(node, ast.Compare)
        and len(node.ops) == 1
        and isinstance(node.ops[0], ast.In)
        and isinstance(node.left, ast.Constant)
        and isinstance(node.left.value, str)
        and ast.unparse(node.comparators[0]) == "os.environ"
    ):
        return node.left.value
    return None


def program(node: ast.AST) -> list[Any]:
    """The expression a variable's function computes, as a program (``_Opaque`` else)."""
    if isinstance(node, ast.Constant):
        return ["const", node.value]
    name = _environ_item(node)
    if name is not None:
        return ["env", name, None]
    if isinstance(node, ast.IfExp):
        name = _is_set_test(node.test)
        if name is None:
            raise _Opaque
        return ["ifset", name, program(node.body), program(node.orelse)]
    if isinstance(node, ast.Call):
        found = _getenv(node)
        if found is not None:
            return found
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in _STRING_METHODS and not node.args:
            return [func.attr, program(func.value)]
        if isinstance(func, ast.Attribute) and func.attr == "get" and len(node.args) == 1:
            mapping = _literal(func.value)  # {"1": True, "0": False}.get(...)
            if not isinstance(mapping, dict):
                raise _Opaque
            return ["map", program(node.args[0]), {str(k): v for k, v in mapping.items()}]
        if isinstance(func, ast.Name) and func.id in _CONVERSIONS and len(node.args) == 1:
            return [func.id, program(node.args[0])]
        if isinstance(func, ast.Name) and func.id in _MAYBE and len(node.args) == 1:
            return [_MAYBE[func.id], program(node.args[0])]
        raise _Opaque
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        left, op, right = node.left, node.ops[0], node.comparators[0]
        if isinstance(op, ast.In):
            values = _literal(right)
            if not isinstance(values, list):
                raise _Opaque
            return ["in", program(left), values]
        if isinstance(op, (ast.Eq, ast.NotEq)):
            return ["eq" if isinstance(op, ast.Eq) else "ne", program(left), _literal(right)]
        raise _Opaque
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or) and len(node.values) == 2:
        return ["or", program(node.values[0]), program(node.values[1])]
    raise _Opaque


def _choices(call: ast.Call) -> list[Any] | None:
    """``env_with_choices(NAME, DEFAULT, [..], case_sensitive=...)`` and the list form."""
    name = ast.unparse(call.func)
    kinds = {
        "env_with_choices": "choices",
        "env_list_with_choices": "list_choices",
        "env_set_with_choices": "list_choices",
    }
    if name not in kinds:
        return None
    args = list(call.args)
    keywords = {k.arg: k.value for k in call.keywords if k.arg}
    for index, key in enumerate(("env_name", "default", "choices", "case_sensitive")):
        if key in keywords and len(args) <= index:
            args.append(keywords[key])
    if len(args) < 3 or not isinstance(args[0], ast.Constant):
        raise _Opaque
    default = _literal(args[1])
    try:
        choices = _literal(args[2])
    except _Opaque:
        choices = None  # a callable: the list is made at run time
    case_sensitive = _literal(args[3]) if len(args) > 3 else True
    return [kinds[name], args[0].value, default, choices, bool(case_sensitive)]


def declared(node: ast.AST) -> list[Any]:
    """A value of the ``environment_variables`` dict as a program."""
    try:
        if isinstance(node, ast.Lambda):
            return program(node.body)
        if isinstance(node, ast.Call):
            found = _choices(node)
            if found is not None:
                return found
        raise _Opaque
    except _Opaque:
        return ["opaque", ast.unparse(node)[:300]]


def _annotations(tree: ast.Module) -> dict[str, str]:
    """The ``if TYPE_CHECKING:`` block's ``NAME: type = ...`` lines."""
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for stmt in node.body:
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                    found[stmt.target.id] = ast.unparse(stmt.annotation)
    return found


def _environment_variables(tree: ast.Module) -> ast.Dict | None:
    for node in tree.body:
        target = value = None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign):
            target, value = node.target, node.value
        if (
            isinstance(target, ast.Name)
            and target.id == "environment_variables"
            and isinstance(value, ast.Dict)
        ):
            return value
    return None


def extract(release) -> dict[str, Any]:
    tree = release.tree("envs.py")
    if tree is None:
        release.problem("vllm/envs.py not found or not parsable")
        return {}
    table = _environment_variables(tree)
    if table is None:
        release.problem("vllm/envs.py has no environment_variables dict")
        return {}
    types = _annotations(tree)
    out: dict[str, Any] = {}
    for key, value in zip(table.keys, table.values, strict=True):
        if not isinstance(key, ast.Constant) or not isinstance(key.value, str):
            continue
        out[key.value] = {"program": declared(value), "type": types.get(key.value)}
    unset_none = sorted(name for name, v in out.items() if _default_is_none(v["program"]))
    for name, reads in _none_reads(release, unset_none).items():
        out[name]["none_reads"] = reads
    opaque = sorted(k for k, v in out.items() if v["program"][0] == "opaque")
    if opaque:
        release.problem(
            f"{len(opaque)} variables computed by code not followed: {', '.join(opaque)}"
        )
    return out


def _default_is_none(program: list[Any]) -> bool:
    """The variable's value with nothing set is None (the interpreter the doctor runs)."""
    from vllm_doctor.knowledge.envs import Opaque, Refused, evaluate

    try:
        return evaluate(program, {}) is None
    except (Opaque, Refused):
        return False


_ENVS_READ = re.compile(r"\benvs\.(VLLM_\w+)")


def _none_reads(release, names: list[str]) -> dict[str, str]:
    """off | own | unread for each of ``names`` (see the module docstring), from every
    ``envs.NAME`` attribute in the release's package (vllm/envs.py itself excepted)."""
    wanted = set(names)
    reads: dict[str, set[str]] = {n: set() for n in names}
    for rel in release.names:
        if not rel.endswith(".py") or rel == "envs.py":
            continue
        text = release.text(rel) or ""
        if not wanted.intersection(_ENVS_READ.findall(text)):
            continue
        tree = release.tree(rel)
        if tree is None:
            continue
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and node.attr in wanted
                and _is_envs(node.value)
                and isinstance(node.ctx, ast.Load)
            ):
                reads[node.attr].add(_read_kind(node, parents))
    return {
        name: "unread" if not kinds else "off" if kinds == {"truth"} else "own"
        for name, kinds in reads.items()
    }


def _is_envs(node: ast.AST) -> bool:
    """``envs`` or ``vllm.envs`` (``import vllm.envs as envs`` is how vLLM reads them)."""
    return (isinstance(node, ast.Name) and node.id == "envs") or (
        isinstance(node, ast.Attribute) and node.attr == "envs"
    )


def _read_kind(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> str:
    """truth (a truth test: None is false) | own (None told apart or handed on)."""
    parent = parents.get(node)
    # an operand of and/or is a truth test only where the whole is one (``x = envs.X or 4``
    # hands the value on)
    while isinstance(parent, ast.BoolOp):
        node, parent = parent, parents.get(parent)
    if isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.Not):
        return "truth"
    if isinstance(parent, (ast.If, ast.While, ast.IfExp, ast.Assert)) and parent.test is node:
        return "truth"
    if isinstance(parent, ast.comprehension) and node in parent.ifs:
        return "truth"
    if (
        isinstance(parent, ast.Call)
        and isinstance(parent.func, ast.Name)
        and parent.func.id == "bool"
        and node in parent.args
    ):
        return "truth"
    return "own"
