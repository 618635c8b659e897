"""Safe YAML loading, through libyaml's C parser when PyYAML has it (about 10× faster).

Both loaders build only plain Python data (no tags, no object construction).
"""

from __future__ import annotations

from typing import Any

import yaml

YAMLError = yaml.YAMLError
_SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def safe_load(text: str) -> Any:
    return yaml.load(text, Loader=_SafeLoader)  # noqa: S506 - a safe loader
