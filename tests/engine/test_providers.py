"""Provider profiles from providers.yaml: teams name a profile and never see its key."""

from __future__ import annotations

import os

import pytest
import yaml

from openhive.core.errors import ProviderNotConfigured
from openhive.engine.providers import (
    list_profiles,
    load_providers,
    provider_problem,
    provider_problems,
    provider_secret_values,
    providers_configured,
    providers_file,
    resolve_profile,
)

KEY = "sk-test-0123456789abcdefghij"


@pytest.fixture
def write_providers(openhive_dirs):
    def write(data) -> None:
        path = providers_file()
        text = data if isinstance(data, str) else yaml.safe_dump(data)
        path.write_text(text)
        # The cache is keyed on mtime: make every write visibly newer.
        stat = path.stat()
        bump = getattr(write, "bump", 0) + 1_000_000
        write.bump = bump
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + bump))

    return write


def test_providers_file_lives_in_the_data_config_dir(openhive_dirs):
    assert providers_file() == openhive_dirs / "data" / "config" / "providers.yaml"


def test_missing_file_means_no_profiles():
    assert load_providers().profiles == {}
    assert list_profiles() == []
    assert providers_configured() is False
    assert provider_secret_values() == []


def test_missing_file_error_tells_how_to_configure():
    with pytest.raises(ProviderNotConfigured) as err:
        resolve_profile("default")
    message = err.value.message
    assert str(providers_file()) in message
    assert "providers.yaml" in message and "default" in message
    assert "scripted demo" in message and "openhive init --demo" in message


def test_profile_with_a_key_builds_completion_kwargs(write_providers):
    write_providers(
        {
            "profiles": {
                "default": {
                    "model": "anthropic/claude-sonnet-4-5",
                    "api_key": KEY,
                    "api_base": "https://llm.example.test",
                    "temperature": 0.2,
                    "max_tokens": 1000,
                }
            }
        }
    )
    profile = resolve_profile()
    assert profile.name == "default" and not profile.is_scripted
    assert profile.completion_kwargs() == {
        "model": "anthropic/claude-sonnet-4-5",
        "api_key": KEY,
        "api_base": "https://llm.example.test",
        "temperature": 0.2,
        "max_tokens": 1000,
    }
    assert providers_configured() is True


def test_describe_never_shows_the_key(write_providers):
    write_providers({"profiles": {"default": {"model": "openai/gpt-4.1", "api_key": KEY}}})
    described = resolve_profile().describe()
    assert described["api_key"] == "set"
    assert KEY not in repr(described)
    assert KEY not in repr(resolve_profile())  # SecretStr hides it in reprs as well


def test_key_can_come_from_the_environment(write_providers, monkeypatch):
    monkeypatch.setenv("ZZ_TEST_KEY", KEY)
    write_providers({"profiles": {"fast": {"model": "openai/x", "api_key_env": "ZZ_TEST_KEY"}}})
    assert resolve_profile("fast").completion_kwargs()["api_key"] == KEY
    assert provider_secret_values() == [KEY]


def test_unset_key_variable_is_a_clear_error(write_providers, monkeypatch):
    monkeypatch.delenv("ZZ_TEST_KEY", raising=False)
    write_providers({"profiles": {"fast": {"model": "openai/x", "api_key_env": "ZZ_TEST_KEY"}}})
    with pytest.raises(ProviderNotConfigured, match=r"\$ZZ_TEST_KEY, which is not set"):
        resolve_profile("fast")
    # Listing still shows the profile (without a key) instead of failing.
    assert [(p.name, p.api_key) for p in list_profiles()] == [("fast", None)]


def test_unknown_profile_names_the_defined_ones(write_providers):
    write_providers({"profiles": {"b": {"model": "openai/b"}, "a": {"model": "openai/a"}}})
    with pytest.raises(ProviderNotConfigured, match=r'"default" is not defined .*defined: a, b'):
        resolve_profile("default")
    assert [p.name for p in list_profiles()] == ["a", "b"]


def test_scripted_profile_is_recognised(write_providers):
    write_providers({"profiles": {"offline": {"model": "scripted/demo.yaml"}}})
    profile = resolve_profile("offline")
    assert profile.is_scripted and profile.completion_kwargs() == {"model": "scripted/demo.yaml"}


def test_a_file_that_is_not_yaml_is_a_clear_error(write_providers):
    write_providers("profiles: [\n")
    with pytest.raises(ProviderNotConfigured) as err:
        load_providers()
    assert "providers.yaml is invalid" in err.value.message
    assert providers_configured() is False
    assert provider_secret_values() == []
    assert provider_problems() == [err.value.message]


