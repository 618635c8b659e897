"""Which pip packages a release's `vllm collect-env` lists (KIND "collect_env").

``vllm/collect_env.py`` (in the wheel from 0.8.5) prints a pip package only when its
``pip list --format=freeze`` line contains one of ``DEFAULT_PIP_PATTERNS`` (a substring
test: ``torchcodec`` is listed through ``torch``, ``deep_gemm`` never is). A package missing
from a report is therefore absent only when the report's release would have listed it.

Key ``pip_patterns``, value: the sorted patterns. A release without the module (0.8.0-0.8.4:
the script lived outside the wheel) has no key, so nothing is known of what its report lists.
"""

from __future__ import annotations

import ast
from typing import Any

KIND = "collect_env"
META = {
    "key": "pip_patterns",
    "value": "the substrings of which a `pip list` line must contain one to be listed",
    "sources": ["vllm/collect_env.py (DEFAULT_PIP_PATTERNS)"],
}


def extract(release) -> dict[str, Any]:
    tree = release.tree("collect_env.py")
    if tree is None:
        return {}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id == "DEFAULT_PIP_PATTERNS"
        ):
            try:
                return {"pip_patterns": sorted(ast.literal_eval(node.value))}
            except ValueError:
                break
    release.problem("collect_env.py has no literal DEFAULT_PIP_PATTERNS")
    return {}
