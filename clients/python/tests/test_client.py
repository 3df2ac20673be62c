"""The hand-written layer against a scripted stand-in for the API: requests as the API wants
them, errors as typed exceptions with request IDs, retries, sessions, streams, waiting."""

import os
import unittest
from datetime import datetime, timezone
from unittest import mock

from _support import REQUEST_ID, FakeApi, workload

import einsora

TOKEN = "tsk_0123456789abcdefghijklmnopqrstuv"
WID = "0190c0de-0000-7000-8000-00000000abcd"


class WithFake(unittest.TestCase):
    def setUp(self):
        self.api = FakeApi()
        self.addCleanup(self.api.close)
        self.sleeps = []
        self.client = einsora.Client(self.api.url, token=TOKEN, timeout=5)
        self.client._transport._sleep = self.sleeps.append


class Requests(WithFake):
    def test_create_sends_the_body_the_api_wants_with_the_token(self):
        self.api.answer(202, workload())
        made = self.client.workloads.create(
            kind="notebook", name="nb", gpu_class="cpu-1c-2g", image="jupyterlab"
        )
        self.assertEqual(made.state, "pending")
        self.assertEqual(made._request_id, REQUEST_ID)
        sent = self.api.requests[0]
        self.assertEqual((sent.method, sent.path), ("POST", "/v1/workloads"))
        self.assertEqual(sent.headers["Authorization"], f"Bearer {TOKEN}")
        self.assertEqual(sent.headers["Content-Type"], "application/json")
        self.assertTrue(sent.headers["User-Agent"].startswith("einsora-python/"))
        # None is refused by the API: left out, never sent as null.
        self.assertEqual(
            sent.json(),
            {"kind": "notebook", "name": "nb", "gpu_class": "cpu-1c-2g", "image": "jupyterlab",
             "notebook": {}},
        )

    def test_actions_and_paths(self):
        for _ in range(4):
            self.api.answer(202, workload("stopping"))
        self.api.answer(200, {"workload_id": WID, "notebook": {"link": "http://x/?ticket=t"}})
        self.client.workloads.stop(WID)
        self.client.workloads.start(WID)
        self.client.workloads.delete(WID)
        self.client.workloads.get(WID, include_deleted=True)
        grant = self.client.workloads.open(WID)
        self.assertEqual(grant.notebook.link, "http://x/?ticket=t")
        seen = [(r.method, r.path, r.body) for r in self.api.requests]
        self.assertEqual(
            seen,
            [
                ("POST", f"/v1/workloads/{WID}/stop", b"{}"),
                ("POST", f"/v1/workloads/{WID}/start", b"{}"),
                ("DELETE", f"/v1/workloads/{WID}", b""),
                ("GET", f"/v1/workloads/{WID}?include_deleted=true", b""),
                ("POST", f"/v1/workloads/{WID}/access", b"{}"),
            ],
        )

    def test_a_path_parameter_stays_one_segment(self):
        self.api.error(404, "not_found")
        with self.assertRaises(einsora.NotFound):
            self.client.workloads.get("../tokens")
        self.assertEqual(self.api.requests[0].path, "/v1/workloads/..%2Ftokens")

    def test_usage_pages_and_times(self):
        record = {"tenant_id": "t", "workload_id": WID, "region": "local", "machine_id": "m",
                  "placed_class": "cpu-1c-2g", "seconds": 3600, "units": 1,
                  "hour_start": "2026-03-01T10:00:00Z"}
        self.api.answer(200, {"records": [record], "next_page_token": "1_" + WID})
        self.api.answer(200, {"records": [record], "next_page_token": ""})
        start = datetime(2026, 3, 1, 9, tzinfo=timezone.utc)
        end = datetime(2026, 3, 1, 12, tzinfo=timezone.utc)
        records = list(self.client.usage.list(start, end))
        self.assertEqual([r.seconds for r in records], [3600, 3600])
        self.assertEqual(
            self.api.requests[0].path,
            "/v1/usage?from=2026-03-01T09%3A00%3A00Z&to=2026-03-01T12%3A00%3A00Z",
        )
        self.assertIn(f"page_token=1_{WID}", self.api.requests[1].path)

    def test_a_usage_report_is_asked_by_period_and_grouping(self):
        row = {"group_id": "u1", "label": "you@x.y", "placed_class": "cpu-1c-2g",
               "workloads": 2, "seconds": "5400", "unit_seconds": "5400", "unit_hours": "1.5000"}
        self.api.answer(200, {"by": "user", "from": "2026-03-01T09:00:00Z",
                              "to": "2026-03-01T12:00:00Z", "rows": [row]})
        start = datetime(2026, 3, 1, 9, tzinfo=timezone.utc)
        end = datetime(2026, 3, 1, 12, tzinfo=timezone.utc)
        rows = self.client.usage.report(start, end, by="user")
        self.assertEqual([(r.label, r.seconds, r.unit_hours) for r in rows],
                         [("you@x.y", 5400, "1.5000")])
        self.assertEqual(
            self.api.requests[0].path,
            "/v1/usage/report?from=2026-03-01T09%3A00%3A00Z&to=2026-03-01T12%3A00%3A00Z&by=user",
        )

    def test_list_follows_pages(self):
        self.api.answer(200, {"workloads": [workload()], "next_page_token": WID})
        self.api.answer(200, {"workloads": [workload(kind="endpoint")], "next_page_token": ""})
        self.assertEqual(len(list(self.client.workloads.list())), 2)
        self.assertEqual(self.api.requests[1].path, f"/v1/workloads?page_token={WID}")

    def test_logs_follow_reads_ndjson_until_the_stream_ends(self):
        line = {"number": "1", "time": "2026-03-01T10:00:00Z", "stream": "stdout", "text": "hi"}
        pages = [
            {"lines": [line], "dropped": "0", "next_after": "1"},
            {"lines": [], "dropped": "0", "next_after": "1"},
        ]
        body = "".join(__import__("json").dumps(p) + "\n" for p in pages).encode()
        self.api.answer(200, body, {"Content-Type": "application/x-ndjson"})
        lines = list(self.client.workloads.logs(WID, follow=True))
        self.assertEqual([l.text for l in lines], ["hi"])
        self.assertEqual(lines[0].number, 1)
        self.assertIn("follow=true", self.api.requests[0].path)

    def test_an_error_line_in_a_stream_raises_it(self):
        body = (
            b'{"lines": [], "dropped": "0", "next_after": "0"}\n'
            b'{"error": {"code": "unavailable", "message": "the api stopped", "request_id": "r-1"}}\n'
        )
        self.api.answer(200, body, {"Content-Type": "application/x-ndjson"})
        stream = self.client.api.follow_workload_logs(WID)
        next(stream)
        with self.assertRaises(einsora.Unavailable) as caught:
            next(stream)
        self.assertEqual(caught.exception.request_id, "r-1")


