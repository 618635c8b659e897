"""Reader: a ``docker run`` (``podman run``, ``nerdctl run``) command that starts vLLM, as
vLLM's own docs give it:

    docker run --runtime nvidia --gpus all -v ~/.cache/huggingface:/root/.cache/huggingface \\
        --env "HF_TOKEN=$HF_TOKEN" -p 8000:8000 --ipc=host vllm/vllm-openai:latest \\
        --model mistralai/Mistral-7B-v0.1

The engine's own options (``--gpus``, ``-p``, ``--ipc``) are not vLLM's: they end at the image.
What follows the image is the container's command: the arguments of the official image's
``vllm serve`` entrypoint, a command that runs vLLM itself, or, with ``--entrypoint``, that
program's arguments. ``-e``/``--env KEY=VALUE`` are the serve line's environment, and the image's
tag names the vLLM release (serveline/images.py).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from vllm_doctor.errors import InputError
from vllm_doctor.serveline import SERVE_LINE
from vllm_doctor.serveline.words import _ENV_RE

ENGINES = frozenset({"docker", "podman", "nerdctl"})
# the options of `docker container run` that take a value (Docker's CLI reference,
# https://docs.docker.com/reference/cli/docker/container/run/; podman and nerdctl accept the
# same spellings): the word after one of them is its value, not the image
_VALUE_OPTIONS = frozenset(
    {
        "--add-host", "--annotation", "--attach", "--blkio-weight", "--blkio-weight-device",
        "--cap-add", "--cap-drop", "--cgroup-parent", "--cgroupns", "--cidfile", "--cpu-period",
        "--cpu-quota", "--cpu-rt-period", "--cpu-rt-runtime", "--cpu-shares", "--cpus",
        "--cpuset-cpus", "--cpuset-mems", "--detach-keys", "--device", "--device-cgroup-rule",
        "--device-read-bps", "--device-read-iops", "--device-write-bps", "--device-write-iops",
        "--dns", "--dns-option", "--dns-search", "--domainname", "--entrypoint", "--env",
        "--env-file", "--expose", "--gpus", "--group-add", "--health-cmd", "--health-interval",
        "--health-retries", "--health-start-interval", "--health-start-period",
        "--health-timeout", "--hostname", "--ip", "--ip6", "--ipc", "--isolation",
        "--kernel-memory", "--label", "--label-file", "--link", "--link-local-ip",
        "--log-driver", "--log-opt", "--mac-address", "--memory", "--memory-reservation",
        "--memory-swap", "--memory-swappiness", "--mount", "--name", "--net", "--network",
        "--network-alias", "--oom-score-adj", "--pid", "--pids-limit", "--platform", "--publish",
        "--pull", "--restart", "--runtime", "--security-opt", "--shm-size", "--stop-signal",
        "--stop-timeout", "--storage-opt", "--sysctl", "--tmpfs", "--ulimit", "--user",
        "--userns", "--uts", "--volume", "--volume-driver", "--volumes-from", "--workdir",
        # podman's
        "--pod", "--secret", "--hooks-dir",
    }
)  # fmt: skip
# the short options that take a value (-e KEY=V, -v SRC:DST, -p 8000:8000, ...)
_VALUE_SHORT = frozenset("acehlmpuvw")


@dataclass
class ContainerRun:
    """What a container engine's run command says: the image, the environment it sets, the
    command the container runs (entrypoint included) and the engine's words before the image."""

    engine: str
    image: str
    env: list[str] = field(default_factory=list)  # KEY=VALUE
    command: list[str] = field(default_factory=list)


def _start(tokens: list[str]) -> tuple[str, int] | None:
    """(engine, index after `run`) for `[sudo ...] docker [container] run`, else None."""
    for i, word in enumerate(tokens[:4]):
        engine = os.path.basename(word)
        if engine in ENGINES:
            rest = tokens[i + 1 : i + 3]
            if rest[:1] == ["run"]:
                return engine, i + 2
            if rest == ["container", "run"]:
                return engine, i + 3
            return None
        if word != "sudo" and not word.startswith("-"):
            return None
    return None


def split_container_run(tokens: list[str]) -> ContainerRun | None:
    """The container run command in ``tokens``, or None when they are not one."""
    start = _start(tokens)
    if start is None:
        return None
    engine, i = start
    env: list[str] = []
    entry: str | None = None
    while i < len(tokens):
        word = tokens[i]
        if word == "--":
            i += 1
            break
        if not word.startswith("-") or word == "-":
            break
        value: str | None = None
        if word.startswith("--"):
            name, eq, attached = word.partition("=")
            if eq:
                value = attached
            elif name in _VALUE_OPTIONS and i + 1 < len(tokens):
                value, i = tokens[i + 1], i + 1
        else:  # a cluster of short options: -it, -dit, -e KEY=V, -p8000:8000
            name = ""
            for at, letter in enumerate(word[1:], 1):
                if letter in _VALUE_SHORT:
                    name = f"-{letter}"
                    value = word[at + 1 :] or None
                    if value is None and i + 1 < len(tokens):
                        value, i = tokens[i + 1], i + 1
                    break
        i += 1
        if name in ("--env", "-e") and value and _ENV_RE.match(value):
            env.append(value)  # `-e KEY` alone passes the host's value, which is not shown
        elif name == "--entrypoint" and value:
            entry = value
    if i >= len(tokens):
        raise InputError(SERVE_LINE, f"`{engine} run` names no image")
    image, command = tokens[i], tokens[i + 1 :]
    return ContainerRun(engine, image, env, _container_command(engine, image, entry, command))


def _container_command(engine: str, image: str, entry: str | None, args: list[str]) -> list[str]:
    """The words the container runs: ``--entrypoint`` and its arguments, a command that runs
    vLLM itself, or the official image's ``vllm serve`` with the arguments."""
    from vllm_doctor.serveline.images import _runs_vllm, entrypoint

    if entry is not None:
        return [entry, *args]
    if args and _runs_vllm(args[:4]):
        return args
    words = entrypoint(None, image, args)
    if words is None:
        raise InputError(
            SERVE_LINE,
            f"`{engine} run {image}`: not a vLLM image the doctor knows, and its command "
            "does not run vLLM (give the command after the image: vllm serve MODEL ...)",
        )
    return [*words, *args]
