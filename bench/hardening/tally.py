"""Run the bad inputs of tests/fixtures/bad_inputs.py against the CLI and tally the outcomes.

    python bench/hardening/tally.py [--repo PATH | --python PYTHON] [--jobs N] [--only SUBSTRING]
                                    [--third] [-v]

``--repo`` runs the checkout at PATH (``python -m vllm_doctor`` with PYTHONPATH=PATH), so the
same list can be run on main and on a branch. ``--python`` runs what that interpreter has
installed instead (a checkout installed in its own venv: an editable install of another
checkout would otherwise lend it its rules/ directory). Each case runs in a subprocess limited to
5 s of CPU time, 1 GiB of address space and 30 s of wall time (a hang), as `python -P -m
vllm_doctor` in a working directory planted with look-alike standard modules, its temporary
files under the case's own folder. Verdicts: clean-error (exit 2/3 as expected, one line on
stderr), right-answer (exit 0/1 as expected, required output present, no canary leaked),
traceback, wrong-exit (any other exit, several stderr lines), timeout, leak (a planted secret
in an output), outside-write (a file written outside the temporary tree), cwd-code (a planted
module in the working directory was imported), fail-open (the gate started vLLM where it must
stop: a stand-in `vllm` on PATH records its start).
"""

from __future__ import annotations

import argparse
import collections
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "tests" / "fixtures"))

import bad_inputs  # noqa: E402

VERDICTS = (
    "clean-error",
    "right-answer",
    "traceback",
    "wrong-exit",
    "timeout",
    "leak",
    "outside-write",
    "cwd-code",
    "fail-open",
)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repo", type=Path, default=HERE.parents[1])
    parser.add_argument("--python", default=None)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--only", default="")
    parser.add_argument("--third", action="store_true", help="only the third pass (issue 37)")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    cases = [c for c in bad_inputs.cases() if args.only in c.name]
    if args.third:
        from bad_inputs_third import third_pass

        third: list = []
        third_pass(third.append)
        names = {c.name for c in third}
        cases = [c for c in cases if c.name in names]
    with ThreadPoolExecutor(args.jobs) as pool:
        if args.python:
            outcomes = list(
                pool.map(lambda c: bad_inputs.run_case(c, None, python=args.python), cases)
            )
        else:
            outcomes = list(pool.map(lambda c: bad_inputs.run_case(c, args.repo.resolve()), cases))
    tally = collections.Counter(o.verdict for o in outcomes)
    by_kind: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for o in outcomes:
        by_kind[o.case.kind][o.verdict] += 1
        if args.verbose or o.verdict not in ("clean-error", "right-answer"):
            print(
                f"{o.verdict:12} exit={o.exit_code!s:4} {o.seconds:5.2f}s  {o.case.name}: "
                f"{bad_inputs.short(o.detail)}"
            )
    print(f"\n{len(outcomes)} cases against {args.python or args.repo}:")
    print("  " + ", ".join(f"{v} {tally[v]}" for v in VERDICTS))
    for kind in sorted(by_kind):
        print(
            f"  {kind:8} "
            + ", ".join(f"{v} {by_kind[kind][v]}" for v in VERDICTS if by_kind[kind][v])
        )
    return 0 if tally["clean-error"] + tally["right-answer"] == len(outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
