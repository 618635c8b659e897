"""Installed packages, read from their metadata and generated version files, never imported.

Everything here is cheap: ``importlib.metadata`` lookups by name, two small text files
(``torch/version.py`` and ``vllm/_version.py``) and no subprocess. Neither torch nor vLLM is
imported.

Facts written:
  ``packages.<canonical-name>``   version of each package of interest that is installed
                                  (canonical = PEP 503: lower case, runs of ``-_.`` → ``-``)
  ``vllm.*``                      installed, version, is_dev, base_release, git_sha, build_date,
                                  location, torch_requirement, torch_pin
  ``torch.*``                     version, cuda_version, git_version, matches_vllm_pin

A package that is not installed is simply absent (rules see it as ``exists: false``); the
``vllm`` and ``torch`` areas are marked missing with the reason when their package is absent.

Dev builds and ``vllm.base_release``: a pre-release or dev build of X.Y.Z (``0.23.1rc1.dev20+g…``)
is built from the branch *after* the release before X.Y.Z, so it descends from that release:
  X.Y.Z with Z > 0   → X.Y.(Z-1)          (0.23.1rc1.dev20 → 0.23.0, 0.25.2.dev0 → 0.25.1)
  X.Y.0 with Y > 0   → X.(Y-1).0          (the lowest release of the previous series: the exact
                                           patch release is not knowable offline, so this is the
                                           conservative bound)
  X.0.0              → (X-1).0.0
Only dev/pre-release builds get a ``base_release``; a release is its own base.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path

from vllm_doctor.facts.model import Facts, Listing, Source

# canonical fact name -> distribution names to try (first found wins)
PACKAGES: dict[str, tuple[str, ...]] = {
    "vllm": ("vllm",),
    "torch": ("torch",),
    "transformers": ("transformers",),
    "triton": ("triton",),
    "flashinfer-python": ("flashinfer-python", "flashinfer"),
    "flashinfer-cubin": ("flashinfer-cubin",),
    # FlashInfer's prebuilt JIT modules (the sampler's among them): without it they compile
    "flashinfer-jit-cache": ("flashinfer-jit-cache",),
    "deep-gemm": ("deep_gemm", "deep-gemm", "deepgemm"),
    "flash-attn": ("flash-attn", "flash_attn"),
    "xformers": ("xformers",),
    "nvidia-nccl-cu12": ("nvidia-nccl-cu12",),
    "nvidia-nccl-cu13": ("nvidia-nccl-cu13",),
    "nvidia-ml-py": ("nvidia-ml-py",),
    "torchcodec": ("torchcodec",),
    "torchvision": ("torchvision",),
    "numpy": ("numpy",),
    "ray": ("ray",),
    # ROCm's AITER: published as amd-aiter (0.1.12.post1 on), built from source as aiter
    "amd-aiter": ("amd-aiter",),
    "aiter": ("aiter",),
    # CuTe DSL kernels vLLM imports for some models (DeepSeek-V4's indexer, Gemma 4's QAT path)
    "quack-kernels": ("quack-kernels",),
    "nvidia-cutlass-dsl": ("nvidia-cutlass-dsl",),
    # the CUDA 13 pip toolkit FlashInfer's JIT compiles with: compiler and runtime headers
    # must be one major.minor (derived.cuda_compiler_matches_headers)
    "nvidia-cuda-nvcc": ("nvidia-cuda-nvcc",),
    "nvidia-cuda-runtime": ("nvidia-cuda-runtime",),
    # packages whose messages the stack knowledge reads (tools/stack_messages.py): a message of
    # one in a log is judged against the installed version
    "tokenizers": ("tokenizers",),
    "huggingface-hub": ("huggingface-hub", "huggingface_hub"),
    "xgrammar": ("xgrammar",),
    "compressed-tensors": ("compressed-tensors", "compressed_tensors"),
    "mistral-common": ("mistral-common", "mistral_common"),
    "bitsandbytes": ("bitsandbytes",),
    "lmcache": ("lmcache",),
    "nixl": ("nixl",),
    "nixl-cu12": ("nixl-cu12",),
    "nixl-cu13": ("nixl-cu13",),
    # the API server's companions whose releases broke vLLM at start-up or on requests
    # (ENV060 openai, ENV061 fastapi with the Prometheus instrumentator, ENV062 the
    # lm-format-enforcer structured-output backend)
    "openai": ("openai",),
    "fastapi": ("fastapi",),
    "prometheus-fastapi-instrumentator": ("prometheus-fastapi-instrumentator",),
    "lm-format-enforcer": ("lm-format-enforcer", "lm_format_enforcer"),
    # Hugging Face's hub-kernels package: transformers imports it when installed (ENV063)
    "kernels": ("kernels",),
}

_CANON_RE = re.compile(r"[-_.]+")


def packages_of_interest() -> dict[str, tuple[str, ...]]:
    """``PACKAGES``, every distribution the stack knowledge covers (knowledge/stack.py:
    FlashInfer's packages, quack-kernels, nvidia-cutlass-dsl, instanttensor, LMCache, ...) and
    every one the requirements knowledge reads or names (knowledge/requires.py)."""
    from vllm_doctor.knowledge import requires, stack

    found = dict(PACKAGES)
    for dist in (*stack.named_distributions(), *requires.named()):
        found.setdefault(dist, (dist,))
    return found


def machine_name(raw: str) -> str | None:
    """``platform.machine()`` spellings → the wheel platforms' names (x86_64, aarch64)."""
    lowered = raw.strip().lower()
    if lowered in ("x86_64", "amd64", "x64"):
        return "x86_64"
    if lowered in ("aarch64", "arm64"):
        return "aarch64"
    return None


def canonical_name(name: str) -> str:
    """PEP 503 normalised name, used as the ``packages.<name>`` segment."""
    return _CANON_RE.sub("-", name).lower()


def _find_dist(names: Iterable[str]) -> metadata.Distribution | None:
    for name in names:
        try:
            return metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def _package_dir(dist: metadata.Distribution, package: str) -> Path | None:
    """Directory of an installed top-level package, found without importing it."""
    try:
        candidate = Path(str(dist.locate_file(package)))
        if (candidate / "__init__.py").is_file():
            return candidate
    except Exception:  # pragma: no cover - odd distribution types
        pass
    # editable installs and odd layouts: ask the import system where it *would* load from
    import importlib.util

    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        for loc in spec.submodule_search_locations:
            return Path(loc)
    if spec.origin:
        return Path(spec.origin).parent
    return None


_ASSIGN_RE = re.compile(r"^([A-Za-z_][\w]*)\s*(?::[^=]*)?=\s*(.+?)\s*$")


def read_version_file(path: Path) -> dict[str, object]:
    """Simple ``name = literal`` assignments of a generated version file, read as text.

    Chained assignments (``__version__ = version = '1.0'``) give every name the value.
    Values are strings, ``None``, booleans or the raw text for anything else.
    """
    values: dict[str, object] = {}
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return values
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].rstrip() if not raw.lstrip().startswith(("'", '"')) else raw
        if not line or line[0].isspace():
            continue
        names: list[str] = []
        rest = line
        while True:
            m = _ASSIGN_RE.match(rest)
            if not m:
                break
            names.append(m.group(1))
            rest = m.group(2)
        if not names:
            continue
        values.update({n: _literal(rest) for n in names})
    return values


