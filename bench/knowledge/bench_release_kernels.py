"""Cost of the release-kernels collector (facts/release_kernels.py) per `facts`/`check` run.

Each round is a fresh interpreter (so the quantization and attention tables are parsed, as
in one CLI run): one cold call, then 100 warm calls on the same facts (a GPU, an FP8
checkpoint, Gemma-4 head sizes, a forced backend). Both `facts` and `check` pay the cold
cost once, so it adds to both and not to their difference.

    python bench/knowledge/bench_release_kernels.py [ROUNDS]
"""

from collector_timing import rounds_argument, time_collector

FLAT = {
    "vllm.version": "0.22.1",
    "gpu.min_capability": 90,
    "model.quant_method": "fp8",
    "model.head_dim": 256,
    "model.global_head_dim": 512,
    "model.dtype": "bfloat16",
    "serve.kv_cache_dtype": "auto",
    "serve.attention_backend": "FLASHINFER",
}

cold, warm, fastest = time_collector(
    "vllm_doctor.facts.release_kernels", "collect_release_kernels", FLAT, rounds_argument()
)
print(
    f"cold (both tables parsed) median {cold * 1000:.1f} ms (min {fastest * 1000:.1f}); warm median {warm * 1000:.2f} ms"
)
