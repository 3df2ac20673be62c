"""What the tests share: the package from source, and a scripted stand-in for the API."""

import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(PACKAGE, "src"))
sys.path.insert(0, PACKAGE)  # generate.py

REQUEST_ID = "0190c0de-0000-7000-8000-000000000001"


class Recorded:
    def __init__(self, method: str, path: str, headers: Dict[str, str], body: bytes) -> None:
        self.method = method
        self.path = path
        self.headers = headers
        self.body = body

    def json(self) -> Any:
        return json.loads(self.body.decode("utf-8"))


class FakeApi:
    """An HTTP server that answers each request with the next scripted answer and records what
    it was sent. `answer(status, body, headers)` queues one; `raw` bodies are sent as they are."""

    def __init__(self) -> None:
        self.requests: List[Recorded] = []
        self._answers: List[Tuple[int, Any, Dict[str, str]]] = []
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                with fake._lock:
                    fake.requests.append(
                        Recorded(self.command, self.path, self.headers, body)
                    )
                    status, payload, headers = (
                        fake._answers.pop(0) if fake._answers else (500, {"error": {}}, {})
                    )
                if isinstance(payload, bytes):
                    data = payload
                    headers.setdefault("Content-Type", "text/plain")
                else:
                    data = json.dumps(payload).encode("utf-8")
                    headers.setdefault("Content-Type", "application/json")
                self.send_response(status)
                headers.setdefault("X-Request-ID", REQUEST_ID)
                for key, value in headers.items():
                    for one in value.split("\n"):
                        self.send_header(key, one)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_DELETE = _serve

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)
        self._thread.start()

    def answer(self, status: int, body: Any = None, headers: Optional[Dict[str, str]] = None) -> None:
        self._answers.append((status, {} if body is None else body, dict(headers or {})))

    def error(self, status: int, code: str, message: str = "refused", **headers: str) -> None:
        envelope = {"error": {"code": code, "message": message, "request_id": REQUEST_ID}}
        self.answer(status, envelope, {k.replace("_", "-"): v for k, v in headers.items()})

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def workload(state: str = "pending", **fields: Any) -> Dict[str, Any]:
    out = {
        "id": "0190c0de-0000-7000-8000-00000000abcd",
        "tenant_id": "0190c0de-0000-7000-8000-00000000aaaa",
        "name": "nb",
        "gpu_class": "cpu-1c-2g",
        "image": "jupyterlab",
        "region": "local",
        "placed_class": "",
        "machine_id": "",
        "driver": "",
        "attempt": 0,
        "state_reason": "",
        "fallback": [],
        "version": "3",
        "device_uuids": [],
        "kind": "notebook",
        "state": state,
        "notebook": {},
        "created_at": "2026-03-01T10:00:00.123456789Z",
        "updated_at": "2026-03-01T10:00:01Z",
    }
    out.update(fields)
    return out
