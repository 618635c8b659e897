"""The catalogue's facts read from the machine and the user's inputs (facts/schema.py joins
them with the computed ones into ``FACTS``): the installed vLLM, torch and other packages, the
driver, the GPUs and the links between them, the platform and the container, the model's
config, the serve arguments, the environment, this machine as a fleet node and the fleet, the
crash log and the deployment."""

from __future__ import annotations

from vllm_doctor.facts.model import FactSpec


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
        "fleet.*.installed_distinct": FactSpec(
            "int",
            "how many different values of a compared quantity the nodes that have it have (a "
            "node without it is not counted: Ray absent where nothing runs on Ray)",
        ),
        "fleet.*.nodes": FactSpec(
            "list",
            "the nodes grouped by that quantity's value: 'VALUE: node, ...', most common first",
        ),
    }


OBSERVED: dict[str, FactSpec] = {
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
    "gpu.exclusive_compute": FactSpec(
        "bool",
        "a visible GPU's compute mode is Exclusive_Process or Prohibited (nvidia-smi -c): a "
        "second process that opens it gets 'CUDA-capable device(s) is/are busy or unavailable'",
    ),
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
    "platform.nvcc_found": FactSpec(
        "bool",
        "FlashInfer's JIT finds a CUDA compiler: <cuda_home>/bin/nvcc exists, cuda_home as "
        "flashinfer/jit/cpp_ext.py get_cuda_path takes it (CUDA_HOME, CUDA_PATH, nvcc on PATH, "
        "/usr/local/cuda); a report's CUDA runtime version (nvcc --version) says one is on PATH",
    ),
    "platform.c_compiler_found": FactSpec(
        "bool",
        "Triton finds a host C compiler to build its launchers: CC is set, or gcc or clang is on "
        "PATH (triton/runtime/build.py); check --platform cc / no-cc",
    ),
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
        "libstdc++.so.6.0.N: Ubuntu 22.04 has 3.4.30, 24.04 3.4.33); inferred from "
        "platform.os where the library itself is not read",
    ),
    "platform.os": FactSpec(
        "str",
        "the Linux distribution's release as os-release's ID and VERSION_ID (ubuntu 22.04): "
        "/etc/os-release, a report's OS line, check --platform os=ubuntu-22.04",
    ),
    "platform.cuda_interposer": FactSpec(
        "str",
        "a library preloaded into every process that intercepts its CUDA driver calls: "
        "hami-core (HAMi-core's libvgpu.so, which HAMi's and volcano's vGPU device plugins "
        "preload through /etc/ld.so.preload); read from /etc/ld.so.preload and LD_PRELOAD, "
        "from a manifest whose container asks for a vGPU device plugin's resources (absent "
        "where it sets CUDA_DISABLE_CONTROL=true: the plugin then preloads nothing), or "
        "stated (check --platform hami-core / no-hami-core); absent: nothing preloaded does",
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
    "container.arbitrary_uid": FactSpec(
        "bool",
        "stated (--platform arbitrary-uid): the container runs under a UID its image does not "
        "know, as OpenShift's restricted SCC assigns",
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
    "topology.acs_redirect": FactSpec(
        "list",
        "the PCIe bridges above the visible GPUs whose ACS P2P Request or Completion Redirect "
        "is on, as BRIDGE (ReqRedir+ CmpltRedir+); empty when none (read from sysfs: root "
        "only, else missing)",
    ),
    # -- model ---------------------------------------------------------------------------
    "model.id": FactSpec("str", "model id or path as given to vLLM"),
    "model.config_path": FactSpec("str", "config.json that was read"),
    "model.architectures": FactSpec("list", "architectures from config.json", never_absent=True),
    "model.model_type": FactSpec("str", "model_type of the top-level config", never_absent=True),
    "model.text_model_type": FactSpec("str", "model_type of the nested text/language config"),
    "model.remote_config": FactSpec(
        "bool",
        "config.json's auto_map names an AutoConfig class (with --trust-remote-code "
        "transformers loads the model repository's own config class)",
    ),
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
    "model.num_experts_per_tok": FactSpec(
        "int", "experts each token is routed to (MoE models: num_experts_per_tok, moe_topk)"
    ),
    "model.num_shared_experts": FactSpec(
        "int", "shared experts beside the routed ones (n_shared_experts, num_shared_experts)"
    ),
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
    "model.dspark_block_size": FactSpec(
        "int",
        "DSpark drafter block size in the checkpoint's own config (DeepSeek-V4 DSpark), if any",
    ),
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
    "serve.data_parallel_backend": FactSpec("str", "--data-parallel-backend / -dpb (mp or ray)"),
    "serve.api_server_count": FactSpec("int", "--api-server-count / -asc (given)"),
    "serve.headless": FactSpec("bool", "--headless (engine ranks only, no API server)"),
    "serve.enable_expert_parallel": FactSpec("bool", "--enable-expert-parallel"),
    "serve.decode_context_parallel_size": FactSpec(
        "int", "--decode-context-parallel-size / -dcp (ranks sharing one KV cache in decode)"
    ),
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
    "serve.moe_backend": FactSpec(
        "str", "--moe-backend (lower case), the MoE experts backend forced"
    ),
    "serve.distributed_executor_backend": FactSpec("str", "--distributed-executor-backend"),
    "serve.disable_custom_all_reduce": FactSpec("bool", "--disable-custom-all-reduce"),
    "serve.hf_overrides": FactSpec("dict", "--hf-overrides"),
    "serve.load_format": FactSpec("str", "--load-format"),
    "serve.enable_prefix_caching": FactSpec(
        "bool", "--enable-prefix-caching / --no-enable-prefix-caching (given)"
    ),
    "serve.mamba_cache_mode": FactSpec("str", "--mamba-cache-mode (none, align, all; given)"),
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
}
