"""How many rules two source trees leave undecided on the same inputs, and which moved.

    git archive <base> | tar -x -C /tmp/base     # or a worktree of the tree before a change
    python bench/check/decided.py /tmp/base . [--json]

Inputs: the bundled examples (`check --example NAME`) and the real collect-env reports of
tests/fixtures/reports, each with the Llama 3.1 8B config and safetensors index of the healthy
example and one serve line. Each tree runs with its own package (PYTHONPATH) and only its own
rules; the Hub is not asked (HF_HUB_OFFLINE=1), so the figures are what the inputs give. Rule
codes that only one tree has are left out of the comparison.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ("healthy-h100-llama", "gemma4-mtp-tp2", "diffusion-gemma-tp2")
REPORTS = sorted((ROOT / "tests" / "fixtures" / "reports").iterdir())
MODEL = ROOT / "vllm_doctor" / "examples" / "healthy-h100-llama" / "model"
SERVE = ["--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "32768"]


def scenarios() -> dict[str, list[str]]:
    found = {f"example {name}": ["--example", name] for name in EXAMPLES}
    for report in REPORTS:
        found[f"report {report.name}"] = [
            "--report",
            str(report),
            "--model-config",
            str(MODEL),
            *SERVE,
        ]
    return found


def verdicts(tree: Path, args: list[str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "HF_"))}
    env.update(PYTHONPATH=str(tree), HF_HUB_OFFLINE="1")
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "vllm_doctor",
            "check",
            "--format",
            "json",
            "--fail-on",
            "never",
            "--no-default-rules",
            "--rules-dir",
            str(tree / "rules"),
            *args,
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tree,
        timeout=300,
    )
    if run.returncode != 0:
        sys.exit(f"{tree} {args}: {run.stderr[-600:]}")
    doc = json.loads(run.stdout)
    out = {f["code"]: f"applies ({f['severity']})" for f in doc["findings"]}
    out.update({f["code"]: "undecided" for f in doc["undecided"]})
    out.update(dict.fromkeys(doc["not_applicable"], "does not apply"))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs=2, type=Path)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    before_tree, after_tree = (t.resolve() for t in args.trees)
    rows, total_moved, total_before = [], 0, 0
    for name, argv in scenarios().items():
        before, after = verdicts(before_tree, argv), verdicts(after_tree, argv)
        common = sorted(set(before) & set(after))
        undecided = [c for c in common if before[c] == "undecided"]
        moved = {c: after[c] for c in undecided if after[c] != "undecided"}
        worse = [c for c in common if after[c] == "undecided" and before[c] != "undecided"]
        total_moved += len(moved)
        total_before += len(undecided)
        rows.append(
            {
                "input": name,
                "rules": len(common),
                "undecided_before": len(undecided),
                "undecided_after": sum(after[c] == "undecided" for c in common),
                "decided_now": moved,
                "newly_undecided": worse,
            }
        )
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    for row in rows:
        moved = ", ".join(f"{c} {v}" for c, v in row["decided_now"].items()) or "-"
        print(
            f"{row['input']}: undecided {row['undecided_before']} → {row['undecided_after']} "
            f"of {row['rules']} rules; decided now: {moved}"
            + (
                f"; newly undecided: {', '.join(row['newly_undecided'])}"
                if row["newly_undecided"]
                else ""
            )
        )
    print(f"total: {total_moved} of {total_before} undecided rule verdicts decided now")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
