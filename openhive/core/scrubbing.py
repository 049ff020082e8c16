"""One scrubber that knows every live secret value and replaces it with [REDACTED] wherever
text leaves our hands: logs, audit rows, LLM exchange records, chat messages, task results and
API responses."""

from __future__ import annotations

import functools
import json
import logging
import re
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from openhive.core.reads import Read

REDACTED = "[REDACTED]"
MIN_SECRET_LENGTH = 8  # shorter values would redact ordinary words
CACHE_SECONDS = 2.0

# Shapes that are secrets whatever their source (provider keys, bearer tokens, token params).
PATTERNS = [
    re.compile(r"sk-[A-Za-z0-9_-]{20,}"),
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{8,}"),
    re.compile(r"(?i)(token=)[A-Za-z0-9._~+/%-]{8,}"),
    re.compile(r"(?i)(api[_-]?key[\"']?\s*[=:]\s*[\"']?)[A-Za-z0-9._~+/-]{8,}"),
]
# Whether the four substitutions need to run at all (most strings a session records hold none)
# is decided by plain substring searches for what every match contains, lower-cased
# (`_may_match_patterns`). A case-insensitive regex scan for the same words took ~30 ns a
# character, ~60 us on a system prompt, and every step's new messages went through it twice.
# Argument keys whose values are secret by nature, even before the vault knows them (each is
# among the words `Scrubber.untouched` looks for).
SENSITIVE_KEYS = frozenset({"credentials", "password", "api_key", "secret", "token"})
_QUOTED_KEYS = tuple(f'"{key}"' for key in SENSITIVE_KEYS)


@functools.lru_cache(maxsize=4096)
def escaped_forms(secret: str) -> frozenset[str]:
    """The ways a value is written once it has passed through an encoder: a JSON string (ASCII
    escapes or not, and once more inside another JSON string) and a Python repr. A secret with a
    quote, a backslash, a control or a non-ASCII character looks different in each, and a text
    search for the raw value would miss every one of them."""
    forms = {secret}
    for ensure_ascii in (True, False):
        once = json.dumps(secret, ensure_ascii=ensure_ascii)[1:-1]
        forms |= {once, json.dumps(once, ensure_ascii=ensure_ascii)[1:-1]}
    forms.add(repr(secret)[1:-1])
    return frozenset(form for form in forms if form)


# Characters that every JSON encoder writes as they are, at any depth of JSON nested in strings:
# printable ASCII but the quote and the backslash (always escaped) and the slash (written `\/` by
# some encoders, PHP's among them). A secret made of them only shows in the JSON text of a value
# holding it as itself, unless an encoder chose a \u escape for one of them (see `untouched`).
_VERBATIM = frozenset(map(chr, range(0x20, 0x7F))) - {'"', "\\", "/"}