@pytest.mark.parametrize(
    ("profile", "reason"),
    [
        ({"model": "x", "colour": "red"}, 'unknown key "colour" (known keys: model, api_key,'),
        ({"model": ""}, "model: String should have at least 1 character"),
        ({"api_key_env": "X"}, 'missing "model"'),
        ({"model": "x", "fallbacks": ["nowhere"]}, 'names fallback "nowhere", which is not'),
    ],
)
def test_a_broken_profile_is_named_with_its_key_and_spares_the_others(
    write_providers, profile, reason
):
    write_providers({"profiles": {"default": profile, "fast": {"model": "openai/fast"}}})
    with pytest.raises(ProviderNotConfigured) as err:
        resolve_profile("default")
    assert 'provider profile "default"' in err.value.message and reason in err.value.message
    assert resolve_profile("fast").model == "openai/fast"
    [problem] = provider_problems()
    assert problem.startswith('providers.yaml: profile "default": ') and reason in problem


def test_an_unknown_top_level_key_is_reported_and_the_profiles_still_work(write_providers):
    write_providers({"profile": {"x": {}}, "profiles": {"default": {"model": "openai/x"}}})
    assert providers_configured() is True
    assert provider_problems() == [
        'providers.yaml: unknown key "profile" (known keys: profiles, embedding)'
    ]


def test_an_edited_file_is_read_again(write_providers):
    write_providers({"profiles": {"default": {"model": "openai/one"}}})
    assert resolve_profile().model == "openai/one"
    write_providers({"profiles": {"default": {"model": "openai/two"}}})
    assert resolve_profile().model == "openai/two"


def test_embedding_key_is_a_known_secret(write_providers):
    write_providers(
        {
            "profiles": {"default": {"model": "openai/x", "api_key": KEY}},
            "embedding": {"model": "openai/text-embedding-3-small", "api_key": "emb-key-7654321"},
        }
    )
    assert sorted(provider_secret_values()) == sorted([KEY, "emb-key-7654321"])


BROKEN_FILES = {
    "yaml error": ("profiles: [\n", ["providers.yaml is invalid"]),
    "unknown key": (
        {"profiles": {"default": {"model": "openai/x", "modle": "y"}}},
        ['profile "default"', 'unknown key "modle"'],
    ),
    "no model": ({"profiles": {"default": {"api_key_env": "X"}}}, ['profile "default"', "model"]),
    "unset key variable": (
        {"profiles": {"default": {"model": "openai/x", "api_key_env": "ZZ_UNSET_KEY"}}},
        ['profile "default"', "$ZZ_UNSET_KEY", "not set"],
    ),
    "no profiles": ({"profiles": {}}, ["defines no usable profile"]),
}


@pytest.mark.parametrize("case", list(BROKEN_FILES))
def test_a_broken_providers_file_gives_its_real_reason_not_not_configured(
    write_providers, monkeypatch, case
):
    monkeypatch.delenv("ZZ_UNSET_KEY", raising=False)
    data, fragments = BROKEN_FILES[case]
    write_providers(data)
    problem = provider_problem("default")
    assert "No LLM provider is configured" not in problem
    assert "providers.yaml" in problem
    for fragment in fragments:
        assert fragment in problem
    assert providers_configured() is False
    # The health check, `status` and the admin list it too, by file, profile and key.
    listed = " ".join(provider_problems())
    assert "providers.yaml" in listed
    for fragment in fragments if case != "no profiles" else ['no "default" profile']:
        assert fragment in listed


def test_an_unset_key_variable_is_listed_without_any_value(write_providers, monkeypatch):
    monkeypatch.delenv("ZZ_UNSET_KEY", raising=False)
    write_providers(
        {
            "profiles": {
                "default": {"model": "openai/x", "api_key": KEY},
                "fast": {"model": "openai/y", "api_key_env": "ZZ_UNSET_KEY"},
            }
        }
    )
    assert provider_problem("default") == ""
    [problem] = provider_problems()
    assert problem.startswith('providers.yaml: profile "fast": api_key_env names $ZZ_UNSET_KEY')
    assert KEY not in problem


def test_a_file_without_a_default_profile_says_so(write_providers):
    write_providers({"profiles": {"fast": {"model": "openai/y"}}})
    assert provider_problems() == ['providers.yaml: no "default" profile (defined: fast)']


def test_no_file_is_still_the_how_to_configure_message():
    assert "No LLM provider is configured" in provider_problem("default")
    assert provider_problems() == []
