"""Regular expressions written by users (trigger patterns, script rules) run on RE2: matching
takes time linear in the input, whatever the pattern, so `(a+)+$` cannot freeze a process the
way Python's backtracking `re` does (and, holding the GIL, every thread of it). RE2 has no
backreferences or lookaround; a pattern using them is refused with a message that says so.
Patterns and inputs are capped in length as well."""

from __future__ import annotations

import functools

import re2

MAX_PATTERN_CHARS = 1000
MAX_INPUT_CHARS = 20_000  # the chat's own limit on a message
_MAX_PROGRAM_BYTES = 8 << 20  # RE2 refuses patterns whose compiled program is larger


class UnsafePattern(ValueError):
    """The pattern is too long, or not valid RE2 syntax."""


def _options(ignore_case: bool) -> re2.Options:
    options = re2.Options()
    options.case_sensitive = not ignore_case
    options.max_mem = _MAX_PROGRAM_BYTES
    options.log_errors = False  # our error message says it; no stderr line per bad pattern
    return options


@functools.lru_cache(maxsize=512)
def compile_pattern(pattern: str, *, ignore_case: bool = False) -> re2._Regexp:
    if len(pattern) > MAX_PATTERN_CHARS:
        raise UnsafePattern(f"is longer than {MAX_PATTERN_CHARS} characters")
    if "\x00" in pattern:
        raise UnsafePattern("contains a NUL character")
    try:
        return re2.compile(pattern, options=_options(ignore_case))
    except re2.error as exc:
        detail = exc.args[0] if exc.args else exc
        if isinstance(detail, bytes):
            detail = detail.decode(errors="replace")
        raise UnsafePattern(
            f"is not a supported regular expression ({detail}); patterns use RE2 syntax: "
            "no backreferences (\\1) or lookaround ((?=...), (?<!...))"
        ) from None


def check_pattern(pattern: str, *, ignore_case: bool = False) -> None:
    """Raise UnsafePattern with a reason when `pattern` cannot be used."""
    compile_pattern(pattern, ignore_case=ignore_case)


def search(
    pattern: str, text: str, *, ignore_case: bool = False, max_input: int = MAX_INPUT_CHARS
) -> bool:
    """True if `pattern` matches somewhere in the first `max_input` characters of `text`."""
    compiled, text = compile_pattern(pattern, ignore_case=ignore_case), text[:max_input]
    try:
        return compiled.search(text) is not None
    except UnicodeEncodeError:  # a lone surrogate: RE2 reads UTF-8, so it stands for itself
        return compiled.search(text.encode("utf-8", "replace").decode()) is not None