def _literal(text: str) -> object:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    if text == "None":
        return None
    if text in ("True", "False"):
        return text == "True"
    return text


# -- vLLM version strings ---------------------------------------------------------------

_SHA_G_RE = re.compile(r"^g([0-9a-f]{7,40})$")
_SHA_RE = re.compile(r"^(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}$")
_DATE_RE = re.compile(r"^d(\d{8})$")


def parse_local_label(version: str) -> tuple[str | None, str | None]:
    """(git sha, build date) from a version's local label (``+g0d8097964.d20260720``)."""
    if "+" not in version:
        return None, None
    sha = date = None
    for part in version.split("+", 1)[1].lower().split("."):
        m = _SHA_G_RE.match(part)
        if m and sha is None:
            sha = m.group(1)
            continue
        m = _DATE_RE.match(part)
        if m:
            date = m.group(1)
            continue
        if sha is None and _SHA_RE.match(part):
            sha = part
    return sha, date


def base_release_of(version: str) -> str | None:
    """The release a dev/pre-release build descends from (see the module docstring)."""
    from packaging.version import InvalidVersion, Version

    try:
        v = Version(version)
    except InvalidVersion:
        return None
    if not (v.is_devrelease or v.is_prerelease):
        return None
    parts = [*v.release, 0, 0]
    major, minor, patch = parts[0], parts[1], parts[2]
    if patch > 0:
        return f"{major}.{minor}.{patch - 1}"
    if minor > 0:
        return f"{major}.{minor - 1}.0"
    if major > 0:
        return f"{major - 1}.0.0"
    return None


