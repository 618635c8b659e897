"""How one release's ``FlexibleArgumentParser.parse_args`` rewrites the serve line before
argparse sees it (KIND "cli_parser"): the shorthands whose acceptance is the parser's, not
an option table's.

Keys (present where the release has the rewrite):

* ``dotted`` — ``{"prefix": "-" | "--", "file": path}``: words starting with ``prefix`` and
  holding a ``.`` are dotted keys (``--speculative-config.method mtp``; with ``-`` also the
  short aliases: ``-cc.cudagraph_mode FULL``), merged into one JSON value per option. Absent
  in releases without dotted keys (0.8.x): there such a word is an unrecognized argument.
* ``o_shorthand`` — ``{"option": name, "file": path}``: the option ``-O3`` / ``-O 3`` /
  ``-Odecode`` sets (``compilation-config`` while ``-O`` was its alias, through ``-O.level``
  in 0.10-0.11; ``optimization-level`` from 0.12).
"""

from __future__ import annotations

import re
from typing import Any

KIND = "cli_parser"
META = {
    "key": "dotted | o_shorthand",
    "value": {
        "dotted": "prefix: the dashes a dotted word starts with (- also takes short aliases "
        "such as -cc.<key>), file",
        "o_shorthand": "option: the option -O<x> sets, file",
    },
    "sources": ["utils/argparse_utils.py", "utils/__init__.py", "utils.py", "engine/arg_utils.py"],
}

_DOTTED = re.compile(
    r"""processed_arg\.startswith\(\s*["'](-{1,2})["']\s*\)\s*and\s*["']\.["']\s+in\s+"""
    r"""processed_arg"""
)


def _parser_file(release) -> str | None:
    for rel in ("utils/argparse_utils.py", "utils/__init__.py", "utils.py"):
        if "class FlexibleArgumentParser" in (release.text(rel) or ""):
            return rel
    return None


def extract(release) -> dict[str, Any]:
    out: dict[str, Any] = {}
    rel = _parser_file(release)
    if rel is None:
        release.problem("FlexibleArgumentParser not found: the parser's rewrites are not known")
        return out
    text = release.text(rel) or ""
    match = _DOTTED.search(text)
    if match:
        out["dotted"] = {"prefix": match.group(1), "file": rel}
    engine = release.text("engine/arg_utils.py") or ""
    if re.search(r"""["']--optimization-level["']""", text) and re.search(
        r"""startswith\(\s*["']-O["']\s*\)""", text
    ):
        out["o_shorthand"] = {"option": "optimization-level", "file": rel}
    elif re.search(r"""["']--compilation-config["']\s*,\s*["']-O["']""", engine):
        out["o_shorthand"] = {"option": "compilation-config", "file": "engine/arg_utils.py"}
    return out
