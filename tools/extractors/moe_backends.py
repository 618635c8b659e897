"""The GPUs each ``--moe-backend`` choice can run on, per quantization (KIND "moe_backends").

From 0.17.0 vLLM picks the experts kernel of a MoE layer in an *oracle* per quantization
(``model_executor/layers/fused_moe/oracle/<quant>.py``): ``map_<quant>_backend`` turns the
``--moe-backend`` string into the oracle's backend, ``backend_to_kernel_cls`` names the experts
classes of that backend, and each class's ``_supports_current_device()`` says whether it runs on
the GPU. For a backend the user forced, vLLM raises "<quant> MoE backend 'X' does not support the
deployment configuration since kernel does not support current device" when no class does.

Key ``<quant>:<choice>`` (``nvfp4:flashinfer_trtllm``); value ``{"backend": oracle backend,
"classes": {class: program}}``, a program being the device test as data:
``["family", 100]`` (the 10.x family), ``["exact", 90]``, ``["at_least", 75]``, ``["cuda"]``
(any NVIDIA GPU), ``["false"]`` (not CUDA: ROCm, CPU, XPU), ``["package", name]`` (a package
check, not the device's), ``["and", ...]``, ``["or", ...]``, ``["not", p]``, or
``["unknown", source]`` for a test not read here (a helper such as
``cutlass_group_gemm_supported()``): the doctor then cannot decide.
"""

from __future__ import annotations

import ast
from typing import Any

KIND = "moe_backends"
META = {
    "key": "<quant>:<--moe-backend choice>",
    "value": {
        "backend": "the oracle's backend the choice maps to",
        "classes": "experts class -> its _supports_current_device() test as a program",
    },
    "sources": [
        "vllm/model_executor/layers/fused_moe/oracle/*.py",
        "the experts classes' _supports_current_device()",
    ],
}

_ORACLE = "model_executor/layers/fused_moe/oracle/"
_CUDA = {"is_cuda", "is_cuda_alike"}
_NOT_CUDA = {"is_rocm", "is_cpu", "is_xpu", "is_tpu", "is_out_of_tree", "supports_mx"}


def extract(release) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for rel in release.glob(f"{_ORACLE}*.py"):
        quant = rel.rsplit("/", 1)[-1][: -len(".py")]
        tree = release.tree(rel)
        if tree is None or quant.startswith("_"):
            continue
        mapping = _mapping(tree)
        kernels = _kernel_classes(tree)
        if not mapping or not kernels:
            continue
        for choice, backend in mapping.items():
            classes = {}
            for module, name in kernels.get(backend, []):
                classes[name] = _device_program(release, module, name)
            if classes:
                out[f"{quant}:{choice}"] = {"backend": backend, "classes": classes}
    return out


