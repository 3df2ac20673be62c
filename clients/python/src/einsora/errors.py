"""Errors as typed exceptions, mapped from the API's envelope (docs/api.md, "Errors").

Every refusal of the API is an `APIError` subclass chosen by the envelope's `code` (or, for an
answer without the envelope, by the HTTP status), carrying the `request_id` to quote when
reporting a problem. Nothing secret is ever part of one: no credential, no request header.
"""

from typing import Any, Dict, Mapping, Optional


class EinsoraError(Exception):
    """Every error this SDK raises."""


class APIConnectionError(EinsoraError):
    """The API didn't answer: the server is unreachable, or the connection broke."""

    def __init__(self, message: str, *, method: str = "", url: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.method = method
        self.url = url


class APITimeoutError(APIConnectionError):
    """The API didn't answer within the client's timeout."""


class APIError(EinsoraError):
    """The API answered with an error.

    Attributes: `status` (HTTP), `code` (the envelope's word: `not_found`, …), `message`,
    `request_id` (the gateway's `X-Request-ID`), `retry_after` (seconds, when the API says when
    to try again), `headers` (the answer's, cookies left out) and `body` (the parsed envelope,
    or the text when it wasn't JSON).
    """

    #: The envelope code this class stands for (None for the base classes).
    code_word: Optional[str] = None

    def __init__(
        self,
        message: str,
        *,
        status: int,
        code: str,
        request_id: Optional[str] = None,
        retry_after: Optional[float] = None,
        headers: Optional[Mapping[str, str]] = None,
        body: Any = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.request_id = request_id
        self.retry_after = retry_after
        self.headers: Dict[str, str] = {
            k: v for k, v in (headers or {}).items() if k.lower() not in _SECRET_HEADERS
        }
        self.body = body

    def __str__(self) -> str:
        text = f"{self.code}: {self.message}"
        if self.request_id:
            text += f" (request ID {self.request_id})"
        return text

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(status={self.status}, code={self.code!r}, "
            f"message={self.message!r}, request_id={self.request_id!r})"
        )

    def __reduce__(self):  # picklable, as exceptions crossing processes should be
        return (
            _rebuild,
            (type(self), self.message, self.status, self.code, self.request_id, self.retry_after),
        )


def _rebuild(cls, message, status, code, request_id, retry_after):
    return cls(message, status=status, code=code, request_id=request_id, retry_after=retry_after)


_SECRET_HEADERS = {"set-cookie", "authorization", "cookie", "x-csrf-token"}


class InvalidRequest(APIError):
    """400 `invalid_request`: the request is malformed or breaks a field's rule."""

    code_word = "invalid_request"


InvalidArgument = InvalidRequest
"""gRPC's name for InvalidRequest."""


class Unauthenticated(APIError):
    """401 `unauthenticated`: no credential, or one that doesn't work (wrong, expired, revoked)."""

    code_word = "unauthenticated"


class PermissionDenied(APIError):
    """403 `forbidden`: the caller is known and isn't allowed to do this (a token creating
    tokens, a session without its CSRF token, someone other than the owner reading activity)."""

    code_word = "forbidden"


Forbidden = PermissionDenied


class NotFound(APIError):
    """404 `not_found`: no such object for this caller (another tenant's looks the same)."""

    code_word = "not_found"


class MethodNotAllowed(APIError):
    """405 `method_not_allowed`."""

    code_word = "method_not_allowed"


class Conflict(APIError):
    """409: the request conflicts with the object's state (`conflict`), or one of the more
    precise words below. gRPC's ALREADY_EXISTS and FAILED_PRECONDITION both land here."""

    code_word = "conflict"


FailedPrecondition = Conflict


class QuotaExceeded(Conflict):
    """409 `quota_exceeded`: the tenant's quota for the class is used up."""

    code_word = "quota_exceeded"


class InvalidTransition(Conflict):
    """409 `invalid_transition`: the workload can't do that from its state."""

    code_word = "invalid_transition"


class LastOwner(Conflict):
    """409 `last_owner`: the change would leave the tenant without an enabled owner."""

    code_word = "last_owner"


class StillOwns(Conflict):
    """409 `still_owns`: the user still owns live workloads or machines."""

    code_word = "still_owns"


class TooLarge(APIError):
    """413 `too_large` (the access proxy's)."""

    code_word = "too_large"


class RateLimited(APIError):
    """429 `rate_limited`: wait `retry_after` seconds."""

    code_word = "rate_limited"


class InternalError(APIError):
    """500 `internal`: quote the request ID to the operator, whose log has the detail."""

    code_word = "internal"


class BadGateway(APIError):
    """502 `bad_gateway` (the access proxy's)."""

    code_word = "bad_gateway"


class Unavailable(APIError):
    """503 `unavailable`: a part of the installation didn't answer; wait `retry_after`."""

    code_word = "unavailable"


class GatewayTimeout(APIError):
    """504 `timeout` (the access proxy's)."""

    code_word = "timeout"


class WaitTimeout(EinsoraError, TimeoutError):
    """`wait_for` gave up: the workload didn't reach the state in time. `workload` is the last
    state read."""

    def __init__(self, message: str, workload: Any = None) -> None:
        super().__init__(message)
        self.workload = workload


class WorkloadFailed(EinsoraError):
    """`wait_for` saw the workload fail (or be deleted) instead of reaching the state wanted;
    `workload` holds it, its `state_reason` says why."""

    def __init__(self, message: str, workload: Any = None) -> None:
        super().__init__(message)
        self.workload = workload


_BY_CODE = {
    cls.code_word: cls
    for cls in (
        InvalidRequest,
        Unauthenticated,
        PermissionDenied,
        NotFound,
        MethodNotAllowed,
        Conflict,
        QuotaExceeded,
        InvalidTransition,
        LastOwner,
        StillOwns,
        TooLarge,
        RateLimited,
        InternalError,
        BadGateway,
        Unavailable,
        GatewayTimeout,
    )
}

_BY_STATUS = {
    400: InvalidRequest,
    401: Unauthenticated,
    403: PermissionDenied,
    404: NotFound,
    405: MethodNotAllowed,
    409: Conflict,
    413: TooLarge,
    429: RateLimited,
    500: InternalError,
    502: BadGateway,
    503: Unavailable,
    504: GatewayTimeout,
}


def error_for(
    status: int, body: Any, headers: Optional[Mapping[str, str]] = None
) -> APIError:
    """The exception for an error answer: by the envelope's code, else by the status."""
    headers = headers or {}
    lowered = {k.lower(): v for k, v in headers.items()}
    envelope = body.get("error") if isinstance(body, dict) else None
    if not isinstance(envelope, dict):
        envelope = {}
    code = envelope.get("code") if isinstance(envelope.get("code"), str) else None
    message = envelope.get("message") if isinstance(envelope.get("message"), str) else None
    request_id = envelope.get("request_id") or lowered.get("x-request-id")
    cls = _BY_CODE.get(code or "") or _BY_STATUS.get(status)
    if cls is None:
        cls = InternalError if status >= 500 else APIError
    if message is None:
        message = f"HTTP {status}" + (f": {body.strip()[:200]}" if isinstance(body, str) and body.strip() else "")
    return cls(
        message,
        status=status,
        code=code or cls.code_word or f"http_{status}",
        request_id=request_id if isinstance(request_id, str) else None,
        retry_after=_seconds(lowered.get("retry-after")),
        headers=headers,
        body=body,
    )


def _seconds(value: Optional[str]) -> Optional[float]:
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None  # an HTTP date: the API sends seconds only
    return seconds if seconds >= 0 else None
