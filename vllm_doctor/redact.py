"""Secrets never reach an output: one place that decides what is a secret and hides it.

Redaction follows structure, not a list of known names:

- a name that looks like a secret (``is_secret_name``: token, key, secret, password, …)
  hides its value wherever a name meets a value: environment variables, ``KEY=VALUE``
  words anywhere in a command (``export``, ``sudo``, ``env`` prefixes), ``key: value`` and
  ``"key": "value"`` in a log line or a JSON text, mapping keys in parsed values;
- a serve option is resolved the way vLLM resolves it (``--hf-tok`` is ``--hf-token``)
  before its name is judged, and every value it takes is hidden (``--api-key k1 k2``), as
  are the values of unknown flags with secret-looking names (``--openai-secret-token V``);
- credentials inside URLs (``https://user:PASS@host``) are hidden in any text;
- values that look like tokens whatever their name (``hf_…``, ``sk-…``, ``ghp_…``, JWTs,
  ``Bearer …``) are hidden in any text.

Suggested commands must stay runnable, so ``shell_words`` writes a secret option's value as
the environment variable the user would keep it in (``--hf-token "$HF_TOKEN"``) instead of
a literal ``<redacted>``. Every pattern here runs in linear time.
"""

from __future__ import annotations

import functools
import re
import shlex
from collections.abc import Iterable
from typing import Any

REDACTED = "<redacted>"

# words of a name (split at - _ . and camelCase) that make it a secret's name; whole words,
# so --max-num-batched-tokens, --tokenizer, --ssl-keyfile and --api-server-count are not
_SECRET_WORDS = frozenset(
    {
        "token",
        "key",
        "secret",
        "secrets",
        "password",
        "passwd",
        "pwd",
        "passphrase",
        "credential",
        "credentials",
        "cookie",
        "auth",
        "authorization",
        "private",
        "apikey",
        "authtoken",
        "accesstoken",
        "accesskey",
        "secretkey",
        "privatekey",
        "hftoken",
    }
)
_NAME_WORDS = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
# short words that are secrets' names only on their own (DB_PASS, SMTP_PW, GITHUB_PAT)
_SECRET_SHORT = frozenset({"pass", "pw", "pat"})
# endings that make a run-together word a secret's name (PGPASSWORD, MYSQLPASSWD, NPMTOKEN)
_SECRET_ENDINGS = ("password", "passwd", "passphrase", "secret", "token", "apikey")


# a text without any of these has no secret name in it: the name passes are skipped
_SECRET_HINT = re.compile(r"(?i)token|key|secret|pass|pwd|pw|pat|credential|cookie|auth|private")


@functools.lru_cache(maxsize=4096)
def is_secret_name(name: str) -> bool:
    """Whether a variable, option or field with this name holds a secret (``HF_TOKEN``,
    ``--api-key``, ``openai_secret_token``, ``apiKey``, ``MY_PASSWORD_FILE``)."""
    words = [word.lower() for word in _NAME_WORDS.findall(name)]
    return any(
        w in _SECRET_WORDS or w in _SECRET_SHORT or w.endswith(_SECRET_ENDINGS) for w in words
    )


