"""Run a tool call through validation, guards and the audit: the only way tools are called.
Never raises: every outcome is a `{"success": ...}` dict, and every call leaves an audit row:
written at once, or, inside a session's step, handed to its recorder (`audit_into`)."""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

from pydantic import ValidationError

from openhive.core import jsontext
from openhive.core.context import ToolContext
from openhive.core.errors import DomainError
from openhive.core.registry import ToolSpec, all_tools, get_tool, is_allowed
from openhive.core.scrubbing import (
    Scrubber,
    get_scrubber,
    may_name_sensitive_key,
    sensitive_values,
)
from openhive.core.text import (
    MAX_DEPTH,
    UnstorableText,
    check_storable,
    storable,
    text_problem,
)

from .services import toolcall_record

logger = logging.getLogger(__name__)


def call_tool(ctx: ToolContext, name: str, arguments: str | dict | None) -> dict:
    started = time.monotonic()
    raw: Any = {}
    raw_text: str | None = None  # the arguments' JSON text, read by each check and the audit
    extra_secrets: list[str] = []
    try:
        raw = _parse_arguments(arguments)
        raw_text = _text_of(raw)
        # Known before validation, so a refused or crashing call cannot leak them either.
        extra_secrets = sensitive_values(raw) if _may_name_secrets(raw_text) else []
        _check_text(raw, raw_text)
        spec = ctx.tools.get(name) or get_tool(name)
        if spec is None:
            result = _failure(
                f'unknown tool "{name}". Available: {_available(ctx)}.', "UNKNOWN_TOOL"
            )
        elif not is_allowed(name, ctx.allowed_tools):
            result = _failure(
                f'tool "{name}" is not allowed for team "{ctx.team.name}"', "TOOL_NOT_ALLOWED"
            )
        else:
            result, declared = _invoke(spec, ctx, raw)
            extra_secrets += declared
    except _BadPath as exc:
        result = _failure(str(exc), "PATH_OUTSIDE_BOUNDARY")
    except _BadArguments as exc:
        result = _failure(str(exc), "INVALID_ARGUMENTS")
    except Exception:  # the never-throw contract: the model gets an error, the log a trace
        logger.exception("tool %s failed unexpectedly", name)
        result = _failure(
            f"internal error in tool {name}; the operator can see the log", "INTERNAL"
        )
    duration_ms = int((time.monotonic() - started) * 1000)
    _record(ctx, name, raw, raw_text, result, duration_ms, extra_secrets)
    return result


class _BadArguments(Exception):
    pass


def _parse_arguments(arguments: str | dict | None) -> dict:
    if arguments is None or arguments == "":
        return {}
    if isinstance(arguments, dict):
        return arguments
    try:
        parsed = json.loads(arguments)
    except (TypeError, ValueError) as exc:
        raise _BadArguments(f"arguments are not valid JSON: {exc}") from exc
    except RecursionError as exc:
        raise _BadArguments("arguments are nested too deeply") from exc
    if not isinstance(parsed, dict):
        raise _BadArguments("arguments must be a JSON object")
    return parsed


# Arguments that name a place in the workspace: a NUL in one is the classic way to cut a path
# short behind a check, so it is refused as a path outside the boundary.
_PATH_ARGUMENTS = frozenset({"path", "cwd"})


class _BadPath(_BadArguments):
    pass


def _text_of(value: Any) -> str | None:
    """`value`'s JSON text as the audit row stores it (None if it has none)."""
    return jsontext.text_or_none(jsontext.dumps_text, value)


def _may_name_secrets(text: str | None) -> bool:
    """False when no key of the arguments can be a sensitive one (`sensitive_values` would
    find nothing): none of those words is anywhere in their text."""
    return text is None or may_name_sensitive_key(text.lower())


def _check_text(raw: dict, text: str | None) -> None:
    """Text no database stores is refused here, the same on SQLite and PostgreSQL. Most
    arguments are settled by their JSON text (a NUL is escaped there, a lone surrogate kept,
    and no value nests deeper than the brackets it holds); the others are walked, which
    also says where the problem is."""
    if (
        text is not None
        and "\\u0000" not in text
        and (text.isascii() or not text_problem(text))
        and text.count("{") + text.count("[") <= MAX_DEPTH
    ):
        return
    try:
        check_storable(raw, "arguments")
    except UnstorableText as exc:
        if exc.where.rpartition(".")[2] in _PATH_ARGUMENTS:
            raise _BadPath(
                f"{exc.where} {exc.problem}: paths must stay inside your workspace"
            ) from exc
        raise _BadArguments(f"invalid arguments: {exc}; send plain text") from exc


