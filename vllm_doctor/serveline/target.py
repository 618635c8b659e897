"""What a deployment file says about one container that runs vLLM (``Target``), and the pieces
every reader of such files shares: values with the line they were read from (``Placed``),
references resolved from the variables the file sets (``$(VAR)``, ``$VAR``, ``${VAR}``) or left
out where the file cannot settle them, the command a container runs, GPU counts and quantities.
The readers (manifest.py for Kubernetes, compose.py, dockerfile.py) build Targets from these."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

from vllm_doctor.errors import InputError
from vllm_doctor.facts.model import Fact, Facts, Source
from vllm_doctor.serveline.images import (  # noqa: F401 (image_vllm_version: tests, callers)
    _VLLM_WORDS,
    IMAGE_ENTRYPOINT,
    _runs_vllm,
    entrypoint,
    image_vllm_version,
    is_vllm_image,
    pip_vllm_version,
    put_image_vllm_version,
)

# what an image runs lives in images.py (the container run reader reads it too); the names stay
# importable from here for the manifest and Dockerfile readers
from vllm_doctor.serveline.quantities import DEFAULT_SHM_MIB, quantity_mib  # noqa: F401

MANIFEST = "manifest"


_SHELLS = {"sh", "bash", "dash", "zsh", "ash"}


# the labels that name a node's GPU (GPU feature discovery, GKE, Karpenter, the common
# hand-made one)
GPU_LABELS = (
    "nvidia.com/gpu.product",
    "cloud.google.com/gke-accelerator",
    "karpenter.k8s.aws/instance-gpu-name",
    "accelerator",
)


# other providers' labels for the same thing (Volcengine's .../gpu-name, ...)
_GPU_LABEL_ENDINGS = ("/gpu.product", "/gpu-product", "/gpu-name", "/gpu.name", "-accelerator")


def is_gpu_label(key: Any) -> bool:
    return isinstance(key, str) and (key in GPU_LABELS or key.endswith(_GPU_LABEL_ENDINGS))


# volcano.sh/vgpu-number counts vGPUs, each on its own physical GPU (volcano's vgpu plugin)
GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu", "volcano.sh/vgpu-number")
# the resources only a vGPU device plugin serves, whose containers it gives HAMi-core's
# libvgpu.so through /etc/ld.so.preload: HAMi's (chart defaults) and volcano's
# vgpu-device-plugin's; HAMi also serves nvidia.com/gpu, which alone does not say which
# plugin runs, nor does its scheduler's name without one of these
VGPU_RESOURCES = (
    "nvidia.com/gpumem",
    "nvidia.com/gpumem-percentage",
    "nvidia.com/gpucores",
    "volcano.sh/vgpu-number",
    "volcano.sh/vgpu-memory",
    "volcano.sh/vgpu-cores",
)


@dataclass
class Placed:
    """A value and the line of the file it was read from."""

    value: Any
    line: int
    what: str  # the field as written ("resources.limits.nvidia.com/gpu")
    file: str | None = None  # another file than the target's (a KServe runtime's)


@dataclass
class Target:
    """One container that runs vLLM, and what its file says about it."""

    file: str  # as the user named it ("-" for standard input)
    kind: str  # "Deployment", "compose service", "Dockerfile"
    name: str  # "Deployment/vllm container vllm"
    line: int
    words: list[str] = field(default_factory=list)  # the command, references resolved
    command_line: int = 0  # where the command (or args) starts
    unresolved: dict[str, str] = field(default_factory=dict)  # option ("model") -> reference
    image: Placed | None = None
    # a Dockerfile's install of vLLM: the version (None: unpinned) and the RUN line
    install: Placed | None = None
    image_unknown: str | None = None  # why no image is named (it comes from elsewhere)
    words_from: str | None = None  # where the command comes from when the file has none
    joined: str | None = None  # the serve line given beside the file, when one completes it
    joined_words: set[str] = field(default_factory=set)  # the words that line added
    env: dict[str, Placed] = field(default_factory=dict)  # value None: set from elsewhere
    env_elsewhere: str | None = None  # envFrom / env_file: other variables not shown
    # variables the orchestrator injects, not written in the container (Kubernetes' service
    # links): inferred, so they never decide an error alone
    service_links: dict[str, Placed] = field(default_factory=dict)
    gpus: Placed | None = None
    gpus_unknown: str | None = None
    nodes: Placed | None = None
    nodes_unknown: str | None = None  # why the pods of the group are not known
    gpu_product: Placed | None = None
    gpu_product_unknown: str | None = None
    # the CUDA interposer the container's GPUs come with ("hami-core"), or None with
    # interposer_off naming the variable that turns the plugin's preload off
    interposer: Placed | None = None
    interposer_off: Placed | None = None
    shm: Placed | None = None  # MiB (int), or a str for an unsized one ("ipc: host")
    shm_unknown: str | None = None
    text_lines: list[str] = field(default_factory=list, repr=False)
    # read from a directory: every file's lines, for words found in another file than
    # the target's (a KServe runtime's args)
    texts: dict[str, list[str]] = field(default_factory=dict, repr=False)
    # where the command's words are looked for, in order: (file or None for the target's,
    # first line); empty: the target's file from the command's line
    word_starts: list[tuple[str | None, int]] = field(default_factory=list)
    # fact path -> line, filled when the facts are written (for report locations)
    fact_lines: dict[str, int] = field(default_factory=dict)
    # fact path -> file, for a fact read from another file than the target's
    fact_files: dict[str, str] = field(default_factory=dict)

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    def at(self, placed: Placed) -> str:
        """``file:line`` of a value read from the file."""
        return f"{placed.file or self.file}:{placed.line}"

    def place_of(self, word: str) -> tuple[str, int] | None:
        """(file, line) of the first line holding ``word`` as a word, looked for from each of
        ``word_starts`` in turn."""
        starts = self.word_starts or [(None, self.command_line or self.line)]
        for file, start in starts:
            if file is None or file == self.file:
                number = self.line_of(word, start)
            else:
                number = _line_in(self.texts.get(file, []), word, start)
            if number:
                return file or self.file, number
        return None

    def line_of(self, word: str, start: int | None = None) -> int | None:
        """The first line from ``start`` (the command's) that holds ``word`` as a word."""
        return _line_in(self.text_lines, word, start or self.command_line or self.line)

    def serve_line(self):
        """The parsed serve line (``serveline.line.ServeLine``)."""
        from vllm_doctor.serveline.parser import parse_serve_argv
        from vllm_doctor.serveline.words import _strip_prefix

        env_words, args, entry = _strip_prefix(list(self.words))
        if not args and self.unresolved:  # all of it comes at run time (`docker run IMAGE ARGS`)
            from vllm_doctor.serveline.line import ServeLine

            line = ServeLine(tokens=[], model=None, entrypoint=entry)
            line.env_tokens = list(env_words)
            line.env.update(w.partition("=")[::2] for w in env_words)
            return line
        try:
            return parse_serve_argv(list(self.words))
        except InputError as err:
            raise InputError(f"{self.where} ({self.name})", err.problem) from None

    def join(self, given: list[str], origin: str) -> None:
        """Complete the file's line with a serve line given beside it (``-- vllm serve ...``,
        ``--serve``): its arguments follow the file's, as run time appends them (``docker run
        IMAGE ARGS``, an InferenceService's args); its model replaces the file's, its options
        win over the file's. What it settles is no longer open."""
        from vllm_doctor.serveline.parser import parse_serve_argv
        from vllm_doctor.serveline.words import _strip_prefix

        _, given_args, _ = _strip_prefix(list(given))
        if not given_args:
            raise InputError(origin, "no model and no options after `vllm serve`")
        given_line = parse_serve_argv(list(given))
        _, file_args, _ = _strip_prefix(list(self.words))
        head = self.words[: len(self.words) - len(file_args)]
        if given_line.model is not None and file_args:
            try:
                span = parse_serve_argv(list(self.words)).model_span
            except InputError:
                span = None
            if span is not None:
                file_args = file_args[: span[0]] + file_args[span[1] :]
            self.unresolved.pop("model", None)
        self.words = head + file_args + given_args
        self.joined_words = set(given_args)
        self.unresolved.pop(MORE_ARGUMENTS, None)
        for option in given_line.given:
            self.unresolved.pop(option, None)
        self.joined = origin

    # -- facts ---------------------------------------------------------------------------
    def write_facts(self, facts: Facts) -> None:
        """What the file states about where the line runs (before the serve line)."""
        detail = lambda placed: f"{self.at(placed)} {placed.what}"  # noqa: E731
        facts.set("deploy.file", self.file, MANIFEST, self.where)
        facts.set("deploy.target", self.name, MANIFEST, self.where)
        self.fact_lines.update({"deploy.file": self.line, "deploy.target": self.line})
        self._put(facts, "deploy.image", self.image)
        self._image_version(facts)
        # the container's variables are the environment vLLM sees
        facts.drop_area("env")
        for name, placed in self.env.items():
            if placed.value is None:
                facts.mark_missing(
                    f"env.{name}",
                    f"{detail(placed)}: set from a Secret, "
                    "ConfigMap or field the manifest does not show",
                )
            else:
                from vllm_doctor.redact import REDACTED, is_secret_name, remember_secret

                if is_secret_name(name):  # hidden here and wherever it was expanded to
                    remember_secret(str(placed.value))
                shown = REDACTED if is_secret_name(name) else placed.value
                self._put(
                    facts, f"env.{name}", Placed(shown, placed.line, placed.what, placed.file)
                )
        for name, placed in self.service_links.items():
            if facts.infer(f"env.{name}", placed.value, f"{self.at(placed)} {placed.what}"):
                self._place(f"env.{name}", placed)
        if self.env_elsewhere:
            facts.mark_missing("env", f"{self.file}: {self.env_elsewhere}")
        # the GPUs the pod asks for and on which product
        facts.drop_area("gpu")
        if self.gpus is not None:
            self._put(facts, "deploy.gpus_per_pod", self.gpus)
            self._put(facts, "gpu.count", self.gpus)
        else:
            reason = (
                self.gpus_unknown
                or f"{self.where}: the container asks for no GPU "
                "(resources.limits nvidia.com/gpu); pass --gpus N"
            )
            for path in ("deploy.gpus_per_pod", "deploy.gpus", "gpu.count"):
                facts.mark_missing(path, reason)
        if self.nodes is None and self.nodes_unknown:
            for path in ("deploy.nodes", "deploy.gpus"):
                facts.mark_missing(path, self.nodes_unknown)
            nodes = Placed(None, self.line, "")
        else:
            nodes = self.nodes or Placed(1, self.line, "one pod per replica")
            self._put(facts, "deploy.nodes", nodes)
        if self.gpus is not None and isinstance(nodes.value, int):
            facts.set(
                "deploy.gpus",
                self.gpus.value * nodes.value,
                Source.DERIVED,
                "GPUs per pod × pods per group",
            )
            self._place("deploy.gpus", self.gpus)
        self._gpu_product(facts)
        facts.mark_missing(
            "gpu",
            self.gpu_product_unknown
            or (
                f"{self.where}: no node selector or affinity names the GPU product "
                f"({GPU_LABELS[0]}); pass --gpu NAME"
            ),
        )
        for area in ("torch", "packages"):
            facts.mark_missing(
                area,
                f"{self.file}: the image's {area} are not read from its "
                "tag; pass --report collect-env.txt (run in the container)",
            )
        for area in ("driver", "topology"):
            facts.mark_missing(
                area,
                f"{self.file} does not state the node's {area}; run on "
                "the node or pass --report collect-env.txt",
            )
        # shared memory
        if self.shm is not None:
            facts.set("deploy.shm_default", False, MANIFEST, detail(self.shm))
            self._place("deploy.shm_default", self.shm)
            if isinstance(self.shm.value, int):
                self._put(facts, "deploy.shm_mib", self.shm)
        elif self.shm_unknown:
            facts.mark_missing("deploy.shm_default", self.shm_unknown)
            facts.mark_missing("deploy.shm_mib", self.shm_unknown)
        else:
            what = (
                "no emptyDir with medium: Memory mounted at /dev/shm"
                if self.kind != "compose service"
                else "no shm_size, no ipc: host"
            )
            facts.set("deploy.shm_default", True, MANIFEST, f"{self.where} {what}")
            facts.set(
                "deploy.shm_mib",
                DEFAULT_SHM_MIB,
                Source.DEFAULT,
                "the container runtime's /dev/shm",
            )
            self.fact_lines["deploy.shm_default"] = self.line

    def write_platform(self, facts: Facts) -> None:
        """What the file says of the platform its container runs on (after the platform is
        marked not examined): the CUDA interposer a vGPU device plugin preloads."""
        if self.interposer_off is not None:  # stated absent: the plugin preloads nothing
            facts.missing.pop("platform.cuda_interposer", None)
            self._place("platform.cuda_interposer", self.interposer_off)
        elif self.interposer is not None:
            self._put(facts, "platform.cuda_interposer", self.interposer)

    def _put(self, facts: Facts, path: str, placed: Placed | None) -> None:
        if placed is not None:
            facts.set(path, placed.value, MANIFEST, f"{self.at(placed)} {placed.what}")
            self._place(path, placed)

    def _place(self, path: str, placed: Placed) -> None:
        self.fact_lines[path] = placed.line
        if placed.file and placed.file != self.file:
            self.fact_files[path] = placed.file

    def _image_version(self, facts: Facts) -> None:
        if self.install is not None:  # a Dockerfile's `pip install vllm==X` over its base
            placed, why = self.install, self.install.what
            version = placed.value
        elif self.image is not None:
            placed = self.image
            version, why = image_vllm_version(str(self.image.value))
            if version is not None:
                why = f"image {self.image.value} ({why})"
        else:
            facts.mark_missing("vllm", f"{self.where}: {self.image_unknown or 'no image named'}")
            return
        if version is None:
            facts.mark_missing("vllm", f"{self.at(placed)} {why}; pass --vllm-version V")
            return
        put_image_vllm_version(facts, version, MANIFEST, f"{self.at(placed)} {why}")
        self._place("vllm.version", placed)

    def _gpu_product(self, facts: Facts) -> None:
        """The product and count through the same entry point as --gpu/--gpus."""
        if self.gpu_product is None:
            return
        from vllm_doctor.facts.hardware import TargetHardware, apply_target_hardware

        name = " ".join(str(self.gpu_product.value).replace("_", "-").split("-"))
        where = f"{self.at(self.gpu_product)} {self.gpu_product.what}"
        try:
            apply_target_hardware(
                facts,
                TargetHardware(
                    gpu=name,
                    count=self.gpus.value if self.gpus is not None else None,
                    origin=MANIFEST,
                    detail=where
                    + (f"; {self.at(self.gpus)} {self.gpus.what}" if self.gpus is not None else ""),
                ),
            )
        except InputError as err:
            self.gpu_product_unknown = f"{where}: {err.problem}; pass --gpu NAME"
            return
        for path in (
            "gpu.count",
            "gpu.names",
            "gpu.capabilities",
            "gpu.min_capability",
            "gpu.max_capability",
        ):
            if path in facts:
                self._place(path, self.gpu_product)
        if self.gpus is not None:
            self._place("gpu.count", self.gpus)
        else:  # the product alone: how many the pod gets is not stated, never one by default
            for path in ("gpu.count", "gpu.names", "gpu.devices", "gpu.capabilities"):
                facts.values.pop(path, None)
                facts.mark_missing(
                    path,
                    self.gpus_unknown
                    or f"{self.where}: the container "
                    "asks for no GPU (resources.limits nvidia.com/gpu)",
                )
        self.gpu_product_unknown = f"{where}: the rest of the GPU's facts are measured on the node"

    def place_serve_facts(self, facts: Facts) -> None:
        """After the serve line's facts: the file and line of each flag in its evidence, and
        the options whose values the file could not settle marked undecided."""
        places: dict[str, tuple[str, int]] = {}
        for path, fact in list(facts.area("serve")):
            if fact.source != Source.DEFAULT and fact.detail and path != "serve.world_size":
                flag = fact.detail.split(" ", 1)[0].split("=", 1)[0]
                if self.joined and flag in self.joined_words:  # the line given beside it
                    facts.values[path] = Fact(
                        fact.value, fact.source, f"{self.joined}: {fact.detail}"
                    )
                    continue
                place = self.place_of(flag)
                if place:
                    places[path] = place
        for parallel in ("serve.tensor_parallel_size", "serve.pipeline_parallel_size"):
            if parallel in places and "serve.world_size" in facts:
                places["serve.world_size"] = places[parallel]
                break
        for path, (file, number) in places.items():
            fact = facts.values[path]
            facts.values[path] = Fact(fact.value, fact.source, f"{file}:{number} {fact.detail}")
            self._place(path, Placed(fact.value, number, path, file))
        if MORE_ARGUMENTS in self.unresolved:
            reason = (
                f"{self.where}: the command ends in {self.unresolved[MORE_ARGUMENTS]} — the "
                "runtime appends options the file does not show, so no option takes its "
                "default for certain"
            )
            for path, fact in list(facts.area("serve")):
                if fact.source == Source.DEFAULT or path == "serve.world_size":
                    facts.values.pop(path)
                    facts.mark_missing(path, reason)
        from vllm_doctor.serveline.line import _FACT_OPTIONS

        by_option = {option: f"serve.{name}" for name, (option, _, _) in _FACT_OPTIONS.items()}
        for option, reference in self.unresolved.items():
            if option == MORE_ARGUMENTS:
                continue
            reason = (
                f"{self.where}: {reference} is not set in the manifest (a Secret, "
                "ConfigMap or the host's environment): its value is not known"
            )
            paths = [by_option.get(option, f"serve.{option.replace('-', '_')}")]
            if option in (
                "tensor-parallel-size",
                "pipeline-parallel-size",
                "prefill-context-parallel-size",
            ):
                paths.append("serve.world_size")
            if option == "model":
                paths = ["serve.model", "model"]
            for path in paths:
                facts.values.pop(path, None)
                facts.mark_missing(path, reason)


_MARK = "\x1e"


_MARKED = re.compile(_MARK + r"(\d+)" + _MARK)


class _Refs:
    """References the file cannot settle, each replaced by a marker word part."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def mark(self, reference: str) -> str:
        self.texts.append(reference)
        return f"{_MARK}{len(self.texts) - 1}{_MARK}"

    def find(self, word: str) -> str | None:
        found = _MARKED.search(word)
        return self.texts[int(found.group(1))] if found else None


_K8S_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


# $$, ${VAR...}, $VAR, arithmetic $((...)), command substitutions ($(...), `...`) and the
# special parameters ($@, $1, ...): only named variables can be settled from the file
_SH_REF = re.compile(
    r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-=+?])([^}]*))?\}|"
    r"\$([A-Za-z_][A-Za-z0-9_]*)|\$\(\((?:[^()]|\([^()]*\))*\)\)|"
    r"\$\([^()]*\)|`[^`]*`|\$[@*#?!0-9-]"
)


# the arguments a runtime appends to the script ("$@"): more options the file does not show
MORE_ARGUMENTS = "more arguments"


def _known(env: dict[str, Placed], name: str) -> str | None:
    placed = env.get(name)
    return None if placed is None or placed.value is None else str(placed.value)


def expand_kubernetes(word: str, env: dict[str, Placed], refs: _Refs) -> str:
    """``$(VAR)`` from the container's env (``$$`` is a literal ``$``), as the kubelet does."""

    def one(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        value = _known(env, m.group(1))
        return value if value is not None else refs.mark(m.group(0))

    return _K8S_REF.sub(one, word)


def expand_shell(script: str, env: dict[str, Placed], refs: _Refs) -> str:
    """``$VAR``/``${VAR}``/``${VAR:-default}`` from the container's variables, as ``sh -c``
    expands them (outside single quotes; a default applies to a variable the file leaves
    unset only when the file sets the container's whole environment)."""
    out, last = [], 0
    quoted = _single_quoted(script)  # in order: one pass over both lists, linear time
    span = 0
    for m in _SH_REF.finditer(script):
        while span < len(quoted) and quoted[span][1] <= m.start():
            span += 1
        if span < len(quoted) and quoted[span][0] <= m.start():
            continue  # inside '...': the shell leaves it as written
        out.append(script[last : m.start()])
        last = m.end()
        name = m.group(1) or m.group(4)
        if name is None:  # $$ (the shell's pid) or a command's output
            out.append(refs.mark(m.group(0)))
            continue
        value = _known(env, name)
        if (
            value is None
            or ((m.group(2) or "").startswith(":") and value == "")
            or (m.group(2) or "").lstrip(":") in ("=", "+", "?")
        ):
            out.append(refs.mark(m.group(0)))
        else:
            out.append(value)  # unquoted, the shell splits it into words as vLLM sees them
    out.append(script[last:])
    return "".join(out)


def _single_quoted(text: str) -> list[tuple[int, int]]:
    spans, quote, start = [], None, 0
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and quote != "'":
            i += 2
            continue
        if quote is None and ch in "'\"":
            quote, start = ch, i
        elif quote == ch:
            if ch == "'":
                spans.append((start, i))
            quote = None
        i += 1
    return spans


def drop_unresolved(words: list[str], refs: _Refs) -> tuple[list[str], dict[str, str]]:
    """The words without those holding an unsettled reference: a flag's value goes with its
    flag, a positional word is the model. Returns (words, option or "model" -> reference)."""
    from vllm_doctor.serveline.options import option_spec

    kept: list[str] = []
    unresolved: dict[str, str] = {}
    for word in words:
        reference = refs.find(word)
        if reference is None:
            kept.append(word)
            continue
        if word.startswith("-"):
            flag = word.split("=", 1)[0]
            spec = option_spec(flag)
            unresolved[spec.name if spec else flag.lstrip("-")] = reference
            continue
        previous = kept[-1] if kept else ""
        spec = option_spec(previous) if previous.startswith("-") and "=" not in previous else None
        if spec is not None and spec.takes_value:
            kept.pop()
            unresolved[spec.name] = reference
        elif reference in ("$@", "$*"):
            unresolved[MORE_ARGUMENTS] = reference
        elif _is_serve_start(kept):
            unresolved["model"] = reference
        else:
            kept.append(word)  # a word of the command before vLLM's (a wrapper's argument)
    return kept, unresolved


def _is_serve_start(kept: list[str]) -> bool:
    return any(os.path.basename(w) in _VLLM_WORDS or w == "serve" for w in kept)


def resolve_command(words: list[str], env: dict[str, Placed], refs: _Refs) -> list[str] | None:
    """The vLLM command in a container's command words (through ``sh -c`` scripts), with the
    references settled or marked; None when the command does not run vLLM."""
    from vllm_doctor.serveline.words import command_words

    if words and os.path.basename(words[0]) in _SHELLS:
        for i, word in enumerate(words[1:], 1):
            if re.fullmatch(r"-[a-z]*c[a-z]*", word) and i + 1 < len(words):
                # `bash -lc -- SCRIPT`: "--" ends the shell's options (KubeRay's samples)
                at = i + 2 if words[i + 1] == "--" and i + 2 < len(words) else i + 1
                from vllm_doctor.bounds import MAX_SCRIPT

                if len(words[at]) > MAX_SCRIPT:
                    raise InputError(
                        "sh -c script",
                        f"{len(words[at]):,} characters; a container's script is read up "
                        f"to {MAX_SCRIPT // 1024} KiB",
                    )
                script = expand_shell(words[at], env, refs)
                if not re.search(r"(^|[\s/;&|(])(vllm(\s|$)|vllm\.entrypoints)", script):
                    return None
                try:
                    return command_words(script)
                except InputError:
                    return None
            if not word.startswith("-"):
                break
    return words if _runs_vllm(words) else None


def _line_in(lines: list[str], word: str, start: int) -> int | None:
    """The first of ``lines`` from ``start`` (1-based) that holds ``word`` as a word."""
    if not word:
        return None
    pattern = re.compile(r"(?<![\w-])" + re.escape(word) + r"(?![\w-])")
    for number in range(max(1, start), len(lines) + 1):
        if pattern.search(lines[number - 1]):
            return number
    return None


def _file(node: Any, key: Any = None) -> str | None:
    """The file a mapping's key (a list's item) was read from, when the input was a directory
    (``LineDict.file``, ``files``); None: the target's own file."""
    files = getattr(node, "files", None)
    if key is not None and files:
        if isinstance(files, dict) and key in files:
            return files[key]
        if isinstance(files, list) and isinstance(key, int) and key < len(files):
            return files[key]
    return getattr(node, "file", None)


def _get(node: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return node


def _line(node: Any, key: Any = None, default: int = 0) -> int:
    if key is not None and isinstance(node, dict):
        return getattr(node, "lines", {}).get(key, default)
    return getattr(node, "line", default)


def _new_target(
    file: str,
    kind: str,
    name: str,
    node: dict,
    line: int,
    command_keys: tuple[str, ...],
    words: list[str],
    env: dict[str, Placed],
    refs: _Refs,
) -> Target | None:
    """The target of a container or service (its mapping ``node``) whose command is
    ``words``; None when that command does not run vLLM."""
    try:
        resolved = resolve_command(words, env, refs)
    except InputError as err:
        raise InputError(f"{file}:{line} ({name}) {err.source}", err.problem) from None
    if resolved is None:
        return None
    kept, unresolved = drop_unresolved(resolved, refs)
    target = Target(file, kind, name, line, kept, unresolved=unresolved, env=env)
    target.command_line = min([_line(node, k) for k in command_keys if k in node] or [line])
    if node.get("image"):
        target.image = Placed(
            str(node["image"]), _line(node, "image"), "image", _file(node, "image")
        )
    return target


def _gpu_count(raw: Any, where: str) -> int:
    """A GPU count as a manifest states it; ValueError when it is not a count, InputError
    when it is one no pod or service can have (``bounds.MAX_GPUS``)."""
    from vllm_doctor.bounds import MAX_GPUS

    text = str(raw).strip()
    if len(text) > 20 or isinstance(raw, bool) or not re.fullmatch(r"[+-]?\d+", text):
        if len(text) > 20 and text.lstrip("+-").isdigit():
            raise InputError(where, f"a {len(text)}-digit GPU count")
        raise ValueError(text)
    count = int(text)
    if not 0 <= count <= MAX_GPUS:
        raise InputError(where, f"{count} GPUs: a pod or service has between 0 and {MAX_GPUS}")
    return count
