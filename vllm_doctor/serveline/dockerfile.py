"""A Dockerfile's final stage as a ``manifest.Target``: FROM, ENV, RUN pip install vllm,
ENTRYPOINT and CMD (what ``docker run`` appends left open)."""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Iterator

from vllm_doctor.serveline.images import is_vllm_image, pip_vllm_version
from vllm_doctor.serveline.target import (
    IMAGE_ENTRYPOINT,
    MORE_ARGUMENTS,
    Placed,
    Target,
    _Refs,
    _runs_vllm,
    drop_unresolved,
    resolve_command,
)


def _instructions(text: str) -> Iterator[tuple[int, str, str]]:
    """(line, INSTRUCTION, arguments) with ``\\`` continuations joined and comments dropped."""
    start = 0
    parts: list[str] = []
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if not parts and (not stripped or stripped.startswith("#")):
            continue
        if parts and stripped.startswith("#"):
            continue
        if not parts:
            start = number
        if stripped.endswith("\\"):
            parts.append(stripped[:-1])
            continue
        parts.append(stripped)
        joined = " ".join(parts)
        parts = []
        head, _, rest = joined.partition(" ")
        yield start, head.upper(), rest.strip()
    if parts:
        joined = " ".join(parts)
        head, _, rest = joined.partition(" ")
        yield start, head.upper(), rest.strip()


def _exec_or_shell(arguments: str) -> tuple[list[str], bool]:
    """A CMD/ENTRYPOINT as words: the JSON (exec) form as is, the shell form as sh -c."""
    if arguments.startswith("["):
        try:
            words = json.loads(arguments)
            if isinstance(words, list) and all(isinstance(w, str) for w in words):
                return words, True
        except ValueError:
            pass
    return ["/bin/sh", "-c", arguments], False


def dockerfile_targets(name: str, text: str) -> Iterator[Target]:
    args: dict[str, str] = {}
    image: Placed | None = None
    env: dict[str, Placed] = {}
    entry: tuple[list[str], int] | None = None
    cmd: tuple[list[str], int] | None = None
    install: Placed | None = None
    started = False
    for line, op, rest in _instructions(text):
        if op == "ARG":
            key, _, value = rest.partition("=")
            if not started and value:
                args[key.strip()] = value.strip().strip('"')
        elif op == "FROM":
            started = True
            ref = rest.split()[0] if rest.split() else ""
            ref = re.sub(
                r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", lambda m: args.get(m.group(1), m.group(0)), ref
            )
            image, env, entry, cmd = Placed(ref, line, "FROM"), {}, None, None
            install = None
        elif op == "ENV":
            for key, value in _env_pairs(rest):
                env[key] = Placed(_dockerfile_value(value, args, env), line, f"ENV {key}")
        elif op == "RUN":
            found = pip_vllm_version(rest)
            if found is not None:
                version, why = found
                install = Placed(
                    version, line, f"RUN pip install vllm=={version}" if version else why
                )
        elif op == "ENTRYPOINT":
            entry, cmd = (_exec_or_shell(rest)[0], line), None  # ENTRYPOINT resets CMD
        elif op == "CMD":
            cmd = (_exec_or_shell(rest)[0], line)
    if image is None:
        return
    if entry is None:
        if not is_vllm_image(str(image.value)) and not (
            (cmd and _runs_vllm(cmd[0])) or (cmd and cmd[0][:1] == ["/bin/sh"])
        ):
            return
        entry = (list(IMAGE_ENTRYPOINT) if is_vllm_image(str(image.value)) else [], image.line)
    words = entry[0] + (cmd[0] if cmd and entry[0][:2] != ["/bin/sh", "-c"] else [])
    refs = _Refs()
    resolved = resolve_command(words, env, refs)
    if resolved is None:
        return
    kept, unresolved = drop_unresolved(resolved, refs)
    first = min(x[1] for x in (entry, cmd) if x is not None)
    target = Target(
        name,
        "Dockerfile",
        os.path.basename(name) if name != "-" else "Dockerfile",
        first,
        kept,
        command_line=first,
        unresolved=unresolved,
    )
    target.image, target.env, target.install = image, env, install
    if entry[0] and entry[0][:2] != ["/bin/sh", "-c"] and cmd is None:
        # an exec-form ENTRYPOINT takes `docker run IMAGE ARGS...` after it
        target.unresolved.setdefault(MORE_ARGUMENTS, "the arguments of `docker run IMAGE ...`")
    not_stated = "a Dockerfile does not say; `docker run` decides ({})"
    target.gpus_unknown = f"{target.where}: " + not_stated.format("--gpus") + "; pass --gpus N"
    target.gpu_product_unknown = (
        f"{target.where}: " + not_stated.format("the host") + "; pass --gpu NAME"
    )
    target.shm_unknown = f"{target.where}: " + not_stated.format("--shm-size, --ipc=host")
    target.env_elsewhere = "`docker run -e` may add variables the Dockerfile does not show"
    yield target


def _dockerfile_value(value: str, args: dict[str, str], env: dict[str, Placed]) -> str | None:
    """An ENV value with ``$VAR``/``${VAR}`` from the build arguments and earlier ENV; None
    when it names one the Dockerfile does not set (a --build-arg, the builder's)."""
    unset = False

    def one(m: re.Match) -> str:
        nonlocal unset
        name = m.group(1) or m.group(2)
        if name in env and env[name].value is not None:
            return str(env[name].value)
        if args.get(name):
            return args[name]
        unset = True
        return m.group(0)

    text = re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)", one, value)
    return None if unset else text


def _env_pairs(rest: str) -> list[tuple[str, str]]:
    """``ENV A=1 B="two words"`` or the old ``ENV A value with spaces``."""
    try:
        words = shlex.split(rest)
    except ValueError:
        return []
    if words and "=" in words[0]:
        return [tuple(w.split("=", 1)) for w in words if "=" in w]  # type: ignore[misc]
    if words:
        return [(words[0], " ".join(words[1:]))]
    return []
