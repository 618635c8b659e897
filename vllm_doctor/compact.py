"""Derived data built once from source files and kept on disk in a form that loads in
milliseconds (Python's ``marshal``, the format of ``.pyc`` files).

The error catalogue (a 6.7 MB JSON table) and the rule base (84 YAML files) take a quarter
of a second to parse and index; every ``explain --log`` and ``check --log`` needs them. The
first use builds the derived value and writes it under the cache directory; later runs read
it back. The file name carries a digest of the sources' bytes (and of this package's version,
the Python version and the value's layout), so an edited, regenerated or reinstalled source
is never answered from a stale build: its digest names another file, which is built afresh.

A build is data the gate trusts (the rule base decides exit 0 or 1), so it is never trusted
for being there: each file is sealed — it holds the digest of the sources it was built from
and a keyed digest (BLAKE2b, ``seal_key``) of that digest and the value — and a file whose
seal does not verify, that does not load, or whose value has the wrong shape is rebuilt from
the shipped sources, never read. The key lives outside the cache, in the doctor's state
folder (``$VLLM_DOCTOR_STATE_DIR``, else ``$XDG_STATE_HOME/vllm-doctor``, else
``~/.local/state/vllm-doctor``, mode 0700, the key file 0600): a cache folder that is shared,
restored from a CI cache or planted by another user cannot produce a build this user's runs
accept. A cache or key that cannot be read or written only costs the build, never a result.

The cache directory is ``$VLLM_DOCTOR_CACHE_DIR``, else ``$XDG_CACHE_HOME/vllm-doctor``,
else ``~/.cache/vllm-doctor``. It holds the user's own files, like ``__pycache__``.
"""

from __future__ import annotations

import hashlib
import marshal
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

LAYOUT = 1  # bump when a cached value's shape changes


def cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The doctor's cache directory (compact builds here, probe results in probes.cache)."""
    env = os.environ if environ is None else environ
    if env.get("VLLM_DOCTOR_CACHE_DIR"):
        return Path(env["VLLM_DOCTOR_CACHE_DIR"])
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "vllm-doctor"


def digest(sources: Sequence[tuple[str, bytes]], layout: int = LAYOUT) -> str:
    from vllm_doctor import __version__

    h = hashlib.blake2b(digest_size=16)
    h.update(f"{__version__}|{sys.version_info[:2]}|{marshal.version}|{layout}".encode())
    for name, data in sources:
        h.update(name.encode("utf-8", "surrogateescape") + b"\0" + len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


_MAGIC = b"vllm-doctor sealed build 1\n"
_NOT_READ = object()


def state_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The doctor's state folder (the seal key): not part of any cache."""
    env = os.environ if environ is None else environ
    if env.get("VLLM_DOCTOR_STATE_DIR"):
        return Path(env["VLLM_DOCTOR_STATE_DIR"])
    base = env.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "vllm-doctor"


def seal_key() -> bytes | None:
    """This user's key for sealing builds (made on first use, 32 random bytes, mode 0600 in a
    0700 folder of the user's own); None when there is no such key to be had — then builds are
    made for the run and never read back."""
    import stat

    folder = state_dir()
    path = folder / "seal.key"
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = os.lstat(folder)
        if stat.S_ISLNK(info.st_mode) or info.st_mode & 0o077 or info.st_uid != _uid(info):
            return None
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except FileExistsError:
            pass
        else:
            with os.fdopen(fd, "wb") as out:
                out.write(os.urandom(32))
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(handle.fileno())
            key = handle.read(33)
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode) or info.st_mode & 0o077 or info.st_uid != _uid(info):
        return None
    return key if len(key) == 32 else None


def _uid(info: os.stat_result) -> int:
    return os.getuid() if hasattr(os, "getuid") else info.st_uid


def _seal(key: bytes, built_from: str, payload: bytes) -> bytes:
    return hashlib.blake2b(built_from.encode() + b"\0" + payload, key=key).digest()


def seal_text(built_from: str, payload: bytes) -> str | None:
    """The seal of a cached record other than a build (a probe's result), as hex; None
    without a key (then the record is not worth keeping)."""
    key = seal_key()
    return _seal(key, built_from, payload).hex() if key is not None else None


def sealed_by_me(built_from: str, payload: bytes, seal: object) -> bool:
    """Whether ``seal`` is this user's seal of ``payload`` for ``built_from``."""
    import hmac

    mine = seal_text(built_from, payload)
    return isinstance(seal, str) and mine is not None and hmac.compare_digest(seal, mine)


def cached(
    name: str,
    sources: Sequence[tuple[str, bytes]],
    build: Callable[[], Any],
    layout: int = LAYOUT,
    valid: Callable[[Any], bool] = lambda value: True,
) -> Any:
    """``build()``'s value for these sources (name, bytes): read from the cache when a build
    sealed by this user for exactly these bytes is there and ``valid`` accepts its value, else
    built and written for the next run. ``build`` must return plain data (what ``marshal``
    stores: str, bytes, numbers, tuples, lists, dicts, sets)."""
    built_from = digest(sources, layout)
    path = cache_dir() / f"{name}-{built_from}.marshal"
    key = seal_key()
    if key is not None:
        value = _read_sealed(path, key, built_from)
        if value is not _NOT_READ and valid(value):
            return value
    value = build()
    if key is not None:  # without a key a build could never be read back: not written
        payload = marshal.dumps(value)
        sealed = _MAGIC + built_from.encode() + b"\n" + _seal(key, built_from, payload) + payload
        _write(path, sealed, stale=f"{name}-")
    return value


def _read_sealed(path: Path, key: bytes, built_from: str) -> Any:
    """The value of a build sealed with ``key`` for ``built_from``; _NOT_READ for anything
    else (missing, another format, another source digest, a seal that does not verify, bytes
    marshal cannot load)."""
    import hmac

    head = _MAGIC + built_from.encode() + b"\n"
    try:
        data = path.read_bytes()
    except OSError:
        return _NOT_READ
    if not data.startswith(head) or len(data) < len(head) + 64:
        return _NOT_READ
    seal, payload = data[len(head) : len(head) + 64], data[len(head) + 64 :]
    if not hmac.compare_digest(seal, _seal(key, built_from, payload)):
        return _NOT_READ
    try:
        return marshal.loads(payload)
    except (EOFError, ValueError, TypeError):
        return _NOT_READ


def _write(path: Path, data: bytes, stale: str) -> None:
    """Write atomically (concurrent runs never read half a file) and drop the older builds
    of the same value; a directory that cannot be written is left alone."""
    import tempfile

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".marshal")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
        for old in path.parent.glob(f"{stale}*.marshal"):
            if old != path:
                old.unlink(missing_ok=True)
    except OSError:
        pass
