"""CPU time of the judging paths the test suite repeats most (bench/suite/RESULTS.md, fourth
pass). Run from the checkout root with the project's Python:

    python bench/suite/judge_cpu.py forked-check   # a `check` as a forked test run makes it
    python bench/suite/judge_cpu.py calibration    # every 8th calibration command, in-process
    python bench/suite/judge_cpu.py redact         # the texts a version-less check redacts
    python bench/suite/judge_cpu.py table-at       # Table.at over every release of 11 tables

Each prints CPU seconds (time.process_time), the best of a few runs where it repeats.
"""

from __future__ import annotations

import contextlib
import gc
import io
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "fixtures")]

SERVE_LINE = [
    "check", "--serve", "vllm serve meta-llama/Llama-3.1-8B-Instruct -tp 2", "--gpu", "H100",
    "--gpus", "2", "--offline",
]  # fmt: skip
TABLES = [
    "companion_uses", "envs", "dependencies", "model_runner", "options", "parsers", "pins",
    "checks", "cli_parser", "deep_gemm", "parallel",
]  # fmt: skip


def _quiet_main(argv: list[str]) -> None:
    from vllm_doctor import cli

    out, err = io.StringIO(), io.StringIO()
    with (
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
        contextlib.suppress(SystemExit),
    ):
        cli.main(argv)


def forked_check() -> None:
    """A version-less check of a serve line after the fork server's imports (as a forked
    test run starts), its first run and two more."""
    import doctor_forks

    for name in doctor_forks.PRELOAD:
        __import__(name)
    gc.collect()
    gc.freeze()
    runs = []
    for _ in range(3):
        start = time.process_time()
        _quiet_main(SERVE_LINE)
        runs.append(round(time.process_time() - start, 3))
    print("first run, then warm:", runs)


def calibration() -> None:
    import test_calibration as calib

    rules = calib._shipped_rules()
    entries = [
        e for e in calib.ENTRIES[::8] if not e.get("exclude") and not e.get("left_out")
    ]  # fmt: skip
    calib._errors(entries[0], rules, None)
    best = float("inf")
    for _ in range(3):
        start = time.process_time()
        for entry in entries:
            calib._errors(entry, rules, None)
        best = min(best, time.process_time() - start)
    print(f"{len(entries)} commands judged, best of 3: {best:.3f} s")


def redact() -> None:
    import doctor_forks

    from vllm_doctor import redact as red

    for name in doctor_forks.PRELOAD:
        __import__(name)
    texts: list[str] = []
    plain = red._redact_text

    def spy(text: str, known: list) -> str:
        texts.append(text)
        return plain(text, known)

    red._redact_text = spy
    _quiet_main(SERVE_LINE)
    red._redact_text = plain
    best = float("inf")
    for _ in range(5):
        start = time.process_time()
        for text in texts:
            plain(text, [])
        best = min(best, time.process_time() - start)
    print(f"{len(texts)} texts redacted, best of 5: {best:.4f} s")


def table_at() -> None:
    from vllm_doctor import knowledge

    best = float("inf")
    for _ in range(5):
        tables = [
            knowledge.Table(k, json.loads((knowledge.DATA_DIR / f"{k}.json").read_text()))
            for k in TABLES
        ]
        start = time.process_time()
        for table in tables:
            for release in table.releases:
                table.at(release)
        best = min(best, time.process_time() - start)
    print(f"Table.at over every release of {len(TABLES)} tables, best of 5: {best:.4f} s")


if __name__ == "__main__":
    {
        "forked-check": forked_check,
        "calibration": calibration,
        "redact": redact,
        "table-at": table_at,
    }[sys.argv[1]]()
