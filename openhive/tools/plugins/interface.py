"""The interface a plugin must offer — `DESCRIPTION` (str), `PARAMETERS` (a JSON Schema
object) and `run(args)` — checked twice: statically (are they defined at the top level? which
line?) and by importing the module in the sandbox (what are they really?). Also the schema's
portability: what is offered to the model must be accepted by every provider."""

from __future__ import annotations

import ast
import copy
from pathlib import Path
from typing import Any

from .runner import run_in_sandbox
from .scan import INVALID_INTERFACE, Finding

REQUIRED = ("DESCRIPTION", "PARAMETERS", "run")
# Keywords some providers reject in a tool's parameters; validation still uses them.
_UNPORTABLE = frozenset({"title", "format", "$schema", "$id", "examples"})


def interface_lines(source: str) -> dict[str, int]:
    """Where each required name is defined at the module's top level."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return {}
    lines: dict[str, int] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            lines.setdefault(node.name, node.lineno)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    lines.setdefault(target.id, node.lineno)
    return lines


def static_problems(source: str) -> list[Finding]:
    lines = interface_lines(source)
    missing = [name for name in REQUIRED if name not in lines]
    hints = {
        "DESCRIPTION": 'DESCRIPTION = "what the tool does"',
        "PARAMETERS": 'PARAMETERS = {"type": "object", "properties": {...}}',
        "run": "def run(args): ... (returns a JSON-serialisable value)",
    }
    return [
        Finding(INVALID_INTERFACE, 1, f"no top-level {name}: define {hints[name]}")
        for name in missing
    ]


def sandbox_check(*, name: str, source: str, workspace: Path) -> tuple[dict, list[Finding]]:
    """Import the plugin in the sandbox and read its interface. Returns (interface, problems);
    `interface` has `description` and `parameters` when there are no problems."""
    lines = interface_lines(source)
    run = run_in_sandbox(mode="check", name=name, source=source, workspace=workspace)
    envelope = run.envelope
    if envelope is None:
        return {}, [Finding(INVALID_INTERFACE, 1, f"the interface check failed: {run.problem}")]
    if not envelope["ok"]:
        if envelope.get("kind") == "interface":
            return {}, [
                Finding(INVALID_INTERFACE, lines.get(what, 1), message)
                for what, message in envelope.get("problems", [])
            ]
        return {}, [
            Finding(
                INVALID_INTERFACE,
                envelope.get("line") or 1,
                f"importing the module failed: {envelope.get('error', 'no reason given')}",
            )
        ]
    problems = schema_problems(envelope["parameters"], line=lines.get("PARAMETERS", 1))
    return envelope, problems


def schema_problems(parameters: Any, *, line: int) -> list[Finding]:
    def problem(message: str) -> list[Finding]:
        return [Finding(INVALID_INTERFACE, line, message)]

    if not isinstance(parameters, dict) or parameters.get("type") != "object":
        return problem('PARAMETERS must be a JSON Schema with "type": "object"')
    properties = parameters.get("properties", {})
    if not isinstance(properties, dict):
        return problem('PARAMETERS["properties"] must be an object of property schemas')
    # jsonschema (and the metaschemas it loads, ~3 MB) is imported by a plugin's check or
    # call, not by every process that lists the tools.
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(parameters)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.path) or "PARAMETERS"
        return problem(f"PARAMETERS is not a valid JSON Schema at {where}: {exc.message}")
    return []


def offered_schema(parameters: dict) -> dict:
    """The schema as offered to the model: portable keywords only (property names are data
    and stay whatever they are called)."""

    def clean(node: Any) -> Any:
        if isinstance(node, dict):
            out = {}
            for key, value in node.items():
                if key in _UNPORTABLE:
                    continue
                if key == "properties" and isinstance(value, dict):
                    out[key] = {prop: clean(sub) for prop, sub in value.items()}
                else:
                    out[key] = clean(value)
            return out
        if isinstance(node, list):
            return [clean(item) for item in node]
        return node

    schema = clean(copy.deepcopy(parameters))
    schema.setdefault("properties", {})
    return schema


def argument_problems(parameters: dict, args: dict) -> list[str]:
    from jsonschema import Draft202012Validator

    validator = Draft202012Validator(parameters)
    problems = []
    for error in sorted(validator.iter_errors(args), key=lambda e: list(e.path))[:5]:
        where = ".".join(str(p) for p in error.path) or "arguments"
        problems.append(f"{where}: {error.message}")
    return problems
