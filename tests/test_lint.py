"""Lint and types in CI: ruff and mypy run here, so the README's test command runs them.

Both are pinned in the `test` extra and configured in pyproject.toml ([tool.ruff],
[tool.mypy]): the rule set with the reason for each ignored rule, and the modules checked
strictly. Each test fails with the tool's own report, naming file, line and code.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run_tool(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    if importlib.util.find_spec(module) is None:
        pytest.fail(f"{module} is not installed: pip install -e '.[test]' (it is pinned there)")
    return subprocess.run(
        [sys.executable, "-m", module, *args], cwd=ROOT, capture_output=True, text=True, timeout=600
    )


def test_ruff_check():
    # no cache: a full check of the checkout takes well under a second
    run = run_tool("ruff", "check", "--no-cache", "--output-format", "concise", ".")
    assert run.returncode == 0, f"ruff check:\n{run.stdout}{run.stderr}"


def test_mypy():
    # strict on engine/ and facts/, a baseline elsewhere ([tool.mypy] in pyproject.toml); the
    # cache (.mypy_cache, ignored by git) makes a run after a small change take seconds
    run = run_tool("mypy", "--no-error-summary", "--cache-dir", str(ROOT / ".mypy_cache"))
    assert run.returncode == 0, f"mypy:\n{run.stdout}{run.stderr}"


def test_ruff_format():
    run = run_tool("ruff", "format", "--check", "--no-cache", ".")
    assert run.returncode == 0, f"ruff format --check (fix: ruff format FILE):\n{run.stdout}"


def _runtime_nodes(tree):
    """The tree's nodes, without the `if TYPE_CHECKING:` blocks (imports for annotations only,
    never run)."""
    import ast

    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            test = child.test if isinstance(child, ast.If) else None
            if test is not None and "TYPE_CHECKING" in ast.unparse(test):
                stack.extend(child.orelse)
                continue
            stack.append(child)


def imports_of(path: Path, package: str, modules: set[str]) -> set[str]:
    """The package's modules ``path`` imports when it runs, at module level or inside
    functions."""
    import ast

    found = set()
    for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the module's package up
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in modules]
            names = subs if len(subs) == len(node.names) else [base, *subs]
        else:
            continue
        for imported in names:
            name = imported
            while name and name not in modules:  # `import a.b.c` imports the module a.b.c
                name = name.rpartition(".")[0]
            if name:
                found.add(name)
    return found


def import_graph(root: Path = ROOT) -> tuple[dict[str, Path], dict[str, set[str]]]:
    """Every module of ``root``/vllm_doctor (name -> file), and the package's modules each one
    imports (bench/structure/structure.py prints the same graph)."""
    paths = {}
    for path in (root / "vllm_doctor").rglob("*.py"):
        name = ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
        paths[name] = path
    modules = set(paths)
    graph = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        graph[name] = imports_of(path, package, modules) - {name}
    return paths, graph


def import_cycles(graph: dict[str, set[str]]) -> list[str]:
    """Each cycle as ``a -> b -> a``: a module is on a cycle when it can reach itself."""
    cycles = set()
    for start in graph:
        stack, seen = [(start, (start,))], set()
        while stack:
            node, trail = stack.pop()
            for nxt in graph[node]:
                if nxt == start:
                    cycles.add(" -> ".join((*trail, start)))
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, (*trail, nxt)))
    return sorted(cycles)


def test_no_import_cycles():
    """Modules import one another in one direction only, function-level imports included
    (they are how the start-up stays fast; a cycle through them still ties two modules)."""
    cycles = import_cycles(import_graph()[1])
    assert not cycles, "import cycles:\n" + "\n".join(cycles)
