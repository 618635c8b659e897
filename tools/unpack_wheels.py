#!/usr/bin/env python3
"""Unpack the text files of cached vLLM release wheels into ``<cache>/src/<version>/``.

The generators read a release from its wheel or from this unpacked copy (tools/wheelsrc.py);
the copy makes repeated runs and greps across releases fast. Only text sources are kept
(.py .json .yaml .txt .jinja, plus the wheel's METADATA).

    python tools/unpack_wheels.py /work/wheels
"""

from __future__ import annotations

import argparse
import sys
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from wheelsrc import PACKAGE, wheel_version

KEEP = {"py", "json", "yaml", "txt", "jinja"}
MAX_BYTES = 8 << 20


def unpack(cache: Path) -> int:
    count = 0
    for wheel in sorted(cache.glob(f"{PACKAGE}-*.whl")):
        version = wheel_version(wheel)
        if version is None:
            continue
        dest = cache / "src" / str(version)
        if (dest / ".done").exists():
            continue
        with zipfile.ZipFile(wheel) as archive:
            for info in archive.infolist():
                name = info.filename
                if name.endswith("/") or info.file_size > MAX_BYTES:
                    continue
                source = name.startswith(f"{PACKAGE}/") and name.rsplit(".", 1)[-1] in KEEP
                if source or name.endswith(".dist-info/METADATA"):
                    archive.extract(info, dest)
        (dest / ".done").touch()
        count += 1
        print(f"unpacked {version}", file=sys.stderr)
    return count


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cache", type=Path, help="directory holding vllm-*.whl")
    args = parser.parse_args()
    if not args.cache.is_dir():
        print(f"{args.cache}: no such directory", file=sys.stderr)
        return 2
    unpack(args.cache)
    return 0


if __name__ == "__main__":
    sys.exit(main())
