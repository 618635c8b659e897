"""The ROCm AITER switches of each release and the gfx architectures each is gated on (KIND
"aiter_gates"), read from ``vllm/_aiter_ops.py`` and ``vllm/platforms/rocm.py``.

vLLM uses an AITER kernel where a check of ``rocm_aiter_ops`` says so: ``is_enabled()``,
``is_fused_moe_enabled()``, ``is_fp4bmm_enabled()``, ... Each is wrapped in
``@if_aiter_supported`` (AITER only on the architectures ``is_aiter_found_and_supported``
names: gfx9 up to 0.19, the MI300 series from 0.20, CDNA 3+ from 0.32) and reads class
attributes set from ``vllm.envs`` (``_FP4BMM_ENABLED = envs.VLLM_ROCM_USE_AITER_FP4BMM``)
and architecture predicates of ``platforms/rocm.py`` (``on_gfx950()``,
``get_cdna_version() == 4``). Each check becomes a small boolean program the doctor evaluates
with the judged release's values of the variables (``release.env.*``) and the GPU's gfx
target:

* ``["env", NAME]``: the value vLLM takes for NAME (truthy);
* ``["arch", [gfx, ...]]``: the GPU's gfx target is one of these (each predicate is
  evaluated here for every gfx target the doctor's GPU table knows);
* ``["and" | "or", X, Y, ...]``, ``["not", X]``, ``["const", bool]``;
* ``["unknown", "source"]``: a test the extractor does not follow.

Key: ``feature`` (``fp4bmm`` for ``is_fp4bmm_enabled``, ``aiter`` for ``is_enabled``); value:
``{"method": ..., "gate": program}``. The key ``@supported`` holds the architectures AITER's
umbrella check admits. A release before ``_aiter_ops.py`` (0.8.2-0.11.0) has the module-level
checks each AITER path made then (``is_rocm_aiter_fp8bmm_enabled``: key ``fp8bmm``; method
``file:function``) and no ``@supported`` key: those releases test no architecture there.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

KIND = "aiter_gates"
META = {
    "key": "AITER feature (rocm_aiter_ops.is_<feature>_enabled; 'aiter' for is_enabled), "
    "'@supported' for the architectures AITER runs on at all",
    "value": {
        "method": "the check in vllm/_aiter_ops.py",
        "gate": "the check as a boolean program over env (the release's value of a "
        "variable) and arch (the GPU's gfx target is one of a list): see the extractor",
    },
    "sources": ["vllm/_aiter_ops.py", "vllm/platforms/rocm.py"],
}

_GPUS = Path(__file__).resolve().parents[2] / "vllm_doctor" / "knowledge" / "data" / "gpus.json"


def targets() -> list[str]:
    """The gfx targets the doctor's GPU table knows (each predicate is evaluated on each)."""
    return list(json.loads(_GPUS.read_text(encoding="utf-8"))["amd_targets"])


class _Unknown(Exception):
    pass


