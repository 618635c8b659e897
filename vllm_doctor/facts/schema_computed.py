"""The catalogue's facts computed from the others (facts/schema.py joins them with the observed
ones into ``FACTS``): the derived checks, vLLM's start-up memory figures per release, and what
the judged release makes of this deployment (its options, model, pins, environment, kernels,
and the stack around it)."""

from __future__ import annotations

from vllm_doctor.facts.model import FactSpec

COMPUTED: dict[str, FactSpec] = {
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
    "derived.driver_supports_pypi_torch_cuda": FactSpec(
        "bool",
        "torch's CUDA build unknown and its version unlabelled (as PyPI's wheel): the driver's "
        "CUDA major reaches the CUDA that version's PyPI wheel requires",
    ),
    "derived.cuda_compiler_matches_headers": FactSpec(
        "bool",
        "the pip CUDA compiler (nvidia-cuda-nvcc) is the major.minor of the pip CUDA runtime "
        "headers (nvidia-cuda-runtime), as CCCL's cuda_toolkit.h requires of every JIT build",
    ),
    "derived.spec_drafting_slots": FactSpec(
        "int",
        "slots each request adds to the batch while drafting (speculative_config's method and "
        "num_speculative_tokens, as the judged release counts them; facts/spec_budget.py)",
    ),
    "derived.spec_scheduled_tokens": FactSpec(
        "int",
        "max_num_batched_tokens − drafting slots × max_num_seqs (the serve line's values, else "
        "the release's defaults for the GPU): vLLM refuses a speculative configuration that "
        "leaves zero or less",
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
    "derived.aiter_moe_untuned": FactSpec(
        "bool",
        "on an AMD GPU serving an MoE model: the installed AITER (packages.amd-aiter / "
        "packages.aiter) ships no tuned fused-MoE config for the model's per-rank shape "
        "(hidden size, moe_intermediate_size / TP, experts, top-k) and quantization on this "
        "gfx target at any token count (knowledge table aiter_tuned_fmoe, from AITER's "
        "aiter/configs/*tuned_fmoe*.csv per tag), so its get_2stage_cfgs takes default "
        "heuristics; false where a tuned row exists",
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
    "memory.attention_block_size": FactSpec(
        "int",
        "a hybrid model: the attention block size vLLM sets so one attention page holds a "
        'Mamba state ("Setting attention block size to N tokens"; a larger --block-size '
        "kept), for the judged release's KV layout (absent for other models)",
    ),
    "memory.mamba_cache_mode": FactSpec(
        "str",
        "a hybrid model: none | align | all, the mamba_cache_mode the judged release resolves "
        "(--mamba-cache-mode when given; align or all with prefix caching on, given or the "
        "release's default for hybrid models from 0.26.0; all only for the models that cache "
        "one state per block); missing before 0.15.0",
    ),
    "memory.max_num_batched_tokens": FactSpec(
        "int",
        "a hybrid model: --max-num-batched-tokens, or vLLM's default for `vllm serve` on this "
        "GPU (missing with chunked prefill off)",
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
    "release.flashinfer_version": FactSpec(
        "version",
        "the flashinfer-python vLLM runs with: the installed or reported version; where it "
        "cannot be read (a what-if --vllm-version, no package list), the judged release's "
        "pin (Requires-Dist ==X), inferred; absent where a package list lacks it",
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
        "default; a bool, int, float, str or list as vLLM has it; where the release's value "
        "is None, false if its code only truth-tests it (`if envs.X:`: off; envs table "
        "none_reads), else absent (it decides at run time or tells None apart)",
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
    "release.moe_backend.refused_on_gpu": FactSpec(
        "bool",
        "the --moe-backend forced cannot run on this GPU in the judged release: for the "
        "model's quantization, every experts class of the backend it maps to fails its "
        "_supports_current_device() test here (knowledge table moe_backends, from the MoE "
        "oracles), so vLLM raises 'does not support the deployment configuration since kernel "
        "does not support current device' at start-up",
    ),
    "release.moe_backend.devices": FactSpec(
        "str",
        "the experts classes of the forced backend and the GPUs their device tests admit",
    ),
    "release.aiter_moe_refused": FactSpec(
        "bool",
        "on an AMD GPU serving an MoE model: the judged release answers VLLM_ROCM_USE_AITER / "
        "VLLM_ROCM_USE_AITER_MOE set on by taking AITER's MoE backend for this model's "
        "quantization (knowledge table aiter_moe_request, from the MoE oracles) and AITER's "
        "experts are off on this GPU (release.aiter.fused_moe), so it raises ValueError at "
        "start-up; false where the experts run, the request is not made or the release falls "
        "back",
    ),
    "release.uma_free_memory": FactSpec(
        "str",
        "on a unified-memory GPU (gpu.unified_memory): what the judged release takes as its "
        "free memory (knowledge table uma_memory, from MemorySnapshot.measure): os_available "
        "(psutil's available memory: the platform's is_integrated_gpu, or a listed CUDA "
        "capability) or device_free (mem_get_info: on ROCm APUs the GTT aperture, whatever the "
        "OS already uses); absent on a dedicated-memory GPU",
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
    "release.attention.kv_cache_backends": FactSpec(
        "list",
        "of the backends the release considers on this GPU (its priority list), those whose "
        "capability and KV-cache dtype checks accept serve.kv_cache_dtype (no config.json "
        "needed: head size and dtype only remove more)",
    ),
    "release.attention.kv_cache_triton_only": FactSpec(
        "bool",
        "every backend of release.attention.kv_cache_backends compiles its kernels with "
        "Triton (TRITON_ATTN, TRITON_MLA, FLEX_ATTENTION)",
    ),
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
    "stack.requirements.broken": FactSpec(
        "list",
        "what pip check would say: a requirement of an installed/reported package (its "
        "version's Requires-Dist on the package index, knowledge/requires.py) that another "
        "installed/reported package's version breaks, one line per pair naming both versions, "
        "the requirement and the read versions it admits; judged only with both versions "
        "given and the marker holding here; pairs vLLM's own requirements judge are left to "
        "release.stack.unmet_requirements and ENV100-ENV102",
    ),
    "stack.requirements.fix": FactSpec(
        "str",
        "for each broken pair: the install that meets the requirement, or the newest read "
        "version of the requiring package whose requirement admits the installed one",
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
    "release.stack.partner_imports_missing": FactSpec(
        "list",
        "names a companion version imports unguarded at module level, or reads as attributes "
        "while it is imported, from the package it plugs into (LMCache from vllm.*, "
        "quack-kernels from the CuTe DSL's cutlass.*) that "
        "the installed/reported partner version lacks, in modules that will be loaded (vLLM's "
        "imports of the companion; a kv_connector_module_path): companion, version, file, name, "
        "the partner versions that have it (generated stack_imports table); empty when none",
    ),
    "release.stack.partner_imports_at_risk": FactSpec(
        "list",
        "the same, where loading is not known (no serve line: whether the LMCache connector is "
        "configured) or the companion's version is not known (the versions the judged release "
        "allows that cannot import, named)",
    ),
    "release.stack.partner_imports_fix": FactSpec(
        "str", "the companion version to install (the versions that import cleanly)"
    ),
    "release.stack.model_type_unknown": FactSpec(
        "list",
        "the config.json's model_type that the installed/reported transformers does not know "
        "(CONFIG_MAPPING_NAMES of each transformers release, generated) while the judged vLLM "
        "release registers no config class of its own for it: the transformers releases that "
        "know it; empty when it is known, registered, or loaded with --trust-remote-code",
    ),
    "release.stack.model_type_fix": FactSpec(
        "str",
        "the transformers to install within the judged release's requirement, or the vLLM "
        "release whose requirement first admits one that knows the model",
    ),
    "release.stack.transformers_refuses": FactSpec(
        "list",
        "installed/reported packages outside the spec the installed transformers checks when "
        "it is imported (pkgs_to_check_at_runtime: tokenizers, huggingface-hub, safetensors, "
        "regex, ...; generated per transformers release): package, version, the spec; empty "
        "when every known one is inside",
    ),
    "release.stack.transformers_refuses_fix": FactSpec(
        "str", "the installs that bring the refused packages inside transformers' specs"
    ),
    "release.api.missing": FactSpec(
        "list",
        "names and keywords the judged release imports or passes to a companion package "
        "(FlashInfer, instanttensor, humming-kernels, quack-kernels) that the installed/reported "
        "version's code lacks and the version the release was built against (its pin, else the "
        "lowest allowed) has, each with the versions that have it; a name vLLM guards with a "
        "fallback is not judged missing; empty when every one is there",
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
    "release.kernels.published_core_without_image": FactSpec(
        "list",
        "on a Jetson module, the core extension of the published wheels (pip install vllm, "
        "the vllm/vllm-openai images) with no image for the device's architecture (empty: "
        "they carry it, or the GPU is not a Jetson module, where core_without_image decides)",
    ),
    "release.flashinfer_sampler_jit": FactSpec(
        "bool",
        "vLLM's start-up builds FlashInfer's sampling module with nvcc: the release takes "
        "VLLM_USE_FLASHINFER_SAMPLER as true, flashinfer-python is installed and "
        "flashinfer-jit-cache (its prebuilt modules) is not",
    ),
    "release.flashinfer_attention_jit": FactSpec(
        "bool",
        "vLLM's start-up builds FlashInfer attention modules with nvcc: the attention backend "
        "it runs (forced, or the release's first for the GPU that accepts the model) calls "
        "FlashInfer entry points that load JIT modules (companion_uses, the jit: keys of "
        "stack/flashinfer-python), flashinfer-python is installed and flashinfer-jit-cache is "
        "not — written by facts/flashinfer_attention_jit.py",
    ),
    "release.flashinfer_attention_modules": FactSpec(
        "list",
        "the FlashInfer JIT modules the chosen attention backend's entry points can load in "
        "the installed flashinfer-python (batch_prefill, batch_decode, trtllm_gen_fmha, ...; "
        "which of them run, the GPU and the model decide)",
    ),
    "release.flashinfer_attention_alternatives": FactSpec(
        "str",
        "the release's other attention backends that accept the model on this GPU and call no "
        "FlashInfer (the --attention-backend values that avoid its JIT)",
    ),
    "release.kernels.triton_ptxas": FactSpec(
        "str",
        "the ptxas the installed triton bundles for each GPU (its CUDA release, read from the "
        "wheel) and whether it accepts the GPU name Triton compiles for (sm_121a on a GB10)",
    ),
    "release.kernels.triton_ptxas_lacks_gpu": FactSpec(
        "str",
        "the GPU names the bundled ptxas Triton uses does not know, with the variable that "
        "points Triton at another ptxas (empty: it knows them, or the variable is set)",
    ),
    "release.kernels.torch_toolkit": FactSpec(
        "str",
        "for each GPU, what the CUDA release torch was built with can compile for it (machine "
        "code, only PTX of an older architecture, nothing), read from NVIDIA's compilers",
    ),
    "release.kernels.torch_toolkit_no_image": FactSpec(
        "list",
        "GPUs older than every architecture the CUDA release of the installed torch build "
        "compiles for (a V100 under CUDA 13): no image of torch can run there (empty: none)",
    ),
    "release.kernels.torch_toolkit_ptx_only": FactSpec(
        "list",
        "GPUs newer than every architecture whose machine code the CUDA release of torch's "
        "build compiles (sm_120 under CUDA 12.6), with what PyTorch's builds read say about "
        "PTX; also the no-image case where the build is inferred (empty: none)",
    ),
    "release.kernels.family_only": FactSpec(
        "list",
        "objects built for the GPU's architecture family only as another member's "
        "architecture-specific images (sm_120a objects on a 12.1 GPU, sm_100a on 10.3): "
        "their kernels fail with 'no kernel image' here",
    ),
    "release.kernels.published_cuda": FactSpec(
        "int",
        "the CUDA major the judged release's published wheel (PyPI) was built with, read from "
        "the PTX ISA its fat binaries carry (8.x: CUDA 12, 9.x: CUDA 13)",
    ),
    "release.kernels.cuda12_build_family_only": FactSpec(
        "list",
        "when torch's CUDA says the installed vLLM is a CUDA 12 build (the +cu129 wheels and "
        "images, a source build) of a release whose published wheel is a CUDA 13 build: the "
        "objects that wheel runs on this GPU only through another member's family image "
        "(sm_120f on a 12.1 GB10), which vLLM's CMake compiles under CUDA 12 as the "
        "member-specific image (sm_120a) that has none for it (empty: none, or the builds agree)",
    ),
    "release.kernels.cuda12_build_lacks_image": FactSpec(
        "bool",
        "release.kernels.cuda12_build_family_only is not empty (decided across the releases a "
        "nightly may be, where the objects differ but the answer does not)",
    ),
    "release.kernels.exact_arch_guard": FactSpec(
        "list",
        "objects whose kernels carry vLLM's exact-architecture wrapper for another member of "
        "the GPU's family (cutlass::device_kernel<enable_sm120_only> on a 12.1 GB10) in images "
        "that run on the GPU in the installed build (a CUDA 13 build of a CUDA 12 wheel compiles "
        "sm_120f for sm_120a): the wrapper traps there; read from the kernel names the tables "
        "keep (up to 8 objects per group), so an empty list is no proof of absence",
    ),
    "release.kernels.exact_arch_guard_runs": FactSpec(
        "bool",
        "release.kernels.exact_arch_guard is not empty (decided across the releases a nightly "
        "may be, where they agree)",
    ),
    "release.kernels.ptx_beyond_driver": FactSpec(
        "list",
        "objects of the judged release that reach the GPU only as PTX, written by a CUDA "
        "release (read from their PTX ISA version; torch's stated CUDA where it names another "
        "build of the same major) newer than the driver's CUDA: the driver refuses to compile "
        "them ('the provided PTX was compiled with an unsupported toolchain')",
    ),
    "release.kernels.ptx_beyond_driver_any": FactSpec(
        "bool",
        "release.kernels.ptx_beyond_driver is not empty",
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
