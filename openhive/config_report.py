"""Every configuration problem in one list, for the doors that report health: the health
check, `manage.py openhive status` and the admin. Each names its file, the part and the key,
never a server path or a value."""

from __future__ import annotations

from openhive.engine.providers import provider_problems
from openhive.tools.mcpclient.servers import mcp_config_problems
from teams.config import team_config_problem
from teams.models import Team
from trust.policy import channels_problems


def config_problems() -> list[str]:
    problems = [*provider_problems(), *channels_problems()]
    names = list(Team.objects.order_by("name").values_list("name", flat=True))
    for name in names:
        problem = team_config_problem(name)
        if problem:
            problems.append(f'team "{name}": {problem}')
    return [*problems, *mcp_config_problems(names)]
