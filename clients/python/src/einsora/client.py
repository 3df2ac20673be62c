"""The hand-written layer: `Client` and its resources (workloads, endpoints, tokens, usage)."""

import json
import os
import time
from datetime import datetime, timedelta, timezone
from typing import Any, Dict, Iterator, List, Optional, Union

from ._generated import API_VERSION, VERSION
from ._generated.models import (
    AccessGrant,
    ApiToken,
    Catalog,
    CreateTokenResponse,
    LogLine,
    Me,
    Status,
    UsageRecord,
    UsageReportRow,
    Workload,
    WorkloadEvent,
    WorkloadExport,
)
from ._generated.operations import Operations
from ._transport import Credentials, Transport, split_cookie
from .errors import APIConnectionError, Unavailable, WaitTimeout, WorkloadFailed

Time = Union[datetime, str]

#: States a workload doesn't leave by itself toward another: `wait_for` gives up at them.
_ENDS = {"failed", "deleted"}


def _default_server() -> str:
    """As the CLI: EINSORA_SERVER, else the local Solo at EINSORA_HTTP_ADDR (127.0.0.1:8080)."""
    server = os.environ.get("EINSORA_SERVER")
    if server:
        return server
    return "http://" + (os.environ.get("EINSORA_HTTP_ADDR") or "127.0.0.1:8080")


class Client:
    """A client of one Einsora installation's API (/v1).

        client = einsora.Client("http://127.0.0.1:8080", token="tsk_…")
        nb = client.workloads.create(kind="notebook", name="nb", gpu_class="cpu-1c-2g",
                                     image="jupyterlab")
        client.workloads.wait_for(nb.id, "running")
        print(client.workloads.open(nb.id).notebook.link)

    `base_url` defaults to EINSORA_SERVER, else http://<EINSORA_HTTP_ADDR or 127.0.0.1:8080>
    (as the CLI's); `token` (an API token, `tsk_…`) to EINSORA_TOKEN. `Client.login` signs in
    with an email and password instead (a session: what an API token may not do, creating
    tokens, needs one). Refusals raise `einsora.errors` exceptions carrying the request ID.
    Reads, deletes and rate-limited requests are retried `max_retries` times, after the
    `Retry-After` the API gives or a short backoff.

    `client.api` has every operation of the API as generated from its OpenAPI document.
    """

    def __init__(
        self,
        base_url: Optional[str] = None,
        *,
        token: Optional[str] = None,
        timeout: float = 60.0,
        max_retries: int = 2,
        _credentials: Optional[Credentials] = None,
    ) -> None:
        if _credentials is None:
            token = token if token is not None else os.environ.get("EINSORA_TOKEN") or None
            _credentials = Credentials(token=token)
        self._transport = Transport(
            base_url or _default_server(),
            _credentials,
            timeout=timeout,
            max_retries=max_retries,
            user_agent=f"einsora-python/{VERSION}",
        )
        self.api = Operations(self._transport)
        self.workloads = Workloads(self)
        self.endpoints = Endpoints(self)
        self.tokens = Tokens(self)
        self.usage = Usage(self)

    @classmethod
    def login(
        cls,
        base_url: Optional[str] = None,
        *,
        email: str,
        password: str,
        timeout: float = 60.0,
        max_retries: int = 2,
    ) -> "Client":
        """A client signed in with a session (`POST /v1/sessions`, as the CLI's `login`).
        Over plain HTTP the API allows it from loopback addresses only."""
        anonymous = cls(base_url, timeout=timeout, max_retries=max_retries, _credentials=Credentials())
        body = {"email": email, "password": password, "client": "cli"}
        response = anonymous._transport.send("POST", "/v1/sessions", body=body)
        session = split_cookie(response.headers, "einsora_session")
        csrf = json.loads(response.body.decode("utf-8")).get("csrf_token")
        if not session or not csrf:
            raise APIConnectionError("the answer to the sign-in held no session")
        credentials = Credentials(session=session, csrf_token=csrf)
        return cls(
            anonymous.base_url, timeout=timeout, max_retries=max_retries, _credentials=credentials
        )

    def logout(self) -> None:
        """Ends this client's session (a session client only)."""
        self.api.logout()

    @property
    def base_url(self) -> str:
        return self._transport.base_url

    @property
    def api_version(self) -> str:
        return API_VERSION

    def me(self) -> Me:
        return self.api.get_me()

    def status(self) -> Status:
        return self.api.get_status()

    def catalog(self) -> Catalog:
        return self.api.get_catalog()

    def close(self) -> None:
        """Nothing to release (each request has its own connection); for `with`."""

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<einsora.Client {self.base_url} auth={self._transport.credentials.kind}>"


