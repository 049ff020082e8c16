"""Settings for the django-q2 baseline of benchmarks/queue_throughput.py: keep every Success
row (the project keeps the last 200), so the baseline's finished tasks can be counted."""

from openhive.settings import *  # noqa: F403
from openhive.settings import Q_CLUSTER

Q_CLUSTER = {**Q_CLUSTER, "save_limit": 0}
