"""The prompt-section registry: parts of a team's dynamic prompt suffix that other apps
contribute after the rules (memory, inbox, ...). Sections are read-only renderers of data the
caller loaded; they appear in ascending `order`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from openhive.core.context import TeamRef
from openhive.core.reads import Read


@dataclass(frozen=True)
class PromptContext:
    """What a section may read: the team, and data the session start loaded for it (for
    example the inbox messages it just took), keyed by section name."""

    team: TeamRef
    data: dict[str, Any] = field(default_factory=dict)


SectionFunc = Callable[[PromptContext], str]


@dataclass(frozen=True)
class PromptSection:
    name: str
    func: SectionFunc
    order: int
    # What the section reads from the database, for a session's start to send with its own
    # statements; the answer reaches `func` as `ctx.data[name]`.
    load: Callable[[TeamRef], Read] | None = None


_SECTIONS: dict[str, PromptSection] = {}


def prompt_section(name: str, *, order: int, load: Callable[[TeamRef], Read] | None = None):
    """Register `func(ctx) -> markdown` as a section of every team's dynamic prompt suffix.
    With `load`, the section's data is read at the session's start, with the session's other
    reads; `func` must still read it itself when `ctx.data` lacks it (a caller that does not
    preload)."""

    def decorate(func: SectionFunc) -> SectionFunc:
        _SECTIONS[name] = PromptSection(name, func, order, load)
        return func

    return decorate


def registered_sections() -> list[PromptSection]:
    return sorted(_SECTIONS.values(), key=lambda s: (s.order, s.name))
