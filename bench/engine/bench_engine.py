"""Benchmark: evaluate 1,000 synthetic rules against one set of facts.

Target (issue): under 50 ms for the evaluation. Loading (YAML parse + validation) is reported
separately, since `check` loads the shipped rule base once per run.

    python bench/engine/bench_engine.py [--rules 1000] [--rounds 30]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from pathlib import Path

from vllm_doctor.engine.evaluate import evaluate_rules
from vllm_doctor.engine.loader import parse_rule
from vllm_doctor.facts.model import Facts

DETAILS = "## What happens\na\n## Why\nb\n## How to confirm\nc\n## Known false positives\nd\n"


def synthetic_rule(i: int) -> dict:
    """A rule shaped like the real ones: a nested when-tree, ranges, a signature."""
    return {
        "code": f"MODEL{i % 1000:03d}",
        "slug": f"synthetic-{i}",
        "status": "stable",
        "severity": ("error", "warning", "info")[i % 3],
        "confidence": "high",
        "summary": f"synthetic rule {i}",
        "phase": "startup",
        "affected": {
            "ranges": [
                {"events": [{"introduced": f"0.{i % 20}.0"}, {"fixed": f"0.{i % 20 + 3}.0"}]}
            ]
        },
        "when": {
            "all": [
                {
                    "fact": "model.architectures",
                    "contains_any": [f"Arch{i % 50}", "LlamaForCausalLM"],
                },
                {
                    "any": [
                        {"fact": "serve.tensor_parallel_size", "gt": i % 4},
                        {"fact": "serve.kv_cache_dtype", "in": ["fp8", "fp8_e4m3"]},
                    ]
                },
                {"not": {"fact": "gpu.min_capability", "ge": 80 + i % 40}},
                {
                    "fact": "model.num_attention_heads",
                    "divisible_by": {"fact": "serve.tensor_parallel_size"},
                },
                {"fact": "torch.version", "version": ">=2.4"},
            ]
        },
        "signatures": [rf"synthetic failure {i}: shape \[\d+, \d+\]"],
        "references": ["https://github.com/vllm-project/vllm/issues/1"],
        "details": DETAILS,
    }


def facts() -> Facts:
    return Facts.from_flat(
        {
            "model.architectures": ["LlamaForCausalLM"],
            "serve.tensor_parallel_size": 2,
            "serve.kv_cache_dtype": "auto",
            "gpu.min_capability": 90,
            "model.num_attention_heads": 32,
            "torch.version": "2.11.0+cu130",
            "vllm.version": "0.12.0",
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rules", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    t0 = time.perf_counter()
    rules = []
    for i in range(args.rules):
        rule, problems = parse_rule(synthetic_rule(i), Path(f"MODEL{i % 1000:03d}.yaml"))
        assert rule is not None, problems
        rules.append(rule)
    load_s = time.perf_counter() - t0
    f = facts()
    timings = []
    for _ in range(args.rounds):
        t = time.perf_counter()
        findings = evaluate_rules(rules, f)
        timings.append(time.perf_counter() - t)
    verdicts = {
        v: sum(1 for x in findings if x.verdict == v) for v in {x.verdict for x in findings}
    }
    print(
        f"machine: {platform.node()} {platform.processor() or platform.machine()}, python {platform.python_version()}"
    )
    print(f"rules: {args.rules}, verdicts: {verdicts}")
    print(f"validate+compile: {load_s * 1000:.1f} ms")
    print(
        f"evaluate: median {statistics.median(timings) * 1000:.2f} ms, "
        f"min {min(timings) * 1000:.2f} ms, max {max(timings) * 1000:.2f} ms over {args.rounds} rounds"
    )


if __name__ == "__main__":
    main()
