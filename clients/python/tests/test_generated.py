"""The generated layer: current with docs/openapi.json, versioned with the API, and faithful
to the wire (proto3 JSON's 64-bit strings, RFC 3339 times, fields it doesn't know)."""

import dataclasses
import json
import os
import re
import unittest
from datetime import datetime, timezone

import _support  # noqa: F401  (the package from source)
import einsora
import generate
from einsora import _wire
from einsora._generated.operations import Operations
from einsora.models import AccessGrant, CreateTokenResponse, ListUsageResponse, Status, Workload


class Drift(unittest.TestCase):
    def test_the_generated_code_is_what_the_committed_document_gives(self):
        # EINSORA_UPDATE_PYTHON_SDK=1 regenerates first (then this checks the files written).
        if os.environ.get("EINSORA_UPDATE_PYTHON_SDK"):
            generate.write()
        stale = generate.stale()
        self.assertEqual(
            stale,
            [],
            "the Python SDK isn't generated from docs/openapi.json: run "
            "EINSORA_UPDATE_PYTHON_SDK=1 cargo test -p einsora --test e2e python_sdk_is_generated "
            "(or python3 clients/python/generate.py) and commit it",
        )

    def test_the_check_fails_when_the_document_changes(self):
        document = json.loads(generate.DOCUMENT.read_text())
        document["paths"]["/v1/made-up"] = {
            "get": {"operationId": "MadeUp", "responses": {"200": {"description": "OK"}}}
        }
        generated = generate.operations(document)
        self.assertIn("def made_up(self)", generated)
        committed = (generate.OUT / "operations.py").read_text()
        self.assertNotEqual(generated, committed)

    def test_the_package_version_follows_the_api(self):
        document = json.loads(generate.DOCUMENT.read_text())
        api = document["info"]["version"]
        self.assertEqual(einsora.API_VERSION, api)
        major = re.fullmatch(r"v(\d+)", api).group(1)
        self.assertEqual(einsora.__version__.split(".")[0], major)
        pyproject = (generate.HERE / "pyproject.toml").read_text()
        declared = re.search(r'(?m)^version = "([^"]+)"$', pyproject).group(1)
        self.assertEqual(declared, einsora.__version__)
        cargo = (generate.ROOT / "Cargo.toml").read_text()
        release = re.search(
            r'\[workspace\.package\][^\[]*?version = "(\d+)\.(\d+)\.(\d+)', cargo
        ).groups()
        self.assertEqual(einsora.__version__, f"{major}.{release[1]}.{release[2]}")

    def test_every_operation_has_a_method_with_its_parameters(self):
        document = json.loads(generate.DOCUMENT.read_text())
        for path, methods in document["paths"].items():
            for method, op in methods.items():
                name = generate.snake(op["operationId"])
                function = getattr(Operations, name, None)
                self.assertIsNotNone(function, f"{method.upper()} {path}: no {name}")
                code = function.__code__
                names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
                for parameter in op.get("parameters", []):
                    if parameter["name"] == "follow":
                        continue
                    wanted = (
                        generate.header_name(parameter["name"])
                        if parameter["in"] == "header"
                        else generate.py_name(parameter["name"])
                    )
                    self.assertIn(wanted, names, f"{name}")
                body = op.get("requestBody", {}).get("content", {}).get("application/json", {})
                for field in body.get("schema", {}).get("properties", {}):
                    self.assertIn(generate.py_name(field), names, f"{name}")

    def test_every_schema_is_a_model(self):
        document = json.loads(generate.DOCUMENT.read_text())
        for schema in document["components"]["schemas"]:
            if schema == "Error":
                continue
            self.assertTrue(hasattr(einsora.models, generate.class_name(schema)), schema)


class Models(unittest.TestCase):
    def test_a_workload_reads_and_writes_the_wire(self):
        data = _support.workload("running", version="9007199254740993", brand_new={"x": 1})
        w = Workload.from_dict(data)
        self.assertEqual(w.state, "running")
        self.assertEqual(w.version, 9007199254740993)  # a 64-bit integer, read from its string
        self.assertEqual(
            w.created_at, datetime(2026, 3, 1, 10, 0, 0, 123456, tzinfo=timezone.utc)
        )
        self.assertEqual(w.extra, {"brand_new": {"x": 1}})
        back = w.to_dict()
        self.assertEqual(back["version"], "9007199254740993")
        self.assertEqual(back["created_at"], "2026-03-01T10:00:00.123456Z")
        self.assertEqual(back["updated_at"], "2026-03-01T10:00:01Z")
        self.assertEqual(back["brand_new"], {"x": 1})
        self.assertEqual(Workload.from_dict(back), w)

    def test_absent_fields_read_as_proto3_defaults(self):
        w = Workload.from_dict({"id": "x"})
        self.assertEqual((w.name, w.attempt, w.fallback, w.state), ("", 0, [], None))
        status = Status.from_dict({"workloads": {"running": 2}})
        self.assertEqual(status.workloads, {"running": 2})
        page = ListUsageResponse.from_dict({"records": [{"workload_id": "w", "seconds": 60}]})
        self.assertEqual(page.records[0].seconds, 60)

    def test_secrets_are_not_in_reprs(self):
        made = CreateTokenResponse.from_dict(
            {"token": "tsk_SECRETSECRETSECRETSECRETSECRET12", "api_token": {"id": "1", "name": "n", "prefix": "tsk_SECR"}}
        )
        self.assertNotIn("SECRETSECRET", repr(made))
        self.assertEqual(made.token, "tsk_SECRETSECRETSECRETSECRETSECRET12")
        grant = AccessGrant.from_dict(
            {"workload_id": "w", "notebook": {"link": "http://w-x.localhost/_einsora/open?ticket=T0P"}}
        )
        self.assertNotIn("T0P", repr(grant))
        for field in dataclasses.fields(type(grant.notebook)):
            if field.name == "link":
                self.assertFalse(field.repr)

    def test_times(self):
        self.assertEqual(
            _wire.parse_time("2026-01-02T03:04:05+02:00"),
            datetime(2026, 1, 2, 1, 4, 5, tzinfo=timezone.utc),
        )
        self.assertEqual(_wire.format_time(datetime(2026, 1, 2, 3, 4, 5)), "2026-01-02T03:04:05Z")
        with self.assertRaises(ValueError):
            _wire.parse_time("yesterday")


if __name__ == "__main__":
    unittest.main()
