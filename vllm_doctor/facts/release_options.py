"""What the judged vLLM release's own parser makes of the serve line's options: facts
``release.unknown_options``, ``release.unread_values``, ``release.unaccepted_options``,
``release.option_hints``, ``release.corrected_command``, ``release.config_corrections`` and
``release.invalid_choices`` (facts/release.py calls ``collect_options``).

Each option word is judged as the release's ``FlexibleArgumentParser`` and argparse read it
(knowledge tables ``options`` and ``cli_parser``, generated from the release wheels): an
exact option string of the release, a unique prefix of one (``allow_abbrev``), a short
alias, ``-O<x>`` where the release rewrites it, a dotted key (``--x.y``, ``-cc.y``) where
the release's parser merges dotted keys with that prefix. A value is read with the kind the
release gives the option (int, JSON, key=value pairs, ...) and checked against its choices.

Without a known version, options and values no covered release takes are listed (ARGS102):
a newer release may take them. A key of a serve config file (``--serve-config``,
``--config``) is judged like the option on the command line; its evidence names the file
and the key's line, and its correction is given for the file (``release.config_corrections``).
"""

from __future__ import annotations

import bisect
import difflib
import re
import shlex
from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from packaging.version import Version

from vllm_doctor.facts.model import Facts

if TYPE_CHECKING:
    from vllm_doctor.knowledge import Table
    from vllm_doctor.serveline.line import OptionWord, ServeLine

SOURCE = "release knowledge"

# Curated rules that explain removed flags with migration advice (their serve.flags
# patterns win over the generated ARGS100).
CURATED_FLAG_RULES = ("args/ARGS001.yaml", "args/ARGS004.yaml")
_FLAG_WORD = re.compile(r"^(--?[A-Za-z0-9][\w.+-]*)(=.*)?$")


