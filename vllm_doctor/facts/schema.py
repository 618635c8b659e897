"""The catalogue of fact paths: what each one means and how a user can supply it.

Collectors write only these paths; rule conditions may only name these paths (the rule
validator rejects anything else). A trailing ``*`` stands for one free path segment
(``packages.*`` is ``packages.transformers``, ``env.*`` is ``env.VLLM_ATTENTION_BACKEND``).

Capabilities are integers as vLLM writes them (``major * 10 + minor``: 80, 89, 90, 100, 120).
Versions are strings (compare them with the ``version`` condition, never as numbers).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True)
class FactSpec:
    type: str  # str | int | float | bool | list | dict | version
    description: str
    # True for a fact every real input has (a model's head count, a GPU's capability): when
    # it is not there, the collector could not read it, so a rule sees it as unknown, never
    # as absent (see engine.conditions).
    never_absent: bool = False


# How to supply the facts of an area when they are missing (shown with "cannot decide").
SUPPLY_HINTS: dict[str, str] = {
    "vllm": "run where vLLM is installed, pass --report collect-env.txt, or --vllm-version V",
    "torch": "run where torch is installed, pass --report collect-env.txt, or --torch-version V",
    "packages": "run in the serving environment, or pass --report collect-env.txt",
    "driver": "run on the GPU host, or pass --report collect-env.txt",
    "gpu": "run on the GPU host, or pass --report collect-env.txt",
    "topology": "run on the GPU host, or pass --report collect-env.txt (its GPU Topology block)",
    "model": "pass --model-config PATH (a config.json or model directory), a local model path "
    "to `vllm serve`, have the model in the Hugging Face cache, or let the doctor read it from "
    "the Hub (not --offline; HF_TOKEN for a gated model)",
    "serve": "pass the serve line: `vllm-doctor check -- vllm serve MODEL ...` or --serve '...'",
    "env": "set the variable in this shell, or pass --report collect-env.txt",
    "platform": "run on the host (or in the container) that serves, pass --report "
    "collect-env.txt (its Python platform line names the kernel), or state it: --platform wsl2 "
    "(linux, container, kernel=RELEASE, glibcxx=VERSION)",
    "container": "run `vllm-doctor check` (or `vllm-doctor serve`) inside the container, as "
    "the user it runs as",
    "log": "pass --log crash.txt",
    "deploy": "pass the deployment: --manifest FILE (a Kubernetes manifest, a docker-compose "
    "file or a Dockerfile)",
    "derived": "supply the facts it is computed from (model config, GPUs, serve line)",
    "memory": "pass the model's config (--model-config), the GPU (--gpu NAME, or run on the "
    "host) and the serve line",
    "host": "run on the node itself (`vllm-doctor facts` there, or `vllm-doctor fleet`)",
    "nccl": "run in the serving environment of the node (`vllm-doctor fleet` runs it there)",
    "fleet": "check the whole fleet: `vllm-doctor fleet --ray [ADDRESS] -- vllm serve ...`, or "
    "`vllm-doctor fleet --facts DIR` on every node's `vllm-doctor facts --format json`",
    "release": "give a vLLM version the knowledge covers (0.8.0-0.33.0): run where vLLM is "
    "installed, pass --report collect-env.txt, or --vllm-version V; plus the serve line / "
    "model config / packages the fact compares",
}


def _fleet_quantity_facts() -> dict[str, FactSpec]:
    """fleet.<quantity>.distinct and .nodes, one pattern each over the quantities the fleet
    compares (the one table: vllm_doctor/fleet/quantities.py)."""
    from vllm_doctor.fleet.quantities import COMPARED

    names = ", ".join(q.name for q in COMPARED)
    return {
        "fleet.*.distinct": FactSpec(
            "int",
            "how many different values of a compared quantity the nodes have (a node without it "
            f"counts as one more value, 'not installed', 'unset'); the quantities: {names}",
        ),
        "fleet.*.nodes": FactSpec(
            "list",
            "the nodes grouped by that quantity's value: 'VALUE: node, ...', most common first",
        ),
    }


FACTS: dict[str, FactSpec] = {
    # -- vLLM ------------------------------------------------------------------------
    "vllm.installed": FactSpec("bool", "vLLM is installed in this environment"),
    "vllm.version": FactSpec("version", "vLLM version (PEP 440; nightlies carry +g<sha>)"),
    "vllm.is_dev": FactSpec("bool", "the version is a dev/nightly build (not a release)"),
    "vllm.base_release": FactSpec("version", "for a dev build: the release it descends from"),
    "vllm.git_sha": FactSpec("str", "git commit of the vLLM build (nightlies, source builds)"),
    "vllm.build_date": FactSpec("str", "date label of a local source build (yyyymmdd)"),
    "vllm.location": FactSpec("str", "directory of the installed vllm package (fingerprints)"),
    "vllm.torch_requirement": FactSpec("str", "the torch requirement vLLM declares"),
    "vllm.torch_pin": FactSpec("version", "the exact torch version vLLM pins (==), if any"),
    "vllm.cuda_archs": FactSpec("str", "CUDA archs of the build as the report states them"),
    "vllm.machine": FactSpec(
        "str",
        "CPU architecture of the serving environment (x86_64, aarch64: platform.machine(), "
        "or the report's Python platform line); picks the build whose compiled kernels are "
        "judged (vLLM's aarch64 wheels carry other GPU architectures)",
    ),
    # -- torch -------------------------------------------------------------------------
    "torch.version": FactSpec("version", "torch version (e.g. 2.11.0+cu130)"),
    "torch.cuda_version": FactSpec("version", "CUDA version torch was built with (e.g. 13.0)"),
    "torch.git_version": FactSpec("str", "torch git commit"),
    "torch.matches_vllm_pin": FactSpec("bool", "installed torch satisfies vLLM's requirement"),
    "torch.cuda_available": FactSpec(
        "bool",
        "torch.cuda.is_available() where the report was written (collect-env's `Is CUDA "
        "available`): false beside an NVIDIA driver means torch could not initialise CUDA",
    ),
    # -- other packages ----------------------------------------------------------------
    "packages.*": FactSpec("version", "installed version of a package (canonical name)"),
    # -- driver ------------------------------------------------------------------------
    "driver.version": FactSpec("version", "NVIDIA driver version (e.g. 580.159.04)"),
    "driver.cuda_version": FactSpec("version", "highest CUDA version the driver supports"),
    # -- GPUs --------------------------------------------------------------------------
    "gpu.count": FactSpec(
        "int", "number of visible GPUs (CUDA_VISIBLE_DEVICES honoured)", never_absent=True
    ),
    "gpu.devices": FactSpec("list", "per-GPU records: index, name, uuid, capability, memory, mig"),
    "gpu.names": FactSpec("list", "GPU names"),
    "gpu.capabilities": FactSpec(
        "list", "compute capability of each GPU (int, e.g. 90)", never_absent=True
    ),
    "gpu.min_capability": FactSpec(
        "int", "lowest compute capability among visible GPUs", never_absent=True
    ),
    "gpu.max_capability": FactSpec(
        "int", "highest compute capability among visible GPUs", never_absent=True
    ),
    "gpu.memory_total_mib": FactSpec(
        "int", "smallest total memory of a visible GPU (MiB)", never_absent=True
    ),
    "gpu.memory_free_mib": FactSpec("int", "smallest free memory of a visible GPU (MiB)"),
    "gpu.mig_enabled": FactSpec("bool", "MIG mode is on for any visible GPU, or MIG ids are used"),
    "gpu.persistence_mode": FactSpec("bool", "persistence mode is on for all visible GPUs"),
    "gpu.ecc_enabled": FactSpec("bool", "ECC is on for all visible GPUs"),
    "gpu.visible_devices": FactSpec("str", "CUDA_VISIBLE_DEVICES as given"),
    "gpu.gfx_targets": FactSpec(
        "list",
        "AMD gfx targets of the visible GPUs (gfx942, gfx1151): a report's ROCm device line, "
        "else the GPU table by name (inferred); absent for NVIDIA GPUs",
    ),
    "gpu.unified_memory": FactSpec(
        "bool",
        "the GPU's memory is the system's (GB10, Jetson, Strix Halo: "
        "knowledge/data/unified_memory.json), so what vLLM sees as free is what the OS, "
        "other processes and a BIOS carve-out leave",
    ),
    # -- the platform and the container (facts/platform.py) --------------------------------
    "platform.kernel": FactSpec(
        "str",
        "the Linux kernel's release (/proc/sys/kernel/osrelease, a report's Python platform, "
        "check --platform kernel=R)",
    ),
    "platform.kernel_cmdline": FactSpec(
        "str", "the kernel's boot parameters (/proc/cmdline: kho=off, iommu=pt, ...)"
    ),
    "platform.wsl": FactSpec(
        "bool",
        "Windows Subsystem for Linux 2 (a microsoft kernel, WSL_DISTRO_NAME, check --platform wsl2)",
    ),
    "platform.container": FactSpec(
        "bool",
        "running in a container (/.dockerenv, /run/.containerenv, Kubernetes, check --platform "
        "container)",
    ),
    "platform.glibcxx": FactSpec(
        "version",
        "the newest GLIBCXX symbol version the system libstdc++.so.6 provides (3.4.N from "
        "libstdc++.so.6.0.N: Ubuntu 22.04 has 3.4.30, 24.04 3.4.33)",
    ),
    "container.uid": FactSpec("int", "the UID the doctor (and so vLLM) runs as"),
    "container.uid_in_passwd": FactSpec(
        "bool", "the passwd database knows the UID (an arbitrary OpenShift UID is not)"
    ),
    "container.user_known": FactSpec(
        "bool",
        "getpass.getuser() finds a name: LOGNAME, USER, LNAME or USERNAME is set, or passwd "
        "knows the UID (torch's compile cache and other libraries ask for it)",
    ),
    "container.home": FactSpec("str", "HOME (or passwd's home directory when HOME is unset)"),
    "container.home_writable": FactSpec(
        "bool", "HOME is writable, or can be created (its nearest existing parent is writable)"
    ),
    "container.unwritable_caches": FactSpec(
        "list",
        "cache directories vLLM and its libraries write at start-up (VLLM_CACHE_ROOT, "
        "TRITON_CACHE_DIR, HF_HOME as they resolve them) that this user cannot create or write",
    ),
    # -- links between GPUs ---------------------------------------------------------------
    "topology.links": FactSpec("list", "per pair: a, b, link (NV#/PIX/PXB/PHB/NODE/SYS), p2p"),
    "topology.all_nvlink": FactSpec("bool", "every pair of visible GPUs is linked by NVLink"),
    "topology.worst_link": FactSpec("str", "the slowest link type between any pair"),
    "topology.p2p_all": FactSpec("bool", "P2P read and write work between every pair"),
    # -- model ---------------------------------------------------------------------------
    "model.id": FactSpec("str", "model id or path as given to vLLM"),
    "model.config_path": FactSpec("str", "config.json that was read"),
    "model.architectures": FactSpec("list", "architectures from config.json", never_absent=True),
    "model.model_type": FactSpec("str", "model_type of the top-level config", never_absent=True),
    "model.text_model_type": FactSpec("str", "model_type of the nested text/language config"),
    "model.family": FactSpec("str", "model family (gemma4, deepseek_v32, qwen3, llama, ...)"),
    "model.num_attention_heads": FactSpec(
        "int", "attention heads of the text model", never_absent=True
    ),
    "model.num_key_value_heads": FactSpec("int", "KV heads of the text model", never_absent=True),
    "model.head_dim": FactSpec(
        "int", "head dimension (sliding/local layers where they differ)", never_absent=True
    ),
    "model.global_head_dim": FactSpec("int", "head dimension of global/full attention layers"),
    "model.hidden_size": FactSpec("int", "hidden size of the text model", never_absent=True),
    "model.vocab_size": FactSpec("int", "vocabulary size", never_absent=True),
    "model.num_hidden_layers": FactSpec("int", "decoder layers", never_absent=True),
    "model.max_position_embeddings": FactSpec(
        "int", "maximum context the config declares", never_absent=True
    ),
    "model.dtype": FactSpec(
        "str", "torch_dtype / dtype of the checkpoint (bfloat16, ...)", never_absent=True
    ),
    "model.num_experts": FactSpec("int", "routed experts (MoE), if any"),
    "model.moe_intermediate_size": FactSpec(
        "int", "intermediate size of one routed expert (MoE models: moe_intermediate_size)"
    ),
    "model.quant_block_n": FactSpec(
        "int", "block-quantized checkpoint: quantization_config.weight_block_size[0] (block_n)"
    ),
    "model.quant_block_k": FactSpec(
        "int", "block-quantized checkpoint: quantization_config.weight_block_size[1] (block_k)"
    ),
    "model.num_mtp_layers": FactSpec("int", "multi-token-prediction layers, if any"),
    "model.kv_lora_rank": FactSpec("int", "MLA latent KV rank (DeepSeek-style), if any"),
    "model.qk_rope_head_dim": FactSpec("int", "MLA rotary head dimension (DeepSeek-style), if any"),
    "model.quant_method": FactSpec("str", "quantization_config.quant_method (fp8, awq, ...)"),
    "model.quant_algo": FactSpec("str", "ModelOpt quant_algo (NVFP4, FP8, MIXED_PRECISION)"),
    "model.quant_scheme": FactSpec(
        "str",
        "normalised scheme: fp8, fp8-dynamic, fp8-w8a16, "
        "w8a8-fp8, nvfp4, nvfp4a16, mxfp4, mxfp8, w4a16, w4a8, w8a16, "
        "w8a8-int8, mixed, awq, gptq, bnb",
    ),
    "model.weights_bytes": FactSpec("int", "total size of the weights (safetensors index)"),
    "model.weights_dtypes": FactSpec("list", "dtypes of the safetensors weights (headers)"),
    "model.inferred": FactSpec("bool", "model facts are inferred from the name only"),
    # -- serve arguments (effective values, vLLM defaults filled in) ------------------------
    "serve.argv": FactSpec("list", "the serve arguments as given"),
    "serve.model": FactSpec("str", "model given to vllm serve"),
    "serve.tensor_parallel_size": FactSpec("int", "--tensor-parallel-size / -tp"),
    "serve.pipeline_parallel_size": FactSpec("int", "--pipeline-parallel-size / -pp"),
    "serve.data_parallel_size": FactSpec("int", "--data-parallel-size / -dp"),
    "serve.enable_expert_parallel": FactSpec("bool", "--enable-expert-parallel"),
    "serve.world_size": FactSpec(
        "int",
        "tensor × pipeline × prefill-context parallel size (ranks of one data-parallel replica)",
    ),
    "serve.quantization": FactSpec("str", "--quantization / -q"),
    "serve.dtype": FactSpec("str", "--dtype"),
    "serve.kv_cache_dtype": FactSpec("str", "--kv-cache-dtype"),
    "serve.max_model_len": FactSpec("int", "--max-model-len (human-readable ints parsed)"),
    "serve.max_num_seqs": FactSpec("int", "--max-num-seqs"),
    "serve.max_num_batched_tokens": FactSpec("int", "--max-num-batched-tokens"),
    "serve.gpu_memory_utilization": FactSpec("float", "--gpu-memory-utilization"),
    "serve.enforce_eager": FactSpec("bool", "--enforce-eager"),
    "serve.enable_chunked_prefill": FactSpec("bool", "--enable-chunked-prefill (given)"),
    "serve.trust_remote_code": FactSpec("bool", "--trust-remote-code"),
    "serve.speculative_config": FactSpec("dict", "--speculative-config (JSON merged)"),
    "serve.speculative_method": FactSpec("str", "speculative_config.method"),
    "serve.num_speculative_tokens": FactSpec("int", "speculative_config.num_speculative_tokens"),
    "serve.speculative_model": FactSpec("str", "speculative_config.model"),
    "serve.compilation_config": FactSpec("dict", "--compilation-config / -cc (JSON merged)"),
    "serve.cudagraph_mode": FactSpec("str", "compilation_config.cudagraph_mode (upper case)"),
    "serve.optimization_level": FactSpec("str", "-O / --optimization-level"),
    "serve.attention_config": FactSpec("dict", "--attention-config / -ac (JSON merged)"),
    "serve.attention_backend": FactSpec(
        "str", "attention backend from the flag, attention_config.backend or VLLM_ATTENTION_BACKEND"
    ),
    "serve.attention_backend_source": FactSpec("str", "which of those set the backend"),
    "serve.distributed_executor_backend": FactSpec("str", "--distributed-executor-backend"),
    "serve.disable_custom_all_reduce": FactSpec("bool", "--disable-custom-all-reduce"),
    "serve.hf_overrides": FactSpec("dict", "--hf-overrides"),
    "serve.load_format": FactSpec("str", "--load-format"),
    "serve.enable_lora": FactSpec("bool", "--enable-lora"),
    "serve.enable_eplb": FactSpec("bool", "--enable-eplb"),
    "serve.enable_auto_tool_choice": FactSpec("bool", "--enable-auto-tool-choice"),
    "serve.tool_call_parser": FactSpec("str", "--tool-call-parser"),
    "serve.reasoning_parser": FactSpec("str", "--reasoning-parser"),
    "serve.legacy_flags": FactSpec("list", "flags removed from current vLLM (old spec-decode ...)"),
    "serve.unknown_flags": FactSpec("list", "flags the doctor does not know (kept verbatim)"),
    "serve.flags": FactSpec(
        "list",
        "long names of every flag given, without dashes in front "
        "(enable-eplb); a negation is recorded under the plain name "
        "(--no-enable-eplb gives enable-eplb): read serve.<option> for "
        "the value",
    ),
    # -- environment -------------------------------------------------------------------------
    "env.*": FactSpec("str", "an environment variable (secrets redacted)"),
    # -- this machine as a node of a fleet (facts/host.py) --------------------------------------
    "host.name": FactSpec("str", "the host name (a pod's name in Kubernetes)"),
    "host.shm_mib": FactSpec("int", "size of the tmpfs at /dev/shm in MiB (os.statvfs)"),
    "host.interfaces": FactSpec("list", "names of this machine's network interfaces"),
    "host.model_copy": FactSpec(
        "str",
        "the directory on this machine holding the served model's config.json (the local "
        "path given, or its Hugging Face cache snapshot); absent when this machine has none",
    ),
    "host.model_weights": FactSpec(
        "bool", "weight files (.safetensors, .bin, .pt, .gguf) are in host.model_copy"
    ),
    "nccl.library": FactSpec(
        "str",
        "the libnccl.so.2 vLLM's processes load: VLLM_NCCL_SO_PATH, LD_PRELOAD, the "
        "nvidia-nccl-cu* wheel torch's RPATH names, LD_LIBRARY_PATH or the system directories "
        "(the detail says which)",
    ),
    "nccl.version": FactSpec(
        "version", "that library's version (its wheel's metadata, or libnccl.so.2.X.Y's name)"
    ),
    "nccl.build_id": FactSpec(
        "str", "that library's GNU build ID (ELF notes): two builds of one version differ here"
    ),
    # -- the fleet (vllm-doctor fleet: every node's facts compared; vllm_doctor/fleet) -------
    **_fleet_quantity_facts(),
    "fleet.nodes": FactSpec(
        "int", "nodes in the fleet (those that answered and those that did not)"
    ),
    "fleet.silent_nodes": FactSpec(
        "list",
        "nodes whose facts did not arrive (no answer within the deadline, the doctor could not "
        "run there, a collector crashed), each with why; absent when every node answered",
    ),
    "fleet.driver": FactSpec(
        "str",
        "the node where `vllm serve` runs (the Ray head unless --head names another; for "
        "facts documents the first)",
    ),
    "fleet.driver_gpus": FactSpec("int", "GPUs the engine offers on the driver node"),
    "fleet.gpus_offered": FactSpec(
        "int", "GPUs the engine offers in all (Ray's GPU resources; a document's gpu.count)"
    ),
    "fleet.gpus_withheld": FactSpec(
        "list",
        "nodes where NVML sees more GPUs than Ray offers (raylet started with --num-gpus or a "
        "narrower CUDA_VISIBLE_DEVICES), each with both counts; absent when none",
    ),
    "fleet.placement.backend": FactSpec(
        "str", "the executor that places the ranks: ray, or mp/external_launcher (per node)"
    ),
    "fleet.placement.gpus_needed": FactSpec(
        "int",
        "GPUs vLLM asks Ray for: one bundle per rank (TP x PP x PCP), times the data-parallel "
        "size when Ray places the data-parallel ranks",
    ),
    "fleet.placement.fits": FactSpec(
        "bool",
        "the offered GPUs can hold the placement groups vLLM creates (PACK over the cluster "
        "for one replica; STRICT_PACK on one node per data-parallel rank)",
    ),
    "fleet.placement.ranks": FactSpec(
        "list", "the ranks each node would hold, as Ray's PACK places them (driver first)"
    ),
    "fleet.placement.tp_spans_nodes": FactSpec(
        "bool", "a tensor-parallel group cannot fit on one node (TP above every node's GPUs)"
    ),
    "fleet.placement.max_ranks_per_node": FactSpec(
        "int", "the most ranks one node would hold (shared memory carries their traffic)"
    ),
    "fleet.shm_smallest_mib": FactSpec(
        "int", "the smallest /dev/shm of the nodes that would hold more than one rank"
    ),
    "fleet.ifname_unmatched": FactSpec(
        "list",
        "nodes where the NCCL_SOCKET_IFNAME or GLOO_SOCKET_IFNAME their ranks will run with (the "
        "node's own; for NCCL_* else the driver's, which vLLM copies to every Ray worker) "
        "matches none of the node's interfaces, each with the value and the interfaces; "
        "absent when every one matches",
    ),
    "fleet.model.is_path": FactSpec(
        "bool", "the served model is a path (every node needs it at that path), not a Hub id"
    ),
    "fleet.model.missing_nodes": FactSpec(
        "list",
        "nodes that would hold ranks and have no copy of the model (host.model_copy absent); "
        "absent when every such node has one",
    ),
    "fleet.model.offline_missing_nodes": FactSpec(
        "list",
        "of those, the nodes where HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE forbid the download",
    ),
    "fleet.gpu_memory_spread_pct": FactSpec(
        "int",
        "how much more memory the largest GPU of the nodes that would hold ranks has than the "
        "smallest, in percent of the smallest (every node with GPUs while the placement is "
        "unknown; 0 when they agree)",
    ),
    "fleet.gpu_memory_nodes": FactSpec(
        "list", "those nodes with their GPUs: 'NODE: COUNT x NAME (MiB)', one entry per node"
    ),
    "fleet.pod_gpus_beyond_request": FactSpec(
        "list",
        "nodes whose pod sees more GPUs than the workload's pod asks for (gpu.count against "
        "the manifest's GPUs per pod; the DaemonSet's documents left out), each with both "
        "counts; absent when none",
    ),
    # -- crash log ----------------------------------------------------------------------------
    # -- the deployment (check --manifest): what the file states about where vLLM runs --
    "deploy.file": FactSpec("str", "the manifest, compose file or Dockerfile the target is in"),
    "deploy.target": FactSpec("str", "the workload and container that runs vLLM"),
    "deploy.image": FactSpec("str", "the container image"),
    "deploy.gpus_per_pod": FactSpec(
        "int",
        "GPUs the container asks for (nvidia.com/gpu or "
        "amd.com/gpu limits, compose device reservations)",
    ),
    "deploy.nodes": FactSpec("int", "pods in one serving group (LeaderWorkerSet size; 1 else)"),
    "deploy.gpus": FactSpec("int", "GPUs of one serving group: GPUs per pod × pods"),
    "deploy.shm_default": FactSpec(
        "bool",
        "/dev/shm is the container runtime's 64 MB default "
        "(no Memory emptyDir at /dev/shm, no shm_size, no ipc: host)",
    ),
    "deploy.shm_mib": FactSpec("int", "size of the container's /dev/shm in MiB, when stated"),
    "log.path": FactSpec("str", "crash log that was read"),
    "log.lines": FactSpec("int", "number of lines in the crash log"),
    "log.memory_figures": FactSpec(
        "dict",
        "the start-up memory figures vLLM printed in the log "
        "(logreaders/memory_figures.py: weights_gib, kv_cache_gib, "
        "kv_cache_tokens, max_concurrency, ...; run_args: the serve arguments the log's "
        "run shows, memory/readback.py)",
    ),
    "log.flashinfer_sampler": FactSpec(
        "bool",
        'the log shows "Using FlashInfer for top-p & top-k sampling" (the sampler path of the '
        "memory estimate's profile run)",
    ),
    # -- derived (computed from the facts above) ---------------------------------------------
    "derived.free_memory_below_utilization": FactSpec(
        "bool", "free memory on some GPU is below total × gpu_memory_utilization"
    ),
    "derived.free_memory_tight": FactSpec(
        "bool",
        "free memory on some GPU is at least total × gpu_memory_utilization, but not by the "
        "CUDA context vLLM creates before it checks",
    ),
    "derived.tp_divides_heads": FactSpec("bool", "tensor_parallel_size divides attention heads"),
    "derived.tp_divides_kv_heads": FactSpec("bool", "TP divides KV heads or KV heads divide TP"),
    "derived.driver_supports_torch_cuda": FactSpec(
        "bool", "the driver's CUDA version is at least torch's CUDA build"
    ),
    "derived.cuda_compiler_matches_headers": FactSpec(
        "bool",
        "the pip CUDA compiler (nvidia-cuda-nvcc) is the major.minor of the pip CUDA runtime "
        "headers (nvidia-cuda-runtime), as CCCL's cuda_toolkit.h requires of every JIT build",
    ),
    # -- added for the PAR/ARGS rules (PAR003, ARGS002); computed in facts/derived.py ------
    "derived.expert_parallel_size": FactSpec(
        "int", "expert-parallel group size: TP × DP with --enable-expert-parallel, else 1"
    ),
    "derived.moe_intermediate_per_rank": FactSpec(
        "int",
        "an expert's intermediate size on one GPU: model.moe_intermediate_size / TP, or all "
        "of it with --enable-expert-parallel (whole experts per rank)",
    ),
    "derived.max_model_len": FactSpec(
        "int",
        "the max_model_len vLLM takes: --max-model-len when given, else the model's derived "
        "maximum context (as in derived.max_model_len_above_model)",
    ),
    "derived.max_model_len_above_model": FactSpec(
        "bool",
        "--max-model-len exceeds the model's derived maximum context "
        "(max_position_embeddings, rope-scaled where vLLM scales it) and model_max_length",
    ),
    # -- vLLM's start-up memory figures per GPU, estimated per release (memory/estimate.py) --
    "memory.usable_gib": FactSpec(
        "float",
        "GPU memory as vLLM sees it (torch's total: 79.18-79.22"
        " GiB on an H100 80GB), the smallest GPU",
    ),
    "memory.weights_gib": FactSpec("float", 'weights per GPU (vLLM\'s "Model loading took")'),
    "memory.activation_peak_gib": FactSpec("float", "PyTorch activation peak of the profile run"),
    "memory.non_torch_gib": FactSpec("float", "non-torch memory (CUDA context, NCCL buffers)"),
    "memory.cuda_graph_gib": FactSpec("float", "CUDA-graph pool (subtracted from KV from 0.20.0)"),
    "memory.kv_cache_gib": FactSpec("float", "memory left for the KV cache per GPU"),
    "memory.kv_cache_tokens": FactSpec("int", 'tokens the KV cache holds ("GPU KV cache size")'),
    "memory.max_concurrency": FactSpec(
        "float",
        'requests of max_model_len tokens at once ("Maximum concurrency for N tokens per request")',
    ),
    "memory.kv_bytes_per_token": FactSpec("int", "KV bytes per token per GPU, attention layers"),
    "memory.kv_layers": FactSpec("str", "the KV layers one GPU allocates, by kind"),
    "memory.margin_gib": FactSpec("float", "the calibration's spread: the estimate's margin"),
    "memory.kv_verdict": FactSpec(
        "str",
        "fits | tight (within the margin) | does-not-fit: one "
        "request of max_model_len tokens against the KV cache",
    ),
    "memory.kv_room": FactSpec(
        "str",
        "room | tight (within the margin) | none: the KV cache "
        "left after weights, activations and graphs",
    ),
    "memory.kv_budget_room": FactSpec(
        "str",
        "room | tight (within the margin) | none: with --kv-cache-memory-bytes, the GPU's "
        "memory left after the weights, the profile's peak, non-torch memory, CUDA graphs "
        "and the KV cache asked for",
    ),
    "memory.mamba_cache_blocks": FactSpec(
        "int",
        "a hybrid (Mamba / linear-attention) model: the KV cache blocks one GPU holds, one per "
        "running sequence's Mamba state (absent for other models)",
    ),
    "memory.max_num_seqs": FactSpec(
        "int", "a hybrid model: --max-num-seqs, or vLLM's default for this GPU"
    ),
    "memory.mamba_blocks_verdict": FactSpec(
        "str",
        "a hybrid model: below | tight (within the margin) | enough: the Mamba cache blocks "
        "against memory.max_num_seqs (vLLM refuses full CUDA graphs for more sequences)",
    ),
    "memory.estimate_line": FactSpec(
        "str", "the estimate in one line (KV GiB, tokens, concurrent requests)"
    ),
    # -- the judged release (facts/release.py, from knowledge/data/*.json) -------------------
    "release.coverage": FactSpec(
        "str",
        "covered (a release the knowledge covers judges the "
        "vLLM version), outside (a version outside it) or unknown",
    ),
    "release.judged": FactSpec("version", "the covered release the vLLM version is judged by"),
    "release.unknown_options": FactSpec("list", "serve options no covered release accepts"),
    "release.unread_values": FactSpec(
        "list",
        "serve option values no covered release reads as given (its kind refuses the word, or "
        "it is outside every release's choices), with what the releases read instead",
    ),
    "release.config_corrections": FactSpec(
        "list",
        "the serve config file's keys the judged release does not accept, each with its file "
        "line and the key to write instead (or to remove)",
    ),
    "release.unaccepted_options": FactSpec(
        "list",
        "serve options the judged release does not accept (as written; those the "
        "curated ARGS001/ARGS004 explain left out)",
    ),
    "release.option_hints": FactSpec(
        "list", "per unaccepted option: the releases that accept it and the nearest valid spelling"
    ),
    "release.corrected_command": FactSpec(
        "str", "the serve line with unaccepted options renamed to the nearest spelling or removed"
    ),
    "release.invalid_choices": FactSpec(
        "list", "option values outside the judged release's choices for that option"
    ),
    "release.architecture_registered": FactSpec(
        "bool", "the judged release's registry has one of model.architectures"
    ),
    "release.unregistered_architectures": FactSpec(
        "list", "model.architectures the judged release does not register"
    ),
    "release.architecture_first_release": FactSpec(
        "version", "first covered release that registers one of the architectures"
    ),
    "release.transformers_fallback": FactSpec(
        "bool",
        "the judged release would try its Transformers backend for an unregistered "
        "architecture (false with --model-impl vllm)",
    ),
    "release.unknown_parsers": FactSpec(
        "list",
        "per --tool-call-parser / --reasoning-parser name the judged release refuses at "
        "start-up: the parsers it has and the first release with the name",
    ),
    "release.unmet_requirements": FactSpec(
        "list",
        "options given without the option the judged release checks they need "
        "(--enable-eplb without --enable-expert-parallel ...) or a multimodal model "
        "(--limit-mm-per-prompt on a text-only one before 0.10.1)",
    ),
    "release.lora_architecture": FactSpec(
        "str", "the model architecture the judged release would load (first registered one)"
    ),
    "release.lora_supported": FactSpec(
        "bool", "that architecture's class implements SupportsLoRA in the judged release"
    ),
    "release.model_modalities": FactSpec(
        "list",
        "modalities the loaded architecture's processor takes in the judged release "
        "(empty: not multimodal)",
    ),
    "release.pooling_model": FactSpec(
        "bool",
        "the loaded architecture's class is a pooling model in the judged release "
        "(--runner auto serves it as pooling)",
    ),
    "release.unknown_spec_methods": FactSpec(
        "list",
        "a speculative_config.method the judged release refuses: the methods it has and "
        "the first release with the requested one",
    ),
    "release.spec_target_refused": FactSpec(
        "list",
        "the speculative method's target-model check in the judged release refuses the "
        "model's (text) model_type",
    ),
    "release.oversized_world": FactSpec(
        "str",
        "what the judged release does when TP x PP exceeds the node's GPUs and no "
        "executor backend is given: ray (switches to Ray by itself) or refuse (ValueError)",
    ),
    "release.world_spans_nodes": FactSpec(
        "bool",
        "the ranks of one data-parallel replica (TP x PP x PCP) may lie beyond this node's "
        "GPUs: --distributed-executor-backend ray or external_launcher, or --nnodes above 1; "
        "false: vLLM compares them with this node's GPUs (--headless and the data-parallel "
        "options do not change that; the detail names them)",
        never_absent=True,
    ),
    "release.transformers_requirement": FactSpec(
        "str", "the judged release's transformers requirement (Requires-Dist)"
    ),
    "release.transformers_in_range": FactSpec(
        "bool", "packages.transformers satisfies the judged release's requirement"
    ),
    "release.torch_pin": FactSpec("version", "the torch version the judged release pins"),
    "release.torch_matches_pin": FactSpec(
        "bool", "torch.version is the judged release's pin (local +cu labels ignored)"
    ),
    "release.torch_pin_from": FactSpec(
        "str", "installed metadata (ENV002 decides) or release table"
    ),
    "release.effective_dtype": FactSpec(
        "str",
        "the dtype the judged release computes in: --dtype, or for auto the "
        "checkpoint's as that release resolves it on this GPU (float32 → float16/bfloat16; "
        "from 0.9.1 a dtype the GPU lacks falls back)",
    ),
    "release.auto_dtype_fallback": FactSpec(
        "bool",
        "with --dtype auto the judged release falls back from a dtype the GPU lacks "
        "(0.9.0 on, PR 17265) instead of failing at worker start",
    ),
    # -- what the judged release makes of the environment (facts/release_env.py) ----------
    "release.env.*": FactSpec(
        "str",
        "the value the judged release takes for one of its VLLM_* variables (vllm/envs.py, "
        "knowledge table envs): the value set (env.*), read as that release reads it, or its "
        "default; a bool, int, float, str or list as vLLM has it; absent where the release's "
        "value is None (it decides at run time)",
    ),
    "release.env_unknown": FactSpec(
        "list",
        "VLLM_* variables set that the judged release does not declare (it ignores them; the "
        "detail names the releases that do)",
    ),
    "release.model_runner_v2": FactSpec(
        "str",
        "on | off | auto: Model Runner V2 as VLLM_USE_V2_MODEL_RUNNER forces it, else the "
        "judged release's own choice (knowledge table model_runner): off, or auto (the "
        "release picks V2 by itself for some models and lines: the detail names which)",
    ),
    "release.deep_gemm_arch": FactSpec(
        "bool",
        "the judged release's DeepGEMM check admits every visible GPU's capability (knowledge "
        "table deep_gemm: 9.0, the 10.x family, from 0.24.0 also the 12.x family)",
    ),
    "release.deep_gemm": FactSpec(
        "bool",
        "the judged release takes DeepGEMM's kernels on this GPU where the deep_gemm package "
        "imports: its capability check and VLLM_USE_DEEP_GEMM (release.env)",
    ),
    "release.aiter.*": FactSpec(
        "bool",
        "the judged release uses this AITER feature on this GPU with this environment "
        "(knowledge table aiter_gates: rocm_aiter_ops.is_<feature>_enabled over the "
        "release's values of its VLLM_ROCM_USE_AITER* variables and the GPU's gfx target; "
        "'aiter' is is_enabled, 'supported' is AITER's own architecture check)",
    ),
    "release.env_invalid": FactSpec(
        "list",
        "variables set to a value the judged release refuses at start-up (ValueError; the "
        "detail has vLLM's message)",
    ),
    "release.cuda_major": FactSpec(
        "int", "CUDA major version the judged release's compiled extensions link against"
    ),
    # -- what the judged release itself says (generated knowledge; facts/release_kernels.py)
    "release.quant.judged_release": FactSpec(
        "version", "the covered vLLM release the quantization facts were read from"
    ),
    "release.quant.method": FactSpec(
        "str",
        "the quantization method judged (--quantization, else the checkpoint's; "
        "ModelOpt by quant_algo)",
    ),
    "release.quant.known": FactSpec("bool", "the release accepts the method at all"),
    "release.quant.conflict": FactSpec(
        "str",
        "why the judged release refuses --quantization for this checkpoint: its quant_method "
        "still differs from the flag after the release's override step ('' when it does not)",
    ),
    "release.quant.min_capability": FactSpec(
        "int",
        "lowest get_min_capability over the method and the methods vLLM may pick "
        "instead (override_quantization_method) in that release",
    ),
    "release.quant.capability_ok": FactSpec(
        "bool", "gpu.min_capability meets release.quant.min_capability"
    ),
    "release.quant.deprecated": FactSpec("bool", "the release lists the method as deprecated"),
    "release.quant.act_dtypes": FactSpec(
        "list", "activation dtypes the method accepts in that release"
    ),
    "release.quant.act_dtype_ok": FactSpec(
        "bool",
        "an explicit --dtype is accepted by the method or a method vLLM may pick "
        "instead (get_supported_act_dtypes)",
    ),
    "release.attention.judged_release": FactSpec(
        "version", "the covered vLLM release the attention facts were read from"
    ),
    "release.attention.candidates": FactSpec(
        "list", "backends the release considers on this GPU (_get_backend_priorities)"
    ),
    "release.attention.supporting": FactSpec(
        "list", "candidates whose checks accept head size, dtype and KV-cache dtype"
    ),
    "release.attention.any_supports": FactSpec(
        "bool", "some candidate backend supports the model on this GPU"
    ),
    "release.attention.rejections": FactSpec("list", "each rejecting candidate with its reasons"),
    "release.attention.forced_supports": FactSpec(
        "bool", "the forced backend (serve.attention_backend) accepts the model here"
    ),
    "release.attention.forced_rejections": FactSpec(
        "list", "why the forced backend refuses (empty when it accepts)"
    ),
    # -- the stack around the release (facts/release_stack.py) ------------------------------
    "release.stack.judged_release": FactSpec(
        "version", "the covered vLLM release the stack facts were judged by"
    ),
    "release.stack.unmet_requirements": FactSpec(
        "list",
        "installed/reported packages outside a requirement: the judged release's Requires-Dist "
        "(torch and transformers left to their own rules) and the Requires-Dist of the "
        "companion versions the stack knowledge read on each other (quack-kernels on "
        "nvidia-cutlass-dsl, LMCache on torch); each entry names the package, its version and "
        "the requirement; packages of unknown version are not judged",
    ),
    "release.stack.pair_mismatches": FactSpec(
        "list",
        "partner packages a companion refuses at import time (flashinfer-python checks "
        "flashinfer-cubin for the same version and flashinfer-jit-cache for its version as "
        "prefix, read from its code): both versions, the check, and the judged release's pins; "
        "empty when no known pair disagrees or the bypass variable is set",
    ),
    "release.stack.pair_fix": FactSpec(
        "str", "the install that makes the refused pairs agree (the release's pin first)"
    ),
    "release.api.missing": FactSpec(
        "list",
        "names and keywords the judged release imports or passes to a companion package "
        "(FlashInfer, LMCache, instanttensor, humming-kernels, quack-kernels) that the "
        "installed/reported version's code lacks, each with the versions that have it; "
        "uses vLLM guards with a fallback are left out; empty when every one is there",
    ),
    "release.api.fix": FactSpec("str", "the install that gives the release the API it uses"),
    "release.api.model_code_only": FactSpec(
        "bool", "every call found lacking is in one model's code: it fails for that model only"
    ),
    "release.kernels.judged_release": FactSpec(
        "version", "the covered vLLM release whose compiled extensions were judged"
    ),
    "release.kernels.machine": FactSpec(
        "str", "the build judged: x86_64, aarch64, or unknown (judged where both agree)"
    ),
    "release.kernels.capabilities": FactSpec("list", "the GPU capabilities judged"),
    "release.kernels.extensions": FactSpec(
        "dict",
        "per compiled extension of the judged release (vllm._C, vllm._moe_C, "
        "vllm.vllm_flash_attn._vllm_fa2_C, ...): sass (every object has machine code for the "
        "GPU), ptx (some run only through PTX the driver compiles), partial (some objects have "
        "no image for it), none (no object has), or unknown when the x86_64 and aarch64 builds "
        "differ and the machine is not known; read from the fat binaries of the wheels",
    ),
    "release.kernels.without_image": FactSpec(
        "list", "extensions of the judged release with no image for the GPU: images, kernels"
    ),
    "release.kernels.core_without_image": FactSpec(
        "bool",
        "vLLM's core extension (vllm._C / vllm._C_stable_libtorch) has no image at all; not "
        "decided on a Jetson module when the published wheels have none (NVIDIA's Jetson "
        "builds carry the device's architecture)",
    ),
    "release.kernels.family_only": FactSpec(
        "list",
        "objects built for the GPU's architecture family only as another member's "
        "architecture-specific images (sm_120a objects on a 12.1 GPU, sm_100a on 10.3): "
        "their kernels fail with 'no kernel image' here",
    ),
    "release.kernels.older_only": FactSpec(
        "list",
        "of release.kernels.without_image, the extensions all of whose images target GPUs "
        "older than this one (FlashAttention 3's sm_90a on a 12.x GPU): a capability test "
        "such as >= 9.0 still selects them here; extensions built only for newer GPUs are "
        "left out (vLLM gates them away)",
    ),
    "release.kernels.ptx_only": FactSpec(
        "list",
        "extensions some of whose objects run on the GPU only through PTX the driver compiles "
        "(the PTX ISA version: a driver older than the toolkit that wrote it refuses it)",
    ),
    "release.kernels.companions": FactSpec(
        "dict",
        "per compiled object of the installed companion packages the stack knowledge read "
        "(torch's libraries for the PyPI build, FlashInfer's cubin families, ...): sass, ptx, "
        "partial or none for the GPU",
    ),
    "release.kernels.files": FactSpec(
        "dict",
        "the same per shared object, keyed by its path under site-packages "
        "(vllm/_C.abi3.so, torch/lib/libtorch_cuda.so): what the kernels probe loads, so its "
        "result can be set beside the prediction",
    ),
    "release.kernels.companions_without_image": FactSpec(
        "list", "companion objects with no image for the GPU (package, version, images)"
    ),
}


# The modules (under vllm_doctor/) that write each area's facts, the longest prefix first
# taken: `facts --schema` and docs/facts.md name them, tests/test_fact_schema.py checks that
# every fact's name is in one of its writers.
WRITERS: dict[str, tuple[str, ...]] = {
    "vllm": ("facts/packages.py", "facts/report.py", "facts/release.py"),
    "torch": ("facts/packages.py", "facts/report.py", "facts/stack.py"),
    "packages": ("facts/packages.py", "facts/report.py", "facts/stack.py"),
    "driver": ("facts/gpus.py", "facts/report.py", "facts/hardware.py"),
    "gpu": ("facts/gpus.py", "facts/report.py", "facts/hardware.py"),
    "topology": ("facts/gpus.py", "facts/report.py"),
    "model": ("facts/model_config.py", "facts/model_source.py"),
    "serve": ("serveline/line.py",),
    "env": (
        "facts/environment.py",
        "facts/report.py",
        "serveline/line.py",
        "serveline/target.py",
    ),
    "deploy": ("serveline/target.py",),
    "log": ("facts/collect.py",),
    "derived": ("facts/derived.py",),
    "memory": ("memory/estimate.py",),
    "host": ("facts/host.py",),
    "nccl": ("facts/host.py",),
    "fleet": ("fleet/fleetfacts.py",),
    "release": ("facts/release.py", "facts/release_options.py"),
    "release.env": ("facts/release_env.py",),
    "release.env_unknown": ("facts/release_env.py",),
    "release.env_invalid": ("facts/release_env.py",),
    "release.model_runner_v2": ("facts/release_env.py",),
    "release.deep_gemm": ("facts/release_env.py",),
    "release.deep_gemm_arch": ("facts/release_env.py",),
    "release.quant": ("facts/release_kernels.py",),
    "release.aiter": ("facts/release_env.py",),
    "platform": ("facts/platform.py",),
    "container": ("facts/platform.py",),
    "gpu.gfx_targets": ("facts/platform.py",),
    "gpu.unified_memory": ("facts/platform.py",),
    "release.attention": ("facts/release_kernels.py",),
    "release.stack": ("facts/release_stack.py",),
    "release.api": ("facts/release_api.py",),
    "release.kernels": ("facts/release_stack.py",),
}

# Facts a collector may infer when they were not observed (Facts.infer: from the GPU table, a
# release's pins, NVIDIA's driver table; Source.INFERRED: from the model's name). An inferred
# value is marked as such in every report; tests/test_fact_schema.py reads the collectors'
# source for the facts they infer and compares with this list.
INFERABLE: frozenset[str] = frozenset(
    {
        "gpu.capabilities",
        "gpu.min_capability",
        "gpu.max_capability",
        "gpu.memory_total_mib",
        "gpu.memory_free_mib",
        "gpu.gfx_targets",
        "gpu.unified_memory",
        "driver.cuda_version",
        "torch.version",
        "torch.cuda_version",
        "packages.*",
        "model.quant_scheme",
        "model.quant_method",
        "model.family",
        "model.inferred",
    }
)


def writers(path: str) -> tuple[str, ...]:
    """The modules that write ``path`` (the entry of its longest area prefix)."""
    parts = path.split(".")
    for end in range(len(parts), 0, -1):
        found = WRITERS.get(".".join(parts[:end]))
        if found:
            return found
    return ()


def spec_for(path: str) -> FactSpec | None:
    """The spec of a fact path, matching ``*`` patterns segment by segment."""
    spec = FACTS.get(path)
    if spec is not None:
        return spec
    for pattern, pattern_spec in FACTS.items():
        if (
            "*" in pattern
            and pattern.count(".") == path.count(".")
            and fnmatch.fnmatchcase(path, pattern)
        ):
            return pattern_spec
    return None


def is_known_path(path: str) -> bool:
    return spec_for(path) is not None


@lru_cache(maxsize=2048)
def absent_is_unknown(path: str) -> bool:
    """A fact that every real input has: not being there means it could not be read."""
    spec = spec_for(path)
    return spec is not None and spec.never_absent


def supply_hint(path: str) -> str:
    return SUPPLY_HINTS.get(path.split(".", 1)[0], "supply the missing input")
