"""The tool registry: every agent-facing tool is declared once, in its app's `tools.py`, with
`@tool(...)`. The project app discovers the `tools` modules when Django is ready."""

from __future__ import annotations

import copy
import functools
import json
import operator
import threading
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

if TYPE_CHECKING:
    from openhive.core.context import ToolContext

Ops = Literal["daily", "org"]
ToolFunc = Callable[["ToolContext", Any], dict]


@dataclass(frozen=True)
class ToolSpec:
    """A tool: declared in code with a pydantic model for its arguments (`args`), or found at
    run time (a team's plugin, an MCP server's tool) with a ready JSON schema (`parameters`);
    such a tool's function receives the arguments as a dict and validates them itself."""

    name: str
    description: str
    args: type[BaseModel] | None
    ops: Ops
    func: ToolFunc
    # Teams that may be offered the tool at all (None: any team its allowlist admits).
    teams: frozenset[str] | None = None
    parameters: dict | None = None

    def function_schema(self) -> dict:
        """OpenAI-style function declaration with a portable parameter schema."""
        parameters = self.parameters if self.args is None else portable_schema(self.args)
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": parameters or {"type": "object", "properties": {}},
            },
        }


_REGISTRY: dict[str, ToolSpec] = {}
# Schema keywords some providers reject (`format: uri` on Gemini, titles are noise).
_UNPORTABLE_KEYWORDS = frozenset({"title", "format"})


def tool(
    *,
    name: str,
    description: str,
    args: type[BaseModel],
    ops: Ops = "daily",
    teams: tuple[str, ...] | None = None,
):
    """Register the decorated function `(ctx, args) -> dict` as a tool. `teams` limits which
    teams are ever offered it, whatever their allowlist (e.g. trust tools: main only)."""

    def decorate(func: ToolFunc) -> ToolFunc:
        existing = _REGISTRY.get(name)
        if existing is not None and existing.func.__qualname__ != func.__qualname__:
            raise RuntimeError(f"tool {name!r} is declared twice")
        _REGISTRY[name] = ToolSpec(
            name, description, args, ops, func, frozenset(teams) if teams else None
        )
        return func

    return decorate


def get_tool(name: str) -> ToolSpec | None:
    return _REGISTRY.get(name)


def all_tools() -> list[ToolSpec]:
    return sorted(_REGISTRY.values(), key=lambda s: s.name)


def is_allowed(name: str, patterns: Iterable[str]) -> bool:
    """Deny by default: allowed only if a case-sensitive glob matches (`*` allows all)."""
    return any(_matcher(pattern)(name) for pattern in patterns)


@functools.lru_cache(maxsize=1024)
def _matcher(pattern: str) -> Callable[[str], bool]:
    # Most allowlists name their tools outright: a name without a glob character matches only
    # itself, which an equality settles faster than fnmatch's regex (every session start
    # tests every registered tool against the list, every tool call its own name).
    if not any(c in pattern for c in "*?["):
        return pattern.__eq__
    return lambda name: fnmatchcase(name, pattern)


def tools_for(
    patterns: Iterable[str], *, only: Iterable[str] | None = None, team: str | None = None
) -> list[ToolSpec]:
    patterns = tuple(patterns)
    wanted = frozenset(only) if only is not None else None
    # Every session start asks this: testing every registered tool against the allowlist cost
    # ~2,400 bytecodes. The answer is kept per question while the registry holds the same
    # specs (compared by identity, in C; the entry keeps them alive, so no id is reused).
    registered = tuple(_REGISTRY.values())
    key = (patterns, wanted, team)
    known = _TOOLS_FOR.get(key)
    if (
        known is not None
        and len(known[0]) == len(registered)
        and all(map(operator.is_, known[0], registered))
    ):
        return list(known[1])
    found = [
        spec
        for spec in sorted(registered, key=lambda s: s.name)
        if is_allowed(spec.name, patterns)
        and (wanted is None or spec.name in wanted)
        and (spec.teams is None or team is None or team in spec.teams)
    ]
    if len(_TOOLS_FOR) >= 256:
        _TOOLS_FOR.clear()
    _TOOLS_FOR[key] = (registered, tuple(found))
    return found


_TOOLS_FOR: dict[tuple, tuple[tuple[ToolSpec, ...], tuple[ToolSpec, ...]]] = {}


# --- tools found at run time ------------------------------------------------------------------

ToolSource = Callable[[Any], Iterable[ToolSpec]]
_SOURCES: dict[str, ToolSource] = {}
_PREFIXES: dict[str, str] = {}


def register_tool_source(name: str, source: ToolSource, *, prefix: str = "") -> None:
    """Let an app offer tools that exist only at run time, per team (its registered plugins,
    its MCP servers' tools). `source(team)` returns the team's tools; the allowlist and the
    session's narrowing apply to them as to declared tools. Apps register in `ready()`.
    `prefix`: every name the source offers starts with it, so a team whose allowlist can
    match no such name is not asked (the source's reads are skipped at session start)."""
    _SOURCES[name] = source
    _PREFIXES[name] = prefix


