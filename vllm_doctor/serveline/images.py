"""The vLLM release an image or a Dockerfile's install holds, read from what the file says.

An image's tag names its vLLM release only for the repositories of ``images.yaml`` (the
official images, their mirrors, the vendors' builds that tag by vLLM release, NVIDIA's
container through its release notes); any other image names none, and the reason says so.
A Dockerfile's ``pip install vllm==X`` (``uv pip``, ``vllm[extra]==X``) names X.
"""

from __future__ import annotations

import functools
import itertools
import os
import re
from typing import Any

_IMAGE = re.compile(
    r"^(?:(?P<registry>[^/]+\.[^/]+|localhost(?::\d+)?)/)?(?P<repo>[^:@]+)"
    r"(?::(?P<tag>[^@]+))?(?:@(?P<digest>.+))?$"
)
_DOCKER_HUB = ("docker.io", "registry-1.docker.io", "index.docker.io")
_VERSION = r"\d+\.\d+\.\d+(?:\.\d+)?(?:(?:rc|\.post)\d+)?"
_TAG_FORMS = {
    "release": re.compile(rf"^v?({_VERSION})(?:-[A-Za-z0-9_.]+)?$"),
    "leading": re.compile(rf"^v?({_VERSION})(?:[-._+].*)?$"),
    "rocm": re.compile(rf"_vllm_({_VERSION})(?:_|$)"),
    "table": re.compile(r"^(\d\d\.\d\d)(?:-py3)?(?:-.*)?$"),
}


@functools.cache
def image_table() -> dict[str, Any]:
    """``knowledge/data/images.yaml``: which repositories' tags name a vLLM release."""
    from importlib import resources

    from vllm_doctor import yaml_io

    text = resources.files("vllm_doctor.knowledge").joinpath("data/images.yaml").read_text()
    return yaml_io.safe_load(text)


def _split(image: str) -> tuple[str, str, str | None, str | None] | None:
    match = _IMAGE.match(image.strip())
    if not match:
        return None
    registry = match.group("registry") or "docker.io"
    if registry in _DOCKER_HUB:
        registry = "docker.io"
    repo = match.group("repo")
    if registry == "docker.io":
        repo = repo.removeprefix("library/")
    return registry, repo, match.group("tag"), match.group("digest")


def _entry(registry: str, repo: str) -> dict[str, Any] | None:
    for entry in image_table()["repositories"]:
        path = entry["path"]
        if entry.get("registry") and entry["registry"] != registry:
            continue
        if entry.get("suffix"):
            hit = repo == path or repo.endswith("/" + path)
        elif entry.get("prefix"):
            hit = repo.startswith(path)
        else:
            hit = repo == path
        if hit:
            return entry
    return None


def image_vllm_version(image: str) -> tuple[str | None, str]:
    """(the vLLM release the image holds as its name and tag say, or None and why not;
    with a release, what the image is and where the release was read)."""
    parts = _split(image)
    if parts is None:
        return None, f"the image {image!r} cannot be read"
    registry, repo, tag, digest = parts
    entry = _entry(registry, repo)
    if entry is None:
        return None, (
            f"the image {image} is not one whose tag names the vLLM release inside "
            "(the official vllm/vllm-openai images, their mirrors, AIBrix's, NVIDIA's)"
        )
    if entry["tag"] == "none":
        return None, f"the image {image} is {entry['why']}"
    if tag is None:
        what = "a digest" if digest else "no tag (latest)"
        return None, f"the image {image} is pinned by {what}, which names no release"
    form = _TAG_FORMS[entry["tag"]]
    found = form.search(tag) if entry["tag"] == "rocm" else form.match(tag)
    if found is None:
        return None, f"the tag {tag!r} of {repo} (latest, nightly, a commit) names no release"
    if entry["tag"] == "table":
        table = image_table()["tables"][entry["table"]]
        row = table["releases"].get(found.group(1))
        if row is None:
            return None, (
                f"{entry['what']} {found.group(1)} is not in the table of its releases "
                f"({table['source']}); pass --vllm-version V"
            )
        return row[
            "vllm"
        ], f"{entry['what']} {found.group(1)} holds vLLM {row['vllm']} ({row['source']})"
    return found.group(1), entry["what"]


def put_image_vllm_version(facts: Any, version: str, source: Any, detail: str) -> None:
    """The vLLM an image (or its Dockerfile's install) carries, in place of any read before:
    its version facts, and no installed source to read fingerprints from."""
    from vllm_doctor.facts.packages import set_vllm_version_facts

    facts.drop_area("vllm")
    set_vllm_version_facts(facts, version, source, detail)
    facts.mark_missing("vllm.location", "an image tag: the installed source is not here")


def is_vllm_image(image: str | None) -> bool:
    """An image whose default command is the vLLM server (the official ones and the builds
    named like them)."""
    if not image:
        return False
    parts = _split(image)
    repo = parts[1] if parts else image
    return repo.rsplit("/", 1)[-1].startswith("vllm-openai")


# a Dockerfile's install of vLLM: pip / pip3 / python -m pip / uv pip, a pinned version
_PIP_INSTALL = re.compile(r"(?:^|[\s;&|(])(?:uv\s+)?pip3?\s+install\b([^;&|]*)")
_PINNED = re.compile(
    r"""(?:^|\s)["']?vllm(?:\[[^\]]*\])?\s*==\s*([0-9][0-9A-Za-z.+!-]*)["']?(?=\s|$)"""
)
_UNPINNED = re.compile(
    r"""(?:^|\s)["']?vllm(?:\[[^\]]*\])?["']?(?=\s|$)|vllm(?:-project/vllm)?\.git"""
)


def pip_vllm_version(command: str) -> tuple[str | None, str] | None:
    """What a ``RUN`` line installs of vLLM: (the pinned version, "") or (None, why not);
    None when it installs no vLLM."""
    for install in _PIP_INSTALL.finditer(command):
        arguments = install.group(1)
        pinned = _PINNED.search(arguments)
        if pinned:
            return pinned.group(1), ""
        if _UNPINNED.search(arguments):
            return None, "installs vLLM unpinned (the newest at build time, or from git)"
    return None


# -- what an image runs ----------------------------------------------------------------------
# the official images run `vllm serve` when no command is given (older ones the OpenAI
# api_server module, which takes the same options)
IMAGE_ENTRYPOINT = ["vllm", "serve"]


_VLLM_WORDS = {
    "vllm",
    "vllm.entrypoints.openai.api_server",
    "vllm.entrypoints.api_server",
    "vllm.entrypoints.cli.main",
}


def _runs_vllm(words: list[str]) -> bool:
    return any(os.path.basename(w) in _VLLM_WORDS for w in words) or any(
        w == "-m" and nxt.startswith("vllm") for w, nxt in itertools.pairwise(words)
    )


def entrypoint(given: list[str] | None, image: Any, args: list[str] | None) -> list[str] | None:
    """The command the arguments follow: the one the file gives, else the official image's
    (``vllm serve``), else none when the arguments run vLLM themselves; None when the
    container does not run vLLM."""
    if given is not None:
        return given
    if is_vllm_image(image):
        return list(IMAGE_ENTRYPOINT)
    return [] if args and _runs_vllm(args) else None
