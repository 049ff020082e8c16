"""Schema-driven fuzzing of the live API: schemathesis reads /api/v1/openapi.json from the app
served on loopback and sends generated requests (valid and invalid) to every operation, on
whichever database the suite runs. No answer may be a server error, and every status must be
one the schema documents for that operation. Bounded: a fixed number of examples per
operation, no shrinking beyond what hypothesis does within its deadline."""

from __future__ import annotations

import contextlib

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.api.factories import TriggerConfigFactory, UserFactory
from tests.factories import TaskFactory, TeamFactory
from trust.services import api_token_create

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.fuzz]

EXAMPLES_PER_OPERATION = 30
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


@pytest.fixture
def operator_headers(settings, main_team) -> dict[str, str]:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    # Something for the generated requests to find besides 404s.
    ops = TeamFactory(name="ops", parent=main_team)
    TaskFactory(team=ops)
    TriggerConfigFactory(team=ops, name="daily")
    UserFactory(username="fuzzer", is_staff=True)
    return {"Authorization": f"Bearer {api_token_create(username='fuzzer')[1]}"}


@pytest.fixture
def live_api(live_server, operator_headers):
    return schemathesis.openapi.from_url(
        f"{live_server.url}/api/v1/openapi.json", headers=operator_headers, timeout=30
    )


def fuzz_operation(operation, mode: GenerationMode, base_url: str, headers: dict) -> list[str]:
    """Send EXAMPLES_PER_OPERATION generated requests; the failures found, one line each."""
    failures: list[str] = []

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=EXAMPLES_PER_OPERATION,
        deadline=None,
        derandomize=True,  # the same requests on every run: a failure reproduces
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
        database=None,
    )
    def run(case) -> None:
        try:
            case.call_and_validate(base_url=base_url, headers=headers, checks=CHECKS, timeout=30)
        except (Exception, FailureGroup) as exc:  # the checks' failures, or the request's own
            lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
            failures.append(f"{mode.value} {operation.label}: {' | '.join(lines[:8])}")

    with contextlib.suppress(Unsatisfiable):  # nothing to make invalid: nothing to send
        run()
    return failures


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_every_operation_answers_within_its_schema(live_api, live_server, operator_headers, mode):
    failures: list[str] = []
    operations = [result.ok() for result in live_api.get_all_operations()]
    assert len(operations) >= 37
    for operation in operations:
        failures += fuzz_operation(operation, mode, live_server.url, operator_headers)
    assert failures == [], "\n".join(sorted(set(failures)))
