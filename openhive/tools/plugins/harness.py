"""The program that runs inside the sandbox for one plugin call: standard library only (it is
started with `python3 -I -S -c <this file's text>`, with no project on its path).

It reads one request on stdin — `{"mode": "check"|"run", "name", "source", "args"}`, written
by the host with `marshal` (a built-in module: importing `json` would double the interpreter's
start-up, the largest part of a call) —, executes the plugin's source as a fresh module, and
writes one JSON envelope to the original stdout with the small encoder below (the host parses
it with `json`; nothing here is ever unmarshalled by the host). Anything the plugin prints
goes to stderr, so it cannot forge the envelope by printing. The source comes from the host
(already hashed and verified), not from the file, so what runs is exactly what was checked."""

from __future__ import annotations

import marshal
import posix  # `os` without its Python layer: `-S` leaves os unimported, and it costs
import sys

MAX_DESCRIPTION = 2000
MAX_DEPTH = 200
# JSON string escapes: the quote, the backslash and every control character.
_ESCAPES = {i: f"\\u{i:04x}" for i in range(0x20)}
_ESCAPES.update({ord('"'): '\\"', ord("\\"): "\\\\", 0x0A: "\\n", 0x09: "\\t", 0x0D: "\\r"})


def to_json(value: object, depth: int = 0) -> str:
    """`json.dumps(value, allow_nan=False)` for the JSON types, without importing json.
    Raises TypeError or ValueError for anything else, as json does."""
    if depth > MAX_DEPTH:
        raise ValueError("nested too deeply (or circular)")
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return '"' + value.translate(_ESCAPES) + '"'
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(f"out of range float values are not JSON compliant: {value!r}")
        return float.__repr__(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(to_json(item, depth + 1) for item in value) + "]"
    if isinstance(value, dict):
        items = []
        for key, item in value.items():
            if isinstance(key, str):
                text = key
            elif key is None or isinstance(key, (bool, int, float)):
                text = to_json(key)
            else:
                raise TypeError(
                    f"keys must be str, int, float, bool or None, not {type(key).__name__}"
                )
            items.append(to_json(text) + ":" + to_json(item, depth + 1))
        return "{" + ",".join(items) + "}"
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def main() -> None:
    out = posix.dup(1)  # the envelope's channel; fd 1 now goes to stderr
    posix.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        request = marshal.loads(sys.stdin.buffer.read())
        envelope = handle(request)
    except BaseException as exc:
        envelope = {"ok": False, "kind": "exception", "error": describe(exc)}
    try:
        text = to_json(envelope)
    except (TypeError, ValueError, RecursionError) as exc:
        error = f"run() returned a value that is not JSON-serialisable: {exc}"
        text = to_json({"ok": False, "kind": "result", "error": error})
    # Lone surrogates cannot be UTF-8: written as JSON's \\uXXXX escapes instead.
    data = text.encode("utf-8", "backslashreplace")
    while data:
        data = data[posix.write(out, data) :]


def handle(request: dict) -> dict:
    name = request["name"]
    filename = f"plugins/{name}.py"
    # A real module in sys.modules: dataclasses and enums of the plugin look it up there.
    module = type(sys)(f"plugin_{name}")
    module.__file__ = filename
    sys.modules[module.__name__] = module
    namespace = module.__dict__
    try:
        code = compile(request["source"], filename, "exec")
        exec(code, namespace)
    except BaseException as exc:
        return {"ok": False, "kind": "import", "error": describe(exc), "line": line_of(exc)}
    if request["mode"] == "check":
        return check(namespace)
    try:
        value = namespace["run"](request.get("args") or {})
    except BaseException as exc:
        return {"ok": False, "kind": "exception", "error": describe(exc), "line": line_of(exc)}
    return {"ok": True, "result": value}


def check(namespace: dict) -> dict:
    problems = []
    description = namespace.get("DESCRIPTION")
    if not isinstance(description, str) or not description.strip():
        problems.append(("DESCRIPTION", "DESCRIPTION must be a non-empty string"))
    elif len(description) > MAX_DESCRIPTION:
        problems.append(("DESCRIPTION", f"DESCRIPTION is over {MAX_DESCRIPTION} characters"))
    parameters = namespace.get("PARAMETERS")
    if not isinstance(parameters, dict):
        problems.append(("PARAMETERS", "PARAMETERS must be a dict (a JSON Schema object)"))
    else:
        try:
            to_json(parameters)
        except (TypeError, ValueError, RecursionError) as exc:
            problems.append(("PARAMETERS", f"PARAMETERS is not plain JSON: {exc}"))
    run = namespace.get("run")
    code = getattr(run, "__code__", None)
    if not callable(run) or code is None:
        problems.append(("run", "run must be a function: def run(args): ..."))
    else:
        defaults = len(getattr(run, "__defaults__", None) or ())
        required = code.co_argcount - defaults
        if code.co_argcount < 1 or required > 1 or code.co_kwonlyargcount:
            problems.append(("run", "run must take exactly one argument: def run(args)"))
    if problems:
        return {"ok": False, "kind": "interface", "problems": problems}
    return {"ok": True, "description": description.strip(), "parameters": parameters}


def describe(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text[:2000]


def line_of(exc: BaseException) -> int | None:
    """The last line of the plugin's own code in the traceback (walked by hand: importing
    `traceback` would cost every call a few milliseconds of start-up)."""
    if isinstance(exc, SyntaxError):
        return exc.lineno
    line = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.startswith("plugins/"):
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


if __name__ == "__main__":
    main()
