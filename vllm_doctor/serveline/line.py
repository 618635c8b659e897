"""The serve-line object every reader produces (``ServeLine``) and the facts it gives."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from vllm_doctor.facts.model import Facts, Source
from vllm_doctor.redact import REDACTED, is_secret_name, redact_value, redact_words
from vllm_doctor.serveline.options import _SPEC_FLAGS, option_spec


@dataclass(frozen=True)
class OptionWord:
    """One option as the user wrote it, for judging it the way a release's parser would."""

    word: str  # the option without its value: "--tensor_parallel_sise", "-tp", "-cc.mode"
    name: str | None  # the option it stands for in some covered release; None: in none
    evidence: str  # the user's words ("serve.yaml:3: tensor-parallel-sise: 2" for a config key)
    origin: str  # "cli" or "config"


@dataclass
class ServeLine:
    tokens: list[str]  # the arguments after `vllm serve` as given (model included)
    model: str | None
    # normalised long name ("tensor-parallel-size") -> effective value (typed)
    options: dict[str, Any] = field(default_factory=dict)
    # long name -> the token(s) as the user wrote them (evidence)
    given: dict[str, str] = field(default_factory=dict)
    # long name -> the value word as given, for options that take one (each release's own
    # reading of it is judged in facts/release_options.py)
    raw_values: dict[str, str] = field(default_factory=dict)
    unknown_flags: list[str] = field(default_factory=list)
    legacy_flags: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    # -- beyond the core API -----------------------------------------------------------
    # long name -> "cli" or "config" (where the effective value came from)
    origins: dict[str, str] = field(default_factory=dict)
    # KEY=VALUE words in front of the command (``CUDA_VISIBLE_DEVICES=0,1 vllm serve ...``)
    env: dict[str, str] = field(default_factory=dict)
    config_path: str | None = None
    # things vLLM itself warns about or would reject, in words
    warnings: list[str] = field(default_factory=list)
    # where each option appears in ``tokens`` (index ranges), for render_command
    spans: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    model_span: tuple[int, int] | None = None
    env_tokens: list[str] = field(default_factory=list)
    entrypoint: str = "serve"  # "serve" or "api_server"
    # a `docker run` / `podman run` command's image, GPUs and /dev/shm (container_run.py)
    container: Any = None
    # what `env -i` / `env -u` / `sudo` in front of vLLM do to its environment and user
    # (serveline/launch.py); None: no such wrapper
    launch: Any = None
    # what an LLM(...) script writes to os.environ before the call (python_call.py)
    script_env: Any = None

    @property
    def image(self) -> str | None:
        return self.container.image if self.container is not None else None

    # option -> why its value is not known though the input sets it (an LLM(...) keyword
    # whose value is a variable: serveline/python_call.py); its facts are missing, not defaults
    not_read: dict[str, str] = field(default_factory=dict)
    # every option word in the order vLLM's parser meets it (command line and config file)
    option_words: list[OptionWord] = field(default_factory=list)
    # option -> why no covered release reads its value as given (the value is kept as a
    # string; each release's own reading is judged in facts/release_options.py)
    unread: dict[str, str] = field(default_factory=dict)
    # the spans as sets, for _add_span
    span_index: dict[str, set[tuple[int, int]]] = field(
        default_factory=dict, repr=False, compare=False
    )

    # -- derived values ----------------------------------------------------------------
    def value(self, name: str, default: Any = None) -> Any:
        spec = option_spec(name)
        key = spec.name if spec else name.lstrip("-")
        return self.options.get(key, default)

    def speculative_config(self) -> dict[str, Any] | None:
        """--speculative-config merged with --spec-method/--spec-model/--spec-tokens."""
        raw = self.options.get("speculative-config")
        config: dict[str, Any] | None = None
        if isinstance(raw, dict):
            config = {str(k).replace("-", "_"): v for k, v in raw.items()}
        for flag, key in _SPEC_FLAGS:
            if flag in self.options and self.options[flag] is not None:
                config = dict(config or {})
                config.setdefault(key, self.options[flag])
        return config

    def to_facts(
        self, facts: Facts, source: str = Source.SERVE, env: Mapping[str, str] | None = None
    ) -> None:
        _to_facts(self, facts, source, env)


