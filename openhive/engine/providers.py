"""Provider profiles: named litellm model strings with their credentials and options, read
from OPENHIVE_DATA_DIR/config/providers.yaml. Teams pick a profile by name and never see keys."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, model_validator

from openhive.core import paths
from openhive.core.errors import ProviderNotConfigured

SCRIPTED_PREFIX = "scripted/"


def not_configured_message(detail: str = "") -> str:
    prefix = f"{detail} " if detail else ""
    return (
        f"{prefix}No LLM provider is configured. Create {providers_file()} with a 'default' "
        "profile (for example `profiles: {default: {model: anthropic/claude-sonnet-4-5, "
        "api_key_env: ANTHROPIC_API_KEY}}`), or try the offline scripted demo with "
        "`manage.py openhive init --demo`. See the README, section Configuration."
    )


class ProfileIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str = Field(min_length=1)
    api_key: SecretStr | None = None
    api_key_env: str | None = None
    api_base: str | None = None
    api_version: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    timeout: float | None = None
    context_window: int | None = Field(default=None, ge=256)
    # Other profiles, tried in this order once this one keeps failing (their own fallbacks
    # are not followed).
    fallbacks: list[str] = Field(default_factory=list)


class ProvidersFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    profiles: dict[str, ProfileIn] = Field(default_factory=dict)
    embedding: ProfileIn | None = None

    @model_validator(mode="after")
    def _fallbacks_exist(self) -> ProvidersFile:
        for name, profile in self.profiles.items():
            for other in profile.fallbacks:
                if other == name:
                    raise ValueError(f"profile {name!r} names itself as a fallback")
                if other not in self.profiles:
                    raise ValueError(
                        f"profile {name!r} names fallback {other!r}, which is not defined"
                    )
        return self


@dataclass(frozen=True)
class ProviderProfile:
    name: str
    model: str
    api_key: SecretStr | None = None
    api_base: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    context_window: int | None = None
    fallbacks: tuple[str, ...] = ()

    @property
    def is_scripted(self) -> bool:
        return self.model.startswith(SCRIPTED_PREFIX)

    def completion_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"model": self.model, **self.options}
        if self.api_key is not None:
            kwargs["api_key"] = self.api_key.get_secret_value()
        if self.api_base:
            kwargs["api_base"] = self.api_base
        return kwargs

    def describe(self) -> dict[str, Any]:
        """What an operator may see: never the key itself."""
        return {
            "name": self.name,
            "model": self.model,
            "api_base": self.api_base,
            "api_key": "set" if self.api_key else "not set",
            "context_window": self.context_window,
            "fallbacks": list(self.fallbacks),
        }


def providers_file() -> Path:
    return paths.config_dir() / "providers.yaml"


_cache: dict[str, Any] = {"mtime": None, "parsed": None}


def load_providers() -> ProvidersFile:
    """Parse providers.yaml (re-read when it changes). A missing file means no profiles."""
    path = providers_file()
    try:
        mtime = path.stat().st_mtime_ns
    except FileNotFoundError:
        return ProvidersFile()
    if _cache["mtime"] == (path, mtime):
        return _cache["parsed"]
    try:
        data = yaml.safe_load(path.read_text()) or {}
        parsed = ProvidersFile.model_validate(data)
    except (yaml.YAMLError, ValidationError) as exc:
        raise ProviderNotConfigured(f"{path} is invalid: {_short(exc)}") from exc
    _cache.update(mtime=(path, mtime), parsed=parsed)
    return parsed


def _short(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
    return str(exc).splitlines()[0]


def _build(name: str, raw: ProfileIn) -> ProviderProfile:
    key = raw.api_key
    if key is None and raw.api_key_env:
        env_value = os.environ.get(raw.api_key_env)
        if not env_value:
            raise ProviderNotConfigured(
                f'provider profile "{name}" reads its key from ${raw.api_key_env}, which is not set'
            )
        key = SecretStr(env_value)
    options = {
        k: v
        for k, v in raw.model_dump(
            include={"api_version", "temperature", "max_tokens", "timeout"}
        ).items()
        if v is not None
    }
    return ProviderProfile(
        name,
        raw.model,
        key,
        raw.api_base,
        options,
        context_window=raw.context_window,
        fallbacks=tuple(raw.fallbacks),
    )


def resolve_profile(name: str = "default") -> ProviderProfile:
    config = load_providers()
    raw = config.profiles.get(name)
    if raw is None:
        if not config.profiles:
            raise ProviderNotConfigured(not_configured_message())
        raise ProviderNotConfigured(
            f'provider profile "{name}" is not defined in {providers_file()} '
            f"(defined: {', '.join(sorted(config.profiles))})"
        )
    return _build(name, raw)


def list_profiles() -> list[ProviderProfile]:
    config = load_providers()
    profiles = []
    for name, raw in sorted(config.profiles.items()):
        try:
            profiles.append(_build(name, raw))
        except ProviderNotConfigured:
            profiles.append(ProviderProfile(name, raw.model))
    return profiles


def providers_configured() -> bool:
    try:
        resolve_profile("default")
    except (ProviderNotConfigured, OSError):
        return False
    return True


def provider_secret_values() -> list[str]:
    try:
        config = load_providers()
    except ProviderNotConfigured:
        return []
    values = []
    for raw in [*config.profiles.values(), *([config.embedding] if config.embedding else [])]:
        if raw.api_key is not None:
            values.append(raw.api_key.get_secret_value())
        if raw.api_key_env and os.environ.get(raw.api_key_env):
            values.append(os.environ[raw.api_key_env])
    return values
