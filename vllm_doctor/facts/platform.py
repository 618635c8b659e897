"""The platform vLLM runs on and the identity of its container (``platform.*``,
``container.*``), and what the GPUs' names say about their architecture and memory
(``gpu.gfx_targets``, ``gpu.unified_memory``).

Live collection reads a few small files and calls ``os`` and ``pwd``: the kernel's release
(``/proc/sys/kernel/osrelease``: WSL2's says ``microsoft``), whether this is a container
(``/.dockerenv``, ``/run/.containerenv``, Kubernetes' variables), the C++ runtime a wheel's
extensions load (the ``libstdc++.so.6`` link's target names its GLIBCXX level), the UID and
whether the passwd database knows it (``getpass.getuser()`` and torch's compile cache need a
name), HOME and the cache directories vLLM, Triton and the Hugging Face hub write to (an
arbitrary OpenShift UID with HOME=/ cannot create ``/.cache``). Nothing is imported beyond
the standard library, nothing is written.

A collect-env report gives the kernel (its ``Python platform`` line) and so WSL2, and the
distribution's release (its ``OS`` line), from which the system libstdc++ is inferred
(facts/distro.py); the container's identity cannot be known from it.
`check --platform` states the platform judged (wsl2, container, kernel=R, ...) in place of
this machine's or a report's, for a platform a report names only in prose.

Facts written:
  ``platform.kernel``, ``platform.kernel_cmdline``, ``platform.wsl``, ``platform.container``,
  ``platform.glibcxx``, ``platform.os`` (facts/distro.py), ``platform.c_compiler_found``, ``platform.nvcc_found``
  (facts/toolkit.py), ``platform.cuda_interposer`` (/etc/ld.so.preload and LD_PRELOAD; a
  manifest's vGPU resources in serveline/target.py)
  ``container.uid``, ``container.uid_in_passwd``, ``container.user_known``,
  ``container.home``, ``container.home_writable``, ``container.unwritable_caches``
  ``container.arbitrary_uid`` (stated only: ``--platform arbitrary-uid``)
  ``gpu.gfx_targets`` (from a report's ROCm devices, else the GPU table by name: inferred)
  ``gpu.unified_memory`` (the GPU table's family and knowledge/data/unified_memory.json)
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from vllm_doctor.facts.model import Facts, Source

PLATFORM_PATHS = (
    "platform.kernel",
    "platform.kernel_cmdline",
    "platform.wsl",
    "platform.container",
    "platform.glibcxx",
    "platform.os",  # facts/distro.py
    "platform.nvcc_found",  # facts/toolkit.py
    "platform.c_compiler_found",
    "platform.cuda_interposer",
)
CONTAINER_PATHS = (
    "container.uid",
    "container.uid_in_passwd",
    "container.user_known",
    "container.home",
    "container.home_writable",
    "container.unwritable_caches",
    "container.arbitrary_uid",
)
# the libstdc++ of the loader's usual places (Debian/Ubuntu multiarch, RHEL, a conda base)
_LIBSTDCXX = (
    "/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
    "/usr/lib/aarch64-linux-gnu/libstdc++.so.6",
    "/usr/lib64/libstdc++.so.6",
    "/lib64/libstdc++.so.6",
)
# getpass.getuser() reads these before it asks the passwd database
_USER_VARIABLES = ("LOGNAME", "USER", "LNAME", "USERNAME")


def collect_platform(facts: Facts, environ: Mapping[str, str], root: Path = Path("/")) -> None:
    """This machine's platform and container identity."""
    kernel = _read(root / "proc/sys/kernel/osrelease")
    if kernel is not None:
        facts.set("platform.kernel", kernel, Source.MACHINE, "/proc/sys/kernel/osrelease")
    else:
        facts.mark_missing("platform.kernel", "/proc/sys/kernel/osrelease cannot be read")
    cmdline = _read(root / "proc/cmdline", 4096)
    if cmdline is not None:
        facts.set("platform.kernel_cmdline", cmdline, Source.MACHINE, "/proc/cmdline")
    else:
        facts.mark_missing("platform.kernel_cmdline", "/proc/cmdline cannot be read")
    wsl = (kernel is not None and "microsoft" in kernel.lower()) or "WSL_DISTRO_NAME" in environ
    facts.set(
        "platform.wsl",
        wsl,
        Source.MACHINE,
        f"kernel {kernel}" if kernel is not None else "WSL_DISTRO_NAME",
    )
    markers = [p for p in ("/.dockerenv", "/run/.containerenv") if (root / p.lstrip("/")).exists()]
    in_k8s = "KUBERNETES_SERVICE_HOST" in environ
    facts.set(
        "platform.container",
        bool(markers) or in_k8s,
        Source.MACHINE,
        ", ".join(markers + (["KUBERNETES_SERVICE_HOST"] if in_k8s else []))
        or "no /.dockerenv, /run/.containerenv or KUBERNETES_SERVICE_HOST",
    )
    _glibcxx(facts, root)
    _os_release(facts, root)
    _identity(facts, environ)
    _cuda_interposer(facts, environ, root)
    from vllm_doctor.facts.toolkit import PATH, find_nvcc

    found, how = find_nvcc(environ, root)
    facts.set(PATH, found, Source.MACHINE, how)
    found, how = find_c_compiler(environ, root)
    facts.set("platform.c_compiler_found", found, Source.MACHINE, how)


