"""The prompt-section registry: parts of a team's dynamic prompt suffix that other apps
contribute after the rules (memory, inbox, ...). Sections are read-only renderers of data the
caller loaded; they appear in ascending `order`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from openhive.core.context import TeamRef


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


_SECTIONS: dict[str, PromptSection] = {}


def prompt_section(name: str, *, order: int):
    """Register `func(ctx) -> markdown` as a section of every team's dynamic prompt suffix."""

    def decorate(func: SectionFunc) -> SectionFunc:
        _SECTIONS[name] = PromptSection(name, func, order)
        return func

    return decorate


def registered_sections() -> list[PromptSection]:
    return sorted(_SECTIONS.values(), key=lambda s: (s.order, s.name))
