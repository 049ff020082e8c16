"""The layers import one way only. Every import of every project module (top-level or inside a
function) is parsed; a module may import its own layer and the layers below it. Doors (REST
routers, admin, tools, consumers, the CLI and the built-in tool families) may also reach up to
the services and selectors of any layer. docs/architecture.md describes the layers.

Layers, lowest first (module prefixes):
  0 openhive.core          kernel: imports no app
  1 openhive.engine        sessions, models, recorder, tool calls
  2 teams                  the org tree as data, the rule cascade, a team's agent spec
  3 vault, trust, memory   a team's secrets and state, who may talk, what it remembers
  4 openhive.chat          conversations, topics, the outbox
  5 tasks                  the durable queue
  6 openhive.org, triggers use cases over the tree; what wakes teams;
    evolution              learning and reflection cycles
  7 openhive.tools         built-in tool families (doors)
  8 openhive               the composition root: settings, urls, asgi, root API, CLI, clock
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYERS: list[tuple[str, ...]] = [
    ("openhive.core",),
    ("openhive.engine",),
    ("teams",),
    ("vault", "trust", "memory"),
    ("openhive.chat",),
    ("tasks",),
    ("openhive.org", "triggers", "evolution"),
    ("openhive.tools",),
    ("openhive",),
]
DOOR_MODULES = frozenset({"api", "admin", "tools", "consumers"})
DOOR_PACKAGES = ("openhive.cli", "openhive.management", "openhive.tools")
REACHABLE_FROM_DOORS = frozenset({"services", "selectors"})
SKIPPED_DIRS = frozenset({".venv", "tests", "benchmarks", "migrations", "docs", "templates"})


def _within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def layer_of(module: str) -> int | None:
    """The layer of a project module, or None for anything else (Django, libraries)."""
    best: tuple[int, int] | None = None  # (prefix length, layer): the longest prefix wins
    for rank, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if _within(module, prefix) and (best is None or len(prefix) > best[0]):
                best = (len(prefix), rank)
    return None if best is None else best[1]


def package_of(module: str) -> str | None:
    rank = layer_of(module)
    if rank is None:
        return None
    return next(p for p in sorted(LAYERS[rank], key=len, reverse=True) if _within(module, p))


def is_door(module: str) -> bool:
    return module.split(".")[-1] in DOOR_MODULES or any(_within(module, p) for p in DOOR_PACKAGES)


def reachable_from_doors(module: str) -> bool:
    return bool(REACHABLE_FROM_DOORS & set(module.split(".")))


@dataclass(frozen=True)
class Import:
    importer: str
    target: str
    line: int


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_in(source: str, module: str, *, is_package: bool = False) -> list[Import]:
    """Every import statement in the source, resolved to absolute module names. For
    `from x import y`, both `x.y` (if y is a module) and `x` are candidates: the more
    specific one is used."""
    found: list[Import] = []
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [Import(module, alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            for alias in node.names:
                candidate = f"{target}.{alias.name}"
                found.append(
                    Import(module, candidate if _is_module(candidate) else target, node.lineno)
                )
    return found


def _is_module(name: str) -> bool:
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def violations(imports: list[Import]) -> list[str]:
    problems = []
    for imp in imports:
        low, high = layer_of(imp.importer), layer_of(imp.target)
        if low is None or high is None or high <= low:
            continue
        if is_door(imp.importer) and reachable_from_doors(imp.target):
            continue
        problems.append(
            f"{imp.importer}:{imp.line} imports {imp.target} (layer {high} > layer {low})"
        )
    return problems


def project_imports() -> list[Import]:
    found: list[Import] = []
    for path in sorted(ROOT.rglob("*.py")):
        relative = path.relative_to(ROOT).parts
        if SKIPPED_DIRS & set(relative[:-1]) or len(relative) == 1:
            continue
        module = module_name(path)
        found += imports_in(path.read_text(), module, is_package=path.name == "__init__.py")
    return found


def test_no_module_imports_a_higher_layer():
    problems = violations(project_imports())
    assert not problems, "upward imports:\n" + "\n".join(problems)


def test_no_two_packages_import_each_other():
    edges = set()
    for imp in project_imports():
        src, dst = package_of(imp.importer), package_of(imp.target)
        if src and dst and src != dst:
            edges.add((src, dst))
    mutual = sorted({tuple(sorted(e)) for e in edges if (e[1], e[0]) in edges})
    assert not mutual, f"packages that import each other: {mutual}"


def test_the_kernel_imports_no_app():
    reached = {
        imp.target
        for imp in project_imports()
        if layer_of(imp.importer) == 0 and layer_of(imp.target) not in (None, 0)
    }
    assert not reached


def test_every_project_package_has_a_layer():
    """A new app or sub-package must be given a place in LAYERS (and docs/architecture.md)."""
    unplaced = set()
    for path in ROOT.rglob("__init__.py"):
        relative = path.relative_to(ROOT).parts
        if SKIPPED_DIRS & set(relative[:-1]) or "site-packages" in relative:
            continue
        module = module_name(path)
        if layer_of(module) is None:
            unplaced.add(module)
    assert not unplaced


# --- the checker itself finds what it must find ------------------------------------------------


def test_the_checker_reports_an_upward_import_even_inside_a_function():
    source = "def f():\n    from tasks.models import Task\n"
    found = violations(imports_in(source, "teams.selectors"))
    assert found == ["teams.selectors:2 imports tasks.models (layer 5 > layer 2)"]


def test_the_checker_lets_doors_reach_services_and_selectors_only():
    door = imports_in(
        "from tasks.services import task_enqueue\nfrom tasks.models import Task\n", "teams.api"
    )
    assert violations(door) == ["teams.api:2 imports tasks.models (layer 5 > layer 2)"]


def test_the_checker_resolves_relative_imports():
    found = imports_in("from ..models import Task\n", "tasks.services.queue")
    assert [i.target for i in found] == ["tasks.models"]
    assert layer_of("openhive.core.errors") == 0 and layer_of("openhive.settings") == 8
