"""litellm's success logging runs only when somebody listens: with no callback configured a
finished call, and a streamed call's chunks, are not handed to its background handler (which
competed with sessions for the GIL); a configured callback still hears of every call, once."""

from __future__ import annotations

import functools
import threading
import time

import pytest

from openhive.engine import llm
from openhive.engine.providers import ProviderProfile


@pytest.fixture
def callbacks_restored():
    """litellm copies a configured callback into its own lists of success and failure
    callbacks when a call starts; left there, every later call in the process is listened
    to. Each list is put back as it was."""
    litellm = llm.get_litellm()
    saved = {
        name: list(value)
        for name, value in vars(litellm).items()
        if name.endswith(("callback", "callbacks")) and isinstance(value, list)
    }
    yield
    for name, value in saved.items():
        getattr(litellm, name)[:] = value


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


@pytest.mark.usefixtures("callbacks_restored")
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


@pytest.fixture
def streamed_profile(scripted_provider) -> ProviderProfile:
    usage = {"prompt_tokens": 12, "completion_tokens": 5}
    scripted_provider([{"when": {}, "reply": {"content": "hello there", "usage": usage}}])
    return ProviderProfile(name="default", model="scripted/default.yaml")


def _ask(profile: ProviderProfile, text: str, deltas: list[str] | None = None) -> llm.Completion:
    """A streamed call whose request holds `text`: the handlers' calls are told apart by it
    from those of an earlier test's call that litellm's background threads still run."""
    sink = deltas.append if deltas is not None else (lambda _text: None)
    return llm.complete(profile, [{"role": "user", "content": text}], [], team="ops", on_delta=sink)


def _about(text: str, logging_obj: object) -> bool:
    return text in str(getattr(logging_obj, "messages", None))


def test_a_streamed_call_with_no_callback_hands_nothing_to_background_logging(
    streamed_profile, monkeypatch
):
    """litellm's stream ran a logging job with an asyncio loop of its own for every chunk,
    and handed the whole reply over again at its end, competing with the session."""
    litellm = llm.get_litellm()
    from litellm.litellm_core_utils.streaming_handler import CustomStreamWrapper

    text, logged = "a streamed call nobody listens to", threading.Event()
    logging_class = litellm.litellm_core_utils.litellm_logging.Logging
    success_handler = logging_class.success_handler
    chunk_job = CustomStreamWrapper.run_success_logging_and_cache_storage

    @functools.wraps(success_handler)
    def on_success(self, *args, **kwargs):
        if _about(text, self):
            logged.set()
        return success_handler(self, *args, **kwargs)

    @functools.wraps(chunk_job)
    def on_chunk(self, *args, **kwargs):
        if _about(text, self.logging_obj):
            logged.set()
        return chunk_job(self, *args, **kwargs)

    monkeypatch.setattr(logging_class, "success_handler", on_success)
    monkeypatch.setattr(CustomStreamWrapper, "run_success_logging_and_cache_storage", on_chunk)
    deltas: list[str] = []
    reply = _ask(streamed_profile, text, deltas)
    assert reply.message["content"] == "hello there" == "".join(deltas)
    assert (reply.prompt_tokens, reply.completion_tokens) == (12, 5)
    assert not logged.wait(0.5)


@pytest.mark.usefixtures("callbacks_restored")
def test_a_configured_callback_hears_of_a_streamed_call_once(streamed_profile, monkeypatch):
    litellm = llm.get_litellm()
    from litellm.integrations.custom_logger import CustomLogger

    text, heard, first = "a streamed call a callback hears", [], threading.Event()

    class Listener(CustomLogger):
        def log_success_event(self, kwargs, response_obj, start_time, end_time):
            if text in str(kwargs.get("messages")):
                heard.append(response_obj)
                first.set()

    monkeypatch.setattr(litellm, "callbacks", [Listener()])
    _ask(streamed_profile, text)
    assert first.wait(5)
    time.sleep(0.5)  # a second hand-over of the same reply would have come by now
    assert len(heard) == 1


def test_a_stream_is_read_until_litellm_hands_over_its_usage_and_no_further(
    streamed_profile, monkeypatch
):
    """Past the usage chunk litellm only assembles, copies and logs the whole reply a second
    time before it stops: the reply is assembled once at the stream's end, once by us."""
    litellm = llm.get_litellm()
    built: list[int] = []
    original = litellm.stream_chunk_builder

    def counted(*args, **kwargs):
        built.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(litellm, "stream_chunk_builder", counted)
    reply = _ask(streamed_profile, "a streamed call read to its usage")
    assert reply.completion_tokens == 5
    assert len(built) == 2
