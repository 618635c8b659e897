"""A module Python could not import: which distribution provides it, what vLLM asks for.

``No module named 'X'`` names the distribution behind X (knowledge ``modules`` for import
names that differ, else X's canonical name), then what vLLM's release says about it: a
requirement of every install or of an extra (knowledge ``dependencies``, from the wheels'
METADATA), or vLLM's own install hint for an optional package (the ``pip install ...`` in the
error catalogue's messages). vLLM's compiled extensions (``vllm._C``; knowledge
``extensions``) are told apart: a native Windows install, a source checkout that was never
built, or an installed package without them.

``cannot import name 'Y' from 'X'`` names the package that asked for Y (the traceback's file
above the error) and X's distribution: two releases from different times; the fix installs the
versions vLLM's release asks for.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache

from vllm_doctor.logreaders import LogReading, judged_release, pip_spec, platform_of, value_at

_NO_MODULE = re.compile(r"No module named '?([A-Za-z_][\w.]{0,120})'?")
# Python's ImportError for a name a module lacks: (name, module, where it was loaded from)
CANNOT_IMPORT = re.compile(
    r"cannot import name '(\w{1,120})' from '([A-Za-z_][\w.]{0,120})'(?: \(([^)\n]{1,400})\))?"
)
_PROBING = re.compile(
    r"is not available because|Failed to import Ray|ray_utils|Failed to initialize NumPy"
)
_FILE = re.compile(r'File "([^"\n]{1,400})", line \d+')
_SITE = re.compile(r"[\\/](?:site|dist)-packages[\\/]([A-Za-z_]\w{0,80})")
_VLLM_FILE = re.compile(
    r'File "([^"\n]{0,300})[\\/]vllm[\\/][^"\n\\/]{1,100}(?:[\\/][^"\n\\/]{1,100}){0,8}"'
)
_PIP_HINT = re.compile(
    r"pip install (?:-U |--upgrade )?['\"`]?([A-Za-z0-9][\w.\-]*(?:\[[\w,\-]+\])?(?:[<>=!~]=?[\w.*]+(?:,[<>=!~]=?[\w.*]+)*)?)"
)


def read(text: str, version: str | None) -> LogReading | None:
    release = judged_release(version)
    for match in _NO_MODULE.finditer(text):
        line = _line(text, match.start())
        if _PROBING.search(line) or match.group(1) == "vllm._version":
            # vLLM looking for an optional platform or backend, or for the version file a
            # source checkout lacks (a warning): not the failure
            continue
        return _missing(match.group(1), text, release, version, line)
    found = CANNOT_IMPORT.search(text)
    if found:
        return _cannot_import(found, text, release, version)
    return None


def _line(text: str, pos: int) -> str:
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    return text[start : end if end != -1 else len(text)]


@lru_cache(maxsize=1)
def _modules() -> dict[str, str]:
    from vllm_doctor.knowledge import DATA_DIR

    return json.loads((DATA_DIR / "modules.json").read_text(encoding="utf-8"))["modules"]


def distribution(module: str) -> str:
    """The distribution that provides an import name."""
    from packaging.utils import canonicalize_name

    names = _modules()
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in names:
            return names[".".join(parts[:n])]
    return str(canonicalize_name(parts[0]))


def _missing(
    module: str, text: str, release: str | None, version: str | None, line: str
) -> LogReading | None:
    read_lines = [f"missing module: {module} ({line.strip()[:200]})"]
    if module.split(".")[0] == "vllm":
        return _vllm_module(module, text, release, read_lines)
    dist = distribution(module)
    platform = platform_of(text)
    if dist == "triton" and platform in ("windows", "macos", "cpu", "tpu", "ascend", "xpu"):
        return None  # Triton has no build there: the code path, not the install, is at fault
    where = f"vLLM {release}" if release else "the newest vLLM release"
    required, at = value_at("dependencies", dist, release)
    if required is not None:
        spec = required.get("spec")
        extra = required.get("extra")
        marker = f" on {required['marker']}" if required.get("marker") else ""
        read_lines.append(
            f"{where if at == release else f'vLLM {at}'} requires {dist}{spec or ''}"
            + (f" through the extra [{extra}]" if extra else "")
            + marker
            + " (knowledge: dependencies, from the wheel's METADATA)"
        )
        fixes = [f"pip install {pip_spec(dist, spec)}"]
        if extra:
            fixes.insert(0, f"pip install 'vllm[{extra}]'" + (f"  # vLLM {at}" if at else ""))
            cause = (
                f"`{module}` comes from the distribution {dist}, which vLLM installs only with "
                f"its extra [{extra}]; it is not installed"
            )
        else:
            cause = (
                f"`{module}` comes from the distribution {dist}, a requirement of every vLLM "
                "install, and it is missing: an install with --no-deps, a partial environment, "
                "or a platform the requirement's marker leaves out"
            )
        return LogReading(cause, fixes, read_lines)
    hint, at = _install_hint(dist, release, text)
    if hint is not None:
        requirement, message = hint
        read_lines.append(
            f"vLLM's own message ({at if at == 'the log' else f'vLLM {at}, error catalogue'}): "
            f"{message[:200]}"
        )
        return LogReading(
            f"`{module}` comes from {dist}, an optional package vLLM needs for the "
            "feature in use and does not install itself",
            [f"pip install {pip_spec(requirement)}"],
            read_lines,
        )
    return None  # neither vLLM's requirement nor its hint: who needs it is not known here


def _install_hint(
    dist: str, release: str | None, text: str
) -> tuple[tuple[str, str] | None, str | None]:
    """vLLM's own ``pip install X`` for a distribution: the one the log shows, else the error
    catalogue's in the judged release (else in the newest release that has one); the
    requirement it names, the message, and where it was read."""
    from packaging.utils import canonicalize_name

    from vllm_doctor.engine.logmatch import load_catalogue

    for hint in _PIP_HINT.finditer(text):
        name = re.split(r"[\[<>=!~]", hint.group(1), maxsplit=1)[0]
        if canonicalize_name(name) == dist:
            return (hint.group(1), _line(text, hint.start()).strip()), "the log"

    table = load_catalogue().table
    best: tuple[tuple[str, str], str] | None = None
    for key in table:
        if "pip install" not in key:
            continue
        for hint in _PIP_HINT.finditer(key):
            requirement = hint.group(1)
            name = re.split(r"[\[<>=!~]", requirement, maxsplit=1)[0]
            if canonicalize_name(name) != dist or "{*}" in key:
                continue
            if release is not None and table.get(key, release) is not None:
                return (requirement, key.partition(": ")[2]), release
            last = table.last_release(key)
            if best is None or table.releases.index(last) > table.releases.index(best[1]):
                best = ((requirement, key.partition(": ")[2]), last)
    return best if best is not None else (None, None)


def _vllm_module(
    module: str, text: str, release: str | None, read_lines: list[str]
) -> LogReading | None:
    from vllm_doctor.knowledge import load

    extensions = load("extensions")
    shipped = module in extensions
    if not shipped and not module.endswith("_C"):
        return None  # a Python module of vLLM: another release's code, not a missing build
    if shipped:
        first, last = extensions.first_release(module), extensions.last_release(module)
        read_lines.append(
            f"{module} is a compiled extension of vLLM {first}–{last} "
            "(knowledge: extensions, from the wheels' file lists)"
        )
    platform = platform_of(text)
    if platform not in (None, "cuda", "rocm", "windows"):
        return None  # a plugin or CPU platform: vLLM is installed without its CUDA extensions
    if platform == "windows":
        read_lines.append("the traceback's paths are Windows paths")
        return LogReading(
            "vLLM has no native Windows build: the package installed on Windows has none of its "
            f"compiled extensions ({module}); vLLM runs on Linux, and on Windows inside WSL2 "
            "or a Linux container",
            [
                "wsl --install -d Ubuntu   # then, inside WSL2: pip install vllm",
                "docker run --gpus all -p 8000:8000 vllm/vllm-openai:latest --model <model>",
            ],
            read_lines,
        )
    checkout = _checkout(text)
    if checkout is not None:
        read_lines.append(
            f"vLLM is imported from {checkout}/vllm, not from site-packages"
            + (
                " (and its _version module is missing: never built)"
                if "No module named 'vllm._version'" in text
                else ""
            )
        )
        return LogReading(
            f"Python imports vLLM from the source checkout {checkout}, whose compiled extensions "
            f"were never built (no {module} there)",
            [
                f"cd {checkout} && VLLM_USE_PRECOMPILED=1 pip install -e .   # Python-only changes: "
                "reuse the compiled parts of the matching wheel",
                f"cd {checkout} && pip install -e .   # full build (needs the CUDA toolkit)",
                "or start Python outside the checkout, so that the installed wheel is imported",
            ],
            read_lines,
        )
    if not shipped:
        return None
    return LogReading(
        f"the vLLM package Python imported has no {module}: a wheel for another platform, an "
        "interrupted install, or a source checkout that shadows the installed package",
        [
            "pip install --force-reinstall --no-deps vllm" + (f"=={release}" if release else ""),
            "and start Python outside any vLLM source checkout (a ./vllm directory shadows the "
            "installed package)",
        ],
        read_lines,
    )


def _checkout(text: str) -> str | None:
    """The directory holding a ``vllm`` package outside site-packages, when the traceback
    imports vLLM from one (the deepest such directory: a checkout's own files sit one level
    above its package)."""
    roots = [m.group(1) for m in _VLLM_FILE.finditer(text)]
    roots = [r for r in roots if r and "site-packages" not in r and "dist-packages" not in r]
    return max(roots, key=len) if roots else None


def _cannot_import(
    found: re.Match, text: str, release: str | None, version: str | None
) -> LogReading | None:
    name, source = found.group(1), found.group(2)
    wanted = distribution(source)
    before = [m.group(1) for m in _FILE.finditer(text, 0, found.start())]
    importer = None
    for path in reversed(before):
        site = _SITE.search(path)
        if site:
            importer = distribution(site.group(1))
            break
    read_lines = [f"cannot import {name} from {source} ({wanted})"]
    if importer is None or importer == wanted:
        return None
    read_lines.append(f"the import is made by {importer} ({before[-1]})")
    if wanted == "vllm":
        return LogReading(
            f"{importer} was built for another vLLM release: the installed vLLM has no "
            f"{source}.{name}",
            [
                f"install the {importer} release made for your vLLM"
                + (f" {version}" if version else "")
                + f" (pip install -U {importer}), or the vLLM "
                f"release that {importer} names in its requirements"
            ],
            read_lines,
        )
    fixes = []
    where = None
    for dist in (importer, wanted):
        value, at = value_at("dependencies", dist, release)
        if value is not None and value.get("extra") is None:
            where = at
            fixes.append(pip_spec(dist, value.get("spec")))
    fix = [f"pip install -U {importer}   # a release made for the installed {wanted}"]
    if len(fixes) == 2:
        read_lines.append(
            f"vLLM {where} asks for {' and '.join(f.strip(chr(39)) for f in fixes)} "
            "(knowledge: dependencies)"
            + ("" if release else "; pass --vllm-version for your release's")
        )
        if release:
            fix = [f"pip install {' '.join(fixes)}   # what vLLM {release} asks for"]
    return LogReading(
        f"{importer} and {wanted} are from different times: {importer} imports {name}, which the "
        f"installed {wanted} does not provide",
        fix,
        read_lines,
    )
