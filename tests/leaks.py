"""Where a secret could surface, and every way it could be written there: the leak tests search
each table, file, log line and API response for each written form of the value."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import quote

from django.apps import apps
from django.core import serializers
from django.db import connection
from django.test import Client

# Values a scrubber must handle: non-ASCII, quotes, backslashes (looking like escapes), long,
# and short but still long enough to count as a secret (MIN_SECRET_LENGTH is 8).
TRICKY_SECRETS = {
    "unicode": "pässwörd-Ωμέγα-密码-42",
    "quotes": 'tok"en\'with"quo"tes-9',
    "backslashes": "C:\\vault\\key\\n0\\t-77\\",
    "long": ('Ω"\\x-' * 60) + "end",
    "short": 'ä"\\ß2k9Z',
}


def written_forms(secret: str) -> set[str]:
    """The value as it is written raw, in JSON (ASCII-escaped or not, once or nested), in a
    Python repr and in a URL: a search for the raw value alone misses every escaped copy."""
    forms = {secret, repr(secret)[1:-1], quote(secret), quote(secret, safe="")}
    for ensure_ascii in (True, False):
        once = json.dumps(secret, ensure_ascii=ensure_ascii)[1:-1]
        forms |= {once, json.dumps(once, ensure_ascii=ensure_ascii)[1:-1]}
    return forms


def found_in(text: str, secret: str) -> list[str]:
    return sorted(form for form in written_forms(secret) if form in text)


def every_database_value() -> dict[str, str]:
    """Every row of every model, serialised, plus the SQLite FTS index's own tables."""
    dump = {
        model._meta.label: serializers.serialize("json", model._default_manager.all())
        for model in apps.get_models()
    }
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("SELECT content FROM memory_chunk_fts")
            dump["memory_chunk_fts"] = " ".join(row[0] for row in cursor.fetchall())
    return dump


def every_file(root: Path, *, skip: Iterable[Path] = ()) -> dict[str, str]:
    skipped = [s.resolve() for s in skip]
    files = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and not any(path.resolve().is_relative_to(s) for s in skipped):
            files[str(path)] = path.read_bytes().decode("utf-8", errors="replace")
    return files


def every_get_response(client: Client, values: dict[str, list]) -> dict[str, tuple[int, str]]:
    """GET every operation of the OpenAPI schema, once for each combination of the given
    values of its required parameters (path and query)."""
    from openhive.api import api

    answers = {}
    for path, operations in api.get_openapi_schema()["paths"].items():
        if "get" not in operations:
            continue
        params = [p for p in operations["get"].get("parameters", []) if p.get("required")]
        names = [p["name"] for p in params]
        for combo in itertools.product(*(values.get(name, ["x"]) for name in names)):
            url, query = path, {}
            for param, value in zip(params, combo, strict=True):
                if param["in"] == "path":
                    url = url.replace("{" + param["name"] + "}", quote(str(value), safe=""))
                else:
                    query[param["name"]] = value
            response = client.get(url, query)
            answers[response.request["PATH_INFO"] + "?" + response.request["QUERY_STRING"]] = (
                response.status_code,
                response.content.decode(),
            )
    return answers
