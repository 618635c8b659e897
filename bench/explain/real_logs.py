"""How often `explain --log` names something on real crash logs from vLLM bug reports.

    python bench/explain/real_logs.py DIR [--write [NAME]]

DIR holds one ``<issue>.log`` per report (the error lines as the reporter pasted them) and
``index.json`` (a list of {"file", "url", "kind", "right"}; ``right``: the curated rules whose
cause the thread bears out, checked by tests/test_real_logs.py). The first two samples were
measured on error lines that were not kept (``real-logs.md``, ``real-logs-2.md`` list their
issues); ``logs-1/`` and ``logs-2/`` hold those lines collected again from the same threads, and
``--then real-logs.md`` puts what each log was named by then beside what it is named by now.
The third (``logs-3/``, ``real-logs-3.md``) kept its error lines from the start. Each log is run through ``vllm-doctor explain --log FILE
--format json`` and counted by what it named first: a curated rule (a cause and a fix), the
options table (argparse's "unrecognized arguments"), a vLLM message from the error catalogue
(where vLLM raises it, not a cause), or nothing.
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def classify(log: Path) -> tuple[str, list[str]]:
    run = subprocess.run(
        [sys.executable, "-m", "vllm_doctor", "explain", "--log", str(log), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if run.returncode not in (0, 1):
        return f"exit {run.returncode}", [run.stderr.strip()[:200]]
    doc = json.loads(run.stdout)
    if doc["known_failures"]:
        return "curated rule", [f["code"] for f in doc["known_failures"]]
    if doc.get("refused_options"):
        return "options table", doc["refused_options"][:2]
    if doc["vllm_messages"]:
        return "catalogue message", [doc["vllm_messages"][0]["template"][:100]]
    return "nothing", []


def named_then(table: str) -> dict[str, tuple[str, str]]:
    """url -> (named by, what) from an earlier ``--write`` table."""
    rows = {}
    for line in (HERE / table).read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| http") and len(cells) >= 4:
            rows[cells[0]] = (cells[2], cells[3])
    return rows


def _provenance(directory: Path, name: str, then: str | None = None) -> str:
    kept = directory.resolve().is_relative_to(HERE)
    where = f"bench/explain/{directory.resolve().relative_to(HERE)}" if kept else "DIR"
    line = f"{dt.date.today()}: `python bench/explain/real_logs.py {where} --write {name}" + (
        f" --then {then}`" if then else "`"
    )
    if kept:
        return line + f", on the error lines kept in {where}/ (sources in its index.json).\n\n"
    return line + (
        ", where DIR holds the\nerror lines pasted in each issue below (not kept "
        "here: third-party text).\n\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("directory", type=Path)
    parser.add_argument(
        "--write",
        metavar="NAME",
        nargs="?",
        const="real-logs.md",
        default=None,
        help="write the table to bench/explain/NAME (default real-logs.md)",
    )
    parser.add_argument(
        "--then",
        metavar="TABLE",
        help="an earlier table of the same logs (bench/explain/TABLE): a column "
        "with what each log was named by then, and the tally then",
    )
    args = parser.parse_args()
    index = json.loads((args.directory / "index.json").read_text(encoding="utf-8"))
    rows, tally = [], collections.Counter()
    for entry in index:
        outcome, named = classify(args.directory / entry["file"])
        tally[outcome] += 1
        rows.append((entry, outcome, named))
    lines = [
        f"{len(index)} logs: " + ", ".join(f"{name} {count}" for name, count in tally.most_common())
    ]
    then = named_then(args.then) if args.then else {}
    if then:
        before = collections.Counter(
            then.get(e["url"], ("not in " + args.then, ""))[0] for e in index
        )
        lines.append(
            f"the same logs in {args.then}: "
            + ", ".join(f"{name} {count}" for name, count in before.most_common())
        )
    print("\n".join(lines))
    for entry, outcome, named in rows:
        was = f"  (then {' / '.join(then.get(entry['url'], ('?', '')))})" if then else ""
        print(f"  {entry['url']}  [{entry['kind']}]  {outcome}: {'; '.join(named)}{was}")
    if args.write:
        head = "| issue | kind | named by | what |" + (" then named by | then |" if then else "")
        rule = "| --- | --- | --- | --- |" + (" --- | --- |" if then else "")
        table = "\n".join(
            f"| {e['url']} | {e['kind']} | {o} | {'; '.join(n).replace('|', '/')} |"
            + (" {} | {} |".format(*then.get(e["url"], ("?", ""))) if then else "")
            for e, o, n in rows
        )
        (HERE / args.write).write_text(
            "# explain --log on real crash logs\n\n"
            + _provenance(args.directory, args.write, args.then)
            + "".join(f"**{line}**\n\n" for line in lines)
            + f"{head}\n{rule}\n"
            + table
            + "\n",
            encoding="utf-8",
        )


if __name__ == "__main__":
    main()
