"""`openhive status` tells the operator when memory's vector index outgrows PostgreSQL's
shared_buffers (every search then copies index pages in from outside the server's buffers)."""

from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection

from memory.selectors import VectorIndexFit, vector_index_fit

MB = 2**20
UNITS = {"kB": 2**10, "MB": 2**20, "GB": 2**30, "TB": 2**40}


def test_an_index_that_fits_in_the_buffers_is_no_problem():
    assert VectorIndexFit(index_bytes=100 * MB, buffer_bytes=128 * MB).problem() is None
    assert VectorIndexFit(index_bytes=128 * MB, buffer_bytes=128 * MB).problem() is None


def test_an_index_larger_than_the_buffers_names_both_sizes_and_the_setting_to_raise():
    problem = VectorIndexFit(index_bytes=391 * MB, buffer_bytes=128 * MB).problem()

    assert problem is not None
    assert "memory vector index (391 MB)" in problem
    assert "shared_buffers (128 MB)" in problem
    assert "set shared_buffers to at least 391 MB" in problem


@pytest.mark.django_db
def test_the_index_and_the_buffers_are_read_from_the_database_server():
    fit = vector_index_fit()

    if connection.vendor != "postgresql":
        assert fit is None  # SQLite has no such index: its vector search is an exact scan
        return
    with connection.cursor() as cursor:
        cursor.execute("SHOW shared_buffers")
        shown = cursor.fetchone()[0]  # such as "128MB"
    number, unit = int(shown.rstrip("kMGTB")), shown.lstrip("0123456789")
    assert fit is not None
    assert fit.buffer_bytes == number * UNITS[unit]
    assert fit.index_bytes >= 8192  # at least the index's metadata page


@pytest.mark.django_db
def test_status_says_nothing_of_an_index_that_fits():
    out = StringIO()
    call_command("openhive", "status", stdout=out)

    assert "shared_buffers" not in out.getvalue()


@pytest.mark.django_db
def test_status_lists_an_index_that_outgrows_the_buffers_among_the_problems(monkeypatch):
    outgrown = VectorIndexFit(index_bytes=2048 * MB, buffer_bytes=128 * MB)
    monkeypatch.setattr("openhive.cli.ops.vector_index_fit", lambda: outgrown)
    out = StringIO()

    call_command("openhive", "status", stdout=out)

    text = out.getvalue()
    assert "Configuration problems:" in text
    assert (
        "  PostgreSQL: the memory vector index (2,048 MB) is larger than PostgreSQL's "
        "shared_buffers (128 MB)"
    ) in text