class _Predicates:
    """The architecture predicates of platforms/rocm.py, evaluated for one gfx target."""

    def __init__(self, tree: ast.Module):
        self.functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
        self.constants = {
            t.id: n.value
            for n in tree.body
            if isinstance(n, ast.Assign)
            for t in n.targets
            if isinstance(t, ast.Name)
        }

    def call(self, name: str, arch: str, depth: int = 0) -> Any:
        fn = self.functions.get(name)
        if fn is None or depth > 12:
            raise _Unknown(name)
        local: dict[str, Any] = {}
        return self._run(fn.body, arch, local, depth)

    def _run(self, body: list[ast.stmt], arch: str, local: dict[str, Any], depth: int) -> Any:
        for stmt in body:
            if isinstance(stmt, ast.Expr):  # a docstring
                continue
            if isinstance(stmt, ast.Assign) and all(isinstance(t, ast.Name) for t in stmt.targets):
                value = self.value(stmt.value, arch, local, depth)
                for target in stmt.targets:
                    local[target.id] = value  # type: ignore[attr-defined]
                continue
            if isinstance(stmt, ast.Return):
                return self.value(stmt.value, arch, local, depth) if stmt.value else None
            if isinstance(stmt, ast.If):
                branch = stmt.body if self.value(stmt.test, arch, local, depth) else stmt.orelse
                done = self._run(branch, arch, local, depth)
                if done is not None or any(isinstance(s, ast.Return) for s in branch):
                    return done
                continue
            raise _Unknown(ast.unparse(stmt)[:80])
        return None

    def value(self, node: ast.AST | None, arch: str, local: dict[str, Any], depth: int) -> Any:
        if node is None:
            raise _Unknown("nothing")
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, (ast.List, ast.Tuple)):
            return [self.value(e, arch, local, depth) for e in node.elts]
        if isinstance(node, ast.Name):
            if node.id == "IS_AITER_FOUND":  # the table says where AITER runs when installed
                return True
            if node.id in local:
                return local[node.id]
            if "GCN_ARCH" in node.id or node.id == "GPU_ARCH":
                return arch
            if node.id in self.constants:
                return self.value(self.constants[node.id], arch, {}, depth + 1)
            raise _Unknown(node.id)
        if isinstance(node, ast.Attribute) and node.attr == "gcnArchName":
            return arch  # torch.cuda.get_device_properties("cuda").gcnArchName
        if isinstance(node, ast.Call):
            name = ast.unparse(node.func)
            if "gcn_arch" in name.lower():
                return arch
            if name == "current_platform.is_rocm":
                return True
            if isinstance(node.func, ast.Name) and node.func.id == "any" and node.args:
                gen = node.args[0]
                if isinstance(gen, ast.GeneratorExp) and len(gen.generators) == 1:
                    comp = gen.generators[0]
                    items = self.value(comp.iter, arch, local, depth)
                    var = comp.target.id  # type: ignore[attr-defined]
                    return any(
                        self.value(gen.elt, arch, {**local, var: item}, depth) for item in items
                    )
                raise _Unknown(name)
            if isinstance(node.func, ast.Name) and not node.args:
                return self.call(node.func.id, arch, depth + 1)
            raise _Unknown(name)
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            left = self.value(node.left, arch, local, depth)
            right = self.value(node.comparators[0], arch, local, depth)
            ops = {
                ast.In: lambda a, b: a in b,
                ast.NotIn: lambda a, b: a not in b,
                ast.Eq: lambda a, b: a == b,
                ast.NotEq: lambda a, b: a != b,
                ast.Gt: lambda a, b: a > b,
                ast.GtE: lambda a, b: a >= b,
                ast.Lt: lambda a, b: a < b,
                ast.LtE: lambda a, b: a <= b,
            }
            op = ops.get(type(node.ops[0]))
            if op is None:
                raise _Unknown(ast.unparse(node))
            return op(left, right)
        if isinstance(node, ast.BoolOp):
            values = [self.value(v, arch, local, depth) for v in node.values]
            return all(values) if isinstance(node.op, ast.And) else any(values)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return not self.value(node.operand, arch, local, depth)
        raise _Unknown(ast.unparse(node)[:80])

    def where(self, node: ast.AST, known: list[str]) -> list[str] | None:
        """The gfx targets where an architecture test holds (None: not followed)."""
        try:
            return [a for a in known if self.value(node, a, {}, 0)]
        except (_Unknown, TypeError, RecursionError):
            return None


def _class(tree: ast.Module, name: str) -> ast.ClassDef | None:
    return next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name), None)


def _env_attributes(cls: ast.ClassDef) -> dict[str, str]:
    """``_X = envs.VLLM_Y`` class attributes (the class body and refresh_env_variables)."""
    found: dict[str, str] = {}
    for node in ast.walk(cls):
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        target, value = node.targets[0], node.value
        name = target.id if isinstance(target, ast.Name) else None
        if isinstance(target, ast.Attribute) and ast.unparse(target.value) == "cls":
            name = target.attr
        text = ast.unparse(value)
        if name and re.fullmatch(r"envs\.VLLM_\w+", text):
            found[name] = text.split(".", 1)[1]
    return found


