"""Parse a `vllm serve` line the way vLLM's own parser does, without importing vLLM.

The steps mirror ``FlexibleArgumentParser.parse_args`` (``vllm/utils/argparse_utils.py``)
and argparse:

1. ``vllm serve``, ``serve``, ``python -m vllm.entrypoints.openai.api_server`` prefixes are
   dropped; ``KEY=VALUE`` words in front of the command are kept as environment settings.
2. ``--model X`` is moved to the front (vLLM logs a deprecation warning for it).
3. ``--config FILE.yaml`` is expanded in place: after the positional model, before the other
   command-line arguments, so the precedence is command line > config file > defaults.
   YAML ``true`` becomes ``--key``, ``false`` becomes ``--no-key`` only when that option
   exists (otherwise it is dropped), a list becomes ``--key a b``, a mapping becomes JSON.
4. In ``--`` arguments, underscores become dashes in the key part (up to the first ``.``);
   ``--key=value`` is split; ``-O3``, ``-O=3``, ``-Odecode`` and ``-O 3`` become
   ``--optimization-level``.
5. Dotted keys (``--speculative-config.method mtp``, nested ``a.b``, ``key+`` appends with a
   comma split) are json-loaded (else read as a human-readable int, else kept as a string),
   merged per option and appended at the end, so they win over an explicit JSON value.
6. Options are consumed argparse-style against a table of every option of the vLLM
   releases 0.8.0 … 0.33.0 (``OPTIONS`` below, read from ``knowledge/data/options.json``,
   which ``tools/gen_knowledge.py`` extracts from the release wheels): bare booleans and ``--no-`` forms, short
   aliases, unique-prefix abbreviations (argparse's ``allow_abbrev``), list options taking
   every following value, human-readable ints (``32k``, ``1K``, ``2M``, ``25.6k``) for
   ``--max-model-len`` and the token-count options, JSON options.

Options removed from current vLLM (in the table with a last version, or from the pre-0.10
spec-decode era) are reported as legacy flags; options in no table are unknown flags and
kept verbatim (with their value when one follows).
"""

from __future__ import annotations

import bisect
import builtins
import functools
import json
import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from vllm_doctor.errors import InputError
from vllm_doctor.redact import (REDACTED, is_secret_name, redact_value, redact_words,
                                shell_words)
from vllm_doctor.facts.model import Facts, Source

SERVE_LINE = "serve line"

# --------------------------------------------------------------------------------------
# Option table
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OptionSpec:
    """One `vllm serve` option.

    kind: bool (``--x``/``--no-x``), flag (store_true: no ``--no-`` form), bool_or_str (bare
    flag is true, or one value), int, hrint (human-readable int), float, str, list (one or
    more values), json (JSON object), json_or_str (JSON when it looks like an object, else a
    string), append (repeatable single value).
    """

    name: str
    kind: str
    aliases: tuple[str, ...] = ()
    since: str | None = None  # first release whose parser has it (None: before 0.8.0)
    until: str | None = None  # last release that has it (None: still in the newest)
    # the words that set a bool option to false in some release (``no-x``; ``disable-x``
    # beside ``enable-x`` where 0.33's EnableDisableAction pairs them)
    negations: tuple[str, ...] = ()
    # the kinds older releases give it, when they differ: value forms some release reads
    older_kinds: tuple[str, ...] = ()
    kvs: bool = False  # some release's JSON converter also reads key=value,... pairs

    @property
    def legacy(self) -> bool:
        return self.until is not None

    @property
    def takes_value(self) -> bool:
        return self.kind not in ("bool", "flag")


def _release_options() -> dict[str, OptionSpec]:
    """The union of every release's options, from the generated table (data/options.json,
    written by ``tools/gen_knowledge.py`` from the release wheels): long name -> its spec with
    the kind of the newest release that has it, the aliases and negation words of any
    release, the other kinds older releases give it, the first release, and the last release
    (None when the newest covered release still has it)."""
    from vllm_doctor.knowledge import load

    table = load("options")
    newest = table.newest
    out: dict[str, OptionSpec] = {}
    for name in table.keys():
        spans = table.raw_spans(name)  # plain dicts: no objects built at import
        aliases: list[str] = []
        negations: list[str] = []
        kinds: list[str] = []
        for span in reversed(spans):
            value = span["value"]
            aliases += [a for a in value.get("aliases", ()) if a not in aliases]
            negations += [w for w in value.get("negations", ()) if w not in negations]
            kinds += [value["kind"]] if value["kind"] not in kinds else []
        last = spans[-1]["last"]
        out[name] = OptionSpec(name, kinds[0], tuple(aliases), spans[0]["first"],
                               None if last == newest else last, tuple(negations),
                               tuple(kinds[1:]), any(s["value"].get("kvs") for s in spans))
    return out

# Options removed before 0.8.0 (speculative decoding of the V0 engine and friends), read
# from a late-2024 `vllm/engine/arg_utils.py`; those still in 0.8.0 and later come from the
# generated table with their real last release. A current vLLM rejects them with
# "unrecognized arguments".
_PRE_010_OPTIONS: dict[str, tuple[str, tuple[str, ...]]] = {
    "speculative-model": ("str", ()),
    "speculative-model-quantization": ("str", ()),
    "num-speculative-tokens": ("int", ()),
    "speculative-disable-mqa-scorer": ("flag", ()),
    "speculative-draft-tensor-parallel-size": ("int", ("-spec-draft-tp",)),
    "speculative-max-model-len": ("int", ()),
    "speculative-disable-by-batch-size": ("int", ()),
    "ngram-prompt-lookup-max": ("int", ()),
    "ngram-prompt-lookup-min": ("int", ()),
    "spec-decoding-acceptance-method": ("str", ()),
    "typical-acceptance-sampler-posterior-threshold": ("float", ()),
    "typical-acceptance-sampler-posterior-alpha": ("float", ()),
    "disable-logprobs-during-spec-decoding": ("bool_or_str", ()),
    "max-prompt-adapters": ("int", ()),
    "max-prompt-adapter-token": ("int", ()),
    "long-lora-scaling-factors": ("str", ()),
    "qlora-adapter-name-or-path": ("str", ()),
    "use-v2-block-manager": ("flag", ()),
    "tokenizer-pool-size": ("int", ()),
    "tokenizer-pool-type": ("str", ()),
    "tokenizer-pool-extra-config": ("json", ()),
    "device": ("str", ()),
}

# Options whose value vLLM reads with human_readable_int_or_auto ("auto" and -1 mean -1).
_HRINT_OR_AUTO = {"max-model-len"}


def _build_tables() -> tuple[dict[str, OptionSpec], dict[str, str]]:
    specs = _release_options()
    for name, (kind, aliases) in _PRE_010_OPTIONS.items():
        if name not in specs:
            specs[name] = OptionSpec(name, kind, aliases, None, "pre-0.8.0")
    alias_map: dict[str, str] = {}
    for spec in specs.values():
        for alias in spec.aliases:
            alias_map.setdefault(alias, spec.name)
    return specs, alias_map


OPTIONS, _ALIASES = _build_tables()
# Long aliases (``--device-memory-utilization``) by their bare name.
_LONG_ALIASES = {a[2:]: n for a, n in _ALIASES.items() if a.startswith("--")}
_SHORT_ALIASES = {a: n for a, n in _ALIASES.items() if not a.startswith("--")}


def _negation_words() -> dict[str, str]:
    """Negation words (``no-enable-prefix-caching``, ``disable-log-requests`` on 0.33) -> the
    option they set to false; a current option's meaning first, as vLLM now reads the word."""
    out: dict[str, str] = {}
    for spec in sorted(OPTIONS.values(), key=lambda sp: sp.legacy):
        for word in spec.negations:
            out.setdefault(word, spec.name)
    return out


_NEGATIONS = _negation_words()

JSON_KINDS = ("json", "json_or_str")
# The speculative-decoding shorthand flags and the speculative_config key each one sets.
_SPEC_FLAGS = (("spec-method", "method"), ("spec-model", "model"),
               ("spec-tokens", "num_speculative_tokens"))


def option_spec(name: str) -> OptionSpec | None:
    """The spec of an option by long name (with or without ``--``), long alias or short alias."""
    key = name
    if key.startswith("--"):
        key = key[2:]
        head, dot, rest = key.partition(".")
        key = head.replace("_", "-")
    elif key.startswith("-"):
        target = _SHORT_ALIASES.get(key)
        return OPTIONS.get(target) if target else None
    else:
        key = key.replace("_", "-")
    if key in OPTIONS:
        return OPTIONS[key]
    if key in _LONG_ALIASES:
        return OPTIONS[_LONG_ALIASES[key]]
    return None


