"""HTTP to the API with the standard library: credentials, JSON, retries, errors."""

import json
import random
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Callable, Dict, Iterator, Mapping, Optional

from . import _wire
from .errors import APIConnectionError, APIError, APITimeoutError, error_for

# Refusals that are safe to send again whatever the method: the API refused before doing
# anything. Anything else is retried only for reads and deletes (idempotent), and for a POST
# that carries an Idempotency-Key (the API does it once, however often it is sent).
_RETRY_ANY_METHOD = {429}
_RETRY_IDEMPOTENT = {502, 503, 504}
_IDEMPOTENT = {"GET", "HEAD", "DELETE"}
_IDEMPOTENCY_KEY = "Idempotency-Key"
_MAX_BACKOFF = 8.0
_MAX_RETRY_AFTER = 60.0


class Credentials:
    """What requests carry: an API token, or a session (cookie and CSRF token). Secret: never
    printed."""

    def __init__(
        self,
        token: Optional[str] = None,
        session: Optional[str] = None,
        csrf_token: Optional[str] = None,
    ) -> None:
        self._token = token
        self._session = session
        self._csrf = csrf_token

    @property
    def kind(self) -> str:
        if self._token:
            return "token"
        if self._session:
            return "session"
        return "none"

    def headers(self, method: str) -> Dict[str, str]:
        if self._token:
            return {"Authorization": f"Bearer {self._token}"}
        if self._session:
            out = {"Cookie": f"einsora_session={self._session}"}
            if method not in ("GET", "HEAD") and self._csrf:
                out["X-CSRF-Token"] = self._csrf
            return out
        return {}

    def __repr__(self) -> str:
        return f"<Credentials {self.kind}>"


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """The API never redirects; following one would send the credential elsewhere."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: D401
        return None


class Response:
    def __init__(self, status: int, headers: Mapping[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    @property
    def request_id(self) -> Optional[str]:
        return _header(self.headers, "X-Request-ID")


def _header(headers: Mapping[str, str], name: str) -> Optional[str]:
    for key, value in headers.items():
        if key.lower() == name.lower():
            return value
    return None


class Transport:
    def __init__(
        self,
        base_url: str,
        credentials: Credentials,
        *,
        timeout: float,
        max_retries: int,
        user_agent: str,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        parsed = urllib.parse.urlsplit(base_url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ValueError(f"base_url must be an http:// or https:// URL, not {base_url!r}")
        if parsed.query or parsed.fragment or parsed.username or parsed.password:
            raise ValueError("base_url takes no query, fragment or credentials")
        self.base_url = base_url.rstrip("/")
        self.credentials = credentials
        self.timeout = timeout
        self.max_retries = max_retries
        self.user_agent = user_agent
        self._sleep = sleep
        self._opener = urllib.request.build_opener(_NoRedirect())

    def url(self, path: str, query: Optional[Mapping[str, Any]] = None) -> str:
        url = self.base_url + path
        pairs = [(k, _wire.query_value(v)) for k, v in (query or {}).items() if v is not None]
        if pairs:
            url += "?" + urllib.parse.urlencode(pairs)
        return url

    def call(
        self,
        method: str,
        path: str,
        *,
        query: Optional[Mapping[str, Any]] = None,
        body: Optional[Dict[str, Any]] = None,
        headers: Optional[Mapping[str, Optional[str]]] = None,
        answer: Any = None,
    ) -> Any:
        """One request, retried as the policy allows; the answer decoded as `answer` (a model
        class), or the JSON when None. The model's `_request_id` is the answer's
        X-Request-ID. Headers left None aren't sent."""
        sent = {k: v for k, v in (headers or {}).items() if v is not None}
        response = self.send(method, path, query=query, body=body, headers=sent or None)
        data = json.loads(response.body.decode("utf-8")) if response.body else {}
        if answer is None:
            return data
        value = answer.from_dict(data)
        value._request_id = response.request_id
        return value

    def send(
        self,
        method: str,
        path: str,
        *,
        query: Optional[Mapping[str, Any]] = None,
        body: Optional[Dict[str, Any]] = None,
        headers: Optional[Mapping[str, str]] = None,
    ) -> Response:
        attempt = 0
        keyed = any(k.lower() == _IDEMPOTENCY_KEY.lower() for k in (headers or {}))
        idempotent = method in _IDEMPOTENT or keyed
        while True:
            try:
                response = self._once(method, path, query, body, headers, stream=False)
                return response
            except APIError as error:
                delay = self._retry_delay(idempotent, attempt, error.status, error.retry_after)
                # The same key's first request still running: wait as told, then ask again.
                if delay is None and keyed and error.status == 409 and error.retry_after:
                    delay = self._retry_delay(True, attempt, 429, error.retry_after)
                if delay is None:
                    raise
            except APIConnectionError:
                if not idempotent or attempt >= self.max_retries:
                    raise
                delay = self._backoff(attempt)
            attempt += 1
            self._sleep(delay)

    def stream(
        self,
        method: str,
        path: str,
        *,
        query: Optional[Mapping[str, Any]] = None,
        body: Optional[Dict[str, Any]] = None,
        answer: Any = None,
    ) -> Iterator[Any]:
        """An NDJSON answer, one decoded line at a time, until the stream ends. An error before
        the first line raises as `call` does; one after it (a last line holding the envelope)
        raises its exception."""
        attempt = 0
        while True:
            try:
                raw = self._once(method, path, query, body, None, stream=True)
                break
            except APIError as error:
                delay = self._retry_delay(
                    method in _IDEMPOTENT, attempt, error.status, error.retry_after
                )
                if delay is None:
                    raise
            attempt += 1
            self._sleep(delay)
        return self._lines(raw, answer)

    def _lines(self, raw: Any, answer: Any) -> Iterator[Any]:
        request_id = _header(_headers(raw.headers), "X-Request-ID")
        try:
            for line in raw:
                line = line.strip()
                if not line:
                    continue
                data = json.loads(line.decode("utf-8"))
                if isinstance(data, dict) and isinstance(data.get("error"), dict):
                    status = _status_of(data["error"].get("code"))
                    raise error_for(status, data, {"X-Request-ID": request_id or ""})
                if answer is None:
                    yield data
                else:
                    value = answer.from_dict(data)
                    value._request_id = request_id
                    yield value
        except (OSError, ValueError) as error:
            if isinstance(error, APIError):  # pragma: no cover (APIError isn't an OSError)
                raise
            raise APIConnectionError(f"the stream broke: {error}") from None
        finally:
            raw.close()

    def _retry_delay(
        self, idempotent: bool, attempt: int, status: int, retry_after: Optional[float]
    ) -> Optional[float]:
        if attempt >= self.max_retries:
            return None
        if status in _RETRY_ANY_METHOD or (status in _RETRY_IDEMPOTENT and idempotent):
            if retry_after is not None:
                return min(retry_after, _MAX_RETRY_AFTER)
            return self._backoff(attempt)
        return None

    @staticmethod
    def _backoff(attempt: int) -> float:
        return min(_MAX_BACKOFF, 0.5 * 2**attempt) * (0.75 + random.random() / 2)

    def _once(
        self,
        method: str,
        path: str,
        query: Optional[Mapping[str, Any]],
        body: Optional[Dict[str, Any]],
        extra: Optional[Mapping[str, str]],
        *,
        stream: bool,
    ) -> Any:
        url = self.url(path, query)
        headers = {
            "Accept": "application/x-ndjson" if stream else "application/json",
            "User-Agent": self.user_agent,
        }
        data = None
        if body is not None:
            data = json.dumps(_wire.plain(body), separators=(",", ":")).encode("utf-8")
            headers["Content-Type"] = "application/json"
        headers.update(self.credentials.headers(method))
        headers.update(extra or {})
        request = urllib.request.Request(url, data=data, headers=headers, method=method)
        try:
            raw = self._opener.open(request, timeout=self.timeout)
        except urllib.error.HTTPError as error:
            with error:
                text = error.read()
            raise _refusal(error.code, _headers(error.headers), text) from None
        except (socket.timeout, TimeoutError) as error:
            raise APITimeoutError(
                f"{method} {path}: no answer within {self.timeout} s", method=method, url=url
            ) from error
        except (urllib.error.URLError, OSError) as error:
            reason = getattr(error, "reason", error)
            if isinstance(reason, (socket.timeout, TimeoutError)):
                raise APITimeoutError(
                    f"{method} {path}: no answer within {self.timeout} s", method=method, url=url
                ) from None
            raise APIConnectionError(
                f"{method} {path}: can't reach {self.base_url}: {reason}", method=method, url=url
            ) from None
        if stream:
            return raw
        with raw:
            try:
                payload = raw.read()
            except (OSError, ValueError) as error:
                raise APIConnectionError(f"{method} {path}: {error}", method=method, url=url) from None
            return Response(raw.status, _headers(raw.headers), payload)


