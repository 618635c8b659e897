"""platform.c_compiler_found: whether Triton finds a host C compiler ($CC, else gcc or clang
on PATH, as triton/runtime/build.py looks), read here or stated with --platform cc / no-cc."""

from __future__ import annotations

import os
from pathlib import Path

from vllm_doctor.facts import platform
from vllm_doctor.facts.model import Facts, Source


def executable(root: Path, path: str) -> None:
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("#!/bin/sh\n")
    os.chmod(target, 0o755)


def test_gcc_on_path(tmp_path):
    executable(tmp_path, "/usr/bin/gcc")
    found, how = platform.find_c_compiler({"PATH": "/usr/local/bin:/usr/bin"}, tmp_path)
    assert found is True and how == "gcc on PATH (/usr/bin/gcc)"


def test_clang_when_no_gcc(tmp_path):
    executable(tmp_path, "/opt/llvm/bin/clang")
    found, how = platform.find_c_compiler({"PATH": "/usr/bin:/opt/llvm/bin"}, tmp_path)
    assert found is True and "clang" in how


def test_cc_variable_wins(tmp_path):
    assert platform.find_c_compiler({"CC": "/opt/cc", "PATH": "/usr/bin"}, tmp_path) == (
        True,
        "CC=/opt/cc",
    )


def test_none_on_path(tmp_path):
    executable(tmp_path, "/usr/bin/python3")
    (tmp_path / "usr/bin/gcc").write_text("not executable")
    found, how = platform.find_c_compiler({"PATH": "/usr/bin"}, tmp_path)
    assert found is False and "neither gcc nor clang" in how


def test_collected_with_the_platform(tmp_path):
    (tmp_path / "proc/sys/kernel").mkdir(parents=True)
    (tmp_path / "proc/sys/kernel/osrelease").write_text("6.8.0-60-generic\n")
    facts = Facts()
    platform.collect_platform(facts, {"HOME": str(tmp_path), "PATH": "/usr/bin"}, tmp_path)
    fact = facts.get("platform.c_compiler_found")
    assert fact.value is False and fact.source == Source.MACHINE


def test_stated_words():
    facts = Facts()
    platform.apply_stated_platform(facts, ["no-cc"])
    assert facts.value("platform.c_compiler_found") is False
    facts = Facts()
    platform.apply_stated_platform(facts, ["cc", "container"])
    assert facts.value("platform.c_compiler_found") is True
