"""litellm's success logging runs only when somebody listens: with no callback configured a
finished call is not handed to its background handler (which competed with sessions for the
GIL); a configured callback still hears of every call."""

from __future__ import annotations

import functools
import threading

import pytest

from openhive.engine import llm
from openhive.engine.providers import ProviderProfile


@pytest.fixture
def profile(scripted_provider) -> ProviderProfile:
    scripted_provider([{"when": {}, "reply": {"content": "hello"}}])
    return ProviderProfile(name="default", model="scripted/default.yaml")


def test_no_callback_means_no_background_success_logging(profile, monkeypatch):
    litellm = llm.get_litellm()
    handled = threading.Event()
    original = litellm.litellm_core_utils.litellm_logging.Logging.success_handler

    @functools.wraps(original)
    def spy(self, *args, **kwargs):
        handled.set()
        return original(self, *args, **kwargs)

    monkeypatch.setattr(litellm.litellm_core_utils.litellm_logging.Logging, "success_handler", spy)
    reply = llm.complete(profile, [{"role": "user", "content": "hi"}], [], team="ops")
    assert reply.message["content"] == "hello"
    assert not handled.wait(0.5)


def test_a_configured_callback_still_hears_of_each_call(profile, monkeypatch):
    litellm = llm.get_litellm()
    from litellm.integrations.custom_logger import CustomLogger

    heard = threading.Event()

    class Listener(CustomLogger):
        def log_success_event(self, kwargs, response_obj, start_time, end_time):
            heard.set()

    monkeypatch.setattr(litellm, "callbacks", [Listener()])
    llm.complete(profile, [{"role": "user", "content": "hi"}], [], team="ops")
    assert heard.wait(5)
