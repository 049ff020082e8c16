"""ask_user: a task's session asks the person the work came from, and waits. The session
pauses after the call (stop reason `waiting`), the task waits in `waiting_for_user` without a
worker, and the answer comes back as this call's result when the task resumes (see
`tasks.services.waiting`). Offered only to a task's own session: a chat turn asks in its
reply, and a subagent's or a query's session cannot wait."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from openhive.core.context import ToolContext
from openhive.core.registry import tool

MAX_OPTIONS = 10


class AskUserArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: str = Field(min_length=1, max_length=2000, description="What to ask, plainly")
    options: list[str] | None = Field(
        default=None,
        description=f"Up to {MAX_OPTIONS} answers to choose from; the answer is one of them",
    )

    @field_validator("question")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the question must not be blank")
        return value.strip()

    @field_validator("options")
    @classmethod
    def _options(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        cleaned = [o.strip() for o in value if o.strip()]
        if len(cleaned) > MAX_OPTIONS or any(len(o) > 200 for o in cleaned):
            raise ValueError(f"give at most {MAX_OPTIONS} options of at most 200 characters")
        if len(set(cleaned)) != len(cleaned):
            raise ValueError("options must differ from each other")
        return cleaned or None


@tool(
    name="ask_user",
    description=(
        "Ask the person who gave you this work a question and wait for the answer (minutes or "
        "hours: the task pauses and resumes with the answer as this tool's result). Use it "
        "only when you cannot go on without a decision or a fact only they have."
    ),
    args=AskUserArgs,
)
def ask_user(ctx: ToolContext, args: AskUserArgs) -> dict:
    if not ctx.pausable or ctx.task_id is None:
        return {
            "success": False,
            "code": "CANNOT_WAIT",
            "error": "ask_user works only in a task's own session; ask in your answer instead",
        }
    ctx.request_pause("question", question=args.question, options=args.options or [])
    return {"success": True, "status": "waiting for the user's answer"}
