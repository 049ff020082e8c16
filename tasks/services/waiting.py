"""Tasks that wait for a person: a session that called `ask_user`, or whose call needs an
operator's approval (`require_approval`), pauses; the task leaves the running set (no worker,
no lease, no slot of the team's cap) and a `UserQuestion` records what it waits for. An answer
or a decision (chat, admin, API, or the timeout's default) puts the task back in the queue,
first in line; the run that claims it resumes the paused session from the question's record
(`resume_for`), on any worker."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import F, QuerySet
from django.db.models.functions import Greatest
from django.utils import timezone

from openhive.chat.models import OutboxMessage
from openhive.chat.services import outbox_put
from openhive.core.compiled import CompiledQuery
from openhive.core.errors import Conflict, DomainError, NotFound
from openhive.core.scrubbing import scrub
from openhive.engine.pausing import tool_message
from openhive.engine.spec import Resume
from teams.config import load_team_config

from ..models import Task, UserQuestion
from .queue import _end, task_held_for_update

MAX_ANSWER_CHARS = 10_000
WAITING = (Task.Status.WAITING_FOR_USER, Task.Status.WAITING_FOR_APPROVAL)
STATUS_OF = {
    UserQuestion.Kind.QUESTION: Task.Status.WAITING_FOR_USER,
    UserQuestion.Kind.APPROVAL: Task.Status.WAITING_FOR_APPROVAL,
}
# In chat, an operator decides an approval with a message starting with one of these words.
DECISION = re.compile(r"^\s*(approve|approved|deny|denied)\b[\s:,.-]*(.*)$", re.I | re.S)


def task_wait(*, task_id: int, worker: str, session_id: int, pause: dict) -> UserQuestion | None:
    """Move a running task this worker holds to waiting, record what it waits for and tell
    the chat it came from; None if the worker no longer holds it (cancelled meanwhile)."""
    now = timezone.now()
    kind = str(pause.get("kind") or UserQuestion.Kind.QUESTION)
    with transaction.atomic(durable=True):
        task = task_held_for_update(task_id=task_id, worker=worker)
        if task is None:
            return None
        settings = load_team_config(task.team.name).ask_user
        Task.objects.filter(pk=task.pk).update(
            status=STATUS_OF[kind],
            stop_reason="waiting",
            lease_owner="",
            lease_expires_at=None,
            dispatched_at=None,
            # A pause is not a failed attempt: the lease reaper's count stays as it was.
            attempts=Greatest(F("attempts") - 1, 0),
        )
        question = UserQuestion.objects.create(
            task=task,
            team=task.team,
            session_id=session_id,
            kind=kind,
            text=scrub(str(pause.get("question") or ""))[:MAX_ANSWER_CHARS],
            options=[scrub(str(o)) for o in pause.get("options") or []],
            tool=str(pause.get("tool") or "")[:100],
            arguments=_arguments(pause.get("arguments")),
            channel_id=task.source_channel,
            topic_id=task.topic_id,
            resume_state={k: pause.get(k) for k in ("messages", "call", "calls")},
            expires_at=now + timedelta(seconds=settings.timeout_seconds),
            # An approval never defaults to running a risky call: it fails when nobody decides.
            default_answer=settings.default if kind == UserQuestion.Kind.QUESTION else None,
        )
        if task.source_channel:
            _tell_chat(task, question)
    return question


def _arguments(raw: object) -> dict:
    if isinstance(raw, dict):
        return scrub_data(raw)
    try:
        parsed = json.loads(str(raw or "{}"))
    except ValueError:
        return {"raw": scrub(str(raw))[:2000]}
    return scrub_data(parsed) if isinstance(parsed, dict) else {"raw": scrub(str(raw))[:2000]}


def scrub_data(value: dict) -> dict:
    from openhive.core.scrubbing import get_scrubber

    return get_scrubber().data(value)


def _tell_chat(task: Task, question: UserQuestion) -> None:
    team = task.team.name
    if question.kind == UserQuestion.Kind.QUESTION:
        options = f" Options: {', '.join(question.options)}." if question.options else ""
        content = (
            f"[{team}] Question (task #{task.pk}): {question.text}{options} "
            "Your next message in this topic answers it."
        )
        kind = OutboxMessage.Kind.QUESTION
    else:
        arguments = json.dumps(question.arguments, ensure_ascii=False)[:1000]
        content = (
            f"[{team}] Approval needed (task #{task.pk}): {question.tool} {arguments}. "
            "An operator replies `approve` or `deny <reason>` in this topic."
        )
        kind = OutboxMessage.Kind.APPROVAL
    outbox_put(
        channel_id=task.source_channel,
        topic_id=task.topic_id,
        team_name=team,
        content=content,
        task_id=task.pk,
        kind=kind,
        task_status=STATUS_OF[question.kind],
        data=question_frame(question),
    )


def question_frame(question: UserQuestion) -> dict:
    """What a client (socket, API) needs to show the question and answer it."""
    return {
        "id": question.pk,
        "kind": question.kind,
        "task_id": question.task_id,
        "team": question.team.name,
        "text": question.text,
        "options": list(question.options),
        "tool": question.tool,
        "arguments": question.arguments,
        "state": question.state,
        "expires_at": question.expires_at.isoformat() if question.expires_at else None,
    }


# --- answers and decisions ---------------------------------------------------------------------


def _pending(task_id: int, kind: str) -> UserQuestion:
    """The task's open question of `kind`, locked; a clear refusal when there is none."""
    task = Task.objects.select_for_update().filter(pk=task_id).first()
    if task is None:
        raise NotFound(f"task {task_id} not found")
    question = (
        UserQuestion.objects.select_for_update()
        .select_related("team")
        .filter(task_id=task_id, state=UserQuestion.State.PENDING)
        .order_by("created_at", "id")
        .first()
    )
    if task.status not in WAITING or question is None:
        raise Conflict(
            f"task {task_id} is not waiting for anyone (it is {task.status})", code="not_waiting"
        )
    if question.kind != kind:
        other = (
            "an approval decision" if question.kind == UserQuestion.Kind.APPROVAL else "an answer"
        )
        raise Conflict(f"task {task_id} waits for {other}, not this", code="wrong_kind")
    return question


