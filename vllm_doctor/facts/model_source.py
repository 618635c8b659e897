"""Where the model's Hugging Face ``config.json`` comes from, and the collector that reads it
(``collect_model``); facts/model_config.py reads the config into ``model.*``.

In order:
  1. ``--model-config PATH`` (a config.json or a model directory). Missing or not valid JSON is an
     ``InputError``: the user named it.
  2. the model given to ``vllm serve`` when it is a local directory;
  3. the Hugging Face cache: ``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else
     ``$XDG_CACHE_HOME/huggingface/hub``, else ``~/.cache/huggingface/hub``, in
     ``models--ORG--NAME/snapshots/<rev>/config.json`` (the snapshot ``refs/main`` names, else
     the newest one that has a config.json).
  4. the Hugging Face Hub, for an ORG/NAME id the cache lacks (``check`` asks by default;
     ``--offline`` or ``HF_HUB_OFFLINE`` forbid it): config.json and the small files beside it
     land in the doctor's own cache (facts/hub_cache.py), never in the Hugging Face cache, so
     the next run reads them there (facts/hub.py).
When only the model id is known, hints are inferred from the name (quantization, family) with
``Source.INFERRED`` and ``model.inferred = True``; everything else under ``model`` is marked
missing with how to supply it.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vllm_doctor.errors import InputError
from vllm_doctor.facts.model import Facts, Source
from vllm_doctor.facts.model_config import read_model_config

MAX_MODEL_ID = 4096  # PATH_MAX on Linux


# -- locating the config -----------------------------------------------------------------


def names_a_path(model: str | None) -> bool:
    """The serve line's model is a path (absolute, relative or from home), not a Hub id."""
    return bool(model) and str(model).startswith(("/", "./", "../", "~"))


def _expanded(path: str) -> Path:
    try:
        return Path(path).expanduser()
    except RuntimeError:  # `~nosuchuser/...`: as written (it will not exist)
        return Path(path)


def hf_hub_cache(environ: Mapping[str, str]) -> Path:
    if environ.get("HF_HUB_CACHE"):
        return _expanded(environ["HF_HUB_CACHE"])
    if environ.get("HUGGINGFACE_HUB_CACHE"):
        return _expanded(environ["HUGGINGFACE_HUB_CACHE"])
    if environ.get("HF_HOME"):
        return _expanded(environ["HF_HOME"]) / "hub"
    if environ.get("XDG_CACHE_HOME"):
        return _expanded(environ["XDG_CACHE_HOME"]) / "huggingface" / "hub"
    home = environ.get("HOME") or str(Path.home())
    return Path(home) / ".cache" / "huggingface" / "hub"


def find_in_hf_cache(model_id: str, cache: Path) -> Path | None:
    """config.json of ``model_id`` in the HF cache, or None."""
    if model_id.count("/") != 1:
        return None
    folder = "models--" + model_id.replace("/", "--")
    repo = cache / folder
    if not repo.is_dir():
        try:  # the cache keeps the case the model was first asked for
            lowered = folder.lower()
            repo = next((p for p in cache.iterdir() if p.name.lower() == lowered), repo)
        except OSError:
            return None
    snapshots = repo / "snapshots"
    if not snapshots.is_dir():
        return None
    from vllm_doctor.bounds import read_text

    try:
        ref = read_text(repo / "refs" / "main", "ref file", "json", errors="replace").strip()
    except InputError:  # missing, not a regular file, too large
        ref = ""
    if ref and (snapshots / ref / "config.json").is_file():
        return snapshots / ref / "config.json"
    candidates = [p / "config.json" for p in snapshots.iterdir() if (p / "config.json").is_file()]
    if not candidates:
        return None
    return max(candidates, key=lambda p: p.parent.stat().st_mtime)


