"""The messages of the packages around vLLM that are read for their messages only.

``tools/gen_stack_knowledge.py`` reads the packages of ``COMPANIONS`` whole (requirements,
version checks, GPU images, messages). The packages here are read only for what their Python
code raises, asserts or logs as an error (``tools/extractors/errors.py``, the reader of vLLM's
own catalogue), so that ``explain --log`` names the package and the versions of it that raise a
message a log shows: Hugging Face's libraries, the structured-output, KV-transfer and
quantization packages, Ray, torch's distributed and CUDA start-up, bitsandbytes, LMCache,
NIXL (nixl-cu12, whose code the nixl wheel installs) and AITER (its tagged source). Each wheel
is downloaded with ``pip download PKG==X --no-deps`` and read as a zip archive (never installed
or imported); its reading is kept in ``<dir>/<distribution>/messages/<version>.json`` and the
wheel deleted once read unless ``--keep``.

Which versions: those the covered vLLM releases allow (their ``Requires-Dist``), or every
release from ``first`` for a package no release declares; ``per_minor`` keeps the newest patch
release of each minor version (a message that appears or goes in a patch release is then dated
to the minor), ``ends_only`` the oldest and newest version each release's requirement allows
(a package with fifty allowed minors), ``newest`` the newest N. Without ``--download`` every
stored reading is used. The table says which versions were read.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from packaging.utils import parse_wheel_filename
from packaging.version import Version

READING_FORMAT = 1


@dataclass(frozen=True)
class MessageSource:
    """A package read for its messages: why, which versions, which of its files."""

    why: str
    first: str | None = None  # no vLLM release declares it: every release from this one
    per_minor: bool = True
    newest: int | None = None
    # only the oldest and the newest version each covered vLLM release's requirement allows
    # (what the release was built against, and what a fresh install of it gets)
    ends_only: bool = False
    # files of the package that a vLLM start-up or request runs (path prefixes inside the
    # wheel); None: every file of its top-level packages
    include: tuple[str, ...] | None = None
    # files left out (a regular expression on the path): training, conversion, examples
    exclude: str | None = None
    # the platform whose wheel is read: the Python code is the same on every platform, and
    # torch's macOS wheel is 70 MB where the Linux CUDA wheel is 900 MB
    platform: tuple[str, ...] = ()
    # a package not published as wheels for every version: its tagged source (``v<version>``
    # tags) read from a bare clone in ``<dir>/<distribution>/repo.git``, ``git archive`` of
    # these folders standing for the wheel
    git: str | None = None
    git_folders: tuple[str, ...] = ()
    # how many parts of a version name a series whose newest release ``per_minor`` keeps
    # (2: 4.57.x; 3 for a package whose releases are all 0.1.N.postM)
    series: int = 2
    # its C++ host checks, read from these folders (DeepGEMM's DG_HOST_ASSERT and
    # DG_HOST_UNREACHABLE throw "Assertion error (file:line): <condition or reason>", which
    # the Python binding raises as a RuntimeError)
    cpp_checks: tuple[str, ...] = ()
    # a compiled library: the reader of ``tools/binary_messages.py`` ("nccl", "cuda-runtime")
    # applied to the strings of the shared objects whose path matches ``objects``
    binary: str | None = None
    objects: str | None = None
    # the versions these packages' requirements name count too (torch pins NCCL and the CUDA
    # runtime: its ``stack/torch.json`` table), or the versions required of another
    # distribution stand for this one's (nvidia-cutlass-dsl pins its libs to its own version)
    pinned_by: tuple[str, ...] = ()
    specs_of: str | None = None
    # files whose asserts are the code's own invariants, not messages a user acts on
    # (torch.compile's thousand internal asserts): only their raises and logged errors count
    no_asserts: tuple[str, ...] = ()

    def keeps(self, path: str) -> bool:
        if self.include is not None and not path.startswith(self.include):
            return False
        return self.exclude is None or re.search(self.exclude, path) is None

    def keeps_site(self, key: str, path: str) -> bool:
        """Whether the catalogue keeps a message of this file (folded, ``spans``)."""
        if not self.keeps(path):
            return False
        return not (key.startswith("AssertionError: ") and path.startswith(self.no_asserts))

    def fingerprint(self) -> str:
        if self.binary is not None:
            import binary_messages

            return json.dumps([self.binary, self.objects, binary_messages.FORMAT])
        return json.dumps([self.include, self.exclude])


MESSAGE_SOURCES: dict[str, MessageSource] = {
    "transformers": MessageSource(
        "vLLM requires it: model configs, tokenizers, processors, the Transformers back-end, "
        "remote code; its model files' training and conversion code is left out",
        ends_only=True,
        exclude=r"/(agents|commands|data|pipelines|generation|onnx|sagemaker|distributed)/|"
        r"/(trainer|training_args|optimization|keras_callbacks|modelcard)[^/]*\.py$|"
        r"/models/[^/]+/(modeling_|modular_|convert_|tokenization_[^/]*_fast)[^/]*\.py$|"
        r"_tf_|_flax_|/integrations/(deepspeed|fsdp|tensor_parallel|integration_utils)",
    ),
    "huggingface-hub": MessageSource(
        "vLLM and transformers download and read models with it (gated, missing, offline)",
        ends_only=True,
        include=("huggingface_hub/",),
        exclude=r"/(commands|cli|inference|_inference_endpoints|_space_api|_webhooks)",
    ),
    "tokenizers": MessageSource("vLLM requires it (the fast tokenizers)", ends_only=True),
    "xgrammar": MessageSource(
        "vLLM requires it (pinned in most releases): the default structured-output back-end",
        per_minor=False,
        ends_only=True,
    ),
    "compressed-tensors": MessageSource(
        "vLLM pins it: the compressed-tensors quantization configs", per_minor=False
    ),
    "mistral-common": MessageSource(
        "vLLM requires it: Mistral tokenizers and requests", ends_only=True
    ),
    "ray": MessageSource(
        "vLLM's multi-node and pipeline-parallel executor runs on it; its start-up, placement "
        "groups, compiled graphs and errors are read, not its libraries (serve, data, tune)",
        ends_only=True,
        include=(
            "ray/_private/",
            "ray/util/placement_group.py",
            "ray/util/scheduling_strategies.py",
            "ray/exceptions.py",
            "ray/actor.py",
            "ray/remote_function.py",
            "ray/worker.py",
            "ray/dag/",
            "ray/experimental/channel/",
            "ray/runtime_env/",
        ),
        exclude=r"/(usage|dashboard|accelerators/(tpu|hpu|neuron|intel)|thirdparty_files)",
    ),
    "torch": MessageSource(
        "vLLM pins it: the messages of its distributed start-up (process groups, NCCL, gloo, "
        "rendezvous), of CUDA initialisation and memory, of torch.compile (Dynamo, Inductor, "
        "symbolic shapes) and of custom-op registration",
        per_minor=False,
        include=(
            "torch/distributed/distributed_c10d.py",
            "torch/distributed/rendezvous.py",
            "torch/distributed/constants.py",
            "torch/distributed/utils.py",
            "torch/distributed/device_mesh.py",
            "torch/distributed/elastic/",
            "torch/cuda/",
            "torch/multiprocessing/",
            "torch/utils/cpp_extension.py",
            "torch/_utils.py",
            "torch/serialization.py",
            # torch.compile's user-facing errors: vLLM compiles every model by default
            "torch/__init__.py",
            "torch/_dynamo/exc.py",
            "torch/_dynamo/eval_frame.py",
            "torch/_dynamo/convert_frame.py",
            "torch/_inductor/exc.py",
            "torch/_inductor/codecache.py",
            "torch/_inductor/cpp_builder.py",
            "torch/_inductor/compile_fx.py",
            "torch/_inductor/standalone_compile.py",
            "torch/_inductor/async_compile.py",
            "torch/_inductor/select_algorithm.py",
            "torch/_inductor/runtime/",
            "torch/fx/experimental/symbolic_shapes.py",
            "torch/library.py",
            "torch/_library/",
        ),
        no_asserts=(
            "torch/__init__.py",
            "torch/_dynamo/",
            "torch/_inductor/",
            "torch/fx/",
            "torch/library.py",
            "torch/_library/",
        ),
        platform=tuple(f"macosx_{major}_0_arm64" for major in (15, 14, 13, 12, 11)),
    ),
    "bitsandbytes": MessageSource(
        "vLLM's bitsandbytes quantization imports it (an extra, not pinned)",
        first="0.45.0",
        newest=6,
        exclude=r"/(optim|research|triton)/",
    ),
    "lmcache": MessageSource(
        "vLLM's LMCache connector imports it without declaring it", first="0.3.0", newest=8
    ),
    "nixl-cu12": MessageSource(
        "vLLM's NIXL connector (disaggregated prefill) imports nixl without declaring it; the "
        "nixl wheel is a shell that requires nixl-cu12 or nixl-cu13, which carry its code",
        first="0.3.0",
        newest=6,
    ),
    "safetensors": MessageSource(
        "vLLM requires it: the weights of every safetensors checkpoint", ends_only=True
    ),
    "accelerate": MessageSource(
        "transformers' and bitsandbytes' device maps and offload code imports it (vLLM does "
        "not declare it)",
        first="1.0.0",
        newest=4,
        # its device maps, offload and quantized loading, not its training loop and launchers
        include=(
            "accelerate/big_modeling.py",
            "accelerate/hooks.py",
            "accelerate/state.py",
            "accelerate/utils/modeling.py",
            "accelerate/utils/offload.py",
            "accelerate/utils/bnb.py",
            "accelerate/utils/imports.py",
        ),
    ),
    "peft": MessageSource(
        "LoRA adapters are made and saved with it; vLLM reads their adapter_config.json",
        first="0.13.0",
        newest=4,
        # saving and loading an adapter and LoRA's config, not every tuner's layers
        include=(
            "peft/config.py",
            "peft/peft_model.py",
            "peft/mapping",
            "peft/utils/",
            "peft/tuners/tuners_utils.py",
            "peft/tuners/lora/config.py",
        ),
    ),
    "outlines": MessageSource("vLLM pins it (0.8.x: the outlines structured-output back-end)"),
    "outlines-core": MessageSource(
        "vLLM pins it: the outlines structured-output back-end", per_minor=False
    ),
    "llguidance": MessageSource(
        "vLLM requires it: the guidance structured-output back-end", ends_only=True
    ),
    "openai-harmony": MessageSource(
        "vLLM requires it: gpt-oss' harmony chat format and tool calls", ends_only=True
    ),
    "runai-model-streamer": MessageSource(
        "vLLM's runai extra: --load-format runai_streamer", ends_only=True
    ),
    "fastsafetensors": MessageSource(
        "vLLM's fastsafetensors loader (--load-format fastsafetensors)", ends_only=True
    ),
    "cupy-cuda12x": MessageSource(
        "vLLM's Ray compiled graphs and NIXL paths use CuPy (Ray's requirement, not vLLM's)",
        first="13.0.0",
        newest=3,
        # its CUDA runtime, driver, NVRTC and library bindings, not its array API or cupyx
        include=("cupy/__init__.py", "cupy/_environment.py", "cupy/cuda/", "cupy_backends/"),
    ),
    "nvidia-cutlass-dsl-libs-base": MessageSource(
        "vLLM, quack-kernels and FlashInfer pin nvidia-cutlass-dsl, a shell whose CuTe DSL "
        "Python is this wheel, pinned to the same version",
        specs_of="nvidia-cutlass-dsl",
        per_minor=False,
    ),
    "nvidia-nccl-cu12": MessageSource(
        "torch pins it (CUDA 12 builds) and vLLM's pynccl loads it: NCCL's WARN formats and "
        "error strings, read from libnccl.so's strings",
        per_minor=False,
        pinned_by=("torch",),
        binary="nccl",
        objects=r"/libnccl\.so[.\d]*$",
    ),
    "nvidia-nccl-cu13": MessageSource(
        "torch pins it (CUDA 13 builds): NCCL's WARN formats and error strings",
        per_minor=False,
        pinned_by=("torch",),
        binary="nccl",
        objects=r"/libnccl\.so[.\d]*$",
    ),
    "nvidia-cuda-runtime-cu12": MessageSource(
        "torch pins it (CUDA 12 builds): the CUDA runtime's error strings (cudaGetErrorString), "
        "read from libcudart.so's strings",
        per_minor=False,
        pinned_by=("torch",),
        binary="cuda-runtime",
        objects=r"/libcudart\.so[.\d]*$",
    ),
    "nvidia-cuda-runtime": MessageSource(
        "torch's CUDA 13 builds pin cuda-toolkit 13.0, which brings it: the CUDA runtime's "
        "error strings of each 13.x minor",
        first="13.0.0",
        binary="cuda-runtime",
        objects=r"/libcudart\.so[.\d]*$",
    ),
    "deep-gemm": MessageSource(
        "vLLM's FP8 block-scaled GEMMs and MoE call it (VLLM_USE_DEEP_GEMM; bundled in the "
        "wheels as vllm/third_party/deep_gemm from 0.2x, built from source before): its "
        "tagged source is read, Python and the C++ host checks its kernels raise",
        first="2.1.0",
        per_minor=False,
        git="https://github.com/deepseek-ai/DeepGEMM",
        git_folders=("deep_gemm", "csrc"),
        cpp_checks=("csrc/",),
    ),
    "amd-aiter": MessageSource(
        "vLLM's ROCm kernels (VLLM_ROCM_USE_AITER*) call it; published on PyPI only from "
        "0.1.12.post1, so its tagged source is read",
        first="0.1.5",
        newest=10,
        series=3,
        git="https://github.com/ROCm/aiter",
        git_folders=("aiter",),
        exclude=r"/(ops/triton/_triton_kernels/|utility/mp_tuner|jit/optCompilerConfig)",
    ),
}


def choose(versions: list[Version], source: MessageSource) -> list[Version]:
    """The versions of a package to read, from those its requirements allow."""
    chosen = sorted(set(versions))
    if source.per_minor:
        newest: dict[tuple[int, ...], Version] = {}
        for version in chosen:
            newest[version.release[: source.series]] = version
        chosen = sorted(newest.values())
    if source.newest is not None:
        chosen = chosen[-source.newest :]
    return chosen


def to_read(source: MessageSource, index: list[Version], specs: set[str]) -> list[Version]:
    """The versions of a package to read: ``index`` its releases, ``specs`` what the covered
    vLLM releases require of it."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    released = choose(index, replace(source, newest=None))
    allowed: set[Version] = set()
    for spec in specs:
        try:
            allowed_by = SpecifierSet(spec)
        except InvalidSpecifier:
            continue
        # a pinned version is read as written (a patch release per_minor would skip)
        pinned = [Version(c.version) for c in allowed_by if c.operator == "=="]
        found = pinned or [v for v in released if v in allowed_by]
        allowed |= {found[0], found[-1]} if source.ends_only and found else set(found)
    if source.first is not None:
        allowed |= {v for v in released if v >= Version(source.first)}
    if source.ends_only and released:
        allowed.add(released[-1])
    return choose(sorted(allowed), replace(source, per_minor=False))