def may_match_prefix(patterns: Iterable[str], prefix: str) -> bool:
    """Whether some name starting with `prefix` could pass one of the glob `patterns`."""
    for pattern in patterns:
        wild = min((i for i, c in enumerate(pattern) if c in "*?["), default=None)
        if wild is None:
            if pattern.startswith(prefix):
                return True
        elif pattern[:wild].startswith(prefix) or prefix.startswith(pattern[:wild]):
            return True
    return False


def team_tools(
    team: Any, patterns: Iterable[str], *, only: Iterable[str] | None = None
) -> list[ToolSpec]:
    """Every tool `team` may be offered: the declared ones and those of the registered
    sources, that its allowlist admits (and, with `only`, that are named there)."""
    patterns = list(patterns)
    wanted = set(only) if only is not None else None
    found = {spec.name: spec for spec in tools_for(patterns, only=only, team=team.name)}
    for name, source in list(_SOURCES.items()):
        prefix = _PREFIXES.get(name, "")
        if prefix and not may_match_prefix(patterns, prefix):
            continue
        for spec in source(team):
            if spec.name in found or get_tool(spec.name) is not None:
                continue  # a declared tool's name is never shadowed
            if is_allowed(spec.name, patterns) and (wanted is None or spec.name in wanted):
                found[spec.name] = spec
    return sorted(found.values(), key=lambda s: s.name)


# Weak keys: a model made at run time does not outlive its last user because of the cache.
_SCHEMA_CACHE: weakref.WeakKeyDictionary[type[BaseModel], str] = weakref.WeakKeyDictionary()
_schema_lock = threading.Lock()


def portable_schema(model: type[BaseModel]) -> dict:
    """A JSON schema every provider accepts for a pydantic model (see `portable_json_schema`);
    pydantic still validates what the portable form drops (formats)."""
    # Every session declares its tools' schemas: pydantic builds one in ~1 ms, so a session
    # with 40 tools spent ~50 ms of CPU here, and parallel sessions (a query_teams fan-out)
    # queue for the GIL behind each other. A model's schema never changes; each caller gets
    # its own copy (parsing the cached JSON), free to change it.
    with _schema_lock:
        cached = _SCHEMA_CACHE.get(model)
    if cached is None:
        schema = portable_json_schema(model.model_json_schema())
        cached = json.dumps(schema)
        with _schema_lock:
            _SCHEMA_CACHE[model] = cached
    return json.loads(cached)


# A self-referencing schema (a tree of nodes) is cut off at this depth: a provider needs a
# finite schema, and the server still validates what it receives.
_MAX_REF_DEPTH = 8


def portable_json_schema(schema: dict) -> dict:
    """Any JSON schema (a pydantic model's, an MCP server's) in a form every provider accepts:
    references inlined, titles and formats dropped, every property required, and optional ones
    nullable (a null means "use the default"; the tool door drops nulls before the call),
    additionalProperties false. The top level is always an object schema."""
    raw = copy.deepcopy(schema) if isinstance(schema, dict) else {}
    defs = {**raw.pop("definitions", {}), **raw.pop("$defs", {})}

    def resolve(node: Any, depth: int) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                name = str(node["$ref"]).split("/")[-1]
                if name not in defs or depth >= _MAX_REF_DEPTH:
                    # An unknown or too deep reference: any value, described if it can be.
                    return {k: v for k, v in node.items() if k == "description"}
                target = copy.deepcopy(defs[name])
                # Keywords beside the reference (a field's description) win over the target's.
                siblings = {k: v for k, v in node.items() if k != "$ref"}
                return resolve({**target, **siblings}, depth + 1)
            out = {}
            for key, value in node.items():
                if key in _UNPORTABLE_KEYWORDS or key in ("$schema", "$id", "$comment"):
                    continue
                if key == "properties" and isinstance(value, dict):
                    # Property names are data, not keywords: a property called "title" stays.
                    out[key] = {prop: resolve(sub, depth) for prop, sub in value.items()}
                else:
                    out[key] = resolve(value, depth)
            if out.get("type") == "object" and isinstance(out.get("properties"), dict):
                required = set(out.get("required", []))
                for prop, sub in out["properties"].items():
                    if prop not in required and isinstance(sub, dict):
                        out["properties"][prop] = _nullable(sub)
                out["required"] = list(out["properties"])
                out["additionalProperties"] = False
            return out
        if isinstance(node, list):
            return [resolve(v, depth) for v in node]
        return node

    out = resolve(raw, 0)
    if out.get("type") != "object":
        out = {"type": "object", "properties": {}, "required": [], "additionalProperties": False}
    elif "properties" not in out:
        out.update(properties={}, required=[], additionalProperties=False)
    return out


def _nullable(schema: dict) -> dict:
    schema = {k: v for k, v in schema.items() if k != "default"}
    variants = schema.get("anyOf")
    if variants is not None:
        if not any(v.get("type") == "null" for v in variants):
            schema["anyOf"] = [*variants, {"type": "null"}]
        return schema
    description = schema.pop("description", None)
    nullable = {"anyOf": [schema, {"type": "null"}]}
    if description:
        nullable["description"] = description
    return nullable
