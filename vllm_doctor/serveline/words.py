"""The shell word reader: a pasted serve command as the shell splits it — ``\\`` continuations,
quotes, comments, redirections, several commands (``export A=1 && vllm serve ...``), wrappers
(``sudo``, ``env``, ``nohup``), ``KEY=VALUE`` prefixes and the vLLM entry points.
"""

from __future__ import annotations

import os
import re
import shlex

from vllm_doctor.errors import InputError
from vllm_doctor.serveline import SERVE_LINE

_ENV_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


_PY_RE = re.compile(r"^python(\d+(\.\d+)*)?$")


_API_SERVER_MODULES = {"vllm.entrypoints.openai.api_server", "vllm.entrypoints.api_server"}


_NEG_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")


def _looks_like_flag(token: str) -> bool:
    return token.startswith("-") and token != "-" and not _NEG_NUMBER.match(token)


# commands that run the next word as a command, with their options that take a value
_WRAPPERS: dict[str, frozenset[str]] = {
    "sudo": frozenset(
        {
            "-u",
            "-g",
            "-C",
            "-D",
            "-h",
            "-p",
            "-r",
            "-t",
            "-U",
            "-T",
            "--user",
            "--group",
            "--chdir",
            "--prompt",
            "--host",
            "--role",
            "--type",
            "--other-user",
            "--command-timeout",
            "--close-from",
        }
    ),
    "env": frozenset({"-u", "-C", "-S", "--unset", "--chdir", "--split-string"}),
    "nohup": frozenset(),
    "time": frozenset(),
    "exec": frozenset({"-a"}),
    "command": frozenset(),
    "nice": frozenset({"-n", "--adjustment"}),
    "stdbuf": frozenset({"-i", "-o", "-e"}),
    "export": frozenset(),
}


def _split_commands(text: str) -> list[str]:
    """Shell text cut at the control operators outside quotes (``&&``, ``||``, ``;``, ``|``,
    ``&``; not the ``&`` of a redirection like ``2>&1``)."""
    parts: list[str] = []
    begin, skip_to = 0, -1
    for i, ch in _bare_chars(text):
        if i <= skip_to or ch not in ";&|" or (ch == "&" and i and text[i - 1] in "<>"):
            continue
        parts.append(text[begin:i])
        skip_to = i + 1 if ch != ";" and text[i + 1 : i + 2] in ("&", "|") else i  # && and ||
        begin = skip_to + 1
    parts.append(text[begin:])
    return parts


# [n]op or {name}op, or &> / &>>; here-strings and here-documents first (their '<' prefixes)
_REDIRECTION = re.compile(
    r"&>>?|(?:\{[A-Za-z_][A-Za-z0-9_]*\}|\d*)(?:<<<|<<-?|>>|>&|>\||<&|<>|>|<)"
)


# `vllm serve <model> ...` copied from documentation: a placeholder, not a redirection
_PLACEHOLDER_WORD = re.compile(r"<[A-Za-z][\w.:/@-]*>(?=\s|$)")


def _bare_chars(text: str, start: int = 0):
    """(index, character) of each character from ``start`` that is neither quoted nor
    escaped (the quote characters themselves are not given)."""
    quote: str | None = None
    i, n = start, len(text)
    while i < n:
        ch = text[i]
        if ch == "\\" and quote != "'":
            i += 2
            continue
        if quote is not None:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        else:
            yield i, ch
        i += 1


def _group_end(text: str, start: int) -> int:
    """The index after the ``)`` that closes the ``(`` at ``text[start]`` (quotes and escapes
    inside are skipped), or the end of the text."""
    depth = 0
    for i, ch in _bare_chars(text, start):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i + 1
    return len(text)


def _target_end(text: str, i: int) -> int:
    """The index after the word a redirection operator applies to (its quotes, escapes and a
    process substitution ``>(tee log)`` included)."""
    while i < len(text) and text[i] in " \t":
        i += 1
    if text.startswith(("<(", ">("), i):
        return _group_end(text, i + 1)
    for j, ch in _bare_chars(text, i):
        if ch.isspace() or ch in ";&|<>":
            return j
    return len(text)


