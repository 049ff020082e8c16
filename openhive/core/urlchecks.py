"""Django's system checks of the URL configuration, run where the URLs are served."""

from __future__ import annotations

import logging

from django.core import checks
from django.core.management.base import SystemCheckError

logger = logging.getLogger(__name__)


def check_url_configuration() -> None:
    """Load the URL configuration and run its system checks (those tagged `urls`), as a
    command's checks would: warnings are logged, errors raise `SystemCheckError`. Checks named
    in SILENCED_SYSTEM_CHECKS are left out."""
    found = [m for m in checks.run_checks(tags=[checks.Tags.urls]) if not m.is_silenced()]
    serious = [m for m in found if m.is_serious()]
    for message in found:
        if message not in serious:
            logger.warning("system check: %s", message)
    if serious:
        raise SystemCheckError(
            "The URL configuration's system checks found errors:\n"
            + "\n".join(str(message) for message in serious)
        )
