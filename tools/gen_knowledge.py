#!/usr/bin/env python3
"""Regenerate the release knowledge tables from the vLLM release wheels.

    python tools/gen_knowledge.py /work/wheels                    # every table
    python tools/gen_knowledge.py /work/wheels --only options,pins
    python tools/gen_knowledge.py /work/wheels --download         # fetch missing releases first
    python tools/gen_knowledge.py /work/wheels --audit            # then compare with the rules
    python tools/gen_knowledge.py /work/wheels --audit-only       # audit the shipped tables

Every module ``tools/extractors/<name>.py`` (names starting with ``_`` excepted) that defines
``KIND`` and ``extract(release)`` is one table. Each extractor runs over every release in
the directory (wheels or unpacked trees, see ``tools/wheelsrc.py``) from 0.8.0 on, releases
in parallel processes; the per-release values are folded into spans
(``vllm_doctor.knowledge.ranges.table``) and written to
``vllm_doctor/knowledge/data/<kind>.json``, with ``data/releases.json`` listing the releases.

What an extractor could not read from a release is recorded in the table's meta under
``problems`` (``{release: [reason, ...]}``): a reason the extractor gave with
``release.problem(...)``, or the exception it raised (the release then contributes no keys
to that table, and its absence is never read as "removed": see ``unreadable``).

``--audit`` calls every extractor's ``audit(table, rules_dir)`` and exits 1 when one of them
reports a contradiction between the generated table and the curated rules.

Exit codes: 0 done, 1 audit contradictions, 2 bad usage (no releases, unknown kind, a failed
download).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
import traceback
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any

TOOLS = Path(__file__).resolve().parent
REPO = TOOLS.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
if str(TOOLS) not in sys.path:
    sys.path.insert(0, str(TOOLS))

from packaging.version import Version  # noqa: E402
from wheelsrc import ReleaseSource, find_releases  # noqa: E402

from vllm_doctor.knowledge import DATA_DIR  # noqa: E402
from vllm_doctor.knowledge.ranges import dump, table  # noqa: E402

EXTRACTORS_DIR = TOOLS / "extractors"
RULES_DIR = REPO / "rules"
MIN_VERSION = "0.8.0"


class UsageError(Exception):
    """Bad input (exit 2)."""


def discover(directory: Path = EXTRACTORS_DIR) -> dict[str, ModuleType]:
    """KIND -> extractor module, for every tools/extractors/*.py that defines both parts."""
    found: dict[str, ModuleType] = {}
    for path in sorted(directory.glob("*.py")):
        if path.name.startswith("_"):
            continue
        module = _load_module(path)
        kind = getattr(module, "KIND", None)
        if isinstance(kind, str) and callable(getattr(module, "extract", None)):
            if kind in found:
                raise UsageError(
                    f"two extractors for kind {kind!r}: {found[kind].__file__}, {path}"
                )
            found[kind] = module
    return found


_MODULES: dict[Path, ModuleType] = {}


def _load_module(path: Path) -> ModuleType:
    path = path.resolve()
    if path not in _MODULES:
        name = f"extractors_{path.stem}"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look the module up while building
        spec.loader.exec_module(module)
        _MODULES[path] = module
    return _MODULES[path]


def run_release(
    version: str, location: str, extractor_paths: dict[str, str]
) -> dict[str, tuple[dict[str, Any] | None, list[str]]]:
    """All extractors over one release: kind -> (values or None if it failed, problems)."""
    release = ReleaseSource(Version(version), Path(location))
    out: dict[str, tuple[dict[str, Any] | None, list[str]]] = {}
    for kind, path in extractor_paths.items():
        module = _load_module(Path(path))
        release.problems = []
        try:
            values = module.extract(release)
            if not isinstance(values, dict):
                raise TypeError(f"extract() returned {type(values).__name__}, not a dict")
            out[kind] = (values, list(release.problems))
        except Exception as err:  # one release's odd layout never stops the others
            where = traceback.extract_tb(err.__traceback__)[-1]
            out[kind] = (
                None,
                [
                    *release.problems,
                    f"extractor failed: {type(err).__name__}: {err} "
                    f"({Path(where.filename).name}:{where.lineno})",
                ],
            )
    return out


def generate(
    releases: list[ReleaseSource], extractors: dict[str, ModuleType], jobs: int = 2
) -> dict[str, dict[str, Any]]:
    """kind -> the whole table (ready for ranges.dump)."""
    paths = {kind: str(Path(m.__file__).resolve()) for kind, m in extractors.items()}
    results: dict[str, dict[str, tuple[dict | None, list[str]]]] = {}
    if jobs > 1 and len(releases) > 1:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            futures = {
                str(r.version): pool.submit(run_release, str(r.version), str(r.location), paths)
                for r in releases
            }
            for version, future in futures.items():
                results[version] = future.result()
    else:
        for r in releases:
            results[str(r.version)] = run_release(str(r.version), str(r.location), paths)
    tables = {}
    for kind, module in extractors.items():
        per_release: dict[str, dict[str, Any]] = {}
        problems: dict[str, list[str]] = {}
        unreadable: list[str] = []
        for version, by_kind in results.items():
            values, notes = by_kind[kind]
            per_release[version] = values or {}
            if values is None:
                unreadable.append(version)
            if notes:
                problems[version] = notes
        meta: dict[str, Any] = dict(getattr(module, "META", {}) or {})
        meta["generated_by"] = "tools/gen_knowledge.py"
        meta["counts"] = {v: len(per_release[v]) for v in sorted(per_release, key=Version)}
        meta["problems"] = {v: problems[v] for v in sorted(problems, key=Version)}
        meta["unreadable"] = sorted(unreadable, key=Version)
        tables[kind] = table(kind, per_release, **meta)
    return tables


def write_tables(tables: dict[str, dict[str, Any]], releases: list[str], out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    for kind, data in tables.items():
        (out_dir / f"{kind}.json").write_text(dump(data), encoding="utf-8")
    listing = table("releases", {r: {} for r in releases})
    (out_dir / "releases.json").write_text(
        json.dumps(listing, separators=(",", ":")), encoding="utf-8"
    )


def run_audits(
    extractors: dict[str, ModuleType], out_dir: Path, rules_dir: Path = RULES_DIR
) -> list[str]:
    problems = []
    for kind, module in extractors.items():
        audit = getattr(module, "audit", None)
        if audit is None:
            continue
        path = out_dir / f"{kind}.json"
        if not path.is_file():  # not generated yet: nothing to contradict
            print(f"audit: {kind}: no table at {path}, skipped", file=sys.stderr)
            continue
        data = json.loads(path.read_text(encoding="utf-8"))
        problems.extend(f"{kind}: {p}" for p in audit(data, rules_dir))
    return problems


def download_missing(wheels: Path, min_version: str) -> None:
    import audit_wheels

    have = {r.version for r in find_releases(wheels)}
    try:
        wanted = [v for v in audit_wheels.available_releases(Version(min_version)) if v not in have]
    except audit_wheels.AuditError as err:
        raise UsageError(str(err)) from None
    errors = audit_wheels.download(wheels, wanted)
    if errors:
        raise UsageError("download failed: " + "; ".join(errors))
    download_aarch64(wheels, [r.version for r in find_releases(wheels, min_version)])


# the platform tags vLLM's aarch64 wheels carry (0.11 on); pip takes the first that matches
AARCH64_PLATFORMS = (
    "manylinux_2_35_aarch64",
    "manylinux_2_31_aarch64",
    "manylinux_2_28_aarch64",
    "manylinux_2_24_aarch64",
    "manylinux2014_aarch64",
)


def download_aarch64(wheels: Path, versions: list[Version]) -> None:
    """The aarch64 wheels (GH200, GB200, GB10 and Jetson hosts install these; their compiled
    extensions carry other architectures) into ``<wheels>/aarch64/``, for the releases whose
    kernel images have not been read yet. A release without an aarch64 wheel is skipped."""
    import subprocess

    folder = wheels / "aarch64"
    for version in versions:
        if (
            any(folder.glob(f"vllm-{version}-*.whl"))
            or (wheels / "kernel_images" / f"vllm-{version}-aarch64.json").is_file()
        ):
            continue
        platforms = [arg for tag in AARCH64_PLATFORMS for arg in ("--platform", tag)]
        cmd = [sys.executable, "-m", "pip", "download", f"vllm=={version}", "--no-deps"]
        cmd += ["--only-binary=:all:", *platforms, "--python-version", "3.12", "-q"]
        print(f"downloading vllm=={version} (aarch64) ...", file=sys.stderr)
        proc = subprocess.run([*cmd, "-d", str(folder)], capture_output=True, text=True)
        if proc.returncode != 0:
            print(f"  no aarch64 wheel for {version}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("wheels", type=Path, help="directory of vllm-*.whl (or unpacked src/)")
    parser.add_argument("--only", help="comma-separated kinds to regenerate (default: all)")
    parser.add_argument(
        "--download",
        action="store_true",
        help="first fetch missing release wheels (pip download vllm==X --no-deps)",
    )
    parser.add_argument(
        "--audit",
        action="store_true",
        help="after generating, compare the tables with the curated rules",
    )
    parser.add_argument(
        "--audit-only",
        action="store_true",
        help="audit the tables already in the output directory; generate nothing",
    )
    parser.add_argument("--out", type=Path, default=DATA_DIR, help="output directory")
    parser.add_argument("--jobs", type=int, default=2, help="parallel processes (default 2)")
    parser.add_argument("--min-version", default=MIN_VERSION)
    parser.add_argument("--max-version")
    parser.add_argument("--extractors", type=Path, default=EXTRACTORS_DIR, help=argparse.SUPPRESS)
    parser.add_argument("--rules", type=Path, default=RULES_DIR, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        extractors = discover(args.extractors)
        if args.only:
            wanted = [k.strip() for k in args.only.split(",") if k.strip()]
            unknown = [k for k in wanted if k not in extractors]
            if unknown:
                raise UsageError(
                    f"no extractor for {', '.join(unknown)} "
                    f"(known: {', '.join(sorted(extractors))})"
                )
            extractors = {k: extractors[k] for k in wanted}
        if not args.audit_only:
            if not args.wheels.is_dir():
                raise UsageError(f"{args.wheels}: not a directory")
            if args.download:
                download_missing(args.wheels, args.min_version)
            releases = find_releases(args.wheels, args.min_version, args.max_version)
            if not releases:
                raise UsageError(f"{args.wheels}: no vLLM releases from {args.min_version} on")
            start = time.perf_counter()
            tables = generate(releases, extractors, max(1, args.jobs))
            write_tables(tables, [str(r.version) for r in releases], args.out)
            for kind, data in tables.items():
                counts = data["counts"].values()
                print(
                    f"{kind}: {len(data['entries'])} keys, {min(counts)}..{max(counts)} per "
                    f"release, {len(data['problems'])} releases with problems -> "
                    f"{args.out / (kind + '.json')}",
                    file=sys.stderr,
                )
            print(
                f"{len(releases)} releases in {time.perf_counter() - start:.1f} s", file=sys.stderr
            )
    except UsageError as err:
        print(f"gen_knowledge: {err}", file=sys.stderr)
        return 2
    if args.audit or args.audit_only:
        contradictions = run_audits(extractors, args.out, args.rules)
        for line in contradictions:
            print(f"CONTRADICTION {line}")
        print(f"audit: {len(contradictions)} contradictions", file=sys.stderr)
        return 1 if contradictions else 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
