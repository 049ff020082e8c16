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
    """An operator's API token: a staff user's (a token carries its user's rights)."""
    UserFactory(username="operator", is_staff=True)
    _, token = api_token_create(username="operator", name="tests")
    return token


@pytest.fixture
def chat_user_token(db) -> str:
    """The token of an ordinary (non-staff) user: it may chat and read its own topics."""
    UserFactory(username="chatter")
    _, token = api_token_create(username="chatter", name="tests")
    return token


@pytest.fixture
def api_client(api_token: str) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {api_token}")
