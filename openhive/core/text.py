"""Text no database stores: a NUL character (PostgreSQL refuses it in text and JSON, SQLite
keeps it and cuts strings at it elsewhere) and a lone surrogate (not encodable as UTF-8).
Every door refuses such input with a clear error before anything is written, so both
databases behave the same."""

from __future__ import annotations

from typing import Any

MAX_DEPTH = 100  # deeper input is refused as well (a reply must never recurse forever)


class UnstorableText(ValueError):
    def __init__(self, where: str, problem: str) -> None:
        self.where, self.problem = where, problem
        super().__init__(f"{where} {problem}" if where else problem)


def text_problem(value: str) -> str:
    """What makes `value` unstorable, or "" if nothing does."""
    if "\x00" in value:
        return "contains a NUL character (\\u0000), which is not accepted in text"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "contains an unpaired surrogate (invalid Unicode), which is not accepted in text"
    return ""


def check_storable(value: Any, where: str = "") -> None:
    """Raise UnstorableText naming the first string (or key) in JSON-like `value` that no
    database stores, or input nested deeper than MAX_DEPTH."""
    stack: list[tuple[Any, str, int]] = [(value, where, 0)]
    while stack:
        node, path, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise UnstorableText(path, f"is nested more than {MAX_DEPTH} levels deep")
        if isinstance(node, str):
            problem = text_problem(node)
            if problem:
                raise UnstorableText(path, problem)
        elif isinstance(node, dict):
            for key, item in node.items():
                if isinstance(key, str) and (problem := text_problem(key)):
                    raise UnstorableText(f"{path} (a key)".strip(), problem)
                stack.append((item, f"{path}.{key}" if path else str(key), depth + 1))
        elif isinstance(node, (list, tuple)):
            stack.extend((item, f"{path}[{i}]", depth + 1) for i, item in enumerate(node))


def storable(value: Any) -> Any:
    """A copy of JSON-like `value` that any database stores (for records of refused input):
    a NUL becomes the text `\\u0000`, a lone surrogate the replacement character."""
    if isinstance(value, str):
        if not text_problem(value):
            return value
        value = value.replace("\x00", "\\u0000")
        return value.encode("utf-8", "replace").decode("utf-8")
    if isinstance(value, dict):
        return {storable(k): storable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [storable(v) for v in value]
    return value
