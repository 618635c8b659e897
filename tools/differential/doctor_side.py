"""The doctor's verdict on each serve line for one release, as ``vllm-doctor check
--vllm-version <release>`` gives it (in a subprocess, so that another checkout of the doctor
can be judged: ``PYTHONPATH=<checkout>``).

    python tools/differential/doctor_side.py --cases cases.jsonl --release 0.27.1 --out d.jsonl

Output lines: ``{"id", "parse": "accept" | "refuse", "why", "errors": [codes]}``. "refuse"
at parse: the line is bad input (exit 2), or a rule that stands for vLLM's argument parser
applies as an error: the option/value rules (``PARSE_RULES``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

# the rules whose failure is vLLM's argparse refusing the line (unrecognized arguments,
# invalid choice, a value its type does not read)
PARSE_RULES = ("ARGS001", "ARGS004", "ARGS100", "ARGS101")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", required=True)
    ap.add_argument("--release", required=True)
    ap.add_argument("--out", required=True)
    opts = ap.parse_args()

    # the rules of the checkout judged (an editable install elsewhere may map the package's
    # shipped rules to another tree)
    import vllm_doctor
    from vllm_doctor.commands.check import judge
    from vllm_doctor.engine.loader import default_rules_dir, load_rules
    from vllm_doctor.errors import InputError
    from vllm_doctor.facts.collect import CollectOptions

    checkout_rules = Path(vllm_doctor.__file__).resolve().parents[1] / "rules"
    rules = load_rules([checkout_rules if checkout_rules.is_dir() else default_rules_dir()])
    with open(opts.cases, encoding="utf-8") as src, open(opts.out, "w", encoding="utf-8") as out:
        for line in src:
            case = json.loads(line)
            options = CollectOptions(
                serve_tokens=["vllm", "serve", *case["argv"]],
                vllm_version=opts.release,
                probe_machine=False,
                offline=True,
                environ={},
            )
            row = {"id": case["id"]}
            try:
                doc = judge(options, rules)
            except InputError as err:
                row.update(parse="refuse", why=f"bad input (exit 2): {err}", errors=[])
            else:
                errors = sorted(
                    {
                        f.rule.code
                        for f in doc.applies
                        if getattr(f, "severity", f.rule.severity) == "error"
                    }
                )
                parse = [code for code in errors if code in PARSE_RULES]
                row.update(parse="refuse" if parse else "accept", errors=errors)
                if parse:
                    why = [
                        f"{f.rule.code}: " + "; ".join(str(e.value) for e in f.evidence)[:300]
                        for f in doc.applies
                        if f.rule.code in parse
                    ]
                    row["why"] = " | ".join(why)
            out.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