# --------------------------------------------------------------------------------------
# Value conversion (mirrors vllm.utils.argparse_utils)
# --------------------------------------------------------------------------------------

_HR_RE = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")
_DEC = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BIN = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def human_readable_int(value: str) -> int:
    """``1k`` = 1000, ``1K`` = 1024, ``25.6k`` = 25600, ``2M`` = 2·2**20; raises ValueError.

    Decimals with a binary suffix (``1.5K``) are rejected, as vLLM does.
    """
    value = value.strip()
    match = _HR_RE.fullmatch(value)
    if match:
        number, suffix = match.groups()
        if suffix in _DEC:
            return int(float(number) * _DEC[suffix])
        try:
            return int(number) * _BIN[suffix]
        except ValueError:
            raise ValueError(
                f"decimals are not allowed with binary suffixes like {suffix}; "
                f"did you mean {number}{suffix.lower()}?"
            ) from None
    return int(value)


def _human_readable_int_or_auto(value: str) -> int:
    stripped = value.strip()
    if stripped == "-1" or stripped.lower() == "auto":
        return -1
    return human_readable_int(stripped)


def _expand_json_human_readable_numbers(val: str) -> str:
    """``{"cpu_bytes_to_use": 80m}`` -> ``{"cpu_bytes_to_use": 80000000}`` (bare tokens only)."""
    parts = re.split(r'("(?:[^"\\]|\\.)*")', val)
    for i in range(0, len(parts), 2):
        parts[i] = re.sub(
            r"\b\d+(?:\.\d+)?[kKmMgGtT]\b",
            lambda m: str(human_readable_int(m.group())),
            parts[i],
        )
    return "".join(parts)


def _dotted_value(value_str: str) -> Any:
    """A dotted key's value: JSON, else a human-readable int, else the string."""
    try:
        return json.loads(value_str)
    except RecursionError:
        raise InputError(value_str[:20] + "…", "nested too deeply") from None
    except ValueError:
        pass
    try:
        return human_readable_int(value_str)
    except (ValueError, OverflowError):
        return value_str


# JSON options with human-readable numbers (`{"kv_bytes": 80m}`) are short; longer values that
# are not JSON are refused without the second pass
_HR_JSON_MAX = 64 * 1024


def _parse_json(flag: str, value: str, spec: OptionSpec, kind: str) -> Any:
    text = value
    if kind == "json_or_str" and not re.match(r"(?s)^\s*{.*}\s*$", text):
        return text
    if spec.name == "compilation-config" and text.strip().isdigit():
        # Older vLLM (CompilationConfig.from_cli): a bare number is the level.
        return {"level": int(text.strip())}
    from vllm_doctor.bounds import ValueBoundsError, json_loads

    try:
        return json_loads(text)
    except ValueBoundsError as err:
        raise InputError(flag, f"the JSON value {err}") from None
    except ValueError as err:
        if len(text) <= _HR_JSON_MAX:  # the fallback re-scans the text: only for short values
            try:
                return json_loads(_expand_json_human_readable_numbers(text))
            except (ValueError, OverflowError):
                pass
        raise InputError(flag, f"invalid JSON: {err}") from None


_INT_MAX = 2**63 - 1
# sizes that count GPUs or processes: past this no machine exists, and the doctor's
# arithmetic (world size, per-GPU shares) and probes must never see such a number
_COUNT_MAX = 1 << 16


def _shown(value: str, limit: int = 40) -> str:
    """A value quoted in a message, cut short: an error stays one readable line."""
    return repr(value) if len(value) <= limit else repr(value[:limit]) + f"… ({len(value):,} characters)"


def _in_range(flag: str, spec: OptionSpec, number: int, text: str) -> int:
    low, high = -_INT_MAX - 1, _INT_MAX
    if spec.name.endswith("-parallel-size"):
        low, high = 1, _COUNT_MAX  # vLLM fails at start-up on a size below 1
    elif spec.name.endswith("-size-local"):
        low, high = 0, _COUNT_MAX  # 0 local ranks: a headless node
    if not low <= number <= high:
        shown = text.strip() if len(text.strip()) <= 24 else text.strip()[:20] + "…"
        bound = f"{low}..{high}" if low >= 0 else f"at most {high}"
        raise InputError(flag, f"{shown} is out of range ({bound})")
    return number


def _key_values(flag: str, value: str) -> dict[str, int]:
    """``image=16,video=2`` as vLLM's nullable_kvs reads it (0.8.x, and the JSON options'
    fallback up to 0.9.2): lower-cased keys, integer values."""
    out: dict[str, int] = {}
    for item in value.split(","):
        parts = [part.lower().strip() for part in item.split("=")]
        if len(parts) != 2:
            raise InputError(flag, f"each item should be KEY=VALUE, got {_shown(item)}")
        try:
            number = int(parts[1])
        except ValueError:
            raise InputError(flag, f"the value of {_shown(item)} is not an integer") from None
        if out.get(parts[0], number) != number:
            raise InputError(flag, f"conflicting values for key {parts[0]!r}")
        out[parts[0]] = number
    return out


def _convert(flag: str, spec: OptionSpec, value: str) -> Any:
    """The value as the newest release that has the option reads it; a form only an older
    release reads (``--limit-mm-per-prompt image=5``) is read that release's way, so a value
    some release accepts is never bad input (which releases accept it is judged per release
    in facts/release.py)."""
    try:
        return convert_value(flag, spec, spec.kind, value)
    except InputError:
        # not an older plain-string reading: those releases parse the string later
        # (0.8.2's --speculative-config is json.loads'ed when the engine starts)
        readings = [k for k in spec.older_kinds if k != "str"] + (["kvs"] if spec.kvs else [])
        for kind in readings:
            try:
                return convert_value(flag, spec, kind, value)
            except InputError:
                continue
        raise


def convert_value(flag: str, spec: OptionSpec, kind: str, value: str,
                  key_values: bool = False) -> Any:
    """The value read as an option of ``kind`` (and, with ``key_values``, a JSON option whose
    converter also reads ``key=value`` pairs); InputError when that reading refuses it."""
    if kind == "json" and key_values and value.strip() and not re.match(r"^{.*}$", value):
        return _key_values(flag, value)
    if kind == "kvs":
        return _key_values(flag, value) if value else None
    try:
        if kind == "int":
            return _in_range(flag, spec, int(value.strip()), value)
        if kind == "hrint":
            if spec.name in _HRINT_OR_AUTO:
                return _in_range(flag, spec, _human_readable_int_or_auto(value), value)
            return _in_range(flag, spec, human_readable_int(value), value)
        if kind == "float":
            number = float(value)
            if number != number or number in (float("inf"), float("-inf")):
                raise ValueError(value)
            return number
    except ValueError as err:
        detail = str(err)
        if "binary suffixes" in detail:
            raise InputError(flag, f"invalid value {_shown(value)}: {detail}") from None
        expected = {"int": "an integer", "hrint": "an integer (like 4096, 32k, 1K)",
                    "float": "a number"}[kind]
        raise InputError(flag, f"expected {expected}, got {_shown(value)}") from None
    except OverflowError:
        raise InputError(flag, f"value out of range: {_shown(value)}") from None
    if kind in JSON_KINDS:
        return _parse_json(flag, value, spec, kind)
    return value


# --------------------------------------------------------------------------------------
# The parsed line
# --------------------------------------------------------------------------------------