@transaction.atomic
def task_answer(*, task_id: int, answer: str, by: str, via: str) -> UserQuestion:
    """Answer the task's pending question: the task goes back to the queue, first in line."""
    answer = (answer or "").strip()
    if not answer:
        raise DomainError("the answer must not be empty", code="invalid_answer")
    if len(answer) > MAX_ANSWER_CHARS:
        raise DomainError(
            f"the answer is longer than {MAX_ANSWER_CHARS} characters", code="invalid_answer"
        )
    question = _pending(task_id, UserQuestion.Kind.QUESTION)
    if question.options and answer not in question.options:
        matched = [o for o in question.options if o.casefold() == answer.casefold()]
        if not matched:
            raise DomainError(
                f"answer with one of: {', '.join(question.options)}", code="invalid_answer"
            )
        answer = matched[0]
    return _decide(question, UserQuestion.State.ANSWERED, answer=scrub(answer), by=by, via=via)


@transaction.atomic
def task_decide_approval(*, task_id: int, decision: str, reason: str, by: str, via: str):
    """Approve (the call runs when the session resumes) or deny (the model reads why)."""
    if decision not in ("approve", "deny"):
        raise DomainError('decision must be "approve" or "deny"', code="invalid_decision")
    question = _pending(task_id, UserQuestion.Kind.APPROVAL)
    state = UserQuestion.State.APPROVED if decision == "approve" else UserQuestion.State.DENIED
    return _decide(question, state, reason=scrub((reason or "").strip())[:2000], by=by, via=via)


def _decide(
    question: UserQuestion, state: str, *, by: str, via: str, answer: str = "", reason: str = ""
) -> UserQuestion:
    now = timezone.now()
    question.state, question.answer, question.reason = state, answer, reason
    question.decided_by, question.decided_via, question.decided_at = by[:150], via, now
    question.save()
    Task.objects.filter(pk=question.task_id, status__in=WAITING).update(
        status=Task.Status.PENDING,
        # First in line: the person is waiting for the rest of the work.
        priority=Task.Priority.HIGH,
        dispatched_at=None,
        run_after=None,
    )
    return question


def questions_expire(*, now: datetime | None = None) -> dict[str, int]:
    """The clock job: a question nobody answered in time gets the team's default answer (the
    task resumes) or, without one (and always for an approval), fails its task."""
    now = now or timezone.now()
    defaulted = failed = 0
    due = UserQuestion.objects.filter(state=UserQuestion.State.PENDING, expires_at__lt=now)
    for question_id in due.values_list("id", flat=True)[:500]:
        with transaction.atomic(durable=True):
            question = (
                UserQuestion.objects.select_for_update()
                .select_related("task", "task__team")
                .filter(pk=question_id, state=UserQuestion.State.PENDING)
                .first()
            )
            if question is None:
                continue
            if question.default_answer:
                _decide(
                    question,
                    UserQuestion.State.DEFAULTED,
                    answer=question.default_answer,
                    by="timeout",
                    via="timeout",
                )
                defaulted += 1
                continue
            question.state, question.decided_by = UserQuestion.State.EXPIRED, "timeout"
            question.decided_via, question.decided_at = "timeout", now
            question.save()
            task = Task.objects.select_for_update().select_related("team").get(pk=question.task_id)
            if task.status in WAITING:
                waited = _span((now - question.created_at).total_seconds())
                whom = "the user" if question.kind == UserQuestion.Kind.QUESTION else "an operator"
                _end(
                    task,
                    status=Task.Status.FAILED,
                    now=now,
                    stop_reason="timeout",
                    result=f"Error: no answer from {whom} within {waited}; the task stopped "
                    f"waiting ({question.kind}: {question.text or question.tool})",
                )
                failed += 1
    return {"questions_defaulted": defaulted, "questions_failed": failed}


