"""Write a copy of Ray's wheel without what a Python-only cluster never loads, so that it travels
to a machine reached only by copying files with a size limit (the device machine takes 64 MiB per
call: Ray 2.60's cp312 wheel alone is 79 MB).

Left out: the Java worker (``ray/jars``, 32 MB compressed), the dashboard's web UI
(``ray/dashboard/client``) and Ray's libraries above the core that neither `ray start`, the
doctor nor ``ray.cluster_utils`` import (rllib, data, serve, tune, train, llm). The wheel's RECORD
loses their lines; the rest is copied byte for byte.

    python bench/fleet/slim_wheel.py .whl/ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl
"""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

LEFT_OUT = (
    "ray/jars/",
    "ray/dashboard/client/",
    "ray/rllib/",
    "ray/data/",
    "ray/serve/",
    "ray/tune/",
    "ray/train/",
    "ray/llm/",
)


def slim(path: Path) -> tuple[int, int]:
    """Rewrite the wheel at ``path`` in place; (bytes before, bytes after)."""
    before = path.stat().st_size
    out = path.with_suffix(".slim")
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            if info.filename.startswith(LEFT_OUT):
                continue
            data = src.read(info)
            if info.filename.endswith(".dist-info/RECORD"):
                kept = [
                    line for line in data.decode().splitlines() if not line.startswith(LEFT_OUT)
                ]
                data = ("\n".join(kept) + "\n").encode()
            dst.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED, compresslevel=9)
    out.replace(path)
    return before, path.stat().st_size


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        was, now = slim(Path(arg))
        print(f"{arg}: {was / 1e6:.1f} MB -> {now / 1e6:.1f} MB")
