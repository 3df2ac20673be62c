"""The SDK against a live installation (`einsora dev`): a workload's whole life, errors with
request IDs, tokens and usage.

Runs when EINSORA_SDK_TEST_SERVER (the base URL) and EINSORA_SDK_TEST_TOKEN (an API token of
a tenant's owner) are set; EINSORA_SDK_TEST_EMAIL and EINSORA_SDK_TEST_PASSWORD (that owner's)
add the session tests. The e2e test `python_sdk` (cli/tests/e2e/python_sdk.rs) starts one and
sets them, with EINSORA_SDK_TEST_REQUIRE_LIVE=1, which makes a missing setting a failure
rather than a skip. It creates workloads: never point it at an installation you care about.
"""

import http.client
import os
import re
import time
import unittest
import urllib.parse
import uuid
from datetime import datetime, timedelta, timezone

import _support  # noqa: F401  (the package from source)
import einsora

SERVER = os.environ.get("EINSORA_SDK_TEST_SERVER")
TOKEN = os.environ.get("EINSORA_SDK_TEST_TOKEN")
EMAIL = os.environ.get("EINSORA_SDK_TEST_EMAIL")
PASSWORD = os.environ.get("EINSORA_SDK_TEST_PASSWORD")
REQUIRED = bool(os.environ.get("EINSORA_SDK_TEST_REQUIRE_LIVE"))
# The class and image every installation offers a notebook of (the tests' `cpu-1c-2g`).
CLASS = os.environ.get("EINSORA_SDK_TEST_CLASS", "cpu-1c-2g")
UUIDV7 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