@dataclass
class ServeLine:
    tokens: list[str]  # the arguments after `vllm serve` as given (model included)
    model: str | None
    # normalised long name ("tensor-parallel-size") -> effective value (typed)
    options: dict[str, Any] = field(default_factory=dict)
    # long name -> the token(s) as the user wrote them (evidence)
    given: dict[str, str] = field(default_factory=dict)
    # long name -> the value word as given, for options that take one (each release's own
    # reading of it is judged in facts/release.py)
    raw_values: dict[str, str] = field(default_factory=dict)
    unknown_flags: list[str] = field(default_factory=list)
    legacy_flags: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    # -- beyond the core API -----------------------------------------------------------
    # long name -> "cli" or "config" (where the effective value came from)
    origins: dict[str, str] = field(default_factory=dict)
    # KEY=VALUE words in front of the command (``CUDA_VISIBLE_DEVICES=0,1 vllm serve ...``)
    env: dict[str, str] = field(default_factory=dict)
    config_path: str | None = None
    # things vLLM itself warns about or would reject, in words
    warnings: list[str] = field(default_factory=list)
    # where each option appears in ``tokens`` (index ranges), for render_command
    spans: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    model_span: tuple[int, int] | None = None
    env_tokens: list[str] = field(default_factory=list)
    entrypoint: str = "serve"  # "serve" or "api_server"
    # the spans as sets, for _add_span
    span_index: dict[str, set[tuple[int, int]]] = field(default_factory=dict, repr=False,
                                                         compare=False)

    # -- derived values ----------------------------------------------------------------
    def value(self, name: str, default: Any = None) -> Any:
        spec = option_spec(name)
        key = spec.name if spec else name.lstrip("-")
        return self.options.get(key, default)

    def speculative_config(self) -> dict[str, Any] | None:
        """--speculative-config merged with --spec-method/--spec-model/--spec-tokens."""
        raw = self.options.get("speculative-config")
        config: dict[str, Any] | None = None
        if isinstance(raw, dict):
            config = {str(k).replace("-", "_"): v for k, v in raw.items()}
        for flag, key in _SPEC_FLAGS:
            if flag in self.options and self.options[flag] is not None:
                config = dict(config or {})
                config.setdefault(key, self.options[flag])
        return config

    def to_facts(self, facts: Facts, source: str = Source.SERVE,
                 env: Mapping[str, str] | None = None) -> None:
        _to_facts(self, facts, source, env)


# --------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------


@dataclass
class _Tok:
    text: str  # the token after vLLM's normalisation
    idx: int | None  # index in ServeLine.tokens, None for tokens from the config file
    raw: str  # evidence: what the user wrote
    # for the option word standing for merged dotted keys: the user's words they came from
    dotted_idx: list[int] | None = None


_ENV_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_PY_RE = re.compile(r"^python(\d+(\.\d+)*)?$")
_API_SERVER_MODULES = {"vllm.entrypoints.openai.api_server", "vllm.entrypoints.api_server"}
_NEG_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")


def _looks_like_flag(token: str) -> bool:
    return token.startswith("-") and token != "-" and not _NEG_NUMBER.match(token)


# commands that run the next word as a command, with their options that take a value
_WRAPPERS: dict[str, frozenset[str]] = {
    "sudo": frozenset({"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-T", "--user",
                       "--group", "--chdir", "--prompt", "--host", "--role", "--type",
                       "--other-user", "--command-timeout", "--close-from"}),
    "env": frozenset({"-u", "-C", "-S", "--unset", "--chdir", "--split-string"}),
    "nohup": frozenset(), "time": frozenset(), "exec": frozenset({"-a"}),
    "command": frozenset(), "nice": frozenset({"-n", "--adjustment"}),
    "stdbuf": frozenset({"-i", "-o", "-e"}), "export": frozenset(),
}


def _split_commands(text: str) -> list[str]:
    """Shell text cut at the control operators outside quotes (``&&``, ``||``, ``;``, ``|``,
    ``&``; not the ``&`` of a redirection like ``2>&1``)."""
    parts: list[str] = []
    begin, skip_to = 0, -1
    for i, ch in _bare_chars(text):
        if i <= skip_to or ch not in ";&|" or (ch == "&" and i and text[i - 1] in "<>"):
            continue
        parts.append(text[begin:i])
        skip_to = i + 1 if ch != ";" and text[i + 1:i + 2] in ("&", "|") else i  # && and ||
        begin = skip_to + 1
    parts.append(text[begin:])
    return parts


# [n]op or {name}op, or &> / &>>; here-strings and here-documents first (their '<' prefixes)
_REDIRECTION = re.compile(r"&>>?|(?:\{[A-Za-z_][A-Za-z0-9_]*\}|\d*)(?:<<<|<<-?|>>|>&|>\||<&|<>|>|<)")
# `vllm serve <model> ...` copied from documentation: a placeholder, not a redirection
_PLACEHOLDER_WORD = re.compile(r"<[A-Za-z][\w.:/@-]*>(?=\s|$)")


def _bare_chars(text: str, start: int = 0):
    """(index, character) of each character from ``start`` that is neither quoted nor
    escaped (the quote characters themselves are not given)."""
    quote: str | None = None
    i, n = start, len(text)
    while i < n:
        ch = text[i]
        if ch == "\\" and quote != "'":
            i += 2
            continue
        if quote is not None:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        else:
            yield i, ch
        i += 1


def _group_end(text: str, start: int) -> int:
    """The index after the ``)`` that closes the ``(`` at ``text[start]`` (quotes and escapes
    inside are skipped), or the end of the text."""
    depth = 0
    for i, ch in _bare_chars(text, start):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i + 1
    return len(text)


def _target_end(text: str, i: int) -> int:
    """The index after the word a redirection operator applies to (its quotes, escapes and a
    process substitution ``>(tee log)`` included)."""
    while i < len(text) and text[i] in " \t":
        i += 1
    if text.startswith(("<(", ">("), i):
        return _group_end(text, i + 1)
    for j, ch in _bare_chars(text, i):
        if ch.isspace() or ch in ";&|<>":
            return j
    return len(text)


def _drop_redirections(text: str) -> str:
    """Shell text without its redirections outside quotes (``> log.txt``, ``2>&1``,
    ``>>out.log``, ``&> all.log``, ``< input``, ``> >(tee log)``, ``<<<``, ``{fd}>file``): they
    belong to the shell, not to vLLM. A command substitution stays one word as written (its value
    is not known), a process substitution becomes the path the shell passes (``/dev/fd/63``);
    ``<model>`` as a word is a placeholder copied from documentation, kept as written."""
    out: list[str] = []
    quote: str | None = None
    i, n = 0, len(text)

    def at_word_start() -> bool:
        return not out or out[-1][-1:].isspace()

    while i < n:
        ch = text[i]
        if ch == "\\" and quote != "'" and i + 1 < n:
            out.append(text[i:i + 2])
            i += 2
            continue
        if quote is not None:
            quote = None if ch == quote else quote
            out.append(ch)
            i += 1
            continue
        if ch in "'\"":
            quote = ch
        elif ch == "`":  # command substitution: its value is not known; one word as written
            end = text.find("`", i + 1)
            end = n if end < 0 else end + 1
            out.append(shlex.quote(text[i:end]))
            i = end
            continue
        elif text.startswith("$(", i):
            end = _group_end(text, i + 1)
            out.append(shlex.quote(text[i:end]))
            i = end
            continue
        elif text.startswith(("<(", ">("), i):  # process substitution: the shell passes a path
            i = _group_end(text, i + 1)
            out.append("/dev/fd/63")
            continue
        elif ch == "<" and at_word_start() and _PLACEHOLDER_WORD.match(text, i):
            end = _PLACEHOLDER_WORD.match(text, i).end()
            out.append(text[i:end])
            i = end
            continue
        elif ch in "<>" or text.startswith("&>", i) or (ch.isdigit() or ch == "{") and at_word_start():
            match = _REDIRECTION.match(text, i)
            if match:
                i = _target_end(text, match.end())
                out.append(" ")
                continue
        out.append(ch)
        i += 1
    return "".join(out)


def _command_words(command: str) -> list[str] | None:
    """The words of the `vllm serve` command in a pasted line of several commands:
    ``export A=1 && B=2 vllm serve ...`` gives ``A=1 B=2 vllm serve ...`` (variables exported
    before it are its environment); None when the line is one command or none is found."""
    parts = _split_commands(command)
    if len(parts) <= 1:
        return None
    try:
        commands = [shlex.split(p, comments=True, posix=True) for p in parts]
    except ValueError:
        return None
    commands = [c for c in commands if c]
    chosen = next((i for i, c in enumerate(commands) if any(
        os.path.basename(w) == "vllm" or w in _API_SERVER_MODULES or w == "serve" for w in c)), None)
    if chosen is None:
        return None
    exported = [w for c in commands[:chosen] if c[0] == "export"
                for w in c[1:] if _ENV_RE.match(w)]
    return exported + commands[chosen]


