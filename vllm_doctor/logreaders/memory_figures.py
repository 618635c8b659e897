"""The memory figures vLLM prints while it starts, read back from a start-up log.

Every release prints what it measured: the weights it loaded, what it set aside for the KV
cache, how many tokens that cache holds and how many requests of ``--max-model-len`` fit, the
memory the CUDA graphs took. The lines and their format strings, as the release wheels
0.8.0-0.33.0 write them (``%s`` is ``format_gib``: a number rounded to 2 decimals):

  weights          "Model loading took %.4f GB and %.6f seconds"          0.8.0-0.8.2 (bytes/2**30)
                   "Model loading took %.4f GiB and %.6f seconds"         0.8.3-0.13 (0.14-0.27: %s)
                   "Model loading took %.4f GiB memory and %.6f seconds"  0.11.1-0.13 (0.14-: %s)
                   "Loading model weights took %.4f GB" / "... GiB"       V0 XPU runner, 0.8-0.10
  V0 profile       "the current vLLM instance can use total_gpu_memory (%.2fGiB) x
                   gpu_memory_utilization (%.2f) = %.2fGiB\\nmodel weights take %.2fGiB;
                   non_torch_memory takes %.2fGiB; PyTorch activation peak memory takes
                   %.2fGiB; the rest of the memory reserved for KV Cache is %.2fGiB."
                   (vllm/worker/worker.py, 0.8.0-0.10.2)
  KV memory        "Available KV cache memory: %.2f GiB"                  0.9.1-0.13 (0.14-: %s)
  V0 blocks        "# %s blocks: %d, # CPU blocks: %d" (device name: cuda, GPU, ...)
  KV tokens        "GPU KV cache size: %s tokens" (thousands separated)   V1 0.8.0-0.29
                   "%s KV cache size: %s tokens, Maximum concurrency for %s tokens per request:
                   %.2fx" (pools "GPU" or "GPU + host")                  0.30.0-
  concurrency      "Maximum concurrency for %s tokens per request: %.2fx" (V0: no separators)
  CUDA graphs      "Graph capturing finished in %.0f secs, took %.2f GiB" all releases
                   "Estimated CUDA graph memory: %.2f GiB total"          0.18.0- (profiled)
                   "CUDA graph pool memory: %s GiB (actual), %s GiB (estimated), ..." 0.18.0-
  summary          "Free memory on device (%s/%s GiB) on startup. Desired GPU memory utilization
                   is (%s, %s GiB). Actual usage is %s GiB for weight, %s GiB for peak
                   activation, %s GiB for non-torch memory, and %s GiB for CUDAGraph memory. ..."
                   (0.10.2-; 0.27-: "for consumed memory (weights + non-torch)"); the refusal
                   "Free memory on device (%s/%s GiB) on startup is less than desired GPU memory
                   utilization (%s, %s GiB)" (0.9.1-)
  encoder budget   "Encoder cache will be initialized with a budget of %s tokens, and profiled
                   with %s %s items of the maximum feature size." (V1, multimodal models)

Several processes write one log: with tensor/pipeline parallelism each worker prefixes its
lines — ``(VllmWorker rank=1 pid=…)`` (0.8-0.10), ``(Worker_TP1 pid=…)``,
``(Worker_PP1_TP0 pid=…)`` (0.10.2-), ``(VllmWorker TP0 pid=…)`` (0.10.1),
``(VllmWorkerProcess pid=…)`` (V0),
``(RayWorkerWrapper pid=…, ip=…)`` — and the engine core its own (``(EngineCore_DP0 pid=…)``).
``read_memory_figures_by_rank`` keeps each writer's figures apart; ``read_memory_figures``
gives one set, each figure taken from rank 0 (or the unprefixed engine) when it printed it.

Only text is read; nothing is imported. The patterns are bounded and anchored on literal
words, and only the lines that hold one of those words are looked at.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

_NUM = r"(-?\d{1,7}(?:\.\d{1,8})?)"
_INT = r"(\d{1,3}(?:,\d{3}){0,5}|\d{1,18})"
_ANSI = re.compile(r"\x1b\[[0-9;]{0,20}m")
# the writer's prefix: "(VllmWorker rank=0 pid=12)", "(Worker_TP1 pid=3)", "(RayWorkerWrapper pid=5, ip=10.0.0.2)"
_PREFIX = re.compile(
    r"\(([A-Za-z][\w-]{0,60}(?: [\w=]{1,20}){0,3}?) pid=\d{1,10}(?:, ip=[^)\s]{1,64})?\)"
)
_RANK = re.compile(r"(?:rank=|TP)(\d{1,5})")
# a line that starts a log record of its own (not the continuation of a multi-line message)
_RECORD = re.compile(r"(?:INFO|WARNING|DEBUG|ERROR)\b|^\s*\(")
# the words each figure's line holds; lines without any are skipped
_KEYWORDS = re.compile(
    r"Model loading took|Loading model weights took|total_gpu_memory|model weights take|"
    r"non_torch_memory takes|activation peak memory takes|reserved for KV Cache|"
    r"Available KV cache memory|KV cache size:|Maximum concurrency for|"
    r"blocks: \d|Graph capturing finished|Estimated CUDA graph memory|"
    r"Free memory on device|CUDA graph pool memory|Encoder cache will be initialized"
)

_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "weights_gib",
        re.compile(r"(?:Model loading took|Loading model weights took) " + _NUM + r" ?Gi?B\b"),
    ),
    ("total_gpu_gib", re.compile(r"total_gpu_memory \(" + _NUM + r" ?GiB\)")),
    ("utilization", re.compile(r"gpu_memory_utilization \(" + _NUM + r"\)")),
    ("requested_gib", re.compile(r"gpu_memory_utilization \([\d.]{1,10}\) = " + _NUM + r" ?GiB")),
    ("weights_gib", re.compile(r"model weights take " + _NUM + r" ?GiB")),
    ("non_torch_gib", re.compile(r"non_torch_memory takes " + _NUM + r" ?GiB")),
    ("activation_peak_gib", re.compile(r"activation peak memory takes " + _NUM + r" ?GiB")),
    ("kv_cache_gib", re.compile(r"reserved for KV Cache is " + _NUM + r" ?GiB")),
    ("kv_cache_gib", re.compile(r"Available KV cache memory: " + _NUM + r" ?GiB")),
    ("kv_cache_tokens", re.compile(r"\bGPU(?: \+ host)? KV cache size: " + _INT + r" tokens")),
    (
        "max_concurrency_tokens",
        re.compile(r"Maximum concurrency for " + _INT + r" tokens per request"),
    ),
    (
        "max_concurrency",
        re.compile(r"Maximum concurrency for [\d,]{1,24} tokens per request: " + _NUM + r"x"),
    ),
    (
        "gpu_blocks",
        re.compile(r"# (?:cuda|CUDA|GPU|gpu|rocm|ROCm) blocks: (\d{1,12}), # CPU blocks"),
    ),
    (
        "cuda_graph_gib",
        re.compile(r"Graph capturing finished in \d{1,7} secs?, took " + _NUM + r" ?GiB"),
    ),
    (
        "cuda_graph_estimate_gib",
        re.compile(r"Estimated CUDA graph memory: " + _NUM + r" ?GiB total"),
    ),
    # the summary after capturing (0.10.2-) and the start-up refusal (0.9.1-)
    (
        "total_gpu_gib",
        re.compile(r"Free memory on device \([\d.]{1,12}/" + _NUM + r" GiB\) on startup"),
    ),
    ("utilization", re.compile(r"[Dd]esired GPU memory utilization(?: is)? \(" + _NUM + r", ")),
    (
        "requested_gib",
        re.compile(r"[Dd]esired GPU memory utilization(?: is)? \([\d.]{1,10}, " + _NUM + r" GiB\)"),
    ),
    ("weights_gib", re.compile(r"Actual usage is " + _NUM + r" GiB for weight,")),
    ("activation_peak_gib", re.compile(_NUM + r" GiB for peak activation")),
    ("non_torch_gib", re.compile(_NUM + r" GiB for non-torch memory")),
    ("cuda_graph_gib", re.compile(_NUM + r" GiB for CUDAGraph memory")),
    ("cuda_graph_gib", re.compile(r"CUDA graph pool memory: " + _NUM + r" GiB \(actual\)")),
    ("cuda_graph_estimate_gib", re.compile(r"GiB \(actual\), " + _NUM + r" GiB \(estimated\)")),
    (
        "encoder_budget_tokens",
        re.compile(r"Encoder cache will be initialized with a budget of " + _INT + r" tokens"),
    ),
    ("encoder_items", re.compile(r"tokens, and profiled with (\d{1,6}) \w{1,20} items")),
    ("encoder_modality", re.compile(r"tokens, and profiled with \d{1,6} (\w{1,20}) items")),
)
_INTEGERS = {
    "kv_cache_tokens",
    "max_concurrency_tokens",
    "gpu_blocks",
    "encoder_budget_tokens",
    "encoder_items",
}
_MAX_TEXT = 50_000_000
# the lines with a figure's words that are read: start-up prints a few dozen per writer, and
# the first value of each figure counts, so a log of a million such lines (a restart loop,
# or one written to be slow) is read up to here, in bounded time
_MAX_FIGURE_LINES = 5_000


@dataclass(frozen=True)
class MemoryFigures:
    """What one start-up printed (GiB are 2**30 bytes; None: the log does not show it).

    ``weights_gib`` is per GPU (what this rank loaded); ``kv_cache_gib`` the memory vLLM set
    aside for the KV cache on it; ``kv_cache_tokens`` the cache's capacity in tokens (the
    engine's figure, after grouping of layers); ``max_concurrency`` how many requests of
    ``max_concurrency_tokens`` tokens fit; ``cuda_graph_gib`` what capturing took after the
    cache was allocated and ``cuda_graph_estimate_gib`` what profiling estimated before it;
    ``gpu_blocks`` the V0 engine's block count (it prints no token count)."""

    total_gpu_gib: float | None = None
    utilization: float | None = None
    requested_gib: float | None = None
    weights_gib: float | None = None
    non_torch_gib: float | None = None
    activation_peak_gib: float | None = None
    kv_cache_gib: float | None = None
    cuda_graph_gib: float | None = None
    cuda_graph_estimate_gib: float | None = None
    kv_cache_tokens: int | None = None
    max_concurrency: float | None = None
    max_concurrency_tokens: int | None = None
    gpu_blocks: int | None = None
    # the multimodal profile's inputs: the encoder budget and the dummy items it ran
    encoder_budget_tokens: int | None = None
    encoder_items: int | None = None
    encoder_modality: str | None = None

    def empty(self) -> bool:
        return all(getattr(self, f.name) is None for f in fields(self))

    def to_dict(self) -> dict[str, float | int | str]:
        """The figures the log shows (absent ones left out)."""
        return {name: value for name, value in asdict(self).items() if value is not None}