class Scrubber:
    def __init__(self, secrets: Iterable[str] = (), *, min_length: int = MIN_SECRET_LENGTH) -> None:
        # Longest first, so a secret that contains another is replaced whole.
        self.secrets = sorted(
            {s for s in secrets if s and len(s) >= max(1, min_length)}, key=len, reverse=True
        )
        # Every written form of every secret, longest first for the same reason.
        self.forms = sorted(
            {form for s in self.secrets for form in escaped_forms(s)}, key=len, reverse=True
        )
        # Whether `untouched` can decide by a text search: every secret is written verbatim.
        self.screenable = all(_VERBATIM.issuperset(s) for s in self.secrets)

    def untouched(self, text: str) -> bool:
        """Whether `data()` would leave unchanged the value whose JSON text is `text`
        (`json.dumps` of it, either `ensure_ascii`): True only when no secret, no secret-shaped
        word and no sensitive key name occurs anywhere in it, nested JSON strings included.
        A walk of the value cost ~20 calls per message a session records; this is a dumps and
        a few substring searches. False means "look closer" (`data`), never "nothing there".

        Why a search of the text sees what the walk would: the walk checks each string for the
        secrets and the shape words, decodes strings holding JSON and checks theirs, and redacts
        sensitive keys' values. A string's JSON text holds every ASCII word of it unchanged, and a
        verbatim secret unchanged (`_VERBATIM`), at every depth -- unless an encoder wrote a
        character of nested JSON as a \\u escape or a slash as `\\/`, which the outer text then
        shows as `\\\\u` or `\\\\/`: such a text is never called untouched."""
        if not self.screenable or "\\\\u" in text or "\\\\/" in text:
            return False
        for secret in self.secrets:
            if secret in text:
                return False
        lowered = text.lower()
        # Spelled out, as in `_may_match_patterns`: a generator cost more than the searches.
        return not (
            _may_match_patterns(text, lowered)
            # What `json.dumps` escapes of what case-insensitive matching reads as an ASCII
            # letter: the two i's of `_may_match_patterns`, and the Kelvin sign (a k)
            or "\\u013" in lowered
            or "\\u212a" in lowered
            or may_name_sensitive_key(lowered)
        )

    def text(self, value: str) -> str:
        for form in self.forms:
            if form in value:
                value = value.replace(form, REDACTED)
        if not _may_match_patterns(value, value.lower()):
            return value
        for pattern in PATTERNS:
            value = pattern.sub(_redact_match, value)
        return value

    def values(self, value: str) -> tuple[str, int]:
        """Replace the known secret values only, not the secret-shaped patterns, and count
        them: for file contents, where a pattern would also mangle ordinary code such as
        `api_key = os.environ[...]`."""
        count = 0
        for secret in self.secrets:
            if secret in value:
                count += value.count(secret)
                value = value.replace(secret, REDACTED)
        return value, count

    def data(self, value: Any) -> Any:
        """Scrub every string inside JSON-like data; keys named like secrets lose their values.
        A string holding a JSON object or list (a tool result as the model reads it) is scrubbed
        as the structure it encodes, then written back the way it was written."""
        if isinstance(value, str):
            return self.text(self._json_text(value))
        if isinstance(value, dict):
            return {
                k: (_redact_all(v) if str(k).lower() in SENSITIVE_KEYS else self.data(v))
                for k, v in value.items()
            }
        if isinstance(value, (list, tuple)):
            return [self.data(v) for v in value]
        return value

    def _json_text(self, value: str) -> str:
        head = value[:1]
        if head not in ("{", "[") or not (self.secrets or _may_hold_secret_shapes(value)):
            return value
        try:
            decoded = json.loads(value)
        except (ValueError, RecursionError):
            return value
        if not isinstance(decoded, (dict, list)):
            return value
        scrubbed = self.data(decoded)
        if scrubbed == decoded:
            return value
        # The encoding the session loop uses (`json.dumps(result, default=str)`).
        return json.dumps(scrubbed)

    def with_extra(self, extra: Iterable[str]) -> Scrubber:
        extra = list(extra)
        if not extra:  # a session asks for this at every step; most hand over no secret
            return self
        return Scrubber([*self.secrets, *extra])


def _redact_match(match: re.Match) -> str:
    return (match.group(1) if match.groups() else "") + REDACTED


def _may_match_patterns(value: str, lowered: str) -> bool:
    """Whether any of PATTERNS may match `value` (a superset: false only when none can)."""
    # Spelled out: a generator over the words cost more than the searches on short strings.
    # IGNORECASE lets `i` also match the dotless i (U+0131), which str.lower() keeps as it is,
    # and the dotted capital I (U+0130), which it turns into two characters: with either, the
    # patterns decide.
    return (
        "sk-" in value
        or "bearer" in lowered
        or "token=" in lowered
        or "apikey" in lowered
        or "api_key" in lowered
        or "api-key" in lowered
        or "\u0130" in value
        or "\u0131" in value
    )


def may_name_sensitive_key(lowered: str) -> bool:
    """Whether lower-cased text holds any of SENSITIVE_KEYS (spelled out: a generator over
    them cost more than the searches)."""
    return (
        "password" in lowered
        or "token" in lowered
        or "secret" in lowered
        or "credentials" in lowered
        or "api_key" in lowered
    )


def _may_hold_secret_shapes(value: str) -> bool:
    """Without known secrets only sensitive keys and secret shapes can matter."""
    lowered = value.lower()
    return _may_match_patterns(value, lowered) or any(q in lowered for q in _QUOTED_KEYS)


