"""Mutation testing of vllm_doctor/engine, facts and report, sampled and time-budgeted.

mutmut (the ``mutation`` extra, configured under ``[tool.mutmut]`` in pyproject.toml) copies the
tree into ``mutants/`` and, for each mutant, runs only the selected tests that execute the
mutated function (it records which ones once, under coverage), with ``-x`` and without the slow
tests. The full set is ~18,500 mutants, too many for one CI run, so this script:

1. generates the mutants (a first run over a tiny module, ``engine/linear.py``);
2. samples each package by a hash of the mutant's name (stable from run to run, independent of
   the other mutants: a mutant is in the sample or not, whatever else changed), at the rate
   given per package;
3. runs the sample package by package under one wall-clock budget (``timeout``, ``nice``);
   mutmut keeps every result in ``mutants/``, so a run cut short resumes where it stopped;
4. prints the kill rate per package and writes the survivors' names (``--survivors FILE``).

    python tools/mutation.py --budget-min 45 --packages engine,facts,report
    python tools/mutation.py --report-only          # the tally of what has run so far
    mutmut show NAME                                 # a survivor's diff

The kill rate counts killed (and timed-out) mutants over those that ran; "no tests" (no
selected test executes the function) counts as surviving.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MUTANTS = REPO / "mutants" / "vllm_doctor"
PACKAGES = ("engine", "facts", "report")
# share of each package's mutants run by default: the engine decides every verdict
DEFAULT_RATES = {"engine": 0.08, "facts": 0.03, "report": 0.05}
BOOTSTRAP = "vllm_doctor.engine.linear*"
# mutmut's exit codes (mutmut/stats.py)
KILLED, SURVIVED = {1, 3}, {0}
NO_TESTS, TIMEOUT = {5, 33}, {24, -24, 36, 152, 255}


def in_sample(name: str, rate: float) -> bool:
    digest = int(hashlib.sha1(name.encode()).hexdigest()[:8], 16)
    return digest % 10_000 < rate * 10_000


def results(package: str) -> dict[str, int | None]:
    """Mutant name → mutmut's exit code (None: not run yet), for one package."""
    out: dict[str, int | None] = {}
    for meta in sorted((MUTANTS / package).glob("*.py.meta")):
        out.update(json.loads(meta.read_text(encoding="utf-8"))["exit_code_by_key"])
    return out


def mutmut(names: list[str], seconds: float, children: int) -> int:
    command = [
        "nice",
        "-n",
        "15",
        "timeout",
        "--signal=INT",
        str(max(1, int(seconds))),
        str(Path(sys.executable).with_name("mutmut")),
        "run",
        "--max-children",
        str(children),
        *names,
    ]
    with open(REPO / "mutants" / "mutation-run.log", "a", encoding="utf-8") as log:
        return subprocess.run(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT).returncode


def tally(package: str, rate: float) -> Counter:
    counts: Counter = Counter()
    for name, code in results(package).items():
        if not in_sample(name, rate):
            continue
        counts["sampled"] += 1
        if code is None:
            counts["not run"] += 1
        elif code in KILLED or code in TIMEOUT:
            counts["killed"] += 1
        elif code in NO_TESTS:
            counts["no tests"] += 1
        elif code in SURVIVED:
            counts["survived"] += 1
        else:
            counts["other"] += 1
    return counts


def table(rates: dict[str, float]) -> str:
    lines = [
        "| package | mutants | sample | ran | killed | survived | no tests | kill rate |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for package, rate in rates.items():
        c = tally(package, rate)
        ran = c["killed"] + c["survived"] + c["no tests"]
        kill = f"{100 * c['killed'] / ran:.1f} %" if ran else "-"
        lines.append(
            f"| {package} | {len(results(package))} | {c['sampled']} ({rate:.0%}) | "
            f"{ran} | {c['killed']} | {c['survived']} | {c['no tests']} | {kill} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--packages", default=",".join(PACKAGES))
    parser.add_argument(
        "--rate",
        action="append",
        default=[],
        metavar="PACKAGE=SHARE",
        help="share of a package's mutants to run (default engine=0.08, facts=0.03, report=0.05)",
    )
    parser.add_argument(
        "--budget-min",
        type=float,
        default=45.0,
        help="wall-clock budget for the whole run, in minutes",
    )
    parser.add_argument("--children", type=int, default=1, help="mutants run at once")
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument("--survivors", type=Path, help="write the surviving mutants' names here")
    args = parser.parse_args(argv)

    rates = {p: DEFAULT_RATES[p] for p in args.packages.split(",")}
    for item in args.rate:
        package, _, share = item.partition("=")
        rates[package] = float(share)

    deadline = time.monotonic() + args.budget_min * 60
    if not args.report_only:
        if not any(MUTANTS.glob("*/*.meta")):
            mutmut([BOOTSTRAP], deadline - time.monotonic(), args.children)
        # one mutmut run for every package: each run first runs the tests of the mutants it
        # is given once without mutation, which costs as much as a few hundred mutants
        todo = [
            n
            for package, rate in rates.items()
            for n, code in results(package).items()
            if code is None and in_sample(n, rate)
        ]
        left = deadline - time.monotonic()
        if todo and left > 0:
            print(f"{len(todo)} mutants to run, {left / 60:.0f} min left", file=sys.stderr)
            mutmut(todo, left, args.children)

    print(table(rates))
    if args.survivors:
        names = [
            n
            for p, rate in rates.items()
            for n, code in results(p).items()
            if in_sample(n, rate) and code is not None and (code in SURVIVED or code in NO_TESTS)
        ]
        args.survivors.write_text("\n".join(sorted(names)) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    os.chdir(REPO)
    sys.exit(main())