def _label_at(text: str, line_start: int) -> str:
    """The writer of the line starting at ``line_start``: its prefix's label, that of the
    record a continuation line belongs to (V0's profile message spans three lines), or ""
    for the unprefixed main process."""
    start = line_start
    for _ in range(4):
        end = text.find("\n", start)
        line = text[start : end if end >= 0 else len(text)]
        # the innermost writer: Ray nests "(EngineCore_0 pid=1) (RayWorkerWrapper pid=2, ip=…)"
        prefixes = _PREFIX.findall(line[:400])
        if prefixes:
            return prefixes[-1]
        if _RECORD.search(line[:200]) or start == 0:
            return ""
        start = text.rfind("\n", 0, start - 1) + 1
    return ""


_WORDS = {"encoder_modality"}  # kept as the log writes it


def _value(name: str, raw: str) -> float | int | str:
    if name in _WORDS:
        return raw
    return int(raw.replace(",", "")) if name in _INTEGERS else float(raw)


def read_memory_figures_by_rank(text: str) -> dict[str, MemoryFigures]:
    """Each writer's figures, keyed by its prefix label ("" for unprefixed lines), in the
    order the writers first printed one. The first value of each figure per writer counts (a
    later restart in the same log does not overwrite it)."""
    text = _ANSI.sub("", text[:_MAX_TEXT]) if "\x1b[" in text[:_MAX_TEXT] else text[:_MAX_TEXT]
    found: dict[str, dict[str, Any]] = {}
    seen_lines: set[int] = set()
    for hit in _KEYWORDS.finditer(text):
        start = text.rfind("\n", 0, hit.start()) + 1
        if start in seen_lines:
            continue
        if len(seen_lines) >= _MAX_FIGURE_LINES:
            break
        seen_lines.add(start)
        end = text.find("\n", hit.start())
        line = text[start : end if end >= 0 else len(text)]
        values = found.setdefault(_label_at(text, start), {})
        for name, pattern in _PATTERNS:
            if name in values:
                continue
            match = pattern.search(line)
            if match:
                values[name] = _value(name, match.group(1))
    return {label: MemoryFigures(**values) for label, values in found.items() if values}


