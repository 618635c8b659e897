"""Cost of the stack collector (facts/release_stack.py) per `facts`/`check` run.

Each round is a fresh interpreter (the tables are parsed as in one CLI run): one cold call,
then 100 warm calls on the same facts: vLLM 0.24.0 on a GB10 (aarch64) with the packages of
the issue's example report (flashinfer-python 0.6.12, flashinfer-cubin 0.6.8.post1, torch
2.11.0 CUDA 13.0). The cold call parses dependencies.json, kernel_images.json and the stack
tables of the installed companions.

    python bench/knowledge/bench_release_stack.py [ROUNDS]
"""

from collector_timing import rounds_argument, time_collector

FLAT = {
    "vllm.version": "0.24.0",
    "gpu.capabilities": [121],
    "gpu.min_capability": 121,
    "vllm.machine": "aarch64",
    "packages.flashinfer-python": "0.6.12",
    "packages.flashinfer-cubin": "0.6.8.post1",
    "torch.version": "2.11.0",
    "torch.cuda_version": "13.0",
}

cold, warm, fastest = time_collector(
    "vllm_doctor.facts.release_stack", "collect_release_stack", FLAT, rounds_argument()
)
print(
    f"cold (tables parsed) median {cold * 1000:.1f} ms (min {fastest * 1000:.1f}); warm median {warm * 1000:.2f} ms"
)
