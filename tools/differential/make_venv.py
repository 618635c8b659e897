#!/usr/bin/env python3
"""Make a throwaway virtual environment in which one vLLM release's own argument parser and
config classes can be imported without a GPU: ``/work/venvs/diff-vllm-<release>``.

The environment sees the system's CPU torch (``--system-site-packages``; no CUDA torch, no
NVIDIA libraries: they are large and no GPU is here), gets ``vllm==<release>`` without its
dependencies, then the release's own ``Requires-Dist`` minus the GPU kernel packages (the
list below), with torch held to the system's build by a constraint. What vLLM reads while
parsing and validating the serve line is pure Python; the kernels are never loaded.

    python tools/differential/make_venv.py 0.27.1 [--root /work/venvs] [--wheels DIR]

Prints the environment's path; exit 1 when it cannot be made (the reason on stderr).
Never run this in the doctor's own environment, and never on the device machine.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import venv
from pathlib import Path

# GPU kernels, CUDA libraries and what only a GPU run loads: left out (torch comes from the
# system's CPU build)
SKIP = re.compile(
    r"^(torch|torchaudio|torchvision|torchcodec|xformers|triton|flashinfer.*|nvidia-.*|"
    r"nvtx|cupy.*|ray|deepspeed|pynvvideocodec|apache-tvm-ffi|tilelang|quack-kernels|"
    r"tokenspeed-mla|humming-kernels|fastsafetensors|vllm-flash-attn|flash-attn|"
    r"cuda-python|cuda-bindings|nixl.*|intel-extension.*|mooncake.*|deep[-_]?gemm|"
    r"deep[-_]?ep|pplx-kernels|kernels|sgl-kernel|flash-mla)$",
    re.IGNORECASE,
)


def requirements(metadata: str) -> list[str]:
    """The release's unconditional requirements (extras left out), GPU packages skipped."""
    out = []
    for line in metadata.splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        req = line.split(":", 1)[1].strip()
        if "extra ==" in req:
            continue
        name = re.split(r"[\s\[<>=!~;(]", req, maxsplit=1)[0]
        if SKIP.match(name):
            continue
        out.append(req)
    return out


def system_torch() -> str:
    import importlib.metadata

    return importlib.metadata.version("torch").split("+")[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("release")
    parser.add_argument("--root", type=Path, default=Path("/work/venvs"))
    parser.add_argument("--wheels", type=Path, help="directory with the release wheel")
    args = parser.parse_args()
    env = args.root / f"diff-vllm-{args.release}"
    python = env / "bin" / "python"
    if not python.exists():
        venv.EnvBuilder(system_site_packages=True, with_pip=True, clear=True).create(env)
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    wheel = None
    if args.wheels:
        wheel = next(iter(sorted(args.wheels.glob(f"vllm-{args.release}-*.whl"))), None)
    target = str(wheel) if wheel else f"vllm=={args.release}"
    run = subprocess.run([*pip, "--no-deps", target], capture_output=True, text=True)
    if run.returncode:
        print(f"pip install vllm=={args.release}: {run.stderr.strip()[-600:]}", file=sys.stderr)
        return 1
    metadata = subprocess.run(
        [
            str(python),
            "-c",
            "import importlib.metadata as m; print(m.metadata('vllm').as_string())",
        ],
        capture_output=True,
        text=True,
    ).stdout
    reqs = requirements(metadata)
    constraint = env / "constraints.txt"
    constraint.write_text(f"torch=={system_torch()}\n", encoding="utf-8")
    run = subprocess.run([*pip, "-c", str(constraint), *reqs], capture_output=True, text=True)
    if run.returncode:
        # a requirement that pins another torch: install the others, that one without deps
        print(f"resolver: {run.stderr.strip()[-400:]}", file=sys.stderr)
        for req in reqs:
            one = subprocess.run([*pip, "-c", str(constraint), req], capture_output=True, text=True)
            if one.returncode:
                subprocess.run([*pip, "--no-deps", req], capture_output=True, text=True)
    print(env)
    return 0


if __name__ == "__main__":
    sys.exit(main())
