"""What a release's `vllm collect-env` lists (KIND "collect_env").

``vllm/collect_env.py`` (in the wheel from 0.8.5) prints a pip package only when its
``pip list --format=freeze`` line contains one of ``DEFAULT_PIP_PATTERNS`` (a substring
test: ``torchcodec`` is listed through ``torch``, ``deep_gemm`` never is). A package missing
from a report is therefore absent only when the report's release would have listed it.

Its ``get_env_vars()`` prints an environment variable only when the name is one of vLLM's
own variables (``vllm.envs.environment_variables``) or starts with one of ``report_prefix``,
and never when the lower-case name contains one of ``secret_terms`` (``HF_TOKEN`` is never
printed). A variable missing from a report is absent only when the report would print it.

Keys:
* ``pip_patterns``: the sorted patterns;
* ``env_prefixes``: ``report_prefix`` as written;
* ``env_never``: ``secret_terms``;
* ``env_names``: the names of ``environment_variables`` that do not start with ``VLLM_``
  (every ``VLLM_`` variable the release reads is printed; one it does not read has no effect
  in it, so it is listed through the ``VLLM_`` prefix).

A release without the module (0.8.0-0.8.4: the script lived outside the wheel) has no key, so
nothing is known of what its report lists.
"""

from __future__ import annotations

import ast
from typing import Any

KIND = "collect_env"
META = {
    "key": "pip_patterns | env_prefixes | env_never | env_names",
    "value": "pip_patterns: the substrings of which a `pip list` line must contain one to be "
    "listed; env_prefixes / env_names / env_never: the prefixes and names of the environment "
    "variables get_env_vars() prints, and the terms that keep a name out",
    "sources": [
        "vllm/collect_env.py (DEFAULT_PIP_PATTERNS, get_env_vars)",
        "vllm/envs.py (environment_variables)",
    ],
}


def _literal_assignment(body: list[ast.stmt], name: str) -> Any:
    for node in body:
        target = (
            node.targets[0]
            if isinstance(node, ast.Assign) and len(node.targets) == 1
            else node.target
            if isinstance(node, ast.AnnAssign)
            else None
        )
        if isinstance(target, ast.Name) and target.id == name and node.value is not None:
            try:
                return ast.literal_eval(node.value)
            except ValueError:
                return None
    return None


def _env_rule(tree: ast.Module) -> dict[str, list[str]] | None:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "get_env_vars":
            prefixes = _literal_assignment(node.body, "report_prefix")
            never = _literal_assignment(node.body, "secret_terms")
            if isinstance(prefixes, tuple) and isinstance(never, tuple):
                return {"env_prefixes": list(prefixes), "env_never": sorted(never)}
    return None


def _env_names(release) -> list[str] | None:
    tree = release.tree("envs.py")
    if tree is None:
        return None
    for node in tree.body:
        target = (
            node.targets[0]
            if isinstance(node, ast.Assign) and len(node.targets) == 1
            else node.target
            if isinstance(node, ast.AnnAssign)
            else None
        )
        if (
            isinstance(target, ast.Name)
            and target.id == "environment_variables"
            and isinstance(node.value, ast.Dict)
        ):
            names = [k.value for k in node.value.keys if isinstance(k, ast.Constant)]
            return sorted({str(n) for n in names if not str(n).startswith("VLLM_")})
    return None


def extract(release) -> dict[str, Any]:
    tree = release.tree("collect_env.py")
    if tree is None:
        return {}
    out: dict[str, Any] = {}
    patterns = _literal_assignment(tree.body, "DEFAULT_PIP_PATTERNS")
    if isinstance(patterns, (set, list, tuple)):
        out["pip_patterns"] = sorted(patterns)
    else:
        release.problem("collect_env.py has no literal DEFAULT_PIP_PATTERNS")
    rule = _env_rule(tree)
    names = _env_names(release)
    if rule is None or names is None:
        release.problem("collect_env.py get_env_vars() or vllm.envs environment_variables unread")
    else:
        out.update(rule)
        out["env_names"] = names
    return out
