"""Provider profiles: named litellm model strings with their credentials and options, read
from OPENHIVE_DATA_DIR/config/providers.yaml. Teams pick a profile by name and never see keys."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError

from openhive.core import paths
from openhive.core.errors import ProviderNotConfigured

logger = logging.getLogger(__name__)

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
    """providers.yaml as far as it is usable: each profile is checked on its own, so a mistake
    in one (an unknown key, a missing model, a fallback that does not exist) takes down that
    profile only. `problems` names each broken part and why ("file" for the file's own keys)."""

    profiles: dict[str, ProfileIn] = Field(default_factory=dict)
    embedding: ProfileIn | None = None
    problems: dict[str, str] = Field(default_factory=dict)


FILE_KEYS = ("profiles", "embedding")


def _parse_providers(data: Any, path: Path) -> ProvidersFile:
    if not isinstance(data, dict):
        raise ProviderNotConfigured(f"{path} is invalid: expected a mapping with `profiles:`")
    problems: dict[str, str] = {}
    unknown = [str(key) for key in data if key not in FILE_KEYS]
    if unknown:
        problems["file"] = "; ".join(
            f'unknown key "{key}" (known keys: {", ".join(FILE_KEYS)})' for key in unknown
        )
    raw_profiles = data.get("profiles") or {}
    if not isinstance(raw_profiles, dict):
        raise ProviderNotConfigured(f"{path} is invalid: `profiles` must map names to profiles")
    profiles: dict[str, ProfileIn] = {}
    for name, raw in raw_profiles.items():
        try:
            profiles[str(name)] = ProfileIn.model_validate(raw)
        except ValidationError as exc:
            problems[str(name)] = _short(exc)
    for name, profile in list(profiles.items()):
        for other in profile.fallbacks:
            if other == name:
                problems[name] = "names itself as a fallback"
            elif other not in raw_profiles:
                problems[name] = f'names fallback "{other}", which is not defined'
        if name in problems:
            del profiles[name]
    embedding = None
    if data.get("embedding") is not None:
        try:
            embedding = ProfileIn.model_validate(data["embedding"])
        except ValidationError as exc:
            problems["embedding"] = _short(exc)
    return ProvidersFile(profiles=profiles, embedding=embedding, problems=problems)


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
    return paths.config_file("providers.yaml")


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
    except yaml.YAMLError as exc:
        raise ProviderNotConfigured(f"{path} is invalid: {_short(exc)}") from exc
    parsed = _parse_providers(data, path)
    for part, problem in parsed.problems.items():
        where = "" if part == "file" else f' (profile "{part}")'
        logger.warning("%s%s: %s", path, where, problem)
    _cache.update(mtime=(path, mtime), parsed=parsed)
    return parsed


def _short(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(_explain(e) for e in exc.errors())
    return str(exc).splitlines()[0]


def _explain(error: Any) -> str:
    where = ".".join(str(p) for p in error["loc"])
    if error["type"] == "extra_forbidden":
        return f'unknown key "{where}" (known keys: {", ".join(ProfileIn.model_fields)})'
    if error["type"] == "missing":
        return f'missing "{where}"'
    return f"{where}: {error['msg']}" if where else error["msg"]


def provider_problems() -> list[str]:
    """Every reason a part of providers.yaml cannot be used, for the health check, `status`
    and the admin: the file, the profile and the key or variable (never a value)."""
    path = providers_file()
    try:
        config = load_providers()
    except ProviderNotConfigured as exc:
        return [exc.message]
    problems = {**config.problems}
    for name, raw in [
        *config.profiles.items(),
        *([("embedding", config.embedding)] if config.embedding else []),
    ]:
        if raw.api_key is None and raw.api_key_env and not os.environ.get(raw.api_key_env):
            problems[name] = _unset_variable(raw.api_key_env)
    if path.exists() and "default" not in config.profiles and "default" not in problems:
        defined = ", ".join(sorted(config.profiles)) or "none"
        problems["file"] = "; ".join(
            filter(None, [problems.get("file"), f'no "default" profile (defined: {defined})'])
        )
    return [f"{path.name}: {_part(part)}{problem}" for part, problem in sorted(problems.items())]


def _part(part: str) -> str:
    if part == "file":
        return ""
    return "embedding: " if part == "embedding" else f'profile "{part}": '


def _unset_variable(variable: str) -> str:
    return (
        f"api_key_env names ${variable}, which is not set in the environment of the server "
        "(set it where serve runs, or write the key as api_key)"
    )


def provider_problem(name: str = "default") -> str:
    """Why profile `name` cannot be used, in one sentence naming the file, the profile and the
    key or variable; "" when it can. What `status`, the chat error and the landing page say."""
    try:
        resolve_profile(name)
    except ProviderNotConfigured as exc:
        return exc.message
    except OSError as exc:
        return f"{providers_file()} cannot be read: {exc.strerror}"
    return ""


def _build(name: str, raw: ProfileIn) -> ProviderProfile:
    key = raw.api_key
    if key is None and raw.api_key_env:
        env_value = os.environ.get(raw.api_key_env)
        if not env_value:
            raise ProviderNotConfigured(
                f'provider profile "{name}" in {providers_file()} cannot be used: '
                f"{_unset_variable(raw.api_key_env)}"
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
    if raw is None and name in config.problems:
        raise ProviderNotConfigured(
            f'provider profile "{name}" in {providers_file()} cannot be used: '
            f"{config.problems[name]}"
        )
    if raw is None:
        if not providers_file().exists():
            raise ProviderNotConfigured(not_configured_message())
        if not config.profiles:
            raise ProviderNotConfigured(
                f"{providers_file()} defines no usable profile: give it a 'default' profile "
                "(see providers.yaml.example beside it, or the README, section Configuration)"
            )
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
    return not provider_problem("default")


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
