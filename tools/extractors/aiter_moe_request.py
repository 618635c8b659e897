"""Where setting the AITER switches forces vLLM's MoE backend to AITER (KIND
"aiter_moe_request"), read from the MoE oracles ``vllm/model_executor/layers/fused_moe/oracle/*.py``.

An oracle picks a model's MoE kernels by its quantization (``fp8.py``, ``unquantized.py``, ...).
Some releases answer an explicit request first:

    if envs.is_set("VLLM_ROCM_USE_AITER") or envs.is_set("VLLM_ROCM_USE_AITER_MOE"):
        if not envs.VLLM_ROCM_USE_AITER or not envs.VLLM_ROCM_USE_AITER_MOE:
            AVAILABLE_BACKENDS.remove(Fp8MoeBackend.AITER)
        else:
            backend = Fp8MoeBackend.AITER
            return _return_or_raise(backend, ...)

so with both switches on the AITER experts are taken or the engine stops with
``ValueError: FP8 MoE backend AITER does not support the deployment configuration since ...``;
AITER's experts check ``rocm_aiter_ops.is_fused_moe_enabled()``, off on a GPU AITER does not
support (gfx1151, gfx1201). A release that falls back to the other backends there (vLLM pull
request 56590) has ``raises: false``.

Key: the oracle module (``fp8``, ``unquantized``); value ``{"raises": bool, "label": "FP8 MoE
backend", "switches": [...], "skipped_when": [...]}`` (the label starts the ValueError's
message; ``skipped_when`` names the ``rocm_aiter_ops.is_<feature>_enabled()`` checks that turn
the request down, ``rdna_aiter`` from 0.31.0). An oracle without the explicit request has no
key.
"""

from __future__ import annotations

import ast
import re
from typing import Any

KIND = "aiter_moe_request"
META = {
    "key": "MoE oracle module (vllm/model_executor/layers/fused_moe/oracle/<key>.py) that "
    "answers an explicit VLLM_ROCM_USE_AITER / VLLM_ROCM_USE_AITER_MOE first",
    "value": {
        "raises": "with both switches on, the AITER backend is returned or a ValueError raised "
        "(false: the release falls back to the other backends)",
        "label": "how the ValueError's message starts ('FP8 MoE backend')",
        "switches": "the variables whose being set makes the request explicit",
        "skipped_when": "AITER features (table aiter_gates) that, on, turn the request down",
    },
    "sources": ["vllm/model_executor/layers/fused_moe/oracle/*.py"],
}

_ORACLES = "model_executor/layers/fused_moe/oracle/*.py"
_SKIP = re.compile(r"rocm_aiter_ops\.is_(\w+?)_enabled\(\)")
_IS_SET = re.compile(r"envs\.is_set\(['\"](VLLM_ROCM_USE_AITER\w*)['\"]\)")


def _request(tree: ast.Module) -> ast.If | None:
    """The ``if envs.is_set("VLLM_ROCM_USE_AITER") ...`` block."""
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _IS_SET.search(ast.unparse(node.test)):
            return node
    return None


def _answers_with_aiter(block: ast.If) -> ast.stmt | None:
    """The branch of the request that takes the AITER backend (``backend = X.AITER``)."""
    for node in ast.walk(block):
        if not isinstance(node, ast.If):
            continue
        for branch in (node.body, node.orelse):
            if any(
                isinstance(s, ast.Assign)
                and re.fullmatch(r"\w+MoeBackend\.AITER", ast.unparse(s.value))
                for s in branch
            ):
                return ast.Module(body=branch, type_ignores=[])  # type: ignore[return-value]
    return None


def _label(tree: ast.Module) -> str | None:
    """'FP8 MoE backend' from ``_make_log_unsupported``'s first f-string."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "_make_log_unsupported":
            for inner in ast.walk(node):
                if isinstance(inner, ast.JoinedStr) and inner.values:
                    first = inner.values[0]
                    if isinstance(first, ast.Constant) and isinstance(first.value, str):
                        return first.value.strip().rstrip("'").strip()
    return None


def extract(release) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path in release.glob(_ORACLES):
        tree = release.tree(path)
        if tree is None:
            continue
        block = _request(tree)
        if block is None:
            continue
        module = path.rsplit("/", 1)[-1][: -len(".py")]
        branch = _answers_with_aiter(block)
        if branch is None:
            release.problem(f"{path}: the explicit AITER request is not followed")
            continue
        # the AITER branch ends in _return_or_raise (or raises itself) unless it falls back
        text = ast.unparse(branch)
        raises = "_return_or_raise(" in text or "raise " in text
        # further tests that turn the request down (0.31.0 on: an RDNA GPU's own AITER path)
        outside = ast.unparse(block).replace(text, "")
        out[module] = {
            "raises": raises,
            "label": _label(tree),
            "switches": sorted(set(_IS_SET.findall(ast.unparse(block.test)))),
            "skipped_when": sorted(set(_SKIP.findall(outside))),
        }
    return out