# A library preloaded into every process that intercepts its CUDA driver calls, by the name
# its file has: HAMi-core's libvgpu.so, which HAMi's device plugin and volcano's
# vgpu-device-plugin mount into a container and preload through /etc/ld.so.preload (no
# preload where the container sets CUDA_DISABLE_CONTROL=true). Under it NCCL's communicator
# init has crashed or hung in vLLM's tensor-parallel start-up (HW050).
CUDA_INTERPOSERS = (("hami-core", re.compile(r"(?:^|/)libvgpu\.so(?:\.[\w.-]+)?$")),)


def interposer_of(library: str) -> str | None:
    """The name of the CUDA interposer a preloaded library path is, if it is one."""
    for name, pattern in CUDA_INTERPOSERS:
        if pattern.search(library.strip()):
            return name
    return None


def _cuda_interposer(facts: Facts, environ: Mapping[str, str], root: Path) -> None:
    """``platform.cuda_interposer``: what /etc/ld.so.preload and LD_PRELOAD preload."""
    preload = root / "etc/ld.so.preload"
    try:
        listed = preload.read_text(encoding="utf-8", errors="replace")[:65536].split()
    except FileNotFoundError:
        listed = []
    except OSError as err:
        facts.mark_missing(
            "platform.cuda_interposer", f"/etc/ld.so.preload cannot be read: {err.strerror}"
        )
        return
    places = [("/etc/ld.so.preload", word) for word in listed]
    places += [("LD_PRELOAD", w) for w in environ.get("LD_PRELOAD", "").replace(":", " ").split()]
    for where, library in places:
        name = interposer_of(library)
        if name is not None:
            facts.set("platform.cuda_interposer", name, Source.MACHINE, f"{where} names {library}")
            return


# Triton builds its driver utilities and each kernel's launcher with $CC, else gcc, else clang
# found on PATH (triton/runtime/build.py, 3.2-3.8), and raises "Failed to find C compiler"
# when none is there (ENV298, ENV067)
TRITON_COMPILERS = ("gcc", "clang")


def find_c_compiler(environ: Mapping[str, str], root: Path = Path("/")) -> tuple[bool, str]:
    """Whether Triton finds a host C compiler here, and how it was decided."""
    if environ.get("CC"):
        return True, f"CC={environ['CC']}"
    folders = [d for d in environ.get("PATH", "").split(os.pathsep) if d.startswith("/")]
    for name in TRITON_COMPILERS:
        for folder in folders:
            candidate = root / folder.lstrip("/") / name
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return True, f"{name} on PATH ({Path(folder) / name})"
    return False, f"no CC, and neither {' nor '.join(TRITON_COMPILERS)} on PATH"


def _read(path: Path, limit: int = 256) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()[:limit] or None
    except OSError:
        return None


