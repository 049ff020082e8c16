from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from openhive.core import scrubbing


@pytest.fixture(autouse=True)
def openhive_dirs(tmp_path: Path, settings) -> Path:
    """Every test gets its own data and run directories."""
    settings.DATA_DIR = tmp_path / "data"
    settings.RUN_DIR = tmp_path / "run"
    # In-process sockets talk to the test database, which a chat turn host could not see.
    settings.OPENHIVE = {**settings.OPENHIVE, "CHAT_TURNS": "threads"}
    # A fan-out's threads end with it, closing their connections (the test database is dropped
    # at the end, which an open connection would stop).
    settings.OPENHIVE["QUERY_THREAD_IDLE_SECONDS"] = 0
    (tmp_path / "data" / "config").mkdir(parents=True)
    scrubbing.invalidate()
    yield tmp_path
    scrubbing.invalidate()


@pytest.fixture
def main_team(db):
    from teams.services import team_ensure_main

    return team_ensure_main()


@pytest.fixture
def scripted_provider(openhive_dirs: Path) -> Callable[[list[dict]], Path]:
    """Configure the `default` profile to a scripted provider with the given rules."""

    def configure(rules: list[dict], profile: str = "default") -> Path:
        scripts = openhive_dirs / "data" / "scripts"
        scripts.mkdir(parents=True, exist_ok=True)
        script = scripts / f"{profile}.yaml"
        script.write_text(yaml.safe_dump({"rules": rules}))
        providers = openhive_dirs / "data" / "config" / "providers.yaml"
        existing = yaml.safe_load(providers.read_text()) if providers.exists() else None
        data = existing or {"profiles": {}}
        data["profiles"][profile] = {"model": f"scripted/{script.name}"}
        providers.write_text(yaml.safe_dump(data))
        return script

    return configure


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix, tmp_path_factory):
    """On SQLite, test in a database file, as production does: in WAL mode with a busy timeout
    a second writer (a chat turn of another topic, a worker) waits its turn. The default
    in-memory test database uses a shared cache that fails at once with "table is locked"."""
    from django.conf import settings

    database = settings.DATABASES["default"]
    if database["ENGINE"].endswith("sqlite3"):
        test = database.setdefault("TEST", {})
        if not test.get("NAME"):
            test["NAME"] = str(tmp_path_factory.mktemp("sqlite") / "test.sqlite3")


@pytest.fixture
def vault_key(settings):
    """A vault key of this test's own, so ciphertext checks never depend on SECRET_KEY."""
    from cryptography.fernet import Fernet

    from vault import crypto

    settings.VAULT_KEYS = [Fernet.generate_key().decode()]
    crypto.reset_keys()
    yield settings.VAULT_KEYS[0]
    crypto.reset_keys()


@pytest.fixture
def scrubbed_caplog(caplog):
    """caplog as production logs: the secret scrub filter on the handler, everything captured."""
    import logging

    from openhive.core.scrubbing import ScrubSecretsFilter

    scrub_filter = ScrubSecretsFilter()
    caplog.handler.addFilter(scrub_filter)
    caplog.set_level(logging.DEBUG)
    yield caplog
    caplog.handler.removeFilter(scrub_filter)


@pytest.fixture
def system_check():
    """Register a system check under `tag` that reports `messages`; removed afterwards."""
    from django.core import checks

    made = []

    def register(tag: str, *messages) -> None:
        def reported(app_configs=None, **kwargs):
            return list(messages)

        checks.register(reported, tag)
        made.append(reported)

    yield register
    for check in made:
        checks.registry.registry.registered_checks.discard(check)


@pytest.fixture
def collections_unpaused():
    """No collection pause left over from an earlier test (a chat burst's lasts up to a
    second), and automatic collection on, before and after the test."""
    import gc

    from openhive.core import heap

    def reset() -> None:
        for pause in list(heap._pauses):
            pause.end()
        gc.enable()

    reset()
    yield
    reset()
