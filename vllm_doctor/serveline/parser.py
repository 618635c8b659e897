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

import json
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from vllm_doctor.errors import InputError
from vllm_doctor.serveline import SERVE_LINE
from vllm_doctor.serveline.line import OptionWord, ServeLine
from vllm_doctor.serveline.options import (
    _SHORT_ALIASES,
    _SPEC_FLAGS,
    OPTIONS,
    _resolve_long,
    option_spec,
)
from vllm_doctor.serveline.values import UnreadValue, _convert, _dotted_value
from vllm_doctor.serveline.words import _NEG_NUMBER, _looks_like_flag, _strip_prefix


@dataclass
class _Tok:
    text: str  # the token after vLLM's normalisation
    idx: int | None  # index in ServeLine.tokens, None for tokens from the config file
    raw: str  # evidence: what the user wrote
    # for the option word standing for merged dotted keys: the user's words they came from
    dotted_idx: list[int] | None = None
    # the option as the user wrote it, where ``raw`` is not that (a config file's key)
    word: str | None = None


_MAX_CONFIG_KEYS = 10_000


# an interpreter as a shell names it: python, python3.12, /usr/bin/python3
_PYTHON = re.compile(r"^(?:\S*/)?python[\d.]*$")


def _yaml_to_args(path: Path, data: Any) -> list[tuple[str, str, str]]:
    """A config file's content as (token, evidence, option word) triples, as vLLM's
    load_config_file does; the evidence names the file and the key's line
    (``serve.yaml:3: tensor-parallel-size: 2``)."""
    if data is None:
        return []
    if not isinstance(data, dict):
        raise InputError(str(path), "a serve config file must be a YAML mapping of option: value")
    if len(data) > _MAX_CONFIG_KEYS:
        raise InputError(
            str(path),
            f"{len(data):,} options; vLLM has a few hundred, and a serve "
            f"config of more than {_MAX_CONFIG_KEYS:,} is refused",
        )
    lines = getattr(data, "lines", {})
    out: list[tuple[str, str, str]] = []
    for raw_key, value in data.items():
        key = str(raw_key)
        where = f"{path.name}:{lines[raw_key]}" if raw_key in lines else path.name
        evidence = f"{where}: {key}: {_yaml_scalar(value)}"
        word = "--" + key
        if isinstance(value, bool):
            if value:
                out.append((word, evidence, word))
            else:
                # vLLM adds --no-KEY only when that exact option string exists.
                spec = OPTIONS.get(key)
                if spec is not None and spec.kind == "bool":
                    out.append(("--no-" + key, evidence, "--no-" + key))
        elif isinstance(value, list):
            if value:
                out.append((word, evidence, word))
                out.extend((str(item), evidence, word) for item in value)
        elif isinstance(value, dict):
            out.append((word, evidence, word))
            out.append((json.dumps(value), evidence, word))
        else:
            out.append((word, evidence, word))
            out.append((str(value), evidence, word))
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
        data = yaml_io.safe_load_with_lines(text)
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
                out.append(replace(tok, text=_dash_key(key) + "=" + value))
            else:
                out.append(replace(tok, text=_dash_key(arg)))
        elif arg.startswith("-O") and arg != "-O":
            level = arg[3:] if arg[2] == "=" else arg[2:]
            out.append(replace(tok, text="--optimization-level"))
            out.append(replace(tok, text=level))
        elif arg == "-O" and i + 1 < len(toks) and toks[i + 1].text in {"0", "1", "2", "3"}:
            out.append(replace(tok, text="--optimization-level"))
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
        duplicates |= {
            f"{label}.{d}" for d in _merge(merged.setdefault(key, {}), _nested(keys, value))
        }
        evidence.setdefault(key, []).extend(pieces)
        delete.add(i)
    kept = [t for i, t in enumerate(toks) if i not in delete]
    for key, value in merged.items():
        pieces = evidence[key]
        raw = _evidence_text(pieces)
        idx = pieces[0].idx
        word = pieces[0].word or raw.split()[0].split("=", 1)[0]
        kept.append(_Tok(key, idx, raw, word=word))
        kept.append(_Tok(json.dumps(value), idx, raw, word=word))
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


# a real serve line has tens of words; a config file's keys count too
MAX_WORDS = 10_000


