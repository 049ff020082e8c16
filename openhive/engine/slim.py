"""What litellm keeps in memory that a worker does not need, left out or loaded when used.

Every process that calls a model imports litellm (about 120 MB of a worker's ~240 MB). Three
parts of that are dead weight for us and are measured by benchmarks/worker_footprint.py:

- litellm.utils parses the Anthropic tokenizer JSON at import (~15 MB of dicts, kept as a 2 MB
  string) although only counting tokens for a Claude model reads it: its parse is put off
  until then (`deferred_tokenizer_json`, `defer_claude_tokenizer`).
- httpx imports its command-line client (rich, pygments, click: ~5 MB) when it can; we never run
  it, and httpx falls back to a stub when that import fails (`without_httpx_cli`).
- litellm loads its default tiktoken encoding (~26 MB) on every model call, to hand it to the
  provider's handler, which reads it only in rare paths; it gets a stand-in that loads the
  encoding when first touched (`defer_call_encoding`). Exact token counts (compaction and
  budgets near their limits) still load it.
- before every call litellm rewrites the file ids of `file` content parts, importing the
  proxy's types (~4 MB of pydantic models) to do so; a request without a file part skips the
  rewrite, which would leave it unchanged (`skip_file_id_rewrite`).
- a loaded tiktoken encoding keeps its 100k-entry rank table as a Python dict (~10 MB) beside
  the native tokenizer built from it, and reads it only to pickle an unregistered encoding:
  registered encodings give the table up, to be reloaded if anything asks (`slim_encodings`).
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator, Mapping
from types import ModuleType
from typing import Any

CLAUDE_JSON = "anthropic_tokenizer.json"
_PLACEHOLDER: dict = {}


@contextlib.contextmanager
def deferred_tokenizer_json() -> Iterator[None]:
    """While litellm imports, its Anthropic tokenizer file parses as an empty placeholder."""
    original = json.load

    def load(fp: Any, *args: Any, **kwargs: Any) -> Any:
        # Only that one file: any other thread's json.load meanwhile is untouched.
        if str(getattr(fp, "name", "")).endswith(CLAUDE_JSON):
            return _PLACEHOLDER
        return original(fp, *args, **kwargs)

    json.load = load
    try:
        yield
    finally:
        json.load = original


def defer_claude_tokenizer(litellm: ModuleType) -> None:
    """Make `litellm.utils.claude_json_str` (read as `from litellm.utils import ...` where a
    Claude token count needs it) load on first use, exactly as litellm builds it."""
    utils = getattr(litellm, "utils", None)
    if utils is None:
        return
    utils.__dict__.pop("json_data", None)  # the parsed JSON, dead once serialised
    if utils.__dict__.get("claude_json_str") != json.dumps(_PLACEHOLDER):
        return  # litellm.utils was imported before us, with the real JSON: nothing to defer
    del utils.__dict__["claude_json_str"]
    fallback = utils.__dict__.get("__getattr__")

    def lazy(name: str) -> Any:
        if name == "claude_json_str":
            text = claude_json_str()
            utils.__dict__["claude_json_str"] = text
            return text
        if fallback is None:
            raise AttributeError(f"module {utils.__name__!r} has no attribute {name!r}")
        return fallback(name)

    utils.__getattr__ = lazy


def claude_json_str() -> str:
    """The Anthropic tokenizer as litellm.utils serialises it."""
    from importlib import resources

    tokenizers = resources.files("litellm.litellm_core_utils.tokenizers")
    with tokenizers.joinpath(CLAUDE_JSON).open("r", encoding="utf-8") as f:
        return json.dumps(json.load(f))


@contextlib.contextmanager
def without_httpx_cli() -> Iterator[None]:
    """httpx imported without its CLI; a `None` module entry is Python's way to say "absent"."""
    if "httpx" in sys.modules or "httpx._main" in sys.modules:
        yield
        return
    sys.modules["httpx._main"] = None  # type: ignore[assignment]
    try:
        yield
    finally:
        # Gone again: whoever really wants the CLI later can still import it.
        if sys.modules.get("httpx._main", 0) is None:
            del sys.modules["httpx._main"]


class EncodingOnDemand:
    """litellm's default encoding, loaded when an attribute of it is first read."""

    def __init__(self) -> None:
        self._real: Any = None

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)  # copy, pickle and friends probe these: not a load
        if self._real is None:
            from litellm._lazy_imports import get_default_encoding

            self._real = get_default_encoding()
            slim_encodings()
        return getattr(self._real, name)


def defer_call_encoding(litellm: ModuleType) -> None:
    main = sys.modules.get("litellm.main")
    if main is not None and getattr(main, "_encoding_cache", 0) is None:
        main._encoding_cache = EncodingOnDemand()  # what its `_get_encoding()` hands out


def skip_file_id_rewrite(litellm: ModuleType) -> None:
    main = sys.modules.get("litellm.main")
    original = getattr(main, "update_messages_with_model_file_ids", None)
    if original is None or getattr(original, "openhive_gate", False):
        return

    def rewrite(messages: list, *args: Any, **kwargs: Any) -> Any:
        if not any(_has_file_part(m) for m in messages):
            return messages  # what the rewrite returns for them, untouched
        return original(messages, *args, **kwargs)

    rewrite.openhive_gate = True  # type: ignore[attr-defined]
    main.update_messages_with_model_file_ids = rewrite  # type: ignore[union-attr]


def _has_file_part(message: Any) -> bool:
    if not isinstance(message, dict) or message.get("role") != "user":
        return False
    content = message.get("content")
    if not content or isinstance(content, str):
        return False
    return any(isinstance(part, dict) and part.get("type") == "file" for part in content)


class RanksOnDemand(Mapping):
    """An encoding's rank table, loaded again from tiktoken's own cache only if read."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._ranks: dict[bytes, int] | None = None

    def _table(self) -> dict[bytes, int]:
        if self._ranks is None:
            import tiktoken.registry

            tiktoken.registry.get_encoding(self.name)  # makes sure the constructors are known
            constructors = tiktoken.registry.ENCODING_CONSTRUCTORS or {}
            self._ranks = constructors[self.name]()["mergeable_ranks"]
        return self._ranks

    def __getitem__(self, key: bytes) -> int:
        return self._table()[key]

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._table())

    def __len__(self) -> int:
        return len(self._table())


def slim_encodings() -> None:
    """Every loaded, registered tiktoken encoding gives up its Python rank table."""
    registry = sys.modules.get("tiktoken.registry")
    if registry is None:
        return
    for name, encoding in list(registry.ENCODINGS.items()):
        if type(getattr(encoding, "_mergeable_ranks", None)) is dict:
            encoding._mergeable_ranks = RanksOnDemand(name)