def _redact_all(value: Any) -> Any:
    """Inside a sensitive subtree every string value goes, but names ("key") stay readable."""
    if isinstance(value, dict):
        return {k: (v if k in ("key", "name") else _redact_all(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact_all(v) for v in value]
    if isinstance(value, str):
        return REDACTED
    return value


def sensitive_values(value: Any) -> list[str]:
    """The strings `Scrubber.data` would redact by key (credential values, passwords, tokens),
    so that the same values can be scrubbed wherever else they appear: in free text next to
    them, in an error, or in a reply that repeats them."""
    found: list[str] = []

    def collect(node: Any, sensitive: bool) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                if sensitive and k in ("key", "name"):
                    continue
                collect(v, sensitive or str(k).lower() in SENSITIVE_KEYS)
        elif isinstance(node, (list, tuple)):
            for v in node:
                collect(v, sensitive)
        elif sensitive and isinstance(node, str):
            found.append(node)

    collect(value, False)
    return found


_lock = threading.Lock()
_cached: Scrubber = Scrubber()
_loaded_at = 0.0


SecretSource = Callable[[], Iterable[str]]
_SOURCES: dict[str, SecretSource] = {}
# Sources that read the database, as a `Read` whose answer is the values: a session's start
# sends them with its own first write (`refresh_reads`, `refresh_with`).
_READS: dict[str, Callable[[], Read]] = {}


def register_secret_source(
    name: str, source: SecretSource, *, read: Callable[[], Read] | None = None
) -> None:
    """Let an app tell the scrubber where live secrets come from (the vault's secret rows, the
    provider profiles' keys). Apps register in their `AppConfig.ready()`. `read`, for a source
    that queries the database: the same values as a `Read`, so they can travel with other
    statements in one round trip."""
    _SOURCES[name] = source
    _READS.pop(name, None)
    if read is not None:
        _READS[name] = read
    invalidate()


def _load_secret_values() -> list[str]:
    return [value for source in list(_SOURCES.values()) for value in source()]


def refresh_reads() -> list[Read]:
    """The reads a reload needs, for the caller to send (with its own statements) and hand
    their answers, in this order, to `refresh_with`."""
    return [read() for read in list(_READS.values())]


def refresh_with(answers: Sequence[Iterable[str]]) -> Scrubber:
    """Reload, as `get_scrubber(refresh=True)` does, with the answers of `refresh_reads()`;
    the sources without a read are asked as usual."""
    read_by = set(_READS)
    values = [v for name, source in list(_SOURCES.items()) if name not in read_by for v in source()]
    return _install([*values, *(value for answer in answers for value in answer)])


def _install(values: list[str]) -> Scrubber:
    global _cached, _loaded_at
    with _lock:
        _cached = Scrubber(values)
        _loaded_at = time.monotonic()
    return _cached


def get_scrubber(*, refresh: bool = False) -> Scrubber:
    """The scrubber with every live secret. Reloaded from the database when older than a couple
    of seconds, so a secret written by another process is known here almost at once."""
    if refresh or time.monotonic() - _loaded_at > CACHE_SECONDS:
        return _install(_load_secret_values())
    return _cached


def invalidate() -> None:
    global _loaded_at
    _loaded_at = 0.0


def remember(values: Iterable[str]) -> None:
    """Teach the cached scrubber new secret values at once, without the database: a log line
    written right after a secret is stored must not carry it (the logging filter never reads
    the database). The next reload replaces the cache with the database's truth."""
    global _cached
    with _lock:
        _cached = _cached.with_extra(values)


def cached_scrubber() -> Scrubber:
    """The last loaded scrubber, without touching the database (safe inside logging and async)."""
    return _cached


def scrub(value: str) -> str:
    return get_scrubber().text(value)


def scrub_data(value: Any) -> Any:
    return get_scrubber().data(value)


class ScrubSecretsFilter(logging.Filter):
    """Logging filter: a log line never carries a known secret or a secret-shaped string."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed log call must not break logging
            return True
        record.msg = cached_scrubber().text(message)
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = cached_scrubber().text(record.exc_text)
        return True
