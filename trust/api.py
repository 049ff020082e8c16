"""REST: sender trust (/api/v1/trust). Like every operator operation, it needs operator
rights (a staff user, or a token with the operator scope): it decides who may talk to the
agents."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from django.http import HttpRequest
from ninja import Field, Query, Router, Schema, Status

from openhive.core.api import request_actor

from .policy import describe_policy
from .selectors import sender_trust_list, sender_trust_summary, trust_audit_recent
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


class TrustAuditFilters(Schema):
    limit: int = Field(100, ge=1, le=500)


def _granted_by(request: HttpRequest) -> str:
    return f"api:{request_actor(request)}"


@router.get("", response=list[SenderTrustOut], summary="Stored grants and denials")
def trust_list(request: HttpRequest, filters: Query[TrustFilters]) -> list[dict]:
    rows = sender_trust_list(channel_type=filters.channel_type, trust_level=filters.trust_level)
    return [sender_trust_summary(r) for r in rows[:1000]]


@router.post("", response={201: SenderTrustOut}, summary="Grant or deny a sender")
def trust_grant(request: HttpRequest, body: GrantIn) -> Status:
    row = sender_trust_set(**body.dict(), granted_by=_granted_by(request))
    return Status(201, sender_trust_summary(row))


@router.post("/revoke", response={200: dict}, summary="Remove a stored grant or denial")
def trust_revoke(request: HttpRequest, body: RevokeIn) -> dict:
    sender_trust_revoke(**body.dict())
    return {"revoked": True}


@router.get("/audit", response=list[AuditOut], summary="Recent gate decisions, newest first")
def trust_audit(request: HttpRequest, filters: Query[TrustAuditFilters]) -> list[Any]:
    return list(trust_audit_recent(limit=filters.limit))


@router.get("/policy", response=dict, summary="The trust policy as loaded from channels.yaml")
def trust_policy(request: HttpRequest) -> dict:
    return describe_policy()
