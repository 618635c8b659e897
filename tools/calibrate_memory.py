#!/usr/bin/env python3
"""Fit the memory model's calibrated terms on real vLLM start-up logs and write
vllm_doctor/knowledge/data/memory_calibration.json.

The terms vLLM measures instead of computing (vllm_doctor/memory/estimate.py):

* activation peak (GiB) = max(a1 × MLP activations, a2 × sampler logits) — the profile run
  peaks in the forward pass or in the dummy sampler run, whichever is larger — where MLP activations
  = max_num_batched_tokens × (2 × intermediate / TP + 4 × hidden) × dtype bytes (a MoE model's
  intermediate: the routed experts' × the experts per token, plus the shared ones) and sampler
  logits = max_num_seqs × vocabulary × 4 bytes (both in GiB); a2 by the profile's sampler path
  (vllm_doctor/memory/profile.py): the sort's is measured (below), the Triton kernel's fitted, and
  FlashInfer's and the V2 runner's (the logits alone) taken from the release's source;
* non-torch memory (GiB) = n0 + n1 × [TP > 1] (CUDA context, NCCL communicators, custom
  all-reduce buffers);
* CUDA-graph pool (GiB) = g0 + g1 × decoder layers per GPU.

a1 and the sorting a2 are what `vllm-doctor probe memory` measured (knowledge/data/
memory_probe.json: the forward's GiB per 1k tokens of its decoder over that decoder's MLP
activations, and its sort-based sampler's bytes per sequence × vocabulary entry over a float32
logit's 4 bytes) where it measured them; the logs then fit only what no probe measures (the
Triton sampler's coefficient, non-torch memory). Without a probe measurement all are fitted.

Most logs do not print activation and non-torch memory apart (V1 prints the KV memory or the
KV tokens only), so the first two are fitted together on the overhead every log implies:
total × utilization − weights − KV cache (− the CUDA-graph estimate where the release
subtracts it), or activation + non-torch where the log prints both (vLLM's V0 worker). The
CUDA-graph pool is fitted on the "Graph capturing finished … took X GiB" / CUDA-graph
estimate lines. Both are non-negative least squares. The spread — the 90th percentile of the
absolute errors over every observation, at least 0.5 GiB — and SHARE_OF_TERMS give the margin
MEM001–MEM003 decide with.

Observations come from the corpus of real start-up logs, tests/fixtures/memory-logs/*.yaml
(vllm_doctor.memory.corpus, read with vllm_doctor.logreaders.memory_figures); the seed
observations below (each from a public log, URL given) are used only while the corpus has
fewer than MIN_CORPUS usable entries.

    python tools/calibrate_memory.py [--corpus DIR] [--check]

``--check`` exits 1 when the committed data file differs from a fresh fit.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "vllm_doctor" / "knowledge" / "data" / "memory_calibration.json"
PROBE = ROOT / "vllm_doctor" / "knowledge" / "data" / "memory_probe.json"
CORPUS = ROOT / "tests" / "fixtures" / "memory-logs"
MIN_CORPUS = 5
GIB = 1024**3
MIN_SPREAD_GIB = 0.5
# the margin is at least this share of the calibrated terms of an estimate (few logs, older
# releases: a term may be off by half on another GPU or release)
SHARE_OF_TERMS = 0.5


@dataclass(frozen=True)
class Observation:
    source: str
    tp: int
    hidden: int
    intermediate: int
    vocab: int
    layers_gpu: int
    batched: int
    seqs: int
    dtype_bytes: float = 2.0
    # the profile's dummy sampler path (vllm_doctor/memory/profile.py): "sort", "triton",
    # "flashinfer" or "logits-only"
    sampler: str = "sort"
    state_bytes: float = 0.0  # sampler state kept per sequence × vocabulary entry (V2 runner)
    # a GPU sharing the system's memory (vllm_doctor/memory/profile.py): its non-torch memory
    # holds the host's allocations during the profile, not an observation of the terms
    unified_memory: bool = False
    overhead_gib: float | None = None  # activation peak + non-torch memory
    cuda_graph_gib: float | None = None

    def f_mlp(self) -> float:
        return (
            self.batched
            * (2 * self.intermediate / self.tp + 4 * self.hidden)
            * self.dtype_bytes
            / GIB
        )

    def f_logits(self) -> float:
        return self.seqs * self.vocab * 4 / GIB

    def fixed_sampler(self) -> float | None:
        """The sampler's coefficient where the release's source gives it (FlashInfer, the V2
        runner's logits only), else None: fitted."""
        from vllm_doctor.memory.profile import sampler_bytes_per_entry

        per_entry = sampler_bytes_per_entry(self.sampler, self.dtype_bytes)
        return None if per_entry is None else per_entry / 4


_LLAMA3_8B = {"hidden": 4096, "intermediate": 14336, "vocab": 128256}

# Public start-up logs with the printed breakdown (vLLM's V0 worker, which printed every term).
# Llama 3 8B's shape is from its config.json (tests/fixtures/models/Llama-3.1-8B-Instruct).
SEED: tuple[Observation, ...] = (
    Observation(
        "https://github.com/vllm-project/vllm/pull/10511 (Meta-Llama-3-8B, H100, TP 1: "
        "activation 1.26, non-torch 1.79 GiB; max_num_batched_tokens = max_model_len 8192)",
        tp=1,
        layers_gpu=32,
        batched=8192,
        seqs=256,
        overhead_gib=1.26 + 1.79,
        **_LLAMA3_8B,
    ),
    Observation(
        "https://github.com/vllm-project/vllm/pull/10511 (Meta-Llama-3-8B, H100, TP 2: "
        "activation 1.26, non-torch 3.58 GiB)",
        tp=2,
        layers_gpu=32,
        batched=8192,
        seqs=256,
        overhead_gib=1.26 + 3.58,
        **_LLAMA3_8B,
    ),
    Observation(
        "https://github.com/vllm-project/vllm/issues/10517 (Llama-3.1-8B-Instruct, RTX 3090, "
        "--max-model-len 20000: peak torch 17.06 − weights 14.99 GiB, non-torch 0.35)",
        tp=1,
        layers_gpu=32,
        batched=20000,
        seqs=256,
        overhead_gib=2.07 + 0.35,
        **_LLAMA3_8B,
    ),
    Observation(
        "https://github.com/vllm-project/vllm/issues/10517 (same, --max-model-len 29000: "
        "peak torch 17.98 − weights 14.99 GiB)",
        tp=1,
        layers_gpu=32,
        batched=29000,
        seqs=256,
        overhead_gib=2.99 + 0.35,
        **_LLAMA3_8B,
    ),
    Observation(
        "https://github.com/vllm-project/vllm/issues/7553 (Yi-1.5-34B, RTX 4090, TP 4: "
        "2464 MiB more with CUDA graphs than with --enforce-eager)",
        tp=4,
        hidden=7168,
        intermediate=20480,
        vocab=64000,
        layers_gpu=60,
        batched=4096,
        seqs=256,
        cuda_graph_gib=2464 / 1024,
    ),
)


def nnls(rows: list[list[float]], target: list[float], iterations: int = 5000) -> list[float]:
    """Non-negative least squares by projected coordinate descent (small problems only)."""
    n = len(rows[0])
    x = [0.0] * n
    for _ in range(iterations):
        moved = 0.0
        for j in range(n):
            col = [r[j] for r in rows]
            norm = sum(c * c for c in col)
            if norm == 0:
                continue
            residual = [
                t - sum(r[k] * x[k] for k in range(n)) for r, t in zip(rows, target, strict=True)
            ]
            step = sum(c * e for c, e in zip(col, residual, strict=True)) / norm
            new = max(0.0, x[j] + step)
            moved = max(moved, abs(new - x[j]))
            x[j] = new
        if moved < 1e-10:
            break
    return x


def _non_torch(multi_gpu: list[bool], targets: list[float]) -> list[float]:
    """Non-negative least squares of n0 + n1 × [TP > 1] on the targets, in closed form."""
    single = [t for m, t in zip(multi_gpu, targets, strict=True) if not m]
    multi = [t for m, t in zip(multi_gpu, targets, strict=True) if m]
    n0 = sum(single) / len(single) if single else 0.0
    n01 = sum(multi) / len(multi) if multi else n0
    if n0 < 0:  # n0 = 0: n1 alone fits the multi-GPU rows
        return [0.0, max(0.0, n01)]
    if n01 < n0:  # n1 = 0: one intercept for all rows
        return [max(0.0, sum(targets) / len(targets)), 0.0]
    return [n0, n01 - n0]


def probe_coefficients(path: Path = PROBE) -> tuple[float, float, str] | None:
    """(a1, sorting a2, where) from the memory probe's activation measurement on its default
    decoder (the first GPU that has one), or None."""
    from vllm_doctor.probes.memory import DEFAULT_MODEL

    try:
        gpus = json.loads(path.read_text(encoding="utf-8")).get("gpus") or {}
    except (OSError, ValueError):
        return None
    for name, row in gpus.items():
        act = row.get("activation") or {}
        per_1k, per_entry = (
            act.get("forward_gib_per_1k_tokens"),
            act.get("sampler_bytes_per_seq_vocab"),
        )
        if "(default)" not in str(act.get("model")) or not (per_1k and per_entry):
            continue
        shape = Observation(
            "probe",
            tp=1,
            hidden=DEFAULT_MODEL["hidden_size"],
            intermediate=DEFAULT_MODEL["intermediate_size"],
            vocab=DEFAULT_MODEL["vocab_size"],
            layers_gpu=0,
            batched=1000,
            seqs=1,
        )
        return (
            float(per_1k) / shape.f_mlp(),
            float(per_entry) / 4,
            f"measured by the memory probe on {name} ({act.get('model')})",
        )
    return None


def corpus_observations(directory: Path) -> list[Observation]:
    """Observations from the corpus of start-up logs (empty while there is none)."""
    if not directory.is_dir():
        return []
    from vllm_doctor.memory.corpus import observation

    found = []
    for path in sorted(directory.glob("*.yaml")):
        seen = observation(path)
        if seen is not None and (
            seen["overhead_gib"] is not None or seen["cuda_graph_gib"] is not None
        ):
            found.append(Observation(**seen))
    return found


def _p90(errors: list[float]) -> float:
    ordered = sorted(errors)
    return ordered[min(len(ordered) - 1, math.ceil(0.9 * len(ordered)) - 1)] if ordered else 0.0


def fit(
    observations: list[Observation], measured: tuple[float, float, str] | None = None
) -> dict[str, Any]:
    """The calibration; ``measured``: the probe's (a1, sorting a2), probe_coefficients() when
    not given."""
    measured = measured or probe_coefficients()
    # a negative overhead means the usable memory is not what vLLM saw (unified memory:
    # Jetson, GB10; a GPU the usable-memory table does not know): not an observation of it
    # so is a GPU that shares the system's memory: its profile counts host allocations
    rows = [
        o
        for o in observations
        if o.overhead_gib is not None and o.overhead_gib >= 0 and not o.unified_memory
    ]
    left_out = sorted(
        o.source
        for o in observations
        if o.overhead_gib is not None and (o.overhead_gib < 0 or o.unified_memory)
    )
    graphs = [o for o in observations if o.cuda_graph_gib is not None]

    # vLLM's profile run peaks in the forward pass or in the sampler, whichever is larger:
    # activation = max(a1 × MLP, a2 × logits), a2 by the release's top-k/top-p (sorting:
    # a_sort, Triton: a_triton); the a's by grid search, the non-torch terms in closed form
    def activation(o: Observation, a1: float, a_sort: float, a_triton: float) -> float:
        fixed = o.fixed_sampler()
        a2 = fixed if fixed is not None else a_sort if o.sampler == "sort" else a_triton
        return max(a1 * o.f_mlp(), a2 * o.f_logits()) + o.f_logits() * o.state_bytes / 4

    def rest(a: tuple[float, float, float]) -> tuple[float, list[float]]:
        targets = [float(o.overhead_gib or 0) - activation(o, *a) for o in rows]
        n = _non_torch([o.tp > 1 for o in rows], targets)
        sse = sum(
            (n[0] + (n[1] if o.tp > 1 else 0) - t) ** 2 for o, t in zip(rows, targets, strict=True)
        )
        return sse, n

    grid_mlp = [i * 0.1 for i in range(61)]
    grid_logits = [j * 0.125 for j in range(81)]
    best: tuple[float, tuple[float, float, float], list[float]] = (
        math.inf,
        (1.0, 0.0, 0.0),
        [0.5, 0.0],
    )
    if rows:
        # alternate: (a1, a_sort) over their grid with a_triton fixed, then a_triton alone
        for _ in range(3):
            a_t = best[1][2]
            for a1 in [measured[0]] if measured else grid_mlp:
                for a_s in [measured[1]] if measured else grid_logits:
                    sse, n = rest((a1, a_s, a_t))
                    if sse < best[0] - 1e-12:
                        best = (sse, (a1, a_s, a_t), n)
            a1, a_s = best[1][0], best[1][1]
            for a_t in grid_logits:
                sse, n = rest((a1, a_s, a_t))
                if sse < best[0] - 1e-12:
                    best = (sse, (a1, a_s, a_t), n)
    _, (a1, a2, a3), n = best
    c = [n[0], n[1], a1, a2]
    g = (
        nnls(
            [[1.0, float(o.layers_gpu)] for o in graphs],
            [float(o.cuda_graph_gib or 0) for o in graphs],
        )
        if graphs
        else [0.0, 0.0]
    )
    overhead_errors = [
        abs(
            c[0]
            + (c[1] if o.tp > 1 else 0)
            + activation(o, a1, a2, a3)
            - float(o.overhead_gib or 0)
        )
        for o in rows
    ]
    graph_errors = [abs(g[0] + g[1] * o.layers_gpu - float(o.cuda_graph_gib or 0)) for o in graphs]
    errors = sorted(overhead_errors + graph_errors)
    return {
        "kind": "memory_calibration",
        "format": 3,
        "meaning": "coefficients of the memory model's measured terms (vllm_doctor/memory/"
        "estimate.py), fitted by tools/calibrate_memory.py; the margin MEM001-MEM003 "
        "decide with is the larger of spread.overhead_gib and spread.share_of_terms "
        "× the calibrated terms of an estimate",
        "fitted_on": len(observations),
        "sources": sorted({o.source for o in observations}),
        "left_out": left_out,
        "activation": {
            "combine": "max",
            "intercept_gib": 0.0,
            "per_mlp_gib": round(c[2], 4),
            "per_logits_gib": round(c[3], 4),
            "per_logits_triton_gib": round(a3, 4),
            "measured": measured[2] if measured else None,
            "observations": len(rows),
            "observations_by_sampler": {
                path: sum(o.sampler == path for o in rows)
                for path in sorted({o.sampler for o in rows})
            },
        },
        "non_torch": {
            "intercept_gib": round(c[0], 4),
            "tp_gib": round(c[1], 4),
            "observations": len(rows),
        },
        "cuda_graph": {
            "intercept_gib": round(g[0], 4),
            "per_layer_gib": round(g[1], 5),
            "observations": len(graphs),
        },
        # the features the fit saw: an estimate beyond them extrapolates (estimate.py widens
        # its margin there)
        "range": {
            "mlp_gib_max": round(max((o.f_mlp() for o in rows), default=0.0), 4),
            "logits_gib_max": round(max((o.f_logits() for o in rows), default=0.0), 4),
        },
        "spread": {
            "overhead_gib": round(max(MIN_SPREAD_GIB, _p90(errors)), 3),
            "share_of_terms": SHARE_OF_TERMS,
            "overhead_p90_gib": round(_p90(overhead_errors), 3),
            "cuda_graph_p90_gib": round(_p90(graph_errors), 3),
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument(
        "--check",
        action="store_true",
        help="exit 1 when the committed data differs from a fresh fit",
    )
    args = parser.parse_args(argv)
    observations = corpus_observations(args.corpus)
    if len(observations) < MIN_CORPUS:
        observations = list(SEED) + observations
    data = fit(observations)
    text = json.dumps(data, indent=1, ensure_ascii=False) + "\n"
    if args.check:
        current = OUT.read_text(encoding="utf-8") if OUT.is_file() else ""
        if current != text:
            print(
                f"{OUT.relative_to(ROOT)} is stale: run tools/calibrate_memory.py", file=sys.stderr
            )
            return 1
        return 0
    OUT.write_text(text, encoding="utf-8")
    print(
        f"fitted on {data['fitted_on']} observations; margin {data['spread']['overhead_gib']} "
        f"GiB → {OUT.relative_to(ROOT)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
