"""The README's two set-up lines: `.ci/run` runs exactly the test line, CONTRIBUTING repeats
it, and the text beside it says what it installs from PyPI alone and how to get the CPU
build of torch instead."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def bash_blocks(text: str) -> list[str]:
    return [b.strip() for b in re.findall(r"```bash\n(.*?)```", text, re.DOTALL)]


def test_ci_runs_the_readme_test_line_and_contributing_repeats_it():
    readme = (ROOT / "README.md").read_text()
    first_section = readme.split("\n---\n", 1)[0]
    try_it, test_line, *_ = bash_blocks(first_section)
    assert try_it.startswith("pip install -e . && vllm-doctor check --example")
    assert test_line.startswith("pip install torch==2.13.0 && pip install -e")
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()
    assert ci[-1] == test_line
    assert test_line in (ROOT / "CONTRIBUTING.md").read_text()


def test_the_readme_says_what_the_test_line_installs_and_how_to_get_the_cpu_build():
    first_section = (ROOT / "README.md").read_text().split("\n---\n", 1)[0]
    words = " ".join(first_section.split())
    assert "From PyPI alone it is torch's **CUDA 13 build**" in words
    assert "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu" in words
    assert "`.ci/run` runs exactly that line" in words
