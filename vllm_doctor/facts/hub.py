"""config.json and the weights' size from the Hugging Face Hub, for a model id that is not in
the local Hugging Face cache — fetched by a small bounded client of the doctor's own into a
private cache of the doctor's own.

What is asked: the repository's file list at one revision (one API call, with sizes), then
only the small files vLLM reads to build its model config — ``config.json``,
``hf_quant_config.json`` (ModelOpt) — and the safetensors index (the weights' total size);
the weights' dtypes come from the safetensors headers (byte ranges). Never a weight.

Why not ``huggingface_hub``'s download functions: they name cache files after what the
server answers (the ETag, the commit of ``X-Repo-Commit``) without checking it, so a hostile
``HF_ENDPOINT`` chooses where a file lands and what it holds (a ``.pth`` written that way ran
in the next Python); they bound each read, not a whole download, so a server that sends a byte
every few seconds holds the run for ever; they write a file before its size is judged; and a
list of 5,000 shards is 5,000 header requests. Two small JSON files do not need that machinery.
The transport (facts/hub_client.py) and the cache (facts/hub_cache.py) bound every request and
choose every file name: see there, and docs/hardening.md for the threat model. In short:
file names are never taken from an answer (``<cache>/hub/<digest of endpoint and
repository>/<commit>/config.json``, where the commit is the revision the user gave or the Hub's
answer checked to be a 40-hex commit hash, anything else a malformed answer); a deadline per
request and per run; size limits (``LIMITS``) enforced while reading; at most
``hub_client.MAX_REQUESTS`` requests per run and the headers of at most ``MAX_SHARDS``
safetensors files.

A Hub that cannot be reached, is too slow, too large or asks for too many requests, a gated or
missing model: a reason on the model facts that stay unknown (``HubUnavailable``), never a
failure of the run. An answer that is not what the Hub answers (not JSON, not a commit hash,
a config.json that is not an object): bad input, exit 2 (``HubAnswerError``), as the same
bytes given with --model-config would be. ``--offline`` (or ``HF_HUB_OFFLINE``) sends nothing
and reads the doctor's cache only.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from vllm_doctor.facts.hub_cache import COMMIT, SIDE_FILES, Cache, Fetched, HubModel
from vllm_doctor.facts.hub_client import (
    TIMEOUT_ENV,
    TRUE,
    Answer,
    Client,
    HubAnswerError,
    HubUnavailable,
    MiB,
    TooLarge,
    endpoint_of,
    in_time,
    reset_budget,
    run_budget,
    token_for,
)
from vllm_doctor.redact import redact_text

__all__ = [  # what callers use; the rest is this module's own
    "TIMEOUT_ENV",
    "HubAnswerError",
    "HubModel",
    "HubUnavailable",
    "given_revision",
    "hub_model",
    "looks_like_repo_id",
    "offline_reason",
    "reset_budget",
]

MAX_SHARDS = 16  # safetensors headers read for the dtypes (they only describe)
LIMITS = {  # the largest answer kept for each request, checked while it is read
    "api": 16 * MiB,  # the file list of a repository (5,000 files are ~1 MiB)
    "config.json": 32 * MiB,  # as for a local config.json (bounds.FILE_LIMITS["json"])
    "hf_quant_config.json": 32 * MiB,
    "model.safetensors.index.json": 32 * MiB,
    "header": 16 * MiB,  # one safetensors header (a large shard's is a few MiB)
}
HEADER_PROBE = 64 * 1024  # the first range asked of a safetensors file: most headers fit
INDEX = "model.safetensors.index.json"
_REPO_ID = re.compile(r"[A-Za-z0-9][\w.-]{0,95}/[\w.-]{1,96}")
_SHARD = re.compile(r"[\w.+-]{1,200}(?:/[\w.+-]{1,200}){0,3}\.safetensors")
_DTYPE_BYTES = {
    "F64": 8,
    "I64": 8,
    "U64": 8,
    "F32": 4,
    "I32": 4,
    "U32": 4,
    "BF16": 2,
    "F16": 2,
    "I16": 2,
    "U16": 2,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "F8_E8M0": 1,
    "I8": 1,
    "U8": 1,
    "BOOL": 1,
    "F4": 1,
}


def looks_like_repo_id(model_id: str) -> bool:
    return bool(_REPO_ID.fullmatch(model_id)) and ".." not in model_id


def offline_reason(environ: Mapping[str, str], offline: bool) -> str | None:
    if offline:
        return "--offline: the Hub was not asked"
    if str(environ.get("HF_HUB_OFFLINE", "")).strip().lower() in TRUE:
        return "HF_HUB_OFFLINE is set: the Hub was not asked"
    return None


def given_revision(argv: Any) -> str | None:
    """The ``--revision`` of a serve line's words (vLLM reads the config at it), if any."""
    if not isinstance(argv, (list, tuple)):
        return None
    from vllm_doctor.serveline.options import resolve_flag

    words = [str(w) for w in argv]
    for i, word in enumerate(words):
        if not word.startswith("--") or word == "--":
            continue
        spec = resolve_flag(word)
        if spec is None or spec.name != "revision":
            continue
        if "=" in word:
            return word.split("=", 1)[1] or None
        return words[i + 1] if i + 1 < len(words) else None
    return None


