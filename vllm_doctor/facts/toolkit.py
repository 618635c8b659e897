"""Whether FlashInfer's JIT finds a CUDA compiler (``platform.nvcc_found``).

FlashInfer builds a kernel it does not ship (its sampler's ``cached_ops/sampling`` module,
without flashinfer-jit-cache) with ninja and ``<cuda_home>/bin/nvcc``, where ``cuda_home`` is
``get_cuda_path()`` of ``flashinfer/jit/cpp_ext.py`` (0.5.2-0.7.2, read in the wheels):
``CUDA_HOME``, else ``CUDA_PATH``, else the folder above ``which nvcc``'s ``bin``, else
``/usr/local/cuda`` when that exists ("Could not find nvcc and default cuda_home=... doesn't
exist" when it does not). A CUDA runtime image has ``/usr/local/cuda`` without ``bin/nvcc``:
the build then fails in the shell ("/usr/local/cuda/bin/nvcc: not found").

Live: that lookup on this machine (files only; nvcc is not run). A collect-env report:
torch's ``collect_env`` prints ``nvcc --version``'s release as "CUDA runtime version"
(``get_running_cuda_version``), so a version there is an nvcc on PATH; "Could not collect"
says only that PATH has none (CUDA_HOME or /usr/local/cuda may still hold one).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping
from pathlib import Path

PATH = "platform.nvcc_found"
_RUNTIME_LINE = re.compile(r"^\s*CUDA runtime version\s*:\s*(?P<value>.*?)\s*$", re.MULTILINE)
_VERSION = re.compile(r"^\d+\.\d+(?:\.\d+)?$")


def find_nvcc(environ: Mapping[str, str], root: Path = Path("/")) -> tuple[bool, str]:
    """(found, how) for the nvcc FlashInfer's JIT would run on this machine."""
    home = environ.get("CUDA_HOME") or environ.get("CUDA_PATH")
    if home:
        how = f"CUDA_HOME/CUDA_PATH={home}"
    else:
        which = shutil.which("nvcc", path=environ.get("PATH"))
        if which:
            home, how = os.path.dirname(os.path.dirname(which)), f"nvcc on PATH ({which})"
        else:
            home, how = "/usr/local/cuda", "no CUDA_HOME, no nvcc on PATH: /usr/local/cuda"
    nvcc = root / home.lstrip("/") / "bin" / "nvcc"
    found = nvcc.is_file()
    return found, f"{how}: {home}/bin/nvcc " + ("exists" if found else "does not exist")


def nvcc_from_report(text: str) -> tuple[bool | None, str]:
    """(True, line) when the report's "CUDA runtime version" is nvcc's release; (None, why)
    when it says nothing about nvcc."""
    match = _RUNTIME_LINE.search(text[:2_000_000])
    value = match.group("value") if match else ""
    if _VERSION.match(value):
        return True, f"CUDA runtime version: {value} (collect-env runs nvcc --version)"
    if match:
        return None, (
            f"the report's CUDA runtime version says `{value or 'nothing'}`: no nvcc on PATH, "
            "but FlashInfer also looks in CUDA_HOME and /usr/local/cuda (run the doctor in the "
            "serving environment)"
        )
    return None, "the report has no CUDA runtime version line"