class Errors(WithFake):
    def test_each_code_is_its_exception_with_the_request_id(self):
        cases = [
            (400, "invalid_request", einsora.InvalidRequest),
            (401, "unauthenticated", einsora.Unauthenticated),
            (403, "forbidden", einsora.PermissionDenied),
            (404, "not_found", einsora.NotFound),
            (405, "method_not_allowed", einsora.MethodNotAllowed),
            (409, "conflict", einsora.Conflict),
            (409, "quota_exceeded", einsora.QuotaExceeded),
            (409, "invalid_transition", einsora.InvalidTransition),
            (500, "internal", einsora.InternalError),
        ]
        for status, code, cls in cases:
            with self.subTest(code=code):
                self.api.error(status, code, f"{code} happened")
                with self.assertRaises(cls) as caught:
                    self.client.workloads.stop(WID)
                error = caught.exception
                self.assertEqual((error.status, error.code), (status, code))
                self.assertEqual(error.request_id, REQUEST_ID)
                self.assertEqual(error.headers["X-Request-ID"], REQUEST_ID)
                self.assertEqual(error.message, f"{code} happened")
                self.assertEqual(str(error), f"{code}: {code} happened (request ID {REQUEST_ID})")
                self.assertIsInstance(error, einsora.APIError)
        self.assertTrue(issubclass(einsora.QuotaExceeded, einsora.Conflict))
        self.assertIs(einsora.InvalidArgument, einsora.InvalidRequest)
        self.assertIs(einsora.FailedPrecondition, einsora.Conflict)

    def test_an_answer_without_the_envelope_is_mapped_by_its_status(self):
        self.api.answer(502, b"<html>bad gateway</html>", {"X-Request-ID": "from-header"})
        with self.assertRaises(einsora.BadGateway) as caught:
            self.client.workloads.stop(WID)
        self.assertEqual(caught.exception.request_id, "from-header")
        self.assertEqual(caught.exception.code, "bad_gateway")
        self.api.answer(418, b"")
        with self.assertRaises(einsora.APIError) as caught:
            self.client.workloads.stop(WID)
        self.assertEqual((caught.exception.status, caught.exception.code), (418, "http_418"))

    def test_retry_after_is_read(self):
        self.api.error(429, "rate_limited", Retry_After="3")
        client = einsora.Client(self.api.url, token=TOKEN, max_retries=0)
        with self.assertRaises(einsora.RateLimited) as caught:
            client.workloads.stop(WID)
        self.assertEqual(caught.exception.retry_after, 3.0)

    def test_no_secret_in_what_errors_and_clients_print(self):
        self.api.error(401, "unauthenticated", "the credential doesn't work")
        with self.assertRaises(einsora.Unauthenticated) as caught:
            self.client.workloads.get(WID)
        error = caught.exception
        for text in (str(error), repr(error), repr(error.headers), repr(self.client),
                     repr(self.client._transport.credentials)):
            self.assertNotIn(TOKEN, text)
            self.assertNotIn(TOKEN[4:], text)
        self.assertNotIn("Authorization", error.headers)
        copy = __import__("pickle").loads(__import__("pickle").dumps(error))
        self.assertEqual((type(copy), copy.request_id), (einsora.Unauthenticated, REQUEST_ID))

    def test_nothing_answering_is_a_connection_error(self):
        client = einsora.Client("http://127.0.0.1:9", token=TOKEN, max_retries=0, timeout=2)
        with self.assertRaises(einsora.APIConnectionError) as caught:
            client.workloads.get(WID)
        self.assertNotIn(TOKEN, str(caught.exception))