def _mapping(tree: ast.Module) -> dict[str, str]:
    """``map_<quant>_backend``'s dict: the --moe-backend string -> the oracle backend's name."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("map_"):
            for sub in ast.walk(node):
                if isinstance(sub, ast.Dict):
                    found = {
                        k.value: v.attr
                        for k, v in zip(sub.keys, sub.values, strict=False)
                        if isinstance(k, ast.Constant)
                        and isinstance(k.value, str)
                        and isinstance(v, ast.Attribute)
                    }
                    if found:
                        return found
    return {}


def _kernel_classes(tree: ast.Module) -> dict[str, list[tuple[str, str]]]:
    """``backend_to_kernel_cls``: per backend compared in its if/elif chain, the classes it
    imports (module, name) and returns."""
    fn = next(
        (
            n
            for n in tree.body
            if isinstance(n, ast.FunctionDef) and n.name == "backend_to_kernel_cls"
        ),
        None,
    )
    out: dict[str, list[tuple[str, str]]] = {}
    if fn is None:
        return out
    node: Any = next((s for s in fn.body if isinstance(s, ast.If)), None)
    while isinstance(node, ast.If):
        backends = [
            c.attr for c in ast.walk(node.test) if isinstance(c, ast.Attribute) and c.attr.isupper()
        ]
        imported = {
            alias.asname or alias.name: (sub.module or "")
            for sub in node.body
            for inner in ast.walk(sub)
            if isinstance(inner, ast.ImportFrom)
            for alias in inner.names
            for sub in [inner]
        }
        returned = [
            n.id
            for sub in node.body
            if isinstance(sub, ast.Return) and sub.value is not None
            for n in ast.walk(sub.value)
            if isinstance(n, ast.Name)
        ]
        pairs = [(imported[name], name) for name in returned if name in imported]
        for backend in backends:
            out.setdefault(backend, []).extend(pairs)
        node = node.orelse[0] if len(node.orelse) == 1 else None
    return out


def _module_file(module: str) -> str | None:
    prefix = "vllm."
    if not module.startswith(prefix):
        return None
    return module[len(prefix) :].replace(".", "/") + ".py"


def _device_program(release, module: str, name: str, depth: int = 0) -> list[Any]:
    """The class's _supports_current_device() as a program, looked up in the class and then
    its bases (in the same file, or the module a base is imported from)."""
    rel = _module_file(module)
    tree = release.tree(rel) if rel else None
    if tree is None or depth > 4:
        return ["unknown", f"{module}.{name} not read"]
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name), None)
    if cls is None:
        return ["unknown", f"{module}.{name} not found"]
    method = next(
        (
            n
            for n in cls.body
            if isinstance(n, ast.FunctionDef) and n.name == "_supports_current_device"
        ),
        None,
    )
    if method is not None:
        return _program_of(method)
    imports = {
        alias.asname or alias.name: node.module or ""
        for node in tree.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    unread: list[Any] = []
    for base in cls.bases:  # in method resolution order: the first base that defines it
        base_name = base.id if isinstance(base, ast.Name) else None
        if base_name is None:
            continue
        found = _device_program(release, imports.get(base_name, module), base_name, depth + 1)
        if found[0] != "unknown":
            return found
        if not str(found[1]).endswith(("not found", "no _supports_current_device")):
            unread.append(found)
    return unread[0] if unread else ["unknown", f"{module}.{name}: no _supports_current_device"]


def _program_of(method: ast.FunctionDef) -> list[Any]:
    """``if <c>: return False`` guards then ``return <expr>``, as one program."""
    parts: list[Any] = []
    for stmt in method.body:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue  # the docstring
        if isinstance(stmt, (ast.Import, ast.ImportFrom, ast.Assign)):
            continue  # p = current_platform, a local import
        if (
            isinstance(stmt, ast.If)
            and not stmt.orelse
            and len(stmt.body) == 1
            and isinstance(stmt.body[0], ast.Return)
            and isinstance(stmt.body[0].value, ast.Constant)
            and stmt.body[0].value.value is False
        ):
            parts.append(["not", _expr(stmt.test)])
            continue
        if isinstance(stmt, ast.Return) and stmt.value is not None:
            parts.append(_expr(stmt.value))
            return parts[0] if len(parts) == 1 else ["and", *parts]
        return ["unknown", ast.unparse(method)[:200]]
    return ["unknown", ast.unparse(method)[:200]]


def _expr(node: ast.expr) -> list[Any]:
    if isinstance(node, ast.BoolOp):
        op = "and" if isinstance(node.op, ast.And) else "or"
        return [op, *(_expr(v) for v in node.values)]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return ["not", _expr(node.operand)]
    if isinstance(node, ast.Constant) and isinstance(node.value, bool):
        return ["cuda"] if node.value else ["false"]
    if isinstance(node, ast.Call):
        func = node.func
        attr = func.attr if isinstance(func, ast.Attribute) else None
        name = func.id if isinstance(func, ast.Name) else None
        arg = node.args[0] if node.args else None
        if attr in _CUDA:
            return ["cuda"]
        if attr in _NOT_CUDA:
            return ["false"]
        if attr in ("is_device_capability_family", "is_device_capability") and isinstance(
            arg, ast.Constant
        ):
            kind = "family" if attr.endswith("family") else "exact"
            return [kind, int(arg.value)]
        if attr == "has_device_capability" and arg is not None:
            if isinstance(arg, ast.Constant) and isinstance(arg.value, int):
                return ["at_least", int(arg.value)]
            if isinstance(arg, ast.Tuple) and all(isinstance(e, ast.Constant) for e in arg.elts):
                major, minor = (int(e.value) for e in arg.elts)  # type: ignore[union-attr]
                return ["at_least", major * 10 + minor]
        if name is not None and name.startswith("has_"):
            return ["package", name]
    return ["unknown", ast.unparse(node)[:160]]