def _glibcxx(facts: Facts, root: Path) -> None:
    """libstdc++.so.6.0.N provides GLIBCXX_3.4.N (GCC's numbering since 3.4)."""
    for name in _LIBSTDCXX:
        link = root / name.lstrip("/")
        try:
            target = os.path.realpath(link) if link.exists() else None
        except OSError:
            target = None
        match = re.search(r"libstdc\+\+\.so\.6\.0\.(\d+)$", target or "")
        if match:
            facts.set(
                "platform.glibcxx",
                f"3.4.{match.group(1)}",
                Source.MACHINE,
                f"{name} → {os.path.basename(target or '')}",
            )
            return
    facts.mark_missing("platform.glibcxx", "no libstdc++.so.6 in the loader's usual places")


def _os_release(facts: Facts, root: Path) -> None:
    """``platform.os`` from /etc/os-release (ID and VERSION_ID): ``ubuntu 22.04``."""
    text = _read(root / "etc/os-release", 4096)
    fields = dict(re.findall(r'^(ID|VERSION_ID)="?([^"\n]*)"?$', text or "", re.MULTILINE))
    if fields.get("ID") and fields.get("VERSION_ID"):
        facts.set(
            "platform.os",
            f"{fields['ID'].lower()} {fields['VERSION_ID']}",
            Source.MACHINE,
            "/etc/os-release",
        )
    else:
        facts.mark_missing("platform.os", "/etc/os-release names no ID and VERSION_ID")


def _identity(facts: Facts, environ: Mapping[str, str]) -> None:
    import pwd

    uid = os.getuid()
    facts.set("container.uid", uid, Source.MACHINE, "os.getuid()")
    try:
        entry: Any = pwd.getpwuid(uid)
    except KeyError:
        entry = None
    facts.set(
        "container.uid_in_passwd",
        entry is not None,
        Source.MACHINE,
        f"pwd.getpwuid({uid})" + ("" if entry is not None else ": uid not found"),
    )
    named = [v for v in _USER_VARIABLES if environ.get(v)]
    facts.set(
        "container.user_known",
        bool(named) or entry is not None,
        Source.MACHINE,
        f"{named[0]} is set"
        if named
        else (
            f"passwd names uid {uid}" if entry is not None else f"no {'/'.join(_USER_VARIABLES)}"
        ),
    )
    home = environ.get("HOME") or (entry.pw_dir if entry is not None else None)
    if not home:
        facts.mark_missing("container.home", "HOME is not set and passwd does not know the uid")
        facts.mark_missing("container.home_writable", "HOME is not known")
    else:
        facts.set(
            "container.home", home, Source.MACHINE, "HOME" if environ.get("HOME") else "passwd"
        )
        facts.set("container.home_writable", _creatable(home), Source.MACHINE, home)
    unwritable = [f"{what}={path}" for what, path in _caches(environ, home) if not _creatable(path)]
    facts.set(
        "container.unwritable_caches",
        unwritable,
        Source.MACHINE,
        "; ".join(f"{what}={path}" for what, path in _caches(environ, home)),
    )


def _caches(environ: Mapping[str, str], home: str | None) -> list[tuple[str, str]]:
    """The cache directories vLLM and the libraries it loads write to at start-up, as they
    resolve them (vllm/envs.py VLLM_CACHE_ROOT, Triton's cache, the Hugging Face hub)."""
    base = environ.get("XDG_CACHE_HOME") or os.path.join(home or "~", ".cache")
    found = [
        ("VLLM_CACHE_ROOT", environ.get("VLLM_CACHE_ROOT") or os.path.join(base, "vllm")),
        (
            "TRITON_CACHE_DIR",
            environ.get("TRITON_CACHE_DIR")
            or os.path.join(environ.get("TRITON_HOME") or home or "~", ".triton", "cache"),
        ),
        (
            "HF_HOME",
            environ.get("HF_HOME") or os.path.join(base, "huggingface"),
        ),
    ]
    return [(what, path) for what, path in found if not path.startswith("~")]


