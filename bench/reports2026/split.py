"""The frozen test / train split of the 2026 corpus.

    python bench/reports2026/split.py --check     # verify split.json against the rule and the reports
    python bench/reports2026/split.py --add       # assign reports added since, by the same rule
    python bench/reports2026/split.py --which URL # is this thread a corpus report, and in which split?

The rule: a report is in the test split when sha256(its source URL) mod 100 < 40, else in train.
split.json lists the ids of each split; split.sha256 holds the sha256 of split.json. Once an id is
in split.json it never moves; --add only appends ids that are not there yet, assigned by the rule,
and refuses to assign to test a report whose source a rule under rules/ already cites (a report a
rule was written from never enters the test split).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
from measure import SPLIT_FILE, TEST_SHARE, cited_by_rules, split_of  # noqa: E402
from schema import REPORTS  # noqa: E402

RULE = f"test when int(sha256(source URL), 16) % 100 < {TEST_SHARE}, else train"


def reports() -> dict[str, str]:
    """id -> source URL of every report."""
    out = {}
    for directory in sorted(p for p in REPORTS.iterdir() if (p / "report.yaml").is_file()):
        doc = yaml.safe_load((directory / "report.yaml").read_text(encoding="utf-8"))
        out[doc["id"]] = doc["source"]
    return out


def write(doc: dict) -> str:
    text = json.dumps(doc, indent=1, sort_keys=True) + "\n"
    SPLIT_FILE.write_text(text, encoding="utf-8")
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    (HERE / "split.sha256").write_text(f"{digest}  split.json\n", encoding="utf-8")
    return digest


def check(doc: dict, sources: dict[str, str]) -> list[str]:
    problems = []
    for name in ("test", "train"):
        for report_id in doc[name]:
            if report_id not in sources:
                problems.append(f"{report_id}: in split.json but no such report")
            elif split_of(sources[report_id]) != name:
                problems.append(
                    f"{report_id}: in {name}, but the rule puts it in {split_of(sources[report_id])}"
                )
    cited = cited_by_rules()
    for report_id in doc["test"]:
        if report_id in sources and sources[report_id].rstrip("/") in cited:
            problems.append(
                f"{report_id}: in test, but a rule under rules/ cites its source (measure.py counts it apart)"
            )
    digest = hashlib.sha256(SPLIT_FILE.read_bytes()).hexdigest()
    recorded = (HERE / "split.sha256").read_text(encoding="utf-8").split()[0]
    if digest != recorded:
        problems.append(f"split.json sha256 {digest} differs from split.sha256 {recorded}")
    return problems


def _thread(url: str) -> str:
    """The thread a URL points into: no fragment, query or trailing slash."""
    return url.split("#", 1)[0].split("?", 1)[0].rstrip("/").lower()


def which(url: str, doc: dict, sources: dict[str, str]) -> str:
    """'test', 'train' or 'not in the corpus' for the thread of `url`; says nothing else about
    the report, so that a rule writer can check a source without reading a test report."""
    test = set(doc["test"])
    splits = {
        "test" if report_id in test else "train"
        for report_id, source in sources.items()
        if _thread(source) == _thread(url)
    }
    if not splits:
        return "not in the corpus"
    return "test" if "test" in splits else "train"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--add", action="store_true")
    parser.add_argument("--which", metavar="URL", action="append", default=[])
    args = parser.parse_args()
    sources = reports()
    if SPLIT_FILE.exists():
        doc = json.loads(SPLIT_FILE.read_text(encoding="utf-8"))
    else:
        doc = {"rule": RULE, "test": [], "train": []}
    if args.which:
        for url in args.which:
            print(f"{url}: {which(url, doc, sources)}")
        return 0
    if args.add or not SPLIT_FILE.exists():
        known = set(doc["test"]) | set(doc["train"])
        cited = cited_by_rules()
        for report_id, url in sources.items():
            if report_id in known:
                continue
            name = split_of(url)
            if name == "test" and url.rstrip("/") in cited:
                print(f"{report_id}: a rule cites {url}; it cannot enter the test split (left out)")
                continue
            doc[name].append(report_id)
        doc["test"].sort()
        doc["train"].sort()
        digest = write(doc)
        print(f"split.json: {len(doc['test'])} test, {len(doc['train'])} train; sha256 {digest}")
    problems = check(doc, sources)
    unassigned = sorted(set(sources) - set(doc["test"]) - set(doc["train"]))
    for problem in problems:
        print(problem)
    if unassigned:
        print(
            f"{len(unassigned)} reports not in split.json yet (run --add): {', '.join(unassigned)}"
        )
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