# -- the model ------------------------------------------------------------------------------------


def hub_model(
    repo_id: str, environ: Mapping[str, str], offline: bool = False, revision: str | None = None
) -> HubModel:
    """The model's config.json (and what the Hub says of its weights) from the doctor's cache,
    else from the Hub unless offline; HubUnavailable with the reason when neither has it."""
    endpoint = endpoint_of(environ)
    cache = Cache.open(environ, endpoint, repo_id)
    cached = cache.find(revision or "main") if cache is not None else None
    reason = offline_reason(environ, offline)
    if cached is not None and (reason is not None or cached[1]):
        return cached[0]
    if reason is not None:
        raise HubUnavailable(reason)
    try:
        fetched = in_time(lambda: _fetch(repo_id, endpoint, environ, revision))
    except HubUnavailable:
        if cached is not None:  # a branch asked again: the older answer still holds
            return cached[0]
        raise
    if cache is not None:
        with contextlib.suppress(OSError):  # a full or read-only disk: this run's copy only
            return cache.store(revision or "main", fetched)
    return Cache.temporary(endpoint, repo_id).store(revision or "main", fetched)


def _fetch(
    repo_id: str, endpoint: str, environ: Mapping[str, str], revision: str | None
) -> Fetched:
    client = Client(endpoint, token_for(environ), run_budget(), environ)
    shown = client.shown
    repo = "/".join(quote(part, safe="") for part in repo_id.split("/"))
    api = f"/api/models/{repo}" + (f"/revision/{quote(revision, safe='')}" if revision else "")
    try:
        answer = client.get(api + "?blobs=true", LIMITS["api"])
    except TooLarge as err:
        raise HubUnavailable(f"the Hub's ({shown}) file list of {repo_id} is {err}") from None
    _raise_for_status(answer, repo_id, shown, "the repository")
    commit, files = _file_list(answer.body, shown, revision)
    if "config.json" not in files:
        raise HubUnavailable(f"{repo_id} on the Hub ({shown}) has no config.json")
    fetched = Fetched(commit, {})
    for name in ("config.json", *SIDE_FILES):
        if name in files:
            fetched.files[name] = _config_file(client, repo, repo_id, commit, name)
    shards = sorted(name for name in files if name.endswith(".safetensors"))
    if INDEX in files:
        _from_index(client, repo, repo_id, commit, fetched)
    elif shards:
        sizes = [files[name] for name in shards]
        if all(isinstance(size, int) and size > 0 for size in sizes):
            fetched.weights_bytes = sum(sizes)  # type: ignore[arg-type]
            fetched.weights_how = f"{len(shards)} safetensors file(s) on the Hub"
        else:
            fetched.weights_missing = (
                f"the Hub ({shown}) does not state the safetensors files' sizes"
            )
        fetched.dtypes = _dtypes(client, repo, commit, shards)
    else:
        fetched.weights_missing = f"{repo_id} on the Hub ({shown}) has no safetensors weights"
    return fetched