def _creatable(path: str) -> bool:
    """The directory is writable, or the nearest existing directory above it is (so the
    process can create it)."""
    current = Path(path)
    while True:
        if current.exists():
            return current.is_dir() and os.access(current, os.W_OK | os.X_OK)
        if current.parent == current:
            return False
        current = current.parent


# -- a collect-env report ------------------------------------------------------------------
_PYTHON_PLATFORM = re.compile(r"^[ \t>]*Python platform\s*:\s*(?P<value>\S+)", re.MULTILINE)
_OS_LINE = re.compile(r"^[ \t>]*OS\s*:\s*(?P<value>[^\n]{1,200})$", re.MULTILINE)
# a kernel release pasted beside the report: `uname -a` (`Linux host 6.8.0-1040-nvidia #42 SMP
# ...`), `uname -r`, or a WSL2 kernel named anywhere (`5.15.167.4-microsoft-standard-WSL2`)
_UNAME_A = re.compile(
    r"^[ \t>]*Linux\s+\S+\s+(?P<kernel>\d+\.\d+\.\d+[\w.+-]{0,120})\s+#\d+", re.MULTILINE
)
_WSL_KERNEL = re.compile(r"\b(?P<kernel>\d+\.\d+\.\d+(?:\.\d+)?-microsoft-standard(?:-WSL2)?)\b")


def platform_from_report(facts: Facts, text: str, where: str) -> None:
    """The kernel (and so WSL2) from the report's ``Python platform`` line
    (``Linux-5.15.153.1-microsoft-standard-WSL2-x86_64-with-glibc2.35``), else from a kernel
    release pasted with it (``uname -a``, a WSL2 kernel named in the text)."""
    match = _PYTHON_PLATFORM.search(text[:2_000_000])
    value = match.group("value") if match else None
    kernel = None
    if value:
        found = re.match(r"Linux-(?P<kernel>.+?)-(?:x86_64|aarch64|arm64|ppc64le|s390x)", value)
        kernel = found.group("kernel") if found else None
    detail = f"Python platform: {value}"
    if not kernel:
        pasted = _UNAME_A.search(text[:2_000_000]) or _WSL_KERNEL.search(text[:2_000_000])
        if pasted:
            kernel = pasted.group("kernel")
            detail = f"pasted with the report: {pasted.group(0).strip()[:160]}"
    from vllm_doctor.facts.toolkit import PATH, nvcc_from_report

    nvcc, said = nvcc_from_report(text)
    if nvcc is None:  # collect-env looks on PATH only: FlashInfer's other places are not seen
        facts.mark_unknowable(PATH, said)
    else:
        facts.set(PATH, nvcc, Source.REPORT, said)
    if kernel:
        facts.set("platform.kernel", kernel, Source.REPORT, detail)
        facts.set("platform.wsl", "microsoft" in kernel.lower(), Source.REPORT, detail)
    else:
        reason = f"the report {where} has no Linux `Python platform` line"
        facts.mark_missing("platform.kernel", reason)
        facts.mark_missing("platform.wsl", reason)
    for path in (
        "platform.kernel_cmdline",
        "platform.container",
        "platform.glibcxx",
        "platform.c_compiler_found",
        "platform.cuda_interposer",
    ):
        facts.mark_unknowable(path, "a collect-env report does not show it")
    _os_from_report(facts, text, where)
    facts.mark_unknowable(
        "container", "a collect-env report does not show the container's identity"
    )


def _os_from_report(facts: Facts, text: str, where: str) -> None:
    """``platform.os`` from the report's ``OS`` line, and the system libstdc++ it implies."""
    from vllm_doctor.facts.distro import infer_glibcxx, os_from_text

    line = _OS_LINE.search(text[:2_000_000])
    os_release = os_from_text(line.group("value")) if line else None
    if line is None or os_release is None:
        reason = f"the report {where} names no distribution release the doctor knows" + (
            f" (OS: {line.group('value').strip()[:80]})" if line else " (no OS line)"
        )
        facts.mark_missing("platform.os", reason)
        return
    facts.set("platform.os", os_release, Source.REPORT, f"OS: {line.group('value').strip()}")
    infer_glibcxx(facts)