def rank_of(label: str) -> int | None:
    """The tensor-parallel rank a writer's label names (``rank=1``, ``_TP1``, `` TP1``), if any."""
    match = _RANK.search(label)
    return int(match.group(1)) if match else None


def read_memory_figures(text: str) -> MemoryFigures:
    """One set of figures for the log: each taken from the unprefixed process or rank 0 when
    they printed it, else from the first writer that did."""
    by_rank = read_memory_figures_by_rank(text)
    ordered = sorted(by_rank.items(), key=lambda item: (rank_of(item[0]) or 0) != 0)
    merged = MemoryFigures()
    for _, figures in ordered:
        missing: dict[str, Any] = {
            name: value
            for name, value in figures.to_dict().items()
            if getattr(merged, name) is None
        }
        if missing:
            merged = replace(merged, **missing)
    return merged


# TopKTopPSampler logs this (v1/sample/ops/topk_topp_sampler.py, 0.8.0-0.33.0) whenever the
# sampler takes FlashInfer's top-k/top-p
FLASHINFER_SAMPLER_LINE = "Using FlashInfer for top-p & top-k sampling"


def says_flashinfer_sampler(text: str) -> bool:
    """Whether a start-up log shows vLLM's sampler running FlashInfer's top-k/top-p."""
    return FLASHINFER_SAMPLER_LINE in text
