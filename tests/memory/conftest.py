from pathlib import Path

import pytest
import yaml

from tests.factories import TeamFactory


@pytest.fixture
def ops(main_team):
    return TeamFactory(name="ops", parent=main_team)


@pytest.fixture
def research(main_team):
    return TeamFactory(name="research", parent=main_team)


@pytest.fixture
def embedding_config(openhive_dirs: Path):
    """Write providers.yaml's `embedding:` section (keeps any profiles already there)."""

    def configure(section: dict | None) -> None:
        path = openhive_dirs / "data" / "config" / "providers.yaml"
        data = (yaml.safe_load(path.read_text()) if path.exists() else None) or {}
        data.setdefault("profiles", {})
        if section is None:
            data.pop("embedding", None)
        else:
            data["embedding"] = section
        path.write_text(yaml.safe_dump(data))

    return configure


@pytest.fixture
def no_embeddings(embedding_config):
    embedding_config({"model": "none"})
