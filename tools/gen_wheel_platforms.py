"""Which platforms each vLLM release publishes wheels for on PyPI (knowledge/data/wheel_platforms.json).

    curl -s https://pypi.org/pypi/vllm/json -o vllm.json
    python tools/gen_wheel_platforms.py vllm.json

Reads PyPI's JSON description of the ``vllm`` project (one request, made by hand) and keeps, per
release, the platform tag of each wheel (``manylinux_2_31_aarch64``) and whether a source
archive exists. The crash-log reader for platforms uses it: pip building ``vllm-X.tar.gz``
(or finding no version at all) on a machine the release has no wheel for.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

OUT = (
    Path(__file__).resolve().parents[1]
    / "vllm_doctor"
    / "knowledge"
    / "data"
    / "wheel_platforms.json"
)


def main(path: str) -> None:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    releases = {}
    for version, files in data["releases"].items():
        try:
            Version(version)
        except InvalidVersion:
            continue
        platforms, sdist = set(), False
        for f in files:
            if f.get("yanked"):
                continue
            if f["filename"].endswith(".tar.gz"):
                sdist = True
                continue
            try:
                _, _, _, tags = parse_wheel_filename(f["filename"])
            except InvalidWheelFilename:
                continue
            platforms.update(t.platform for t in tags)
        if platforms or sdist:
            releases[version] = {"platforms": sorted(platforms), "sdist": sdist}
    ordered = dict(sorted(releases.items(), key=lambda kv: Version(kv[0])))
    OUT.write_text(
        json.dumps(
            {
                "kind": "wheel_platforms",
                "source": "https://pypi.org/pypi/vllm/json",
                "generated_by": "tools/gen_wheel_platforms.py",
                "value": "platform tags of the release's wheels on PyPI; sdist: a source archive exists",
                "releases": ordered,
            },
            indent=1,
        )
        + "\n",
        encoding="utf-8",
    )


if __name__ == "__main__":
    main(sys.argv[1])
