"""A large log's literal scan with the catalogue's automaton kept (text.scan_both): the same
hits, in the same order, as one automaton over the catalogue's anchors and the rule's own
literals (catalogue.match reads the hits in their order)."""

from __future__ import annotations

from pathlib import Path

import pytest

from vllm_doctor.engine.loader import load_rules
from vllm_doctor.engine.logmatch import load_catalogue
from vllm_doctor.engine.logmatch import text as logtext

ROOT = Path(__file__).resolve().parent.parent
RULES = [rule for rule in load_rules() if rule.signatures]
FILLER = "INFO 11-23 05:10:00 [api_server.py:1] vLLM API server version 0.20.0\n"


def _literals(rule) -> frozenset[str]:
    return frozenset().union(*(s.compiled().literals() for s in rule.signatures))


# real logs (bench/explain: each from its upstream issue), each inside a log longer than
# SMALL_LOG, from where the automaton scans
LOGS = sorted((ROOT / "bench" / "explain").rglob("*.log"))
SAMPLE = LOGS[:: max(1, len(LOGS) // 4)]  # four of them, from each folder in turn
PADDING = FILLER * (logtext.SMALL_LOG // len(FILLER) + 1)


def _long(path: Path) -> str:
    return logtext.clean(PADDING + path.read_text(encoding="utf-8", errors="replace"))


def test_there_are_real_logs_to_scan():
    assert len(LOGS) >= 50


def test_the_kept_automaton_gives_one_automatons_hits_in_its_order():
    """Every rule's scan of each log, as `rules test` and match_signatures scan them one
    rule after another: what one automaton over the anchors and that rule's literals gives
    (those of an automaton over every literal at once, in its order: an automaton reports
    each literal's occurrences whatever else it looks for)."""
    anchors = load_catalogue().anchor_set
    everything = logtext._LiteralFinder(anchors.union(*map(_literals, RULES)))
    for path in SAMPLE:
        text = _long(path)
        every_hit = everything.scan(text)
        for rule in RULES:
            own = _literals(rule)
            wanted = anchors | own
            one = [(k, v) for k, v in every_hit.items() if k in wanted]
            assert list(logtext.scan_both(text, anchors, own).items()) == one, (path, rule.code)


def test_one_automaton_per_rule_gives_the_same():
    """The same, against an automaton built for the rule alone (a few rules and logs: each
    build costs ~0.15 s)."""
    anchors = load_catalogue().anchor_set
    for path in SAMPLE[:2]:
        text = _long(path)
        for rule in (RULES[0], RULES[len(RULES) // 2], RULES[-1]):
            own = _literals(rule)
            one = logtext._LiteralFinder(anchors | own).scan(text)
            assert list(logtext.scan_both(text, anchors, own).items()) == list(one.items())


@pytest.mark.parametrize(
    "kept, own",
    [
        ({"abcdef", "zz top"}, {"cdef"}),
        ({"cdef", "zz top"}, {"abcdef"}),
        ({"def"}, {"bcdef", "f y"}),
    ],
)
def test_literals_that_end_together_keep_the_automatons_order(kept, own):
    """Where a literal's first occurrence ends where another's does, the longer comes first."""
    text = PADDING + "xx abcdef yy zz top abcdef\n"
    one = logtext._LiteralFinder(frozenset(kept | own)).scan(text)
    both = logtext.scan_both(text, frozenset(kept), own)
    assert list(both.items()) == list(one.items())
    assert len(both) == len(kept | own)
