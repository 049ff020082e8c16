"""Every state change of the task queue: the queue itself (enqueue, dispatch, lease, finish,
cancel, reap) and admission (claims under the per-team cap, the org-op mutex)."""

from .admission import (
    caller_org_op,
    org_op,
    task_admit_running,
    task_claim_next,
    team_critical_section,
)
from .queue import (
    PRIORITY_NAMES,
    RESULT_LIMIT,
    priority_from_name,
    task_cancel,
    task_defer,
    task_enqueue,
    task_finish,
    task_mark_dispatched,
    task_mark_stall_escalated,
    task_release_dispatch,
    task_renew_lease,
    tasks_forget_queued_by,
    tasks_reap_expired_leases,
    tasks_recover_on_startup,
)

__all__ = [
    "PRIORITY_NAMES",
    "RESULT_LIMIT",
    "caller_org_op",
    "org_op",
    "priority_from_name",
    "task_admit_running",
    "task_cancel",
    "task_claim_next",
    "task_defer",
    "task_enqueue",
    "task_finish",
    "task_mark_dispatched",
    "task_mark_stall_escalated",
    "task_release_dispatch",
    "task_renew_lease",
    "tasks_forget_queued_by",
    "tasks_reap_expired_leases",
    "tasks_recover_on_startup",
    "team_critical_section",
]
