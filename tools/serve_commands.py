"""The `vllm serve` commands in a text (documentation, a script, a CI pipeline), as the
calibration tools read them: a ``vllm serve`` or ``python -m vllm.entrypoints.openai.api_server``
line with its backslash continuations, cut at the shell's control operators and comments,
left out when it holds a placeholder (``<model>``, ``$MODEL``, ``...``) or names no real
model. Used by tools/calibration_corpus.py and tools/calibration_repository.py.
"""

from __future__ import annotations

import re

_START = re.compile(
    r"(?:^|[\s`(])((?:vllm serve|python3? -m vllm\.entrypoints\.openai\.api_server)"
    r"(?=\s|$).*)"
)
_PROMPT = re.compile(r"^\s*(?:\$|#|>>>)\s+")
_CUT = re.compile(r"\s(?:&&|\|\||;|\||&|>|>>|2>&1|2>|1>)(?:\s|$)|\s#|`|\"\"\"|'''")
PLACEHOLDER = re.compile(r"<[^>]*>|\$\{?[A-Za-z_]|\.\.\.|…|\[[a-z_ ]+\]|\{[a-z_]+\}")


def _runnable(command: str) -> bool:
    """A command as written can run: it names a real model (a hub id ``org/name``, not
    ``/path/to/model``) and has no placeholder; a line of prose that mentions `vllm serve`
    names none."""
    if PLACEHOLDER.search(command):
        return False
    words = command.split()
    rest = words[2:] if words[:2] == ["vllm", "serve"] else words[3:]
    model = next((w for w in rest if not w.startswith("-")), None) if rest else None
    if words[:2] != ["vllm", "serve"]:
        model = next((rest[i + 1] for i, w in enumerate(rest[:-1]) if w == "--model"), None)
    elif rest and rest[0].startswith("-"):
        model = None  # options first: the model is not where `vllm serve` takes it
    return (
        bool(model)
        and "/" in model
        and "path/to" not in model
        and re.fullmatch(r"[\w.@:/+-]+", model) is not None
    )


def extract_commands(text: str) -> list[str]:
    """The runnable serve commands in ``text``, in order, each once."""
    lines = text.splitlines()
    found: list[str] = []
    i = 0
    while i < len(lines):
        match = _START.search(_PROMPT.sub("", lines[i]))
        if not match:
            i += 1
            continue
        parts = [match.group(1)]
        while parts[-1].rstrip().endswith("\\") and i + 1 < len(lines):
            parts[-1] = parts[-1].rstrip().rstrip("\\")
            i += 1
            parts.append(_PROMPT.sub("", lines[i]).strip())
        i += 1
        command = " ".join(p.strip() for p in parts if p.strip())
        cut = _CUT.search(command)
        if cut:
            command = command[: cut.start()]
        command = " ".join(command.split())
        if not _runnable(command):
            continue
        if command.count("'") % 2 or command.count('"') % 2:
            continue  # a quote the excerpt cut
        if command not in found:
            found.append(command)
    return found