# -- what the user states (check --platform) ----------------------------------------------
# the words --platform takes, and what each says (for the help and the error line)
PLATFORM_WORDS = {
    "wsl2": "Windows Subsystem for Linux 2",
    "linux": "a native Linux kernel (not WSL2)",
    "container": "a container (Docker, Podman, Kubernetes)",
    "host": "not a container",
    "arbitrary-uid": "a container run under a UID its image does not know (OpenShift's "
    "restricted SCC, `docker run --user N`): no passwd entry, HOME=/ unless the image sets it",
    "kernel=RELEASE": "the Linux kernel's release (6.8.0-1040-nvidia; a microsoft one is WSL2)",
    "glibcxx=VERSION": "the newest GLIBCXX level of the system libstdc++ (3.4.30)",
    "os=ID-VERSION": "the Linux distribution's release (ubuntu-22.04, debian-12, rhel-9): "
    "its system libstdc++ is inferred from it",
    "nvcc": "a CUDA compiler where FlashInfer's JIT looks (CUDA_HOME, PATH, /usr/local/cuda)",
    "no-nvcc": "no CUDA compiler there: a CUDA runtime image without the toolkit",
    "cc": "a host C compiler where Triton looks (CC, gcc or clang on PATH)",
    "no-cc": "no host C compiler there: a CUDA runtime or slim Python image without gcc",
    "hami-core": "HAMi-core's libvgpu.so is preloaded (GPUs given by HAMi's or volcano's "
    "vGPU device plugin)",
    "no-hami-core": "no CUDA interposer is preloaded (CUDA_DISABLE_CONTROL=true under HAMi)",
}
_GLIBCXX_LEVEL = re.compile(r"^3\.4\.\d{1,3}$")


def apply_stated_platform(facts: Facts, words: list[str]) -> None:
    """``--platform`` words (wsl2, linux, container, host, kernel=R, glibcxx=V, os=ID-V, nvcc,
    no-nvcc, cc, no-cc): what the user
    states about the serving platform replaces what was read here or in a report (a report
    that says "WSL2" in prose, a container this machine is not). The stated platform is
    another machine's: what it leaves unsaid is not known, never this machine's value (its
    /proc/cmdline or libstdc++ would speak for a host that is not judged); what a collect-env
    report read stays where no word says otherwise."""
    from vllm_doctor.errors import InputError
    from vllm_doctor.facts.distro import infer_glibcxx, os_from_word

    stated = ", ".join(f"--platform {w}" for w in words)
    reason = f"not stated ({stated} names the platform judged, not this machine)"
    for path in (*PLATFORM_PATHS, *CONTAINER_PATHS):
        fact = facts.get(path)
        if fact is None or fact.source == Source.MACHINE:
            facts.values.pop(path, None)
            if not facts.why_missing(path):
                facts.mark_missing(path, reason)
    said: dict[str, tuple[Any, str]] = {}  # fact -> (value, the word that said it)
    for word in words:
        key, _, value = word.strip().partition("=")
        key = key.lower()
        if key in ("wsl2", "linux") and not value:
            values: dict[str, Any] = {"platform.wsl": key == "wsl2"}
        elif key in ("container", "host") and not value:
            values = {"platform.container": key == "container"}
        elif key in ("nvcc", "no-nvcc") and not value:
            values = {"platform.nvcc_found": key == "nvcc"}
        elif key in ("cc", "no-cc") and not value:
            values = {"platform.c_compiler_found": key == "cc"}
        elif key in ("hami-core", "no-hami-core") and not value:
            # no-hami-core states the fact absent: nothing preloaded intercepts CUDA
            values = {"platform.cuda_interposer": "hami-core" if key == "hami-core" else None}
        elif key == "arbitrary-uid" and not value:
            values = {"platform.container": True, "container.arbitrary_uid": True}
        elif key == "kernel" and re.fullmatch(r"\d+\.\d+[\w.+-]{0,120}", value):
            values = {"platform.kernel": value, "platform.wsl": "microsoft" in value.lower()}
        elif key == "glibcxx" and _GLIBCXX_LEVEL.match(value):
            values = {"platform.glibcxx": value}
        elif key == "os" and os_from_word(value):
            values = {"platform.os": os_from_word(value)}
        else:
            shown = word if len(word) <= 60 else word[:60] + "…"
            raise InputError("--platform", f"{shown!r} is not one of {', '.join(PLATFORM_WORDS)}")
        for path, fact_value in values.items():
            if path in said and said[path][0] != fact_value:
                raise InputError("--platform", f"{word!r} contradicts {said[path][1]!r}")
            said[path] = (fact_value, word)
            if fact_value is None:
                facts.values.pop(path, None)
                facts.missing.pop(path, None)
                facts.unknowable.discard(path)
            else:
                facts.set(path, fact_value, Source.USER, f"--platform {word}")
    if "platform.os" in said and "platform.glibcxx" not in said:
        infer_glibcxx(facts)
    # a report's kernel that the stated WSL2-or-not contradicts is another host's
    kernel = facts.get("platform.kernel")
    if (
        "platform.wsl" in said
        and "platform.kernel" not in said
        and kernel is not None
        and ("microsoft" in str(kernel.value).lower()) != said["platform.wsl"][0]
    ):
        facts.values.pop("platform.kernel")
        facts.mark_missing("platform.kernel", f"{reason}; the report's {kernel.value} differs")


