"""The serve line's one face: the names this module always offered (the collectors read the
serve line through it), the code in ``vllm_doctor.serveline`` (see its package docstring for
the parts)."""

from vllm_doctor.serveline import SERVE_LINE
from vllm_doctor.serveline.command import parse_serve_string
from vllm_doctor.serveline.config import load_serve_config
from vllm_doctor.serveline.line import _FACT_OPTIONS, ServeLine
from vllm_doctor.serveline.options import JSON_KINDS, OPTIONS, OptionSpec, option_spec, resolve_flag
from vllm_doctor.serveline.parser import MAX_WORDS, parse_serve_argv
from vllm_doctor.serveline.render import render_command
from vllm_doctor.serveline.values import _convert, convert_value, human_readable_int
from vllm_doctor.serveline.words import MAX_LINE_CHARS, command_words

__all__ = [
    "JSON_KINDS",
    "MAX_LINE_CHARS",
    "MAX_WORDS",
    "OPTIONS",
    "SERVE_LINE",
    "_FACT_OPTIONS",
    "OptionSpec",
    "ServeLine",
    "_convert",
    "command_words",
    "convert_value",
    "human_readable_int",
    "load_serve_config",
    "option_spec",
    "parse_serve_argv",
    "parse_serve_string",
    "render_command",
    "resolve_flag",
]