def _span(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.0f} min" if seconds >= 60 else f"{seconds:.0f} s"


# --- resuming ----------------------------------------------------------------------------------


def _answered(task_id: int) -> QuerySet[UserQuestion]:
    return (
        UserQuestion.objects.filter(task_id=task_id, resumed_at__isnull=True)
        .exclude(
            state__in=[
                UserQuestion.State.PENDING,
                UserQuestion.State.EXPIRED,
                UserQuestion.State.CLOSED,
            ]
        )
        .order_by("-created_at", "-id")[:1]
    )


# Asked at every claim, and almost never finds anything.
_ANSWERED = CompiledQuery(_answered)


def resume_for(task: Task) -> Resume | None:
    """The paused session the claimed task continues, with the answer or decision as the
    waiting call's result; None for a task that never paused (or was resumed already)."""
    if getattr(task, "claim_may_resume", True) is False:
        return None  # its claim saw no question to resume (PostgreSQL's claim says so)
    found = _ANSWERED.rows(UserQuestion, task_id=task.pk)
    question = found[0] if found else None
    if question is None:
        return None
    UserQuestion.objects.filter(pk=question.pk).update(resumed_at=timezone.now())
    state = question.resume_state or {}
    messages = list(state.get("messages") or [])
    call = state.get("call") or {}
    calls = list(state.get("calls") or [])
    name = (call.get("function") or {}).get("name", "")
    approved: frozenset[str] = frozenset()
    if question.state == UserQuestion.State.APPROVED:
        calls, approved = [call, *calls], frozenset({str(call.get("id"))})
    elif question.state == UserQuestion.State.DENIED:
        reason = question.reason or "no reason given"
        result = {
            "success": False,
            "code": "APPROVAL_DENIED",
            "error": f"an operator denied this call ({question.decided_by}): {reason}",
        }
        messages.append(tool_message(call, name, result))
    else:
        result = {
            "success": True,
            "answer": question.answer,
            "answered_by": "timeout default" if question.state == "defaulted" else "user",
        }
        messages.append(tool_message(call, name, result))
    return Resume(
        session_id=question.session_id or 0,
        messages=tuple(messages),
        calls=tuple(calls),
        approved=approved,
    )


# --- chat ---------------------------------------------------------------------------------------


def _pending_in_topic(channel_id: str, topic_id: int) -> QuerySet[UserQuestion]:
    # Not the paused conversations (`resume_state`): what picks the one this message answers.
    return (
        UserQuestion.objects.filter(
            channel_id=channel_id, topic_id=topic_id, state=UserQuestion.State.PENDING
        )
        .only("id", "kind", "task_id", "team_id", "tool", "created_at")
        .order_by("created_at", "id")
    )


# Asked before every chat turn, and almost never finds anything: compiling the ORM's query
# took most of the web process's work per message once its turn had started.
_PENDING_IN_TOPIC = CompiledQuery(_pending_in_topic)


def _oldest(pending: list[UserQuestion], kind: str) -> UserQuestion | None:
    return next((question for question in pending if question.kind == kind), None)


def chat_answer(
    *, channel_id: str, topic_id: int, text: str, sender: str, operator: bool
) -> str | None:
    """A message in a topic where a task waits: the owner's next message answers the oldest
    pending question of that topic; an operator's `approve` / `deny [reason]` decides its
    oldest pending approval. Returns the reply to show, or None (an ordinary message)."""
    pending = _PENDING_IN_TOPIC.rows(UserQuestion, channel_id=channel_id, topic_id=topic_id)
    decision = DECISION.match(text)
    if operator and decision:
        approval = _oldest(pending, UserQuestion.Kind.APPROVAL)
        if approval is not None:
            word = decision.group(1).lower()
            verdict = "approve" if word.startswith("approve") else "deny"
            try:
                task_decide_approval(
                    task_id=approval.task_id,
                    decision=verdict,
                    reason=decision.group(2),
                    by=sender,
                    via="chat",
                )
            except DomainError as exc:
                return f"Could not record the decision: {exc.message}"
            done = "approved; the task goes on" if verdict == "approve" else "denied"
            return f"[{approval.team.name}] {approval.tool} on task #{approval.task_id}: {done}."
    question = _oldest(pending, UserQuestion.Kind.QUESTION)
    if question is None:
        return None
    try:
        task_answer(task_id=question.task_id, answer=text, by=sender, via="chat")
    except DomainError as exc:
        return f"That does not answer the question of task #{question.task_id}: {exc.message}"
    return f"[{question.team.name}] Thanks, task #{question.task_id} goes on with your answer."
