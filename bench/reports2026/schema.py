"""The schema of one report of the 2026 corpus, and its checker (one source for both).

Each report is ``reports/<id>/report.yaml`` plus the inputs the doctor reads, as files beside
it: ``log.txt`` (the crash log as the reporter pasted it), ``serve.txt`` (the serve line,
one line, leading VAR=value assignments kept), ``report.txt`` (a ``vllm collect-env`` report),
``config.json`` (the model's config.json where the thread shows it, or the served Hugging Face
repository's own config.json from a stored copy, its source in ``config_source``).
"""

from __future__ import annotations

import datetime as dt
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPORTS = HERE / "reports"

FAMILIES = {
    "flashinfer": "FlashInfer packaging and JIT (cubin / python / jit-cache versions, nvcc, headers, API drift)",
    "rocm-aiter": "ROCm AITER gating (AITER switches per gfx architecture, CK / AITER kernels refusing a shape)",
    "companion-packages": "companion packages beyond vLLM (transformers, torch builds, triton, LMCache, cutlass-dsl, ...)",
    "kernels-per-arch": "kernels per GPU architecture (no kernel image, PTX toolchain, DeepGEMM / FA / FP4 kernels per capability)",
    "config-gpu-arithmetic": "config x GPU arithmetic (memory, KV cache, divisibility, context length, dtype per GPU)",
    "platforms-containers": "platforms and containers (HOME / caches, UID, WSL2, unified-memory APUs, drivers, images, shm)",
    "multi-node": "multi-node and multi-GPU communication (NCCL, Ray, RDMA, P2P)",
    "wording-variants": "wording variants of messages rules already know",
    "vllm-bugs": "vLLM bugs (a release's own defect, fixed or open upstream)",
    "serve-options": "serve-line options (a flag, parser or value the release refuses or mishandles)",
    "working-setup": "a setup shown serving (its versions, GPUs and serve line must draw no error)",
}

OUTCOMES = ("failure", "working")
INPUT_FILES = {
    "log": "log.txt",
    "serve": "serve.txt",
    "report": "report.txt",
    "model_config": "config.json",
}
# The what-if values `check` takes for a report (the facts the reporter showed).
CHECK_KEYS = ("gpu", "gpus", "vllm_version", "torch_version", "driver", "cuda", "packages")
PREDICTABLE_FROM = {
    "vllm_version",
    "torch_version",
    "cuda",
    "driver",
    "gpu",
    "gpus",
    "packages",
    "env",
    "serve",
    "model_config",
    "platform",
}

# Where a config.json the thread does not show came from: the stored copy of the served repository's
# config.json (what `check` would fetch from the Hub), named by URL, the day it was read, and a note.
CONFIG_SOURCE_KEYS = ("url", "retrieved", "note")

REQUIRED = ("id", "source", "title", "date", "outcome", "family", "cause", "summary", "shown")
FAILURE_REQUIRED = ("fix", "confirmed_by", "predictable")
SLUG = re.compile(r"^[a-z0-9][a-z0-9.-]*[a-z0-9]$")


def problems(doc: dict, directory: Path | None = None) -> list[str]:
    """Every schema mistake of one report, as 'field: problem' lines (empty when valid)."""
    out = []
    for key in REQUIRED:
        if doc.get(key) in (None, ""):
            out.append(f"{key}: missing")
    if doc.get("outcome") not in OUTCOMES:
        out.append(f"outcome: {doc.get('outcome')!r} is not one of {OUTCOMES}")
    if doc.get("family") not in FAMILIES:
        out.append(f"family: {doc.get('family')!r} is not one of {sorted(FAMILIES)}")
    if not SLUG.match(str(doc.get("cause", ""))):
        out.append(f"cause: {doc.get('cause')!r} is not a kebab-case slug")
    if not str(doc.get("source", "")).startswith("https://"):
        out.append("source: not an https URL")
    date = doc.get("date")
    date = str(date) if date == 2026 else date
    partial = isinstance(date, str) and re.fullmatch(r"2026(-(0[1-9]|1[0-2]))?", date)
    if partial and not doc.get("date_note"):
        out.append("date_note: a date without its day says why")
    elif not partial and (not isinstance(date, dt.date) or date.year != 2026):
        out.append(f"date: {date!r} is not a date in 2026 (or '2026' / '2026-MM' with a date_note)")
    if (doc.get("outcome") == "working") != (doc.get("family") == "working-setup"):
        out.append("family: working-setup is the family of the working setups, and theirs only")
    if doc.get("outcome") == "failure":
        for key in FAILURE_REQUIRED:
            if doc.get(key) in (None, ""):
                out.append(f"{key}: missing (a failure needs its confirmed fix)")
        confirmed = doc.get("confirmed_by") or {}
        if not str(confirmed.get("url", "")).startswith("https://"):
            out.append("confirmed_by.url: not an https URL")
        if doc.get("predictable") and not doc.get("predictable_from"):
            out.append("predictable_from: a predictable failure names the facts that predict it")
    unknown = set(doc.get("predictable_from") or []) - PREDICTABLE_FROM
    if unknown:
        out.append(f"predictable_from: unknown {sorted(unknown)}")
    if "serve.txt" in (doc.get("inputs") or []) and doc.get("serve_origin") is None:
        out.append("serve_origin: a serve line says whether it was pasted or reconstructed")
    out += config_source_problems(doc, directory)
    check = doc.get("check") or {}
    extra = set(check) - set(CHECK_KEYS)
    if extra:
        out.append(f"check: unknown keys {sorted(extra)}")
    if directory is not None:
        for name in doc.get("inputs") or []:
            if name not in INPUT_FILES.values():
                out.append(f"inputs: {name} is not one of {sorted(INPUT_FILES.values())}")
            elif not (directory / name).is_file():
                out.append(f"inputs: {name} is listed but absent")
        if directory.name != doc.get("id"):
            out.append(f"id: {doc.get('id')!r} differs from its directory {directory.name!r}")
    return out