def _drop_redirections(text: str) -> str:
    """Shell text without its redirections outside quotes (``> log.txt``, ``2>&1``,
    ``>>out.log``, ``&> all.log``, ``< input``, ``> >(tee log)``, ``<<<``, ``{fd}>file``): they
    belong to the shell, not to vLLM. A command substitution stays one word as written (its value
    is not known), a process substitution becomes the path the shell passes (``/dev/fd/63``);
    ``<model>`` as a word is a placeholder copied from documentation, kept as written."""
    out: list[str] = []
    quote: str | None = None
    i, n = 0, len(text)

    def at_word_start() -> bool:
        return not out or out[-1][-1:].isspace()

    while i < n:
        ch = text[i]
        if ch == "\\" and quote != "'" and i + 1 < n:
            out.append(text[i : i + 2])
            i += 2
            continue
        if quote is not None:
            quote = None if ch == quote else quote
            out.append(ch)
            i += 1
            continue
        if ch in "'\"":
            quote = ch
        elif ch == "`":  # command substitution: its value is not known; one word as written
            end = text.find("`", i + 1)
            end = n if end < 0 else end + 1
            out.append(shlex.quote(text[i:end]))
            i = end
            continue
        elif text.startswith("$(", i):
            end = _group_end(text, i + 1)
            out.append(shlex.quote(text[i:end]))
            i = end
            continue
        elif text.startswith(("<(", ">("), i):  # process substitution: the shell passes a path
            i = _group_end(text, i + 1)
            out.append("/dev/fd/63")
            continue
        elif ch == "<" and at_word_start() and (placeholder := _PLACEHOLDER_WORD.match(text, i)):
            end = placeholder.end()
            out.append(text[i:end])
            i = end
            continue
        elif (
            ch in "<>"
            or text.startswith("&>", i)
            or ((ch.isdigit() or ch == "{") and at_word_start())
        ):
            match = _REDIRECTION.match(text, i)
            if match:
                i = _target_end(text, match.end())
                out.append(" ")
                continue
        out.append(ch)
        i += 1
    return "".join(out)


def _command_words(command: str) -> list[str] | None:
    """The words of the `vllm serve` command in a pasted line of several commands:
    ``export A=1 && B=2 vllm serve ...`` gives ``A=1 B=2 vllm serve ...`` (variables exported
    before it are its environment); None when the line is one command or none is found."""
    parts = _split_commands(command)
    if len(parts) <= 1:
        return None
    try:
        commands = [shlex.split(p, comments=True, posix=True) for p in parts]
    except ValueError:
        return None
    commands = [c for c in commands if c]
    chosen = next(
        (
            i
            for i, c in enumerate(commands)
            if any(
                os.path.basename(w) == "vllm" or w in _API_SERVER_MODULES or w == "serve" for w in c
            )
        ),
        None,
    )
    if chosen is None:
        return None
    exported = [w for c in commands[:chosen] if c[0] == "export" for w in c[1:] if _ENV_RE.match(w)]
    return exported + commands[chosen]


def _strip_prefix(
    tokens: list[str], wrappers: list[tuple[str, list[str], int]] | None = None
) -> tuple[list[str], list[str], str]:
    """(env words, serve arguments, entrypoint) from a full command; ``wrappers`` (if given)
    receives each wrapper skipped: its name, its option words and how many env words came
    before it."""
    i = 0
    env_words: list[str] = []
    wrapped = any(
        os.path.basename(t) in ("vllm", "serve") or _PY_RE.match(os.path.basename(t))
        for t in tokens[1:]
    )
    while i < len(tokens):
        word = tokens[i]
        if _ENV_RE.match(word) and not word.startswith("-"):
            env_words.append(word)
            i += 1
            continue
        wrapper = os.path.basename(word)
        if not (wrapped and wrapper in _WRAPPERS):
            break
        # `sudo -E -u vllm env -i HF_TOKEN=x nohup vllm serve ...`: skip the wrapper and its
        # options (and the values of those that take one)
        i += 1
        options: list[str] = []
        while i < len(tokens) and tokens[i].startswith("-"):
            option = tokens[i]
            options.append(option)
            i += 1
            if option == "--":
                break
            if option in _WRAPPERS[wrapper] and "=" not in option and i < len(tokens):
                options.append(tokens[i])
                i += 1
        if wrappers is not None:
            wrappers.append((wrapper, options, len(env_words)))
    rest = tokens[i:]
    if not rest:
        return env_words, [], "serve"
    first = os.path.basename(rest[0])
    if first == "vllm":
        if len(rest) < 2 or rest[1] != "serve":
            sub = rest[1] if len(rest) > 1 else ""
            raise InputError(SERVE_LINE, f"not a `vllm serve` line: `vllm {sub}`".rstrip())
        return env_words, rest[2:], "serve"
    if _PY_RE.match(first) and len(rest) >= 3 and rest[1] == "-m":
        module = rest[2]
        if module in _API_SERVER_MODULES:
            return env_words, rest[3:], "api_server"
        if (
            module in ("vllm.entrypoints.cli.main", "vllm")
            and len(rest) >= 4
            and rest[3] == "serve"
        ):
            return env_words, rest[4:], "serve"
        raise InputError(SERVE_LINE, f"not a vLLM server command: python -m {module}")
    if rest[0] == "serve":
        return env_words, rest[1:], "serve"
    if wrapped and first in _RUNS_ELSEWHERE:
        # its vLLM, packages and environment are another machine's or an image's: this
        # machine's would stand for them, and the runner's words would be read as vLLM's
        raise InputError(
            SERVE_LINE,
            f"`{first}` runs `vllm serve` {_RUNS_ELSEWHERE[first]}, whose facts the line does "
            "not give: check the `vllm serve ...` line itself there, or here with --report "
            "collect-env.txt from there (or --elsewhere)",
        )
    if wrapped and _environment_runner(rest):
        runner = " ".join(rest[:1] if first == "uvx" else [first, rest[1]])
        # its vLLM and packages are that environment's: this interpreter's would stand for them
        raise InputError(
            SERVE_LINE,
            f"`{runner}` runs `vllm serve` in another Python environment, whose packages the "
            f"line does not give: check inside it (`{runner} ... vllm-doctor check -- vllm "
            "serve ...`), or here with --report collect-env.txt from it (or --elsewhere)",
        )
    return env_words, rest, "serve"


