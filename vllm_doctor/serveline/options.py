"""Every `vllm serve` option of the releases 0.8.0 … 0.33.0 (``knowledge/data/options.json``,
extracted from the release wheels, plus the pre-0.8.0 speculative-decoding era), and how a
flag as written resolves to one: long names, ``--no-`` forms, aliases, unique prefixes.

Imports nothing of the doctor but the knowledge tables, so ``redact`` can ask which words are
flags without an import circle.
"""

from __future__ import annotations

import bisect
import functools
from dataclasses import dataclass


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
    for name in table:
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
        out[name] = OptionSpec(
            name,
            kinds[0],
            tuple(aliases),
            spans[0]["first"],
            None if last == newest else last,
            tuple(negations),
            tuple(kinds[1:]),
            any(s["value"].get("kvs") for s in spans),
        )
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
_SPEC_FLAGS = (
    ("spec-method", "method"),
    ("spec-model", "model"),
    ("spec-tokens", "num_speculative_tokens"),
)


def option_spec(name: str) -> OptionSpec | None:
    """The spec of an option by long name (with or without ``--``), long alias or short alias."""
    key = name
    if key.startswith("--"):
        key = key[2:]
        head, _dot, _rest = key.partition(".")
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


@dataclass(frozen=True)
class _AbbrevPool:
    words: dict[str, str]  # option string or long alias -> option name
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
    # written is judged per release in facts/release_options.py)
    target = _NEGATIONS.get(name)
    if target is not None and not OPTIONS[target].legacy:
        note = (
            None
            if name in OPTIONS or name.startswith("no-")
            else f"--{name} is the inverse of --{target}"
        )
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


def resolve_flag(flag: str) -> OptionSpec | None:
    """The option a flag word stands for, as vLLM resolves it: ``--hf_token``, ``--hf-tok``
    (an abbreviation), ``-tp`` (a short alias); None for an unknown flag."""
    if flag.startswith("--"):
        name = flag[2:].split("=", 1)[0].split(".", 1)[0].replace("_", "-")
        if not name:
            return None
        return _resolve_long(name)[0]
    return option_spec(flag.split("=", 1)[0]) if flag.startswith("-") else None