def _refusal(status: int, headers: Dict[str, str], text: bytes) -> APIError:
    try:
        body: Any = json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        body = text.decode("utf-8", "replace")
    return error_for(status, body, headers)


_STATUS_OF = {
    "invalid_request": 400,
    "unauthenticated": 401,
    "forbidden": 403,
    "not_found": 404,
    "conflict": 409,
    "quota_exceeded": 409,
    "invalid_transition": 409,
    "last_owner": 409,
    "still_owns": 409,
    "rate_limited": 429,
    "internal": 500,
    "unavailable": 503,
}


def _status_of(code: Any) -> int:
    return _STATUS_OF.get(code, 500) if isinstance(code, str) else 500


def split_cookie(headers: Mapping[str, str], name: str) -> Optional[str]:
    """The value `Set-Cookie` gives the cookie `name`, if it does."""
    for key, value in headers.items():
        if key.lower() != "set-cookie":
            continue
        for cookie in value.split("\n"):
            first = cookie.split(";", 1)[0].strip()
            if first.startswith(name + "="):
                return first[len(name) + 1 :]
    return None


def _headers(message: Any) -> Dict[str, str]:
    """An answer's headers; a repeated one (Set-Cookie) with its values joined by newlines."""
    out: Dict[str, str] = {}
    for key, value in message.items():
        out[key] = f"{out[key]}\n{value}" if key in out else value
    return out