def parse_serve_argv(tokens: list[str], cwd: Path | None = None) -> ServeLine:
    """Parse a serve command given as words (as a shell would split it)."""
    if not isinstance(tokens, (list, tuple)) or not all(isinstance(t, str) for t in tokens):
        raise InputError(SERVE_LINE, "expected a list of words")
    if not tokens or all(not t.strip() for t in tokens):
        raise InputError(SERVE_LINE, "empty serve line")
    if any("\x00" in t for t in tokens):
        raise InputError(SERVE_LINE, "contains NUL bytes")
    if len(tokens) > MAX_WORDS:
        raise InputError(
            SERVE_LINE,
            f"{len(tokens):,} words; a serve line of more than "
            f"{MAX_WORDS:,} is refused (vLLM has a few hundred options)",
        )
    if len(tokens) >= 3 and _PYTHON.match(tokens[0]) and tokens[1] == "-c":
        # `-- python -c "from vllm import LLM; LLM(...)"`: the call's keywords, as --serve reads them
        from vllm_doctor.serveline.python_call import (
            is_llm_call,
            llm_call_words,
            script_environment,
        )

        if is_llm_call(tokens[2]):
            words, not_read = llm_call_words(tokens[2])
            line = parse_serve_argv(words, cwd)
            line.not_read.update(not_read)
            line.script_env = script_environment(tokens[2])
            return line
    from vllm_doctor.serveline.container_run import split_container_run

    container = split_container_run(list(tokens))
    if container is not None:  # `docker run ... IMAGE ARGS`: the container's command
        tokens = [*container.env, *container.command]
    wrappers: list[tuple[str, list[str], int]] = []
    env_words, args, entrypoint = _strip_prefix(list(tokens), wrappers)
    if not args:
        raise InputError(SERVE_LINE, "no model and no options after `vllm serve`")
    line = ServeLine(tokens=list(args), model=None, entrypoint=entrypoint)
    line.container = container
    line.env_tokens = list(env_words)
    if wrappers:  # `env -i`, `sudo`: what of the caller's environment and user reaches vLLM
        from vllm_doctor.serveline.launch import read_launch

        line.launch = read_launch(wrappers)
        env_words = env_words[line.launch.dropped_words :]
    for word in env_words:
        k, _, v = word.partition("=")
        line.env[k] = v

    toks = [_Tok(t, i, t) for i, t in enumerate(args)]

    # -- step 2: the model -----------------------------------------------------------
    model_tok: _Tok | None = None
    model_idx = next((i for i, t in enumerate(toks) if re.match(r"^--model(=.+|$)", t.text)), None)
    if model_idx is not None:
        tok = toks[model_idx]
        if tok.text == "--model":
            if model_idx + 1 >= len(toks) or _looks_like_flag(toks[model_idx + 1].text):
                raise InputError("--model", "expected one argument")
            value_tok = toks[model_idx + 1]
            model_tok = _Tok(value_tok.text, tok.idx, f"--model {value_tok.text}")
            line.model_span = (model_idx, model_idx + 2)
            del toks[model_idx : model_idx + 2]
        else:
            model_tok = _Tok(tok.text[len("--model=") :], tok.idx, tok.text)
            line.model_span = (model_idx, model_idx + 1)
            del toks[model_idx]
        if entrypoint == "serve":
            line.warnings.append(
                "--model is deprecated with `vllm serve`: give the model "
                "as the first positional argument"
            )
    elif toks and not _looks_like_flag(toks[0].text):
        model_tok = toks.pop(0)
        line.model_span = (0, 1)
    if model_tok is not None:
        if not model_tok.text.strip():
            raise InputError(SERVE_LINE, "the model is an empty word ('')")
        line.model = model_tok.text
        line.given["model"] = model_tok.raw
        line.origins["model"] = "cli"

    if (
        model_tok is None
        and entrypoint == "serve"
        and any(re.match(r"^--served[-_]model[-_]name(=.+|$)", t.text) for t in toks)
        and not any(re.match(r"^--config(=.+|$)", t.text) for t in toks)
    ):
        line.warnings.append(
            "`model` should be provided as the first positional argument "
            "when using `vllm serve` (vLLM raises ValueError)"
        )

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
        # both are the user's words (a config file's own words come after this step)
        line.spans.setdefault("config", []).extend(
            (t.idx, t.idx + 1) for t in toks[ci : ci + 2] if t.idx is not None
        )
        config_toks = [_Tok(t, None, ev, word=w) for t, ev, w in _yaml_to_args(path, data)]
        toks = config_toks + toks[:ci] + toks[ci + 2 :]
    elif any(t.text.startswith("--config=") for t in toks):
        line.warnings.append(
            "vLLM reads a config file only from `--config FILE`; `--config=FILE` is not loaded"
        )

    # vLLM's dotted-key pass (step 5) takes a word like `-0.5` for option `-0` with key `5`
    # and fails, wherever the word stands (even as the model)
    for tok in ([model_tok] if model_tok is not None else []) + toks:
        if _NEG_NUMBER.match(tok.text) and "." in tok.text:
            raise InputError(
                tok.raw,
                "vLLM reads a negative decimal as a dotted option "
                "and fails; give it as --option=" + tok.text,
            )

    # -- steps 4 and 5 ----------------------------------------------------------------
    toks = _normalise(toks)
    toks, dotted_duplicates, empty_keys = _extract_dotted(toks)
    line.duplicates.extend(sorted(dotted_duplicates))
    for raw in empty_keys:
        line.warnings.append(f"{raw}: empty key in a dotted option")

    # -- step 6: consume -----------------------------------------------------------------
    _consume(line, toks)

    if line.model is None and entrypoint == "serve":
        line.warnings.append("no model given (vLLM would serve its default model)")
    spec_conf = line.options.get("speculative-config")
    if isinstance(spec_conf, dict):
        for flag, key in _SPEC_FLAGS:
            if flag in line.options and key in {k.replace("-", "_") for k in spec_conf}:
                line.warnings.append(
                    f"--{flag} and --speculative-config['{key}'] are "
                    "mutually exclusive (vLLM raises ValueError)"
                )
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
        is_short = (
            not positional_only
            and not is_long
            and arg.startswith("-")
            and len(arg) > 1
            and not _NEG_NUMBER.match(arg)
        )
        if is_long:
            key, eq, explicit = arg[2:].partition("=")
            spec, negated, note = _resolve_long(key)
            flag = "--" + key
        elif is_short:
            key, eq, explicit = arg.partition("=")
            target = _SHORT_ALIASES.get(key)
            if target is None:
                raise InputError(
                    arg,
                    "unknown short option (vLLM's short options are "
                    + ", ".join(sorted(_SHORT_ALIASES))
                    + ")",
                )
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
            if not tok.text.strip():  # vLLM refuses it too: "unrecognized arguments"
                raise InputError(SERVE_LINE, "an empty word ('') where vLLM takes no argument")
            line.unknown_flags.append(tok.raw)
            line.warnings.append(
                f"unrecognized argument {tok.raw!r} (vLLM takes one positional word: the model)"
            )
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
            elif (
                not eq
                and i + 1 < n
                and not _looks_like_flag(toks[i + 1].text)
                and toks[i + 1].dotted_idx is None
            ):
                i += 1
                end_tok = toks[i]
                text = _evidence_text([tok, end_tok])
            else:
                text = tok.raw
            line.unknown_flags.append(text)
            origin = "config" if tok.idx is None else "cli"
            line.option_words.append(OptionWord(_word(tok), None, text, origin))
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
                raise InputError(
                    flag,
                    f"takes no value (got {explicit!r}); "
                    f"use --{name}" + (f" or --no-{name}" if spec.kind == "bool" else ""),
                )
            value: Any = not negated
            end_tok = tok
            if (
                not negated
                and "bool_or_str" in spec.older_kinds
                and i + 1 < n
                and toks[i + 1].text.lower() in ("true", "false")
            ):
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
                while (
                    i + 1 < n
                    and not _looks_like_flag(toks[i + 1].text)
                    and toks[i + 1].dotted_idx is None
                ):
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
            try:
                value = _convert(flag if not dotted_idx else f"--{name}", spec, raw_value)
            except UnreadValue as err:
                # no covered release's reading takes it: kept as written, judged per release
                value = raw_value
                line.unread[name] = err.problem
            else:
                line.unread.pop(name, None)
            if dotted_idx is None:
                line.raw_values[name] = raw_value
            if spec.kind == "append":
                value = [*(line.options.get(name) or []), value]
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
        line.option_words.append(OptionWord(_word(start_tok), name, evidence, origin))
        if (
            name in line.options
            and origin == "cli"
            and name in seen_cli
            and spec.kind != "append"
            and name not in line.duplicates
        ):
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


def _word(tok: _Tok) -> str:
    """The option as the user wrote it, without its value (``--max_model_len``, ``-tp``,
    ``-cc.mode``, ``-O3``; a config file's key as ``--key``)."""
    if tok.word:
        return tok.word
    first = tok.raw.split()[0] if tok.raw.split() else tok.text
    return first.split("=", 1)[0] if first.startswith("-") else tok.text.split("=", 1)[0]


def _add_span(
    line: ServeLine, name: str, used: list[_Tok], dotted_idx: list[int] | None = None
) -> None:
    """Record which of the user's words an option used (one (i, i+1) range per word)."""
    spans = line.spans.setdefault(name, [])
    seen = line.span_index.get(name)  # a set beside the list: a repeated flag stays linear
    if seen is None:
        seen = line.span_index[name] = set(spans)
    indices = dotted_idx or [t.idx for t in used if t.idx is not None]
    for idx in indices:
        if (idx, idx + 1) not in seen:
            seen.add((idx, idx + 1))
            spans.append((idx, idx + 1))
    if not spans:
        del line.spans[name]
