"""Domain errors raised by services; every door (tool, API, command) turns them into a clear
message for its audience instead of a stack trace."""


class DomainError(Exception):
    """A refused operation. `code` is stable for machines, the message is for people."""

    code = "invalid"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        if code:
            self.code = code

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else self.code


class NotFound(DomainError):
    code = "not_found"


class Conflict(DomainError):
    code = "conflict"


class NotAllowed(DomainError):
    code = "not_allowed"


class ProviderNotConfigured(DomainError):
    code = "provider_not_configured"
