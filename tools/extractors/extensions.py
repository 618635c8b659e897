"""The compiled extension modules a release ships (KIND "extensions").

Keys: the module's import name (``vllm._C``, ``vllm.vllm_flash_attn._vllm_fa2_C``); value:
``{"file": "vllm/_C.abi3.so"}``. Read from the wheel's file list (an unpacked text tree holds
no ``.so``), so a crash log's missing or unloadable extension can be told apart: one the
release ships (a broken install or an unbuilt source checkout) or one it does not have.
"""

from __future__ import annotations

import zipfile
from typing import Any

KIND = "extensions"
META = {
    "key": "import name of a compiled extension module",
    "value": {"file": "its path in the wheel"},
    "sources": ["the wheel's file list (*.so)"],
}


def extract(release) -> dict[str, Any]:
    wheel = release.wheel
    if wheel is None:
        release.problem("no wheel to list compiled extensions from")
        return {}
    out = {}
    with zipfile.ZipFile(wheel) as zf:
        for name in zf.namelist():
            if name.endswith(".so") and name.startswith("vllm/"):
                module = name[:-3].split(".")[0].replace("/", ".")
                out[module] = {"file": name}
    return out
