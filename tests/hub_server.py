"""A local stand-in for the Hugging Face Hub (127.0.0.1 only): the API and file layout that
huggingface_hub reads — /api/models/<repo>[/revision/<rev>] and /<repo>/resolve/<rev>/<file>
(HEAD with the commit and ETag headers, GET with byte ranges) — for the repositories given,
plus gated and missing ones. Every request is logged in ``server.requests``."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from urllib.parse import unquote, urlparse

from local_http import LocalServer


@dataclass
class Repo:
    files: dict[str, bytes]
    sha: str = "0123456789abcdef0123456789abcdef01234567"
    gated: bool = False


@dataclass
class FakeHub(LocalServer):
    repos: dict[str, Repo] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)
    url: str = ""

    def __enter__(self) -> FakeHub:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet
                pass

            def do_HEAD(self) -> None:
                self._serve(body=False)

            def do_GET(self) -> None:
                self._serve(body=True)

            def _send(self, status: int, data: bytes, headers: dict[str, str], body: bool) -> None:
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if body:
                    self.wfile.write(data)

            def _error(self, status: int, code: str, message: str, body: bool) -> None:
                data = json.dumps({"error": message}).encode()
                self._send(
                    status,
                    data,
                    {
                        "Content-Type": "application/json",
                        "X-Error-Code": code,
                        "X-Error-Message": message,
                    },
                    body,
                )

            def _serve(self, body: bool) -> None:
                path = unquote(urlparse(self.path).path)
                hub.requests.append(f"{self.command} {path}")
                api = re.fullmatch(r"/api/models/([^/]+/[^/]+)(?:/revision/([^/]+))?", path)
                resolve = re.fullmatch(r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", path)
                repo_id = (api or resolve).group(1) if (api or resolve) else None
                repo = hub.repos.get(repo_id or "")
                if repo is None:
                    return self._error(404, "RepoNotFound", "Repository not found", body)
                if repo.gated and self.headers.get("Authorization") is None:
                    return self._error(401, "GatedRepo", "Access to this model is restricted", body)
                if api:
                    info = {
                        "id": repo_id,
                        "modelId": repo_id,
                        "sha": repo.sha,
                        "private": False,
                        "gated": "auto" if repo.gated else False,
                        "tags": [],
                        "siblings": [
                            {"rfilename": name, "size": len(data)}
                            for name, data in sorted(repo.files.items())
                        ],
                    }
                    return self._send(
                        200, json.dumps(info).encode(), {"Content-Type": "application/json"}, body
                    )
                name = resolve.group(3)
                data = repo.files.get(name)
                if data is None:
                    return self._error(404, "EntryNotFound", "Entry not found", body)
                headers = {
                    "ETag": '"' + hashlib.sha1(data).hexdigest() + '"',
                    "X-Repo-Commit": repo.sha,
                    "Accept-Ranges": "bytes",
                    "Content-Type": "application/octet-stream",
                }
                wanted = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range") or "")
                if wanted:
                    start = int(wanted.group(1))
                    end = int(wanted.group(2)) if wanted.group(2) else len(data) - 1
                    part = data[start : end + 1]
                    headers["Content-Range"] = f"bytes {start}-{start + len(part) - 1}/{len(data)}"
                    return self._send(206, part, headers, body)
                return self._send(200, data, headers, body)

        return self._serve(Handler)


def safetensors_file(tensors: dict[str, tuple[str, list[int]]]) -> bytes:
    """A safetensors file with these tensors (dtype, shape) and zero-filled data."""
    size = {"BF16": 2, "F16": 2, "F32": 4, "F8_E4M3": 1, "I8": 1, "U8": 1}
    header: dict[str, object] = {}
    offset = 0
    for name, (dtype, shape) in tensors.items():
        count = 1
        for dim in shape:
            count *= dim
        length = count * size[dtype]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + length]}
        offset += length
    encoded = json.dumps(header).encode()
    return len(encoded).to_bytes(8, "little") + encoded + bytes(offset)
