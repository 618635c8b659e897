"""config.json and the weights' size from the Hugging Face Hub, for a model id that is not
in the local cache (``huggingface_hub``, imported only here).

What is fetched: the repository's file list (one API call, with sizes), then only the small
files vLLM reads to build its model config — ``config.json``, ``hf_quant_config.json``
(ModelOpt) — and the safetensors index; the weights' dtypes come from the safetensors headers
(byte ranges, ``get_safetensors_metadata``). Never a weight. The files land in the Hugging
Face cache the doctor reads, so the next run finds them there and asks nothing.

Honoured as huggingface_hub and vLLM honour them: ``HF_ENDPOINT``, ``HF_TOKEN`` (and the
token ``huggingface-cli login`` stored), ``HF_HUB_OFFLINE``, the cache location
(``HF_HUB_CACHE``, ``HF_HOME``). ``--offline`` forbids the fetch. Each request waits at most
``TIMEOUT`` seconds. An unreachable Hub, a gated or missing model is a reason on the model
facts that stay unknown (``HubUnavailable``), never a failure of the run.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vllm_doctor.redact import redact_text

TIMEOUT = 5.0  # seconds per request: a CI runner without network must not wait long
# the files beside config.json that vLLM (and the doctor's reader) use to build the model
# config; the index gives the weights' total size
SIDE_FILES = ("hf_quant_config.json", "model.safetensors.index.json")
_REPO_ID = re.compile(r"[A-Za-z0-9][\w.-]{0,95}/[\w.-]{1,96}")
_TRUE = ("1", "on", "yes", "true")
_DTYPE_BYTES = {
    "F64": 8,
    "I64": 8,
    "F32": 4,
    "I32": 4,
    "BF16": 2,
    "F16": 2,
    "I16": 2,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "I8": 1,
    "U8": 1,
    "BOOL": 1,
}


class HubUnavailable(Exception):
    """Why the Hub gave nothing (the reason shown on the undecided model facts)."""


@dataclass
class HubModel:
    repo_id: str
    revision: str
    config_path: Path
    weights_bytes: int | None = None
    weights_how: str = ""
    dtypes: dict[str, int] = field(default_factory=dict)  # safetensors dtype → parameters

    @property
    def where(self) -> str:
        return f"Hub: {self.repo_id}@{self.revision[:12]}"


def looks_like_repo_id(model_id: str) -> bool:
    return bool(_REPO_ID.fullmatch(model_id)) and ".." not in model_id


def offline_reason(environ: Mapping[str, str], offline: bool) -> str | None:
    if offline:
        return "--offline: the Hub was not asked"
    if str(environ.get("HF_HUB_OFFLINE", "")).strip().lower() in _TRUE:
        return "HF_HUB_OFFLINE is set: the Hub was not asked"
    return None


def _token(environ: Mapping[str, str]) -> str | None:
    token = environ.get("HF_TOKEN") or environ.get("HUGGING_FACE_HUB_TOKEN")
    if token:
        return token
    try:  # the token `hf auth login` stored (HF_HOME/token)
        from huggingface_hub import get_token

        return get_token()
    except Exception:
        return None


def fetch_model(
    repo_id: str, cache: Path, environ: Mapping[str, str], timeout: float = TIMEOUT
) -> HubModel:
    """config.json (and the side files) of ``repo_id`` into ``cache``; HubUnavailable if not."""
    try:
        from huggingface_hub import HfApi, errors, hf_hub_download
    except ImportError as err:  # a dependency; only a broken install lacks it
        raise HubUnavailable(f"huggingface_hub is not installed ({err})") from None
    endpoint = (environ.get("HF_ENDPOINT") or "").rstrip("/") or None
    token = _token(environ)
    # an endpoint may carry credentials (https://user:pass@mirror): never in a reason
    shown = redact_text(endpoint or "https://huggingface.co")
    api = HfApi(endpoint=endpoint, token=token or False)
    try:
        info = api.model_info(repo_id, files_metadata=True, timeout=timeout)
        revision = str(info.sha)
        files = {s.rfilename: s.size for s in info.siblings or ()}
        if "config.json" not in files:
            raise HubUnavailable(f"{repo_id} on the Hub ({shown}) has no config.json")
        paths = {
            name: Path(
                hf_hub_download(
                    repo_id,
                    name,
                    revision=revision,
                    cache_dir=cache,
                    endpoint=endpoint,
                    token=token or False,
                    etag_timeout=timeout,
                )
            )
            for name in ("config.json", *SIDE_FILES)
            if name in files
        }
    except errors.GatedRepoError:
        raise HubUnavailable(
            f"{repo_id} is gated on the Hub ({shown}): accept its license "
            "and set HF_TOKEN" + (" (the token given has no access)" if token else "")
        ) from None
    except errors.RepositoryNotFoundError:
        raise HubUnavailable(
            f"{repo_id} is not on the Hub ({shown}), or is private (set HF_TOKEN)"
        ) from None
    except errors.HfHubHTTPError as err:
        raise HubUnavailable(f"the Hub ({shown}) refused: {_first_line(err)}") from None
    except HubUnavailable:
        raise
    except Exception as err:  # network: DNS, refused, timeout, proxy
        raise HubUnavailable(
            f"the Hub ({shown}) could not be reached: {type(err).__name__}: {_first_line(err)}"
        ) from None
    model = HubModel(repo_id, revision, paths["config.json"])
    shards = [name for name in files if name.endswith(".safetensors")]
    if (
        shards
        and all(files[name] for name in shards)
        and "model.safetensors.index.json" not in paths
    ):
        model.weights_bytes = sum(files[name] or 0 for name in shards)
        model.weights_how = f"{len(shards)} safetensors file(s) on the Hub"
    if shards:
        model.dtypes = _dtypes(api, repo_id, revision, timeout)
    return model


def _dtypes(api: Any, repo_id: str, revision: str, timeout: float) -> dict[str, int]:
    """Parameters per dtype from the safetensors headers (byte ranges, no weights); {} when
    the headers cannot be read (they only describe, the size comes from the file list)."""
    try:
        meta = api.get_safetensors_metadata(repo_id, revision=revision, timeout=timeout)
    except Exception:
        return {}
    return {str(k): int(v) for k, v in (meta.parameter_count or {}).items()}


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return redact_text(text[0][:200]) if text else type(err).__name__