def is_dev_version(version: str) -> bool | None:
    from packaging.version import InvalidVersion, Version

    try:
        v = Version(version)
    except InvalidVersion:
        return None
    return bool(v.is_devrelease or v.is_prerelease)


def set_vllm_version_facts(facts: Facts, version: str, source: str, detail: str | None) -> None:
    """vllm.version and what follows from the string alone (dev, base release, sha, date)."""
    facts.set("vllm.version", version, source, detail)
    dev = is_dev_version(version)
    facts.set("vllm.is_dev", dev, Source.DERIVED, f"from version {version}")
    if dev:
        facts.set(
            "vllm.base_release",
            base_release_of(version),
            Source.DERIVED,
            f"the release {version} descends from",
        )
    sha, date = parse_local_label(version)
    facts.set("vllm.git_sha", sha, source, "version local label" if sha else None)
    facts.set("vllm.build_date", date, source, "version local label" if date else None)


# -- torch requirement --------------------------------------------------------------------

_REQ_NAME_RE = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(.*)$")


def torch_requirement(requires: list[str] | None) -> str | None:
    """The torch requirement from ``Requires-Dist`` lines that apply here (no extras).

    Lines with an environment marker are evaluated for this interpreter; lines that only
    apply with an extra (``extra == "..."``) are skipped.
    """
    for line in requires or []:
        m = _REQ_NAME_RE.match(line)
        if not m or canonical_name(m.group(1)) != "torch":
            continue
        spec, _, marker = m.group(3).partition(";")
        marker = marker.strip()
        if marker:
            if "extra" in marker:
                continue
            try:
                from packaging.markers import Marker

                if not Marker(marker).evaluate():
                    continue
            except Exception:
                continue
        spec = spec.strip().strip("()").replace(" ", "")
        return f"torch{spec}"
    return None


def pin_of(requirement: str) -> str | None:
    """The exact version of a ``torch==X`` requirement (no wildcard, single clause)."""
    spec = requirement.removeprefix("torch")
    clauses = [c for c in spec.split(",") if c]
    if len(clauses) == 1 and clauses[0].startswith("==") and not clauses[0].startswith("==="):
        pinned = clauses[0][2:]
        if "*" not in pinned:
            return pinned
    return None


def satisfies(version: str, requirement: str) -> bool | None:
    from vllm_doctor.version_specs import admits

    return admits(requirement.removeprefix("torch"), version)


def cuda_from_torch_version(version: str) -> str | None:
    """``2.11.0+cu130`` → ``13.0``; ``+cu128`` → ``12.8``; None for cpu/rocm or no label."""
    m = re.search(r"\+cu(\d{2,3})$", version)
    if not m:
        return None
    digits = m.group(1)
    return f"{digits[:-1]}.{digits[-1]}"


# -- the collector --------------------------------------------------------------------------