def load_config_json(path: Path, explicit: bool) -> dict[str, Any]:
    from vllm_doctor import bounds

    try:
        # NaN/Infinity in a config.json: unknown values, not a refused file
        data = bounds.json_loads(bounds.read_text(path, "config.json", "json"), non_finite="null")
    except InputError as err:
        if explicit:
            raise
        raise ValueError(err.problem) from None
    except json.JSONDecodeError as err:
        if explicit:
            raise InputError(str(path), f"not valid JSON: {err.msg} (line {err.lineno})") from None
        raise
    except ValueError as err:  # bounds.ValueBoundsError, or an integer of over 4300 digits
        if explicit:
            raise InputError(str(path), f"the config.json {err}") from None
        raise
    if not isinstance(data, dict):
        if explicit:
            raise InputError(str(path), "not a config.json: the top level is not an object")
        raise ValueError(f"{path}: the top level is not an object")
    return data


# -- inference from the name ---------------------------------------------------------------

_NAME_QUANT = [  # (regex on the lower-cased id, scheme, quant_method or None)
    (r"nvfp4", "nvfp4", None),
    (r"mxfp4", "mxfp4", "mxfp4"),
    (r"fp8[-_]?dynamic", "fp8-dynamic", None),
    (r"w4a16", "w4a16", None),
    (r"w4a8", "w4a8", None),
    (r"w8a8|int8", "w8a8-int8", None),
    (r"fp8", "fp8", None),
    (r"\bawq\b|[-_]awq", "awq", "awq"),
    (r"gptq", "gptq", "gptq"),
    (r"bnb|bitsandbytes", "bnb", "bitsandbytes"),
    (r"gpt-oss", "mxfp4", "mxfp4"),  # gpt-oss checkpoints ship MXFP4 MoE weights
]


_NAME_FAMILY = [
    (r"diffusion-?gemma", "diffusion_gemma"),
    (r"gemma-?4", "gemma4"),
    (r"gemma-?3", "gemma3"),
    (r"deepseek-v3\.2|deepseek-v32", "deepseek_v32"),
    (r"deepseek-v4", "deepseek_v4"),
    (r"deepseek-(v3|r1)", "deepseek_v3"),
    (r"qwen3\.5", "qwen3_5"),
    (r"qwen3", "qwen3"),
    (r"qwen2", "qwen2"),
    (r"llama", "llama"),
    (r"gpt-oss", "gpt_oss"),
    (r"phi-?3", "phi3"),
    (r"mixtral", "mixtral"),
    (r"mistral", "mistral"),
    (r"glm-?5", "glm5"),
]


def infer_from_name(facts: Facts, model_id: str) -> None:
    name = model_id.lower()
    detail = f"model id {model_id}"
    for pattern, scheme, method in _NAME_QUANT:
        if re.search(pattern, name):
            facts.set("model.quant_scheme", scheme, Source.INFERRED, detail)
            if method:
                facts.set("model.quant_method", method, Source.INFERRED, detail)
            break
    for pattern, family in _NAME_FAMILY:
        if re.search(pattern, name):
            facts.set("model.family", family, Source.INFERRED, detail)
            break
    facts.set("model.inferred", True, Source.INFERRED, detail)


# -- the collector -------------------------------------------------------------------------


