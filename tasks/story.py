"""Reads that tell one task's story for the admin: where it came from, the sessions that worked
on it, the tasks it started (delegations, queries, handoffs) and what it all cost; and the whole
tree of a delegated task with a timeline of its sessions.

A child task knows its parent two ways: a queued task keeps the session and task that queued it
in `options` (`parent_task_id`, `parent_session_id`); a synchronous query's session records them
as `Session.parent_task` / `parent_session`. Sessions without a task of their own (a subagent's)
hang under the task whose session started them. Each level of the tree costs a few queries."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

from django.db.models import F, Q, Sum
from django.utils import timezone

from openhive.engine.models import Session

from .models import Task

# A runaway fan-out must not turn a page into thousands of rows.
MAX_NODES = 200
MAX_DEPTH = 12
FINISHED = (Task.Status.DONE, Task.Status.FAILED, Task.Status.CANCELLED)


@dataclass
class Spend:
    tokens: int = 0
    usd: Decimal = Decimal(0)

    def add(self, other: Spend) -> None:
        self.tokens += other.tokens
        self.usd += other.usd


@dataclass
class Node:
    task: Task
    depth: int
    relation: str  # root | delegate | query | handoff | escalation | trigger | ...
    own: Spend = field(default_factory=Spend)
    total: Spend = field(default_factory=Spend)
    children: list[Node] = field(default_factory=list)
    # Sessions started under this task that have no task of their own (subagents).
    loose_sessions: list[Session] = field(default_factory=list)

    @property
    def indent(self) -> int:
        return self.depth * 22


def task_title(task: Task) -> str:
    return str(task)


def task_duration_ms(task: Task, now: datetime | None = None) -> int | None:
    if task.duration_ms is not None:
        return task.duration_ms
    if task.started_at is None:
        return None
    end = task.finished_at or now or timezone.now()
    return int((end - task.started_at).total_seconds() * 1000)


def spend_by_task(task_ids: list[int]) -> dict[int, Spend]:
    """Tokens and dollars of every session of the given tasks, in one query."""
    rows = (
        Session.objects.filter(task_id__in=task_ids)
        .order_by()
        .values("task_id")
        .annotate(tokens=Sum(F("prompt_tokens") + F("completion_tokens")), usd=Sum("cost_usd"))
    )
    return {r["task_id"]: Spend(int(r["tokens"] or 0), Decimal(r["usd"] or 0)) for r in rows}


def _relation(task: Task) -> str:
    """How a child came from its parent, in the operator's words."""
    options = task.options or {}
    if options.get("handoff_from"):
        return "handoff"
    if options.get("requeued_from"):
        return f"{task.type} (requeued)"
    return str(task.type)


def child_tasks(task_ids: list[int]) -> dict[int, list[Task]]:
    """The tasks each of `task_ids` started, oldest first (queued ones and queries)."""
    if not task_ids:
        return {}
    found: dict[int, dict[int, Task]] = {pk: {} for pk in task_ids}
    queued = Task.objects.select_related("team").filter(options__parent_task_id__in=task_ids)
    for child in queued:
        parent = (child.options or {}).get("parent_task_id")
        if parent in found and child.pk not in task_ids:
            found[parent][child.pk] = child
    by_session = (
        Session.objects.filter(
            Q(parent_task_id__in=task_ids) | Q(parent_session__task_id__in=task_ids),
            task__isnull=False,
        )
        .select_related("task__team", "parent_session")
        .order_by("started_at", "id")
    )
    for session in by_session:
        parent = session.parent_task_id or (
            session.parent_session.task_id if session.parent_session else None
        )
        if parent in found and session.task_id not in task_ids:
            found[parent].setdefault(session.task_id, session.task)
    return {
        pk: sorted(children.values(), key=lambda t: (t.created_at, t.pk))
        for pk, children in found.items()
    }


def loose_sessions(task_ids: list[int]) -> dict[int, list[Session]]:
    """Sessions started under these tasks that belong to no task (subagents and the like)."""
    rows = (
        Session.objects.filter(
            Q(parent_task_id__in=task_ids) | Q(parent_session__task_id__in=task_ids),
            task__isnull=True,
        )
        .select_related("team", "parent_session")
        .order_by("started_at", "id")
    )
    out: dict[int, list[Session]] = {}
    for session in rows:
        parent = session.parent_task_id or session.parent_session.task_id
        out.setdefault(parent, []).append(session)
    return out


def task_origin(task: Task) -> dict:
    """Where a task came from: its parent task and the session whose tool call queued it (or,
    for work started from a chat turn, that chat session)."""
    options = task.options or {}
    parent_task_id = options.get("parent_task_id")
    parent_session_id = options.get("parent_session_id")
    if parent_task_id is None and parent_session_id is None:
        first = (
            Session.objects.filter(task=task)
            .exclude(parent_task__isnull=True, parent_session__isnull=True)
            .order_by("started_at", "id")
            .first()
        )
        if first is not None:
            parent_task_id, parent_session_id = first.parent_task_id, first.parent_session_id
    parent = (
        Task.objects.select_related("team").filter(pk=parent_task_id).first()
        if parent_task_id
        else None
    )
    session = (
        Session.objects.select_related("team").filter(pk=parent_session_id).first()
        if parent_session_id
        else None
    )
    requeued = options.get("requeued_from")
    return {
        "parent": parent,
        "parent_session": session,
        "requeued_from": Task.objects.select_related("team").filter(pk=requeued).first()
        if isinstance(requeued, int)
        else None,
    }


