"""Reader: a serve command pasted as text (``check --serve '...'``, a script's line)."""

from __future__ import annotations

from vllm_doctor.serveline.line import ServeLine
from vllm_doctor.serveline.parser import parse_serve_argv
from vllm_doctor.serveline.words import command_words


def parse_serve_string(text: str) -> ServeLine:
    """Parse a serve command pasted as text: shell quoting, ``\\`` line continuations,
    ``#`` comments; when several commands are pasted, the `vllm serve` one is used."""
    return parse_serve_argv(command_words(text))
