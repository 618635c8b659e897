"""A small on-disk cache for deterministic sub-check results (no torch imported here).

The traced ``torch.compile`` failure of tp-softembed depends only on the installed torch and
on the probe's own code, but producing it costs a ``torch._dynamo`` import (seconds, more than
the rest of a probe run). Its result is kept under ``$VLLM_DOCTOR_CACHE_DIR`` (default
``$XDG_CACHE_HOME/vllm-doctor`` or ``~/.cache/vllm-doctor``), keyed by the torch version and
git commit, the probe module's source and the parameters it used; ``--no-cache`` bypasses it.
A reused result says so (``metrics.cached``), with when and under which torch it was made.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
from pathlib import Path
from typing import Any

from vllm_doctor.compact import cache_dir, seal_text, sealed_by_me

CACHE_VERSION = 1


def torch_identity() -> dict[str, str] | None:
    """torch's version and git commit, read without importing torch; None if not installed."""
    try:
        version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return None
    ident = {"version": version}
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.origin:
        from vllm_doctor.facts.packages import read_version_file

        torch_dir = Path(spec.origin).parent
        git = read_version_file(torch_dir / "version.py").get("git_version")
        if isinstance(git, str) and re.fullmatch(r"[0-9a-f]+", git):
            ident["git"] = git
        ident["path"] = str(torch_dir)
    return ident


def _module_digest(module: str) -> str:
    path = Path(__file__).resolve().parent / f"{module}.py"
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    except OSError:
        return "unknown"


def part_key(probe: str, module: str, part: str, params: dict[str, Any]) -> str | None:
    ident = torch_identity()
    if ident is None:
        return None
    blob = json.dumps(
        {
            "v": CACHE_VERSION,
            "probe": probe,
            "part": part,
            "torch": ident,
            "code": _module_digest(module),
            "params": params,
        },
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def _record(result: dict[str, Any], date: Any, torch: Any) -> bytes:
    """What a stored result's seal covers: the record as canonical JSON."""
    return json.dumps({"date": date, "torch": torch, "result": result}, sort_keys=True).encode()


def load(key: str | None) -> dict[str, Any] | None:
    """A stored result for ``key``, only when this user's seal (compact.py) verifies: a
    planted or edited result file is never a probe's verdict."""
    if key is None:
        return None
    path = cache_dir() / f"part-{key}.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    result = data.get("result")
    if not isinstance(result, dict) or "status" not in result:
        return None
    if not sealed_by_me(
        key, _record(result, data.get("date"), data.get("torch")), data.get("seal")
    ):
        return None
    result = json.loads(json.dumps(result))
    result.setdefault("metrics", {})["cached"] = {k: data.get(k) for k in ("date", "torch")}
    return result


def store(key: str | None, result: dict[str, Any]) -> None:
    if key is None or result.get("status") not in ("pass", "warn", "fail"):
        return
    date = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    torch = (torch_identity() or {}).get("version")
    result = json.loads(json.dumps(result))  # as it will read back
    seal = seal_text(key, _record(result, date, torch))
    if seal is None:
        return  # no key: a result that could not be verified is not kept
    directory = cache_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        tmp = directory / f".part-{key}.{os.getpid()}.tmp"
        tmp.write_text(
            json.dumps({"date": date, "torch": torch, "result": result, "seal": seal}),
            encoding="utf-8",
        )
        os.replace(tmp, directory / f"part-{key}.json")
    except OSError:
        pass  # a read-only home: no cache, no harm
