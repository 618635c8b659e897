"""``undefined symbol: _ZN…`` in a compiled extension: which library, whose symbol, what to
install.

The symbol is demangled (``c++filt`` where installed, else its qualified name read by a small
Itanium-ABI reader here) and its owner told from its namespace: ``c10::``, ``at::``,
``torch::`` are torch's (the extension was built against another torch than the installed
one), anything else is the extension's own code (a partial build). The library's file names
the distribution (vLLM's own extensions, flash-attn, xformers, torch-xla, ...); the fix is
the torch that vLLM's release pins (knowledge ``pins``), or a rebuild of the extension against
the installed torch.
"""

from __future__ import annotations

import re
import shutil
import subprocess

from vllm_doctor.logreaders import LogReading, judged_release, value_at

_UNDEFINED = re.compile(
    r"(?:([^\s'\"(]{0,400}?\.so)[\w.]{0,40}: )?undefined symbol: (_Z\w{1,3000})"
)
_TORCH_NAMESPACES = ("c10", "at", "torch", "caffe2")


def read(text: str, version: str | None) -> LogReading | None:
    found = _UNDEFINED.search(text)
    if found is None:
        return None
    library, symbol = found.group(1), found.group(2)
    name, full, how = demangle(symbol)
    if name is None:
        return None
    release = judged_release(version)
    owner = name.split("::")[0]
    dist, where = _library(library)
    read_lines = [
        f"undefined symbol {symbol[:80]}{'…' if len(symbol) > 80 else ''} = "
        f"{(full or name)[:300]} ({how})"
    ]
    if library:
        read_lines.append(f"in {library}" + (f" (distribution {dist})" if dist else ""))
    if "__cxx11" in symbol:
        read_lines.append(
            "the symbol uses the C++11 string ABI (std::__cxx11): the extension was "
            "built for a torch with _GLIBCXX_USE_CXX11_ABI=1"
        )
    if owner not in _TORCH_NAMESPACES:
        if dist != "vllm":
            return None
        return LogReading(
            f"vLLM's compiled extension {library} refers to {name}, which the build itself should "
            "define: a partial or stale build (a kernel left out for the CUDA version or "
            "architectures it was built with, or objects from two builds)",
            [
                f"cd {where} && rm -rf build && pip install -e . --no-build-isolation   # a clean rebuild"
                if where
                else "pip install --force-reinstall vllm   # a released wheel"
            ],
            read_lines,
        )
    pin, at = value_at("pins", "torch", release)
    torch_pin = pin.get("pin") if pin else None
    if torch_pin:
        read_lines.append(
            f"vLLM {at} pins torch=={torch_pin} (knowledge: pins, from the wheel's "
            "METADATA)" + ("" if release else "; pass --vllm-version for your release")
        )
    subject = f"{dist} ({library})" if dist and library else (library or "a compiled extension")
    cause = (
        f"{subject} was built against another torch than the one installed: {name} is "
        "torch's, and the installed torch does not export it"
    )
    if dist == "vllm" and where:
        fixes = [
            f"cd {where} && python use_existing_torch.py && pip install -r requirements/build.txt "
            "&& pip install -e . --no-build-isolation   # rebuild against the installed torch",
            f"or pip install 'torch=={torch_pin}'   # the torch vLLM {at} pins"
            if torch_pin
            else "or install the torch the checkout's requirements pin",
        ]
    elif dist in (None, "vllm") and release and torch_pin:
        fixes = [
            f"pip install 'torch=={torch_pin}'   # the torch vLLM {release} pins",
            f"or pip install --force-reinstall 'vllm=={release}'   # restores that torch",
        ]
    elif dist in (None, "vllm"):
        fixes = [
            "pip install --force-reinstall 'vllm==<your version>'   # reinstalls the torch it "
            "pins (pip show vllm names the version)"
        ]
        if torch_pin:
            fixes.append(
                f"or pip install 'torch==<its pin>'   # vLLM {at} pins {torch_pin}; pass "
                "--vllm-version V to name yours"
            )
    elif dist == "flash-attn":
        fixes = [
            "pip install --force-reinstall --no-deps --no-build-isolation flash-attn   # builds "
            "it against the installed torch",
            "or pip uninstall flash-attn, when only vLLM needs it (vLLM 0.8.0 and later use "
            "their own build, vllm.vllm_flash_attn)",
        ]
    else:
        spec, _ = value_at("dependencies", dist, release)
        wanted = f"'{dist}{spec['spec']}'" if spec and spec.get("spec") else dist
        fixes = [
            f"pip install --force-reinstall --no-deps {wanted}   # the {dist} built for the "
            "torch vLLM pins" + (f" ({torch_pin})" if torch_pin else "")
        ]
    return LogReading(cause, fixes, read_lines)


