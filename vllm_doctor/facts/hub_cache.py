"""The doctor's private cache of Hub answers (facts/hub.py fetches them): every file and folder
name is made here, never taken from an answer; the folder is this user's, 0700, and each file is
written whole and atomically, never through a link planted at its name."""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vllm_doctor.errors import InputError

FRESH_DAYS = 7  # a branch's cached answer is asked again after this; a commit's never
# the files beside config.json that vLLM (and the doctor's reader) use to build the model
# config, stored next to it; the index only gives the weights' size and shard names
SIDE_FILES = ("hf_quant_config.json",)
COMMIT = re.compile(r"[0-9a-f]{40}")


@dataclass
class HubModel:
    repo_id: str
    revision: str  # the commit the files are from (40 hex)
    config_path: Path
    weights_bytes: int | None = None
    weights_how: str = ""
    weights_missing: str = ""  # why the weights' size is unknown, when it is
    dtypes: dict[str, int] = field(default_factory=dict)  # safetensors dtype → parameters
    fetched: str = ""  # when (ISO date), for an answer read back from the doctor's cache

    @property
    def where(self) -> str:
        cached = f", cached by vllm-doctor {self.fetched}" if self.fetched else ""
        return f"Hub: {self.repo_id}@{self.revision[:12]}{cached}"


@dataclass
class Fetched:
    commit: str
    files: dict[str, bytes]  # config.json and the side files, checked
    weights_bytes: int | None = None
    weights_how: str = ""
    weights_missing: str = ""
    dtypes: dict[str, int] = field(default_factory=dict)


@dataclass
class Cache:
    """``<cache_dir>/hub/<digest of endpoint and repository>/``: ``<commit>/`` holds the files and
    ``model.json`` (what the Hub said of the weights), ``refs/<digest of revision>`` the commit a
    revision named. Every name is made here; the folder is private (0700, this user's)."""

    root: Path
    endpoint: str
    repo_id: str

    @classmethod
    def open(cls, environ: Mapping[str, str], endpoint: str, repo_id: str) -> Cache | None:
        from vllm_doctor.compact import cache_dir

        key = _digest(f"{endpoint}\0{repo_id}")
        root = cache_dir() / "hub" / key  # the doctor's setting, as for its other builds
        return cls(root, endpoint, repo_id) if _private_dir(root) else None

    @classmethod
    def temporary(cls, endpoint: str, repo_id: str) -> Cache:
        """For a run whose cache folder cannot be used: a folder removed at exit."""
        import atexit
        import shutil
        import tempfile

        root = Path(tempfile.mkdtemp(prefix="vllm-doctor-hub-"))
        atexit.register(shutil.rmtree, root, True)
        return cls(root, endpoint, repo_id)

    def find(self, revision: str) -> tuple[HubModel, bool] | None:
        """(the cached model, whether it is fresh) for this revision, or None."""
        from vllm_doctor.bounds import read_text

        try:
            commit = read_text(self.root / "refs" / _digest(revision), "cache ref", "toml").strip()
            folder = self.root / commit
            meta = json.loads(read_text(folder / "model.json", "cache entry", "json"))
        except (InputError, OSError, ValueError):
            return None
        if not COMMIT.fullmatch(commit) or not isinstance(meta, dict):
            return None
        try:
            model = HubModel(
                self.repo_id,
                commit,
                folder / "config.json",
                _int_or_none(meta.get("weights_bytes")),
                str(meta.get("weights_how") or ""),
                str(meta.get("weights_missing") or ""),
                {str(k): int(v) for k, v in (meta.get("dtypes") or {}).items()},
                str(meta.get("fetched") or "")[:10],
            )
            fetched = dt.date.fromisoformat(model.fetched)
        except (AttributeError, TypeError, ValueError):
            return None
        if not model.config_path.is_file():
            return None
        fresh = (
            COMMIT.fullmatch(revision) is not None or (dt.date.today() - fetched).days < FRESH_DAYS
        )
        return model, fresh

    def store(self, revision: str, fetched: Fetched) -> HubModel:
        folder = self.root / fetched.commit
        today = dt.date.today().isoformat()
        meta = {
            "format": 1,
            "repo_id": self.repo_id,
            "weights_bytes": fetched.weights_bytes,
            "weights_how": fetched.weights_how,
            "weights_missing": fetched.weights_missing,
            "dtypes": fetched.dtypes,
            "fetched": today,
        }
        folder.mkdir(mode=0o700, exist_ok=True)
        for name, data in fetched.files.items():
            _write(folder / name, data)
        for stale in SIDE_FILES:  # a side file the commit no longer has
            if stale not in fetched.files:
                (folder / stale).unlink(missing_ok=True)
        _write(folder / "model.json", json.dumps(meta).encode())
        (self.root / "refs").mkdir(mode=0o700, exist_ok=True)
        _write(self.root / "refs" / _digest(revision), fetched.commit.encode())
        return HubModel(
            self.repo_id,
            fetched.commit,
            folder / "config.json",
            fetched.weights_bytes,
            fetched.weights_how,
            fetched.weights_missing,
            dict(fetched.dtypes),
        )


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogateescape"), digest_size=16).hexdigest()


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _private_dir(path: Path) -> bool:
    """``path`` exists (made here with mode 0700) as a real directory of this user that no one
    else may write to, and so do the folders it was made under; False when it cannot be."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        for folder in (path, path.parent, path.parent.parent):
            info = os.lstat(folder)
            if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
                return False
            if hasattr(os, "getuid") and info.st_uid != os.getuid():
                return False
            if info.st_mode & 0o022:
                return False
    except OSError:
        return False
    return True


def _write(path: Path, data: bytes) -> None:
    """Atomically, never through a link planted at the name (os.replace swaps the link itself)."""
    import tempfile

    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