def collect_packages(facts: Facts) -> None:
    """Write packages.*, vllm.* and torch.* for the running interpreter's environment. Only
    the packages of ``PACKAGES`` are looked up: any other name cannot be known from here
    (a ``Listing``; ``rules validate`` names a rule that reads one)."""
    # the listing names every package looked up below, so an absent one reads as not
    # installed (not as "not looked up")
    of_interest = packages_of_interest()
    facts.set_listing(
        Listing(
            "packages",
            "{name} is not one of the packages the doctor looks up (facts/packages.py PACKAGES)",
            names=tuple(of_interest),
        )
    )
    found: dict[str, metadata.Distribution] = {}
    versions: dict[str, str] = {}
    requires: dict[str, list[str]] = {}
    import platform

    machine = machine_name(platform.machine())
    if machine is not None:
        facts.set("vllm.machine", machine, Source.MACHINE, "platform.machine()")
    for canon, names in of_interest.items():
        dist = _find_dist(names)
        if dist is None:
            continue
        md = dist.metadata  # parsed on every access: read it once
        version = md["Version"] if md is not None else None
        if not version:
            continue
        found[canon] = dist
        versions[canon] = version
        if canon == "vllm":
            requires[canon] = md.get_all("Requires-Dist") or []
        facts.set(f"packages.{canon}", version, Source.MACHINE, str(md["Name"] or canon))
    where = f"Python {sys.version.split()[0]} at {sys.executable}"

    # torch ---------------------------------------------------------------------------
    torch_dist = found.get("torch")
    if torch_dist is None:
        facts.mark_missing("torch", f"torch is not installed ({where})")
    else:
        facts.set("torch.version", versions["torch"], Source.MACHINE, "package metadata")
        tdir = _package_dir(torch_dist, "torch")
        info = read_version_file(tdir / "version.py") if tdir else {}
        if tdir is not None and info:
            detail = str(tdir / "version.py")
            cuda = info.get("cuda")
            if cuda:
                facts.set("torch.cuda_version", str(cuda), Source.MACHINE, detail)
            else:
                kind = "ROCm" if info.get("hip") else "XPU" if info.get("xpu") else "CPU"
                facts.mark_missing("torch.cuda_version", f"torch is a {kind} build (no CUDA)")
            if info.get("git_version"):
                facts.set("torch.git_version", str(info["git_version"]), Source.MACHINE, detail)
        else:
            cuda = cuda_from_torch_version(versions["torch"])
            if cuda:
                facts.set("torch.cuda_version", cuda, Source.MACHINE, "torch version label")
            else:
                facts.mark_missing("torch.cuda_version", "torch/version.py could not be read")

    # vLLM ----------------------------------------------------------------------------
    vllm_dist = found.get("vllm")
    if vllm_dist is None:
        elsewhere = vllm_command_elsewhere()
        if elsewhere is not None:
            # `vllm serve` runs another environment's Python: this one's packages are not
            # the ones it loads (the doctor installed apart, with pipx or in its own venv)
            reason = (
                f"vLLM is not installed beside the doctor ({where}); the `vllm` command "
                f"({elsewhere[0]}) runs {elsewhere[1]}, another environment: install "
                "vllm-doctor there, or pass --report with `vllm collect-env` of it"
            )
            for area in ("vllm", "torch", "packages"):
                facts.drop_area(area)
                facts.mark_unknowable(area, reason)
            facts.set("vllm.machine", machine, Source.MACHINE, "platform.machine()")
            return
        facts.set("vllm.installed", False, Source.MACHINE, where)
        facts.mark_missing("vllm", f"vLLM is not installed ({where})")
        return
    facts.set("vllm.installed", True, Source.MACHINE, where)
    version = versions["vllm"]
    set_vllm_version_facts(facts, version, Source.MACHINE, "package metadata")
    vdir = _package_dir(vllm_dist, "vllm")
    if vdir is not None:
        facts.set("vllm.location", str(vdir), Source.MACHINE)
        info = read_version_file(vdir / "_version.py")
        if info:
            detail = str(vdir / "_version.py")
            commit = info.get("__commit_id__") or info.get("commit_id")
            if isinstance(commit, str) and commit:
                sha = commit[1:] if _SHA_G_RE.match(commit.lower()) else commit
                facts.set("vllm.git_sha", sha.lower(), Source.MACHINE, detail)
            file_version = info.get("__version__") or info.get("version")
            if isinstance(file_version, str) and file_version != version:
                facts.notes.append(
                    f"vllm/_version.py says {file_version} but the package metadata says "
                    f"{version} (a source tree over an older install?)"
                )
                label_sha, label_date = parse_local_label(file_version)
                if label_sha and "vllm.git_sha" not in facts:
                    facts.set("vllm.git_sha", label_sha, Source.MACHINE, detail)
                if label_date and "vllm.build_date" not in facts:
                    facts.set("vllm.build_date", label_date, Source.MACHINE, detail)
    else:
        facts.mark_missing("vllm.location", "the vllm package directory was not found")

    requirement = torch_requirement(requires.get("vllm"))
    if requirement is None:
        facts.mark_missing(
            "vllm.torch_requirement", "vLLM's metadata declares no torch requirement"
        )
        return
    facts.set("vllm.torch_requirement", requirement, Source.MACHINE, "vllm Requires-Dist")
    pin = pin_of(requirement)
    if pin:
        facts.set("vllm.torch_pin", pin, Source.MACHINE, "vllm Requires-Dist")
    update_torch_match(facts)


# the second line of pip's `#!/bin/sh` launcher: '''exec' "/path/to/python" "$0" "$@"
_SH_EXEC = re.compile(r"""^'''exec' "?([^"]+?)"? "\$0" "\$@"$""")


