import pytest


@pytest.fixture(autouse=True)
def fast_password_hashing(settings) -> None:
    # Real hashing costs ~0.3 s per user; these tests are about the back office, not passwords.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
