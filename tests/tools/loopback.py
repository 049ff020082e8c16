"""A loopback HTTP server for the web tests: the only place any test sends traffic."""

from __future__ import annotations

import gzip
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

PAGE = b"""<!doctype html><html><head><title>Status</title><style>.x{color:red}</style>
<script>var secret = 'not content';</script></head><body>
<nav><a href="/">Home</a> | <a href="/about">About</a></nav>
<main><h1>Service status</h1>
<p>All systems are <b>operational</b>. The last incident was resolved on Monday, and the
database cluster has been healthy for twelve days in a row.</p>
<table><tr><th>Service</th><th>State</th></tr><tr><td>API</td><td>up</td></tr>
<tr><td>Workers</td><td>up</td></tr></table>
<p>See the <a href="https://example.org/history">incident history</a> for details.</p></main>
<footer>Copyright</footer></body></html>"""


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out as separate writes; with Nagle on, the body waits for the
    # client's delayed ACK (40 ms) on a keep-alive connection.
    disable_nagle_algorithm = True

    def log_message(self, *args: object) -> None:  # quiet test output
        pass

    def _send(self, status: int, body: bytes, content_type: str = "text/plain", **headers: str):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_GET(self) -> None:
        url = urlparse(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        self.server.hits.append((self.command, url.path, dict(self.headers)))  # type: ignore[attr-defined]
        if url.path == "/text":
            self._send(200, b"hello from loopback")
        elif url.path == "/html":
            self._send(200, PAGE, "text/html; charset=utf-8")
        elif url.path == "/json":
            self._send(200, b'{"ok": true}', "application/json")
        elif url.path == "/big":
            self._send(200, b"x" * (2 * 1024 * 1024 + 10))
        elif url.path == "/gzip-bomb":
            self._send(200, gzip.compress(b"a" * (64 * 1024 * 1024)), Content_Encoding="gzip")
        elif url.path == "/gzip":
            self._send(200, gzip.compress(b"zipped text"), Content_Encoding="gzip")
        elif url.path == "/image":
            self._send(200, b"\x89PNG\r\n\x1a\n\x00\x00", "image/png")
        elif url.path == "/echo":
            body = json.dumps({k.lower(): v for k, v in self.headers.items()}).encode()
            self._send(200, body, "application/json")
        elif url.path == "/redirect":
            self._send(int(query.get("status", 302)), b"", Location=query["to"])
        elif url.path == "/loop":
            self._send(302, b"", Location="/loop")
        elif url.path == "/slow":
            time.sleep(float(query.get("seconds", 3)))
            self._send(200, b"late")
        elif url.path == "/drip":
            self.send_response(200)
            self.send_header("Content-Length", "100")
            self.end_headers()
            for _ in range(100):
                self.wfile.write(b"x")
                self.wfile.flush()
                time.sleep(0.1)
        else:
            self._send(404, b"not found")

    do_HEAD = do_GET

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        url = urlparse(self.path)
        self.server.hits.append((self.command, url.path, dict(self.headers)))  # type: ignore[attr-defined]
        if url.path == "/redirect":
            query = {k: v[0] for k, v in parse_qs(url.query).items()}
            self._send(int(query.get("status", 302)), b"", Location=query["to"])
            return
        self._send(
            200, json.dumps({"method": "POST", "body": body.decode()}).encode(), "application/json"
        )


class LoopbackServer:
    def __init__(self, host: str = "127.0.0.1") -> None:
        self.httpd = ThreadingHTTPServer((host, 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.hits = []  # type: ignore[attr-defined]
        self.host = host
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def hits(self) -> list:
        return self.httpd.hits  # type: ignore[attr-defined]

    @property
    def authority(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def url(self, path: str = "/text") -> str:
        return f"http://{self.authority}{path}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
