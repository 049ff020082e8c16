"""The trust policy: the `trust:` section of OPENHIVE_DATA_DIR/config/channels.yaml.

```yaml
trust:
  default_policy: deny            # allow | deny (when nothing else matched)
  channels:
    ws:
      policy: deny                # this channel type's policy
      sender_allowlist: [alice]
      sender_denylist: [mallory]  # silent: these senders never get an answer
      allow_asserted_sender: false  # anonymous sockets may claim an id (?sender=...)
  channel_overrides:
    "ws:user:3": {policy: allow}  # one conversation
```

No `trust:` section means every identified sender is allowed (and a warning is logged).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from openhive.core import paths
from openhive.core.errors import DomainError

logger = logging.getLogger(__name__)

Policy = Literal["allow", "deny"]


class ChannelPolicy(BaseModel):
    model_config = ConfigDict(extra="forbid")

    policy: Policy | None = None
    sender_allowlist: list[str] = Field(default_factory=list)
    sender_denylist: list[str] = Field(default_factory=list)
    allow_asserted_sender: bool = False


class OverridePolicy(BaseModel):
    model_config = ConfigDict(extra="forbid")

    policy: Policy


class TrustPolicy(BaseModel):
    model_config = ConfigDict(extra="forbid")

    default_policy: Policy = "allow"
    channels: dict[str, ChannelPolicy] = Field(default_factory=dict)
    channel_overrides: dict[str, OverridePolicy] = Field(default_factory=dict)

    def channel(self, channel_type: str) -> ChannelPolicy:
        return self.channels.get(channel_type) or ChannelPolicy()

    def effective_policy(self, channel_type: str, channel_id: str) -> Policy:
        """What the last three steps of the order would decide: override → channel → default."""
        override = self.channel_overrides.get(channel_id)
        if override is not None:
            return override.policy
        return self.channel(channel_type).policy or self.default_policy


class PolicyError(DomainError):
    """channels.yaml exists but cannot be used; the gate then refuses everyone."""

    code = "policy_invalid"


@dataclass(frozen=True)
class LoadedPolicy:
    """`policy` is None when the file has no `trust:` section (allow all)."""

    policy: TrustPolicy | None
    path: Path


def channels_file() -> Path:
    return paths.config_file("channels.yaml")


_cache: dict[str, Any] = {"key": None, "value": None}
_warned: set[Path] = set()


def load_trust_policy() -> LoadedPolicy:
    """Parsed and cached until the file changes. A broken file raises PolicyError."""
    path = channels_file()
    try:
        stat = path.stat()
        key = (path, stat.st_mtime_ns, stat.st_size)
    except FileNotFoundError:
        key = (path, None, None)
    if _cache["key"] == key:
        return _cache["value"]
    section = None
    if key[1] is not None:
        try:
            data = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError as exc:
            raise PolicyError(f"{path} is not valid YAML: {_first_line(exc)}") from exc
        if not isinstance(data, dict):
            raise PolicyError(f"{path} must be a mapping with a `trust:` section")
        section = data.get("trust")
    if section is None:
        value = LoadedPolicy(None, path)
        if path not in _warned:
            _warned.add(path)
            # Advice, not an alarm: on a first start the file simply does not exist yet.
            where = (
                f"{path} has no `trust:` section"
                if key[1] is not None
                else f"there is no {path} yet"
            )
            logger.warning(
                "No trust policy: %s, so every signed-in user and every API token may chat. "
                "To restrict who may, add a `trust:` section there (README, Chat and trust).",
                where,
            )
    else:
        try:
            value = LoadedPolicy(TrustPolicy.model_validate(section), path)
        except ValidationError as exc:
            problems = "; ".join(
                f'unknown key "trust.{".".join(str(p) for p in e["loc"])}"'
                if e["type"] == "extra_forbidden"
                else f"trust.{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
                for e in exc.errors()
            )
            raise PolicyError(f"{path} is invalid: {problems}") from exc
    _cache.update(key=key, value=value)
    return value


CHANNELS_KEYS = ("trust",)


def channels_problems() -> list[str]:
    """What in channels.yaml cannot be used, naming the key (for health, status, admin)."""
    path = channels_file()
    try:
        load_trust_policy()
    except PolicyError as exc:
        return [str(exc.message).replace(str(path), path.name)]
    try:
        data = yaml.safe_load(path.read_text()) if path.exists() else None
    except (OSError, yaml.YAMLError):
        return []
    if not isinstance(data, dict):
        return []
    known = ", ".join(CHANNELS_KEYS)
    return [
        f'{path.name}: unknown key "{key}" (known keys: {known})'
        for key in data
        if key not in CHANNELS_KEYS
    ]


def describe_policy() -> dict[str, Any]:
    """For the admin page and the API: the policy as loaded, or the reason it cannot be."""
    try:
        loaded = load_trust_policy()
    except PolicyError as exc:
        return {"path": str(channels_file()), "status": "invalid", "error": str(exc)}
    if loaded.policy is None:
        return {"path": str(loaded.path), "status": "not configured (all senders allowed)"}
    return {"path": str(loaded.path), "status": "active", "policy": loaded.policy.model_dump()}


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [""])[0]


def check_policy_at_startup() -> None:
    """Say at start-up what the gate will do: warn when there is no `trust:` section (everyone
    identified is allowed) and log an error when the file is broken (everyone is refused)."""
    try:
        load_trust_policy()
    except PolicyError as exc:
        logger.error("Trust policy unusable, every chat sender will be refused: %s", exc)
    except Exception:  # start-up must go on; the gate itself fails closed
        logger.exception("Trust policy could not be checked")
