"""What a start checks and skips: the URL configuration's system checks run in the web process
as it starts (not before every verb), and serve migrates only a database that is behind."""

from __future__ import annotations

import logging
from unittest import mock

import pytest
from django.core import checks
from django.core.management.base import SystemCheckError

from openhive.cli import serve
from openhive.core.urlchecks import check_url_configuration


def test_the_web_process_start_passes_a_sound_url_configuration():
    check_url_configuration()


def test_an_error_in_the_url_configuration_stops_the_web_process_start(system_check):
    system_check(checks.Tags.urls, checks.Error("a pattern points nowhere", id="test.E001"))
    with pytest.raises(SystemCheckError, match="a pattern points nowhere"):
        check_url_configuration()


def test_a_warning_is_logged_and_a_silenced_check_left_out(system_check, settings, caplog):
    settings.SILENCED_SYSTEM_CHECKS = ["test.E002"]
    system_check(
        checks.Tags.urls,
        checks.Warning("a pattern looks odd", id="test.W001"),
        checks.Error("silenced on purpose", id="test.E002"),
    )
    with caplog.at_level(logging.WARNING, logger="openhive.core.urlchecks"):
        check_url_configuration()
    assert "a pattern looks odd" in caplog.text
    assert "silenced on purpose" not in caplog.text


@pytest.mark.django_db
def test_serve_does_not_run_migrate_on_a_database_that_is_up_to_date():
    with mock.patch.object(serve, "call_command") as call:
        serve.migrate_if_behind()
    call.assert_not_called()


@pytest.mark.django_db
def test_serve_migrates_a_database_a_migration_behind():
    with (
        mock.patch.object(serve.MigrationExecutor, "migration_plan", return_value=[("x", False)]),
        mock.patch.object(serve, "call_command") as call,
    ):
        serve.migrate_if_behind()
    call.assert_called_once_with("migrate", interactive=False, verbosity=0)
