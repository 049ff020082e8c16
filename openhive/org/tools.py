"""Org tools over the tree: spawn_team, shutdown_team, update_team, list_teams, get_status,
escalate. Parent/child checks in code; structural changes under the caller's org-op mutex."""

from __future__ import annotations

import uuid

from pydantic import BaseModel, ConfigDict, Field

from openhive.chat.models import OutboxMessage
from openhive.chat.services import outbox_put
from openhive.core.context import ToolContext
from openhive.core.errors import DomainError
from openhive.core.registry import tool
from tasks.selectors import team_status
from tasks.services import caller_org_op
from teams.guards import child_team
from teams.models import TeamMessage
from teams.selectors import team_children, team_tree
from teams.services import team_update_scope, teammessage_send

from .services import team_shutdown, team_spawn


class Credential(BaseModel):
    model_config = ConfigDict(extra="forbid")

    key: str = Field(min_length=1, max_length=200, description="Name of the secret, e.g. API_KEY")
    value: str = Field(min_length=1, description="The secret value; stored encrypted")


class SpawnTeamArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="Lowercase slug: a-z, 0-9 and hyphens, e.g. ops or web-research")
    description: str = Field(default="", description="What the team is for")
    config_path: str = Field(
        default="",
        description=(
            "Optional: a team config YAML to start from, in the data dir's config folder "
            "(a name like teams/web.yaml)"
        ),
    )
    scope_accepts: list[str] = Field(
        default_factory=list,
        description="Keywords for the work this team accepts (required unless config_path)",
    )
    init_context: str = Field(
        default="", description="Background the team should know, saved into its team rules"
    )
    credentials: list[Credential] = Field(
        default_factory=list, description="Secrets the team needs; stored in its vault"
    )

    def secret_values(self) -> list[str]:
        return [c.value for c in self.credentials]


@tool(
    name="spawn_team",
    description=(
        "Create a child team with its workspace and start its setup in the background. "
        "Returns status 'queued'; the user is told when the team is ready."
    ),
    args=SpawnTeamArgs,
    ops="org",
)
def spawn_team(ctx: ToolContext, args: SpawnTeamArgs) -> dict:
    if not args.config_path and not any(k.strip() for k in args.scope_accepts):
        raise DomainError(
            "scope_accepts with at least one keyword is required when config_path is not provided",
            code="invalid_input",
        )
    with caller_org_op(ctx, "spawn_team"):
        spawned = _spawn(ctx, args)
    result = {
        "status": "queued",
        "team": spawned.team.name,
        "bootstrap_task_id": spawned.bootstrap_task.pk,
        "message_for_user": (
            f"Team {spawned.team.name} is being set up. I'll confirm here when it's ready."
        ),
    }
    if args.credentials:
        result["note"] = "Credentials stored securely in the team's vault. Never repeat them."
    return result


def _spawn(ctx: ToolContext, args: SpawnTeamArgs):
    return team_spawn(
        parent=ctx.team,
        name=args.name,
        description=args.description,
        scope_accepts=args.scope_accepts,
        init_context=args.init_context,
        credentials={c.key: c.value for c in args.credentials},
        source_channel=ctx.source_channel,
        topic_id=ctx.topic_id,
        created_by=ctx.caller,
        config_path=args.config_path,
    )


class ListTeamsArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    recursive: bool = Field(default=False, description="Include grandchildren and below")


@tool(
    name="list_teams",
    description="List your child teams with description, scope keywords, status and queue.",
    args=ListTeamsArgs,
)
def list_teams(ctx: ToolContext, args: ListTeamsArgs) -> dict:
    return {"teams": team_tree(root=ctx.team, recursive=args.recursive)}


class ShutdownTeamArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, description="Name of one of your child teams")
    cascade: bool = Field(default=False, description="Also shut down its descendants first")


@tool(
    name="shutdown_team",
    description=(
        "Shut down one of your child teams: stop its sessions and delete its tasks, triggers, "
        "memories, vault and workspace. Refused if it has children unless cascade is true."
    ),
    args=ShutdownTeamArgs,
    ops="org",
)
def shutdown_team(ctx: ToolContext, args: ShutdownTeamArgs) -> dict:
    team = child_team(ctx, args.name)
    with caller_org_op(ctx, "shutdown_team"):
        removed = team_shutdown(team=team, cascade=args.cascade)
    return {"team": args.name, "removed": removed}


class UpdateTeamArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    team: str = Field(min_length=1, description="Name of one of your child teams")
    scope_add: list[str] = Field(default_factory=list, description="Keywords to add")
    scope_remove: list[str] = Field(default_factory=list, description="Keywords to remove")


@tool(
    name="update_team",
    description="Add or remove scope keywords of a child team; returns the resulting scope.",
    args=UpdateTeamArgs,
    ops="org",
)
def update_team(ctx: ToolContext, args: UpdateTeamArgs) -> dict:
    team = child_team(ctx, args.team)
    with caller_org_op(ctx, "update_team"):
        scope = team_update_scope(team=team, add=args.scope_add, remove=args.scope_remove)
    return {"team": team.name, "scope": scope}


class GetStatusArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    team: str = Field(default="", description="One child team; empty for all your children")


@tool(
    name="get_status",
    description=(
        "Live queue state of your child teams: running daily-ops, saturation, org-op pending, "
        "pending queue depth, current task and pending tasks."
    ),
    args=GetStatusArgs,
)
def get_status(ctx: ToolContext, args: GetStatusArgs) -> dict:
    targets = [child_team(ctx, args.team)] if args.team else team_children(team=ctx.team)
    return {"teams": [team_status(team) for team in targets]}


class EscalateArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    message: str = Field(min_length=1, max_length=20_000, description="What the parent should know")
    reason: str = Field(default="", max_length=500, description="Why you escalate")


@tool(
    name="escalate",
    description=(
        "Tell your parent team about something (notification only: it creates no work in its "
        "queue; use enqueue_parent_task for that). From main, it reaches the user."
    ),
    args=EscalateArgs,
)
def escalate(ctx: ToolContext, args: EscalateArgs) -> dict:
    correlation_id = f"escalation:{ctx.team.name}:{uuid.uuid4().hex[:12]}"
    parent = ctx.team.parent
    if parent is not None:
        teammessage_send(
            sender=ctx.team,
            recipient=parent,
            content=args.message,
            kind=TeamMessage.Kind.ESCALATION,
            reason=args.reason,
            correlation_id=correlation_id,
        )
        return {
            "correlation_id": correlation_id,
            "notification_only": True,
            "delivered_to": parent.name,
        }
    if not ctx.source_channel:
        raise DomainError(
            "no chat channel to reach the user from this session; reply with the message instead",
            code="no_channel",
        )
    reason = f" (reason: {args.reason})" if args.reason else ""
    outbox_put(
        channel_id=ctx.source_channel,
        topic_id=ctx.topic_id,
        team_name=ctx.team.name,
        content=f"[{ctx.team.name}] Escalation{reason}: {args.message}",
        task_id=ctx.task_id,
        kind=OutboxMessage.Kind.ESCALATION,
    )
    return {"correlation_id": correlation_id, "notification_only": True, "delivered_to": "user"}
