"""facts/toolkit.py: the nvcc FlashInfer's JIT finds (its get_cuda_path lookup), on a
directory tree built here, and what a collect-env report's "CUDA runtime version" says."""

from __future__ import annotations

from pathlib import Path

from vllm_doctor.facts.toolkit import find_nvcc, nvcc_from_report


def _nvcc(root: Path, home: str) -> None:
    path = root / home.lstrip("/") / "bin" / "nvcc"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)


def test_cuda_home_decides_even_without_nvcc_there(tmp_path):
    _nvcc(tmp_path, "/usr/local/cuda")
    found, how = find_nvcc({"CUDA_HOME": "/opt/empty", "PATH": ""}, tmp_path)
    assert found is False and "CUDA_HOME" in how and "/opt/empty/bin/nvcc does not exist" in how


def test_default_cuda_folder_without_compiler_is_a_runtime_image(tmp_path):
    (tmp_path / "usr/local/cuda/lib64").mkdir(parents=True)
    found, how = find_nvcc({"PATH": str(tmp_path / "nothing")}, tmp_path)
    assert found is False and "/usr/local/cuda/bin/nvcc does not exist" in how
    _nvcc(tmp_path, "/usr/local/cuda")
    assert find_nvcc({"PATH": str(tmp_path / "nothing")}, tmp_path)[0] is True


def test_report_runtime_version_is_nvccs_release():
    found, said = nvcc_from_report("CUDA runtime version         : 13.0.88\n")
    assert found is True and "13.0.88" in said
    found, said = nvcc_from_report("CUDA runtime version: Could not collect\n")
    assert found is None and "Could not collect" in said
    assert nvcc_from_report("PyTorch version: 2.9.1\n")[0] is None