class Retries(WithFake):
    def test_reads_are_retried_after_retry_after(self):
        self.api.error(503, "unavailable", Retry_After="2")
        self.api.answer(200, workload("running"))
        self.assertEqual(self.client.workloads.get(WID).state, "running")
        self.assertEqual(self.sleeps, [2.0])

    def test_a_create_is_not_sent_twice_on_unavailable(self):
        self.api.error(503, "unavailable", Retry_After="1")
        with self.assertRaises(einsora.Unavailable):
            self.client.workloads.create(kind="notebook", name="nb", gpu_class="c", image="i")
        self.assertEqual(len(self.api.requests), 1)

    def test_a_create_with_an_idempotency_key_is_retried_with_it(self):
        self.api.error(503, "unavailable", Retry_After="1")
        self.api.error(409, "conflict", Retry_After="2")
        self.api.answer(202, workload())
        made = self.client.api.create_workload(
            kind="notebook", name="nb", gpu_class="c", image="i", idempotency_key="k-1"
        )
        self.assertEqual(made.id, WID)
        self.assertEqual(len(self.api.requests), 3)
        self.assertEqual([r.headers.get("Idempotency-Key") for r in self.api.requests], ["k-1"] * 3)
        self.assertEqual(self.sleeps, [1.0, 2.0])

    def test_a_conflict_without_retry_after_is_not_retried_even_with_a_key(self):
        self.api.error(409, "conflict")
        with self.assertRaises(einsora.Conflict):
            self.client.api.create_token(name="ci", idempotency_key="k-1")
        self.assertEqual(len(self.api.requests), 1)

    def test_no_idempotency_key_is_sent_unless_given(self):
        self.api.answer(202, workload())
        self.client.api.create_workload(kind="notebook", name="nb", gpu_class="c", image="i")
        self.assertNotIn("Idempotency-Key", self.api.requests[0].headers)

    def test_rate_limited_is_retried_whatever_the_method_and_gives_up(self):
        for _ in range(3):
            self.api.error(429, "rate_limited", Retry_After="1")
        with self.assertRaises(einsora.RateLimited):
            self.client.workloads.stop(WID)
        self.assertEqual(len(self.api.requests), 3)  # the first try and max_retries (2) more
        self.assertEqual(self.sleeps, [1.0, 1.0])

    def test_a_redirect_is_not_followed(self):
        self.api.answer(302, b"", {"Location": "http://127.0.0.1:9/elsewhere"})
        with self.assertRaises(einsora.APIError) as caught:
            self.client.workloads.get(WID)
        self.assertEqual(caught.exception.status, 302)
        self.assertEqual(len(self.api.requests), 1)


