"""vLLM's printed memory figures, read back from real start-up log text.

Each excerpt below is copied from the public thread named beside it (the lines as posted);
the expected values are the numbers those lines print.
"""

from __future__ import annotations

import pytest

from vllm_doctor.logreaders.memory_figures import (
    MemoryFigures,
    rank_of,
    read_memory_figures,
    read_memory_figures_by_rank,
)

# V0 engine, 0.7.x: "Loading model weights took ... GB" and the three-line profile message
# (https://github.com/vllm-project/vllm/issues/13882)
V0_RTX4060 = """\
INFO 02-26 09:54:02 model_runner.py:1115] Loading model weights took 5.2032 GB
INFO 02-26 09:54:05 worker.py:267] Memory profiling takes 3.25 seconds
INFO 02-26 09:54:05 worker.py:267] the current vLLM instance can use total_gpu_memory (8.00GiB) x gpu_memory_utilization (0.70) = 5.60GiB
INFO 02-26 09:54:05 worker.py:267] model weights take 5.20GiB; non_torch_memory takes 0.03GiB; PyTorch activation peak memory takes 1.42GiB; the rest of the memory reserved for KV Cache is -1.05GiB.
INFO 02-26 09:54:05 executor_base.py:111] # cuda blocks: 0, # CPU blocks: 4681
INFO 02-26 09:54:05 executor_base.py:116] Maximum concurrency for 4096 tokens per request: 0.00x
"""

# V0 with tensor parallelism: each worker prints the profile lines with its prefix
# (https://github.com/vllm-project/vllm/pull/14447)
V0_TP_WORKERS = """\
(VllmWorkerProcess pid=507) INFO 04-12 08:21:19 [worker.py:267] Memory profiling takes 17.59 seconds
(VllmWorkerProcess pid=507) INFO 04-12 08:21:19 [worker.py:267] the current vLLM instance can use total_gpu_memory (23.58GiB) x gpu_memory_utilization (0.99) = 23.35GiB
(VllmWorkerProcess pid=507) INFO 04-12 08:21:19 [worker.py:267] model weights take 21.21GiB; non_torch_memory takes 0.20GiB; PyTorch activation peak memory takes 0.37GiB; the rest of the memory reserved for KV Cache is 1.57GiB.
"""

# V1, 0.8.2: "Model loading took ... GB" (bytes / 2**30), tokens with separators, CUDA graphs
# (https://github.com/vllm-project/vllm/issues/14696)
V1_082 = """\
INFO 03-28 05:51:33 [gpu_model_runner.py:1201] Model loading took 1.9134 GB and 2.125815 seconds
INFO 03-28 05:51:54 [kv_cache_utils.py:577] GPU KV cache size: 1,139,728 tokens
INFO 03-28 05:51:54 [kv_cache_utils.py:580] Maximum concurrency for 32,768 tokens per request: 34.78x
INFO 03-28 05:52:31 [gpu_model_runner.py:1548] Graph capturing finished in 36 secs, took 0.44 GiB
"""

# V1 with TP workers and the engine core in separate processes, 0.11
# (https://github.com/vllm-project/vllm/issues/28228)
V1_TP_ENGINE = """\
(Worker_TP0 pid=26347) INFO 11-06 10:51:48 [gpu_worker.py:349] Available KV cache memory: 2.30 GiB
(EngineCore_DP0 pid=26283) WARNING 11-06 10:51:48 [kv_cache_utils.py:979] Add 1 padding layers, may waste at most 5.00% KV cache memory
(EngineCore_DP0 pid=26283) INFO 11-06 10:51:48 [kv_cache_utils.py:1229] GPU KV cache size: 75,840 tokens
(EngineCore_DP0 pid=26283) INFO 11-06 10:51:48 [kv_cache_utils.py:1234] Maximum concurrency for 120,000 tokens per request: 2.48x
"""

# 0.14: "Model loading took X GiB memory", ANSI colour around the prefix
# (https://github.com/vllm-project/vllm/issues/33155)
V1_ANSI = (
    "\x1b[0;36m(EngineCore_DP0 pid=70073)\x1b[0;0m INFO 01-27 00:31:59 [gpu_model_runner.py:3905] "
    "Model loading took 64.38 GiB memory and 14.380607 seconds\n"
)

# 0.18-0.19: the estimated CUDA graph memory before the cache is sized
# (https://github.com/vllm-project/vllm/pull/39559)
V1_ESTIMATE = """\
(EngineCore pid=1259857) INFO 04-13 19:51:23 [gpu_model_runner.py:5993] Estimated CUDA graph memory: 1.62 GiB total
(EngineCore pid=1259857) INFO 04-13 19:51:24 [gpu_worker.py:436] Available KV cache memory: 6.9 GiB
(EngineCore pid=1259857) INFO 04-13 19:51:24 [kv_cache_utils.py:1319] GPU KV cache size: 89,760 tokens
(EngineCore pid=1259857) INFO 04-13 19:51:24 [kv_cache_utils.py:1324] Maximum concurrency for 262,144 tokens per request: 1.36x
"""

