"""Which model runner each release takes when ``VLLM_USE_V2_MODEL_RUNNER`` is not set (KIND
"model_runner"), read from ``vllm/config/vllm.py`` (``VllmConfig.use_v2_model_runner``).

Model Runner V2 keeps its request state in buffers that need UVA (pinned host memory), so
where pinned memory is off (WSL2) it cannot start. Which runner a release picks by itself:

* ``off``: no automatic choice (the variable's default decides: 0 before 0.22);
* ``listed``: V2 for a generate model whose architecture is in
  ``DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES`` and that is neither MoE nor quantized (0.22-0.28);
* ``auto``: V2 unless the line uses a feature V2 does not support yet, or (ROCm) an
  architecture of ``ROCM_DEFAULT_MRV1_ARCHITECTURES`` (0.29 on).

Key ``@release``; value ``{"default": off|listed|auto, "architectures": [...]}`` (the list
for ``listed``; the ROCm V1 list for ``auto``).
"""

from __future__ import annotations

import ast
from typing import Any

KIND = "model_runner"
META = {
    "key": "@release",
    "value": {
        "default": "off | listed | auto: what VllmConfig.use_v2_model_runner picks when "
        "VLLM_USE_V2_MODEL_RUNNER is not set",
        "architectures": "listed: the architectures V2 is the default for; auto: those "
        "ROCm keeps on V1",
    },
    "sources": ["vllm/config/vllm.py"],
}


def _frozenset(tree: ast.Module, name: str) -> list[str] | None:
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
            and isinstance(node.value, ast.Call)
            and node.value.args
        ):
            try:
                return sorted(ast.literal_eval(node.value.args[0]))
            except ValueError:
                return None
    return None


def extract(release) -> dict[str, Any]:
    tree = release.tree("config/vllm.py")
    if tree is None:
        return {"@release": {"default": "off", "architectures": []}}
    prop = next(
        (
            n
            for n in ast.walk(tree)
            if isinstance(n, ast.FunctionDef) and n.name == "use_v2_model_runner"
        ),
        None,
    )
    if prop is None:
        return {"@release": {"default": "off", "architectures": []}}
    text = ast.unparse(prop)
    if "_is_default_v2_model_runner_model" in text:
        listed = _frozenset(tree, "DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES")
        if listed is None:
            release.problem("DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES is not a literal set")
            return {}
        return {"@release": {"default": "listed", "architectures": listed}}
    rocm_v1 = _frozenset(tree, "ROCM_DEFAULT_MRV1_ARCHITECTURES") or []
    return {"@release": {"default": "auto", "architectures": rocm_v1}}
