#!/usr/bin/env python3
"""Regenerate what each AITER version ships tuned for its fused MoE, from AITER's tagged source.

    python tools/aiter_tuned.py /work/stackwheels/amd-aiter/repo.git
    python tools/aiter_tuned.py GIT_DIR --fetch      # git fetch --tags first

GIT_DIR is a bare clone of https://github.com/ROCm/aiter (the one tools/gen_stack_knowledge.py
keeps in ``<dir>/amd-aiter/repo.git``). Every release tag ``v0.1.N[.postM]`` from 0.1.5 (the
versions vLLM's ROCm images pin; release candidates, dev and side tags are skipped) is read
with ``git show``, never checked out, built or imported:

- the tuned-config tables AITER's ``get_2stage_cfgs`` (aiter/fused_moe.py) looks a shape up in:
  ``aiter/configs/tuned_fmoe.csv`` and, from the versions whose ``AITER_CONFIG.get_config_file``
  (aiter/jit/core.py) merges them, ``aiter/configs/model_configs/*tuned_fmoe*.csv`` (not the
  untuned ones). A row's GPU is its ``gfx`` column, or for the tables keyed on ``cu_num`` alone
  the architecture AITER's own ``_LEGACY_CU_NUM_TO_GFX`` (aiter/jit/utils/chip_info.py) gives;
- what ``get_2stage_cfgs`` does with a shape that has no row: the default heuristics (a default
  CK 2-stage or asm kernel, chosen without a tuned entry) or an assertion.

Written: ``vllm_doctor/knowledge/data/aiter_tuned_fmoe.json``, spans over AITER versions:
``shape:<gfx>:<model_dim>:<inter_dim>:<expert>:<topk>`` → the quantizations tuned for that
shape (act/dtype/q_dtype_a/q_dtype_w/q_type, and the CU counts); ``@untuned`` → the dispatch's
answer for a shape without a row. The token count is left out: ``get_2stage_cfgs`` falls back
to the next smaller tuned token tier, and a shape with no row at any token count has none.

Exit codes: 0 done, 2 bad usage (not a git directory, no release tag read).
"""

from __future__ import annotations

import argparse
import csv
import io
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from packaging.version import Version  # noqa: E402

from vllm_doctor.knowledge import DATA_DIR  # noqa: E402
from vllm_doctor.knowledge.ranges import dump, table  # noqa: E402

KIND = "aiter_tuned_fmoe"
FIRST = Version("0.1.5")
RELEASE_TAG = re.compile(r"^v(\d+\.\d+\.\d+(?:\.post\d+)?)$")
DEFAULT_TABLE = "aiter/configs/tuned_fmoe.csv"
MODEL_TABLES = "aiter/configs/model_configs/"
# the dtype columns that name a quantization (the rest of a row is the shape or the result)
QUANT_COLUMNS = ("act_type", "dtype", "q_dtype_a", "q_dtype_w", "q_type")


class UsageError(Exception):
    """Bad input (exit 2)."""


def git(git_dir: Path, *args: str) -> str | None:
    done = subprocess.run(
        ["git", "--git-dir", str(git_dir), *args], capture_output=True, text=True, check=False
    )
    return done.stdout if done.returncode == 0 else None


def release_tags(git_dir: Path) -> list[tuple[Version, str]]:
    listed = git(git_dir, "tag", "--list", "v*")
    if listed is None:
        raise UsageError(f"{git_dir} is not a git directory of ROCm/aiter")
    tags = []
    for tag in listed.split():
        found = RELEASE_TAG.match(tag)
        if found and Version(found.group(1)) >= FIRST:
            tags.append((Version(found.group(1)), tag))
    return sorted(tags)


def legacy_gfx(source: str | None) -> dict[int, str]:
    """AITER's own cu_num → gfx table (chip_info.py), {} where the version has none."""
    if not source:
        return {}
    found = re.search(r"_LEGACY_CU_NUM_TO_GFX\s*=\s*\{([^}]*)\}", source)
    if not found:
        return {}
    return {int(n): g for n, g in re.findall(r"(\d+)\s*:\s*\"(gfx\w+)\"", found.group(1))}


def tables_read(git_dir: Path, tag: str) -> list[str]:
    """The tuned tables get_config_file merges at this tag (no AITER_CONFIG_FMOE set)."""
    files = [DEFAULT_TABLE]
    core = git(git_dir, "show", f"{tag}:aiter/jit/core.py") or ""
    if "model_configs" in core:
        listed = git(git_dir, "ls-tree", "--name-only", tag, MODEL_TABLES) or ""
        files += sorted(
            path
            for path in listed.split()
            if path.endswith(".csv") and "tuned_fmoe" in path and "untuned" not in path
        )
    return files


