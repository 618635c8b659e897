"""``--manifest DIR``: the manifest files of a directory read as one input.

Deployments are kept as folders of files (``kubectl apply -f DIR``, a kustomize base, a GitOps
repository): a KServe InferenceService in one file runs on a ServingRuntime in another. Every
file is parsed on its own, with its own lines; the Kubernetes objects of all of them are then
joined as one input (``kserve.join``), so a target's evidence names the file and line each
value came from (the runtime's args at the runtime's file, the service's GPUs at its own).

Which files are read, walking the folder and its subfolders in name order:
- YAML files by their extension (``.yaml``, ``.yml``) and Dockerfiles by their name
  (``Dockerfile``, ``Dockerfile.*``, ``Containerfile``, ``*.dockerfile``); other files are
  not manifests and are passed over in silence;
- skipped, each with a note saying why: hidden files and folders (``.git``, ``.github``),
  links to folders (not followed), what is not a regular file, a file over the size of one
  manifest (``FILE_LIMITS["report"]``), a file that is not UTF-8 text or not valid YAML (a
  chart's ``templates/`` hold Go templates: render them with ``helm template``), and YAML that
  is no manifest (a ``Chart.yaml``, a ``kustomization.yaml``, a serve config, the values of a
  chart the doctor does not read).
A bound that protects the run (``bounds.MAX_DIR_ENTRIES`` entries walked, ``MAX_DIR_FILES``
files read, ``MAX_DIR_BYTES`` in all, ``MAX_TARGETS`` targets) is exit 2 naming the folder;
a bound of one file's contents (a pod group of 10^8, a 400-digit size) is exit 2 naming the
file, as for ``--manifest FILE``. A folder with no vLLM container is the same one-line error
as a file with none.
"""

from __future__ import annotations

import os
import stat
from typing import Any

from vllm_doctor.errors import InputError
from vllm_doctor.serveline import kserve
from vllm_doctor.serveline.manifest import (
    NOT_A_MANIFEST,
    ReadFile,
    Target,
    checked_count,
    file_targets,
    is_serve_config,
    load_documents,
)
from vllm_doctor.yaml_io import LineDict, LineList

YAML_SUFFIXES = (".yaml", ".yml")


def is_dockerfile_name(name: str) -> bool:
    base = name.lower()
    return base.startswith(("dockerfile", "containerfile")) or base.endswith(".dockerfile")


def manifest_files(folder: str) -> tuple[list[str], list[str]]:
    """The manifest files under ``folder`` (as paths that start with it, in name order) and
    the notes of what was skipped; InputError past the walk's bounds."""
    from vllm_doctor.bounds import FILE_LIMITS, MAX_DIR_BYTES, MAX_DIR_ENTRIES, MAX_DIR_FILES

    root = os.path.expanduser(folder)
    files: list[str] = []
    notes: list[str] = []
    entries = total = 0
    limit = FILE_LIMITS["report"]

    def shown(path: str) -> str:  # as the user named the folder
        return os.path.join(folder, os.path.relpath(path, root))

    for here, subfolders, names in os.walk(root, onerror=_walk_error(folder)):
        entries += len(subfolders) + len(names)
        if entries > MAX_DIR_ENTRIES:
            raise InputError(
                folder,
                f"more than {MAX_DIR_ENTRIES:,} files and folders: give the folder of the "
                "deployment, not a whole tree",
            )
        kept = []
        for sub in sorted(subfolders):
            path = os.path.join(here, sub)
            if sub.startswith("."):
                notes.append(f"{shown(path)}/: skipped (a hidden folder)")
            elif os.path.islink(path):
                notes.append(f"{shown(path)}/: skipped (a link to a folder is not followed)")
            else:
                kept.append(sub)
        subfolders[:] = kept  # os.walk descends into these, in this order
        for base in sorted(names):
            if not (base.lower().endswith(YAML_SUFFIXES) or is_dockerfile_name(base)):
                continue
            path = os.path.join(here, base)
            if base.startswith("."):
                notes.append(f"{shown(path)}: skipped (a hidden file)")
                continue
            try:
                info = os.stat(path)  # follows a link to a file; never blocks on a FIFO
            except OSError as err:
                notes.append(f"{shown(path)}: skipped (cannot read it: {err.strerror or err})")
                continue
            if not stat.S_ISREG(info.st_mode):
                notes.append(f"{shown(path)}: skipped (not a regular file)")
                continue
            if info.st_size > limit:
                notes.append(
                    f"{shown(path)}: skipped ({info.st_size / (1 << 20):.1f} MiB; a manifest "
                    f"is read whole and may be at most {limit >> 20} MiB)"
                )
                continue
            total += info.st_size
            files.append(shown(path))
            if len(files) > MAX_DIR_FILES or total > MAX_DIR_BYTES:
                raise InputError(
                    folder,
                    f"more than {MAX_DIR_FILES} manifest files or {MAX_DIR_BYTES >> 20} MiB of "
                    "them: give the folder of the deployment, not a whole tree",
                )
    return files, notes