def _invoke(spec: ToolSpec, ctx: ToolContext, raw: dict) -> tuple[dict, list[str]]:
    # Portable schemas send null for "not given": drop those so the model's defaults apply.
    cleaned = {k: v for k, v in raw.items() if v is not None}
    args: Any = cleaned  # a run-time tool (no pydantic model) validates its own arguments
    if spec.args is not None:
        try:
            args = spec.args.model_validate(cleaned)
        except ValidationError as exc:
            raise _BadArguments("invalid arguments: " + _describe(exc)) from exc
    secrets = list(args.secret_values()) if hasattr(args, "secret_values") else []
    try:
        result = spec.func(ctx, args)
    except DomainError as exc:
        return _failure(exc.message, exc.code.upper()), secrets
    if not isinstance(result, dict):
        result = {"result": result}
    result.setdefault("success", True)
    return result, secrets


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "arguments"
        parts.append(f"{where}: {err['msg']}")
    return "; ".join(parts)


def _failure(error: str, code: str) -> dict:
    return {"success": False, "error": error, "code": code}


def _available(ctx: ToolContext) -> str:
    names = sorted(
        {
            s.name
            for s in [*all_tools(), *ctx.tools.values()]
            if is_allowed(s.name, ctx.allowed_tools)
        }
    )
    return ", ".join(names) or "none"


def _jsonable(value: Any) -> Any:
    """Plain JSON for the audit row: dates, decimals and the like become their text, and text
    no database stores (a refused call's NUL) is written out. Most rows hold no such text: a
    look at the encoded text (a NUL is escaped there, a lone surrogate kept) spares them the
    walk through every value."""
    return _plain(jsontext.dumps_text(value))


def _plain(text: str) -> Any:
    plain = jsontext.loads(text)
    if "\\u0000" not in text and (text.isascii() or not text_problem(text)):
        return plain
    return storable(plain)


def _audited(scrubber: Scrubber, value: Any, text: str | None = None) -> Any:
    """`_jsonable(scrubber.data(value))`, from one encoding of `value` (`text`, if given) when
    that text shows nothing to scrub (`Scrubber.untouched`), as it does for most calls."""
    text = text if text is not None else _text_of(value)
    if text is not None and scrubber.untouched(text):
        return _plain(text)
    return _jsonable(scrubber.data(value))


def _record(
    ctx: ToolContext,
    name: str,
    raw: Any,
    raw_text: str | None,
    result: dict,
    duration_ms: int,
    extra: list[str],
) -> None:
    try:
        scrubber = get_scrubber().with_extra(extra)
        row = {
            "session_id": ctx.session_id,
            "team_id": ctx.team.pk,
            "team_name": ctx.team.name,
            "tool": name,
            "arguments": _audited(scrubber, raw, raw_text)
            if isinstance(raw, dict)
            else _audited(scrubber, {"raw": str(raw)}),
            "success": bool(result.get("success")),
            "result": _audited(scrubber, result),
            "error": storable(scrubber.text(str(result.get("error", "")))),
            "duration_ms": duration_ms,
        }
        sink = _sink.get()
        if sink is not None:
            sink(row)
        else:
            toolcall_record(**row)
    except Exception:  # an audit failure must be loud in the log but never break the session
        logger.exception("could not record the audit row for tool %s", name)


AuditSink = Callable[[dict], None]
_sink: ContextVar[AuditSink | None] = ContextVar("openhive_audit_sink", default=None)


@contextlib.contextmanager
def audit_into(sink: AuditSink) -> Iterator[None]:
    """Hand the audit rows of the tool calls made inside to `sink` (a session's recorder,
    which writes them with its step in one transaction) instead of writing each at once."""
    token = _sink.set(sink)
    try:
        yield
    finally:
        _sink.reset(token)