# scheme://userinfo@ — the userinfo (user:password, or a bare token) is a credential
_URL_CREDENTIALS = re.compile(
    r"(?i)\b([a-z][a-z0-9+.-]{0,30}://)([^\s/@:'\"`<>]{1,256}"
    r"(?::[^\s/@'\"`<>]{0,256})?)@"
)
# values that are tokens whatever they are called
_TOKEN_VALUES = re.compile(
    r"\b(?:hf_[A-Za-z0-9]{30,}|sk-[A-Za-z0-9_-]{20,}|gh[pousr]_[A-Za-z0-9]{30,}|"
    r"github_pat_[A-Za-z0-9_]{20,}|xox[abprs]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|"
    r"eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{4,})"
)
_BEARER = re.compile(r"(?i)\b(bearer|basic)(\s+)([A-Za-z0-9._~+/=-]{8,})")
_NAME = r"[A-Za-z_][A-Za-z0-9_.-]{0,80}"
_VALUE = re.compile(r"\"[^\"\n]{0,4096}\"|'[^'\n]{0,4096}'|[^\s\"',;&|]{1,4096}")
# NAME=value, NAME: value, "name": "value", --name=value; and --name value. Only the name and
# separator are matched, so a non-secret name never swallows the assignment after it
_ASSIGNED = re.compile(r"(?<![A-Za-z0-9_.-])(?:--?)?(" + _NAME + r")\"?\s*[=:]\s*\"?")
_FLAG = re.compile(r"(?<![A-Za-z0-9_.-])--?(" + _NAME + r")\s+(?!-)")


_NOT_FIELDS = ("Error", "Exception", "Warning")


def _hide_values(pattern: re.Pattern[str], text: str) -> str:
    out: list[str] = []
    pos = 0
    for key in pattern.finditer(text):
        if key.start() < pos or not is_secret_name(key.group(1)):
            continue
        if key.group(1).endswith(_NOT_FIELDS):  # "KeyError: 'x'" names an exception
            continue
        value = _VALUE.match(text, key.end())
        if value is None:
            continue
        quoted = value.group()[:1] in ("'", '"') and len(value.group()) >= 2
        out.append(text[pos : key.end()])
        out.append(value.group()[0] + REDACTED + value.group()[-1] if quoted else REDACTED)
        pos = value.end()
    out.append(text[pos:])
    return "".join(out)


# values already known to be secrets (a manifest's PGPASSWORD, an --api-key's value): hidden
# wherever else they turn up (expanded into another option, quoted in a log line)
_KNOWN: set[str] = set()
_KNOWN_PATTERN: list[re.Pattern[str]] = []  # one alternation of them all, longest first
MIN_KNOWN = 6  # shorter values are hidden where they stand only (hiding "true" everywhere
# would hide more than secrets)
MAX_KNOWN = 256


def remember_secret(value: object) -> None:
    """Hide ``value`` in every text from now on (this run): it was given as a secret."""
    if not isinstance(value, str) or len(value) < MIN_KNOWN or REDACTED in value:
        return
    if value in _KNOWN or len(_KNOWN) >= MAX_KNOWN:
        return
    _KNOWN.add(value)
    _REDACTED.clear()  # what was redacted before may hold this value
    alternation = "|".join(re.escape(v) for v in sorted(_KNOWN, key=len, reverse=True))
    _KNOWN_PATTERN[:] = [re.compile(alternation)]


def forget_secrets() -> None:
    """A new run: the values remembered by an earlier run in this process are forgotten."""
    _KNOWN.clear()
    _KNOWN_PATTERN.clear()
    _REDACTED.clear()


# redact_text's answers by text, for the texts a run redacts again and again (a missing fact's
# reason, once per release judged): the answer depends on the text and the values remembered
# (_KNOWN) only, so it is emptied whenever those change; long texts (log lines) are not kept
_REDACTED: dict[str, str] = {}
_REDACTED_MAX = 16384
_REDACTED_LONGEST = 2048


def redact_text(text: str) -> str:
    """A line of free text (a log line, an error message, a value) with secrets hidden."""
    if not text:
        return text
    done = _REDACTED.get(text)
    if done is not None:
        return done
    known = _KNOWN_PATTERN[:]
    hidden = _redact_text(text, known)
    if len(text) <= _REDACTED_LONGEST and known == _KNOWN_PATTERN:  # none remembered meanwhile
        if len(_REDACTED) >= _REDACTED_MAX:
            _REDACTED.clear()
        _REDACTED[text] = hidden
    return hidden


