"""The model's maximum context as vLLM derives it from the config.json that was read
(``_get_and_verify_max_len``: the smallest length key, RoPE scaling, ``--hf-overrides``).
"""

from __future__ import annotations

from typing import Any

from vllm_doctor.errors import InputError
from vllm_doctor.facts.model import Facts
from vllm_doctor.facts.model_config import _int, text_config_of

# -- the context length vLLM derives --------------------------------------------------------

_MAX_LEN_KEYS = (
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "model_max_length",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
)


def model_max_len(facts: Facts) -> tuple[int, str] | None:
    """(length, how) of the model's maximum context as vLLM derives it from the config.json
    that was read (``--hf-overrides`` applied); without the file, ``model.max_position_embeddings``;
    None when neither is known."""
    path = facts.value("model.config_path")
    if path:
        from vllm_doctor import bounds

        try:
            cfg = bounds.json_loads(
                bounds.read_text(path, "config.json", "json"), non_finite="null"
            )
        except (InputError, ValueError):
            cfg = None
        if isinstance(cfg, dict):
            overrides = facts.value("serve.hf_overrides")
            length, how = derived_max_model_len(
                cfg, overrides if isinstance(overrides, dict) else None
            )
            if length is not None:
                return length, how
    value = facts.value("model.max_position_embeddings")
    if value is None:
        return None
    return int(value), f"max_position_embeddings {value}"


def derived_max_model_len(
    cfg: dict[str, Any], overrides: dict[str, Any] | None = None
) -> tuple[int | None, str]:
    """The maximum context vLLM derives from a config (``_get_and_verify_max_len``).

    The smallest of the length keys of the text config, times the RoPE scaling factor for
    scaling types that extend the context (not ``su``/``longrope``/``llama3``; YaRN scales
    ``original_max_position_embeddings``; Gemma 3 is already scaled). ``overrides`` are
    ``--hf-overrides`` applied on top. Returns (length or None, how it was derived).
    """
    cfg = dict(cfg)
    if overrides:
        cfg.update(overrides)
    text, _ = text_config_of(cfg)
    if overrides and text is not cfg:
        text = dict(text)
        text.update(
            {
                k: v
                for k, v in overrides.items()
                if k in _MAX_LEN_KEYS or k in ("rope_scaling", "rope_parameters")
            }
        )
    found: list[tuple[str, int]] = []
    for key in _MAX_LEN_KEYS:
        value = _int(text.get(key, cfg.get(key)))
        if value is not None:
            found.append((key, value))
    if not found:
        return None, "no context-length key in config.json"
    key, length = min(found, key=lambda kv: kv[1])
    how = f"{key} {length}"
    rope = text.get("rope_scaling") or cfg.get("rope_scaling")
    if not isinstance(rope, dict):
        params = text.get("rope_parameters") or cfg.get("rope_parameters")
        rope = params if isinstance(params, dict) and "rope_type" in params else None
    model_type = str(cfg.get("model_type") or "")
    if rope and "gemma3" not in model_type:
        rope_type = str(rope.get("rope_type") or rope.get("type") or "default")
        if rope_type not in ("su", "longrope", "llama3"):
            factor = rope.get("factor", 1.0)
            try:
                factor = float(factor)
            except (TypeError, ValueError):
                factor = 1.0
            if rope_type == "yarn" and (
                original := _int(rope.get("original_max_position_embeddings"))
            ):
                length = original
                how = f"original_max_position_embeddings {length}"
            if factor != 1.0:
                length = int(length * factor)
                how += f" × {rope_type} factor {factor:g}"
    return length, how
