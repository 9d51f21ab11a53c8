"""A local stand-in for PyPI's simple index that serves each wheel's metadata apart (PEP 658),
so that `pip install --dry-run` resolves from METADATA files instead of downloading wheels.

Why: pip 26 resolves from metadata alone when the index advertises it (`core-metadata`, PEP 714).
The PyPI this project's machines and CI reach does not advertise it, so pip downloaded every
wheel it considered, the CUDA build of torch and its nvidia-* packages included: about 3 GB per
Python, about 13 GB per `make test-pythons` run, with no cache (the files come without cache headers).

What it changes, and what not: the project pages are PyPI's own (`/simple/<name>/`, JSON API),
with the same files, versions, Requires-Python and yanked flags, so pip chooses exactly as
against PyPI. Only two things differ: each wheel is marked as having its metadata, and that
metadata is fetched here: PyPI's own `<wheel>.metadata` file when it exists, otherwise the
wheel's `*.dist-info/METADATA` read from the wheel on PyPI with HTTP range requests (the zip's
central directory and that one member, not the whole file). Pages and metadata are kept in
memory for the index's life, so the four Pythons and the per-platform checks share them.
Wheels themselves are never served here (a request for one is redirected to PyPI).
"""

from __future__ import annotations

import http.client
import io
import json
import re
import ssl
import threading
import time
import zipfile
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urljoin, urlsplit

UPSTREAM = "https://pypi.org/simple"
JSON_TYPE = "application/vnd.pypi.simple.v1+json"
BLOCK = 1 << 18  # range reads go by 256 KiB: the tail of most wheels holds the whole directory
METADATA = re.compile(r"[^/]+\.dist-info/METADATA")
_TLS = ssl.create_default_context()


_IDLE: dict[tuple[str, str], list] = {}  # kept-alive connections by (scheme, host)
_IDLE_LOCK = threading.Lock()


def _take(scheme: str, host: str) -> http.client.HTTPConnection:
    with _IDLE_LOCK:
        idle = _IDLE.setdefault((scheme, host), [])
        if idle:
            return idle.pop()
    if scheme == "http":  # this index itself, on 127.0.0.1
        return http.client.HTTPConnection(host, timeout=60)
    return http.client.HTTPSConnection(host, timeout=60, context=_TLS)


def _give_back(scheme: str, host: str, conn: http.client.HTTPConnection) -> None:
    with _IDLE_LOCK:
        _IDLE.setdefault((scheme, host), []).append(conn)


def fetch(url: str, headers: dict[str, str] | None = None) -> tuple[int, Message, bytes]:
    """(status, headers (case-blind), body) of a GET over a kept-alive connection (a new TLS
    handshake costs about 0.4 s here, more than the request), retried twice on network errors;
    redirects are followed."""
    for attempt in range(3):
        parts = urlsplit(url)
        conn = _take(parts.scheme, parts.netloc)
        try:
            conn.request("GET", parts.path + (f"?{parts.query}" if parts.query else ""),
                         headers={"User-Agent": "bertlib-tests", **(headers or {})})
            response = conn.getresponse()
            body = response.read()
        except (OSError, http.client.HTTPException):
            conn.close()  # a kept-alive connection the server closed: retry on a new one
            if attempt == 2:
                raise
            time.sleep(attempt)
            continue
        _give_back(parts.scheme, parts.netloc, conn)
        if response.status in (301, 302, 303, 307, 308):
            return fetch(urljoin(url, response.headers["Location"]), headers)
        if response.status >= 500 and attempt < 2:
            time.sleep(1 + attempt)
            continue
        return response.status, response.headers, body
    raise AssertionError("unreachable")