class Live(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not (SERVER and TOKEN):
            message = "EINSORA_SDK_TEST_SERVER and EINSORA_SDK_TEST_TOKEN name no installation"
            if REQUIRED:
                raise AssertionError(message)
            raise unittest.SkipTest(message)
        cls.client = einsora.Client(SERVER, token=TOKEN, timeout=30)

    def wait(self, workload_id: str, state: str) -> einsora.Workload:
        return self.client.workloads.wait_for(workload_id, state, timeout=60, poll_interval=0.1)


class WorkloadLife(Live):
    def test_a_notebook_is_created_runs_opens_stops_starts_and_is_deleted(self):
        workloads = self.client.workloads
        made = workloads.create(kind="notebook", name=name("sdk-nb"), gpu_class=CLASS,
                                image="jupyterlab")
        self.assertIn(made.state, ("pending", "queued", "provisioning"))
        self.assertEqual((made.kind, made.gpu_class), ("notebook", CLASS))
        self.assertRegex(made._request_id, UUIDV7)

        running = self.wait(made.id, "running")
        self.assertTrue(running.machine_id, "a running workload is placed on a machine")
        self.assertIn(made.id, [w.id for w in workloads.list()])

        grant = workloads.open(made.id)
        self.assertEqual(grant.workload_id, made.id)
        link = grant.notebook.link
        parsed = urllib.parse.urlsplit(link)
        self.assertEqual(parsed.hostname, f"w-{made.id}.localhost")
        self.assertEqual(parsed.path, "/_einsora/open")
        self.assertIn("ticket=", parsed.query)
        self.assertNotIn(parsed.query, repr(grant), "the one-time link is a secret")
        # The access proxy takes the ticket (a notebook of the sim driver has no server behind
        # it, so after the ticket it says to try again): not refused as unknown.
        self.assertNotIn(redeem(link), (401, 404))

        events = workloads.events(made.id)
        self.assertIn("running", [e.to_state for e in events])

        self.assertIn(workloads.stop(made.id).state, ("stopping", "stopped"))
        self.wait(made.id, "stopped")
        with self.assertRaises(einsora.Conflict) as caught:
            workloads.open(made.id)
        self.assertRegex(caught.exception.request_id, UUIDV7)
        with self.assertRaises(einsora.InvalidTransition):
            workloads.stop(made.id)

        workloads.start(made.id)
        self.wait(made.id, "running")
        with self.assertRaises(einsora.InvalidTransition):
            workloads.start(made.id)

        self.assertIn(workloads.delete(made.id).state, ("deleting", "deleted"))
        gone = self.wait(made.id, "deleted")
        self.assertEqual(gone.id, made.id)
        with self.assertRaises(einsora.NotFound):
            workloads.get(made.id)
        self.assertEqual(workloads.get(made.id, include_deleted=True).state, "deleted")
        self.assertNotIn(made.id, [w.id for w in workloads.list()])

    def test_an_endpoint_gives_its_openai_base_url(self):
        made = self.client.endpoints.create(name=name("sdk-ep"), model="tiny.gguf",
                                            gpu_class=CLASS)
        self.assertEqual(made.endpoint.model, "tiny.gguf")
        self.wait(made.id, "running")
        self.assertIn(made.id, [e.id for e in self.client.endpoints.list()])
        base = self.client.endpoints.base_url(made.id)
        self.assertTrue(base.endswith(f"/e/{made.id}/v1"), base)
        kwargs = self.client.endpoints.openai_kwargs(made.id)
        self.assertEqual(kwargs, {"base_url": base, "api_key": TOKEN})
        self.client.workloads.delete(made.id)
        self.wait(made.id, "deleted")


class Errors(Live):
    def test_an_unknown_id_is_not_found_with_the_answer_s_request_id(self):
        unknown = str(uuid.uuid4())
        with self.assertRaises(einsora.NotFound) as caught:
            self.client.workloads.get(unknown)
        error = caught.exception
        self.assertEqual((error.status, error.code), (404, "not_found"))
        self.assertRegex(error.request_id, UUIDV7)
        self.assertEqual(error.request_id, error.headers.get("X-Request-ID")
                         or error.headers.get("x-request-id"))
        self.assertIn(error.request_id, str(error))
        # The same ID is the one the activity log recorded the refusal under.
        deadline = time.monotonic() + 10
        while True:
            entries = self.client.api.list_activity(object_id=unknown).entries
            if entries or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        self.assertEqual(
            [(e.action, e.result, e.request_id) for e in entries],
            [("get_workload", "not_found", error.request_id)],
        )

    def test_invalid_requests_are_invalid_request(self):
        with self.assertRaises(einsora.InvalidArgument) as caught:
            self.client.workloads.create(kind="notebook", name="Not A Name", gpu_class=CLASS,
                                         image="jupyterlab")
        self.assertEqual((caught.exception.status, caught.exception.code), (400, "invalid_request"))
        self.assertIn("name", caught.exception.message)
        self.assertRegex(caught.exception.request_id, UUIDV7)
        with self.assertRaises(einsora.InvalidRequest):
            self.client.workloads.get("not-a-uuid")
        now = datetime.now(timezone.utc)
        with self.assertRaises(einsora.InvalidRequest):
            list(self.client.usage.list(now, now - timedelta(hours=1)))

    def test_a_token_that_does_not_work_is_unauthenticated_and_never_shown(self):
        bogus = "tsk_" + "A" * 32
        client = einsora.Client(SERVER, token=bogus)
        with self.assertRaises(einsora.Unauthenticated) as caught:
            client.me()
        for text in (str(caught.exception), repr(caught.exception), repr(client)):
            self.assertNotIn(bogus, text)
        self.assertRegex(caught.exception.request_id, UUIDV7)

    def test_an_api_token_may_not_make_tokens(self):
        with self.assertRaises(einsora.PermissionDenied) as caught:
            self.client.tokens.create(name("sdk-denied"))
        self.assertEqual(caught.exception.code, "forbidden")


class TokensAndUsage(Live):
    def test_the_token_is_listed_by_its_prefix(self):
        tokens = self.client.tokens.list()
        self.assertIn(TOKEN[:8], [t.prefix for t in tokens])
        self.assertEqual(self.client.me().credential.kind, "api_token")

    def test_a_session_makes_a_token_that_works_until_revoked(self):
        if not (EMAIL and PASSWORD):
            if REQUIRED:
                self.fail("EINSORA_SDK_TEST_EMAIL and EINSORA_SDK_TEST_PASSWORD are not set")
            self.skipTest("no email and password to sign in with")
        session = einsora.Client.login(SERVER, email=EMAIL, password=PASSWORD)
        self.assertEqual(session.me().email, EMAIL)
        made = session.tokens.create(name("sdk-made"))
        self.assertTrue(made.token.startswith("tsk_"))
        self.assertNotIn(made.token, repr(made))
        fresh = einsora.Client(SERVER, token=made.token)
        self.assertEqual(fresh.me().email, EMAIL)
        revoked = session.tokens.revoke(made.api_token.id)
        self.assertIsNotNone(revoked.revoked_at)
        with self.assertRaises(einsora.Unauthenticated):
            fresh.me()
        session.logout()
        with self.assertRaises(einsora.Unauthenticated):
            session.me()

    def test_usage_is_read_as_records(self):
        end = datetime.now(timezone.utc) + timedelta(hours=1)
        records = list(self.client.usage.list(end - timedelta(days=2), end, page_size=10))
        for record in records:
            self.assertIsInstance(record, einsora.UsageRecord)
            self.assertIsInstance(record.seconds, int)
        self.assertTrue(all(isinstance(r, einsora.UsageRecord) for r in self.client.usage.last(48)))


def redeem(link: str) -> int:
    """Follows a notebook link as a browser would, connecting to 127.0.0.1 with the link's
    Host (`*.localhost` doesn't resolve everywhere): the access proxy's status."""
    parsed = urllib.parse.urlsplit(link)
    connection = http.client.HTTPConnection("127.0.0.1", parsed.port or 80, timeout=10)
    try:
        connection.request("GET", f"{parsed.path}?{parsed.query}", headers={"Host": parsed.netloc})
        return connection.getresponse().status
    finally:
        connection.close()


if __name__ == "__main__":
    unittest.main()
