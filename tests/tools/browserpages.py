"""Loopback sites for the browser tests: `PagesServer` serves the pages a team browses (the
tests exempt it with OPENHIVE_SSRF_ALLOW); `ForbiddenServer` is NOT exempted and counts every
TCP connection it accepts, so a test can prove that nothing ever reached it."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse


def page(title: str, body: str) -> bytes:
    return (
        f"<!doctype html><html><head><meta charset=utf-8><title>{title}</title></head>"
        f"<body>{body}</body></html>"
    ).encode()


class PagesHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, status: int, body: bytes = b"", ctype: str = "text/html", **headers: str):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
        self.server.posts.append((self.path, form))  # type: ignore[attr-defined]
        if self.path == "/search":  # post, redirect, get
            self._send(303, Location=f"/result?q={form.get('q', '')}")
        elif self.path == "/login":
            ok = form.get("password") == self.server.password  # type: ignore[attr-defined]
            self._send(200, page("Login", f"<h1>{'Welcome' if ok else 'Wrong password'}</h1>"))
        else:
            self._send(404, b"not found", "text/plain")

    def do_GET(self) -> None:
        url = urlparse(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        forbidden = self.server.forbidden  # type: ignore[attr-defined]
        path = url.path
        if path == "/":
            self._send(200, page("Home", '<h1>Welcome home</h1><a href="/form">Search form</a>'))
        elif path == "/form":
            body = (
                '<form method="post" action="/search"><label>Query <input name="q"></label>'
                "<button>Search</button></form>"
            )
            self._send(200, page("Form", body))
        elif path == "/result":
            self._send(200, page("Result", f"<h1>You searched: {query.get('q', '')}</h1>"))
        elif path == "/hop":
            self._send(302, Location=query["to"])
        elif path == "/subresources":
            self._send(200, page("Subresources", _subresources(forbidden, self.server_port())))
        elif path == "/popup":
            body = (
                "<button onclick=\"window.open('/result?q=popped')\">Open</button>"
                f"<button onclick=\"window.open('{forbidden}/popup')\">Open forbidden</button>"
            )
            self._send(200, page("Popup", body))
        elif path == "/socket":
            script = (
                f"const ws = new WebSocket({query['to']!r});"
                "ws.onopen = () => ws.send('ping');"
                "ws.onmessage = e => { document.getElementById('state').textContent = "
                "'reply: ' + e.data; };"
                "ws.onclose = e => { document.getElementById('closed').textContent = "
                "'closed ' + e.code; };"
            )
            body = f'<h1 id="state">waiting</h1><p id="closed"></p><script>{script}</script>'
            self._send(200, page("Socket", body))
        elif path == "/download":
            self._send(200, page("Download", '<a href="/file.bin">Get the file</a>'))
        elif path == "/file.bin":
            self._send(
                200,
                b"\x00" * 2048,
                "application/octet-stream",
                Content_Disposition='attachment; filename="file.bin"',
            )
        elif path == "/cookie/set":
            self._send(
                200,
                page("Cookie set", "<p>set</p>"),
                Set_Cookie=f"team={query.get('v', 'x')}; Path=/; HttpOnly",
            )
        elif path == "/cookie/show":
            shown = self.headers.get("Cookie") or "no cookie"
            self._send(200, page("Cookie", f"<p>cookie: {shown}</p>"))
        elif path == "/login":
            body = (
                '<form method="post" action="/login"><label>Account token <input name="token" '
                "oninput=\"document.getElementById('echo').textContent = this.value\"></label>"
                '<label>Password <input type="password" name="password"></label>'
                '<button>Sign in</button></form><p id="echo"></p>'
            )
            self._send(200, page("Login", body))
        else:
            self._send(404, b"not found", "text/plain")

    def server_port(self) -> int:
        return self.server.server_address[1]  # type: ignore[index]


def _subresources(forbidden: str, port: int) -> str:
    ws = forbidden.replace("http://", "ws://")
    return f"""
<h1 id="state">loading</h1>
<img src="{forbidden}/img.png" alt="private image">
<img src="/hop?to={forbidden}/hopped.png" alt="redirected image">
<img src="http://localhost:{port}/named.png" alt="by name">
<iframe src="{forbidden}/frame"></iframe>
<script>
const outcomes = [];
const fetchDone = fetch("{forbidden}/fetch").then(() => "fetch=reached", () => "fetch=failed");
const xhrDone = new Promise(resolve => {{
  const x = new XMLHttpRequest();
  x.open("GET", "{forbidden}/xhr");
  x.onload = () => resolve("xhr=reached");
  x.onerror = () => resolve("xhr=failed");
  x.send();
}});
const wsDone = new Promise(resolve => {{
  let ws;
  try {{ ws = new WebSocket("{ws}/socket"); }} catch (e) {{ resolve("ws=refused"); return; }}
  ws.onopen = () => resolve("ws=open");
  ws.onerror = () => resolve("ws=failed");
  ws.onclose = () => resolve("ws=closed");
}});
Promise.all([fetchDone, xhrDone, wsDone]).then(r => {{
  document.getElementById("state").textContent = "results: " + r.join(" ");
}});
</script>"""


class PagesServer:
    def __init__(self, forbidden: str = "", password: str = "") -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), PagesHandler)
        self.httpd.forbidden = forbidden  # type: ignore[attr-defined]
        self.httpd.password = password  # type: ignore[attr-defined]
        self.httpd.posts = []  # type: ignore[attr-defined]
        self.port = self.httpd.server_address[1]
        self.authority = f"127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def posts(self) -> list:
        return self.httpd.posts  # type: ignore[attr-defined]

    def url(self, path: str) -> str:
        return f"http://{self.authority}{path}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class _Counting(ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), PagesHandler)
        self.connections = 0
        self.forbidden = ""
        self.password = ""
        self.posts: list = []

    def verify_request(self, request: object, client_address: object) -> bool:
        self.connections += 1
        return True


class ForbiddenServer:
    """Any connection here is a failure of the browser's network policy."""

    def __init__(self) -> None:
        self.httpd = _Counting()
        self.port = self.httpd.server_address[1]
        self.base = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def connections(self) -> int:
        return self.httpd.connections

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
