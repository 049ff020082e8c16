"""REST: sender trust (/api/v1/trust). Reading needs any API user; granting, denying and
revoking need a staff user, because they decide who may talk to the agents."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from django.http import HttpRequest
from ninja import Field, Query, Router, Schema, Status

from openhive.errors import NotAllowed

from .policy import describe_policy
from .selectors import sender_trust_list, trust_audit_recent
from .services import sender_trust_revoke, sender_trust_set

router = Router(tags=["trust"])


class SenderTrustOut(Schema):
    channel_type: str
    channel_id: str | None
    sender_id: str
    trust_level: str
    granted_by: str
    created_at: datetime


class TrustFilters(Schema):
    channel_type: str | None = Field(None, min_length=1, max_length=40)
    trust_level: Literal["trusted", "denied"] | None = None


class GrantIn(Schema):
    channel_type: str = Field(..., min_length=1, max_length=40)
    sender_id: str = Field(..., min_length=1, max_length=200)
    channel_id: str = Field("", max_length=200, description="empty = every channel of the type")
    trust_level: Literal["trusted", "denied"] = "trusted"


class RevokeIn(Schema):
    channel_type: str = Field(..., min_length=1, max_length=40)
    sender_id: str = Field(..., min_length=1, max_length=200)
    channel_id: str = Field("", max_length=200)


class AuditOut(Schema):
    created_at: datetime
    channel_type: str
    channel_id: str
    sender_id: str
    sender_asserted: bool
    decision: str
    reason: str


class AuditFilters(Schema):
    limit: int = Field(100, ge=1, le=500)


def _out(row: Any) -> dict:
    return {
        "channel_type": row.channel_type,
        "channel_id": row.channel_id or None,
        "sender_id": row.sender_id,
        "trust_level": row.trust_level,
        "granted_by": row.granted_by,
        "created_at": row.created_at,
    }


def _staff(request: HttpRequest) -> str:
    user = request.auth
    if not getattr(user, "is_staff", False):
        raise NotAllowed("changing sender trust needs a staff user", code="staff_only")
    return f"api:{user.get_username()}"


@router.get("", response=list[SenderTrustOut], summary="Stored grants and denials")
def trust_list(request: HttpRequest, filters: Query[TrustFilters]) -> list[dict]:
    rows = sender_trust_list(channel_type=filters.channel_type, trust_level=filters.trust_level)
    return [_out(r) for r in rows[:1000]]


@router.post("", response={201: SenderTrustOut}, summary="Grant or deny a sender")
def trust_grant(request: HttpRequest, body: GrantIn) -> Status:
    row = sender_trust_set(**body.dict(), granted_by=_staff(request))
    return Status(201, _out(row))


@router.post("/revoke", response={200: dict}, summary="Remove a stored grant or denial")
def trust_revoke(request: HttpRequest, body: RevokeIn) -> dict:
    _staff(request)
    sender_trust_revoke(**body.dict())
    return {"revoked": True}


@router.get("/audit", response=list[AuditOut], summary="Recent gate decisions, newest first")
def trust_audit(request: HttpRequest, filters: Query[AuditFilters]) -> list[Any]:
    return list(trust_audit_recent(limit=filters.limit))


@router.get("/policy", response=dict, summary="The trust policy as loaded from channels.yaml")
def trust_policy(request: HttpRequest) -> dict:
    return describe_policy()
