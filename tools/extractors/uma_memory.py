"""What each release takes as a unified-memory GPU's free memory (KIND "uma_memory"), read from
``MemorySnapshot.measure`` (``vllm/utils/mem_utils.py``, earlier ``vllm/utils/__init__.py`` or
``vllm/worker/worker_base.py``) and the platforms' ``is_integrated_gpu`` (``vllm/platforms/``).

vLLM sizes its memory from the device's free and total memory (``mem_get_info``). On a GPU
that shares the system's memory the device's free memory is not what the OS can give: CUDA
under-reports it (reclaimable page cache is not counted) and ROCm on an APU reports the GTT
aperture whatever the OS already uses. Where ``measure`` swaps in
``psutil.virtual_memory().available`` for an integrated GPU, vLLM's start-up check
(``Free memory on device ... is less than desired GPU memory utilization``) sees what the OS
has; where it does not, it sees the device's figure.

Key: a platform module (``cuda``, ``rocm``, ``xpu``) whose GPUs get the OS's available memory
when integrated; value ``{"when": "integrated", "reads": ...}`` (the platform's
``is_integrated_gpu`` override, 0.20.0 on) or ``{"when": "capability", "capabilities":
[[8, 7], ...]}`` (the hard-coded Orin/Thor/Spark capabilities of 0.12.0-0.19.1). A platform
without a key: vLLM takes the device's free memory there. Key ``@snapshot``: where the
release measures it, and the test (null: no unified-memory branch at all).
"""

from __future__ import annotations

import ast
from typing import Any

KIND = "uma_memory"
META = {
    "key": "platform module (cuda, rocm, xpu) whose integrated GPUs get the OS's available "
    "memory as free memory; '@snapshot' for where the release measures free memory",
    "value": {
        "when": "integrated (the platform's is_integrated_gpu) or capability (a fixed list)",
        "capabilities": "the (major, minor) capabilities of a 'capability' test",
        "reads": "what the platform's is_integrated_gpu returns (source text)",
        "where": "@snapshot: file:class.method measuring free memory",
        "test": "@snapshot: the test that swaps in psutil's available memory (null: none)",
    },
    "sources": ["vllm/utils/mem_utils.py", "vllm/platforms/*.py"],
}

_SNAPSHOT_FILES = ("utils/mem_utils.py", "utils/__init__.py", "utils.py", "worker/worker_base.py")
_OS_AVAILABLE = "psutil.virtual_memory().available"


def _method(tree: ast.Module, cls: str, name: str) -> ast.FunctionDef | None:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == name:
                    return item
    return None


def _swap_test(fn: ast.FunctionDef) -> ast.expr | None:
    """The ``if`` test whose body sets free memory to the OS's available memory."""
    for node in ast.walk(fn):
        if isinstance(node, ast.If) and any(
            isinstance(s, ast.Assign) and ast.unparse(s.value) == _OS_AVAILABLE for s in node.body
        ):
            return node.test
    return None


def _tuple_constants(fn: ast.FunctionDef) -> dict[str, Any]:
    """Local names bound to literal tuples (``shared_sysmem_device_mem_sms = ((8, 7), ...)``)."""
    out: dict[str, Any] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                try:
                    out[target.id] = ast.literal_eval(node.value)
                except ValueError:
                    continue
    return out


def _integrated_platforms(release) -> dict[str, Any]:
    """Platform modules overriding ``is_integrated_gpu`` with something other than False."""
    found: dict[str, Any] = {}
    for path in release.glob("platforms/*.py"):
        tree = release.tree(path)
        if tree is None:
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef) or node.name != "is_integrated_gpu":
                continue
            returns = [s for s in ast.walk(node) if isinstance(s, ast.Return) and s.value]
            if returns and not all(ast.unparse(r.value) == "False" for r in returns):
                module = path.rsplit("/", 1)[-1][: -len(".py")]
                found[module] = {
                    "when": "integrated",
                    "reads": "; ".join(ast.unparse(r.value) for r in returns),
                }
    return found


def extract(release) -> dict[str, Any]:
    for path in _SNAPSHOT_FILES:
        tree = release.tree(path)
        fn = _method(tree, "MemorySnapshot", "measure") if tree is not None else None
        if fn is not None:
            break
    else:
        release.problem("no MemorySnapshot.measure in " + ", ".join(_SNAPSHOT_FILES))
        return {}
    test = _swap_test(fn)
    out: dict[str, Any] = {
        "@snapshot": {
            "where": f"vllm/{path}:MemorySnapshot.measure",
            "test": ast.unparse(test) if test is not None else None,
        }
    }
    if test is None:
        return out
    text = ast.unparse(test)
    if "is_integrated_gpu" in text:
        out.update(_integrated_platforms(release))
    elif "get_device_capability" in text and "is_cuda()" in text:
        constants = _tuple_constants(fn)
        names = [n.id for n in ast.walk(test) if isinstance(n, ast.Name) and n.id in constants]
        if not names:
            release.problem(f"capability test not followed: {text[:120]}")
            return out
        out["cuda"] = {
            "when": "capability",
            "capabilities": [list(c) for c in constants[names[0]]],
        }
    else:
        release.problem(f"unified-memory test not followed: {text[:120]}")
    return out