def git_dir(root: Path, dist: str) -> Path:
    return root / dist / "repo.git"


def git_tags(root: Path, dist: str, source: MessageSource, fetch: bool) -> list[Version]:
    """The released versions of a package read from its tags (``v0.1.12.post1``); with
    ``fetch`` the clone is made or brought up to date first."""
    repo = git_dir(root, dist)
    if fetch:
        if repo.is_dir():
            cmd = ["git", "--git-dir", str(repo), "fetch", "--tags", "--quiet", "origin"]
        else:
            repo.parent.mkdir(parents=True, exist_ok=True)
            cmd = ["git", "clone", "--bare", "--quiet", str(source.git), str(repo)]
        subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if not repo.is_dir():
        return []
    proc = subprocess.run(
        ["git", "--git-dir", str(repo), "tag", "--list", "v*"], capture_output=True, text=True
    )
    out = []
    for tag in proc.stdout.split():
        try:
            version = Version(tag[1:])
        except ValueError:
            continue
        if not (version.is_prerelease or version.is_devrelease):
            out.append(version)
    return sorted(out)


def git_archive(root: Path, dist: str, version: str, source: MessageSource) -> Path | None:
    """The tagged source of one version as a zip archive (read like a wheel)."""
    target = root / dist / f"{dist}-{version}-src.zip"
    proc = subprocess.run(
        [
            *("git", "--git-dir", str(git_dir(root, dist)), "archive", "--format=zip"),
            *("-o", str(target), f"v{version}", "--", *source.git_folders),
        ],
        capture_output=True,
        text=True,
    )
    return target if proc.returncode == 0 and target.is_file() else None


