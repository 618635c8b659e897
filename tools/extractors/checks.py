"""Start-up checks between serve options that each release makes (KIND "checks").

One option needs another, and vLLM refuses the line before loading anything when it is
missing. Which releases check it is read from the release itself: the ``if ...: raise``
whose message carries the check's literal text (``_static.guarded_raises``).

Key: the check's id (below): ``<option>:<option it needs>``, or ``<option>:@multimodal`` for
an option only a multimodal model takes. Value: ``{"file", "function", "condition", "message"}`` (the
file relative to the vllm package, the function, the ``if`` test, the raised literal text).
A release without the key does not make that check.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _static import guarded_raises

KIND = "checks"
# id -> the literal text the release's message carries
CHECKS = {
    # entrypoints/openai/cli_args.py validate_parsed_serve_args
    "enable-auto-tool-choice:tool-call-parser": "--enable-auto-tool-choice requires --tool-call-parser",
    # config ParallelConfig.__post_init__ / _validate_parallel_config
    "enable-eplb:enable-expert-parallel": "enable_expert_parallel must be True to use EPLB",
    # ModelConfig._init_multimodal_config: options only a multimodal model takes
    # ("@multimodal": the architecture vLLM loads is multimodal)
    "limit-mm-per-prompt:@multimodal": "`limit_mm_per_prompt` is only supported for multimodal models",
    "mm-processor-kwargs:@multimodal": "`mm_processor_kwargs` is only supported for multimodal models",
    "disable-mm-preprocessor-cache:@multimodal": "`disable_mm_preprocessor_cache` is only supported for multimodal models",
    "interleave-mm-strings:@multimodal": "`interleave_mm_strings` is only supported for multimodal models",
}
META = {
    "key": "<option>:<option it requires> (or :@multimodal: the model must be multimodal), "
    "as vLLM checks at start-up",
    "value": {
        "file": "file raising the error (relative to the vllm package)",
        "function": "the function",
        "condition": "the if test guarding the raise",
        "message": "the literal text of the raised message",
    },
    "sources": ["entrypoints/openai/cli_args.py", "config/parallel.py", "config.py"],
}


def extract(release) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for rel in release.names:
        if not rel.endswith(".py"):
            continue
        text = release.text(rel) or ""
        # the message may be split over adjacent literals: look for its longest word first
        wanted = {
            key: literal
            for key, literal in CHECKS.items()
            if max(literal.split(), key=len) in text and key not in out
        }
        tree = release.tree(rel) if wanted else None
        for func, test, raised in guarded_raises(tree) if tree is not None else ():
            for key, literal in wanted.items():
                if literal in raised and key not in out:
                    out[key] = {
                        "file": rel,
                        "function": func,
                        "condition": ast.unparse(test),
                        "message": raised,
                    }
    return out
