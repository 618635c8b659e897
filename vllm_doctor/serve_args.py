"""The serve line's one face: the names this module always offered (the collectors read the
serve line through it), the code in ``vllm_doctor.serveline`` (see its package docstring for
the parts)."""

from vllm_doctor.serveline import SERVE_LINE  # noqa: F401
from vllm_doctor.serveline.command import parse_serve_string  # noqa: F401
from vllm_doctor.serveline.config import load_serve_config  # noqa: F401
from vllm_doctor.serveline.line import _FACT_OPTIONS, ServeLine  # noqa: F401
from vllm_doctor.serveline.options import JSON_KINDS, OPTIONS, OptionSpec, option_spec, resolve_flag  # noqa: F401
from vllm_doctor.serveline.parser import (  # noqa: F401
    MAX_WORDS,
    _convert,
    convert_value,
    human_readable_int,
    parse_serve_argv,
)
from vllm_doctor.serveline.render import render_command  # noqa: F401
from vllm_doctor.serveline.words import MAX_LINE_CHARS, command_words  # noqa: F401