def _strip_prefix(tokens: list[str]) -> tuple[list[str], list[str], str]:
    """(env words, serve arguments, entrypoint) from a full command."""
    i = 0
    env_words: list[str] = []
    wrapped = any(os.path.basename(t) in ("vllm", "serve") or _PY_RE.match(os.path.basename(t))
                  for t in tokens[1:])
    while i < len(tokens):
        word = tokens[i]
        if _ENV_RE.match(word) and not word.startswith("-"):
            env_words.append(word)
            i += 1
            continue
        wrapper = os.path.basename(word)
        if not (wrapped and wrapper in _WRAPPERS):
            break
        # `sudo -E -u vllm env -i HF_TOKEN=x nohup vllm serve ...`: skip the wrapper and its
        # options (and the values of those that take one)
        i += 1
        while i < len(tokens) and tokens[i].startswith("-"):
            option = tokens[i]
            i += 1
            if option == "--":
                break
            if option in _WRAPPERS[wrapper] and "=" not in option:
                i += 1
    rest = tokens[i:]
    if not rest:
        return env_words, [], "serve"
    first = os.path.basename(rest[0])
    if first == "vllm":
        if len(rest) < 2 or rest[1] != "serve":
            sub = rest[1] if len(rest) > 1 else ""
            raise InputError(SERVE_LINE, f"not a `vllm serve` line: `vllm {sub}`".rstrip())
        return env_words, rest[2:], "serve"
    if _PY_RE.match(first) and len(rest) >= 3 and rest[1] == "-m":
        module = rest[2]
        if module in _API_SERVER_MODULES:
            return env_words, rest[3:], "api_server"
        if module in ("vllm.entrypoints.cli.main", "vllm") and len(rest) >= 4 and rest[3] == "serve":
            return env_words, rest[4:], "serve"
        raise InputError(SERVE_LINE, f"not a vLLM server command: python -m {module}")
    if rest[0] == "serve":
        return env_words, rest[1:], "serve"
    return env_words, rest, "serve"


_MAX_CONFIG_KEYS = 10_000


def _yaml_to_args(path: Path, data: Any) -> list[tuple[str, str]]:
    """A config file's content as (token, evidence) pairs, as vLLM's load_config_file does."""
    if data is None:
        return []
    if not isinstance(data, dict):
        raise InputError(str(path), "a serve config file must be a YAML mapping of option: value")
    if len(data) > _MAX_CONFIG_KEYS:
        raise InputError(str(path), f"{len(data):,} options; vLLM has a few hundred, and a serve "
                                    f"config of more than {_MAX_CONFIG_KEYS:,} is refused")
    out: list[tuple[str, str]] = []
    for key, value in data.items():
        key = str(key)
        evidence = f"{path.name}: {key}: {_yaml_scalar(value)}"
        if isinstance(value, bool):
            if value:
                out.append(("--" + key, evidence))
            else:
                # vLLM adds --no-KEY only when that exact option string exists.
                spec = OPTIONS.get(key)
                if spec is not None and spec.kind == "bool":
                    out.append(("--no-" + key, evidence))
        elif isinstance(value, list):
            if value:
                out.append(("--" + key, evidence))
                out.extend((str(item), evidence) for item in value)
        elif isinstance(value, dict):
            out.append(("--" + key, evidence))
            out.append((json.dumps(value), evidence))
        else:
            out.append(("--" + key, evidence))
            out.append((str(value), evidence))
    return out