class RemoteFile(io.RawIOBase):
    """A read-only, seekable view of a file on an HTTP server that answers range requests,
    read in BLOCK-sized pieces (each fetched once). Enough for `zipfile.ZipFile`."""

    def __init__(self, url: str):
        super().__init__()
        self.url, self.pos, self.blocks = url, 0, {}
        status, headers, body = fetch(url, {"Range": f"bytes=-{BLOCK}"})
        if status == 200:  # no range support: the whole file came
            self.size, self.blocks = len(body), {0: body}
            self.whole = True
            return
        total = re.search(r"/(\d+)$", headers.get("Content-Range", ""))
        if status != 206 or not total:
            raise OSError(f"{url}: HTTP {status} to a range request")
        self.size, self.whole = int(total.group(1)), False
        self.tail = (self.size - len(body), body)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        self.pos = {0: 0, 1: self.pos, 2: self.size}[whence] + offset
        return self.pos

    def tell(self) -> int:
        return self.pos

    def _piece(self, start: int, end: int) -> bytes:
        if self.whole:
            return self.blocks[0][start:end]
        tail_start, tail = self.tail
        if start >= tail_start:
            return tail[start - tail_start:end - tail_start]
        out = b""
        for block in range(start // BLOCK, (end - 1) // BLOCK + 1):
            if block not in self.blocks:
                first = block * BLOCK
                status, _, body = fetch(self.url, {
                    "Range": f"bytes={first}-{min(first + BLOCK, self.size) - 1}"})
                if status != 206:
                    raise OSError(f"{self.url}: HTTP {status} to a range request")
                self.blocks[block] = body
            out += self.blocks[block]
        skip = start - (start // BLOCK) * BLOCK
        return out[skip:skip + end - start]

    def read(self, n: int = -1) -> bytes:
        end = self.size if n is None or n < 0 else min(self.size, self.pos + n)
        data = self._piece(self.pos, end) if end > self.pos else b""
        self.pos += len(data)
        return data

    def readinto(self, buffer) -> int:
        data = self.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)


def metadata_in_wheel(url: str) -> bytes:
    """The `*.dist-info/METADATA` member of the wheel at `url`, read by range requests (the
    zip's tail and, when that does not hold it, the blocks where the member lies)."""
    with zipfile.ZipFile(RemoteFile(url)) as wheel:
        names = [n for n in wheel.namelist() if METADATA.fullmatch(n)]
        if len(names) != 1:
            raise OSError(f"{url}: {len(names)} *.dist-info/METADATA members, expected one")
        return wheel.read(names[0])


def wheel_metadata(url: str) -> bytes:
    """The METADATA of the wheel at `url`: PyPI's separate `.metadata` file when it has one
    (not every wheel has one here), otherwise read from the wheel itself."""
    status, _, body = fetch(url + ".metadata")
    if status == 200 and body.startswith(b"Metadata-Version"):
        return body
    return metadata_in_wheel(url)


class _Cache:
    """Values computed once per key, even when several threads ask at the same time."""

    def __init__(self):
        self.values, self.locks, self.lock = {}, {}, threading.Lock()

    def get(self, key, compute):
        with self.lock:
            key_lock = self.locks.setdefault(key, threading.Lock())
        with key_lock:
            if key not in self.values:
                self.values[key] = compute()
            return self.values[key]


class MetadataIndex:
    """`with MetadataIndex() as index:` pip with `--index-url index.url` sees PyPI's pages with
    every wheel's metadata available apart. `index.requests` counts what went upstream."""

    def __init__(self, upstream: str = UPSTREAM):
        self.upstream, self.cache = upstream.rstrip("/"), _Cache()
        self.requests = {"pages": 0, "metadata": 0}
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # pip keeps its connection here alive

            def do_GET(self):  # noqa: N802 (http.server's name)
                owner.answer(self)

            def log_message(self, *args):  # quiet
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/simple"

    def __enter__(self) -> MetadataIndex:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def page(self, project: str) -> tuple[int, bytes]:
        """PyPI's JSON page for `project`, each wheel pointing here and marked with metadata."""
        self.requests["pages"] += 1
        status, _, body = fetch(f"{self.upstream}/{project}/", {"Accept": JSON_TYPE})
        if status != 200:
            return status, b""
        data = json.loads(body)
        base = self.url.removesuffix("/simple")
        for file in data.get("files", []):
            file.pop("dist-info-metadata", None)
            if file["filename"].endswith(".whl"):
                parts = urlsplit(file["url"])
                file["url"] = f"{base}/files/{parts.netloc}{parts.path}"
                file["core-metadata"] = True
        return 200, json.dumps(data).encode()

    def metadata(self, path: str) -> tuple[int, bytes]:
        self.requests["metadata"] += 1
        try:
            return 200, wheel_metadata("https://" + path)
        except (OSError, zipfile.BadZipFile) as error:
            return 502, str(error).encode()

    def answer(self, request: BaseHTTPRequestHandler) -> None:
        path = urlsplit(request.path).path
        if m := re.fullmatch(r"/simple/([^/]+)/?", path):
            status, body = self.cache.get(("page", m.group(1)), lambda: self.page(m.group(1)))
            kind = JSON_TYPE
        elif m := re.fullmatch(r"/files/(.+\.whl)\.metadata", path):
            status, body = self.cache.get(("meta", m.group(1)),
                                          lambda: self.metadata(m.group(1)))
            kind = "application/octet-stream"
        elif m := re.fullmatch(r"/files/(.+)", path):  # a wheel itself: PyPI serves it
            request.send_response(302)
            request.send_header("Location", "https://" + m.group(1))
            request.send_header("Content-Length", "0")
            request.end_headers()
            return
        else:
            status, body, kind = 404, b"", "text/plain"
        request.send_response(status)
        request.send_header("Content-Type", kind)
        request.send_header("Content-Length", str(len(body)))
        request.end_headers()
        request.wfile.write(body)
