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
This client keeps huggingface_hub's endpoint and auth semantics (``HF_ENDPOINT``, ``HF_TOKEN``,
``HUGGING_FACE_HUB_TOKEN``, the stored token of ``hf auth login`` at ``HF_TOKEN_PATH`` or
``HF_HOME/token``, ``HF_HUB_DISABLE_IMPLICIT_TOKEN``, ``HF_HUB_OFFLINE``; the API and
``resolve`` URLs huggingface_hub builds; the token never follows a redirect to another host)
and adds, for every request of a run (docs/hardening.md has the threat model):

- file names chosen here, never from an answer: ``<cache>/hub/<digest of endpoint and
  repository>/<commit>/config.json``, where the commit is the revision the user gave or the
  Hub's answer checked to be a 40-hex commit hash (anything else is a malformed answer);
- a deadline per request (``FETCH_S``) and for all the Hub requests of a run
  (``VLLM_DOCTOR_HUB_TIMEOUT``, default ``RUN_S``), enforced on the socket, plus a watchdog
  for what a socket timeout cannot cut short (a slow name lookup);
- size limits enforced while reading (``LIMITS``): nothing is kept past its limit, and only
  whole, checked answers are written to the cache, by this process, atomically;
- at most ``MAX_REQUESTS`` requests per run (redirects counted, at most ``MAX_REDIRECTS`` per
  request, http(s) only, never from https down to http) and the headers of at most
  ``MAX_SHARDS`` safetensors files.

A Hub that cannot be reached, is too slow, too large or asks for too many requests, a gated or
missing model: a reason on the model facts that stay unknown (``HubUnavailable``), never a
failure of the run. An answer that is not what the Hub answers (not JSON, not a commit hash,
a config.json that is not an object): bad input, exit 2 (``HubAnswerError``), as the same
bytes given with --model-config would be. ``--offline`` (or ``HF_HUB_OFFLINE``) sends nothing
and reads the doctor's cache only.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import hashlib
import json
import os
import re
import socket
import stat
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urljoin, urlsplit

from vllm_doctor.errors import InputError
from vllm_doctor.redact import redact_text, remember_secret

TIMEOUT = 5.0  # seconds a connect or a read may wait: a CI runner without network fails fast
FETCH_S = 10.0  # seconds one request may take in all, however the bytes trickle in
RUN_S = 20.0  # seconds all the Hub requests of one run may take (VLLM_DOCTOR_HUB_TIMEOUT)
TIMEOUT_ENV = "VLLM_DOCTOR_HUB_TIMEOUT"
MAX_REQUESTS = 64  # requests per run, redirects counted
MAX_REDIRECTS = 3  # per request (the Hub: a renamed repository, the CDN of a large file)
MAX_SHARDS = 16  # safetensors headers read for the dtypes (they only describe)
MiB = 1 << 20
LIMITS = {  # the largest answer kept for each request, checked while it is read
    "api": 16 * MiB,  # the file list of a repository (5,000 files are ~1 MiB)
    "config.json": 32 * MiB,  # as for a local config.json (bounds.FILE_LIMITS["json"])
    "hf_quant_config.json": 32 * MiB,
    "model.safetensors.index.json": 32 * MiB,
    "header": 16 * MiB,  # one safetensors header (a large shard's is a few MiB)
}
HEADER_PROBE = 64 * 1024  # the first range asked of a safetensors file: most headers fit
FRESH_DAYS = 7  # a branch's cached answer is asked again after this; a commit's never
# the files beside config.json that vLLM (and the doctor's reader) use to build the model
# config, stored next to it; the index only gives the weights' size and shard names
SIDE_FILES = ("hf_quant_config.json",)
INDEX = "model.safetensors.index.json"
_REPO_ID = re.compile(r"[A-Za-z0-9][\w.-]{0,95}/[\w.-]{1,96}")
_COMMIT = re.compile(r"[0-9a-f]{40}")
_TOKEN = re.compile(r"[\x21-\x7e]{1,4096}")
_SHARD = re.compile(r"[\w.+-]{1,200}(?:/[\w.+-]{1,200}){0,3}\.safetensors")
_TRUE = ("1", "on", "yes", "true")
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


