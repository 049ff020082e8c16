"""Every state change of triggers: managing them, firing them, and what the clock and finished
runs record."""

from .firing import EVENT_TYPES, FireResult, trigger_fire, trigger_test
from .manage import (
    trigger_alert,
    trigger_create,
    trigger_disable,
    trigger_enable,
    trigger_update,
)
from .runs import (
    trigger_claim_slot,
    trigger_claim_window,
    trigger_disable_invalid,
    trigger_events_prune,
    trigger_record_outcome,
    trigger_run_notify,
)

__all__ = [
    "EVENT_TYPES",
    "FireResult",
    "trigger_alert",
    "trigger_claim_slot",
    "trigger_claim_window",
    "trigger_create",
    "trigger_disable",
    "trigger_disable_invalid",
    "trigger_enable",
    "trigger_events_prune",
    "trigger_fire",
    "trigger_record_outcome",
    "trigger_run_notify",
    "trigger_test",
    "trigger_update",
]
