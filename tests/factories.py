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
