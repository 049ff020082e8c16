from collections.abc import Callable
from pathlib import Path

import pytest
import yaml


@pytest.fixture
def trust_policy(openhive_dirs: Path) -> Callable[[dict | None], Path]:
    """Write channels.yaml with the given `trust:` section (None: a file without one)."""

    def write(section: dict | None) -> Path:
        path = openhive_dirs / "data" / "config" / "channels.yaml"
        data = {"ws": {"enabled": True}} if section is None else {"trust": section}
        path.write_text(yaml.safe_dump(data))
        return path

    return write