def reading_path(root: Path, dist: str, version: str) -> Path:
    return root / dist / "messages" / f"{version}.json"


def wheel_for(root: Path, dist: str, version: str) -> Path | None:
    for path in sorted((root / dist).glob("*.whl")):
        try:
            found = parse_wheel_filename(path.name)[1]
        except ValueError:
            continue
        if str(found) == version:
            return path
    return None


def download(root: Path, dist: str, version: str, source: MessageSource) -> Path | None:
    import stack_readers

    if not stack_readers.pip_download(
        root / dist, dist, version, source.platform or stack_readers.LINUX_X86_64
    ):
        return None
    return wheel_for(root, dist, version)


def read_wheel(wheel: Path, source: MessageSource) -> dict[str, Any]:
    import stack_readers

    with zipfile.ZipFile(wheel) as archive:
        if source.binary is not None:
            return {"messages": binary_messages_of(archive, source), "skipped": {}}
        found, skipped = stack_readers.messages(
            archive, stack_readers.top_level_packages(archive), keep=source.keeps
        )
        if source.cpp_checks:
            for name in archive.namelist():
                if name.startswith(source.cpp_checks) and name.endswith(_CPP_SOURCES):
                    text = archive.read(name).decode("utf-8", "replace")
                    for key, function in cpp_checks(text):
                        entry = found.setdefault(key, {"sites": []})
                        if [name, function, ""] not in entry["sites"]:
                            entry["sites"].append([name, function, ""])
    return {"messages": found, "skipped": dict(skipped)}