@lru_cache(maxsize=1)
def curated_flag_patterns() -> tuple[re.Pattern[str], ...]:
    """The ``serve.flags`` regexes of the curated removed-flag rules."""
    from pathlib import Path

    from vllm_doctor import yaml_io

    rules_dir = Path(__file__).resolve().parent.parent.parent / "rules"
    if not rules_dir.is_dir():  # installed: the rules ship as vllm_doctor.rules
        import vllm_doctor.rules as shipped  # type: ignore[import-not-found]

        rules_dir = Path(shipped.__file__).resolve().parent
    patterns: list[re.Pattern[str]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("fact") == "serve.flags" and isinstance(node.get("matches"), str):
                patterns.append(re.compile(node["matches"]))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for rel in CURATED_FLAG_RULES:
        path = rules_dir / rel
        if path.is_file():
            walk(yaml_io.safe_load(path.read_text(encoding="utf-8")).get("when"))
    return tuple(patterns)


def _curated(name: str) -> bool:
    return any(p.search(name) for p in curated_flag_patterns())


def _release_ranges(table: Table, holds: Callable[[str], bool]) -> str:
    """The releases for which ``holds(release)`` is true, as ranges of consecutive releases
    ("0.8.0–0.11.2, 0.13.0"), or "" for none."""
    from vllm_doctor.knowledge.ranges import release_spans

    return release_spans(table.releases, {r for r in table.releases if holds(r)})


def _accepted_by(table: Table, word: str, name: str | None) -> str:
    """The releases that accept the option word as written, or "" for none."""
    return _release_ranges(table, lambda release: _accepts(release, word, name))


def _acceptance(table: Table, word: str, name: str | None) -> str:
    """ "accepted by 0.8.0–0.11.2", or "no release 0.8.0–0.33.0 accepts it"."""
    accepted_by = _accepted_by(table, word, name)
    return (
        f"accepted by {accepted_by}"
        if accepted_by
        else f"no release {table.releases[0]}–{table.newest} accepts it"
    )


# -- options ----------------------------------------------------------------------------------


def _parsed(argv: tuple[str, ...]) -> ServeLine | None:
    """The serve line as this process parsed it (a secret-looking option's value unhidden:
    judged, never shown), else parsed again from its redacted words; None when it does not
    parse. Read it, never change it."""
    from vllm_doctor.serveline.line import parsed_line

    line = parsed_line(argv)
    return line if line is not None else _reparsed(argv)


@lru_cache(maxsize=8)
def _reparsed(argv: tuple[str, ...]) -> ServeLine | None:
    from vllm_doctor.errors import InputError
    from vllm_doctor.serveline.parser import parse_serve_argv

    try:
        return parse_serve_argv(list(argv))
    except InputError:
        return None


def _given_words(facts: Facts) -> tuple[ServeLine | None, dict[str, OptionWord]]:
    """(ServeLine, {option word as written -> how the line reads it}), the first of each
    word in the order vLLM's parser meets them (config file keys, then the command line)."""
    argv = facts.value("serve.argv")
    if not argv:
        return None, {}
    line = _parsed(tuple(str(word) for word in argv))
    if line is None:
        return None, {}
    words: dict[str, OptionWord] = {}
    for item in line.option_words:
        words.setdefault(item.word, item)
    return line, words


def _option_strings(options: dict[str, Any]) -> dict[str, str]:
    """Every long option string (without dashes) a release's parser registers -> its option:
    the names, the long aliases and the negation words of that release."""
    out: dict[str, str] = {}
    for name, spec in options.items():
        out[name] = name
        for word in [a[2:] for a in spec.get("aliases", ()) if a.startswith("--")] + list(
            spec.get("negations", ())
        ):
            out.setdefault(word, name)
    return out


@lru_cache(maxsize=64)
def _release_strings(release: str) -> tuple[dict[str, str], tuple[str, ...], frozenset[str]]:
    """(long option strings -> option, the same sorted, the short aliases) of one release."""
    from vllm_doctor import knowledge

    options = knowledge.load("options").at(release)
    strings = _option_strings(options)
    shorts = frozenset(
        a for spec in options.values() for a in spec.get("aliases", ()) if not a.startswith("--")
    )
    return strings, tuple(sorted(strings)), shorts


@lru_cache(maxsize=64)
def _parser_rewrites(release: str) -> dict[str, Any]:
    """The release's parser rewrites (knowledge table ``cli_parser``): dotted keys, -O."""
    from vllm_doctor import knowledge

    return knowledge.load("cli_parser").at(release)


def _accepts(release: str, word: str, name: str | None) -> bool:
    """Does the release's own parser accept the option word as written? An exact option
    string of that release (a name, a long alias, a negation form it registers), else, like
    argparse's allow_abbrev, a prefix of exactly one of its option strings; ``-O<x>`` where
    the release rewrites it; a dotted key (``--x.y``, ``-cc.y``) where its parser merges
    dotted keys of that prefix."""
    if name is None:
        return False
    strings, ordered, shorts = _release_strings(release)
    rewrites = _parser_rewrites(release)
    if word.startswith("-O") and not word.startswith("--"):
        target = (rewrites.get("o_shorthand") or {}).get("option")
        return target is not None and target in strings.values()
    base, dot, _ = word.partition(".")
    if dot:
        prefix = (rewrites.get("dotted") or {}).get("prefix")
        if prefix is None or not word.startswith(prefix):
            return False  # the release's parser leaves the dotted word to argparse
    if not base.startswith("--"):
        return base in shorts
    bare = base[2:].replace("_", "-")
    if bare in strings:
        return True
    start = bisect.bisect_left(ordered, bare)
    return (
        start < len(ordered)
        and ordered[start].startswith(bare)
        and not (start + 1 < len(ordered) and ordered[start + 1].startswith(bare))
    )


def _shown(name: str, value: Any) -> str:
    """A value as a message shows it: hidden where the option's name looks secret."""
    from vllm_doctor.redact import redact_value

    return str(redact_value(value, name))


def _value_refusal(
    release: str, options: dict[str, Any], name: str, given: Any, raw: str | None
) -> str | None:
    """Why the release's parser refuses the option's value as given (its kind there reads
    the value otherwise: JSON only, no key=value pairs, a flag that takes no value), or
    None when it reads it."""
    from vllm_doctor.errors import InputError
    from vllm_doctor.serveline.options import OPTIONS
    from vllm_doctor.serveline.values import convert_value

    spec = options.get(name)
    union = OPTIONS.get(name)
    if spec is None or union is None:
        return None
    kind = spec["kind"]
    keys = spec.get("keys")
    if keys and isinstance(given, dict):
        unknown = [str(k) for k in given if k not in keys]
        if unknown:
            # parse_dataclass validates the object against the config class, extra keys
            # forbidden: "Unexpected keyword argument"
            return (
                f"--{name}: vLLM {release} takes no key {', '.join(map(repr, unknown))} "
                f"in it (its config class has the fields {_few(keys, 40)})"
            )
    if kind == "list" and isinstance(given, list):
        item = spec.get("item")
        reader = {"int": int, "float": float}.get(item)
        values = given if isinstance(given, list) else [given]
        for word in values:
            try:
                if reader is not None:
                    reader(str(word))
            except ValueError:
                return (
                    f"--{name} {_shown(name, word)}: vLLM {release} reads each value as "
                    f"{item} (invalid {item} value)"
                )
        return None
    if raw is None:
        if isinstance(given, bool) and kind not in ("bool", "flag", "bool_or_str"):
            return f"--{name} expects a value in vLLM {release} (its {kind} option)"
        return None
    if kind in ("bool", "flag"):
        return f"--{name} {_shown(name, raw)}: vLLM {release} takes no value after --{name}"
    try:
        convert_value(f"--{name}", union, kind, raw, bool(spec.get("kvs")))
    except InputError as err:
        problem = err.problem if _shown(name, raw) == raw else "not of its kind"
        return f"--{name} {_shown(name, raw)}: vLLM {release} refuses the value ({problem})"
    return None


def _nearest(word: str, options: dict[str, Any]) -> str | None:
    bare = word.lstrip("-").replace("_", "-")
    match = difflib.get_close_matches(bare, list(options), n=1, cutoff=0.75)
    return f"--{match[0]}" if match else None


_OPTION_PATHS = (
    "release.unknown_options",
    "release.unread_values",
    "release.config_corrections",
    "release.unaccepted_options",
    "release.option_hints",
    "release.corrected_command",
    "release.invalid_choices",
)


def _options(facts: Facts, release: str | None) -> None:
    if "serve.argv" not in facts:
        reason = "no serve line: " + (facts.why_missing("serve.argv") or "not given")
        for path in _OPTION_PATHS:
            facts.mark_missing(path, reason)
        return
    from vllm_doctor import knowledge

    table = knowledge.load("options")
    line, words = _given_words(facts)
    union = set(table.keys())
    unknown = [w for w, item in words.items() if item.name is None or item.name not in union]
    hints: list[str] = []
    for word in unknown:
        nearest = _nearest(word, dict.fromkeys(union))
        hints.append(
            f"{_shown_word(words[word])}: no vLLM release {table.releases[0]}–{table.newest} "
            "accepts it" + (f"; nearest valid spelling {nearest}" if nearest else "")
        )
    facts.set(
        "release.unknown_options",
        unknown,
        SOURCE,
        f"options of every release {table.releases[0]}–{table.newest}",
    )
    facts.set(
        "release.unread_values",
        _unread_values(table, line),
        SOURCE,
        f"the value kinds and choices of every release {table.releases[0]}–{table.newest}",
    )
    if release is None:
        if hints:
            facts.set("release.option_hints", hints, SOURCE)
        return
    options = table.at(release)
    unaccepted: list[str] = []
    edits: dict[str, str | None] = {}  # word -> replacement word, or None to drop it
    config_edits: list[str] = []
    release_hints: list[str] = []
    for word, item in words.items():
        name = item.name
        if _accepts(release, word, name):
            continue
        last = table.last_release(name) if name else None
        if (
            name is not None
            and last is not None
            and Version(release) > Version(last)
            and _curated(name)
        ):
            continue  # removed, and ARGS001/ARGS004 explain it with the migration advice
        unaccepted.append(word)
        nearest = _nearest(word, options)
        if name is not None and name in options and word.startswith("-"):
            nearest = f"--{name}"  # an alias or a form this release lacks: its long name
        text = (
            f"{_shown_word(item)}: vLLM {release} does not accept it "
            f"({_acceptance(table, word, name)})"
        )
        if nearest:
            text += f"; nearest valid spelling {nearest}"
        release_hints.append(text)
        if item.origin == "config":
            config_edits.append(_config_edit(item, nearest, release))
        else:
            edits[word] = nearest
    facts.set("release.unaccepted_options", unaccepted, SOURCE, f"the options of vLLM {release}")
    if release_hints:
        facts.set("release.option_hints", release_hints, SOURCE)
    if edits and line is not None:
        facts.set(
            "release.corrected_command",
            _corrected(line, edits),
            SOURCE,
            "misspelt options renamed to the nearest valid spelling, the others removed",
        )
    if config_edits:
        facts.set(
            "release.config_corrections",
            config_edits,
            SOURCE,
            "the config file's keys renamed to the nearest valid spelling, the others removed",
        )
    invalid = []
    if line is not None:
        for name, value in line.options.items():
            if f"--{name}" in unaccepted or _hidden(line, name):
                continue
            refusal = _value_refusal(release, options, name, value, line.raw_values.get(name))
            if refusal is not None:
                invalid.append(f"{refusal} ({_value_acceptance(table, line, name)})")
                continue
            bad = _outside_choices(options.get(name), value)
            if bad:
                invalid.append(
                    f"--{name} {_shown(name, ' '.join(bad))}: not among the choices of vLLM "
                    f"{release} ({', '.join(str(c) for c in options[name]['choices'])})"
                )
    facts.set("release.invalid_choices", invalid, SOURCE, f"the options of vLLM {release}")


def _hidden(line: ServeLine, name: str) -> bool:
    """The option's value was redacted in ``serve.argv`` (a secret-looking name such as
    ``--long-prefill-token-threshold``): what it was is not known here, so it is not judged."""
    from vllm_doctor.redact import REDACTED

    value = line.raw_values.get(name, line.options.get(name))
    return value == REDACTED or (isinstance(value, list) and REDACTED in value)


def _shown_word(item: OptionWord) -> str:
    """The word, with the config file line it was written on (``--tensor-parallel-sise
    (serve.yaml:3: tensor-parallel-sise: 2)``)."""
    from vllm_doctor.redact import redact_text

    return f"{item.word} ({redact_text(item.evidence)})" if item.origin == "config" else item.word


def _config_edit(item: OptionWord, nearest: str | None, release: str) -> str:
    """``serve.yaml:3: rename tensor-parallel-sise: to tensor-parallel-size:``."""
    where, _, _ = item.evidence.partition(": ")
    key = item.word[2:]
    if nearest and nearest.startswith("--"):
        return f"{where}: rename `{key}:` to `{nearest[2:]}:`"
    return f"{where}: remove `{key}:` (vLLM {release} has no such option)"


def _outside_choices(spec: dict[str, Any] | None, value: Any) -> list[str]:
    """The given values outside the option's choices in a release (its spec there)."""
    if not spec or "choices" not in spec or value is None or isinstance(value, bool):
        return []
    allowed = {str(c) for c in spec["choices"]}
    values = value if isinstance(value, list) else [value]
    return [str(v) for v in values if str(v) not in allowed]


def _why_unread(line: ServeLine, name: str) -> str:
    from vllm_doctor.redact import is_secret_name

    if name not in line.unread:
        return "not among the choices"
    return "not of a kind they read" if is_secret_name(name) else line.unread[name]


def _few(items: list[Any], limit: int = 12) -> str:
    shown = ", ".join(str(c) for c in items[:limit])
    return shown + (f", … ({len(items)} in all)" if len(items) > limit else "")


def _unread_values(table: Table, line: ServeLine | None) -> list[str]:
    """The option values no covered release reads as given (its kind refuses the word, or
    it is outside every release's choices), each with what the releases read instead: with
    the version unknown, a newer release may read it (ARGS102)."""
    if line is None:
        return []
    out = []
    for name, value in line.options.items():
        if name not in table or _hidden(line, name):
            continue
        raw = line.raw_values.get(name)
        spans = table.raw_spans(name)
        reads = []
        for span in spans:
            spec = span["value"]
            refused = _value_refusal(span["first"], {name: spec}, name, value, raw)
            if refused is None and not _outside_choices(spec, value):
                reads.append(span)
                break
        if reads:
            continue
        kinds = "; ".join(
            f"{span['first']}–{span['last']}: "
            + (
                f"one of {_few(span['value']['choices'])}"
                if "choices" in span["value"]
                else f"{span['value']['kind']} values"
            )
            for span in spans
        )
        shown = _shown(name, raw if raw is not None else value)
        out.append(
            f"--{name} {shown}: no vLLM release {table.releases[0]}–{table.newest} reads this "
            f"value ({_why_unread(line, name)}; the releases take "
            f"{kinds}); a newer release may"
        )
    return out


def _value_acceptance(table: Table, line: ServeLine, name: str) -> str:
    """ "read by 0.8.0–0.9.2" for the option's value as given, over every covered release."""
    value, raw = line.options.get(name), line.raw_values.get(name)

    def reads(release: str) -> bool:
        options = table.at(release)
        return name in options and _value_refusal(release, options, name, value, raw) is None

    readers = _release_ranges(table, reads)
    return f"read by {readers}" if readers else "no covered release reads it"


def refused_option_hints(words: list[str], version: str | None) -> list[str]:
    """What the options table says of the words vLLM's parser refused (``error: unrecognized
    arguments: ...`` in a log, in order): for each option, the releases that accept it and the
    nearest spelling, and whether ``version`` (when known) accepts it; a word that is neither
    an option nor the value after one is named as an extra positional argument."""
    from vllm_doctor import knowledge

    flags, extra, after_flag = [], [], False
    for word in words:
        if word.startswith("-") and word not in ("-", "--"):
            flags.append(word)
            after_flag = "=" not in word
        elif after_flag:
            after_flag = False  # the refused option's value
        else:
            extra.append(word)
    hints = [
        f"{w}: not an option but an extra positional argument (vllm serve takes one model; "
        "an option's value split from it, or a quoted word that should be two, does this)"
        for w in extra
    ]
    if not flags:
        return hints
    from vllm_doctor.serveline.options import resolve_flag

    table = knowledge.load("options")
    release = knowledge.match_release(version, tuple(table.releases)).release if version else None
    options = table.at(release) if release else None
    found = []
    for word in dict.fromkeys(flag.split("=", 1)[0] for flag in flags):
        spec = resolve_flag(word)
        name = spec.name if spec is not None and spec.name in table else None
        known = _acceptance(table, word, name)
        if release is None or options is None:
            text = f"{word}: {known}"
        elif _accepts(release, word, name):
            text = (
                f"{word}: vLLM {release} accepts it ({known}): the log may come from another "
                "vLLM version or entry point"
            )
        else:
            text = f"{word}: vLLM {release} does not accept it ({known})"
        nearest = _nearest(word, options if options is not None else dict.fromkeys(table.keys()))
        if nearest and nearest != f"--{name}":
            text += f"; nearest valid spelling {nearest}"
        found.append(text)
    return found + hints


def _corrected(line: ServeLine, edits: dict[str, str | None]) -> str:
    """The user's serve words with unaccepted options renamed (or dropped with their value),
    every secret hidden (the words as ``serve.argv`` holds them)."""
    from vllm_doctor.redact import redact_words

    out: list[str] = []
    tokens = redact_words(list(line.tokens))
    i = 0
    while i < len(tokens):
        token = tokens[i]
        m = _FLAG_WORD.match(token)
        if m is not None and m.group(1) in edits:
            replacement = edits[m.group(1)]
            if replacement is None:
                i += 1
                if m.group(2) is None and i < len(tokens) and not tokens[i].startswith("-"):
                    i += 1  # its value
                continue
            out.append(replacement + (m.group(2) or ""))
        else:
            out.append(token)
        i += 1
    prefix = (
        "vllm serve"
        if line.entrypoint == "serve"
        else "python -m vllm.entrypoints.openai.api_server"
    )
    return " ".join([prefix, *(shlex.quote(t) for t in out)])
