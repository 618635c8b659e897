"""The text of a pasted `vllm collect-env` report as keys, sections and blocks.

Markdown fences, ``<details>``/``<summary>`` wrappers, ``>`` quoting and HTML entities are
removed; a line is a report line when its key is one of the report's own keys (both layouts:
banners of ``=`` with ``Key   : value`` lines, and torch's older ``Key: value`` lines).
The readers of each part (report.py, report_gpus.py, report_packages.py) read `_Report`.
"""

from __future__ import annotations

import re

from vllm_doctor.errors import InputError
from vllm_doctor.facts.model import Facts, Source
from vllm_doctor.redact import is_secret_name as is_secret

# Keys of the report, both layouts (compared case-insensitively, spaces collapsed).
_KEYS = [
    "OS",
    "GCC version",
    "Clang version",
    "CMake version",
    "Libc version",
    "PyTorch version",
    "Is debug build",
    "CUDA used to build PyTorch",
    "ROCM used to build PyTorch",
    "XPU used to build PyTorch",
    "Python version",
    "Python platform",
    "Is CUDA available",
    "CUDA runtime version",
    "CUDA_MODULE_LOADING set to",
    "GPU models and configuration",
    "Nvidia driver version",
    "cuDNN version",
    "HIP runtime version",
    "MIOpen runtime version",
    "Is XNNPACK available",
    "Is XPU available",
    "XPU runtime version",
    "Intel GPU models",
    "CPU",
    "Versions of relevant libraries",
    "ROCM Version",
    "Neuron SDK Version",
    "vLLM Version",
    "vLLM Build Flags",
    "GPU Topology",
    "CUDA Archs",
]
_KEY_SET = {k.lower(): k for k in _KEYS}
# Keys that only a collect-env report has (to tell a report from other text).
_CORE_KEYS = {
    "PyTorch version",
    "CUDA used to build PyTorch",
    "vLLM Version",
    "vLLM Build Flags",
    "GPU models and configuration",
    "Nvidia driver version",
    "Is CUDA available",
    "CUDA runtime version",
    "GPU Topology",
    "ROCM used to build PyTorch",
}
_NOT_COLLECTED = {
    "",
    "n/a",
    "none",
    "could not collect",
    "no cuda",
    "no xpu",
    "not set",
    "n/a (dev)",
    "unknown",
}

_BANNER = re.compile(r"^\s*={20,}\s*$")
# Linear on any line (a 60 KB run of blanks included): a key or value ends in a non-blank
# character, so no lazy group is retried against a trailing `\s*` at every length.
_KEY_LINE = re.compile(
    r"^\s*(?P<key>[A-Za-z](?:[A-Za-z0-9_ ./()\-]*[A-Za-z0-9_./()\-])?)\s*:(?:\s(?P<val>.*))?$"
)
_GPU_LINE = re.compile(r"^\s*GPU\s+(?P<idx>\d+)\s*:\s*(?P<name>\S(?:.*\S)?)\s*$")
_MIG_LINE = re.compile(r"^\s*MIG\s+\S+\s+Device\s+\d+\s*:")
_PIP_LINE = re.compile(r"^\s*\[(?P<tool>pip3?|uv|conda)\]\s+(?P<rest>\S(?:.*\S)?)\s*$")
_ENV_LINE = re.compile(r"^(?P<key>[A-Za-z_][A-Za-z0-9_]*)=(?P<val>.*)$")
_SMI_CUDA = re.compile(r"CUDA Version:\s*(?P<v>\d+\.\d+)")

# -- the report text -----------------------------------------------------------------------------


def _decode(text: str | bytes, name: str) -> str:
    if isinstance(text, bytes):
        if b"\x00" in text:
            raise InputError(
                name, "does not look like a `vllm collect-env` report: binary data (NUL bytes)"
            )
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise InputError(
                name, "does not look like a `vllm collect-env` report: not UTF-8 text"
            ) from None
    if not isinstance(text, str):
        raise InputError(name, "does not look like a `vllm collect-env` report: not text")
    if "\x00" in text:
        raise InputError(
            name, "does not look like a `vllm collect-env` report: binary data (NUL bytes)"
        )
    if not text.strip():
        raise InputError(name, "does not look like a `vllm collect-env` report: empty")
    return text


def _clean_lines(text: str) -> list[str]:
    """Lines without markdown/HTML wrappers; blockquote markers removed."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\ufeff", "")
    raw = text.split("\n")
    quoted = [ln for ln in raw if ln.strip()]
    strip_quote = (
        bool(quoted) and sum(ln.lstrip().startswith(">") for ln in quoted) > len(quoted) / 2
    )
    out: list[str] = []
    for given in raw:
        line = re.sub(r"^\s*>\s?", "", given) if strip_quote else given
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            continue
        if re.fullmatch(
            r"</?details[^>]*>|</?summary[^>]*>.*|<summary>.*</summary>",
            stripped,
            flags=re.IGNORECASE,
        ):
            continue
        bare = re.sub(r"</?(details|summary|code|pre)[^>]*>", "", line, flags=re.IGNORECASE)
        out.append(bare.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&"))
    return out


def _key_of(line: str) -> tuple[str, str] | None:
    """(canonical key, value) when the line is one of the report's ``Key: value`` lines."""
    m = _KEY_LINE.match(line)
    if not m:
        return None
    key = " ".join(m.group("key").split()).lower()
    canonical = _KEY_SET.get(key)
    if canonical is None:
        return None
    return canonical, (m.group("val") or "").strip()


def _collected(value: str | None) -> bool:
    return value is not None and value.strip().lower() not in _NOT_COLLECTED


_secret = is_secret  # the environment collector's test


class _Report:
    def __init__(self, lines: list[str]):
        self.lines = lines
        self.values: dict[str, tuple[str, int]] = {}  # key -> (value, line index), first wins
        self.section_of: list[str | None] = []
        section: str | None = None
        i = 0
        while i < len(lines):
            line = lines[i]
            if _BANNER.match(line) and i + 2 < len(lines) and _BANNER.match(lines[i + 2]):
                section = " ".join(lines[i + 1].split()) or None
                self.section_of.extend([section] * 3)
                i += 3
                continue
            self.section_of.append(section)
            kv = _key_of(line)
            if kv is not None and kv[0] not in self.values:
                self.values[kv[0]] = (kv[1], i)
            i += 1

    def get(self, key: str) -> tuple[str, int] | None:
        return self.values.get(key)

    def block_after(self, index: int, stop_on_blank: bool = True) -> list[tuple[int, str]]:
        """The lines after ``index`` up to a banner, another report key or a blank line
        (leading blank lines are skipped)."""
        out: list[tuple[int, str]] = []
        j = index + 1
        while j < len(self.lines):
            line = self.lines[j]
            if _BANNER.match(line) or _key_of(line) is not None:
                break
            if not line.strip():
                if out and stop_on_blank:
                    break
                j += 1
                continue
            out.append((j, line))
            j += 1
        return out


def _line_detail(report: _Report, key: str) -> str:
    _value, idx = report.values[key]
    return report.lines[idx].strip()


def _set_first_word(report: _Report, facts: Facts, key: str, path: str) -> bool:
    """Set ``path`` to the first word of the report's ``key`` when it was collected."""
    entry = report.get(key)
    if entry is None or not _collected(entry[0]):
        return False
    facts.set(path, entry[0].split()[0], Source.REPORT, _line_detail(report, key))
    return True
