"""Derived data built once from source files and kept on disk in a form that loads in
milliseconds (Python's ``marshal``, the format of ``.pyc`` files).

The error catalogue (a 6.7 MB JSON table) and the rule base (84 YAML files) take a quarter
of a second to parse and index; every ``explain --log`` and ``check --log`` needs them. The
first use builds the derived value and writes it under the cache directory; later runs read
it back. The file name carries a digest of the sources' bytes (and of this package's version,
the Python version and the value's layout), so an edited, regenerated or reinstalled source
is never answered from a stale build: its digest names another file, which is built afresh.
A cache that cannot be read or written only costs the build, never a result.

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


def cached(
    name: str, sources: Sequence[tuple[str, bytes]], build: Callable[[], Any], layout: int = LAYOUT
) -> Any:
    """``build()``'s value for these sources (name, bytes): read from the cache when a build
    for exactly these bytes is there, else built and written for the next run. ``build``
    must return plain data (what ``marshal`` stores: str, bytes, numbers, tuples, lists,
    dicts, sets)."""
    path = cache_dir() / f"{name}-{digest(sources, layout)}.marshal"
    try:
        return marshal.loads(path.read_bytes())
    except (OSError, EOFError, ValueError, TypeError):
        pass  # not built yet for these bytes, or unreadable: build it
    value = build()
    _write(path, marshal.dumps(value), stale=f"{name}-")
    return value


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
