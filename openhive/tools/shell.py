"""The `bash` tool: one sandboxed subprocess per call (openhive.core.sandbox), never the
worker's own process and never the host unconfined unless the operator opted in with
OPENHIVE_ALLOW_UNSANDBOXED."""

from __future__ import annotations

import logging

from django.conf import settings
from pydantic import BaseModel, ConfigDict, Field

from openhive.core import sandbox
from openhive.core.context import ToolContext
from openhive.core.errors import DomainError
from openhive.core.registry import tool
from openhive.core.scrubbing import get_scrubber

from .workspaces import team_workspace

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 120
MAX_TIMEOUT = 600
OUTPUT_CAP = 100_000


def run_in_workspace(
    ctx: ToolContext,
    argv: list[str],
    *,
    timeout: float,
    what: str,
    things: str = "commands",
    stdin: bytes | None = None,
    env: dict[str, str] | None = None,
) -> sandbox.SandboxResult:
    """Run `argv` in the sandbox with the team's workspace as its only writable folder (`bash`
    and skill scripts alike); no sandbox means nothing runs unless the operator opted in."""
    run = sandbox.run(
        argv,
        workspace=team_workspace(ctx).root,
        timeout=timeout,
        stdin=stdin,
        limits=sandbox_limits(timeout),
        env=env,
        output_cap=OUTPUT_CAP,
        allow_unsandboxed=settings.OPENHIVE["ALLOW_UNSANDBOXED"],
    )
    if run.status == "unavailable":
        raise DomainError(
            f"{what} {'are' if what.endswith('s') else 'is'} unavailable: {run.reason}. Nothing "
            f"was run; {things} never run unsandboxed unless the operator sets "
            "OPENHIVE_ALLOW_UNSANDBOXED.",
            code="sandbox_unavailable",
        )
    if not run.sandboxed:
        logger.warning(
            "%s for %s ran WITHOUT a sandbox (OPENHIVE_ALLOW_UNSANDBOXED)", what, ctx.caller
        )
    return run


def sandbox_limits(timeout: float) -> sandbox.Limits:
    config = settings.OPENHIVE
    return sandbox.Limits(
        cpu_seconds=int(timeout) + 1,
        memory_bytes=config["SANDBOX_MEMORY_MB"] * sandbox.MiB,
        processes=config["SANDBOX_PROCESSES"],
    )


class BashArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    command: str = Field(min_length=1, max_length=100_000, description="Shell command (bash -c)")
    timeout_seconds: int = Field(
        default=DEFAULT_TIMEOUT, ge=1, le=MAX_TIMEOUT, description="Stop it after this long"
    )


@tool(
    name="bash",
    description=(
        "Run a shell command in a sandbox whose working folder is your workspace (the only "
        "writable place). No network: use web_fetch for the web. System tools are read-only; "
        "/tmp is private and emptied after each call."
    ),
    args=BashArgs,
)
def bash_tool(ctx: ToolContext, args: BashArgs) -> dict:
    scrubber = get_scrubber()
    if any(secret in args.command for secret in scrubber.secrets):
        # The sandbox has no network, so a secret in a command can only end up in a file or
        # in the output: refuse rather than store it.
        raise DomainError(
            "the command contains a secret value from the vault; secrets are for web_fetch "
            "headers ({{vault:key}}), not for shell commands or files",
            code="secret_detected",
        )
    run = run_in_workspace(
        ctx, ["/bin/bash", "-c", args.command], timeout=args.timeout_seconds, what="bash"
    )
    result: dict = {
        "exit_code": run.exit_code,
        "stdout": scrubber.text(run.stdout),
        "stderr": scrubber.text(run.stderr),
        "duration_ms": run.duration_ms,
        "sandboxed": run.sandboxed,
    }
    if run.truncated:
        result["truncated"] = True
        result["note"] = f"output cut at {OUTPUT_CAP} characters; redirect it to a file"
    if run.status in ("timeout", "output_limit"):
        result.update(success=False, code=run.status.upper(), error=f"the command was {run.reason}")
    elif run.exit_code != 0:
        result.update(success=False, error=f"the command exited with status {run.exit_code}")
    return result
