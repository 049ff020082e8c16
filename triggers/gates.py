"""Gates other apps put in front of a trigger's task: asked after dedup and the overlap policy,
before the task is created. A gate that says not-ready skips the firing (no task, no model
call); a ready one may add context to the task text and options. Registered in an app's
`ready()`, so the firing pipeline never imports the apps that gate it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass
class GateResult:
    ready: bool
    reason: str = ""  # why not ready (logged and recorded by the gate's owner)
    context: str = ""  # appended to the task text when ready
    options: dict[str, Any] = field(default_factory=dict)  # merged into the task's options
    # Called with the created task, inside the firing's transaction.
    on_task: Callable[[Any], None] | None = None


# (trigger, now, test) -> a result, or None when the gate has no say over this trigger.
FireGate = Callable[[Any, datetime, bool], GateResult | None]
_GATES: list[FireGate] = []


def register_fire_gate(gate: FireGate) -> None:
    if gate not in _GATES:
        _GATES.append(gate)


def gate_check(trigger: Any, now: datetime, *, test: bool = False) -> GateResult | None:
    """The first gate with a say decides; None when no gate concerns this trigger."""
    for gate in list(_GATES):
        result = gate(trigger, now, test)
        if result is not None:
            return result
    return None


# trigger -> None when the checker has no say, "" when ready, else why not (for pages only:
# it records nothing).
ReadinessCheck = Callable[[Any], str | None]
_READINESS: list[ReadinessCheck] = []


def register_readiness(check: ReadinessCheck) -> None:
    if check not in _READINESS:
        _READINESS.append(check)


def readiness_of(trigger: Any) -> str | None:
    """None for a trigger no gate concerns; "" when ready; otherwise the reason."""
    for check in list(_READINESS):
        verdict = check(trigger)
        if verdict is not None:
            return verdict
    return None
