"""Write vllm_doctor/knowledge/data/memory_probe.json from the memory probe's raw output on the
device machine's GPUs (maintainer tool).

    python tools/memory_probe_table.py bench/memory/memory-h100x1.json [MORE.json ...]

Each file is `vllm-doctor probe memory --format json`'s output on one GPU kind, committed in
bench/memory with the command that made it (RESULTS.md). One entry per GPU name; the entry's
fields are documented in the table's "fields" and made by vllm_doctor.probes.memory.table_entry.
"""

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from vllm_doctor.probes.memory import table_entry  # noqa: E402

OUT = ROOT / "vllm_doctor" / "knowledge" / "data" / "memory_probe.json"
FIELDS = {
    "raw": "the probe's JSON output this entry was read from (under bench/memory)",
    "total_gib": "cudaMemGetInfo's total: vLLM's total_gpu_memory (usable, as vLLM sees it)",
    "nvml_total_gib": "NVML's total (nvidia-smi memory.total; the nominal size less reserved memory)",
    "cuda_context_gib": "one process's device memory once its CUDA context exists",
    "cublas_non_torch_gib": "outside torch's allocator after the first bf16 GEMMs (cuBLAS/cuBLASLt "
    "handles, the kernel modules loaded for them)",
    "cublas_torch_gib": "cuBLAS workspaces torch holds in its own allocator",
    "nccl_communicator_gib": "per world size measured: one NCCL communicator's device memory per rank",
    "allocator_slack_gib": "reserved − allocated after a forward and empty_cache",
    "activation": "peak above the weights per token count of a synthetic dense decoder forward "
    "(forward_gib) and of the logits + top-p-like sort of max_num_seqs sequences "
    "(sampler_gib); forward fit per 1k tokens; sampler bytes per sequence × vocabulary entry",
    "cuda_graph": "vLLM's CUDA-graph estimate (vllm_estimate_gib) and what the captures took "
    "(measured_gib) for the default capture sizes, FULL and PIECEWISE per mode",
}


def main(paths: list[str]) -> None:
    table = json.loads(OUT.read_text(encoding="utf-8")) if OUT.exists() else {}
    gpus = dict(table.get("gpus") or {})
    for path in paths:
        raw = Path(path).resolve()
        entry = table_entry(json.loads(raw.read_text(encoding="utf-8")))
        gpus[entry["gpu"]] = {"raw": raw.relative_to(ROOT / "bench" / "memory").as_posix(), **entry}
    out = {
        "kind": "memory_probe",
        "format": 1,
        "meaning": "the start-up memory terms vLLM measures that a model config cannot give, "
        "measured by `vllm-doctor probe memory` on each GPU kind (bench/memory/RESULTS.md)",
        "fields": FIELDS,
        "gpus": dict(sorted(gpus.items())),
    }
    OUT.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{OUT.relative_to(ROOT)}: {', '.join(sorted(gpus))}")


if __name__ == "__main__":
    main(sys.argv[1:])
