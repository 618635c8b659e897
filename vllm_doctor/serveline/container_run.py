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
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from vllm_doctor.errors import InputError
from vllm_doctor.serveline import SERVE_LINE
from vllm_doctor.serveline.words import _ENV_RE

if TYPE_CHECKING:
    from vllm_doctor.facts.model import Facts

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
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
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
    gpus: str | None = None  # --gpus: all, 2, "device=0,1"
    ipc: str | None = None  # --ipc: host, private, shareable
    shm_size: str | None = None  # --shm-size: 16g
    passed: list[str] = field(default_factory=list)  # `-e KEY`: the host's value of KEY
    env_files: list[str] = field(default_factory=list)  # --env-file: not opened
    # -v /host/dir:/container/dir[:ro], --mount type=bind,source=...,target=...: (host, container)
    mounts: list[tuple[str, str]] = field(default_factory=list)

    def passes_on(self, name: str) -> bool:
        """Whether this machine's variable ``name`` reaches the container (`-e KEY` alone)."""
        return name in self.passed

    def host_path(self, path: str) -> str | None:
        """This machine's path of a path inside the container, through the bind mounts (the
        deepest that holds it); None where none does."""
        for host, inside in sorted(self.mounts, key=lambda m: -len(m[1])):
            root = inside.rstrip("/") or "/"
            if path == root or path.startswith(root.rstrip("/") + "/"):
                return host.rstrip("/") + path[len(root.rstrip("/")) :]
        return None


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
    passed: list[str] = []
    env_files: list[str] = []
    mounts: list[tuple[str, str]] = []
    entry: str | None = None
    said: dict[str, str] = {}  # --gpus, --ipc, --shm-size as given
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
            env.append(value)
        elif name in ("--env", "-e") and value and _NAME.match(value):
            passed.append(value)  # `-e KEY` alone passes the host's value of KEY
        elif name == "--env-file" and value:
            env_files.append(value)
        elif name in ("-v", "--volume", "--mount") and value:
            mount = _bind_mount(value) if name == "--mount" else _volume(value)
            if mount is not None:
                mounts.append(mount)
        elif name == "--entrypoint" and value:
            entry = value
        elif name in ("--gpus", "--ipc", "--shm-size") and value is not None:
            said[name] = value
    if i >= len(tokens):
        raise InputError(SERVE_LINE, f"`{engine} run` names no image")
    image, command = tokens[i], tokens[i + 1 :]
    return ContainerRun(
        engine,
        image,
        env,
        _container_command(engine, image, entry, command),
        gpus=said.get("--gpus"),
        ipc=said.get("--ipc"),
        shm_size=said.get("--shm-size"),
        passed=passed,
        env_files=env_files,
        mounts=mounts,
    )


def _volume(value: str) -> tuple[str, str] | None:
    """``-v /host:/inside[:opts]``: (host, inside); a named volume (no host path) is None."""
    parts = value.split(":")
    if len(parts) < 2 or not parts[0].startswith(("/", "~", ".")) or not parts[1].startswith("/"):
        return None
    return os.path.expanduser(parts[0]), parts[1]


def _bind_mount(value: str) -> tuple[str, str] | None:
    """``--mount type=bind,source=/host,target=/inside``: (host, inside); other types None."""
    fields = dict(item.partition("=")[::2] for item in value.split(",") if "=" in item)
    host = fields.get("source") or fields.get("src")
    inside = fields.get("target") or fields.get("destination") or fields.get("dst")
    if fields.get("type", "volume") != "bind" or not host or not inside:
        return None
    return os.path.expanduser(host), inside


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


# `--gpus 2`, `--gpus count=2`, `--gpus '"device=0,1"'` (Docker's GPU request forms)
_GPU_COUNT = re.compile(r"^(?:count=)?(?P<count>\d{1,3})$")
_GPU_DEVICES = re.compile(r"^\"?device=(?P<ids>[\w,-]+)\"?$")


