"""JSON text for the hot paths of a session step: the same text `json.dumps` makes, without its
per-call setup.

`json.dumps(value, default=str)` with any keyword argument builds a new `JSONEncoder` and walks
three Python frames before the C encoder starts: ~350 bytecodes a call, more than encoding a
small message. A session step encodes each message, reply, tool result and audit row once or
twice, so the encoders here are made once and called directly. `loads` takes the C scanner
straight for text these encoders wrote (the standard `json.loads` for anything else)."""

from __future__ import annotations

import json
from collections.abc import Callable
from json import decoder as _decoder
from json import encoder as _encoder
from typing import Any

Dumps = Callable[[Any], str]


def _encoder_of(
    *, sort_keys: bool, ensure_ascii: bool, default: Callable[[Any], Any] | None = str
) -> Dumps:
    """`json.dumps(value, default=default, sort_keys=..., ensure_ascii=...)`, the same text
    (`default` None: a value JSON has no form for raises TypeError). No check for circular
    structures: a circular value raises RecursionError, not ValueError."""
    standard = json.JSONEncoder(sort_keys=sort_keys, ensure_ascii=ensure_ascii, default=default)
    make = _encoder.c_make_encoder
    if make is None:  # a Python built without the _json accelerator
        return standard.encode
    escape = _encoder.c_encode_basestring_ascii if ensure_ascii else _encoder.c_encode_basestring
    encode = make(None, standard.default, escape, None, ": ", ", ", sort_keys, False, True)

    def dumps(value: Any) -> str:
        return "".join(encode(value, 0))

    return dumps


# json.dumps(value, default=str)
dumps = _encoder_of(sort_keys=False, ensure_ascii=True)
# ... with ensure_ascii=False: text no database stores shows as itself (a lone surrogate)
dumps_text = _encoder_of(sort_keys=False, ensure_ascii=False)
# ... with sort_keys=True: the canonical text a request digest hashes
canonical = _encoder_of(sort_keys=True, ensure_ascii=True)
# json.dumps(value): TypeError for a value JSON has no form for
dumps_strict = _encoder_of(sort_keys=False, ensure_ascii=True, default=None)


def text_or_none(encode: Dumps, value: Any) -> str | None:
    """`encode(value)`, or None for a value with no JSON text (an unencodable or circular one)."""
    try:
        return encode(value)
    except (TypeError, ValueError, RecursionError):
        return None


_scan = _decoder.JSONDecoder().scan_once


def loads(text: str) -> Any:
    """`json.loads(text)`; quickest for text the encoders above wrote (no whitespace around)."""
    try:
        value, end = _scan(text, 0)
    except StopIteration:
        return json.loads(text)  # raises the standard error
    if end != len(text):
        return json.loads(text)
    return value
