"""Counts of the start-up log corpus (tests/fixtures/memory-logs) by kind, GPU, release and
printed figure, and the figures vLLM printed in each entry.

    python tools/memory_corpus_report.py            # counts and one line per entry
    python tools/memory_corpus_report.py --counts   # counts only

The entries and their sources are listed in tests/fixtures/memory-logs/README.md; the memory
model is measured against them elsewhere (this tool only describes the corpus).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "fixtures" / "memory-logs"
sys.path.insert(0, str(ROOT))

from vllm_doctor.logreaders.memory_figures import read_memory_figures  # noqa: E402

# the printed figures counted per entry (an entry carries at least one of the first two)
FIGURES = ("weights_gib", "kv_cache_tokens", "kv_cache_gib", "max_concurrency", "cuda_graph_gib")


def load_entries(corpus: Path = CORPUS) -> list[tuple[str, dict]]:
    """(entry id, entry) for every YAML file of the corpus, sorted by id."""
    return [
        (path.stem, yaml.safe_load(path.read_text(encoding="utf-8")))
        for path in sorted(corpus.glob("*.yaml"))
    ]


def release_of(entry: dict) -> str:
    """The release as the entry states it, shortened to major.minor ("0.10" for 0.10.1.1)."""
    version = entry.get("vllm_version")
    if not version:
        return "unknown"
    return ".".join(str(version).split(".")[:2])


def counts(entries: list[tuple[str, dict]]) -> dict[str, Counter]:
    tally: dict[str, Counter] = {
        "kind": Counter(),
        "gpu": Counter(),
        "release": Counter(),
        "figure": Counter(),
    }
    for _, entry in entries:
        tally["kind"].update(entry.get("kinds") or [])
        figures = read_memory_figures(entry["log"]).to_dict()
        tally["figure"].update(name for name in FIGURES if name in figures)
        tally["gpu"][entry.get("gpu") or "unknown"] += 1
        tally["release"][release_of(entry)] += 1
    return tally


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--counts", action="store_true", help="print the counts only")
    args = parser.parse_args(argv)
    entries = load_entries()
    print(f"{len(entries)} entries in {CORPUS.relative_to(ROOT)}")
    for name, counter in counts(entries).items():
        print(f"\nby {name}:")
        for key, number in sorted(counter.items(), key=lambda item: (-item[1], item[0])):
            print(f"  {number:3d}  {key}")
    if not args.counts:
        print("\nentry: model @ gpu x count, release: weights GiB, KV GiB, KV tokens, concurrency")
        for name, entry in entries:
            figures = read_memory_figures(entry["log"])
            print(
                f"  {name}: {entry['model']} @ {entry['gpu']} x{entry['gpu_count']}, "
                f"{entry.get('vllm_version')}: {figures.weights_gib}, {figures.kv_cache_gib}, "
                f"{figures.kv_cache_tokens}, {figures.max_concurrency}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