# serve.<fact> -> (option, default value or None, reason when there is no default)
_FACT_OPTIONS: dict[str, tuple[str, Any, str | None]] = {
    "tensor_parallel_size": ("tensor-parallel-size", 1, None),
    "pipeline_parallel_size": ("pipeline-parallel-size", 1, None),
    "data_parallel_size": ("data-parallel-size", 1, None),
    "data_parallel_backend": ("data-parallel-backend", "mp", None),
    "api_server_count": (
        "api-server-count",
        None,
        "not given: vLLM starts one API server per data-parallel rank (internal load balancing)",
    ),
    "headless": ("headless", False, None),
    "enable_expert_parallel": ("enable-expert-parallel", False, None),
    "decode_context_parallel_size": ("decode-context-parallel-size", 1, None),
    "quantization": (
        "quantization",
        None,
        "not given: vLLM uses the checkpoint's quantization_config, if any",
    ),
    "dtype": ("dtype", "auto", None),
    "kv_cache_dtype": ("kv-cache-dtype", "auto", None),
    "max_model_len": ("max-model-len", None, "not given: vLLM derives it from the model config"),
    "max_num_seqs": (
        "max-num-seqs",
        None,
        "not given: vLLM picks it for the GPU and usage context",
    ),
    "max_num_batched_tokens": (
        "max-num-batched-tokens",
        None,
        "not given: vLLM picks it for the GPU and usage context",
    ),
    "enforce_eager": ("enforce-eager", False, None),
    "enable_chunked_prefill": (
        "enable-chunked-prefill",
        None,
        "not given: vLLM decides (on by default in the V1 engine)",
    ),
    "trust_remote_code": ("trust-remote-code", False, None),
    "distributed_executor_backend": (
        "distributed-executor-backend",
        None,
        "not given: vLLM picks mp on one node, ray across nodes",
    ),
    "disable_custom_all_reduce": ("disable-custom-all-reduce", False, None),
    "load_format": ("load-format", "auto", None),
    "enable_lora": ("enable-lora", False, None),
    "enable_prefix_caching": (
        "enable-prefix-caching",
        None,
        "not given: vLLM decides (on for decoder models; hybrid Mamba models differ by release)",
    ),
    "mamba_cache_mode": (
        "mamba-cache-mode",
        None,
        "not given: vLLM picks it from prefix caching and the model",
    ),
    "enable_eplb": ("enable-eplb", False, None),
    "enable_auto_tool_choice": ("enable-auto-tool-choice", False, None),
    "tool_call_parser": ("tool-call-parser", None, "not given: no tool-call parser"),
    "reasoning_parser": ("reasoning-parser", None, "not given: no reasoning parser"),
}


# the facts a JSON option sets, left unknown when its value is unread
_UNREAD_JSON_FACTS = {
    "speculative-config": (
        "serve.speculative_config",
        "serve.speculative_method",
        "serve.num_speculative_tokens",
        "serve.speculative_model",
    ),
    "compilation-config": ("serve.compilation_config", "serve.cudagraph_mode"),
    "attention-config": ("serve.attention_config", "serve.attention_backend"),
    "hf-overrides": ("serve.hf_overrides",),
}


def _unread_reason(line: ServeLine, option: str) -> str:
    why = "not of a kind they read" if is_secret_name(option) else line.unread[option]
    return (
        f"`{_redact_evidence(line.given.get(option))}`: no covered vLLM release reads this "
        f"value ({why}); a newer release may"
    )


# the lines parsed in this process by their redacted words (serve.argv): what the release
# facts judge, secrets included, without the secrets ever being facts
_PARSED: dict[tuple[str, ...], ServeLine] = {}
_PARSED_MAX = 64


def _remember(argv: list[str], line: ServeLine) -> None:
    if len(_PARSED) >= _PARSED_MAX:
        _PARSED.pop(next(iter(_PARSED)))
    _PARSED[tuple(argv)] = line


def parsed_line(argv: tuple[str, ...]) -> ServeLine | None:
    """The line this process parsed whose redacted words are ``argv`` (None: not parsed
    here, as for facts read back from JSON)."""
    return _PARSED.get(tuple(argv))


def _gpu_memory_default(facts: Facts) -> tuple[float, str]:
    from packaging.version import InvalidVersion, Version

    version = facts.value("vllm.base_release") or facts.value("vllm.version")
    note = "0.92 since vLLM 0.20.0, 0.9 before"
    if version:
        try:
            if Version(str(version)) < Version("0.20.0.dev0"):
                return 0.9, f"default for vLLM {version} ({note})"
            return 0.92, f"default for vLLM {version} ({note})"
        except InvalidVersion:
            pass
    return 0.92, f"default of current vLLM ({note})"