def untuned_answer(source: str) -> str:
    """What get_2stage_cfgs does for a shape with no tuned row."""
    start = source.find("def get_2stage_cfgs")
    if start < 0:
        return "unknown"
    body = source[start : source.find("\ndef ", start + 1)]
    if re.search(r"if\s+cfg\s+is\s+None[^\n]*:\s*\n\s*(raise|assert)\b", body):
        return "asserts"
    if re.search(r"if\s+cfg\s+is\s+None\b", body):
        return "default_heuristics"
    return "unknown"


def read_tag(git_dir: Path, tag: str, gfx_of: dict[int, str]) -> dict[str, Any]:
    shapes: dict[str, dict[str, set]] = {}
    for path in tables_read(git_dir, tag):
        text = git(git_dir, "show", f"{tag}:{path}")
        if not text:
            continue
        for row in csv.DictReader(io.StringIO(text)):
            try:
                cu_num = int(row.get("cu_num") or 0)
                dims = [int(row[k]) for k in ("model_dim", "inter_dim", "expert", "topk")]
            except (KeyError, ValueError):
                continue
            gfx = (row.get("gfx") or "").strip() or gfx_of.get(cu_num) or f"cu{cu_num}"
            key = "shape:" + ":".join([gfx, *map(str, dims)])
            entry = shapes.setdefault(key, {"quant": set(), "cu_num": set()})
            entry["quant"].add("/".join(_short(row.get(c, "")) for c in QUANT_COLUMNS))
            entry["cu_num"].add(cu_num)
    values: dict[str, Any] = {
        key: {"quant": sorted(v["quant"]), "cu_num": sorted(v["cu_num"])}
        for key, v in shapes.items()
    }
    fused = git(git_dir, "show", f"{tag}:aiter/fused_moe.py") or ""
    values["@untuned"] = {
        "answer": untuned_answer(fused),
        "method": "aiter/fused_moe.py get_2stage_cfgs",
    }
    return values


def _short(value: str) -> str:
    return re.sub(r"^(torch\.|ActivationType\.|QuantType\.)", "", value.strip())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("git_dir", type=Path, help="bare clone of ROCm/aiter")
    parser.add_argument("--fetch", action="store_true", help="git fetch --tags first")
    parser.add_argument(
        "--out", type=Path, default=DATA_DIR / f"{KIND}.json", help="the table to write"
    )
    args = parser.parse_args(argv)
    try:
        if args.fetch:
            git(args.git_dir, "fetch", "--tags", "--quiet", "origin")
        tags = release_tags(args.git_dir)
        if not tags:
            raise UsageError(f"{args.git_dir}: no release tag from {FIRST}")
    except UsageError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    chip_info = "aiter/jit/utils/chip_info.py"
    newest_map = legacy_gfx(git(args.git_dir, "show", f"{tags[-1][1]}:{chip_info}"))
    per_version: dict[str, dict[str, Any]] = {}
    for version, tag in tags:
        own = legacy_gfx(git(args.git_dir, "show", f"{tag}:{chip_info}"))
        # versions before the table existed keyed rows on cu_num alone; the mapping is the
        # hardware's (MI300X/MI325X 304 CUs, MI308X 80: gfx942; MI350X/MI355X 256: gfx950)
        per_version[str(version)] = read_tag(args.git_dir, tag, own or newest_map)
        print(f"{tag}: {len(per_version[str(version)]) - 1} shapes", file=sys.stderr)
    data = table(
        KIND,
        per_version,
        key="'shape:<gfx>:<model_dim>:<inter_dim>:<expert>:<topk>' (AITER's tuned fused-MoE "
        "rows, token count left out) or '@untuned' (what get_2stage_cfgs does without a row)",
        value={
            "quant": "act_type/dtype/q_dtype_a/q_dtype_w/q_type tuned for the shape",
            "cu_num": "the CU counts the rows were tuned on",
            "answer": "default_heuristics (a default kernel, no tuned entry) or asserts",
        },
        sources=[DEFAULT_TABLE, MODEL_TABLES + "*tuned_fmoe*.csv", "aiter/fused_moe.py"],
        generated_by="tools/aiter_tuned.py",
        versions_of="amd-aiter (git tags of https://github.com/ROCm/aiter)",
    )
    args.out.write_text(dump(data), encoding="utf-8")
    print(f"wrote {args.out}: {len(per_version)} versions", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