def _raise_for_status(answer: Answer, repo_id: str, shown: str, what: str) -> None:
    if 200 <= answer.status < 300:
        return
    code = answer.headers.get("x-error-code", "")
    said = redact_text(answer.headers.get("x-error-message", "") or "")[:200]
    if code == "GatedRepo" or (answer.status == 403 and "gated" in said.lower()):
        raise HubUnavailable(
            f"{repo_id} is gated on the Hub ({shown}): accept its license and set HF_TOKEN"
        )
    if answer.status in (401, 404) and code in ("RepoNotFound", "RevisionNotFound", ""):
        thing = "revision of " if code == "RevisionNotFound" else ""
        raise HubUnavailable(
            f"{thing}{repo_id} is not on the Hub ({shown}), or is private (set HF_TOKEN)"
        )
    if answer.status == 404 and code == "EntryNotFound":
        raise HubUnavailable(f"{what} of {repo_id} is not on the Hub ({shown})")
    raise HubUnavailable(
        f"the Hub ({shown}) refused {what}: HTTP {answer.status}" + (f" ({said})" if said else "")
    )


def _json(body: bytes, what: str, shown: str) -> Any:
    from vllm_doctor import bounds

    try:
        return bounds.json_loads(body.decode("utf-8"), non_finite="null")
    except UnicodeDecodeError:
        raise HubAnswerError(f"the Hub ({shown})", f"{what} is not UTF-8 text") from None
    except json.JSONDecodeError as err:
        raise HubAnswerError(
            f"the Hub ({shown})", f"{what} is not valid JSON: {err.msg} (line {err.lineno})"
        ) from None
    except ValueError as err:  # depth, size, numbers: bounds.check_value
        raise HubAnswerError(f"the Hub ({shown})", f"{what}: {err}") from None


def _file_list(body: bytes, shown: str, revision: str | None) -> tuple[str, dict[str, int | None]]:
    """The commit and the files (name → size) of the API's answer, checked."""
    info = _json(body, "the repository's file list", shown)
    if not isinstance(info, dict):
        raise HubAnswerError(f"the Hub ({shown})", "the repository's file list is not an object")
    commit = info.get("sha")
    if not isinstance(commit, str) or not COMMIT.fullmatch(commit):
        raise HubAnswerError(
            f"the Hub ({shown})",
            f"the answered commit {str(commit)[:60]!r} is not a 40-hex commit hash",
        )
    if revision and COMMIT.fullmatch(revision) and commit != revision:
        raise HubAnswerError(
            f"the Hub ({shown})", f"asked for commit {revision}, it answered {commit}"
        )
    siblings = info.get("siblings")
    if not isinstance(siblings, list):
        raise HubAnswerError(
            f"the Hub ({shown})", "the repository's file list has no siblings list"
        )
    files: dict[str, int | None] = {}
    for entry in siblings:
        name = entry.get("rfilename") if isinstance(entry, dict) else None
        if not isinstance(name, str):
            raise HubAnswerError(f"the Hub ({shown})", "a file of the list has no name")
        size = entry.get("size")
        files[name] = (
            size if isinstance(size, int) and not isinstance(size, bool) and size >= 0 else None
        )
    return commit, files


def _resolve(repo: str, commit: str, name: str) -> str:
    return f"/{repo}/resolve/{commit}/" + "/".join(quote(p, safe="") for p in name.split("/"))


def _config_file(client: Client, repo: str, repo_id: str, commit: str, name: str) -> bytes:
    """config.json or a side file: a JSON object within its limit, or bad input."""
    try:
        answer = client.get(_resolve(repo, commit, name), LIMITS[name])
    except TooLarge as err:
        raise HubAnswerError(
            f"the Hub ({client.shown})", f"{repo_id}'s {name} is {err}: not a config"
        ) from None
    _raise_for_status(answer, repo_id, client.shown, name)
    data = _json(answer.body, f"{repo_id}'s {name}", client.shown)
    if not isinstance(data, dict):
        raise HubAnswerError(
            f"the Hub ({client.shown})", f"{repo_id}'s {name} is not a JSON object"
        )
    return answer.body