def not_examined(facts: Facts, reason: str) -> None:
    for path in PLATFORM_PATHS:
        facts.mark_missing(path, reason)
    facts.mark_missing("container", reason)


# -- the GPUs' names -------------------------------------------------------------------------
def gpu_architecture(facts: Facts) -> None:
    """``gpu.gfx_targets`` and ``gpu.unified_memory`` from the devices and their names."""
    from vllm_doctor.knowledge.gpus import lookup

    devices = facts.value("gpu.devices") or []
    names = facts.value("gpu.names") or [d.get("name") for d in devices if isinstance(d, dict)]
    if not names:
        reason = facts.why_missing("gpu.names") or "no GPU is known"
        facts.mark_missing("gpu.gfx_targets", reason)
        facts.mark_missing("gpu.unified_memory", reason)
        return
    stated = [
        d.get("arch")
        for d in devices
        if isinstance(d, dict) and str(d.get("arch", "")).startswith("gfx")
    ]
    matches = [lookup(str(name)) for name in names]
    if stated:
        source = facts.get("gpu.devices")
        facts.set(
            "gpu.gfx_targets",
            sorted(set(stated)),
            source.source if source else Source.REPORT,
            "the devices' gfx target",
        )
    elif matches and all(m is not None for m in matches):
        gfx = sorted({m.gfx for m in matches if m is not None and m.gfx})
        if gfx:
            facts.infer(
                "gpu.gfx_targets", gfx, f"GPU table: {', '.join(sorted(set(map(str, names))))}"
            )
        # an NVIDIA GPU has no gfx target: absent
    else:
        facts.mark_missing(
            "gpu.gfx_targets",
            f"not in the GPU table: {', '.join(sorted({str(n) for n, m in zip(names, matches, strict=False) if m is None}))}",
        )
    _unified(facts, names, matches)


@lru_cache(maxsize=1)
def _unified_families() -> dict[str, Any]:
    import json

    from vllm_doctor.knowledge import DATA_DIR

    data = json.loads((DATA_DIR / "unified_memory.json").read_text(encoding="utf-8"))
    return dict(data["families"])


def _unified(facts: Facts, names: list[Any], matches: list[Any]) -> None:
    if not matches or any(m is None for m in matches):
        facts.mark_missing("gpu.unified_memory", "a GPU is not in the GPU table")
        return
    families = _unified_families()
    shared = [m.family.name for m in matches if m.family.name in families]
    facts.infer(
        "gpu.unified_memory",
        bool(shared),
        "knowledge/data/unified_memory.json: "
        + (f"{shared[0]}: {families[shared[0]]['memory']}" if shared else "dedicated memory"),
    )