def _walk_error(folder: str):
    def raise_it(err: OSError) -> None:
        if os.path.abspath(err.filename or "") == os.path.abspath(os.path.expanduser(folder)):
            raise InputError(folder, f"cannot read the folder: {err.strerror or err}")
        # a subfolder that cannot be listed is skipped by os.walk; it has no manifest to read

    return raise_it


def read_input(name: str, notes: list[str] | None = None) -> list[Target]:
    """``--manifest NAME``: the targets of a folder's manifest files read as one input (the
    files skipped go to ``notes``), else of the one file (or ``-``)."""
    from vllm_doctor.serveline.manifest import read_targets

    if name != "-" and os.path.isdir(os.path.expanduser(name)):
        targets, skipped = read_directory(name)
        if notes is not None:
            notes.extend(skipped)
        return targets
    return read_targets(name)


def read_directory(folder: str) -> tuple[list[Target], list[str]]:
    """Every container that runs vLLM in the manifest files of ``folder``, read as one input,
    and the notes of the files skipped."""
    from vllm_doctor.serveline.manifest import read_text

    paths, notes = manifest_files(folder)
    read: list[ReadFile] = []
    for path in paths:
        try:
            text = read_text(path)
            dockerfile = is_dockerfile_name(os.path.basename(path))
            parsed = ReadFile(path, text, None if dockerfile else load_documents(path, text))
        except InputError as err:  # not text, not YAML: a template, a broken file
            hint = " (a template: render it, e.g. `helm template`)" if "{{" in _head(path) else ""
            notes.append(f"{path}: skipped ({err.problem}){hint}")
            continue
        _mark_file(parsed)
        read.append(parsed)
    objects = [obj for one in read for obj in one.objects]
    services, used_runtimes, unjoined = kserve.join(objects)
    targets: list[Target] = []
    looked_at: list[str] = []
    manifests = 0  # files that are manifests
    texts = {one.name: one.text.splitlines() for one in read}
    for one in read:
        found, looked, refused = file_targets(one, services, used_runtimes)
        if refused:
            notes.append(f"{one.name}: skipped ({_why_not(one, refused)})")
            continue
        looked_at += looked
        manifests += 1
        for target in found:
            target.texts = texts
        targets += found
    shown = [note.replace(": skipped (", " (", 1) for note in notes[:3]]
    skipped = f"{len(notes)} skipped: {'; '.join(shown)}" if notes else ""
    if len(notes) > 3:
        skipped += f"; and {len(notes) - 3} more"
    if not looked_at:  # no file was a manifest
        raise InputError(
            folder,
            "no manifest file in the folder (YAML files by their extension, Dockerfiles by "
            f"their name{'; ' + skipped if skipped else ''})",
        )
    files = (
        f" in {manifests} file{'s' if manifests != 1 else ''}{', ' + skipped if skipped else ''}"
    )
    return checked_count(folder, targets, looked_at, unjoined, files), notes


def _why_not(one: ReadFile, refused: str) -> str:
    doc = one.docs[0] if one.docs and len(one.docs) == 1 else None
    if refused == NOT_A_MANIFEST and is_serve_config(doc):
        return "a vLLM serve config, not a manifest: give it with --serve-config"
    if refused == NOT_A_MANIFEST:
        return "not a manifest: no apiVersion/kind, no services:"
    return "not a manifest, nor the Helm values of a chart the doctor reads"


def _head(path: str) -> str:
    try:
        with open(os.path.expanduser(path), "rb") as handle:
            return handle.read(64 * 1024).decode("utf-8", "replace")
    except OSError:
        return ""


def _mark_file(read: ReadFile) -> None:
    """Each mapping and list of the file's documents told which file it came from, so that
    a target joined from two files places each value in its own."""
    stack: list[Any] = list(read.docs or ())
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        if not isinstance(node, (LineDict, LineList)) or id(node) in seen:
            continue
        seen.add(id(node))  # an alias is one node
        node.file = read.name
        stack.extend(node.values() if isinstance(node, dict) else node)