class HubUnavailable(Exception):
    """Why the Hub gave nothing (the reason shown on the undecided model facts)."""


class HubAnswerError(InputError):
    """The Hub answered something that is not a Hub answer: bad input (exit 2)."""


@dataclass
class HubModel:
    repo_id: str
    revision: str  # the commit the files are from (40 hex)
    config_path: Path
    weights_bytes: int | None = None
    weights_how: str = ""
    weights_missing: str = ""  # why the weights' size is unknown, when it is
    dtypes: dict[str, int] = field(default_factory=dict)  # safetensors dtype → parameters
    fetched: str = ""  # when (ISO date), for an answer read back from the doctor's cache

    @property
    def where(self) -> str:
        cached = f", cached by vllm-doctor {self.fetched}" if self.fetched else ""
        return f"Hub: {self.repo_id}@{self.revision[:12]}{cached}"


def looks_like_repo_id(model_id: str) -> bool:
    return bool(_REPO_ID.fullmatch(model_id)) and ".." not in model_id


def offline_reason(environ: Mapping[str, str], offline: bool) -> str | None:
    if offline:
        return "--offline: the Hub was not asked"
    if str(environ.get("HF_HUB_OFFLINE", "")).strip().lower() in _TRUE:
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


# -- the run's budget -------------------------------------------------------------------------


class _Budget:
    """What one run may still spend on the Hub: seconds and requests."""

    def __init__(self, seconds: float, requests: int) -> None:
        self.deadline = time.monotonic() + seconds
        self.seconds = seconds
        self.requests = requests
        self.lock = threading.Lock()

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def take_request(self) -> None:
        with self.lock:
            if self.requests <= 0:
                raise HubUnavailable(
                    f"more than {MAX_REQUESTS} requests to the Hub in one run: the rest "
                    "were not sent"
                )
            self.requests -= 1


_RUN: dict[str, _Budget] = {}  # the budget of the run in progress ("budget")


def _run_budget() -> _Budget:
    if "budget" not in _RUN:
        seconds = RUN_S
        raw = str(os.environ.get(TIMEOUT_ENV) or "").strip()  # the doctor's own setting
        if raw:
            try:
                seconds = float(raw)
            except ValueError:
                raise InputError(TIMEOUT_ENV, f"{raw[:40]!r} is not a number of seconds") from None
            if not 0 < seconds <= 3600:
                raise InputError(TIMEOUT_ENV, "give seconds between 0 and 3600")
        _RUN["budget"] = _Budget(seconds, MAX_REQUESTS)
    return _RUN["budget"]


def reset_budget() -> None:
    """Start a new run's budget (for callers that run several checks in one process)."""
    _RUN.clear()


# -- auth and transport -------------------------------------------------------------------------


def _token(environ: Mapping[str, str]) -> str | None:
    """The token huggingface_hub would send: HF_TOKEN, else the one `hf auth login` stored
    (unless HF_HUB_DISABLE_IMPLICIT_TOKEN); a value that cannot be a token is refused."""
    token = environ.get("HF_TOKEN") or environ.get("HUGGING_FACE_HUB_TOKEN")
    where = "HF_TOKEN"
    if not token and str(environ.get("HF_HUB_DISABLE_IMPLICIT_TOKEN", "")).lower() not in _TRUE:
        path = environ.get("HF_TOKEN_PATH") or str(
            Path(environ.get("HF_HOME") or Path(_home(environ)) / ".cache" / "huggingface")
            / "token"
        )
        from vllm_doctor.bounds import read_text

        with contextlib.suppress(InputError, OSError, RuntimeError):
            token = read_text(Path(path).expanduser(), "token file", "toml", errors="replace")
        where = "the stored token"
    token = (token or "").strip()
    if not token:
        return None
    if not _TOKEN.fullmatch(token):
        raise HubUnavailable(f"{where} holds characters a Hub token cannot have: nothing was sent")
    return token


def _home(environ: Mapping[str, str]) -> str:
    return environ.get("HOME") or os.path.expanduser("~")


