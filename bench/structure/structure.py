"""The structure of the doctor's code as text, for a note on a change that moves code.

Prints, for a checkout:

* every Python module of ``vllm_doctor/`` and ``tools/`` over a size (``--over``, 800 lines by
  default: CONTRIBUTING's limit for a module doing several jobs);
* for each package named (default: the packages of ``vllm_doctor``), its modules with their
  lines and the modules of the doctor each one imports, at module level or inside a function
  (the graph tests/test_lint.py checks for cycles, read by its own functions);
* the import cycles of that graph (none is the rule).

Run from the repository root (``--root`` reads another checkout, e.g. a ``git worktree`` of an
older commit; the paths printed are relative to it):

    python bench/structure/structure.py > bench/structure/after.txt
    git worktree add /tmp/before COMMIT
    python bench/structure/structure.py --root /tmp/before > bench/structure/before.txt
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent


def _lint_module():
    """tests/test_lint.py: the import graph and cycles as its cycle check reads them."""
    spec = importlib.util.spec_from_file_location("_test_lint", REPO / "tests" / "test_lint.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("packages", nargs="*", help="e.g. vllm_doctor.facts (default: all)")
    parser.add_argument("--root", type=Path, default=REPO, help="the checkout to read")
    parser.add_argument("--over", type=int, default=800, help="list modules over this size")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    lint = _lint_module()
    paths, graph = lint.import_graph(root)

    print(f"# modules over {args.over} lines (vllm_doctor/, tools/)")
    sizes = {
        p.relative_to(root).as_posix(): _lines(p)
        for folder in ("vllm_doctor", "tools")
        for p in (root / folder).rglob("*.py")
    }
    big = sorted(((n, f) for f, n in sizes.items() if n > args.over), reverse=True)
    for lines, file in big:
        print(f"{lines:6d}  {file}")
    if not big:
        print("  (none)")

    packages = args.packages or sorted(
        name for name, path in paths.items() if path.name == "__init__.py"
    )
    for package in packages:
        members = sorted(
            name
            for name in paths
            if name.rpartition(".")[0] == package and paths[name].name != "__init__.py"
        )
        total = sum(_lines(paths[m]) for m in members)
        print(f"\n# {package}: {len(members)} modules, {total} lines")
        for name in members:
            inside = sorted(
                dep.rpartition(".")[2] for dep in graph[name] if dep.rpartition(".")[0] == package
            )
            outside = sorted(
                dep.removeprefix("vllm_doctor.")
                for dep in graph[name]
                if dep.rpartition(".")[0] != package and dep != package
            )
            short = name.rpartition(".")[2]
            print(f"{_lines(paths[name]):6d}  {short}")
            if inside:
                print(f"          imports here: {', '.join(inside)}")
            if outside:
                print(f"          imports elsewhere: {', '.join(outside)}")

    found = lint.import_cycles(graph)
    print(f"\n# import cycles in vllm_doctor/ (function-level imports counted): {len(found)}")
    for cycle in found:
        print(f"  {cycle}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
