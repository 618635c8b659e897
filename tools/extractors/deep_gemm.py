"""Where each release uses DeepGEMM (KIND "deep_gemm"): the GPU capabilities its check admits,
read from ``is_deep_gemm_supported`` (vllm/utils/deep_gemm.py) and, from the release that moved
the test there, ``CudaPlatform.support_deep_gemm`` (vllm/platforms/cuda.py).

vLLM takes DeepGEMM's FP8 kernels where ``VLLM_USE_DEEP_GEMM`` is on (its default: 0 up to
0.10.2, 1 from 0.11.0, table ``envs``), the deep_gemm package imports, and the GPU passes the
capability test: exactly 9.0 (Hopper), the 10.x family (B200/B300), and from a later release
the 12.x family (RTX 50, RTX PRO 6000, GB10), where DeepGEMM's kernels may have no image.

Key ``@release``: ``{"exact": [90], "family": [100, 120], "where": "file:function"}``
(capabilities as vLLM writes them; a family is the major version: 120 admits 120 and 121).
A release without the check (before 0.8.3) has no key.
"""

from __future__ import annotations

import ast
from typing import Any

KIND = "deep_gemm"
META = {
    "key": "@release",
    "value": {
        "exact": "capabilities is_device_capability admits (major*10+minor)",
        "family": "capability families is_device_capability_family admits (the major's x10)",
        "where": "the file and function that test the capability",
    },
    "sources": ["vllm/utils/deep_gemm.py", "vllm/platforms/cuda.py"],
}

_PLACES = (
    ("utils/deep_gemm.py", "is_deep_gemm_supported"),
    ("platforms/cuda.py", "support_deep_gemm"),
    ("utils/__init__.py", "is_deep_gemm_supported"),
)


def _function(tree: ast.Module, name: str) -> ast.FunctionDef | None:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    return None


def _capabilities(fn: ast.FunctionDef) -> dict[str, list[int]]:
    found: dict[str, list[int]] = {"exact": [], "family": []}
    for node in ast.walk(fn):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        kind = {
            "is_device_capability": "exact",
            "is_device_capability_family": "family",
        }.get(node.func.attr)
        if kind and node.args and isinstance(node.args[0], ast.Constant):
            value = node.args[0].value
            if isinstance(value, int):
                found[kind].append(value)
    return found


def extract(release) -> dict[str, Any]:
    for path, name in _PLACES:
        tree = release.tree(path)
        fn = _function(tree, name) if tree is not None else None
        if fn is None:
            continue
        found = _capabilities(fn)
        if found["exact"] or found["family"]:
            return {
                "@release": {
                    "exact": sorted(set(found["exact"])),
                    "family": sorted(set(found["family"])),
                    "where": f"{path}:{name}",
                }
            }
    return {}