# tools that run a command in a Python environment of their own (a project's, a named one)
_ENVIRONMENT_RUNNERS = frozenset(
    {"uv", "conda", "mamba", "micromamba", "poetry", "pixi", "pipx", "hatch", "pdm"}
)


def _environment_runner(rest: list[str]) -> bool:
    """``uv run ...``, ``conda run -n X ...``, ``uvx ...``: a runner of another environment."""
    first = os.path.basename(rest[0])
    return first == "uvx" or (first in _ENVIRONMENT_RUNNERS and rest[1:2] == ["run"])


# commands that run the command they are given on another machine or in a container image
_RUNS_ELSEWHERE = {
    "ssh": "on another machine",
    "srun": "on a Slurm node",
    "kubectl": "in a pod",
    "apptainer": "in an Apptainer image",
    "singularity": "in a Singularity image",
    "enroot": "in an enroot container",
}


MAX_LINE_CHARS = 4 * 1024 * 1024


def _logical_lines(text: str) -> list[str]:
    """Split shell text into command lines: backslash-newline continues a line (outside
    single quotes), a newline inside quotes stays part of the word."""
    lines: list[str] = []
    buf: list[str] = []
    quote: str | None = None
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == "\\" and quote != "'" and i + 1 < n:
            nxt = text[i + 1]
            if nxt == "\n" or (nxt == "\r" and i + 2 < n and text[i + 2] == "\n"):
                i += 2 if nxt == "\n" else 3
                buf.append(" ")
                continue
            buf.append(ch)
            buf.append(nxt)
            i += 2
            continue
        if quote is None and ch in "'\"":
            quote = ch
        elif quote is not None and ch == quote:
            quote = None
        if ch == "\n" and quote is None:
            lines.append("".join(buf))
            buf = []
        else:
            buf.append(ch)
        i += 1
    lines.append("".join(buf))
    return [ln for ln in lines if ln.strip(" \t\r")]


_COMMAND_RE = re.compile(
    r"(^|\s)(vllm\s+serve|vllm\.entrypoints\.(openai\.)?api_server|"
    r"vllm\.entrypoints\.cli\.main)(\s|$)"
)


def command_words(text: str) -> list[str]:
    """The words of the serve command in shell text (see ``parse_serve_string``)."""
    if not isinstance(text, str):
        raise InputError(SERVE_LINE, "expected text")
    if "\x00" in text:
        raise InputError(SERVE_LINE, "contains NUL bytes")
    if len(text) > MAX_LINE_CHARS:
        raise InputError(
            SERVE_LINE, f"{len(text):,} characters; at most {MAX_LINE_CHARS:,} are read"
        )
    lines = [ln.strip(" \t\r") for ln in _logical_lines(text)]
    lines = [ln.removeprefix("$ ") for ln in lines]
    lines = [ln for ln in lines if ln and not ln.startswith("#")]
    if not lines:
        raise InputError(SERVE_LINE, "empty serve line")
    chosen = next((ln for ln in lines if _COMMAND_RE.search(ln)), None)
    command = _drop_redirections(chosen if chosen is not None else " ".join(lines))
    try:
        words = shlex.split(command, comments=True, posix=True)
    except ValueError as err:
        raise InputError(SERVE_LINE, f"cannot split into words: {err}") from None
    if not words:
        raise InputError(SERVE_LINE, "empty serve line")
    return _command_words(command) or words
