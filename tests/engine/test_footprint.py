"""What a worker keeps out of memory (issue 19): litellm's dead weight is left out or loaded when
used, and everything that reads it still gets the same answers; and what a process keeps out
of the garbage collector's full passes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from openhive.engine import compaction, llm, slim
from openhive.engine.providers import ProviderProfile

ROOT = Path(__file__).resolve().parents[2]
SCRIPTED = ProviderProfile(name="default", model="scripted/default.yaml")
GPT = ProviderProfile(name="gpt", model="gpt-4o")
TEXT = "Ünïcödé text, 数字 123 and code: def f(x): return x**2  # ok"

A_WORKER_CALL = """
import json, sys
import django
django.setup()
from openhive.engine import llm
from openhive.engine.providers import ProviderProfile
profile = ProviderProfile(name="default", model="scripted/default.yaml")
llm.complete(profile, [{"role": "user", "content": "hi"}], [], team="main")
import tiktoken.registry
seen = {
    "encodings_after_a_call": sorted(tiktoken.registry.ENCODINGS),
    "modules": sorted(m for m in ("rich", "pygments", "click", "litellm.proxy._types",
                                  "ninja", "unittest") if m in sys.modules),
    "claude_json_loaded": "claude_json_str" in vars(sys.modules["litellm.utils"]),
}
llm.count_message_tokens(profile, {"role": "user", "content": "hello"})
encoding = tiktoken.registry.ENCODINGS["cl100k_base"]
seen["ranks_after_a_count"] = type(encoding._mergeable_ranks).__name__
print(json.dumps(seen))
"""


def _in_a_fresh_process(openhive_dirs: Path, code: str) -> dict:
    """What `code` prints last (JSON), run by a new interpreter on SQLite in the test's dirs."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENHIVE_", "DATABASE_"))}
    env.update(
        OPENHIVE_DATA_DIR=str(openhive_dirs / "data"),
        OPENHIVE_RUN_DIR=str(openhive_dirs / "run"),
        DJANGO_SETTINGS_MODULE="openhive.settings",
        PYTHONPATH=str(ROOT),
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_worker_call_loads_no_tokenizer_proxy_types_or_http_cli(openhive_dirs):
    data = openhive_dirs / "data"  # its config dir made by the fixture
    (data / "scripts").mkdir()
    script = "rules:\n  - when: {}\n    reply: {content: ok}\n"
    (data / "scripts" / "default.yaml").write_text(script)
    seen = _in_a_fresh_process(openhive_dirs, A_WORKER_CALL)
    assert seen == {
        "encodings_after_a_call": [],
        "modules": [],
        "claude_json_loaded": False,
        "ranks_after_a_count": "RanksOnDemand",
    }


# A full collection in the web process walked ~390,000 long-lived objects for 280-350 ms per
# pass, and every chat ack pending meanwhile waited (openhive.core.heap).
LONG_LIVED = """
import gc, json
import openhive.asgi
from openhive.engine import llm
seen = {"web_app_walked": any(o is openhive.asgi.application for o in gc.get_objects())}
litellm = llm.get_litellm()
seen["litellm_walked"] = any(o is litellm.completion for o in gc.get_objects())
seen["frozen"] = gc.get_freeze_count()

class Node:
    pass

a, b = Node(), Node()
a.other, b.other = b, a  # a cycle made after the freeze: only a collection frees it
del a, b
seen["new_cycle_collected"] = gc.collect() >= 2
print(json.dumps(seen))
"""


def test_full_collections_skip_the_web_app_and_litellm_but_still_free_new_garbage(openhive_dirs):
    seen = _in_a_fresh_process(openhive_dirs, LONG_LIVED)
    assert seen["web_app_walked"] is False
    assert seen["litellm_walked"] is False
    assert seen["frozen"] > 100_000
    assert seen["new_cycle_collected"] is True


def test_token_counts_are_litellm_s_own():
    litellm = llm.get_litellm()
    message = {"role": "user", "content": TEXT}
    for profile in (SCRIPTED, GPT):
        expected = litellm.token_counter(model=profile.model, messages=[message])
        assert llm.count_tokens(profile, [message], []) == expected
    expected = litellm.token_counter(model=SCRIPTED.model, messages=[message])
    assert llm.count_message_tokens(SCRIPTED, message) + 3 == expected


def test_the_claude_tokenizer_json_loads_on_first_use_as_litellm_built_it():
    llm.get_litellm()
    from importlib import resources

    from litellm.utils import claude_json_str

    path = resources.files("litellm.litellm_core_utils.tokenizers").joinpath(slim.CLAUDE_JSON)
    with path.open("r", encoding="utf-8") as f:
        assert claude_json_str == json.dumps(json.load(f))


def test_a_slimmed_encoding_still_encodes_and_reloads_its_ranks_when_read():
    llm.count_message_tokens(SCRIPTED, {"role": "user", "content": "warm"})
    import tiktoken

    encoding = tiktoken.get_encoding("cl100k_base")
    slim.slim_encodings()
    assert isinstance(encoding._mergeable_ranks, slim.RanksOnDemand)
    assert encoding.decode(encoding.encode(TEXT)) == TEXT
    assert len(encoding._mergeable_ranks) == 100_256  # cl100k's ordinary tokens
    assert encoding._mergeable_ranks[b"hello"] == encoding.encode_single_token(b"hello")


def test_the_encoding_a_call_is_handed_loads_when_touched():
    llm.get_litellm()
    import tiktoken
    from litellm import main

    handed = main._get_encoding()
    assert handed.encode(TEXT) == tiktoken.get_encoding("cl100k_base").encode(TEXT)


def test_file_parts_are_still_rewritten_and_plain_requests_pass_untouched():
    llm.get_litellm()
    from litellm import main
    from litellm.litellm_core_utils.prompt_templates import common_utils

    plain = [{"role": "user", "content": "hi"}, {"role": "user", "content": [{"type": "text"}]}]
    assert main.update_messages_with_model_file_ids(plain, None, {}) is plain

    def with_file() -> list[dict]:
        part = {"type": "file", "file": {"file_id": "file-abc"}}
        return [{"role": "user", "content": [part]}]

    mapping = {"file-abc": {"m1": "provider-file-1"}}
    gated = main.update_messages_with_model_file_ids(with_file(), "m1", mapping)
    direct = common_utils.update_messages_with_model_file_ids(with_file(), "m1", mapping)
    assert gated == direct
    assert gated[0]["content"][0]["file"]["file_id"] == "provider-file-1"


def test_compaction_settles_a_short_request_by_its_bound_without_counting():
    def count(messages: list[dict]) -> int:
        raise AssertionError("a request far under the limit was tokenised")

    messages = [{"role": "user", "content": "short"}]
    done = compaction.compact(
        messages, limit=1000, count=count, summarise=lambda m: "", bound=lambda m: 100
    )
    assert done is None


def test_compaction_counts_exactly_when_the_bound_is_over_the_limit():
    counted = []

    def count(messages: list[dict]) -> int:
        counted.append(len(messages))
        return 900

    messages = [{"role": "user", "content": "x" * 5000}]
    done = compaction.compact(
        messages, limit=1000, count=count, summarise=lambda m: "", bound=lambda m: 5000
    )
    assert done is None and counted == [1]


@pytest.mark.parametrize("already", [True, False])
def test_httpx_keeps_its_cli_only_when_it_was_there_first(already, monkeypatch):
    if already:
        monkeypatch.setitem(sys.modules, "httpx", sys.modules.get("httpx") or object())
    with slim.without_httpx_cli():
        blocked = "httpx._main" in sys.modules and sys.modules["httpx._main"] is None
    assert blocked is (not already and "httpx" not in sys.modules)
    assert sys.modules.get("httpx._main", 0) is not None
