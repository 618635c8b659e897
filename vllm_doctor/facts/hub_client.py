"""The Hub's transport: a small bounded HTTP client of the doctor's own (facts/hub.py says
what is asked and why not huggingface_hub's download functions; docs/hardening.md has the threat
model). It keeps huggingface_hub's endpoint and auth semantics (``HF_ENDPOINT``, ``HF_TOKEN``,
``HUGGING_FACE_HUB_TOKEN``, the stored token of ``hf auth login`` at ``HF_TOKEN_PATH`` or
``HF_HOME/token``, ``HF_HUB_DISABLE_IMPLICIT_TOKEN``; the token never follows a redirect to
another host) and bounds every request of a run:

- a deadline per request (``FETCH_S``) and for all the Hub requests of a run
  (``VLLM_DOCTOR_HUB_TIMEOUT``, default ``RUN_S``), enforced on the socket, plus a watchdog
  thread for what a socket timeout cannot cut short (a slow name lookup);
- a size limit per answer enforced while reading: nothing is kept past it;
- at most ``MAX_REQUESTS`` requests per run (redirects counted, at most ``MAX_REDIRECTS`` per
  request, http(s) only, never from https down to http).
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urljoin, urlsplit

from vllm_doctor.errors import InputError
from vllm_doctor.redact import redact_text, remember_secret

TIMEOUT = 5.0  # seconds a connect or a read may wait: a CI runner without network fails fast
FETCH_S = 10.0  # seconds one request may take in all, however the bytes trickle in
RUN_S = 20.0  # seconds all the Hub requests of one run may take (VLLM_DOCTOR_HUB_TIMEOUT)
TIMEOUT_ENV = "VLLM_DOCTOR_HUB_TIMEOUT"
MAX_REQUESTS = 64  # requests per run, redirects counted
MAX_REDIRECTS = 3  # per request (the Hub: a renamed repository, the CDN of a large file)
MiB = 1 << 20
_TOKEN = re.compile(r"[\x21-\x7e]{1,4096}")
TRUE = ("1", "on", "yes", "true")
T = TypeVar("T")


class HubUnavailable(Exception):
    """Why the Hub gave nothing (the reason shown on the undecided model facts)."""


class HubAnswerError(InputError):
    """The Hub answered something that is not a Hub answer: bad input (exit 2)."""


# -- the run's budget -------------------------------------------------------------------------


class Budget:
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


_RUN: dict[str, Budget] = {}  # the budget of the run in progress ("budget")


def run_budget() -> Budget:
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
        _RUN["budget"] = Budget(seconds, MAX_REQUESTS)
    return _RUN["budget"]


def reset_budget() -> None:
    """Start a new run's budget (for callers that run several checks in one process)."""
    _RUN.clear()


# -- auth and transport -------------------------------------------------------------------------


def token_for(environ: Mapping[str, str]) -> str | None:
    """The token huggingface_hub would send: HF_TOKEN, else the one `hf auth login` stored
    (unless HF_HUB_DISABLE_IMPLICIT_TOKEN); a value that cannot be a token is refused."""
    token = environ.get("HF_TOKEN") or environ.get("HUGGING_FACE_HUB_TOKEN")
    where = "HF_TOKEN"
    if not token and str(environ.get("HF_HUB_DISABLE_IMPLICIT_TOKEN", "")).lower() not in TRUE:
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


def endpoint_of(environ: Mapping[str, str]) -> str:
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
            return None  # answered as an HTTPError: followed (or not) by Client.get

    return urllib.request.build_opener(Plain(), Secure(), NoRedirect())


@dataclass
class Answer:
    status: int
    body: bytes
    headers: Mapping[str, str]


class Client:
    """GET requests to one endpoint within the run's budget."""

    def __init__(
        self, endpoint: str, token: str | None, budget: Budget, environ: Mapping[str, str]
    ):
        self.shown = redact_text(endpoint)  # an endpoint may carry credentials
        self.endpoint, basic = _credentials(endpoint)
        self.host = urlsplit(self.endpoint).netloc.lower()
        self.authorization = f"Bearer {token}" if token else basic
        self.budget = budget
        self.environ = environ

    def get(self, path: str, limit: int, byte_range: tuple[int, int] | None = None) -> Answer:
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
                return Answer(status, body, {k.lower(): v for k, v in response.headers.items()})
            except HubUnavailable:
                raise
            except (OSError, ValueError, http.client.HTTPException) as err:
                # refused, reset, timed out, shut at the deadline, not HTTP at all
                if time.monotonic() >= deadline:
                    raise self._late() from None
                raise HubUnavailable(
                    f"the Hub ({self.shown}) could not be reached: {type(err).__name__}: "
                    f"{first_line(err)}"
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


def _read(response: Any, limit: int, deadline: float, client: Client, truncate: bool) -> bytes:
    """The body, at most ``limit`` bytes, within the deadline (checked between reads; the
    timer shuts the socket for a read that waits). Past the limit: TooLarge, or with
    ``truncate`` (a byte range a server may answer with the whole file) the first bytes."""
    length = response.headers.get("Content-Length")
    if not truncate and length is not None and length.strip().isdigit() and int(length) > limit:
        response.close()
        raise TooLarge(int(length), limit)
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
            raise TooLarge(size, limit)
        return b"".join(chunks)[:limit]
    return b"".join(chunks)


class TooLarge(HubUnavailable):
    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"over {limit // MiB} MiB ({size:,} bytes or more)")
        self.limit = limit


@functools.lru_cache(maxsize=1)
def _user_agent() -> str:
    from vllm_doctor import __version__

    return f"vllm-doctor/{__version__}"


def in_time(work: Callable[[], T]) -> T:
    """``work()`` in a thread the run's deadline can abandon: a name lookup that hangs has no
    socket to shut."""
    budget = run_budget()
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
    value: T = box["value"]
    return value


def first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return redact_text(text[0][:200]) if text else type(err).__name__