class Workloads:
    """Notebooks, endpoints and VMs: create, read, start, stop, delete, open, wait."""

    def __init__(self, client: Client) -> None:
        self._api = client.api

    def create(
        self,
        *,
        kind: str,
        name: str,
        gpu_class: str,
        image: str,
        region: Optional[str] = None,
        fallback: Optional[List[str]] = None,
        fallback_after_s: Optional[int] = None,
        notebook: Optional[Dict[str, Any]] = None,
        endpoint: Optional[Dict[str, Any]] = None,
        vm: Optional[Dict[str, Any]] = None,
    ) -> Workload:
        """Launches a workload (`POST /v1/workloads`): the API records it and answers at once
        with its state (`pending`); `wait_for` waits for it to run. A notebook's or VM's own
        parameters default to none; an endpoint needs `endpoint={"model": …}`."""
        if kind == "notebook" and notebook is None:
            notebook = {}
        if kind == "vm" and vm is None:
            vm = {}
        return self._api.create_workload(
            kind=kind,  # type: ignore[arg-type]
            name=name,
            gpu_class=gpu_class,
            image=image,
            region=region,
            fallback=fallback,
            fallback_after_s=fallback_after_s,
            notebook=notebook,
            endpoint=endpoint,
            vm=vm,
        )

    def get(self, workload_id: str, *, include_deleted: bool = False) -> Workload:
        return self._api.get_workload(workload_id, include_deleted=include_deleted or None)

    def list(self, *, include_deleted: bool = False, page_size: Optional[int] = None) -> Iterator[Workload]:
        """Every workload of the tenant, page after page as the iteration goes."""
        token: Optional[str] = None
        while True:
            page = self._api.list_workloads(
                include_deleted=include_deleted or None, page_size=page_size, page_token=token
            )
            yield from page.workloads
            token = page.next_page_token or None
            if not token:
                return

    def start(self, workload_id: str) -> Workload:
        return self._api.start_workload(workload_id)

    def stop(self, workload_id: str) -> Workload:
        return self._api.stop_workload(workload_id)

    def delete(self, workload_id: str) -> Workload:
        return self._api.delete_workload(workload_id)

    def open(self, workload_id: str) -> AccessGrant:
        """Access to a running workload (`POST /v1/workloads/{id}/access`): a notebook's
        one-time link (`.notebook.link`, a secret, valid briefly), an endpoint's base URL
        (`.endpoint.base_url`, for API tokens)."""
        return self._api.open_workload(workload_id)

    def events(self, workload_id: str) -> List[WorkloadEvent]:
        """The workload's timeline, oldest first."""
        return self._api.list_workload_events(workload_id).events

    def export(self, workload_id: str) -> WorkloadExport:
        return self._api.export_workload(workload_id)

    def logs(
        self,
        workload_id: str,
        *,
        follow: bool = False,
        tail: Optional[int] = None,
        since: Optional[Time] = None,
    ) -> Iterator[LogLine]:
        """What the workload printed. With `follow`, new lines as they come until the workload
        has stopped; a broken stream, or `unavailable`, is followed again from the last line
        read, so nothing is lost or repeated."""
        if not follow:
            after: Optional[int] = None
            while True:
                page = self._api.list_workload_logs(
                    workload_id, after=after, tail=tail if after is None else None, since=since
                )
                yield from page.lines
                if not page.lines or tail is not None:
                    return
                after = page.next_after
        after = None
        retries = 0
        while True:
            try:
                for page in self._api.follow_workload_logs(
                    workload_id, after=after, tail=tail if after is None else None,
                    since=since if after is None else None,
                ):
                    retries = 0
                    yield from page.lines
                    after = page.next_after or after
                return
            except (APIConnectionError, Unavailable) as error:
                retries += 1
                if retries > 5:
                    raise
                time.sleep(getattr(error, "retry_after", None) or min(2.0**retries / 4, 5.0))

    def wait_for(
        self,
        workload_id: str,
        state: str = "running",
        *,
        timeout: float = 600.0,
        poll_interval: float = 1.0,
    ) -> Workload:
        """Polls until the workload is in `state`; its last read. Raises `WorkloadFailed` if it
        settles elsewhere first (failed, deleted, or stopped when waiting for running) and
        `WaitTimeout` after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            workload = self._api.get_workload(workload_id, include_deleted=True)
            if workload.state == state:
                return workload
            if workload.state in _ENDS or (workload.state == "stopped" and state == "running"):
                raise WorkloadFailed(
                    f"workload {workload_id} is {workload.state}, not {state}"
                    + (f": {workload.state_reason}" if workload.state_reason else ""),
                    workload,
                )
            if time.monotonic() >= deadline:
                raise WaitTimeout(
                    f"workload {workload_id} is still {workload.state} after {timeout} s, "
                    f"not {state}",
                    workload,
                )
            time.sleep(poll_interval)


class Endpoints:
    """OpenAI-compatible model endpoints: workloads of kind `endpoint`, served by the access
    proxy at `<EINSORA_ACCESS_URL>/e/<id>/v1` to API tokens."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def create(
        self,
        *,
        name: str,
        model: str,
        gpu_class: str,
        image: str = "openai-endpoint",
        region: Optional[str] = None,
        fallback: Optional[List[str]] = None,
        fallback_after_s: Optional[int] = None,
    ) -> Workload:
        """Launches an endpoint serving `model` (a file in the machine's models directory)."""
        return self._client.workloads.create(
            kind="endpoint",
            name=name,
            gpu_class=gpu_class,
            image=image,
            region=region,
            fallback=fallback,
            fallback_after_s=fallback_after_s,
            endpoint={"model": model},
        )

    def list(self, *, include_deleted: bool = False) -> Iterator[Workload]:
        return (
            w for w in self._client.workloads.list(include_deleted=include_deleted)
            if w.kind == "endpoint"
        )

    def base_url(self, endpoint_id: str) -> str:
        """The endpoint's OpenAI-compatible base URL (`…/e/<id>/v1`)."""
        grant = self._client.workloads.open(endpoint_id)
        if grant.endpoint is None:
            raise ValueError(f"workload {endpoint_id} is not an endpoint")
        return grant.endpoint.base_url

    def openai_kwargs(self, endpoint_id: str) -> Dict[str, str]:
        """`base_url` and `api_key` for the OpenAI SDK: `OpenAI(**client.endpoints.openai_kwargs(id))`.
        The key is this client's API token (a secret); a session client has none to give."""
        token = self._client._transport.credentials._token
        if not token:
            raise ValueError("endpoints take API tokens: make the client with token=…")
        return {"base_url": self.base_url(endpoint_id), "api_key": token}