def binary_messages_of(archive: zipfile.ZipFile, source: MessageSource) -> dict[str, Any]:
    """The messages in the strings of the wheel's shared objects that ``source.objects``
    names (``tools/binary_messages.py``)."""
    import binary_messages

    found: dict[str, Any] = {}
    for name in archive.namelist():
        if source.objects and re.search(source.objects, name):
            for key, value in binary_messages.messages(
                archive.read(name), str(source.binary), name
            ).items():
                found.setdefault(key, value)
    return found


_CPP_SOURCES = (".hpp", ".cpp", ".cuh", ".h", ".cu")
_CPP_CHECK = re.compile(r"\bDG_HOST_(ASSERT|UNREACHABLE)\s*\(")
_CPP_FUNCTION = re.compile(r"(\w+)\s*\([^;{}()]*(?:\([^;{}()]*\)[^;{}()]*)*\)\s*(?:const\s*)?\{")


def cpp_checks(text: str) -> list[tuple[str, str]]:
    """(key, function) of each DG_HOST_ASSERT(condition) and DG_HOST_UNREACHABLE("reason") in
    a C++ source: the message its exception carries, ``Assertion error ({*}): <text>`` (the
    file and line are the placeholder)."""
    out = []
    for match in _CPP_CHECK.finditer(text):
        argument = _balanced(text, match.end())
        if argument is None:
            continue
        if match.group(1) == "UNREACHABLE":
            literal = re.fullmatch(r'\s*"((?:[^"\\]|\\.)*)"\s*', argument)
            if literal is None:
                continue
            argument = literal.group(1)
        argument = " ".join(argument.split())
        functions = _CPP_FUNCTION.findall(text, 0, match.start())
        function = next((f for f in reversed(functions) if f not in _CPP_KEYWORDS), "")
        out.append((f"RuntimeError: Assertion error ({{*}}): {argument}", function))
    return out


