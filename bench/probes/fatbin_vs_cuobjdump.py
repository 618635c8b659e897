"""The doctor's fatbin reader (vllm_doctor/fatbin.py) against NVIDIA's cuobjdump, on the
shared objects of an installed stack (torch, triton, the nvidia-* wheels).

    python bench/probes/fatbin_vs_cuobjdump.py [SITE_PACKAGES] > fatbin-vs-cuobjdump.txt

For every shared object under the given site-packages that has device code, it compares the
set of images the reader finds (``sm_90``, ``sm_90a``, ``sm_100f``, ``compute_120``) with the
``arch =`` header cuobjdump prints for each ELF and PTX entry (``cuobjdump -res-usage``). The
file names ``--list-elf`` prints are not used: they drop the family suffix (``sm_100f`` is
listed as ``x.sm_100.cubin``) while the entry's header keeps it. Runs where cuobjdump is installed (the device
machine); exit 1 when a file differs. Needs only the standard library and the doctor's tree.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from vllm_doctor.fatbin import NotAFatbinFile, images_summary, read_fatbins

# "Fatbin elf code:" / "Fatbin ptx code:", then "=====", then "arch = sm_100f"
KIND = re.compile(r"^Fatbin (elf|ptx) code:")
ARCH = re.compile(r"^arch = (sm_\d+[af]?)\s*$")


def cuobjdump_images(path: Path) -> set[str] | None:
    run = subprocess.run(
        ["cuobjdump", "-res-usage", str(path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if run.returncode != 0:
        return None
    images, kind = set(), None
    for raw in run.stdout.splitlines():
        line = raw.strip()
        if found := KIND.match(line):
            kind = found.group(1)
        elif (found := ARCH.match(line)) and kind is not None:
            image = found.group(1)
            images.add(image if kind == "elf" else image.replace("sm_", "compute_"))
            kind = None
    return images


def main() -> int:
    site = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(sysconfig.get_paths()["purelib"])
    if shutil.which("cuobjdump") is None:
        print("cuobjdump not found", file=sys.stderr)
        return 2
    differing = compared = 0
    for path in sorted(site.rglob("*.so*")):
        if not path.is_file() or path.is_symlink():
            continue
        try:
            ours = set(images_summary(read_fatbins(path)))
        except (NotAFatbinFile, OSError, ValueError):
            continue
        if not ours:
            continue
        theirs = cuobjdump_images(path)
        if theirs is None:
            print(f"{path.relative_to(site)}: cuobjdump failed")
            continue
        compared += 1
        same = ours == theirs
        differing += not same
        print(
            f"{'same' if same else 'DIFFERS'}  {path.relative_to(site)}  {sorted(ours, key=_order)}"
        )
        if not same:
            print(
                f"    only ours: {sorted(ours - theirs)}  only cuobjdump: {sorted(theirs - ours)}"
            )
    print(f"\n{compared} shared objects with device code compared, {differing} differ")
    return 1 if differing else 0


def _order(image: str) -> tuple[int, str]:
    return int("".join(c for c in image if c.isdigit()) or 0), image


if __name__ == "__main__":
    sys.exit(main())
