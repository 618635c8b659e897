"""What a release does when the world size (TP x PP) exceeds the GPUs of the node and no
executor backend is given (KIND "parallel").

``ParallelConfig.__post_init__`` (``config/parallel.py``, ``config.py`` before 0.11) picks
the backend: in the branch ``<device count> < self.world_size`` releases up
to 0.11.0 switch to Ray by themselves (multi-node through a Ray cluster; "Unable to load
Ray" without the package), and later ones raise (0.11.1-0.12.0: "Tensor parallel size (N)
cannot be larger than the number of available GPUs (M)"; 0.13.0+: "World size (N) is larger
than the number of available GPUs (M) in this node").

Key ``oversized_world``, value ``{"behaviour": "ray" | "refuse"}``; no key when the branch is
not found (recorded as a problem).
"""

from __future__ import annotations

import ast
from typing import Any

KIND = "parallel"
META = {
    "key": "oversized_world",
    "value": {"behaviour": "ray (switches to the Ray backend) | refuse (raises ValueError)"},
    "sources": ["config/parallel.py or config.py (ParallelConfig.__post_init__)"],
}
# the device count as each release asks for it (0.20.0 on: current_platform.device_count())
_TESTS = (
    "cuda_device_count_stateless() < self.world_size",
    "current_platform.device_count() < self.world_size",
)


def _behaviour(branch: list[ast.stmt]) -> str | None:
    for stmt in branch:
        if isinstance(stmt, ast.Raise):
            return "refuse"  # raised whatever else holds
        for node in ast.walk(stmt):
            if (
                isinstance(node, ast.Assign)
                and isinstance(node.value, ast.Constant)
                and node.value.value == "ray"
            ):
                return "ray"
    return None


def extract(release) -> dict[str, Any]:
    for rel in ("config/parallel.py", "config.py"):
        tree = release.tree(rel)
        if tree is None:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and any(t in ast.unparse(node.test) for t in _TESTS):
                behaviour = _behaviour(node.body)
                if behaviour is not None:
                    return {"oversized_world": {"behaviour": behaviour}}
    release.problem(f"no branch on `{_TESTS[-1]}` in ParallelConfig")
    return {}
