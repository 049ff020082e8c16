import pytest
from django.test import Client

from tests.api.factories import UserFactory
from trust.services import api_token_create


@pytest.fixture(autouse=True)
def fast_password_hashing(settings) -> None:
    # Real hashing costs ~0.3 s per user; these tests are about the API, not passwords.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def api_token(db) -> str:
    """A plain API token of an ordinary (non-staff) user: tokens need no staff flag."""
    UserFactory(username="operator")
    _, token = api_token_create(username="operator", name="tests")
    return token


@pytest.fixture
def api_client(api_token: str) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {api_token}")