class _Gates:
    """The checks of ``rocm_aiter_ops`` as programs."""

    def __init__(
        self,
        cls: ast.ClassDef,
        predicates: _Predicates,
        known: list[str],
        functions: dict[str, ast.FunctionDef],
    ):
        self.methods = {n.name: n for n in cls.body if isinstance(n, ast.FunctionDef)}
        self.env = _env_attributes(cls)
        self.predicates = predicates
        self.known = known
        self.functions = functions  # the module-level functions of _aiter_ops.py

    def method(self, name: str, depth: int = 0) -> list[Any]:
        fn = self.methods.get(name)
        if fn is None or depth > 6:
            return ["unknown", name]
        body = [s for s in fn.body if not isinstance(s, (ast.Expr, ast.ImportFrom, ast.Import))]
        # leading guards `if TEST: return False` (0.31.0's is_rdna_aiter_enabled), then a return
        guards = []
        while (
            body
            and isinstance(body[0], ast.If)
            and not body[0].orelse
            and len(body[0].body) == 1
            and isinstance(body[0].body[0], ast.Return)
            and ast.unparse(body[0].body[0].value or ast.Constant(None)) == "False"
        ):
            guards.append(["not", self.program(body[0].test, depth)])
            body = body[1:]
        if len(body) != 1 or not isinstance(body[0], ast.Return) or body[0].value is None:
            gate = ["unknown", ast.unparse(fn)[:200]]
        else:
            gate = self.program(body[0].value, depth)
            if guards:
                gate = ["and", *guards, gate]
        if any(ast.unparse(d).endswith("if_aiter_supported") for d in fn.decorator_list):
            gate = ["and", self.supported(), gate]
        return gate

    def supported(self) -> list[Any]:
        check = _supported_program(self.predicates, self.known, self.functions)
        return check if check is not None else ["unknown", "if_aiter_supported"]

    def program(self, node: ast.AST, depth: int) -> list[Any]:
        if isinstance(node, ast.BoolOp):
            op = "and" if isinstance(node.op, ast.And) else "or"
            return [op, *(self.program(v, depth) for v in node.values)]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return ["not", self.program(node.operand, depth)]
        if isinstance(node, ast.Constant) and isinstance(node.value, bool):
            return ["const", node.value]
        if isinstance(node, ast.Attribute) and ast.unparse(node.value) == "cls":
            env = self.env.get(node.attr)
            return ["env", env] if env else ["unknown", ast.unparse(node)]
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and ast.unparse(node.func.value) == "cls"
            and not node.args
        ):
            return self.method(node.func.attr, depth + 1)
        where = self.predicates.where(node, self.known)
        if where is not None:
            return ["arch", where]
        return ["unknown", ast.unparse(node)[:120]]


def _supported_program(
    predicates: _Predicates, known: list[str], functions: dict[str, ast.FunctionDef]
) -> list[Any] | None:
    """Where AITER runs at all: ``is_aiter_found_and_supported``'s architecture test, or in
    releases without it the tests ``if_aiter_supported`` makes before it calls the check
    (ROCm and the aiter package taken as given)."""
    fn = functions.get("is_aiter_found_and_supported")
    if fn is not None:
        for node in ast.walk(fn):
            if isinstance(node, ast.Return) and node.value is not None:
                if ast.unparse(node.value) == "False":
                    continue
                where = predicates.where(node.value, known)
                if where is not None:
                    return ["arch", where]
        return None
    fn = functions.get("if_aiter_supported")
    if fn is None:
        return None
    tests = [n.test for n in ast.walk(fn) if isinstance(n, ast.If)]
    if not tests:
        return None
    wheres = [predicates.where(test, known) for test in tests]
    if any(w is None for w in wheres):
        return None
    return ["arch", [a for a in known if all(a in w for w in wheres if w is not None)]]


# before _aiter_ops.py each AITER path had its own module-level check
_LEGACY_CHECK = re.compile(r"is_(?:rocm_)?aiter_(\w+?)_enabled")