def _yaml_scalar(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return json.dumps(value, default=str)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _read_config(path_text: str, cwd: Path | None) -> tuple[Path, Any]:
    from vllm_doctor.bounds import expand_path, read_text

    path = expand_path(path_text, "--config")
    if not path.is_absolute():
        path = (cwd or Path.cwd()) / path
    ext = path_text.rsplit(".", 1)[-1] if "." in path_text else ""
    if ext not in ("yaml", "yml"):
        raise InputError("--config", f"config file must be .yaml or .yml: {path_text}")
    text = read_text(path, "file", "yaml", source="--config")
    from vllm_doctor import yaml_io  # only a --config file needs YAML

    try:
        data = yaml_io.safe_load(text)
    except yaml_io.YAMLError as err:
        problem = str(err).replace("\n", " ")
        raise InputError(str(path), f"not valid YAML: {problem}") from None
    return path, data


def _normalise(toks: list[_Tok]) -> list[_Tok]:
    """Step 4: underscores to dashes in keys, -O forms (FlexibleArgumentParser.parse_args)."""
    out: list[_Tok] = []
    for i, tok in enumerate(toks):
        arg = tok.text
        if arg.startswith("--"):
            if "=" in arg:
                key, value = arg.split("=", 1)
                out.append(_Tok(_dash_key(key) + "=" + value, tok.idx, tok.raw))
            else:
                out.append(_Tok(_dash_key(arg), tok.idx, tok.raw))
        elif arg.startswith("-O") and arg != "-O":
            level = arg[3:] if arg[2] == "=" else arg[2:]
            out.append(_Tok("--optimization-level", tok.idx, tok.raw))
            out.append(_Tok(level, tok.idx, tok.raw))
        elif arg == "-O" and i + 1 < len(toks) and toks[i + 1].text in {"0", "1", "2", "3"}:
            out.append(_Tok("--optimization-level", tok.idx, tok.raw))
        else:
            out.append(tok)
    return out


def _dash_key(key: str) -> str:
    """Underscores to dashes between the leading -- and the first dot."""
    body = key[2:]
    head, dot, rest = body.partition(".")
    return "--" + head.replace("_", "-") + dot + rest


def _nested(keys: list[str], value: Any) -> Any:
    for key in reversed(keys):
        value = {key: value}
    return value


def _merge(original: dict, update: dict, prefix: str = "") -> set[str]:
    duplicates: set[str] = set()
    for k, v in update.items():
        if isinstance(v, dict) and isinstance(original.get(k), dict):
            duplicates |= _merge(original[k], v, f"{prefix}{k}.")
        elif isinstance(v, list) and isinstance(original.get(k), list):
            original[k] = original[k] + v
        else:
            if k in original:
                duplicates.add(prefix + k)
            original[k] = v
    return duplicates


def _extract_dotted(toks: list[_Tok]) -> tuple[list[_Tok], set[str], list[str]]:
    """Step 5: dotted keys merged into one JSON value per option, appended at the end."""
    delete: set[int] = set()
    merged: dict[str, dict] = {}
    evidence: dict[str, list[_Tok]] = {}
    duplicates: set[str] = set()
    empty_keys: list[str] = []
    for i, tok in enumerate(toks):
        if i in delete:
            continue
        arg = tok.text
        if arg.startswith("--") and "." not in arg:
            continue
        if not (arg.startswith("-") and "." in arg):
            continue
        if _NEG_NUMBER.match(arg):
            continue  # rejected before this pass
        if "=" in arg:
            key_part, value_str = arg.split("=", 1)
            if "." not in key_part:
                continue  # the dot was only in the value
            pieces = [tok]
        else:
            key_part = arg
            if i + 1 >= len(toks):
                raise InputError(tok.raw, "expected a value")
            value_str = toks[i + 1].text
            pieces = [tok, toks[i + 1]]
            delete.add(i + 1)
        if key_part.endswith("+"):
            key_part = key_part[:-1]
            value_str = json.dumps(value_str.split(","))
        key, *keys = key_part.split(".")
        if not all(keys):
            empty_keys.append(tok.raw)
        value = _dotted_value(value_str)
        spec = option_spec(key)
        label = spec.name if spec else key.lstrip("-")
        duplicates |= {f"{label}.{d}" for d in _merge(merged.setdefault(key, {}),
                                                     _nested(keys, value))}
        evidence.setdefault(key, []).extend(pieces)
        delete.add(i)
    kept = [t for i, t in enumerate(toks) if i not in delete]
    for key, value in merged.items():
        pieces = evidence[key]
        raw = _evidence_text(pieces)
        idx = pieces[0].idx
        kept.append(_Tok(key, idx, raw))
        kept.append(_Tok(json.dumps(value), idx, raw))
        # the dotted tokens' positions, for render_command
        kept[-2].dotted_idx = [p.idx for p in pieces if p.idx is not None]
    return kept, duplicates, empty_keys


def _evidence_text(pieces: list[_Tok]) -> str:
    """The user's words behind some tokens (a -O3 split in two, or a config line, once)."""
    seen: list[str] = []
    last: tuple[object, str] | None = None
    for p in pieces:
        if last is not None and last == (p.idx, p.raw):
            continue
        seen.append(p.raw)
        last = (p.idx, p.raw)
    return " ".join(seen)


@dataclass(frozen=True)
class _AbbrevPool:
    words: dict[str, str]      # option string or long alias -> option name
    sorted_words: list[str]
    negatives: dict[str, str]  # "no-X" -> X, for bool options
    sorted_negatives: list[str]


@functools.lru_cache(maxsize=1)
def _abbreviation_pools() -> tuple[_AbbrevPool, _AbbrevPool]:
    """Current options, then removed ones, sorted for prefix search (argparse allow_abbrev)."""
    pools = []
    for legacy in (False, True):
        names = {n for n, sp in OPTIONS.items() if sp.legacy == legacy}
        words = {n: n for n in names}
        words.update({a: t for a, t in _LONG_ALIASES.items() if t in names})
        negatives = {w: n for w, n in _NEGATIONS.items() if n in names and w not in words}
        pools.append(_AbbrevPool(words, sorted(words), negatives, sorted(negatives)))
    return pools[0], pools[1]


def _with_prefix(sorted_words: list[str], prefix: str) -> list[str]:
    start = bisect.bisect_left(sorted_words, prefix)
    end = start
    while end < len(sorted_words) and sorted_words[end].startswith(prefix):
        end += 1
    return sorted_words[start:end]


def _resolve_long(name: str) -> tuple[OptionSpec | None, bool | None, str | None]:
    """(spec, negated, note) for a long option name without dashes; spec None if unknown."""
    if name in OPTIONS and not OPTIONS[name].legacy:
        return OPTIONS[name], False, None
    if name in _LONG_ALIASES:
        return OPTIONS[_LONG_ALIASES[name]], False, None
    # a negation word some release's parser registers (which releases accept the word as
    # written is judged per release in facts/release.py)
    target = _NEGATIONS.get(name)
    if target is not None and not OPTIONS[target].legacy:
        note = None if name in OPTIONS or name.startswith("no-") else \
            f"--{name} is the inverse of --{target}"
        return OPTIONS[target], True, note
    if name in OPTIONS:  # a removed option with no current meaning
        return OPTIONS[name], False, None
    if target is not None:
        return OPTIONS[target], True, None
    # argparse allow_abbrev: a unique prefix of one option string (current options first,
    # then removed ones)
    for pool in _abbreviation_pools():
        candidates = {pool.words[w] for w in _with_prefix(pool.sorted_words, name)}
        negatives = {pool.negatives[w] for w in _with_prefix(pool.sorted_negatives, name)}
        if len(candidates) == 1 and not negatives:
            spec = OPTIONS[candidates.pop()]
            return spec, False, f"--{name} is an abbreviation of --{spec.name}"
        if len(negatives) == 1 and not candidates:
            spec = OPTIONS[negatives.pop()]
            return spec, True, f"--{name} is an abbreviation of --no-{spec.name}"
        if candidates or negatives:
            break  # ambiguous
    return None, None, None


# a real serve line has tens of words; a config file's keys count too
MAX_WORDS = 10_000
MAX_LINE_CHARS = 4 * 1024 * 1024


def resolve_flag(flag: str) -> OptionSpec | None:
    """The option a flag word stands for, as vLLM resolves it: ``--hf_token``, ``--hf-tok``
    (an abbreviation), ``-tp`` (a short alias); None for an unknown flag."""
    if flag.startswith("--"):
        name = flag[2:].split("=", 1)[0].split(".", 1)[0].replace("_", "-")
        if not name:
            return None
        return _resolve_long(name)[0]
    return option_spec(flag.split("=", 1)[0]) if flag.startswith("-") else None


def parse_serve_argv(tokens: list[str], cwd: Path | None = None) -> ServeLine:
    """Parse a serve command given as words (as a shell would split it)."""
    if not isinstance(tokens, (list, tuple)) or not all(isinstance(t, str) for t in tokens):
        raise InputError(SERVE_LINE, "expected a list of words")
    if not tokens or all(not t.strip() for t in tokens):
        raise InputError(SERVE_LINE, "empty serve line")
    if any("\x00" in t for t in tokens):
        raise InputError(SERVE_LINE, "contains NUL bytes")
    if len(tokens) > MAX_WORDS:
        raise InputError(SERVE_LINE, f"{len(tokens):,} words; a serve line of more than "
                                     f"{MAX_WORDS:,} is refused (vLLM has a few hundred options)")
    env_words, args, entrypoint = _strip_prefix(list(tokens))
    if not args:
        raise InputError(SERVE_LINE, "no model and no options after `vllm serve`")
    line = ServeLine(tokens=list(args), model=None, entrypoint=entrypoint)
    line.env_tokens = list(env_words)
    for word in env_words:
        k, _, v = word.partition("=")
        line.env[k] = v

    toks = [_Tok(t, i, t) for i, t in enumerate(args)]

    # -- step 2: the model -----------------------------------------------------------
    model_tok: _Tok | None = None
    model_idx = next((i for i, t in enumerate(toks)
                      if re.match(r"^--model(=.+|$)", t.text)), None)
    if model_idx is not None:
        tok = toks[model_idx]
        if tok.text == "--model":
            if model_idx + 1 >= len(toks) or _looks_like_flag(toks[model_idx + 1].text):
                raise InputError("--model", "expected one argument")
            value_tok = toks[model_idx + 1]
            model_tok = _Tok(value_tok.text, tok.idx, f"--model {value_tok.text}")
            line.model_span = (model_idx, model_idx + 2)
            del toks[model_idx:model_idx + 2]
        else:
            model_tok = _Tok(tok.text[len("--model="):], tok.idx, tok.text)
            line.model_span = (model_idx, model_idx + 1)
            del toks[model_idx]
        if entrypoint == "serve":
            line.warnings.append("--model is deprecated with `vllm serve`: give the model "
                                 "as the first positional argument")
    elif toks and not _looks_like_flag(toks[0].text):
        model_tok = toks.pop(0)
        line.model_span = (0, 1)
    if model_tok is not None:
        line.model = model_tok.text
        line.given["model"] = model_tok.raw
        line.origins["model"] = "cli"

    if (model_tok is None and entrypoint == "serve"
            and any(re.match(r"^--served[-_]model[-_]name(=.+|$)", t.text) for t in toks)
            and not any(re.match(r"^--config(=.+|$)", t.text) for t in toks)):
        line.warnings.append("`model` should be provided as the first positional argument "
                             "when using `vllm serve` (vLLM raises ValueError)")

    # -- step 3: --config --------------------------------------------------------------
    config_positions = [i for i, t in enumerate(toks) if t.text == "--config"]
    if len(config_positions) > 1:
        raise InputError("--config", "more than one config file given")
    if config_positions:
        ci = config_positions[0]
        if ci + 1 >= len(toks):
            raise InputError("--config", "no config file given")
        path, data = _read_config(toks[ci + 1].text, cwd)
        line.config_path = str(path)
        line.spans.setdefault("config", []).extend(
            [(toks[ci].idx, toks[ci].idx + 1), (toks[ci + 1].idx, toks[ci + 1].idx + 1)])
        config_toks = [_Tok(t, None, ev) for t, ev in _yaml_to_args(path, data)]
        toks = config_toks + toks[:ci] + toks[ci + 2:]
    elif any(t.text.startswith("--config=") for t in toks):
        line.warnings.append("vLLM reads a config file only from `--config FILE`; "
                             "`--config=FILE` is not loaded")

    # vLLM's dotted-key pass (step 5) takes a word like `-0.5` for option `-0` with key `5`
    # and fails, wherever the word stands (even as the model)
    for tok in ([model_tok] if model_tok is not None else []) + toks:
        if _NEG_NUMBER.match(tok.text) and "." in tok.text:
            raise InputError(tok.raw, "vLLM reads a negative decimal as a dotted option "
                             "and fails; give it as --option=" + tok.text)

    # -- steps 4 and 5 ----------------------------------------------------------------
    toks = _normalise(toks)
    toks, dotted_duplicates, empty_keys = _extract_dotted(toks)
    line.duplicates.extend(sorted(dotted_duplicates))
    for raw in empty_keys:
        line.warnings.append(f"{raw}: empty key in a dotted option")

    # -- step 6: consume -----------------------------------------------------------------
    _consume(line, toks)

    if line.model is None:
        if entrypoint == "serve":
            line.warnings.append("no model given (vLLM would serve its default model)")
    spec_conf = line.options.get("speculative-config")
    if isinstance(spec_conf, dict):
        for flag, key in _SPEC_FLAGS:
            if flag in line.options and key in {k.replace("-", "_") for k in spec_conf}:
                line.warnings.append(f"--{flag} and --speculative-config['{key}'] are "
                                     "mutually exclusive (vLLM raises ValueError)")
    return line


def _consume(line: ServeLine, toks: list[_Tok]) -> None:
    seen_cli: set[str] = set()
    positional_taken = line.origins.get("model") == "cli"
    positional_only = False
    i = 0
    n = len(toks)
    while i < n:
        tok = toks[i]
        arg = tok.text
        dotted_idx = tok.dotted_idx
        if arg == "--" and not positional_only:
            positional_only = True  # argparse: every word after `--` is positional
            _add_span(line, "--", [tok])
            i += 1
            continue
        is_long = not positional_only and arg.startswith("--") and len(arg) > 2
        is_short = (not positional_only and not is_long and arg.startswith("-")
                    and len(arg) > 1 and not _NEG_NUMBER.match(arg))
        if is_long:
            key, eq, explicit = arg[2:].partition("=")
            spec, negated, note = _resolve_long(key)
            flag = "--" + key
        elif is_short:
            key, eq, explicit = arg.partition("=")
            target = _SHORT_ALIASES.get(key)
            if target is None:
                raise InputError(arg, "unknown short option (vLLM's short options are "
                                 + ", ".join(sorted(_SHORT_ALIASES)) + ")")
            spec, negated, note = OPTIONS[target], False, None
            flag = key
        else:
            # a positional word. argparse gives the first one to the optional `model_tag`
            # positional when no model came first (it then wins over `model:` in a config
            # file); any further one is an unrecognized argument.
            if not positional_taken and tok.idx is not None:
                positional_taken = True
                line.model = tok.text
                line.given["model"] = tok.raw
                line.origins["model"] = "cli"
                line.model_span = (tok.idx, tok.idx + 1)
                line.warnings.append("the model should be the first word after `vllm serve`")
                i += 1
                continue
            line.unknown_flags.append(tok.raw)
            line.warnings.append(f"unrecognized argument {tok.raw!r} (vLLM takes one "
                                 "positional word: the model)")
            _add_span(line, "?", [tok])
            i += 1
            continue
        start_tok = tok
        if spec is None:
            # unknown: keep it verbatim, with a following value when one follows
            end_tok = tok
            if dotted_idx is not None and i + 1 < n:
                i += 1  # the merged JSON value of dotted pieces
                text = tok.raw
            elif (not eq and i + 1 < n and not _looks_like_flag(toks[i + 1].text)
                  and toks[i + 1].dotted_idx is None):
                i += 1
                end_tok = toks[i]
                text = _evidence_text([tok, end_tok])
            else:
                text = tok.raw
            line.unknown_flags.append(text)
            _add_span(line, "?" + key, [start_tok, end_tok], dotted_idx)
            i += 1
            continue
        if note:
            line.warnings.append(note)
        name = spec.name
        values: list[str] = []
        used = [tok]
        if spec.kind in ("bool", "flag"):
            if eq:
                raise InputError(flag, f"takes no value (got {explicit!r}); "
                                 f"use --{name}" + (f" or --no-{name}" if spec.kind == "bool" else ""))
            value: Any = not negated
            end_tok = tok
            if (not negated and "bool_or_str" in spec.older_kinds and i + 1 < n
                    and toks[i + 1].text.lower() in ("true", "false")):
                # 0.8.0-0.8.4 StoreBoolean: `--enable-chunked-prefill false` (which releases
                # take the word is judged per release)
                i += 1
                end_tok = toks[i]
                used.append(end_tok)
                value = end_tok.text.lower() == "true"
                line.raw_values[name] = end_tok.text
        elif spec.kind == "bool_or_str":
            end_tok = tok
            if eq:
                value = explicit
            elif i + 1 < n and not _looks_like_flag(toks[i + 1].text):
                i += 1
                value = toks[i].text
                end_tok = toks[i]
                used.append(end_tok)
            else:
                value = True
        elif spec.kind == "list":
            end_tok = tok
            if eq:
                values = [explicit]
            else:
                while i + 1 < n and not _looks_like_flag(toks[i + 1].text) \
                        and toks[i + 1].dotted_idx is None:
                    i += 1
                    values.append(toks[i].text)
                    end_tok = toks[i]
                    used.append(end_tok)
                if not values:
                    raise InputError(flag, "expected at least one argument")
            value = values
        else:
            if eq:
                raw_value = explicit
                end_tok = tok
            else:
                if i + 1 >= n or _looks_like_flag(toks[i + 1].text):
                    raise InputError(flag, "expected one argument")
                i += 1
                raw_value = toks[i].text
                end_tok = toks[i]
                used.append(end_tok)
            value = _convert(flag if not dotted_idx else f"--{name}", spec, raw_value)
            if dotted_idx is None:
                line.raw_values[name] = raw_value
            if spec.kind == "append":
                value = list(line.options.get(name) or []) + [value]
        origin = "config" if tok.idx is None else "cli"
        if name == "model":
            # a positional model wins over `model:` in a config file
            if line.model is None:
                line.model = str(value)
                line.given["model"] = _evidence_text(used)
                line.origins["model"] = origin
            else:
                if origin == "cli" and "model" not in line.duplicates:
                    line.duplicates.append("model")
                _add_span(line, "model-ignored", used)  # no effect: render drops it
            i += 1
            continue
        evidence = _evidence_text(used)
        if dotted_idx is not None:
            evidence = start_tok.raw
        if name in line.options and origin == "cli" and name in seen_cli and spec.kind != "append":
            if name not in line.duplicates:
                line.duplicates.append(name)
        if origin == "cli":
            seen_cli.add(name)
        if spec.legacy and ("--" + name) not in line.legacy_flags:
            line.legacy_flags.append("--" + name)
        line.options[name] = value
        line.given[name] = evidence
        line.origins[name] = origin
        _add_span(line, name, used, dotted_idx)
        i += 1


def _add_span(line: ServeLine, name: str, used: list[_Tok],
              dotted_idx: list[int] | None = None) -> None:
    """Record which of the user's words an option used (one (i, i+1) range per word)."""
    spans = line.spans.setdefault(name, [])
    seen = line.span_index.get(name)  # a set beside the list: a repeated flag stays linear
    if seen is None:
        seen = line.span_index[name] = set(spans)
    indices = dotted_idx if dotted_idx else [t.idx for t in used if t.idx is not None]
    for idx in indices:
        if (idx, idx + 1) not in seen:
            seen.add((idx, idx + 1))
            spans.append((idx, idx + 1))
    if not spans:
        del line.spans[name]


def _logical_lines(text: str) -> list[str]:
    """Split shell text into command lines: backslash-newline continues a line (outside
    single quotes), a newline inside quotes stays part of the word."""
    lines: list[str] = []
    buf: list[str] = []
    quote: str | None = None
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == "\\" and quote != "'" and i + 1 < n:
            nxt = text[i + 1]
            if nxt == "\n" or (nxt == "\r" and i + 2 < n and text[i + 2] == "\n"):
                i += 2 if nxt == "\n" else 3
                buf.append(" ")
                continue
            buf.append(ch)
            buf.append(nxt)
            i += 2
            continue
        if quote is None and ch in "'\"":
            quote = ch
        elif quote is not None and ch == quote:
            quote = None
        if ch == "\n" and quote is None:
            lines.append("".join(buf))
            buf = []
        else:
            buf.append(ch)
        i += 1
    lines.append("".join(buf))
    return [ln for ln in lines if ln.strip(" \t\r")]


_COMMAND_RE = re.compile(r"(^|\s)(vllm\s+serve|vllm\.entrypoints\.(openai\.)?api_server|"
                         r"vllm\.entrypoints\.cli\.main)(\s|$)")


def parse_serve_string(text: str) -> ServeLine:
    """Parse a serve command pasted as text: shell quoting, ``\\`` line continuations,
    ``#`` comments; when several commands are pasted, the `vllm serve` one is used."""
    return parse_serve_argv(command_words(text))


def command_words(text: str) -> list[str]:
    """The words of the serve command in shell text (see ``parse_serve_string``)."""
    if not isinstance(text, str):
        raise InputError(SERVE_LINE, "expected text")
    if "\x00" in text:
        raise InputError(SERVE_LINE, "contains NUL bytes")
    if len(text) > MAX_LINE_CHARS:
        raise InputError(SERVE_LINE, f"{len(text):,} characters; at most {MAX_LINE_CHARS:,} are read")
    lines = [ln.strip(" \t\r") for ln in _logical_lines(text)]
    lines = [ln[2:] if ln.startswith("$ ") else ln for ln in lines]
    lines = [ln for ln in lines if ln and not ln.startswith("#")]
    if not lines:
        raise InputError(SERVE_LINE, "empty serve line")
    chosen = next((ln for ln in lines if _COMMAND_RE.search(ln)), None)
    command = _drop_redirections(chosen if chosen is not None else " ".join(lines))
    try:
        words = shlex.split(command, comments=True, posix=True)
    except ValueError as err:
        raise InputError(SERVE_LINE, f"cannot split into words: {err}") from None
    if not words:
        raise InputError(SERVE_LINE, "empty serve line")
    return _command_words(command) or words


def load_serve_config(path: Path) -> ServeLine:
    """A YAML file like vLLM's ``--config`` (``model:`` gives the model)."""
    from vllm_doctor.bounds import expand_path

    path = expand_path(path, "--serve-config").resolve()
    try:
        return parse_serve_argv(["serve", "--config", str(path)])
    except InputError as err:  # read as vLLM's --config, but the user gave --serve-config
        if err.source != "--config":
            raise
        raise InputError("--serve-config", err.problem) from None


# --------------------------------------------------------------------------------------
# Rendering a corrected command
# --------------------------------------------------------------------------------------


def _format_value(spec: OptionSpec | None, value: Any) -> list[str]:
    if isinstance(value, (dict, list)) and (spec is None or spec.kind in JSON_KINDS):
        return [json.dumps(value, separators=(", ", ": "))]
    if isinstance(value, list):
        return [str(v) for v in value]
    if isinstance(value, float) and value.is_integer() and spec is not None and spec.kind != "float":
        return [str(int(value))]
    return [str(value)]


def _flag_tokens(spec: OptionSpec | None, name: str, value: Any,
                 spelled: str | None = None) -> list[str]:
    flag = spelled or f"--{name}"
    if value is True and (spec is None or spec.kind in ("bool", "flag", "bool_or_str")):
        return [flag if not flag.startswith("--no-") else f"--{name}"]
    if value is False and (spec is None or spec.kind in ("bool", "flag")):
        if spec is not None and spec.kind == "flag":
            return []
        return [f"--no-{name}"]
    if value is None:
        return []
    return [flag] + _format_value(spec, value)


def _set_key(key: str) -> tuple[str, list[str]]:
    """A `set`/`remove` key -> (option name, sub-keys for a JSON option)."""
    text = key.strip()
    if text.startswith("-") and not text.startswith("--"):
        head, dot, rest = text.partition(".")
        target = _SHORT_ALIASES.get(head)
        if target is None:
            raise InputError(key, "unknown short option")
        return target, [p for p in rest.split(".") if p] if dot else []
    text = text.lstrip("-")
    head, dot, rest = text.partition(".")
    head = head.replace("_", "-")
    spec = option_spec("--" + head)
    name = spec.name if spec else head
    return name, [p for p in rest.split(".") if p] if dot else []


def render_command(line: ServeLine, set: Mapping[str, Any] | None = None,
                   remove: Iterable[str] = ()) -> str:
    """The `vllm serve MODEL ...` command with ``set`` flags replaced (or appended) and
    ``remove`` flags dropped, keeping the user's other flags and their order.

    ``set`` values: True is a bare flag, False ``--no-flag`` (a store-true flag is dropped),
    a dict for a JSON option is written as JSON; a key may be dotted
    (``compilation-config.cudagraph_mode``) to change one field of a JSON option.
    Options that came from a ``--config`` file are overridden by appending them (the
    command line wins over the file); removing such a boolean appends ``--no-flag``.
    """
    wanted = dict(set or {})
    updates: dict[str, Any] = {}
    sub_updates: dict[str, list[tuple[list[str], Any, bool]]] = {}
    for key, value in wanted.items():
        name, sub = _set_key(key)
        if sub:
            sub_updates.setdefault(name, []).append((sub, value, False))
        else:
            updates[name] = value
    removals: builtins.set[str] = builtins.set()
    for key in remove:
        name, sub = _set_key(key)
        if sub:
            sub_updates.setdefault(name, []).append((sub, None, True))
        else:
            removals.add(name)
    # dotted edits become a whole new JSON value for the option
    for name, edits in sub_updates.items():
        if name in updates or name in removals:
            continue
        current = line.options.get(name)
        if name == "speculative-config":
            current = line.speculative_config() if current is not None or any(
                flag in line.options for flag, _ in _SPEC_FLAGS) else None
        if not isinstance(current, dict) and all(is_removal for _, _, is_removal in edits):
            continue  # nothing to remove from
        new = json.loads(json.dumps(current)) if isinstance(current, dict) else {}
        for path, value, is_removal in edits:
            node = new
            for part in path[:-1]:
                if not isinstance(node.get(part), dict):
                    node[part] = {}
                node = node[part]
            if is_removal:
                node.pop(path[-1], None)
            else:
                node[path[-1]] = value
        updates[name] = new
        if name == "speculative-config":
            removals |= {flag for flag, _ in _SPEC_FLAGS}

    tokens = list(line.tokens)
    drop: builtins.set[int] = builtins.set()
    replace_at: dict[int, list[str]] = {}
    appended: list[str] = []
    appended_removals: list[str] = []

    if line.model_span is not None:
        drop |= builtins.set(range(*line.model_span))
    for start, end in line.spans.get("model-ignored", []):
        drop |= builtins.set(range(start, end))
    # words from a `--` marker on are all positional: they stay last, after any new flag
    marker = min((start for start, _ in line.spans.get("--", [])), default=len(tokens))

    def spans_of(name: str) -> list[tuple[int, int]]:
        return sorted(line.spans.get(name, []))

    for name in removals:
        spans = spans_of(name)
        for start, end in spans:
            drop |= builtins.set(range(start, end))
        spec = OPTIONS.get(name)
        if line.origins.get(name) == "config" and spec is not None and spec.kind == "bool":
            appended_removals.append(f"--no-{name}")

    for name, value in updates.items():
        spec = OPTIONS.get(name)
        spans = spans_of(name)
        if spans and _enclosed(line, name, spans[0][0]):
            # its words sit between another option and that option's value: append instead
            for s, e in spans:
                drop |= builtins.set(range(s, e))
            appended.extend(_flag_tokens(spec, name, value))
        elif spans:
            start, end = spans[0]
            spelled = _spelling(tokens[start], name, spec)
            new_tokens = _flag_tokens(spec, name, value, spelled)
            if "=" in tokens[start] and len(new_tokens) == 2 and spelled and \
                    not tokens[start].split("=", 1)[0].count("."):
                new_tokens = [f"{new_tokens[0]}={new_tokens[1]}"]
            replace_at[start] = new_tokens
            for s, e in spans:
                drop |= builtins.set(range(s, e))
        else:
            appended.extend(_flag_tokens(spec, name, value))

    out: list[str] = []
    tail: list[str] = []
    model_in_tail = line.model_span is not None and line.model_span[0] > marker
    for i, tok in enumerate(tokens):
        target = out if i < marker else tail
        if i in replace_at:
            target.extend(replace_at[i])
        if i in drop and not (model_in_tail and i >= marker):
            continue
        target.append(tok)
    out.extend(appended)
    out.extend(appended_removals)
    out.extend(tail)
    head = ["vllm", "serve"]
    if line.model is not None and line.origins.get("model") != "config" and not model_in_tail:
        if _looks_like_flag(line.model):
            head.append(f"--model={line.model}")  # a model name that looks like a flag
        else:
            head.append(line.model)
    # secrets as "$VARIABLE" placeholders: the command runs as printed
    return shell_words(list(line.env_tokens) + head + out)


def _enclosed(line: ServeLine, name: str, pos: int) -> bool:
    """Whether word ``pos`` lies between the words of another option (its flag and value)."""
    for other, spans in line.spans.items():
        if other == name or not spans:
            continue
        starts = [s for s, _ in spans]
        if min(starts) < pos < max(starts):
            return True
    return False


def _spelling(token: str, name: str, spec: OptionSpec | None) -> str | None:
    """Keep the user's spelling of a flag (``-tp``, ``--max_model_len``) when it is plain."""
    key = token.split("=", 1)[0]
    if "." in key:
        return None  # dotted pieces are replaced by the whole option
    if key.startswith("--no-") or key.startswith("-O"):
        return None
    if key.startswith("--"):
        return key if key[2:].replace("_", "-") == name else None
    if key.startswith("-") and _SHORT_ALIASES.get(key) == name:
        return key
    return None


# --------------------------------------------------------------------------------------
# Facts
# --------------------------------------------------------------------------------------

# serve.<fact> -> (option, default value or None, reason when there is no default)
_FACT_OPTIONS: dict[str, tuple[str, Any, str | None]] = {
    "tensor_parallel_size": ("tensor-parallel-size", 1, None),
    "pipeline_parallel_size": ("pipeline-parallel-size", 1, None),
    "data_parallel_size": ("data-parallel-size", 1, None),
    "enable_expert_parallel": ("enable-expert-parallel", False, None),
    "quantization": ("quantization", None,
                     "not given: vLLM uses the checkpoint's quantization_config, if any"),
    "dtype": ("dtype", "auto", None),
    "kv_cache_dtype": ("kv-cache-dtype", "auto", None),
    "max_model_len": ("max-model-len", None,
                      "not given: vLLM derives it from the model config"),
    "max_num_seqs": ("max-num-seqs", None,
                     "not given: vLLM picks it for the GPU and usage context"),
    "max_num_batched_tokens": ("max-num-batched-tokens", None,
                               "not given: vLLM picks it for the GPU and usage context"),
    "enforce_eager": ("enforce-eager", False, None),
    "enable_chunked_prefill": ("enable-chunked-prefill", None,
                               "not given: vLLM decides (on by default in the V1 engine)"),
    "trust_remote_code": ("trust-remote-code", False, None),
    "distributed_executor_backend": ("distributed-executor-backend", None,
                                     "not given: vLLM picks mp on one node, ray across nodes"),
    "disable_custom_all_reduce": ("disable-custom-all-reduce", False, None),
    "load_format": ("load-format", "auto", None),
    "enable_lora": ("enable-lora", False, None),
    "enable_eplb": ("enable-eplb", False, None),
    "enable_auto_tool_choice": ("enable-auto-tool-choice", False, None),
    "tool_call_parser": ("tool-call-parser", None, "not given: no tool-call parser"),
    "reasoning_parser": ("reasoning-parser", None, "not given: no reasoning parser"),
}


def _gpu_memory_default(facts: Facts) -> tuple[float, str]:
    from packaging.version import InvalidVersion, Version

    version = facts.value("vllm.base_release") or facts.value("vllm.version")
    note = "0.92 since vLLM 0.20.0, 0.9 before"
    if version:
        try:
            if Version(str(version)) < Version("0.20.0.dev0"):
                return 0.9, f"default for vLLM {version} ({note})"
            return 0.92, f"default for vLLM {version} ({note})"
        except InvalidVersion:
            pass
    return 0.92, f"default of current vLLM ({note})"


def _redact_secret_values(tokens: list[str]) -> list[str]:
    """The serve words with every secret hidden (``vllm_doctor.redact.redact_words``)."""
    return redact_words(tokens)


def _redact_evidence(text: str | None) -> str | None:
    """The user's words behind a fact (``--api-key K1 K2``), secrets hidden."""
    return " ".join(redact_words(text.split(" "))) if text else text


class _RedactingFacts:
    """Facts seen through redaction: every serve fact's value and evidence is cleaned."""

    def __init__(self, facts: Facts):
        self._facts = facts

    def set(self, path: str, value: Any, source: str, detail: str | None = None) -> None:
        self._facts.set(path, redact_value(value, path.rsplit(".", 1)[-1]), source,
                        _redact_evidence(detail))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._facts, name)