# the literal text each pattern needs to match at all, looked for first: most texts (a
# missing fact's reason, a detail) hold none, and a case-sensitive search for a few words
# costs a fraction of a case-insensitive pattern's scan
_TOKEN_STARTS = re.compile(r"hf_|sk-|gh|github_pat_|xox|AKIA|eyJ")  # _TOKEN_VALUES'
_HINT_WORDS = re.compile(_SECRET_HINT.pattern.removeprefix("(?i)"))  # on lower-case text
_BEARER_WORDS = re.compile(r"bearer|basic")  # on lower-case text


def _may_match(pattern: re.Pattern[str], words: re.Pattern[str], text: str) -> bool:
    """Whether the case-insensitive ``pattern`` can match: an ASCII text is searched, lower
    case, for ``words`` (the literal words it needs); any other for the pattern itself (its
    case folding matches letters that str.lower does not fold, the dotless ı among them)."""
    if text.isascii():
        return words.search(text.lower()) is not None
    return pattern.search(text) is not None


def _redact_text(text: str, known_patterns: list[re.Pattern[str]]) -> str:
    if "://" in text and "@" in text:
        text = _URL_CREDENTIALS.sub(lambda m: m.group(1) + REDACTED + "@", text)
    if _may_match(_BEARER, _BEARER_WORDS, text):
        text = _BEARER.sub(lambda m: m.group(1) + m.group(2) + REDACTED, text)
    if _may_match(_SECRET_HINT, _HINT_WORDS, text):
        text = _hide_values(_FLAG, text)
        text = _hide_values(_ASSIGNED, text)
    if _TOKEN_STARTS.search(text):
        text = _TOKEN_VALUES.sub(REDACTED, text)
    for known in known_patterns:  # last: what the structure did not already hide
        text = known.sub(REDACTED, text)
    return text


def redact_value(value: Any, name: str = "") -> Any:
    """A parsed value (a fact, a JSON option) with secrets hidden, its shape kept."""
    if name and is_secret_name(name) and value not in (None, True, False, "", [], {}):
        remember_secret(value)
        return REDACTED
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {k: redact_value(v, str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_value(v) for v in value]
    return value


def redact_strings(value: Any) -> Any:
    """Every string inside a value through ``redact_text``; names are not judged here (a
    model's ``pad_token_id`` is no secret), so the value's shape and numbers stay as they are."""
    if isinstance(value, str):
        return redact_text(value)
    # the same object when nothing in it changed: a collector may still fill in a value it
    # has stored (a device's capability), as before
    if isinstance(value, dict):
        cleaned = {k: redact_strings(v) for k, v in value.items()}
        return value if all(cleaned[k] is v for k, v in value.items()) else cleaned
    if isinstance(value, (list, tuple)):
        items = [redact_strings(v) for v in value]
        return (
            value if all(a is b for a, b in zip(items, value, strict=True)) else type(value)(items)
        )
    return value


# --- command words --------------------------------------------------------------------------

_ENV_WORD = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.DOTALL)
# the variables vLLM and the hub read the same secret from
_OPTION_VARIABLE = {"hf-token": "HF_TOKEN", "api-key": "VLLM_API_KEY"}


_PLAIN_KINDS = ("bool", "flag", "int", "hrint", "float")


def is_secret_option(name: str) -> bool:
    """Whether vLLM's option ``name`` (``hf-token``) takes a secret: a number or a switch never
    does, whatever it is called."""
    return _secret_option(f"--{name}") is not None


def _plain_option(word: str) -> bool:
    """Whether the flag ``word`` (``--x`` or ``--x=v``) is a known option taking a number or a
    switch: its name says nothing about its value."""
    if not word.startswith("--"):
        return False
    from vllm_doctor.serveline.options import resolve_flag

    spec = resolve_flag(word.split("=", 1)[0])
    return spec is not None and spec.kind in _PLAIN_KINDS


