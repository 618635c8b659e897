"""The memory model against what vLLM printed: every entry of the corpus of real start-up logs
(tests/fixtures/memory-logs/*.yaml, read with vllm_doctor.logreaders.memory_figures).

Prints the distribution of relative errors of the weights per GPU ("Model loading took") and
the KV-cache tokens ("GPU KV cache size"); once the corpus holds MIN_ENTRIES entries it asserts
the bar: weights within 5 % and KV tokens within 10 % for at least 80 % of the entries.
"""

from __future__ import annotations

from pathlib import Path

import pytest

CORPUS = Path(__file__).parent / "fixtures" / "memory-logs"
MIN_ENTRIES = 40
BAR_SHARE = 0.8


def _entries() -> list[Path]:
    return sorted(CORPUS.glob("*.yaml")) if CORPUS.is_dir() else []


def _quantiles(errors: list[float]) -> str:
    if not errors:
        return "none"
    ordered = sorted(errors)
    pick = {q: ordered[min(len(ordered) - 1, int(q * len(ordered)))] for q in (0.5, 0.8, 0.9)}
    return (f"n={len(ordered)} median {pick[0.5]:.1%} p80 {pick[0.8]:.1%} p90 {pick[0.9]:.1%} "
            f"max {ordered[-1]:.1%}")


def test_memory_model_against_real_startup_logs(capsys):
    entries = _entries()
    if not entries:
        pytest.skip(f"no corpus of start-up logs in {CORPUS} yet")
    figures_mod = pytest.importorskip("vllm_doctor.logreaders.memory_figures")
    from vllm_doctor.memory.corpus import entry_facts, load_entry
    from vllm_doctor.memory.estimate import compute_memory

    weights_err: list[float] = []
    tokens_err: list[float] = []
    both_ok = 0
    judged = 0
    rows = []
    for path in entries:
        entry = load_entry(path)
        printed = figures_mod.read_memory_figures(str(entry.get("log") or ""))
        facts = entry_facts(entry)
        if entry.get("vllm_version"):
            facts.set("release.judged", str(entry["vllm_version"]), "corpus entry")
        compute_memory(facts)
        w_est, t_est = facts.value("memory.weights_gib"), facts.value("memory.kv_cache_tokens")
        w_err = t_err = None
        if printed.weights_gib and w_est is not None:
            w_err = abs(w_est - printed.weights_gib) / printed.weights_gib
            weights_err.append(w_err)
        if printed.kv_cache_tokens and t_est is not None:
            t_err = abs(t_est - printed.kv_cache_tokens) / printed.kv_cache_tokens
            tokens_err.append(t_err)
        if w_err is not None or t_err is not None:
            judged += 1
            both_ok += (w_err is None or w_err <= 0.05) and (t_err is None or t_err <= 0.10)
        why = facts.why_missing("memory.kv_cache_tokens") if t_est is None else ""
        rows.append(f"  {path.stem}: weights {w_est} vs {printed.weights_gib}, tokens {t_est} "
                    f"vs {printed.kv_cache_tokens} {why or ''}")
    with capsys.disabled():
        print(f"\nmemory model on {len(entries)} start-up logs ({judged} with printed figures)")
        print(f"  weights per GPU error: {_quantiles(weights_err)}")
        print(f"  KV-cache tokens error: {_quantiles(tokens_err)}")
        print(f"  within the bar (weights ≤ 5 %, tokens ≤ 10 %): {both_ok}/{judged}")
        print("\n".join(rows))
    if len(entries) < MIN_ENTRIES:
        pytest.skip(f"{len(entries)} corpus entries: the bar is asserted from {MIN_ENTRIES}")
    assert both_ok >= BAR_SHARE * judged, (
        f"{both_ok}/{judged} entries within the bar (need {BAR_SHARE:.0%})")
