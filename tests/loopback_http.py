"""A loopback HTTP file server that can misbehave on request: the download tests' server."""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SEND_CHUNK_BYTES = 2048


@dataclass
class Server:
    """What the handler serves, how it misbehaves, and every request it saw."""

    base: str = ""
    files: dict[str, bytes] = field(default_factory=dict)
    always_500: set[str] = field(default_factory=set)
    wrong_bytes: set[str] = field(default_factory=set)
    ignore_range: bool = False
    # Send an ETag (the body's md5) and honour If-Range with it, as a static file server does.
    etags: bool = True
    drop_first_after: dict[str, int] = field(default_factory=dict)  # path -> bytes sent
    # Seconds between chunks of SEND_CHUNK_BYTES: a slow link, to stop a client mid-file.
    chunk_delay_s: float = 0.0
    requests: list[tuple[str, str | None]] = field(default_factory=list)  # (path, Range)

    def url(self, path: str) -> str:
        return self.base + path


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        server: Server = self.server.state
        range_header = self.headers.get("Range")
        server.requests.append((self.path, range_header))
        if self.path in server.always_500:
            self.send_error(500)
            return
        if self.path not in server.files:
            self.send_error(404)
            return
        body = server.files[self.path]
        if self.path in server.wrong_bytes:
            body = bytes(len(body))
        etag = f'"{hashlib.md5(body).hexdigest()}"'
        # RFC 9110, 13.1.5: a Range request whose If-Range does not match gets the whole file.
        if_range = self.headers.get("If-Range")
        changed = if_range is not None and not (server.etags and if_range == etag)
        start = 0
        if range_header and not server.ignore_range and not changed:
            start = int(range_header.removeprefix("bytes=").removesuffix("-"))
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
        else:
            self.send_response(200)
        payload = body[start:]
        if server.etags:
            self.send_header("ETag", etag)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        cut = server.drop_first_after.pop(self.path, None)
        # Closing after `cut` bytes leaves the client short of Content-Length.
        payload = payload if cut is None else payload[:cut]
        try:
            for offset in range(0, len(payload), SEND_CHUNK_BYTES):
                self.wfile.write(payload[offset : offset + SEND_CHUNK_BYTES])
                time.sleep(server.chunk_delay_s)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client was killed mid-file
        self.close_connection = True

    def log_message(self, *args) -> None:
        pass


@contextlib.contextmanager
def serving() -> Iterator[Server]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.state = Server(base=f"http://127.0.0.1:{httpd.server_port}")
    # A short poll interval keeps shutdown (and so each test) fast.
    thread = threading.Thread(target=httpd.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield httpd.state
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()