def _secret_option(word: str) -> tuple[str, int] | None:
    """(option name, how many values it takes: 1, or -1 for every following value) when the
    flag ``word`` (``--x`` or ``--x=v``) is a secret-taking option; else None."""
    if not word.startswith("-") or word in ("-", "--"):
        return None
    flag = word.split("=", 1)[0]
    from vllm_doctor.serveline.options import resolve_flag

    if "." in flag and is_secret_name(flag.split(".", 1)[1]):
        return flag.lstrip("-"), 1  # --hf-overrides.api_key X
    spec = resolve_flag(flag)
    if spec is not None:
        # a number or a switch is no secret, whatever its name (--long-prefill-token-threshold)
        if not is_secret_name(spec.name) or spec.kind in _PLAIN_KINDS:
            return None
        return spec.name, (-1 if spec.kind in ("list", "append") else 1)
    name = flag.lstrip("-")
    if is_secret_name(name):
        return name, -1  # unknown: hide every value up to the next flag
    return None


def _variable_for(option: str) -> str:
    return _OPTION_VARIABLE.get(option) or re.sub(r"[^A-Za-z0-9]", "_", option).upper()


_PLACEHOLDER = "\x00"  # marks a placeholder word for shell_words


def redact_words(words: Iterable[str], placeholders: bool = False) -> list[str]:
    """Command words with every secret hidden.

    Values of secret-taking options (all of them for list options and unknown secret flags),
    ``KEY=VALUE`` words with a secret name, URL credentials and token-looking values become
    ``<redacted>``; with ``placeholders`` the option values and ``KEY=VALUE`` words become
    references to a variable (``--hf-token $HF_TOKEN``, ``HF_TOKEN=$HF_TOKEN``) that
    ``shell_words`` prints unquoted.
    """

    def hidden(option: str) -> str:
        return f"{_PLACEHOLDER}${_variable_for(option)}" if placeholders else REDACTED

    out: list[str] = []
    option, left = "", 0  # values still to hide; -1: every value up to the next flag
    shown_one = False  # a placeholder stands for all the values of one option
    for word in words:
        if left and not (word.startswith("-") and word != "-" and not _number(word)):
            remember_secret(word)
            if not (placeholders and shown_one):
                out.append(hidden(option))
            shown_one = True
            left = left - 1 if left > 0 else left
            continue
        shown_one = False
        left = 0
        secret = _secret_option(word)
        if secret is not None:
            option, count = secret
            if "=" in word:
                remember_secret(word.split("=", 1)[1])
                out.append(word.split("=", 1)[0] + "=" + hidden(option).lstrip(_PLACEHOLDER))
                if placeholders:
                    out[-1] = _PLACEHOLDER + out[-1]
                left = -1 if count == -1 else 0
                shown_one = True
            else:
                out.append(word)
                left = count
            continue
        env = _ENV_WORD.match(word)
        if env and not word.startswith("-") and is_secret_name(env.group(1)):
            name = env.group(1)
            remember_secret(env.group(2))
            out.append(f"{_PLACEHOLDER}{name}=${name}" if placeholders else f"{name}={REDACTED}")
            continue
        if _plain_option(word):  # --long-prefill-token-threshold=5: only the value is read
            flag, sep, value = word.partition("=")
            out.append(flag + sep + redact_text(value))
            continue
        out.append(redact_text(word))
    return out


def _number(word: str) -> bool:
    return bool(re.fullmatch(r"-\d+(\.\d+)?", word))


def shell_words(words: Iterable[str]) -> str:
    """Words joined into a command a shell runs as printed, secrets as ``"$VARIABLE"``."""
    parts = []
    for word in redact_words(words, placeholders=True):
        if word.startswith(_PLACEHOLDER):
            head, _, variable = word[1:].rpartition("$")
            parts.append(f'{head}"${variable}"')
        elif _ENV_WORD.match(word):  # NAME='a value': what a person writes
            name, _, value = word.partition("=")
            parts.append(f"{name}={shlex.quote(value)}")
        else:
            parts.append(shlex.quote(word))
    return " ".join(parts)