def _legacy_program(node: ast.AST, functions: dict[str, ast.FunctionDef], depth: int = 0) -> list:
    """A pre-0.11.1 check (``current_platform.is_rocm() and envs.X and envs.Y``) as a program;
    the GPU is an AMD one wherever the doctor evaluates it, so ``is_rocm()`` holds."""
    if isinstance(node, ast.BoolOp):
        op = "and" if isinstance(node.op, ast.And) else "or"
        return [op, *(_legacy_program(v, functions, depth) for v in node.values)]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return ["not", _legacy_program(node.operand, functions, depth)]
    text = ast.unparse(node)
    if text == "current_platform.is_rocm()":
        return ["const", True]
    if re.fullmatch(r"envs\.VLLM_\w+", text):
        return ["env", text.split(".", 1)[1]]
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and not node.args
        and node.func.id in functions
        and depth < 4
    ):
        return _legacy_check(functions[node.func.id], functions, depth + 1)
    return ["unknown", text[:120]]


def _legacy_check(
    fn: ast.FunctionDef, functions: dict[str, ast.FunctionDef], depth: int = 0
) -> list:
    body = [s for s in fn.body if not isinstance(s, ast.Expr)]
    if len(body) != 1 or not isinstance(body[0], ast.Return) or body[0].value is None:
        return ["unknown", ast.unparse(fn)[:200]]
    return _legacy_program(body[0].value, functions, depth)


def _legacy(release) -> dict[str, Any]:
    """The module-level checks of a release before ``_aiter_ops.py`` (0.8.2-0.11.0):
    ``is_rocm_aiter_fp8bmm_enabled()`` in mla/common.py, ``is_rocm_aiter_moe_enabled()``, ...
    keyed by the name the function gives (``moe`` there is ``fused_moe`` later: a rule reading
    a later name finds it missing in these releases, never false)."""
    out: dict[str, Any] = {}
    for path in release.names:
        if not path.endswith(".py"):
            continue
        text = release.text(path) or ""
        if "aiter_" not in text or "_enabled" not in text:
            continue
        tree = release.tree(path)
        if tree is None:
            continue
        functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
        for name, fn in sorted(functions.items()):
            match = _LEGACY_CHECK.fullmatch(name)
            if match and match.group(1) not in out:
                out[match.group(1)] = {
                    "method": f"vllm/{path}:{name}",
                    "gate": _legacy_check(fn, functions),
                }
    unknown = sorted(k for k, v in out.items() if "unknown" in json.dumps(v["gate"]))
    if unknown:
        release.problem(f"checks with tests not followed: {', '.join(unknown)}")
    return out


def extract(release) -> dict[str, Any]:
    ops = release.tree("_aiter_ops.py")
    rocm = release.tree("platforms/rocm.py")
    if ops is None:
        return _legacy(release)
    if rocm is None:
        return {}
    cls = _class(ops, "rocm_aiter_ops")
    if cls is None:
        release.problem("vllm/_aiter_ops.py has no rocm_aiter_ops class")
        return {}
    known = targets()
    predicates = _Predicates(rocm)
    # the umbrella check lives in _aiter_ops.py and calls rocm.py's predicates
    functions = {n.name: n for n in ops.body if isinstance(n, ast.FunctionDef)}
    predicates.functions = {**functions, **predicates.functions}
    gates = _Gates(cls, predicates, known, functions)
    out: dict[str, Any] = {}
    supported = gates.supported()
    out["@supported"] = {"method": "is_aiter_found_and_supported", "gate": supported}
    for name in sorted(gates.methods):
        match = re.fullmatch(r"is_(\w+?)_enabled|is_enabled", name)
        if not match:
            continue
        feature = match.group(1) or "aiter"
        out[feature] = {"method": f"rocm_aiter_ops.{name}", "gate": gates.method(name)}
    unknown = sorted(k for k, v in out.items() if "unknown" in json.dumps(v["gate"]))
    if unknown:
        release.problem(f"checks with tests not followed: {', '.join(unknown)}")
    return out
