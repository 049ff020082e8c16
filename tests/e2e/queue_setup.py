"""Run inside a subprocess against the test's own database (DATABASE_URL / OPENHIVE_DATA_DIR
from the environment): `python -m tests.e2e.queue_setup populate|report ...`. The worker
tests use it to fill the queue before real worker processes start and to read the outcome."""

from __future__ import annotations

import json
import os
import sys


def _setup() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openhive.settings")
    import django

    django.setup()


def populate(teams: int, tasks: int, cap: int) -> None:
    import random

    from openhive.org.services import team_spawn
    from tasks.models import Task
    from teams.config import load_team_config, write_team_config
    from teams.services import team_ensure_main

    main = team_ensure_main()
    rng = random.Random(7)
    names = [f"team-{i:02d}" for i in range(teams)]
    for name in names:
        team = team_spawn(parent=main, name=name, scope_accepts=[name]).team
        team.tasks.all().delete()  # no bootstrap: the test is about delegated work
        team.bootstrapped = True
        team.save(update_fields=["bootstrapped"])
        config = load_team_config(name)
        config.max_concurrent_daily_ops = cap
        write_team_config(config)
    team_ids = {t.name: t.pk for t in main.children.all()}
    rows = [
        Task(team_id=team_ids[names[i % teams]], text=f"job {i}", priority=rng.randint(0, 3))
        for i in range(tasks)
    ]
    Task.objects.bulk_create(rows, batch_size=500)


def report() -> None:
    from openhive.engine.models import Session
    from tasks.models import Task

    sessions: dict[int, list] = {}
    for task_id, started, finished, reason in Session.objects.values_list(
        "task_id", "started_at", "finished_at", "stop_reason"
    ):
        sessions.setdefault(task_id, []).append(
            [started.isoformat(), finished.isoformat() if finished else None, reason]
        )
    out = [
        {
            "id": t.pk,
            "team": t.team.name,
            "priority": t.priority,
            "created_at": t.created_at.isoformat(),
            "status": t.status,
            "attempts": t.attempts,
            "started_at": t.started_at.isoformat() if t.started_at else None,
            "finished_at": t.finished_at.isoformat() if t.finished_at else None,
            "stop_reason": t.stop_reason,
            "sessions": sessions.get(t.pk, []),
        }
        for t in Task.objects.select_related("team").order_by("id")
    ]
    json.dump(out, sys.stdout)


def enqueue_one(team: str, text: str) -> None:
    from openhive.org.services import team_spawn
    from tasks.services import task_enqueue
    from teams.models import Team
    from teams.services import team_ensure_main

    main = team_ensure_main()
    target = Team.objects.filter(name=team).first()
    if target is None:
        target = team_spawn(parent=main, name=team, scope_accepts=[team]).team
        target.tasks.all().delete()
        target.bootstrapped = True
        target.save(update_fields=["bootstrapped"])
    print(task_enqueue(team=target, text=text).pk)


if __name__ == "__main__":
    _setup()
    verb, *args = sys.argv[1:]
    if verb == "populate":
        populate(*(int(a) for a in args))
    elif verb == "report":
        report()
    elif verb == "enqueue":
        enqueue_one(*args)
    else:
        raise SystemExit(f"unknown verb {verb}")
