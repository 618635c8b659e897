"""The re-renderer: a serve line with options set or removed, as a command to copy."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from vllm_doctor.errors import InputError
from vllm_doctor.redact import shell_words
from vllm_doctor.serveline.line import ServeLine
from vllm_doctor.serveline.options import (
    _SHORT_ALIASES,
    _SPEC_FLAGS,
    JSON_KINDS,
    OPTIONS,
    OptionSpec,
    option_spec,
)
from vllm_doctor.serveline.words import _looks_like_flag


def _format_value(spec: OptionSpec | None, value: Any) -> list[str]:
    if isinstance(value, (dict, list)) and (spec is None or spec.kind in JSON_KINDS):
        return [json.dumps(value, separators=(", ", ": "))]
    if isinstance(value, list):
        return [str(v) for v in value]
    if (
        isinstance(value, float)
        and value.is_integer()
        and spec is not None
        and spec.kind != "float"
    ):
        return [str(int(value))]
    return [str(value)]


def _flag_tokens(
    spec: OptionSpec | None, name: str, value: Any, spelled: str | None = None
) -> list[str]:
    flag = spelled or f"--{name}"
    if value is True and (spec is None or spec.kind in ("bool", "flag", "bool_or_str")):
        return [flag if not flag.startswith("--no-") else f"--{name}"]
    if value is False and (spec is None or spec.kind in ("bool", "flag")):
        if spec is not None and spec.kind == "flag":
            return []
        return [f"--no-{name}"]
    if value is None:
        return []
    return [flag, *_format_value(spec, value)]


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


def render_command(
    line: ServeLine, changes: Mapping[str, Any] | None = None, remove: Iterable[str] = ()
) -> str:
    """The `vllm serve MODEL ...` command with the ``changes`` flags replaced (or appended)
    and ``remove`` flags dropped, keeping the user's other flags and their order.

    ``changes`` values: True is a bare flag, False ``--no-flag`` (a store-true flag is dropped),
    a dict for a JSON option is written as JSON; a key may be dotted
    (``compilation-config.cudagraph_mode``) to change one field of a JSON option.
    Options that came from a ``--config`` file are overridden by appending them (the
    command line wins over the file); removing such a boolean appends ``--no-flag``.
    """
    wanted = dict(changes or {})
    updates: dict[str, Any] = {}
    sub_updates: dict[str, list[tuple[list[str], Any, bool]]] = {}
    for key, value in wanted.items():
        name, sub = _set_key(key)
        if sub:
            sub_updates.setdefault(name, []).append((sub, value, False))
        else:
            updates[name] = value
    removals: set[str] = set()
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
            current = (
                line.speculative_config()
                if current is not None or any(flag in line.options for flag, _ in _SPEC_FLAGS)
                else None
            )
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
    drop: set[int] = set()
    replace_at: dict[int, list[str]] = {}
    appended: list[str] = []
    appended_removals: list[str] = []

    if line.model_span is not None:
        drop |= set(range(*line.model_span))
    for start, end in line.spans.get("model-ignored", []):
        drop |= set(range(start, end))
    # words from a `--` marker on are all positional: they stay last, after any new flag
    marker = min((start for start, _ in line.spans.get("--", [])), default=len(tokens))

    def spans_of(name: str) -> list[tuple[int, int]]:
        return sorted(line.spans.get(name, []))

    for name in removals:
        spans = spans_of(name)
        for start, end in spans:
            drop |= set(range(start, end))
        spec = OPTIONS.get(name)
        if line.origins.get(name) == "config" and spec is not None and spec.kind == "bool":
            appended_removals.append(f"--no-{name}")

    for name, value in updates.items():
        spec = OPTIONS.get(name)
        spans = spans_of(name)
        if spans and _enclosed(line, name, spans[0][0]):
            # its words sit between another option and that option's value: append instead
            for s, e in spans:
                drop |= set(range(s, e))
            appended.extend(_flag_tokens(spec, name, value))
        elif spans:
            start, end = spans[0]
            spelled = _spelling(tokens[start], name, spec)
            new_tokens = _flag_tokens(spec, name, value, spelled)
            if (
                "=" in tokens[start]
                and len(new_tokens) == 2
                and spelled
                and not tokens[start].split("=", 1)[0].count(".")
            ):
                new_tokens = [f"{new_tokens[0]}={new_tokens[1]}"]
            replace_at[start] = new_tokens
            for s, e in spans:
                drop |= set(range(s, e))
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
    if key.startswith(("--no-", "-O")):
        return None
    if key.startswith("--"):
        return key if key[2:].replace("_", "-") == name else None
    if key.startswith("-") and _SHORT_ALIASES.get(key) == name:
        return key
    return None
