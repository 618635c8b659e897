"""Count the error findings `check` reports over the model-config corpus, proven or not.

    python tools/model_corpus_report.py

Runs every corpus config (tests/fixtures/model-configs) with the serve lines of
tests/test_model_corpus.py and healthy stack facts, and prints: configs, architectures, error
findings, how many of them the config's own values (as transformers reads them) prove, and the
unproven ones by rule. Used to measure the reader and the rule base before and after a change.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import test_model_corpus as corpus_test  # noqa: E402


def main() -> int:
    entries = corpus_test.corpus()
    total = proven = 0
    unproven: Counter[str] = Counter()
    by_rule: Counter[str] = Counter()
    examples: dict[str, str] = {}
    for entry in entries:
        truth = entry["transformers_reads"]
        for code, tp, pp, _dtype, _finding in corpus_test.error_findings(entry):
            total += 1
            by_rule[code] += 1
            proof = corpus_test.proven(code, truth, tp, pp)
            if proof is False:
                unproven[code] += 1
                examples.setdefault(code, f"{entry['name']} tp{tp} pp{pp}")
            else:
                proven += 1
    archs = {e["architecture"] for e in entries}
    print(
        f"configs {len(entries)}, architectures {len(archs)}, serve lines "
        f"{len(corpus_test.SERVE_LINES)}"
    )
    print(
        f"error findings {total}: proven or non-arithmetic {proven}, "
        f"unproven {sum(unproven.values())}"
    )
    print("  by rule: " + ", ".join(f"{c} {n}" for c, n in sorted(by_rule.items())))
    for code, count in unproven.most_common():
        print(f"  {code}: {count} unproven (e.g. {examples[code]})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