_CPP_KEYWORDS = {"if", "for", "while", "switch", "catch", "return", "sizeof"}


def _balanced(text: str, start: int) -> str | None:
    """The text up to the parenthesis that closes the one before ``start``."""
    depth = 1
    for index in range(start, min(len(text), start + 2000)):
        char = text[index]
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return text[start:index]
    return None


def read_one(
    root: Path, dist: str, version: str, source: MessageSource, fetch: bool, keep: bool
) -> dict[str, Any] | None:
    """One version's messages: the stored reading when it was made from the same files, else
    the wheel read (downloaded first with ``fetch``)."""
    path = reading_path(root, dist, version)
    wheel = wheel_for(root, dist, version)
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
        # read from other files: read again where the wheel is at hand; else the stored
        # reading serves, its messages filtered by their sites when folded (``spans``)
        if stored.get("format") == READING_FORMAT and (
            stored.get("files") == source.fingerprint() or (wheel is None and not fetch)
        ):
            return stored
    except (OSError, ValueError):
        pass
    downloaded = False
    if wheel is None and source.git is not None and git_dir(root, dist).is_dir():
        wheel = git_archive(root, dist, version, source)
        downloaded = wheel is not None
    elif wheel is None and fetch:
        wheel = download(root, dist, version, source)
        downloaded = wheel is not None
    if wheel is None:
        return None
    print(f"reading the messages of {wheel.name} ...", file=sys.stderr)
    reading = read_wheel(wheel, source)
    reading.update(
        {
            "format": READING_FORMAT,
            "files": source.fingerprint(),
            "wheel": wheel.name,
            "version": version,
        }
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(reading, sort_keys=True), encoding="utf-8")
    if downloaded and not keep:
        wheel.unlink()
    return reading