class Sessions(WithFake):
    def test_login_keeps_the_session_and_sends_csrf_on_writes_only(self):
        self.api.answer(
            200,
            {"csrf_token": "csrf-secret", "me": {"email": "me@x"}},
            {"Set-Cookie": "einsora_client=proof; Path=/v1/sessions\n"
                           "einsora_session=sess-secret; HttpOnly; Path=/"},
        )
        client = einsora.Client.login(self.api.url, email="me@x", password="a long password")
        login = self.api.requests[0]
        self.assertEqual(
            login.json(), {"email": "me@x", "password": "a long password", "client": "cli"}
        )
        self.assertNotIn("Authorization", login.headers)
        self.api.answer(200, {"tokens": []})
        self.api.answer(200, {"token": "tsk_new", "api_token": {"id": "1", "name": "ci", "prefix": "tsk_n"}})
        client.tokens.list()
        made = client.tokens.create("ci")
        self.assertEqual(made.token, "tsk_new")
        read, write = self.api.requests[1], self.api.requests[2]
        self.assertEqual(read.headers["Cookie"], "einsora_session=sess-secret")
        self.assertNotIn("X-CSRF-Token", read.headers)
        self.assertEqual(write.headers["X-CSRF-Token"], "csrf-secret")
        self.assertEqual(write.json(), {"name": "ci"})
        self.assertNotIn("secret", repr(client))
        self.assertIn("auth=session", repr(client))


class Waiting(WithFake):
    def test_wait_for_polls_until_the_state(self):
        for state in ("pending", "provisioning", "running"):
            self.api.answer(200, workload(state))
        with mock.patch("time.sleep"):
            w = self.client.workloads.wait_for(WID, "running", poll_interval=0)
        self.assertEqual(w.state, "running")
        self.assertEqual(len(self.api.requests), 3)
        self.assertTrue(all("include_deleted=true" in r.path for r in self.api.requests))

    def test_a_failure_ends_the_wait_with_its_reason(self):
        self.api.answer(200, workload("failed", state_reason="the image didn't start"))
        with self.assertRaises(einsora.WorkloadFailed) as caught:
            self.client.workloads.wait_for(WID, "running")
        self.assertIn("the image didn't start", str(caught.exception))
        self.assertEqual(caught.exception.workload.state, "failed")

    def test_the_wait_times_out(self):
        for _ in range(50):
            self.api.answer(200, workload("queued"))
        with self.assertRaises(einsora.WaitTimeout) as caught:
            self.client.workloads.wait_for(WID, "running", timeout=0.05, poll_interval=0.01)
        self.assertIsInstance(caught.exception, TimeoutError)
        self.assertEqual(caught.exception.workload.state, "queued")


class Settings(unittest.TestCase):
    def test_the_cli_s_environment_is_the_default(self):
        env = {"EINSORA_SERVER": "http://einsora.example:8080/", "EINSORA_TOKEN": TOKEN}
        with mock.patch.dict(os.environ, env, clear=True):
            client = einsora.Client()
        self.assertEqual(client.base_url, "http://einsora.example:8080")
        self.assertEqual(client._transport.credentials.kind, "token")
        with mock.patch.dict(os.environ, {"EINSORA_HTTP_ADDR": "127.0.0.1:9999"}, clear=True):
            client = einsora.Client()
        self.assertEqual(client.base_url, "http://127.0.0.1:9999")
        self.assertEqual(client._transport.credentials.kind, "none")

    def test_a_bad_base_url_is_refused(self):
        for url in ("127.0.0.1:8080", "ftp://x", "http://u:p@x", "http://x/?q=1"):
            with self.subTest(url=url), self.assertRaises(ValueError):
                einsora.Client(url, token=TOKEN)


if __name__ == "__main__":
    unittest.main()
