"""The scrubber's screen (`Scrubber.untouched`): a look at a value's JSON text that lets a
session record a message as it is. It may say "look closer" for a clean value, never "clean" for
a value the full walk (`Scrubber.data`) would change, whatever wrote JSON nested in its strings."""

from __future__ import annotations

import json
import random

import pytest

from openhive.core.scrubbing import (
    REDACTED,
    SENSITIVE_KEYS,
    Scrubber,
    may_name_sensitive_key,
)

SECRET = "tok3n-VALUE-abcdef12"  # verbatim in any JSON text (no quote, backslash or slash)


def _php_json(value: object) -> str:
    """JSON as PHP's json_encode writes it: slashes escaped."""
    return json.dumps(value).replace("/", "\\/")


def _letters_escaped(value: object) -> str:
    """JSON whose encoder wrote every letter of strings as a \\u escape (legal, if perverse)."""
    text = json.dumps(value)
    out, in_string, i = [], False, 0
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            out.append(text[i : i + 2])
            i += 2
            continue
        if ch == '"':
            in_string = not in_string
        elif in_string and ch.isalpha():
            ch = f"\\u{ord(ch):04x}"
        out.append(ch)
        i += 1
    return "".join(out)


ENCODERS = {
    "python": json.dumps,
    "python, non-ASCII kept": lambda v: json.dumps(v, ensure_ascii=False),
    "php": _php_json,
    "letters escaped": _letters_escaped,
}


def _screen_agrees(scrubber: Scrubber, value: object) -> None:
    for ensure_ascii in (True, False):
        text = json.dumps(value, default=str, ensure_ascii=ensure_ascii)
        if scrubber.untouched(text):
            assert scrubber.data(value) == value, (text, scrubber.data(value))


def test_a_plain_tool_step_is_untouched():
    scrubber = Scrubber([SECRET])
    reply = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}}
        ],
    }
    result = {"role": "tool", "tool_call_id": "c1", "content": json.dumps({"sum": 3.0})}
    for value in (reply, result, [{"profile": "default", "attempt": 1, "ok": True}]):
        assert scrubber.untouched(json.dumps(value))
        assert scrubber.data(value) == value


@pytest.mark.parametrize("encoder", ENCODERS)
def test_a_secret_in_json_nested_in_a_string_is_never_screened_out(encoder):
    scrubber = Scrubber([SECRET])
    nested = ENCODERS[encoder]({"body": f"the key is {SECRET}", "url": "https://x.test/a"})
    value = {"role": "tool", "content": nested}
    assert not scrubber.untouched(json.dumps(value))
    assert not scrubber.untouched(json.dumps(value, ensure_ascii=False))
    assert SECRET not in json.dumps(scrubber.data(value))


@pytest.mark.parametrize(
    "secret",
    ["with/slash-0123456", 'with"quote-0123456', "with\\backslash-01", "non-ascii-é-0123456"],
)
def test_a_secret_an_encoder_may_rewrite_sends_every_value_to_the_full_walk(secret):
    scrubber = Scrubber([secret])
    assert not scrubber.screenable
    assert not scrubber.untouched(json.dumps({"content": "nothing to see"}))


@pytest.mark.parametrize(
    "value",
    [
        {"content": "Authorization: Bearer abcdefgh12345678"},
        {"content": "sk-abcdefghijklmnopqrstuvwxyz0123"},
        {"content": json.dumps({"password": "p4ssw0rd-long-enough"})},
        {"content": json.dumps({"Token": "abc"})},
        {"content": "ap\u0131_key=zzzzyyyyxxxx"},  # a dotless i: "api_key" to the pattern
        {"args": {"api_key": "zzzzyyyyxxxx"}},
        {"args": {"to\u212aen": "abc"}},  # the Kelvin sign: "token" once lower-cased
        {"content": "TO\u212aEN=abcdefgh12345"},
    ],
)
def test_secret_shapes_and_sensitive_keys_are_never_screened_out(value):
    scrubber = Scrubber()
    assert scrubber.data(value) != value
    for ensure_ascii in (True, False):
        assert not scrubber.untouched(json.dumps(value, ensure_ascii=ensure_ascii))


def test_the_screen_never_calls_clean_what_the_walk_would_change():
    """Random values: secrets, shapes and sensitive keys at any depth, in strings and in JSON
    nested in strings written by each encoder; the screen's "untouched" must mean unchanged."""
    rng = random.Random(19)
    scrubber = Scrubber([SECRET, "another-secret-987654"])
    pieces = ["plain words", SECRET, "x" + SECRET + "y", "Bearer abcdefgh1234", "token=abc12345",
              "api-key: 123456789", "caf\u00e9", "\u0130stanbul", "a/b", "null", "{}"]  # fmt: skip
    keys = ["content", "name", "password", "Secret", "result", "note", "credentials", "data"]

    def make(depth: int) -> object:
        kind = rng.random()
        if depth > 2 or kind < 0.35:
            return rng.choice(pieces) + " " + rng.choice(pieces)
        if kind < 0.55:
            return [make(depth + 1) for _ in range(rng.randint(0, 3))]
        if kind < 0.8:
            return {rng.choice(keys): make(depth + 1) for _ in range(rng.randint(0, 3))}
        encoder = ENCODERS[rng.choice(list(ENCODERS))]
        return encoder({rng.choice(keys): make(depth + 1)})

    screened = 0
    for _ in range(3000):
        value = make(0)
        _screen_agrees(scrubber, value)
        screened += scrubber.untouched(json.dumps(value))
    assert screened > 100  # the screen does pass clean values


@pytest.mark.parametrize("key", sorted(SENSITIVE_KEYS))
def test_every_sensitive_key_sends_a_value_to_the_full_walk(key):
    assert may_name_sensitive_key(f"x{key}y")
    value = {"content": json.dumps({key.upper(): "x"})}
    assert not Scrubber().untouched(json.dumps(value))
    assert Scrubber().data(value) != value


def test_a_recorded_step_redacts_a_secret_the_screen_sent_on():
    from openhive.engine.recorder import _clean

    scrubber = Scrubber([SECRET])
    message = {"role": "tool", "content": _php_json({"echo": SECRET})}
    recorded = _clean(scrubber, message, json.dumps(message, sort_keys=True))
    assert SECRET not in json.dumps(recorded)
    assert REDACTED in json.loads(recorded["content"])["echo"]
