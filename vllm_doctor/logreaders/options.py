"""Options vLLM's argument parser refused that no release has ever accepted.

``vllm serve: error: unrecognized arguments: --enable-metrics`` names the words; the options
table (knowledge/data/options.json, every option of every covered release) says whether any
release accepts each one. An option some release accepts is the judged release's business
(ARGS100 from the serve line, ARGS004 and SPEC010 for the removed ones); an option no release
has is a typo or an invented flag whatever vLLM runs, so the log alone names it.
"""

from __future__ import annotations

import re

from vllm_doctor.logreaders import LogReading

# argparse's message (``parser.error``), as vLLM's FlexibleArgumentParser prints it
UNRECOGNIZED = re.compile(r"error: unrecognized arguments: ([^\n]{1,2000})")


def unknown_options(words: list[str]) -> list[str]:
    """The option words (``--name`` or ``--name=value``, by name) no covered release accepts."""
    from vllm_doctor import knowledge
    from vllm_doctor.serveline.options import resolve_flag

    table = knowledge.load("options")
    unknown = []
    for word in dict.fromkeys(w.split("=", 1)[0] for w in words if w.startswith("--")):
        spec = resolve_flag(word)
        if spec is None or spec.name not in table:
            unknown.append(word)
    return unknown


def read(text: str, version: str | None) -> LogReading | None:
    words = [
        w for match in UNRECOGNIZED.finditer(text[:20_000_000]) for w in match.group(1).split()
    ]
    unknown = unknown_options(words[:100])
    if not unknown:
        return None  # every refused option is one some release accepts
    from vllm_doctor import knowledge
    from vllm_doctor.facts.release import refused_option_hints

    releases = knowledge.load("options").releases
    covered = f"{releases[0]}–{releases[-1]}"
    hints = [h for h in refused_option_hints(words[:100], version) if h.split(":", 1)[0] in unknown]
    return LogReading(
        f"{', '.join(unknown)}: no vLLM release {covered} has "
        + ("this option" if len(unknown) == 1 else "these options")
        + " (a misspelling, a flag of another tool, or a plugin's flag with the plugin not "
        "handling the command); vLLM's parser refuses the whole command",
        [
            f"remove {word} from the serve command (or its operator's generated arguments)"
            for word in unknown
        ]
        + [
            "where it is a misspelling, use the nearest valid spelling (below)",
            "where a plugin adds it (vllm-omni's --omni), install the plugin after vLLM, at a "
            "vLLM version the plugin supports, so that its entry point handles `vllm serve`",
        ],
        hints,
    )