def _from_index(client: Client, repo: str, repo_id: str, commit: str, fetched: Fetched) -> None:
    """The weights' total size and the shards' dtypes from the safetensors index; what cannot
    be read stays unknown with its reason (the index only describes the weights)."""
    shown = client.shown
    try:
        answer = client.get(_resolve(repo, commit, INDEX), LIMITS[INDEX])
        _raise_for_status(answer, repo_id, shown, INDEX)
    except HubUnavailable as err:
        fetched.weights_missing = f"{INDEX}: {err}"
        return
    try:
        index = _json(answer.body, f"{repo_id}'s {INDEX}", shown)
    except HubAnswerError as err:
        fetched.weights_missing = err.problem
        return
    metadata = index.get("metadata") if isinstance(index, dict) else None
    total = metadata.get("total_size") if isinstance(metadata, dict) else None
    if isinstance(total, int) and not isinstance(total, bool) and 0 < total < 1 << 60:
        fetched.weights_bytes = total
        fetched.weights_how = f"{INDEX} on the Hub (metadata.total_size)"
    else:
        fetched.weights_missing = f"the Hub's {INDEX} of {repo_id} states no total_size"
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    shards = (
        sorted({v for v in weight_map.values() if isinstance(v, str)})
        if isinstance(weight_map, dict)
        else []
    )
    fetched.dtypes = _dtypes(client, repo, commit, shards)


def _dtypes(client: Client, repo: str, commit: str, shards: list[str]) -> dict[str, int]:
    """Parameters per dtype from the safetensors headers (byte ranges, no weights); {} when
    they cannot all be read (a partial count would misdescribe), or for more than MAX_SHARDS."""
    if not shards or len(shards) > MAX_SHARDS or not all(_safe_shard(s) for s in shards):
        return {}
    counts: dict[str, int] = {}
    try:
        for shard in shards:
            for dtype, count in _header_counts(client, _resolve(repo, commit, shard)).items():
                counts[dtype] = counts.get(dtype, 0) + count
    except (HubUnavailable, HubAnswerError, ValueError):
        return {}
    return counts


def _safe_shard(name: str) -> bool:
    return bool(_SHARD.fullmatch(name)) and not any(p in (".", "..") for p in name.split("/"))


def _header_counts(client: Client, path: str) -> dict[str, int]:
    answer = client.get(path, HEADER_PROBE, byte_range=(0, HEADER_PROBE - 1))
    if answer.status not in (200, 206) or len(answer.body) < 8:
        raise ValueError("no safetensors header")
    length = int.from_bytes(answer.body[:8], "little")
    if length > LIMITS["header"]:
        raise ValueError("a safetensors header over its limit")
    raw = answer.body[8 : 8 + length]
    if len(raw) < length:
        rest = client.get(path, length - len(raw), byte_range=(8 + len(raw), 8 + length - 1))
        if rest.status != 206:
            raise ValueError("the Hub did not answer the byte range")
        raw += rest.body
    if len(raw) != length:
        raise ValueError("a short safetensors header")
    header = _json(raw, "a safetensors header", client.shown)
    if not isinstance(header, dict):
        raise ValueError("a safetensors header that is not an object")
    counts: dict[str, int] = {}
    for name, tensor in header.items():
        if name == "__metadata__":
            continue
        dtype = tensor.get("dtype") if isinstance(tensor, dict) else None
        shape = tensor.get("shape") if isinstance(tensor, dict) else None
        if dtype not in _DTYPE_BYTES or not isinstance(shape, list):
            raise ValueError("a tensor without a known dtype and shape")
        count = 1
        for dim in shape:
            if not isinstance(dim, int) or isinstance(dim, bool) or not 0 <= dim < 1 << 40:
                raise ValueError("a tensor dimension that is not a size")
            count *= dim
        if count >= 1 << 50:
            raise ValueError("a tensor larger than any model")
        counts[dtype] = counts.get(dtype, 0) + count
    return counts
