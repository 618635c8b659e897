"""Reader: a serve command pasted as text (``check --serve '...'``, a script's line)."""

from __future__ import annotations

from vllm_doctor.serveline.line import ServeLine
from vllm_doctor.serveline.parser import parse_serve_argv
from vllm_doctor.serveline.words import _COMMAND_RE, command_words


def parse_serve_string(text: str) -> ServeLine:
    """Parse a serve command pasted as text: shell quoting, ``\\`` line continuations,
    ``#`` comments; when several commands are pasted, the `vllm serve` one is used. Python
    that calls vLLM's ``LLM(...)`` (a script, ``python -c "..."``) is read as the serve line
    its keywords amount to (serveline/python_call.py)."""
    from vllm_doctor.serveline.python_call import (
        is_llm_call,
        llm_call_source,
        llm_call_words,
        script_environment,
    )

    if is_llm_call(text) and not _COMMAND_RE.search(text):
        source = llm_call_source(text)
        words, not_read = llm_call_words(source)
        line = parse_serve_argv(words)
        line.not_read.update(not_read)
        line.script_env = script_environment(source)  # the script's os.environ, not this one's
        return line
    return parse_serve_argv(command_words(text))