def _redact_secret_values(tokens: list[str]) -> list[str]:
    """The serve words with every secret hidden (``vllm_doctor.redact.redact_words``)."""
    return redact_words(tokens)


def _redact_evidence(text: str | None) -> str | None:
    """The user's words behind a fact (``--api-key K1 K2``), secrets hidden."""
    return " ".join(redact_words(text.split(" "))) if text else text


class _RedactingFacts:
    """Facts seen through redaction: every serve fact's value and evidence is cleaned."""

    def __init__(self, facts: Facts):
        self._facts = facts

    def set(self, path: str, value: Any, source: str, detail: str | None = None) -> None:
        self._facts.set(
            path, redact_value(value, path.rsplit(".", 1)[-1]), source, _redact_evidence(detail)
        )

    def __getattr__(self, name: str) -> Any:
        return getattr(self._facts, name)


def _to_facts(line: ServeLine, facts: Facts, source: str, env: Mapping[str, str] | None) -> None:
    facts = _RedactingFacts(facts)  # type: ignore[assignment]

    def src(name: str) -> str:
        if line.origins.get(name) == "config":
            return Source.SERVE_CONFIG if source == Source.SERVE else source
        return source

    def put(path: str, name: str, value: Any) -> None:
        facts.set(path, value, src(name), line.given.get(name))

    argv = _redact_secret_values(list(line.tokens))
    facts.set("serve.argv", argv, source)
    if line.container is not None:
        from vllm_doctor.serveline.container_run import container_facts

        container_facts(line.container, facts, source)
    if line.launch is not None:
        from vllm_doctor.serveline.launch import set_aside_for_launch

        set_aside_for_launch(line.launch, facts)
    _remember(argv, line)
    if line.model is not None:
        facts.set("serve.model", line.model, src("model"), line.given.get("model"))
    else:
        facts.mark_missing("serve.model", "no model in the serve line")
    facts.set("serve.flags", sorted(n for n in line.given if n != "model"), source)
    facts.set("serve.unknown_flags", [_redact_evidence(f) for f in line.unknown_flags], source)
    facts.set("serve.legacy_flags", list(line.legacy_flags), source)

    for fact, (option, default, _reason) in _FACT_OPTIONS.items():
        path = f"serve.{fact}"
        if option in line.unread:
            facts.mark_missing(path, _unread_reason(line, option))
        elif option == "max-model-len" and line.options.get(option) == -1:
            facts.mark_missing(
                path,
                f"`{line.given.get(option)}`: vLLM fits the length to "
                "the KV-cache memory at start-up",
            )
        elif option in line.options and line.options[option] is not None:
            put(path, option, line.options[option])
        elif default is not None:
            facts.set(path, default, Source.DEFAULT, "not given")
        # else: not given and no fixed default — absent (vLLM decides at start-up)

    if "gpu-memory-utilization" in line.unread:
        facts.mark_missing(
            "serve.gpu_memory_utilization", _unread_reason(line, "gpu-memory-utilization")
        )
    elif "gpu-memory-utilization" in line.options:
        put(
            "serve.gpu_memory_utilization",
            "gpu-memory-utilization",
            line.options["gpu-memory-utilization"],
        )
    else:
        value, detail = _gpu_memory_default(facts)
        facts.set("serve.gpu_memory_utilization", value, Source.DEFAULT, detail)

    tp = facts.value("serve.tensor_parallel_size", 1)
    pp = facts.value("serve.pipeline_parallel_size", 1)
    pcp = line.options.get("prefill-context-parallel-size") or 1
    if all(isinstance(x, int) for x in (tp, pp, pcp)):
        given_any = any(
            n in line.options
            for n in (
                "tensor-parallel-size",
                "pipeline-parallel-size",
                "prefill-context-parallel-size",
            )
        )
        facts.set(
            "serve.world_size",
            tp * pp * pcp,
            Source.DERIVED if given_any else Source.DEFAULT,
            "tensor × pipeline × prefill-context parallel size",
        )

    # speculative decoding
    spec_conf = line.speculative_config()
    spec_names = [
        n for n in ("speculative-config", *(flag for flag, _ in _SPEC_FLAGS)) if n in line.given
    ]
    spec_detail = " ".join(line.given[n] for n in spec_names) or None
    spec_src = src(spec_names[0]) if spec_names else source
    if spec_conf is not None:
        facts.set("serve.speculative_config", spec_conf, spec_src, spec_detail)
        for key, path in (
            ("method", "serve.speculative_method"),
            ("num_speculative_tokens", "serve.num_speculative_tokens"),
            ("model", "serve.speculative_model"),
        ):
            if spec_conf.get(key) is not None:
                facts.set(path, spec_conf[key], spec_src, spec_detail)

    # compilation / CUDA graphs
    comp = line.options.get("compilation-config")
    if isinstance(comp, dict):
        put("serve.compilation_config", "compilation-config", comp)
    mode = comp.get("cudagraph_mode") if isinstance(comp, dict) else None
    if line.options.get("enforce-eager") is True:
        # VllmConfig: enforce_eager sets cudagraph_mode NONE whatever the compilation config says
        detail = "--enforce-eager turns CUDA graphs off"
        if isinstance(mode, str) and mode:
            detail += f" (compilation_config.cudagraph_mode={mode} is overridden)"
        facts.set("serve.cudagraph_mode", "NONE", Source.DERIVED, detail)
    elif isinstance(mode, str) and mode:
        put("serve.cudagraph_mode", "compilation-config", mode.upper())
    elif isinstance(comp, dict) and comp.get("full_cuda_graph") is True:
        put("serve.cudagraph_mode", "compilation-config", "FULL")
    if "optimization-level" in line.options:
        put(
            "serve.optimization_level",
            "optimization-level",
            str(line.options["optimization-level"]),
        )

    if line.options.get("moe-backend"):
        put("serve.moe_backend", "moe-backend", str(line.options["moe-backend"]).lower())

    # attention backend
    attn = line.options.get("attention-config")
    if isinstance(attn, dict):
        put("serve.attention_config", "attention-config", attn)
    # of the caller's environment, what the wrappers (env -i, sudo) and a container run (only
    # `-e KEY`) pass on to vLLM
    gates = [gate for gate in (line.launch, line.container) if gate is not None]
    merged_env = {
        name: value
        for name, value in (env or {}).items()
        if all(gate.passes_on(name) for gate in gates)
    }
    merged_env.update(line.env)
    if line.script_env is not None:
        merged_env = line.script_env.environ_of(merged_env)
    if line.options.get("attention-backend"):
        put("serve.attention_backend", "attention-backend", str(line.options["attention-backend"]))
        facts.set("serve.attention_backend_source", "--attention-backend", source)
    elif isinstance(attn, dict) and attn.get("backend"):
        put("serve.attention_backend", "attention-config", str(attn["backend"]))
        facts.set("serve.attention_backend_source", "--attention-config", source)
    elif merged_env.get("VLLM_ATTENTION_BACKEND"):
        from_line = "VLLM_ATTENTION_BACKEND" in line.env or (
            line.script_env is not None and "VLLM_ATTENTION_BACKEND" in line.script_env.assigned
        )
        facts.set(
            "serve.attention_backend",
            merged_env["VLLM_ATTENTION_BACKEND"],
            source if from_line else Source.ENV,
            f"VLLM_ATTENTION_BACKEND={merged_env['VLLM_ATTENTION_BACKEND']}",
        )
        facts.set(
            "serve.attention_backend_source",
            "VLLM_ATTENTION_BACKEND",
            source if from_line else Source.ENV,
        )

    hf = line.options.get("hf-overrides")
    if isinstance(hf, dict):
        put("serve.hf_overrides", "hf-overrides", hf)

    # a JSON option whose value no covered release reads: what it would set is not known
    for option, paths in _UNREAD_JSON_FACTS.items():
        if option in line.unread:
            for path in paths:
                if path not in facts.values:
                    facts.mark_missing(path, _unread_reason(line, option))

    for key, given in line.env.items():
        shown = REDACTED if is_secret_name(key) else given
        facts.set(f"env.{key}", shown, source, f"{key}={shown} before the command")
    if line.script_env is not None:
        line.script_env.write_facts(facts, source)

    by_option = {option: f"serve.{name}" for name, (option, _, _) in _FACT_OPTIONS.items()}
    for option, why in line.not_read.items():
        unknown = [by_option.get(option, f"serve.{option.replace('-', '_')}")]
        if option in ("tensor-parallel-size", "pipeline-parallel-size"):
            unknown.append("serve.world_size")
        for path in ["serve.model"] if option == "model" else unknown:
            facts.values.pop(path, None)
            facts.mark_missing(path, why)