class Tokens:
    """The caller's API tokens. Creating one needs a session (`Client.login`): an API token
    can't make more (`PermissionDenied`)."""

    def __init__(self, client: Client) -> None:
        self._api = client.api

    def list(self) -> List[ApiToken]:
        return self._api.list_tokens().tokens

    def create(self, name: str, *, expires_at: Optional[Time] = None) -> CreateTokenResponse:
        """A new token: `.token` (the secret, shown this once) and `.api_token` (what lists
        show)."""
        return self._api.create_token(name=name, expires_at=expires_at)

    def revoke(self, token_id: str) -> ApiToken:
        return self._api.revoke_token(token_id)


class Usage:
    """Hourly usage records (seconds and units per workload and hour), and reports that sum
    them by user, team or class; never money."""

    def __init__(self, client: Client) -> None:
        self._api = client.api

    def list(
        self,
        start: Time,
        end: Optional[Time] = None,
        *,
        page_size: Optional[int] = None,
    ) -> Iterator[UsageRecord]:
        """The records of hours from `start` to `end` (the API's `from` and `to`; `end`
        defaults to now), page after page as the iteration goes."""
        end = end if end is not None else datetime.now(timezone.utc)
        token: Optional[str] = None
        while True:
            page = self._api.list_usage(from_=start, to=end, page_size=page_size, page_token=token)
            yield from page.records
            token = page.next_page_token or None
            if not token:
                return

    def last(self, hours: float = 24.0) -> List[UsageRecord]:
        """The records of the last `hours` hours."""
        end = datetime.now(timezone.utc)
        return list(self.list(end - timedelta(hours=hours), end))

    def report(self, start: Time, end: Optional[Time] = None, *, by: str) -> List[UsageReportRow]:
        """The records of hours from `start` to `end` (`end` defaults to now) summed by `by`:
        "user" or "team" (a row per user or team and placed class) or "class"; each row's
        `unit_hours` is a decimal string, `unit_seconds` the exact figure. Never money."""
        end = end if end is not None else datetime.now(timezone.utc)
        return list(self._api.get_usage_report(from_=start, to=end, by=by).rows)