def tree_root(task: Task) -> Task:
    """The task at the top of `task`'s tree (itself when nothing started it)."""
    seen = {task.pk}
    current = task
    for _ in range(MAX_DEPTH):
        parent = task_origin(current)["parent"]
        if parent is None or parent.pk in seen:
            break
        seen.add(parent.pk)
        current = parent
    return current


def task_tree(root: Task) -> tuple[Node, list[Node]]:
    """The tree under `root`, level by level, with each node's own spend and its subtree's;
    also the nodes in display order (depth first)."""
    top = Node(task=root, depth=0, relation="root")
    level, nodes = [top], {root.pk: top}
    while level and len(nodes) < MAX_NODES and level[0].depth < MAX_DEPTH:
        ids = [n.task.pk for n in level]
        children = child_tasks(ids)
        for parent_id, sessions in loose_sessions(ids).items():
            nodes[parent_id].loose_sessions = sessions
        next_level = []
        for node in level:
            for child in children.get(node.task.pk, []):
                if child.pk in nodes or len(nodes) >= MAX_NODES:
                    continue
                kid = Node(task=child, depth=node.depth + 1, relation=_relation(child))
                node.children.append(kid)
                nodes[child.pk] = kid
                next_level.append(kid)
        level = next_level
    spend = spend_by_task(list(nodes))
    for pk, node in nodes.items():
        node.own = spend.get(pk, Spend())

    ordered: list[Node] = []

    def walk(node: Node) -> Spend:
        ordered.append(node)
        node.total = Spend(node.own.tokens, node.own.usd)
        for session in node.loose_sessions:
            node.total.add(
                Spend(session.prompt_tokens + session.completion_tokens, session.cost_usd)
            )
        for kid in node.children:
            node.total.add(walk(kid))
        return node.total

    walk(top)
    return top, ordered


def tree_timeline(nodes: list[Node], now: datetime | None = None) -> dict:
    """Every session of the tree as a bar on one time axis: `left` and `width` in percent."""
    now = now or timezone.now()
    by_task = {n.task.pk: n for n in nodes}
    sessions = list(
        Session.objects.filter(task_id__in=list(by_task))
        .select_related("team")
        .order_by("started_at", "id")
    )
    for node in nodes:
        sessions.extend(node.loose_sessions)
    if not sessions:
        return {"rows": [], "ticks": [], "span_ms": 0}
    start = min(s.started_at for s in sessions)
    end = max((s.finished_at or now) for s in sessions)
    span = max((end - start).total_seconds(), 0.001)
    rows = []
    for session in sorted(sessions, key=lambda s: (s.started_at, s.pk)):
        finish = session.finished_at or now
        left = (session.started_at - start).total_seconds() / span * 100
        width = max((finish - session.started_at).total_seconds() / span * 100, 0.4)
        node = by_task.get(session.task_id) if session.task_id else None
        rows.append(
            {
                "session": session,
                "indent": (node.depth if node else 1) * 12,
                "left": round(min(left, 99.6), 2),
                "width": round(min(width, 100 - min(left, 99.6)), 2),
                "duration_ms": int((finish - session.started_at).total_seconds() * 1000),
                "running": session.finished_at is None,
            }
        )
    ticks = [
        {"left": pct, "label": _offset_label(span * pct / 100)} for pct in (0, 25, 50, 75, 100)
    ]
    return {"rows": rows, "ticks": ticks, "span_ms": int(span * 1000), "start": start}


def _offset_label(seconds: float) -> str:
    if seconds < 10:
        return f"+{seconds:.2f} s"
    if seconds < 120:
        return f"+{seconds:.0f} s"
    return f"+{seconds / 60:.1f} min"


def task_story(task: Task) -> dict:
    """Everything the task page shows beyond the row: origin, sessions, children, spend."""
    sessions = list(
        Session.objects.filter(task=task).select_related("team").order_by("started_at", "id")
    )
    children = child_tasks([task.pk]).get(task.pk, [])
    spend = spend_by_task([task.pk, *[c.pk for c in children]])
    own = spend.get(task.pk, Spend())
    return {
        **task_origin(task),
        "sessions": sessions,
        "loose_sessions": loose_sessions([task.pk]).get(task.pk, []),
        "children": [
            {"task": c, "spend": spend.get(c.pk, Spend()), "relation": _relation(c)}
            for c in children
        ],
        "spend": own,
        "duration_ms": task_duration_ms(task),
        "finished": task.status in FINISHED,
    }
