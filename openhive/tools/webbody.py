"""Reading and rendering a web_fetch response body: a hard byte cap that holds after
decompression (a small gzip body cannot expand past it), a whole-request deadline, and HTML
turned into readable text (trafilatura: main content as markdown, with links and tables)."""

from __future__ import annotations

import logging
import re
import time
import zlib

import httpx

from openhive.core.errors import DomainError

logger = logging.getLogger(__name__)

_BINARY_TYPES = re.compile(
    r"^(image|audio|video|font)/|^application/(octet-stream|pdf|zip|gzip|x-tar|x-7z|"
    r"vnd\.ms-|vnd\.openxmlformats|x-protobuf|wasm)"
)
_HTML_TYPES = ("text/html", "application/xhtml+xml")


class _Decoder:
    """Content-Encoding undone with a bound on the output of every step."""

    def __init__(self, encoding: str) -> None:
        self.encoding = encoding
        self.inner: zlib._Decompress | None = None
        if encoding in ("gzip", "x-gzip"):
            self.inner = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif encoding == "deflate":
            self.inner = zlib.decompressobj()
        self.started = False

    def feed(self, chunk: bytes, room: int) -> bytes:
        if self.inner is None:
            return chunk[:room]
        if not self.started and self.encoding == "deflate":
            self.started = True
            try:
                return self._bounded(chunk, room)
            except zlib.error:
                # Some servers send raw deflate without the zlib header.
                self.inner = zlib.decompressobj(-zlib.MAX_WBITS)
        return self._bounded(chunk, room)

    def _bounded(self, chunk: bytes, room: int) -> bytes:
        assert self.inner is not None
        out = self.inner.decompress(chunk, room)
        while self.inner.unconsumed_tail and len(out) < room:
            out += self.inner.decompress(self.inner.unconsumed_tail, room - len(out))
        return out


def read_body(
    response: httpx.Response, cap: int, deadline: float, method: str
) -> tuple[bytes, bool]:
    """Up to `cap` decoded bytes of the body, and whether more was there."""
    if method == "HEAD":
        return b"", False
    encoding = response.headers.get("content-encoding", "").strip().lower()
    decoder = _Decoder(encoding)
    out = bytearray()
    try:
        for chunk in response.iter_raw():
            if time.monotonic() > deadline:
                raise DomainError("the response took longer than the timeout", code="timeout")
            room = cap + 1 - len(out)
            out += decoder.feed(chunk, room)
            if len(out) > cap:
                return bytes(out[:cap]), True
    except zlib.error as exc:
        raise DomainError(
            f"the response body is not valid {encoding}: {exc}", code="fetch_failed"
        ) from None
    return bytes(out), False


def _charset(content_type: str) -> str | None:
    match = re.search(r"charset=[\"']?([A-Za-z0-9_.:-]+)", content_type, re.I)
    return match.group(1) if match else None


def _decode(data: bytes, charset: str | None) -> str:
    try:
        return data.decode(charset or "utf-8", "replace")
    except LookupError:
        return data.decode("utf-8", "replace")


def render_body(data: bytes, content_type: str, *, raw: bool) -> tuple[str, str]:
    """(text for the model, its form: empty | binary | text | html-text | html)."""
    if not data:
        return "", "empty"
    mime = content_type.split(";", 1)[0].strip().lower()
    if _BINARY_TYPES.match(mime) or b"\x00" in data[:8192]:
        return (
            f"[binary content: {len(data)} bytes of {mime or 'unknown type'}; not shown]",
            "binary",
        )
    charset = _charset(content_type)
    looks_html = mime in _HTML_TYPES or (
        not mime and data.lstrip()[:15].lower().startswith((b"<!doctype html", b"<html"))
    )
    if not looks_html:
        return _decode(data, charset), "text"
    if raw:
        return _decode(data, charset), "html"
    return html_to_text(_decode(data, charset) if charset else data), "html-text"


def html_to_text(html: str | bytes) -> str:
    """Readable text of a page: its main content as markdown (links and tables kept), or all
    of its text when no main content is recognised."""
    import trafilatura  # ~0.25 s to import: only when a page is actually converted

    try:
        text = trafilatura.extract(
            html,
            output_format="markdown",
            include_links=True,
            include_tables=True,
            include_comments=False,
            favor_recall=True,
            deduplicate=False,
        )
        if not text or not text.strip():
            text = trafilatura.html2txt(html)
    except Exception:  # a page the parser chokes on still gets an answer
        logger.debug("trafilatura failed on a page", exc_info=True)
        text = re.sub(
            r"<[^>]+>", " ", html if isinstance(html, str) else html.decode("utf-8", "replace")
        )
    return (text or "").strip()
