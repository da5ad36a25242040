"""Every error Stapel raises on purpose, with the HTTP status the API maps it to."""

from __future__ import annotations

RETRY_AFTER_S = 5
"""What a 503 tells clients to wait before trying again."""


class StapelError(Exception):
    """Base class: a code for clients, a message for people, an HTTP status."""

    status = 400
    code = "bad_request"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code:
            self.code = code


class ValidationError(StapelError):
    status = 400
    code = "invalid_request"


class UnknownLanguagePair(StapelError):
    status = 400
    code = "unknown_language_pair"


class TooLarge(StapelError):
    status = 413
    code = "too_large"


class QuotaFull(StapelError):
    """A tenant's stored-size quota (its memories) has no room: 429, the limit named."""

    status = 429
    code = "quota_exceeded"


class Unauthorized(StapelError):
    status = 401
    code = "unauthorized"


class NotFound(StapelError):
    status = 404
    code = "not_found"


class Conflict(StapelError):
    status = 409
    code = "conflict"


class Unavailable(StapelError):
    """Not ready or not reachable now: 503 with Retry-After."""

    status = 503
    code = "unavailable"

    def __init__(
        self, message: str, *, code: str | None = None, retry_after_s: int = RETRY_AFTER_S
    ) -> None:
        super().__init__(message, code=code)
        self.headers = {"Retry-After": str(max(1, retry_after_s))}


class TooManyParses(StapelError):
    """A tenant already has its share of this process's document readers: 429, Retry-After."""

    status = 429
    code = "too_many_parses"

    def __init__(self, message: str, *, retry_after_s: int = RETRY_AFTER_S) -> None:
        super().__init__(message)
        self.headers = {"Retry-After": str(max(1, retry_after_s))}


class TranslationTimeout(StapelError):
    """A synchronous translation (the interactive lane) did not end by its deadline."""

    status = 504
    code = "translation_timeout"


class TranslationFailed(StapelError):
    """A synchronous translation's job ended failed or cancelled."""

    status = 500
    code = "translation_failed"


class ModelUnavailable(Exception):
    """This worker cannot load a pair's model (missing or broken here): not the job's fault.

    The worker hands the chunk back without charging an attempt; the job fails only when
    no worker of its pool can load the model.
    """

    def __init__(self, pair: str, reason: str) -> None:
        super().__init__(f"model {pair} unavailable on this worker: {reason}")
        self.pair = pair
        self.reason = reason