def container_facts(run: ContainerRun, facts: Facts, source: str) -> None:
    """What the run command says of the container: its image and the vLLM release the tag
    names, the GPUs it is given (``deploy.gpus_per_pod``) and its /dev/shm (``--ipc=host``,
    ``--shm-size``, else the runtime's 64 MB: ``deploy.shm_default``)."""
    from vllm_doctor.facts.model import Source
    from vllm_doctor.serveline.quantities import DEFAULT_SHM_MIB, quantity_mib

    facts.set("deploy.image", run.image, source, f"{run.engine} run {run.image}")
    _set_aside_this_machines_userspace(run, facts)
    _image_version(run, facts, source)
    word = f"{run.engine} run"
    if run.ipc == "host":
        facts.set("deploy.shm_default", False, source, f"{word} --ipc=host")
    elif run.shm_size is not None:
        size = quantity_mib(run.shm_size, docker=True, where=f"{word} --shm-size")
        facts.set("deploy.shm_default", False, source, f"{word} --shm-size {run.shm_size}")
        if size is not None:
            facts.set("deploy.shm_mib", size, source, f"{word} --shm-size {run.shm_size}")
    else:
        facts.set("deploy.shm_default", True, source, f"{word}: no --ipc=host, no --shm-size")
        facts.set("deploy.shm_mib", DEFAULT_SHM_MIB, Source.DEFAULT, "the runtime's /dev/shm")
    gpus = (run.gpus or "").strip().strip("'")
    count, devices = _GPU_COUNT.match(gpus), _GPU_DEVICES.match(gpus)
    number = (
        int(count.group("count"))
        if count
        else len(devices.group("ids").split(","))
        if devices
        else None
    )
    if number is not None:
        facts.set("deploy.gpus_per_pod", number, source, f"{word} --gpus {run.gpus}")
    else:
        facts.mark_missing(
            "deploy.gpus_per_pod",
            f"{word} --gpus {run.gpus}: every GPU of the host"
            if run.gpus is not None
            else f"{word} names no --gpus count (--device or the runtime's variables decide)",
        )


# What the container has of its own, not the host's: its Python packages (vLLM, torch and the
# rest), its user-space libraries and toolchain, its user; and paths on its command line are
# paths inside it. The kernel, the driver and the GPUs are the host's (kept).
_IMAGE_AREAS = ("vllm", "torch", "packages", "container")
_IMAGE_PATHS = (
    "platform.glibcxx",
    "platform.os",
    "platform.nvcc_found",
    "platform.c_compiler_found",
    "platform.container",
    "platform.cuda_interposer",  # the host's /etc/ld.so.preload is not the container's
)
# (this machine's model files, host.*, are read after the serve line; the rules that judge
# them, ENV065 and ENV066, leave a container's alone: deploy.image)


def _set_aside_this_machines_userspace(run: ContainerRun, facts: Facts) -> None:
    """This machine's own facts of what the image decides stand no more: a `docker run`
    line's vLLM runs on the image's packages, libraries and user (a report or a what-if value
    given for them stays)."""
    from vllm_doctor.facts.model import Source

    reason = (
        f"the container runs image {run.image}: its packages, libraries and user are the "
        "image's, not this machine's (pass --report with `vllm collect-env` run in the container)"
    )

    def from_machine(prefix: str) -> list[str]:
        return [
            path
            for path, fact in facts.values.items()
            if (path == prefix or path.startswith(prefix + ".")) and fact.source == Source.MACHINE
        ]

    for area in _IMAGE_AREAS:
        if from_machine(area):
            facts.drop_area(area)
            facts.mark_unknowable(area, reason)
    # the container's environment is the image's and the line's (-e, --env-file): of this
    # machine's, only what `-e KEY` passes on
    for path, fact in list(facts.values.items()):
        passed_on = run.passes_on(path.removeprefix("env."))
        if path.startswith("env.") and fact.source == Source.ENV and not passed_on:
            del facts.values[path]
    if run.env_files:
        facts.mark_missing(
            "env",
            f"{run.engine} run --env-file {' '.join(run.env_files)}: the file is not opened; "
            "the variables it sets are not known",
        )
    for path in _IMAGE_PATHS:
        if from_machine(path):
            facts.values.pop(path, None)
            facts.mark_unknowable(path, reason)


def _image_version(run: ContainerRun, facts: Facts, source: str) -> None:
    """The vLLM release the image's tag names: it stands for this machine's vLLM (the
    container runs the image's), not for a version the user gave (--vllm-version) or a
    report's."""
    from vllm_doctor.facts.model import Source
    from vllm_doctor.serveline.images import image_vllm_version, put_image_vllm_version

    known = facts.get("vllm.version")
    if known is not None and known.source != Source.MACHINE:
        return
    version, why = image_vllm_version(run.image)
    if version is None:
        if known is None:
            facts.mark_missing("vllm", f"image {run.image}: {why}; pass --vllm-version V")
        return
    put_image_vllm_version(facts, version, source, f"image {run.image} ({why})")
