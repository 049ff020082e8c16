"""Org tools for the tree itself: spawn_team, list_teams."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from openhive.tools.context import ToolContext
from openhive.tools.registry import tool

from .selectors import team_tree
from .services import team_spawn


class Credential(BaseModel):
    model_config = ConfigDict(extra="forbid")

    key: str = Field(min_length=1, max_length=200, description="Name of the secret, e.g. API_KEY")
    value: str = Field(min_length=1, description="The secret value; stored encrypted")


class SpawnTeamArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="Lowercase slug: a-z, 0-9 and hyphens, e.g. ops or web-research")
    description: str = Field(default="", description="What the team is for")
    scope_accepts: list[str] = Field(
        default_factory=list, description="Keywords for the work this team accepts"
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
    spawned = team_spawn(
        parent=ctx.team,
        name=args.name,
        description=args.description,
        scope_accepts=args.scope_accepts,
        init_context=args.init_context,
        credentials={c.key: c.value for c in args.credentials},
        source_channel=ctx.source_channel,
        topic_id=ctx.topic_id,
        created_by=ctx.caller,
    )
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
