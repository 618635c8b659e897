"""Environment variables that change how vLLM, NCCL, CUDA, torch and the HF hub behave.

Every variable whose name starts with one of ``PREFIXES`` becomes ``env.<NAME>``. Values of
variables whose names look like secrets (``vllm_doctor.redact.is_secret_name``) are replaced
by ``<redacted>``: the fact that they are set stays visible, their value never reaches a
report; other values lose any credentials (``https://user:PASS@host``) and token-looking
words. The report parser and the serve line use the same module.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from vllm_doctor.facts.model import Facts, Source
from vllm_doctor.redact import REDACTED, is_secret_name, redact_text

PREFIXES = ("VLLM_", "NCCL_", "CUDA_", "TORCH_", "PYTORCH_", "HF_")
is_secret = is_secret_name  # the name other modules know it by


def relevant_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables of interest, secrets redacted, sorted by name (a secret's value is
    remembered: hidden wherever else it turns up)."""
    from vllm_doctor.redact import remember_secret

    for name, value in environ.items():
        if name.startswith(PREFIXES) and is_secret(name):
            remember_secret(value)
    return {
        name: (REDACTED if is_secret(name) else redact_text(value))
        for name, value in sorted(environ.items())
        if name.startswith(PREFIXES)
    }


def collect_environment(facts: Facts, environ: Mapping[str, str] | None = None) -> None:
    env = os.environ if environ is None else environ
    for name, value in relevant_environment(env).items():
        facts.set(f"env.{name}", value, Source.ENV)