def collect_model(
    facts: Facts,
    model_config: Path | None = None,
    model_id: str | None = None,
    cwd: Path | None = None,
    environ: Mapping[str, str] | None = None,
    use_hf_cache: bool = True,
    hub: bool = False,
    offline: bool = False,
) -> None:
    """Write model.* from the best config.json available (see the module docstring);
    ``hub``: ask the Hugging Face Hub for a model id the cache lacks (unless ``offline``)."""
    env = os.environ if environ is None else environ
    base = cwd or Path.cwd()
    if model_id:
        facts.set("model.id", model_id, Source.SERVE)

    if model_config is not None:
        from vllm_doctor.bounds import expand_path

        path = expand_path(model_config, "--model-config")
        if not path.is_absolute():
            path = base / path
        if path.is_dir():
            path = path / "config.json"
            if not path.is_file():
                raise InputError(str(model_config), "no config.json in this directory")
        elif not path.exists():
            raise InputError(str(model_config), "no such file or directory")
        cfg = load_config_json(path, explicit=True)
        if not model_id:
            facts.set("model.id", str(model_config), Source.USER, "--model-config")
        read_model_config(facts, path, cfg, f"--model-config {model_config}")
        return

    if not model_id:
        facts.mark_missing(
            "model",
            "no model given: pass --model-config PATH or the serve line "
            "(`-- vllm serve MODEL ...`)",
        )
        return

    # a Hub id is at most 96 characters, a path at most PATH_MAX with 255-byte names: anything
    # longer cannot name a model (and the file system would refuse to look it up)
    if len(model_id) > MAX_MODEL_ID or any(
        len(part.encode()) > 255 for part in model_id.split("/")
    ):
        raise InputError(
            "serve line",
            f"the model is {len(model_id):,} characters long "
            f"({model_id[:40]!r}…): not a model id or a path",
        )
    try:
        local = Path(model_id).expanduser()
    except RuntimeError:  # `~nosuchuser/model`: not a local directory
        local = Path(model_id)
    if not local.is_absolute():
        local = base / local
    if local.is_dir():
        path = local / "config.json"
        if path.is_file():
            try:
                cfg = load_config_json(path, explicit=False)
            except (OSError, ValueError) as err:
                facts.mark_missing("model", f"{path} could not be read: {err}")
                return
            read_model_config(facts, path, cfg, str(path))
            return
        facts.mark_missing("model", f"the local model directory {local} has no config.json")
        return
    if local.is_file():
        facts.mark_missing(
            "model",
            f"{local} is a file, not a model directory (GGUF and single "
            "files are not read): pass --model-config PATH",
        )
        return

    if use_hf_cache:
        cache = hf_hub_cache(env)
        cached = find_in_hf_cache(model_id, cache)
        if cached is not None:
            try:
                cfg = load_config_json(cached, explicit=False)
            except (OSError, ValueError) as err:
                facts.mark_missing("model", f"{cached} could not be read: {err}")
                return
            read_model_config(facts, cached, cfg, f"HF cache {cached.parent.name[:12]}")
            return
        where = f"not in the Hugging Face cache ({cache})"
        if hub:
            why_not = _from_hub(facts, model_id, env, offline)
            if why_not is None:
                return
            where += f"; {why_not}"
    else:
        where = "the Hugging Face cache was not searched"
    infer_from_name(facts, model_id)
    facts.mark_missing(
        "model",
        f"config.json of {model_id}: {where}; only hints from the name "
        "are known — pass --model-config PATH (a config.json or model "
        "directory)",
    )


def _from_hub(facts: Facts, model_id: str, environ: Mapping[str, str], offline: bool) -> str | None:
    """Read the model's config from the Hub (facts/hub.py); None when done, else why not."""
    from vllm_doctor.facts import hub

    if not hub.looks_like_repo_id(model_id):
        return "not a Hub model id (ORG/NAME)"
    try:  # the doctor's own cache, else the Hub unless offline (never into the HF cache)
        revision = hub.given_revision(facts.value("serve.argv"))
        model = hub.hub_model(model_id, environ, offline=offline, revision=revision)
        cfg = load_config_json(model.config_path, explicit=False)
    except hub.HubUnavailable as err:
        return str(err)
    except (OSError, ValueError) as err:
        return f"config.json from the Hub could not be read: {err}"
    read_model_config(facts, model.config_path, cfg, model.where)
    if "model.weights_bytes" not in facts and not model.weights_bytes and model.weights_missing:
        facts.mark_missing("model.weights_bytes", model.weights_missing)
    if "model.weights_bytes" not in facts and model.weights_bytes:
        facts.set(
            "model.weights_bytes",
            model.weights_bytes,
            Source.CONFIG,
            f"{model.where}: {model.weights_how}",
        )
    if model.dtypes:
        facts.set(
            "model.weights_dtypes",
            sorted(model.dtypes),
            Source.CONFIG,
            f"{model.where}: safetensors headers ({', '.join(f'{k} {v}' for k, v in sorted(model.dtypes.items()))} parameters)",
        )
    return None
