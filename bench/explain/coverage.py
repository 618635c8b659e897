"""How often `explain --log` names the right catalogue entry for a message vLLM raises.

For a sample of each covered release's messages, a log line is made the way vLLM prints it
(placeholders filled with a value, the exception class in front, an engine-core prefix) and
matched against the whole catalogue. "named" means the entry itself was named; "same text"
means another entry with identical literal text was named in its place (the same message
raised as two classes, where the line names neither).

    python bench/explain/coverage.py [--per-release 200] [--write]
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def main() -> int:
    from vllm_doctor.engine.logmatch import WILDCARD, load_catalogue, scan_log
    from vllm_doctor.knowledge import load

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-release", type=int, default=200)
    parser.add_argument("--releases", default="0.8.0,0.11.0,0.17.0,0.24.0,0.33.0")
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    table = load("errors")
    catalogue = load_catalogue()
    rng = random.Random(9)
    lines = [
        f"date: {dt.date.today()}; catalogue: {len(table)} messages",
        "release   sampled  named  same-text  missed",
    ]
    missed_examples = []
    for release in args.releases.split(","):
        keys = sorted(table.at(release))
        sample = rng.sample(keys, min(args.per_release, len(keys)))
        named = same = 0
        for key in sample:
            cls, _, template = key.partition(": ")
            message = template.replace(WILDCARD, " 42 ").replace("  ", " ").strip()
            prefix = "" if cls.startswith("log.") else f"{cls}: "
            log = f"(EngineCore_DP0 pid=7) ERROR 11-23 05:10:11 [core.py:1] {prefix}{message}\n"
            hits = catalogue.match(
                scan_log(log, (), catalogue).text, scan_log(log, (), catalogue).hits
            )
            found = [h.key for h in hits]
            if key in found:
                named += 1
            elif any(k.partition(": ")[2] == template for k in found):
                same += 1
            else:
                missed_examples.append(key)
        lines.append(
            f"{release:9} {len(sample):7}  {named:5}  {same:9}  {len(sample) - named - same:6}"
        )
    lines.append("missed, e.g.: " + "; ".join(k[:90] for k in missed_examples[:5]))
    text = "\n".join(lines)
    print(text)
    if args.write:
        with Path(__file__).with_name("RESULTS.md").open("a", encoding="utf-8") as out:
            out.write(
                f"Command: `python bench/explain/coverage.py --per-release {args.per_release} --write`\n\n"
                f"```\n{text}\n```\n\n"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
