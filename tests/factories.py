import factory

from tasks.models import Task
from teams.models import Team


class TeamFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Team
        django_get_or_create = ("name",)

    name = factory.Sequence(lambda n: f"team-{n}")
    description = factory.Faker("sentence")
    parent = factory.LazyFunction(lambda: Team.objects.get_or_create(name="main")[0])


class TaskFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Task

    team = factory.SubFactory(TeamFactory)
    text = factory.Faker("sentence")


def claim(*, task_id: int, worker: str, now=None) -> Task | None:
    """Claim exactly this task as a worker does, through the real claim path (the team's cap
    and its org-op mutex apply). `now`, when given, is the claim's clock."""
    import time_machine

    from tasks.services import task_claim_next

    row = Task.objects.filter(pk=task_id).values("team_id", "team__name").first()
    if row is None:
        return None

    def run() -> Task | None:
        return task_claim_next(
            team_id=row["team_id"], team_name=row["team__name"], worker=worker, task_id=task_id
        )

    if now is None:
        return run()
    with time_machine.travel(now, tick=False):
        return run()


def set_cap(name: str, cap: int) -> None:
    """The team's cap of daily operations running at once, written into its config.yaml."""
    from openhive.core import paths

    config = paths.team_dir(name) / "config.yaml"
    text = config.read_text()
    current = next(line for line in text.splitlines() if "max_concurrent_daily_ops" in line)
    config.write_text(text.replace(current, f"max_concurrent_daily_ops: {cap}"))
