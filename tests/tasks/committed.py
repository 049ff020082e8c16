"""What another connection sees: only what is committed."""

from __future__ import annotations

import threading

from django.db import connections

from tasks.models import Task


def committed_status(task_id: int) -> str:
    """The task's status as another connection sees it."""
    seen: list[str] = []

    def read() -> None:
        try:
            seen.append(Task.objects.get(pk=task_id).status)
        finally:
            connections.close_all()

    thread = threading.Thread(target=read)
    thread.start()
    thread.join(timeout=30)
    return seen[0]