def pinned_specs(dist: str, partners: tuple[str, ...]) -> set[str]:
    """What the versions read of ``partners`` (their ``stack/<partner>.json`` tables) require
    of ``dist``: torch's pins of NCCL and the CUDA runtime."""
    from vllm_doctor.knowledge import KnowledgeError, load

    out: set[str] = set()
    for partner in partners:
        try:
            table = load(f"stack/{partner}")
        except KnowledgeError:
            continue
        for span in table.spans(f"requires:{dist}"):
            if isinstance(span.value, dict) and span.value.get("spec"):
                out.add(span.value["spec"])
    return out


def stored_versions(root: Path, dist: str) -> list[str]:
    return sorted((p.stem for p in (root / dist / "messages").glob("*.json")), key=Version)


def collect(
    root: Path,
    only: list[str],
    fetch: bool,
    keep: bool,
    index: Callable[[str], list[Version]],
    specs: Callable[[str], set[str]],
) -> dict[str, dict[str, dict[str, Any]]]:
    """dist → version → reading. ``index(dist)``: its releases on the package index;
    ``specs(dist)``: what the covered vLLM releases require of it."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for dist, source in MESSAGE_SOURCES.items():
        refresh = fetch and (not only or dist in only)
        if refresh:
            released = git_tags(root, dist, source, fetch) if source.git else index(dist)
            wanted = specs(source.specs_of or dist) | pinned_specs(dist, source.pinned_by)
            versions = [str(v) for v in to_read(source, released, wanted)]
        else:
            versions = stored_versions(root, dist)
        found = {}
        for version in versions:
            reading = read_one(root, dist, version, source, refresh, keep)
            if reading is not None:
                found[version] = reading
        out[dist] = found
    return out


def spans(
    by_version: dict[str, dict[str, Any]],
    compact: Callable[[dict], dict],
    source: MessageSource | None = None,
) -> dict:
    """template → [{first, last, sites}]: the versions that raise it as spans over the versions
    read (a message that moved to another file keeps its span; the newest site is kept). With
    ``source``, only the sites in the files it keeps count (a reading made before its files
    were narrowed)."""
    from vllm_doctor.knowledge.ranges import fold

    def kept_sites(messages: dict[str, Any]) -> dict[str, Any]:
        if source is None:
            return messages
        out = {}
        for key, value in messages.items():
            sites = [site for site in value["sites"] if source.keeps_site(key, site[0])]
            if sites:
                out[key] = {**value, "sites": sites}
        return out

    kept = {v: compact(kept_sites(r["messages"])) for v, r in by_version.items()}
    _versions, folded = fold({v: dict.fromkeys(m, True) for v, m in kept.items()})
    return {
        key: [
            {"first": s["first"], "last": s["last"], "sites": kept[s["last"]][key]["sites"]}
            for s in found
        ]
        for key, found in folded.items()
    }
