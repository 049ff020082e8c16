"""The scripted provider learns which team calls it beside the litellm call, not through
litellm's `metadata` (which litellm copies and logs on every call, for every provider)."""

from __future__ import annotations

import pytest


def user(text: str) -> dict:
    return {"role": "user", "content": text}


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
def test_team_key_reaches_the_script_without_litellm_metadata(scripted_provider, streamed):
    """The team travels beside the litellm call, so a call carries no metadata of ours for
    litellm to copy and log; a streamed reply (read after the call returns) still sees it."""
    from openhive.engine import llm
    from openhive.engine.providers import ProviderProfile

    script = scripted_provider(
        [
            {"when": {"team": "ops"}, "reply": {"content": "ops speaking"}},
            {"when": {}, "reply": {"content": "someone else"}},
        ]
    )
    profile = ProviderProfile(name="default", model=f"scripted/{script.name}")
    seen: list[dict] = []
    litellm = llm.get_litellm()
    original = litellm.completion

    def spy(**kwargs):
        seen.append(kwargs)
        return original(**kwargs)

    deltas: list[str] = []
    litellm.completion = spy
    try:
        reply = llm.complete(
            profile,
            [user("hi")],
            [],
            team="ops",
            on_delta=deltas.append if streamed else None,
        )
        other = llm.complete(profile, [user("hi")], [], team="main")
    finally:
        litellm.completion = original
    assert reply.message["content"] == "ops speaking"
    assert other.message["content"] == "someone else"
    assert ("".join(deltas) == "ops speaking") if streamed else deltas == []
    assert [call.get("metadata") for call in seen] == [None, None]