def config_source_problems(doc: dict, directory: Path | None) -> list[str]:
    """A config.json says where it came from; a config_source is complete and names a parsable config."""
    out = []
    inputs = doc.get("inputs") or []
    source = doc.get("config_source")
    if "config.json" in inputs and source is None and doc.get("model_config_origin") is None:
        out.append("config_source: a config.json says where it came from (or model_config_origin)")
    if source is None:
        return out
    if not isinstance(source, dict) or set(source) != set(CONFIG_SOURCE_KEYS):
        return [*out, f"config_source: a mapping of exactly {list(CONFIG_SOURCE_KEYS)}"]
    if not str(source["url"]).startswith("https://"):
        out.append("config_source.url: not an https URL")
    if not isinstance(source["retrieved"], dt.date):
        out.append(f"config_source.retrieved: {source['retrieved']!r} is not a date")
    if not str(source["note"] or "").strip():
        out.append("config_source.note: empty")
    if "config.json" not in inputs:
        out.append("config_source: config.json is not among the inputs")
    elif directory is not None and (directory / "config.json").is_file():
        import json

        try:
            config = json.loads((directory / "config.json").read_text(encoding="utf-8"))
        except ValueError as error:
            return [*out, f"config.json: not JSON ({error})"]
        if not isinstance(config, dict) or not (
            config.get("model_type") or config.get("architectures")
        ):
            out.append("config.json: names neither model_type nor architectures")
    return out


TABLE_START = "<!-- reports table: python bench/reports2026/schema.py --table -->"
TABLE_END = "<!-- end of the reports table -->"


def table() -> str:
    """The README's table of reports, generated from the reports themselves."""
    import yaml

    rows = ["| id | outcome | family | cause | date | source |", "|---|---|---|---|---|---|"]
    for directory in sorted(p for p in REPORTS.iterdir() if p.is_dir()):
        doc = yaml.safe_load((directory / "report.yaml").read_text(encoding="utf-8"))
        rows.append(
            f"| `{doc['id']}` | {doc['outcome']} | {doc['family']} | {doc['cause']} | {doc['date']} "
            f"| [source]({doc['source']}) |"
        )
    return "\n".join([TABLE_START, *rows, TABLE_END])


def readme_is_current() -> bool:
    text = (HERE / "README.md").read_text(encoding="utf-8")
    start, end = text.find(TABLE_START), text.find(TABLE_END)
    return start >= 0 and text[start : end + len(TABLE_END)] == table()


def main() -> int:
    """Check every report: `python bench/reports2026/schema.py` prints each problem and exits 1 on any.

    --table prints the README's table of reports; --write-table rewrites it in README.md.
    """
    import yaml

    if "--table" in sys.argv:
        print(table())
        return 0
    if "--write-table" in sys.argv:
        readme = HERE / "README.md"
        text = readme.read_text(encoding="utf-8")
        start, end = text.find(TABLE_START), text.find(TABLE_END)
        readme.write_text(text[:start] + table() + text[end + len(TABLE_END) :], encoding="utf-8")
        return 0
    count, bad = 0, 0
    for directory in sorted(p for p in REPORTS.iterdir() if p.is_dir()):
        count += 1
        found = problems(
            yaml.safe_load((directory / "report.yaml").read_text(encoding="utf-8")), directory
        )
        for problem in found:
            print(f"{directory.name}: {problem}")
        bad += bool(found)
    current = readme_is_current()
    if not current:
        print(
            "README.md: the table of reports is not current (python bench/reports2026/schema.py --write-table)"
        )
    print(f"{count} reports, {bad} with problems")
    return 1 if bad or not current else 0


if __name__ == "__main__":
    raise SystemExit(main())