# 0.30-: tokens and concurrency on one line, the CUDA graph pool and the start-up summary
# (https://github.com/vllm-project/vllm/pull/57047)
V1_SUMMARY = """\
(EngineCore pid=23853) INFO 09-16 13:51:44 [kv_cache_utils.py:2324] GPU KV cache size: 268,560 tokens, Maximum concurrency for 2,048 tokens per request: 131.13x
(EngineCore pid=23853) INFO 09-16 13:51:51 [model_runner.py:1029] Graph capturing finished in 6 secs, took 0.22 GiB
(EngineCore pid=23853) INFO 09-16 13:51:51 [gpu_worker.py:813] CUDA graph pool memory: 0.22 GiB (actual), 0.42 GiB (estimated), difference: 0.2 GiB (91.2%).
(EngineCore pid=23853) INFO 09-16 13:51:51 [gpu_worker.py:876] Free memory on device (46.99/47.37 GiB) on startup. Desired GPU memory utilization is (0.85, 40.27 GiB). Actual usage is 2.81 GiB for consumed memory (weights + non-torch), 0.57 GiB for peak activation, and 0.22 GiB for CUDAGraph memory. Replace gpu_memory_utilization config with `--kv-cache-memory=39207879578` (36.52 GiB) to fit into requested memory, or `--kv-cache-memory=46423534080` (43.24 GiB) to fully utilize gpu memory. Current kv cache memory in use is 36.88 GiB.
"""


def test_v0_profile_message_and_blocks() -> None:
    figures = read_memory_figures(V0_RTX4060)
    assert figures == MemoryFigures(
        total_gpu_gib=8.0,
        utilization=0.7,
        requested_gib=5.6,
        weights_gib=5.2032,
        non_torch_gib=0.03,
        activation_peak_gib=1.42,
        kv_cache_gib=-1.05,
        gpu_blocks=0,
        max_concurrency=0.0,
        max_concurrency_tokens=4096,
    )
    assert figures.kv_cache_tokens is None  # V0 prints blocks, not tokens


def test_v0_worker_prefix_keeps_the_continuation_lines_with_their_writer() -> None:
    by_rank = read_memory_figures_by_rank(V0_TP_WORKERS)
    assert list(by_rank) == ["VllmWorkerProcess"]
    worker = by_rank["VllmWorkerProcess"]
    assert (worker.total_gpu_gib, worker.utilization, worker.weights_gib, worker.kv_cache_gib) == (
        23.58,
        0.99,
        21.21,
        1.57,
    )


def test_v1_082_gb_unit_tokens_concurrency_and_graphs() -> None:
    figures = read_memory_figures(V1_082)
    assert figures.to_dict() == {
        "weights_gib": 1.9134,
        "kv_cache_tokens": 1_139_728,
        "max_concurrency": 34.78,
        "max_concurrency_tokens": 32_768,
        "cuda_graph_gib": 0.44,
    }


def test_v1_workers_and_engine_core_are_read_apart_and_merged() -> None:
    by_rank = read_memory_figures_by_rank(V1_TP_ENGINE)
    assert by_rank["Worker_TP0"].kv_cache_gib == 2.30
    assert by_rank["EngineCore_DP0"].kv_cache_tokens == 75_840
    merged = read_memory_figures(V1_TP_ENGINE)
    assert (merged.kv_cache_gib, merged.kv_cache_tokens, merged.max_concurrency_tokens) == (
        2.30,
        75_840,
        120_000,
    )


def test_ansi_colour_codes_do_not_hide_the_writer_or_the_figure() -> None:
    by_rank = read_memory_figures_by_rank(V1_ANSI)
    assert by_rank == {"EngineCore_DP0": MemoryFigures(weights_gib=64.38)}


def test_estimated_cuda_graph_memory() -> None:
    figures = read_memory_figures(V1_ESTIMATE)
    assert (figures.cuda_graph_estimate_gib, figures.kv_cache_gib, figures.kv_cache_tokens) == (
        1.62,
        6.9,
        89_760,
    )


def test_one_line_capacity_and_the_start_up_summary() -> None:
    figures = read_memory_figures(V1_SUMMARY)
    assert figures.kv_cache_tokens == 268_560
    assert (figures.max_concurrency, figures.max_concurrency_tokens) == (131.13, 2048)
    assert figures.cuda_graph_gib == 0.22  # "Graph capturing finished" is read first
    assert figures.cuda_graph_estimate_gib == 0.42
    assert (figures.total_gpu_gib, figures.utilization, figures.requested_gib) == (
        47.37,
        0.85,
        40.27,
    )
    assert figures.activation_peak_gib == 0.57


def test_rank_zero_wins_over_other_ranks() -> None:
    text = (
        "(Worker_TP1 pid=2) INFO [gpu_model_runner.py:1] Model loading took 7.50 GiB memory and 1.0 seconds\n"
        "(Worker_TP0 pid=1) INFO [gpu_model_runner.py:1] Model loading took 7.12 GiB memory and 1.0 seconds\n"
    )
    assert read_memory_figures(text).weights_gib == 7.12
    assert [rank_of(label) for label in read_memory_figures_by_rank(text)] == [1, 0]


@pytest.mark.parametrize(
    "text",
    [
        "",
        "INFO Loading weights took 4.77 seconds\n",
        "Maximum concurrency for many tokens per request\n",
    ],
)
def test_lines_without_figures_give_nothing(text: str) -> None:
    assert read_memory_figures(text).empty()
    assert read_memory_figures_by_rank(text) == {}