def _endpoint(environ: Mapping[str, str]) -> str:
    endpoint = (environ.get("HF_ENDPOINT") or "").strip().rstrip("/") or "https://huggingface.co"
    try:
        parts = urlsplit(endpoint)
        parts.port  # noqa: B018 - a port that is not a number is refused here
    except ValueError:
        parts = None
    if parts is not None and parts.password:
        remember_secret(parts.password)  # never shown, whatever message quotes it
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError("HF_ENDPOINT", f"{redact_text(endpoint)[:80]!r} is not an http(s) URL")
    return endpoint


def _credentials(endpoint: str) -> tuple[str, str | None]:
    """(the endpoint without user:password@, a Basic Authorization for them or None): a
    mirror behind basic auth, as requests reads such a URL."""
    import base64
    from urllib.parse import unquote

    parts = urlsplit(endpoint)
    if parts.username is None:
        return endpoint, None
    pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
    bare = parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()
    return bare, "Basic " + base64.b64encode(pair.encode()).decode()


@functools.lru_cache(maxsize=1)
def _tls_context(cafile: str | None) -> Any:
    import ssl

    if cafile is None:
        try:  # what requests and httpx verify with, where it is installed
            import certifi

            cafile = certifi.where()
        except ImportError:
            cafile = None
    return ssl.create_default_context(cafile=cafile)


def _opener(environ: Mapping[str, str], sockets: list[socket.socket]) -> Any:
    """A urllib opener that follows no redirect itself and records every socket it opens
    (so a deadline can shut them), with the environment's proxies."""
    import http.client
    import urllib.request

    def registering(base: Any) -> Any:
        """``base`` (an HTTP(S)Connection) recording the socket of each connection it opens."""

        def create_and_register(*args: Any, **kwargs: Any) -> socket.socket:
            sock = socket.create_connection(*args, **kwargs)
            sockets.append(sock)
            return sock

        def connection(*args: Any, **kwargs: Any) -> Any:
            conn = base(*args, **kwargs)
            conn._create_connection = create_and_register
            return conn

        return connection

    class Plain(urllib.request.HTTPHandler):
        def http_open(self, req: Any) -> Any:
            return self.do_open(registering(http.client.HTTPConnection), req)

    cafile = next(
        (
            environ[k]
            for k in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE")
            if environ.get(k)
        ),
        None,
    )

    class Secure(urllib.request.HTTPSHandler):
        def https_open(self, req: Any) -> Any:
            return self.do_open(
                registering(http.client.HTTPSConnection), req, context=_tls_context(cafile)
            )

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None  # answered as an HTTPError: followed (or not) by _Client.get

    return urllib.request.build_opener(Plain(), Secure(), NoRedirect())


@dataclass
class _Answer:
    status: int
    body: bytes
    headers: Mapping[str, str]