def _to_facts(line: ServeLine, facts: Facts, source: str,
              env: Mapping[str, str] | None) -> None:
    facts = _RedactingFacts(facts)  # type: ignore[assignment]
    def src(name: str) -> str:
        if line.origins.get(name) == "config":
            return Source.SERVE_CONFIG if source == Source.SERVE else source
        return source

    def put(path: str, name: str, value: Any) -> None:
        facts.set(path, value, src(name), line.given.get(name))

    facts.set("serve.argv", _redact_secret_values(list(line.tokens)), source)
    if line.model is not None:
        facts.set("serve.model", line.model, src("model"), line.given.get("model"))
    else:
        facts.mark_missing("serve.model", "no model in the serve line")
    facts.set("serve.flags", sorted(n for n in line.given if n != "model"), source)
    facts.set("serve.unknown_flags", [_redact_evidence(f) for f in line.unknown_flags], source)
    facts.set("serve.legacy_flags", list(line.legacy_flags), source)

    for fact, (option, default, reason) in _FACT_OPTIONS.items():
        path = f"serve.{fact}"
        if option == "max-model-len" and line.options.get(option) == -1:
            facts.mark_missing(path, f"`{line.given.get(option)}`: vLLM fits the length to "
                               "the KV-cache memory at start-up")
        elif option in line.options and line.options[option] is not None:
            put(path, option, line.options[option])
        elif default is not None:
            facts.set(path, default, Source.DEFAULT, "not given")
        # else: not given and no fixed default — absent (vLLM decides at start-up)

    if "gpu-memory-utilization" in line.options:
        put("serve.gpu_memory_utilization", "gpu-memory-utilization",
            line.options["gpu-memory-utilization"])
    else:
        value, detail = _gpu_memory_default(facts)
        facts.set("serve.gpu_memory_utilization", value, Source.DEFAULT, detail)

    tp = facts.value("serve.tensor_parallel_size", 1)
    pp = facts.value("serve.pipeline_parallel_size", 1)
    pcp = line.options.get("prefill-context-parallel-size") or 1
    if all(isinstance(x, int) for x in (tp, pp, pcp)):
        given_any = any(n in line.options for n in ("tensor-parallel-size",
                                                    "pipeline-parallel-size",
                                                    "prefill-context-parallel-size"))
        facts.set("serve.world_size", tp * pp * pcp,
                  Source.DERIVED if given_any else Source.DEFAULT,
                  "tensor × pipeline × prefill-context parallel size")

    # speculative decoding
    spec_conf = line.speculative_config()
    spec_names = [n for n in ("speculative-config", *(flag for flag, _ in _SPEC_FLAGS))
                  if n in line.given]
    spec_detail = " ".join(line.given[n] for n in spec_names) or None
    spec_src = src(spec_names[0]) if spec_names else source
    if spec_conf is not None:
        facts.set("serve.speculative_config", spec_conf, spec_src, spec_detail)
        for key, path in (("method", "serve.speculative_method"),
                          ("num_speculative_tokens", "serve.num_speculative_tokens"),
                          ("model", "serve.speculative_model")):
            if spec_conf.get(key) is not None:
                facts.set(path, spec_conf[key], spec_src, spec_detail)

    # compilation / CUDA graphs
    comp = line.options.get("compilation-config")
    if isinstance(comp, dict):
        put("serve.compilation_config", "compilation-config", comp)
    mode = comp.get("cudagraph_mode") if isinstance(comp, dict) else None
    if line.options.get("enforce-eager") is True:
        # VllmConfig: enforce_eager sets cudagraph_mode NONE whatever the compilation config says
        detail = "--enforce-eager turns CUDA graphs off"
        if isinstance(mode, str) and mode:
            detail += f" (compilation_config.cudagraph_mode={mode} is overridden)"
        facts.set("serve.cudagraph_mode", "NONE", Source.DERIVED, detail)
    elif isinstance(mode, str) and mode:
        put("serve.cudagraph_mode", "compilation-config", mode.upper())
    elif isinstance(comp, dict) and comp.get("full_cuda_graph") is True:
        put("serve.cudagraph_mode", "compilation-config", "FULL")
    if "optimization-level" in line.options:
        put("serve.optimization_level", "optimization-level", str(line.options["optimization-level"]))

    # attention backend
    attn = line.options.get("attention-config")
    if isinstance(attn, dict):
        put("serve.attention_config", "attention-config", attn)
    merged_env = dict(env or {})
    merged_env.update(line.env)
    if line.options.get("attention-backend"):
        put("serve.attention_backend", "attention-backend", str(line.options["attention-backend"]))
        facts.set("serve.attention_backend_source", "--attention-backend", source)
    elif isinstance(attn, dict) and attn.get("backend"):
        put("serve.attention_backend", "attention-config", str(attn["backend"]))
        facts.set("serve.attention_backend_source", "--attention-config", source)
    elif merged_env.get("VLLM_ATTENTION_BACKEND"):
        from_line = "VLLM_ATTENTION_BACKEND" in line.env
        facts.set("serve.attention_backend", merged_env["VLLM_ATTENTION_BACKEND"],
                  source if from_line else Source.ENV,
                  f"VLLM_ATTENTION_BACKEND={merged_env['VLLM_ATTENTION_BACKEND']}")
        facts.set("serve.attention_backend_source", "VLLM_ATTENTION_BACKEND",
                  source if from_line else Source.ENV)

    hf = line.options.get("hf-overrides")
    if isinstance(hf, dict):
        put("serve.hf_overrides", "hf-overrides", hf)

    for key, value in line.env.items():
        if is_secret_name(key):
            value = REDACTED
        facts.set(f"env.{key}", value, source, f"{key}={value} before the command")