def vllm_command_elsewhere(path: str | None = None) -> tuple[str, str] | None:
    """(the `vllm` command on PATH, the Python its first line runs) when that Python belongs to
    another environment than the running one; None when there is no such command or it is
    this environment's. Read from the script's first line, never run."""
    import shutil

    command = shutil.which("vllm", path=path)
    if command is None:
        return None
    try:
        with open(command, "rb") as script:
            first = script.readline(512).decode("utf-8", "replace").strip()
            second = script.readline(512).decode("utf-8", "replace").strip()
    except OSError:
        return None
    if not first.startswith("#!"):
        return None  # a binary or a wrapper the doctor does not read
    words = first[2:].split()
    if not words:
        return None
    interpreter = words[1] if Path(words[0]).name == "env" and len(words) > 1 else words[0]
    if Path(interpreter).name == "sh":
        # pip's launcher for a long or spaced path: `#!/bin/sh`, then the exec line
        exec_line = _SH_EXEC.match(second)
        interpreter = exec_line.group(1) if exec_line else ""
    if "/" not in interpreter or not Path(interpreter).name.startswith("python"):
        return None  # `#!/usr/bin/env python3` (whichever Python is first on PATH), a wrapper
    prefix = Path(interpreter).parent.parent
    ours = {Path(sys.prefix), Path(sys.executable).parent.parent}
    try:
        if prefix.resolve() in {p.resolve() for p in ours} or prefix in ours:
            return None
    except OSError:
        return None
    return command, interpreter


def update_torch_match(facts: Facts) -> None:
    """torch.matches_vllm_pin from torch.version and vllm.torch_requirement, when both exist."""
    requirement = facts.value("vllm.torch_requirement")
    if not requirement:
        return
    torch_version = facts.value("torch.version")
    if torch_version is None:
        if facts.value("vllm.installed") and facts.why_missing("torch"):
            facts.set(
                "torch.matches_vllm_pin",
                False,
                Source.DERIVED,
                f"vLLM requires {requirement}; torch is not installed",
            )
        return
    ok = satisfies(str(torch_version), str(requirement))
    facts.set(
        "torch.matches_vllm_pin",
        ok,
        Source.DERIVED,
        f"torch {torch_version} vs vLLM's {requirement}",
    )


def apply_version_overrides(
    facts: Facts, vllm_version: str | None, torch_version: str | None
) -> None:
    """What-if versions from the command line replace the observed ones (Source.USER)."""
    if vllm_version:
        for key in (
            "vllm.version",
            "vllm.is_dev",
            "vllm.base_release",
            "vllm.git_sha",
            "vllm.build_date",
            "vllm.location",
        ):
            facts.values.pop(key, None)
        facts.missing.pop("vllm", None)
        set_vllm_version_facts(facts, vllm_version, Source.USER, "--vllm-version")
        facts.mark_missing(
            "vllm.location", "--vllm-version given: the installed source does not describe it"
        )
        facts.notes.append(f"what-if: vLLM version {vllm_version} (--vllm-version)")
    if torch_version:
        for key in ("torch.version", "torch.cuda_version", "torch.git_version"):
            facts.values.pop(key, None)
        facts.missing.pop("torch", None)
        facts.missing.pop("torch.cuda_version", None)
        facts.set("torch.version", torch_version, Source.USER, "--torch-version")
        cuda = cuda_from_torch_version(torch_version)
        if cuda:
            facts.set("torch.cuda_version", cuda, Source.USER, "--torch-version label")
        else:
            facts.mark_missing(
                "torch.cuda_version",
                f"--torch-version {torch_version} names no CUDA build (+cuXYZ)",
            )
        facts.notes.append(f"what-if: torch version {torch_version} (--torch-version)")
    if vllm_version or torch_version:
        facts.values.pop("torch.matches_vllm_pin", None)
        if vllm_version and facts.get("vllm.torch_requirement") is not None:
            # the installed vLLM's requirement says nothing about another version
            facts.values.pop("vllm.torch_requirement", None)
            facts.values.pop("vllm.torch_pin", None)
            facts.mark_missing(
                "vllm.torch_requirement",
                "--vllm-version given: its torch requirement is not known offline",
            )
        update_torch_match(facts)


def apply_package_overrides(facts: Facts, versions: dict[str, str]) -> None:
    """``--package NAME==VERSION``: the named packages at those versions (Source.USER), the
    facts a report's pip list or this machine's metadata would set; the others stay as
    observed."""
    for name, version in sorted(versions.items()):
        facts.set(f"packages.{name}", version, Source.USER, f"--package {name}=={version}")
    if versions:
        facts.notes.append(
            "what-if: "
            + ", ".join(f"{name}=={version}" for name, version in sorted(versions.items()))
            + " (--package)"
        )
