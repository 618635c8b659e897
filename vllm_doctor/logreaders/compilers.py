"""torch.compile, Inductor and Triton failures inside vLLM: what failed and the setting of the
user's release that avoids it.

A corrupted compile cache (vLLM's own message), Triton's bundled ``ptxas`` not knowing the
GPU's architecture, and any other failure inside ``torch/_inductor`` or ``torch/_dynamo``. The
settings that turn torch.compile off are the release's own (checked in the wheels): the
compilation config's ``level`` 0 in 0.8.0–0.11.2, ``-O0`` / ``mode`` 0 from 0.12.0, and
``--enforce-eager`` also from 0.31.0.
"""

from __future__ import annotations

import re

from vllm_doctor.logreaders import LogReading, judged_release

_CACHE = re.compile(
    r"failed to get the hash of the compiled graph|"
    r"vLLM failed to compile the model\. The most likely reason"
)
_PTXAS = re.compile(
    r"ptxas fatal\s*: Value '(sm_\d+\w?)' is not defined for option 'gpu-name'|"
    r"ptxas'[^\n]{0,200}'--gpu-name=(sm_\d+\w?)'[^\n]{0,300}returned non-zero exit status"
)
_INDUCTOR = re.compile(
    r"torch[\\/]_inductor[\\/]|torch\._inductor\.exc\.\w+|InductorError|"
    r"BackendCompilerFailed|torch[\\/]_dynamo[\\/]"
)
_ERROR = re.compile(
    r"^(?:[^\n]{0,200}\] )?(?:[\w.]+(?:Error|Exception|Failed)\b)[^\n]{0,300}", re.MULTILINE
)


def _release_index(release: str) -> int:
    from vllm_doctor.knowledge import load

    return load("releases").releases.index(release)


def compile_off(release: str | None) -> list[str]:
    """The serve options that turn torch.compile off in a release (all, when unknown)."""
    old = "--compilation-config '{\"level\": 0}'   # vLLM 0.8.0–0.11.2: no torch.compile"
    new = "-O0   # vLLM 0.12.0 and later: no torch.compile, no CUDA graphs (or --compilation-config '{\"mode\": 0}')"
    eager = "--enforce-eager   # vLLM 0.31.0 and later: also turns torch.compile off"
    if release is None:
        return [new, old]
    if _release_index(release) < _release_index("0.12.0"):
        return [old]
    return [new] + ([eager] if _release_index(release) >= _release_index("0.31.0") else [])


def read(text: str, version: str | None) -> LogReading | None:
    release = judged_release(version)
    where = f" (vLLM {release})" if release else " (pass --vllm-version for your release's one)"
    if _CACHE.search(text):
        return LogReading(
            "an earlier torch.compile run failed half-way and left a broken artifact in vLLM's "
            "compile cache; this run loads it",
            [
                "rm -rf ~/.cache/vllm/torch_compile_cache   # or $VLLM_CACHE_ROOT/torch_compile_cache",
                "or VLLM_DISABLE_COMPILE_CACHE=1 vllm serve ...   # compile afresh every start",
            ],
            [
                "vLLM: failed to get the hash of the compiled graph (a corrupted compile cache, "
                "vllm/compilation/compiler_interface.py)"
            ],
        )
    ptxas = _PTXAS.search(text)
    if ptxas:
        arch = ptxas.group(1) or ptxas.group(2)
        return LogReading(
            f"the ptxas that Triton ships does not know {arch}, the GPU's architecture: Triton "
            "kernels cannot be compiled for it",
            [
                "export TRITON_PTXAS_PATH=/usr/local/cuda/bin/ptxas   # a CUDA toolkit that knows "
                f"{arch}",
                "or upgrade triton to a release built with such a ptxas",
            ],
            [f"Triton's ptxas refused --gpu-name={arch}"],
        )
    if not _INDUCTOR.search(text):
        return None
    error = _ERROR.findall(text)
    return LogReading(
        "torch.compile (Dynamo/Inductor) failed while vLLM compiled the model: a torch bug or one "
        "of vLLM's compilation passes, not the model or the GPU",
        [f"vllm serve ... {option}" for option in compile_off(release)]
        + [
            "if it started after an upgrade or an earlier failed start: rm -rf "
            "~/.cache/vllm/torch_compile_cache"
        ],
        [
            "the traceback runs through torch/_inductor or torch/_dynamo"
            + (f"; last error: {error[-1].strip()[:200]}" if error else "")
            + where
        ],
    )
