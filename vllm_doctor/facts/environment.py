"""Environment variables that change how vLLM, NCCL, CUDA, torch and the HF hub behave.

Every variable whose name starts with one of ``PREFIXES`` becomes ``env.<NAME>``. Values of
variables whose names look like secrets (``SECRET_WORDS``, in any case: the words vLLM's
collect-env skips, plus key) are replaced by ``<redacted>``: the fact that they are set stays
visible, their value never reaches a report. The report parser and the serve line (``KEY=VALUE
vllm serve``, ``--hf-token X``) use the same test.
"""

from __future__ import annotations

import os
from typing import Mapping

from vllm_doctor.facts.model import Facts, Source

PREFIXES = ("VLLM_", "NCCL_", "CUDA_", "TORCH_", "PYTORCH_", "HF_")
SECRET_WORDS = ("token", "key", "secret", "password", "passwd", "credential", "api", "access")
REDACTED = "<redacted>"


def is_secret(name: str) -> bool:
    lowered = name.lower()
    return any(word in lowered for word in SECRET_WORDS)


def relevant_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables of interest, secrets redacted, sorted by name."""
    return {
        name: (REDACTED if is_secret(name) else value)
        for name, value in sorted(environ.items())
        if name.startswith(PREFIXES)
    }


def collect_environment(facts: Facts, environ: Mapping[str, str] | None = None) -> None:
    env = os.environ if environ is None else environ
    for name, value in relevant_environment(env).items():
        facts.set(f"env.{name}", value, Source.ENV)