def _library(path: str | None) -> tuple[str | None, str | None]:
    """The distribution a shared library belongs to, and the source checkout it sits in when
    it is vLLM's own extension outside site-packages."""
    if not path:
        return None, None
    from vllm_doctor.logreaders.imports import distribution

    parts = re.split(r"[\\/]", path)
    if "vllm" in parts[:-1]:
        index = len(parts) - 1 - parts[::-1].index("vllm")
        root = "/".join(parts[:index])
        inside = "site-packages" in path or "dist-packages" in path
        return "vllm", None if inside or not root else root
    for marker in ("site-packages", "dist-packages"):
        if marker in parts and parts.index(marker) + 1 < len(parts):
            top = parts[parts.index(marker) + 1]
            return distribution(top.split(".")[0]), None
    return distribution(parts[-1].split(".")[0]), None


# -- demangling --------------------------------------------------------------------------------
def demangle(symbol: str) -> tuple[str | None, str | None, str]:
    """(qualified name, full demangled signature or None, how): c++filt when installed, else
    the qualified name read here."""
    name = qualified_name(symbol)
    tool = shutil.which("c++filt")
    if tool:
        try:
            done = subprocess.run([tool, symbol], capture_output=True, text=True, timeout=5)
            full = done.stdout.strip()
            if done.returncode == 0 and full and full != symbol:
                return name or full.split("(")[0], full, "demangled with c++filt"
        except (OSError, subprocess.SubprocessError):
            pass
    return name, None, "qualified name read from the mangled symbol"


_CTOR_DTOR = re.compile(r"[CD][0-5]")
_ABBREVIATIONS = {
    "St": ["std"],
    "Sa": ["std", "allocator"],
    "Sb": ["std", "basic_string"],
    "Ss": ["std", "string"],
}


def qualified_name(symbol: str) -> str | None:
    """The qualified name of an Itanium-mangled symbol (``_ZN3c105ErrorC2E…`` →
    ``c10::Error::Error``), enough to tell whose code it is; None when it is not one."""
    if not symbol.startswith("_Z"):
        return None
    at = 2
    if symbol.startswith("N", at):
        at += 1
        while at < len(symbol) and symbol[at] in "rVKRO":  # cv- and ref-qualifiers
            at += 1
        names: list[str] = []
        while at < len(symbol) and symbol[at] != "E":
            if length := re.match(r"\d+", symbol[at:]):
                at += len(length.group(0))
                names.append(symbol[at : at + int(length.group(0))])
                at += int(length.group(0))
            elif symbol[at : at + 2] in _ABBREVIATIONS:
                names += _ABBREVIATIONS[symbol[at : at + 2]]
                at += 2
            elif _CTOR_DTOR.match(symbol, at) and names:
                names.append(("~" if symbol[at] == "D" else "") + names[-1])
                at += 2
            else:
                break  # template arguments or operators: the name so far is enough
        return "::".join(names) or None
    digits = re.match(r"\d+", symbol[at:])
    if digits:
        start = at + len(digits.group(0))
        return symbol[start : start + int(digits.group(0))]
    return None