class _Client:
    """GET requests to one endpoint within the run's budget."""

    def __init__(
        self, endpoint: str, token: str | None, budget: _Budget, environ: Mapping[str, str]
    ):
        self.shown = redact_text(endpoint)  # an endpoint may carry credentials
        self.endpoint, basic = _credentials(endpoint)
        self.host = urlsplit(self.endpoint).netloc.lower()
        self.authorization = f"Bearer {token}" if token else basic
        self.budget = budget
        self.environ = environ

    def get(self, path: str, limit: int, byte_range: tuple[int, int] | None = None) -> _Answer:
        """The answer to GET endpoint+path, following at most MAX_REDIRECTS redirects; an
        error status is answered too (the caller says what it means)."""
        import http.client
        import urllib.error
        import urllib.request

        url = self.endpoint + path
        for _ in range(MAX_REDIRECTS + 1):
            self.budget.take_request()
            parts = urlsplit(url)
            headers = {"User-Agent": _user_agent(), "Accept-Encoding": "identity"}
            if self.authorization and parts.netloc.lower() == self.host:
                headers["Authorization"] = self.authorization
            if byte_range is not None:
                headers["Range"] = f"bytes={byte_range[0]}-{byte_range[1]}"
            deadline = time.monotonic() + min(FETCH_S, max(0.0, self.budget.left()))
            if deadline <= time.monotonic():
                raise self._late()
            sockets: list[socket.socket] = []
            timer = threading.Timer(max(0.0, deadline - time.monotonic()), _shut, (sockets,))
            timer.daemon = True
            timer.start()
            try:
                request = urllib.request.Request(url, headers=headers, method="GET")
                try:
                    response = _opener(self.environ, sockets).open(
                        request, timeout=min(TIMEOUT, max(0.1, deadline - time.monotonic()))
                    )
                except urllib.error.HTTPError as err:
                    response = err
                status = int(getattr(response, "status", None) or response.getcode() or 0)
                if status in (301, 302, 303, 307, 308):
                    location = response.headers.get("Location") or ""
                    response.close()
                    url = self._redirect(url, location)
                    continue
                body = _read(response, limit, deadline, self, truncate=byte_range is not None)
                return _Answer(status, body, {k.lower(): v for k, v in response.headers.items()})
            except HubUnavailable:
                raise
            except (OSError, ValueError, http.client.HTTPException) as err:
                # refused, reset, timed out, shut at the deadline, not HTTP at all
                if time.monotonic() >= deadline:
                    raise self._late() from None
                raise HubUnavailable(
                    f"the Hub ({self.shown}) could not be reached: {type(err).__name__}: "
                    f"{_first_line(err)}"
                ) from None
            finally:
                timer.cancel()
                _shut(sockets)
        raise HubUnavailable(f"the Hub ({self.shown}) redirected more than {MAX_REDIRECTS} times")

    def _late(self) -> HubUnavailable:
        if self.budget.left() <= 0:
            return HubUnavailable(
                f"the Hub ({self.shown}) took more than {self.budget.seconds:g} s in all"
            )
        return HubUnavailable(f"the Hub ({self.shown}) did not answer within {FETCH_S:g} s")

    def _redirect(self, url: str, location: str) -> str:
        target = urljoin(url, location.strip())
        before, after = urlsplit(url), urlsplit(target)
        if after.scheme not in ("http", "https") or not after.hostname:
            raise HubUnavailable(
                f"the Hub ({self.shown}) redirected to {redact_text(target)[:80]!r}: "
                "only http(s) is followed"
            )
        if before.scheme == "https" and after.scheme == "http":
            raise HubUnavailable(
                f"the Hub ({self.shown}) redirected from https to http: not followed"
            )
        return target


def _shut(sockets: list[socket.socket]) -> None:
    for sock in list(sockets):
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


