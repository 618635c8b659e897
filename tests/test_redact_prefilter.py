"""redact._redact_text tests a pattern's literal text before it runs the pattern (most texts
hold none): a text the pattern would match is never skipped, the non-ASCII letters that the
expressions' case folding matches (ı, ſ, the Kelvin sign) included."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from vllm_doctor import redact

PIECES = [
    "hf_" + "a" * 34, "sk-" + "b" * 24, "ghp_" + "c" * 36, "github_pat_" + "d" * 22,
    "xoxb-" + "1" * 12, "AKIA" + "A" * 16, "eyJ" + "x" * 10 + "." + "y" * 10 + ".zzzz",
    "Bearer abcdefgh123", "BASIC  QWxhZGRpbjpvcGVu", "bEaReR\tzzzzzzzzzz", "ba\u017fic xxxxxxxxxx",
    "https://user:pw@host/x", "s3://tok@bucket", "HF_TOKEN=abc", "--api-key k", "pr\u0131vate",
    "\u212aey=val", "COO\u212aIE: v", "PAT", "Auth", "path", "://", "@", " ", "\n", "=", ":",
    "\u0131", "\u017f", "\u212a", "\u0130", "é", "ß",
]  # fmt: skip


def _unfiltered(text: str) -> str:
    """_redact_text's passes, each run whatever the text holds."""
    text = redact._URL_CREDENTIALS.sub(lambda m: m.group(1) + redact.REDACTED + "@", text)
    text = redact._BEARER.sub(lambda m: m.group(1) + m.group(2) + redact.REDACTED, text)
    if redact._SECRET_HINT.search(text):
        text = redact._hide_values(redact._FLAG, text)
        text = redact._hide_values(redact._ASSIGNED, text)
    return redact._TOKEN_VALUES.sub(redact.REDACTED, text)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(PIECES) | st.text(max_size=8), max_size=8))
def test_the_literal_tests_skip_no_text_a_pattern_matches(pieces):
    text = "".join(pieces)
    assert redact._redact_text(text, []) == _unfiltered(text)
    for pattern, words in (
        (redact._SECRET_HINT, redact._HINT_WORDS),
        (redact._BEARER, redact._BEARER_WORDS),
    ):
        if pattern.search(text):
            assert redact._may_match(pattern, words, text)