def _read(response: Any, limit: int, deadline: float, client: _Client, truncate: bool) -> bytes:
    """The body, at most ``limit`` bytes, within the deadline (checked between reads; the
    timer shuts the socket for a read that waits). Past the limit: _TooLarge, or with
    ``truncate`` (a byte range a server may answer with the whole file) the first bytes."""
    length = response.headers.get("Content-Length")
    if not truncate and length is not None and length.strip().isdigit() and int(length) > limit:
        response.close()
        raise _TooLarge(int(length), limit)
    chunks, size = [], 0
    while size <= limit:
        if time.monotonic() >= deadline:
            raise client._late()
        chunk = response.read(min(64 * 1024, limit + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    if time.monotonic() >= deadline:  # the watchdog cut it short: not a whole answer
        raise client._late()
    response.close()
    if size > limit:
        if not truncate:
            raise _TooLarge(size, limit)
        return b"".join(chunks)[:limit]
    return b"".join(chunks)


class _TooLarge(HubUnavailable):
    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"over {limit // MiB} MiB ({size:,} bytes or more)")
        self.limit = limit


@functools.lru_cache(maxsize=1)
def _user_agent() -> str:
    from vllm_doctor import __version__

    return f"vllm-doctor/{__version__}"


# -- the model ------------------------------------------------------------------------------------


def hub_model(
    repo_id: str, environ: Mapping[str, str], offline: bool = False, revision: str | None = None
) -> HubModel:
    """The model's config.json (and what the Hub says of its weights) from the doctor's cache,
    else from the Hub unless offline; HubUnavailable with the reason when neither has it."""
    endpoint = _endpoint(environ)
    cache = _Cache.open(environ, endpoint, repo_id)
    cached = cache.find(revision or "main") if cache is not None else None
    reason = offline_reason(environ, offline)
    if cached is not None and (reason is not None or cached[1]):
        return cached[0]
    if reason is not None:
        raise HubUnavailable(reason)
    try:
        fetched = _in_time(lambda: _fetch(repo_id, endpoint, environ, revision), environ)
    except HubUnavailable:
        if cached is not None:  # a branch asked again: the older answer still holds
            return cached[0]
        raise
    if cache is not None:
        with contextlib.suppress(OSError):  # a full or read-only disk: this run's copy only
            return cache.store(revision or "main", fetched)
    return _Cache.temporary(endpoint, repo_id).store(revision or "main", fetched)


def fetch_model(
    repo_id: str, cache: Path | None, environ: Mapping[str, str], timeout: float = TIMEOUT
) -> HubModel:
    """``hub_model`` online (the older entry point; ``cache`` — the Hugging Face cache the
    caller searched — is never written)."""
    return hub_model(repo_id, environ)


def _in_time(work: Callable[[], _Fetched], environ: Mapping[str, str]) -> _Fetched:
    """``work()`` in a thread the run's deadline can abandon: a name lookup that hangs has no
    socket to shut."""
    budget = _run_budget()
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = work()
        except BaseException as err:  # handed to the caller's thread
            box["error"] = err

    thread = threading.Thread(target=run, name="vllm-doctor-hub", daemon=True)
    thread.start()
    thread.join(max(0.0, budget.left()) + 1.0)
    if thread.is_alive():
        budget.deadline = time.monotonic()  # nothing more is asked in this run
        raise HubUnavailable(f"the Hub took more than {budget.seconds:g} s in all")
    if "error" in box:
        raise box["error"]
    value: _Fetched = box["value"]
    return value


@dataclass
class _Fetched:
    commit: str
    files: dict[str, bytes]  # config.json and the side files, checked
    weights_bytes: int | None = None
    weights_how: str = ""
    weights_missing: str = ""
    dtypes: dict[str, int] = field(default_factory=dict)


def _fetch(
    repo_id: str, endpoint: str, environ: Mapping[str, str], revision: str | None
) -> _Fetched:
    client = _Client(endpoint, _token(environ), _run_budget(), environ)
    shown = client.shown
    repo = "/".join(quote(part, safe="") for part in repo_id.split("/"))
    api = f"/api/models/{repo}" + (f"/revision/{quote(revision, safe='')}" if revision else "")
    try:
        answer = client.get(api + "?blobs=true", LIMITS["api"])
    except _TooLarge as err:
        raise HubUnavailable(f"the Hub's ({shown}) file list of {repo_id} is {err}") from None
    _raise_for_status(answer, repo_id, shown, "the repository")
    commit, files = _file_list(answer.body, shown, revision)
    if "config.json" not in files:
        raise HubUnavailable(f"{repo_id} on the Hub ({shown}) has no config.json")
    fetched = _Fetched(commit, {})
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


def _raise_for_status(answer: _Answer, repo_id: str, shown: str, what: str) -> None:
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
    if not isinstance(commit, str) or not _COMMIT.fullmatch(commit):
        raise HubAnswerError(
            f"the Hub ({shown})",
            f"the answered commit {str(commit)[:60]!r} is not a 40-hex commit hash",
        )
    if revision and _COMMIT.fullmatch(revision) and commit != revision:
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


def _config_file(client: _Client, repo: str, repo_id: str, commit: str, name: str) -> bytes:
    """config.json or a side file: a JSON object within its limit, or bad input."""
    try:
        answer = client.get(_resolve(repo, commit, name), LIMITS[name])
    except _TooLarge as err:
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


def _from_index(client: _Client, repo: str, repo_id: str, commit: str, fetched: _Fetched) -> None:
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


def _dtypes(client: _Client, repo: str, commit: str, shards: list[str]) -> dict[str, int]:
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


def _header_counts(client: _Client, path: str) -> dict[str, int]:
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


# -- the doctor's cache -----------------------------------------------------------------------------


@dataclass
class _Cache:
    """``<cache_dir>/hub/<digest of endpoint and repository>/``: ``<commit>/`` holds the files and
    ``model.json`` (what the Hub said of the weights), ``refs/<digest of revision>`` the commit a
    revision named. Every name is made here; the folder is private (0700, this user's)."""

    root: Path
    endpoint: str
    repo_id: str

    @classmethod
    def open(cls, environ: Mapping[str, str], endpoint: str, repo_id: str) -> _Cache | None:
        from vllm_doctor.compact import cache_dir

        key = _digest(f"{endpoint}\0{repo_id}")
        root = cache_dir() / "hub" / key  # the doctor's setting, as for its other builds
        return cls(root, endpoint, repo_id) if _private_dir(root) else None

    @classmethod
    def temporary(cls, endpoint: str, repo_id: str) -> _Cache:
        """For a run whose cache folder cannot be used: a folder removed at exit."""
        import atexit
        import shutil
        import tempfile

        root = Path(tempfile.mkdtemp(prefix="vllm-doctor-hub-"))
        atexit.register(shutil.rmtree, root, True)
        return cls(root, endpoint, repo_id)

    def find(self, revision: str) -> tuple[HubModel, bool] | None:
        """(the cached model, whether it is fresh) for this revision, or None."""
        from vllm_doctor.bounds import read_text

        try:
            commit = read_text(self.root / "refs" / _digest(revision), "cache ref", "toml").strip()
            folder = self.root / commit
            meta = json.loads(read_text(folder / "model.json", "cache entry", "json"))
        except (InputError, OSError, ValueError):
            return None
        if not _COMMIT.fullmatch(commit) or not isinstance(meta, dict):
            return None
        try:
            model = HubModel(
                self.repo_id,
                commit,
                folder / "config.json",
                _int_or_none(meta.get("weights_bytes")),
                str(meta.get("weights_how") or ""),
                str(meta.get("weights_missing") or ""),
                {str(k): int(v) for k, v in (meta.get("dtypes") or {}).items()},
                str(meta.get("fetched") or "")[:10],
            )
            fetched = dt.date.fromisoformat(model.fetched)
        except (AttributeError, TypeError, ValueError):
            return None
        if not model.config_path.is_file():
            return None
        fresh = (
            _COMMIT.fullmatch(revision) is not None or (dt.date.today() - fetched).days < FRESH_DAYS
        )
        return model, fresh

    def store(self, revision: str, fetched: _Fetched) -> HubModel:
        folder = self.root / fetched.commit
        today = dt.date.today().isoformat()
        meta = {
            "format": 1,
            "repo_id": self.repo_id,
            "weights_bytes": fetched.weights_bytes,
            "weights_how": fetched.weights_how,
            "weights_missing": fetched.weights_missing,
            "dtypes": fetched.dtypes,
            "fetched": today,
        }
        folder.mkdir(mode=0o700, exist_ok=True)
        for name, data in fetched.files.items():
            _write(folder / name, data)
        for stale in SIDE_FILES:  # a side file the commit no longer has
            if stale not in fetched.files:
                (folder / stale).unlink(missing_ok=True)
        _write(folder / "model.json", json.dumps(meta).encode())
        (self.root / "refs").mkdir(mode=0o700, exist_ok=True)
        _write(self.root / "refs" / _digest(revision), fetched.commit.encode())
        return HubModel(
            self.repo_id,
            fetched.commit,
            folder / "config.json",
            fetched.weights_bytes,
            fetched.weights_how,
            fetched.weights_missing,
            dict(fetched.dtypes),
        )


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogateescape"), digest_size=16).hexdigest()


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _private_dir(path: Path) -> bool:
    """``path`` exists (made here with mode 0700) as a real directory of this user that no one
    else may write to, and so do the folders it was made under; False when it cannot be."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        for folder in (path, path.parent, path.parent.parent):
            info = os.lstat(folder)
            if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
                return False
            if hasattr(os, "getuid") and info.st_uid != os.getuid():
                return False
            if info.st_mode & 0o022:
                return False
    except OSError:
        return False
    return True


def _write(path: Path, data: bytes) -> None:
    """Atomically, never through a link planted at the name (os.replace swaps the link itself)."""
    import tempfile

    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return redact_text(text[0][:200]) if text else type(err).__name__
