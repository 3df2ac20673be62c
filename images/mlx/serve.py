#!/usr/bin/env python3
"""Serve one MLX model directory, OpenAI-style, on a Unix socket, offline (macos-native).

Contract (as images/llamacpp/serve.py's):
  socket path  $EINSORA_LLM_SOCKET (must end in .sock); created 0600, removed at exit
  API key      first line of $EINSORA_LLM_API_KEY_FILE; never in env or argv; every request
               must carry it (Authorization: Bearer), compared in constant time
  model        --model DIR: the endpoint's private copy, validated by the agent (safetensors,
               a checksum manifest); served as --alias. No other model is ever loaded: a
               request naming another is refused (mlx_lm.server's own would fetch it from a
               hub), and nothing is fetched at all (the hub's offline switches are set before
               anything imports it, and its credentials removed)
  limits       --ctx-size tokens per request, prompt and answer; --n-predict, max_tokens when a
               request sets none; --parallel requests admitted at once (the rest: 503), one
               generating at a time (MLX runs one model on one GPU stream)
Routes: GET /health, GET /v1/models, POST /v1/completions, POST /v1/chat/completions; both
POSTs stream as server-sent events with "stream": true, ending with data: [DONE]; every answer
has usage (prompt_tokens, completion_tokens, total_tokens), a stream's in its last chunk.
"""
import argparse
import hmac
import json
import os
import socketserver
import stat
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler

for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE",
             "HF_HUB_DISABLE_TELEMETRY"):
    os.environ[name] = "1"
for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_ENDPOINT"):
    os.environ.pop(name, None)

MAX_BODY = 1 << 20


def parse():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True, help="the model directory")
    ap.add_argument("--alias", default="einsora-local", help="model id in /v1/models")
    ap.add_argument("--ctx-size", type=int, default=1024, help="tokens per request")
    ap.add_argument("--n-predict", type=int, default=256, help="max_tokens when a request sets none")
    ap.add_argument("--parallel", type=int, default=2, help="requests admitted at once")
    a = ap.parse_args()
    for name in ("ctx_size", "n_predict", "parallel"):
        if getattr(a, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be >= 1")
    a.socket = os.environ.get("EINSORA_LLM_SOCKET", "")
    a.key_file = os.environ.get("EINSORA_LLM_API_KEY_FILE", "")
    if not a.socket.endswith(".sock"):
        ap.error("$EINSORA_LLM_SOCKET must name a socket ending in .sock")
    if not a.key_file:
        ap.error("$EINSORA_LLM_API_KEY_FILE must name the API key's file")
    return a


def read_key(path):
    with open(path, encoding="utf-8") as f:
        key = f.readline().strip()
    if not key:
        sys.exit(f"serve.py: empty API key in {path}")
    return key


def remove_stale_socket(path):
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(st.st_mode):
        sys.exit(f"serve.py: {path} exists and is not a socket; refusing to remove it")
    os.unlink(path)


def not_a_number(word):
    """JSON's NaN and Infinity, which Python would read as numbers: refused."""
    raise ValueError(word)


class Refused(Exception):
    """A request refused: its status, OpenAI error type and message."""

    def __init__(self, status, kind, message, code=None):
        super().__init__(message)
        self.status, self.kind, self.message, self.code = status, kind, message, code


class Engine:
    """The one model: tokens in, text pieces out, one generation at a time."""

    def __init__(self, a):
        from mlx_lm import load  # after the offline switches above

        self.model, self.tokenizer = load(a.model)
        self.ctx, self.n_predict = a.ctx_size, a.n_predict
        self.admitted = threading.BoundedSemaphore(a.parallel)
        self.generating = threading.Lock()

    def prompt_tokens(self, body, chat):
        if chat:
            messages = body.get("messages")
            if not isinstance(messages, list) or not messages:
                raise Refused(400, "invalid_request_error", "messages must be a non-empty list")
            for m in messages:
                if (not isinstance(m, dict) or not isinstance(m.get("role"), str)
                        or not isinstance(m.get("content"), str)):
                    raise Refused(400, "invalid_request_error",
                                  "each message needs a role and a text content")
            return list(self.tokenizer.apply_chat_template(
                messages, add_generation_prompt=True, tokenize=True, return_dict=False))
        prompt = body.get("prompt")
        if not isinstance(prompt, str):
            raise Refused(400, "invalid_request_error", "prompt must be a string")
        return list(self.tokenizer.encode(prompt))

    def budget(self, body, prompt):
        asked = body.get("max_tokens", body.get("max_completion_tokens", self.n_predict))
        if not isinstance(asked, int) or isinstance(asked, bool) or asked < 1:
            raise Refused(400, "invalid_request_error", "max_tokens must be a positive integer")
        room = self.ctx - len(prompt)
        if room < 1:
            raise Refused(400, "invalid_request_error",
                          f"the prompt is {len(prompt)} tokens; this endpoint's context is "
                          f"{self.ctx} per request", "context_length_exceeded")
        return min(asked, room)

    def sampler(self, body):
        from mlx_lm.sample_utils import make_sampler

        temp = body.get("temperature", 0.0)
        top_p = body.get("top_p", 1.0)
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (temp, top_p)):
            raise Refused(400, "invalid_request_error", "temperature and top_p are numbers")
        return make_sampler(temp=float(temp), top_p=float(top_p))

    def generate(self, prompt, max_tokens, sampler):
        """Yields (text, finish_reason or None, tokens made so far)."""
        from mlx_lm import stream_generate

        with self.generating:
            for r in stream_generate(self.model, self.tokenizer, prompt, max_tokens=max_tokens,
                                     sampler=sampler):
                yield r.text, r.finish_reason, r.generation_tokens


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "einsora-mlx"
    # A client that stops sending, or stops reading a stream, is dropped: it never holds a slot
    # or the generation for longer.
    timeout = 60

    def address_string(self):
        return "local"

    def log_message(self, fmt, *args):  # a line per request, never a body or a header
        sys.stderr.write("serve.py: %s\n" % (fmt % args))

    def send_json(self, status, doc):
        data = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def refuse(self, e):
        # What is left of its request unread must not be read as the next one.
        self.close_connection = True
        self.send_json(e.status, {"error": {"message": e.message, "type": e.kind, "code": e.code}})

    def authorized(self):
        given = self.headers.get("Authorization", "")
        expected = "Bearer " + self.server.key
        if hmac.compare_digest(given.encode(), expected.encode()):
            return True
        self.refuse(Refused(401, "authentication_error", "a valid API key is required"))
        return False

    def do_GET(self):
        if self.path == "/health":
            return self.send_json(200, {"status": "ok"})
        if not self.authorized():
            return None
        if self.path == "/v1/models":
            return self.send_json(200, {"object": "list", "data": [{
                "id": self.server.alias, "object": "model", "created": self.server.started,
                "owned_by": "einsora", "meta": {"n_ctx": self.server.engine.ctx}}]})
        return self.refuse(Refused(404, "invalid_request_error", f"no route {self.path}"))

    streaming = False

    def do_POST(self):
        if not self.authorized():
            return None
        chat = self.path == "/v1/chat/completions"
        if not chat and self.path != "/v1/completions":
            return self.refuse(Refused(404, "invalid_request_error", f"no route {self.path}"))
        engine = self.server.engine
        try:
            body = self.read_body()  # before a slot: a slow sender holds none
        except Refused as e:
            return self.refuse(e)
        if not engine.admitted.acquire(blocking=False):
            return self.refuse(Refused(503, "server_error", "busy: try again"))
        pieces = None
        try:
            named = body.get("model", self.server.alias)
            if named != self.server.alias:
                raise Refused(404, "invalid_request_error",
                              f"this endpoint serves {self.server.alias} only", "model_not_found")
            prompt = engine.prompt_tokens(body, chat)
            max_tokens = engine.budget(body, prompt)
            pieces = engine.generate(prompt, max_tokens, engine.sampler(body))
            self.answer(body, chat, prompt, pieces)
        except Refused as e:
            self.refuse(e)
        except OSError:
            self.close_connection = True  # the client went away, or stopped reading
        except Exception as e:  # the engine's own failure: said, never a hang or a cut
            sys.stderr.write(f"serve.py: generation failed: {type(e).__name__}: {e}\n")
            failed = {"message": "the model failed to answer", "type": "server_error", "code": None}
            if not self.streaming:
                self.refuse(Refused(500, "server_error", failed["message"]))
            else:
                try:  # headers are sent: an error event ends the stream
                    self.wfile.write(b"data: " + json.dumps({"error": failed}).encode() + b"\n\n")
                    self.wfile.flush()
                except OSError:
                    pass
        finally:
            if pieces is not None:
                pieces.close()  # the generation lock, released now rather than at collection
            engine.admitted.release()
        return None

    def read_body(self):
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            raise Refused(411, "invalid_request_error", "a Content-Length is required") from None
        if length < 0 or length > MAX_BODY:
            raise Refused(413, "invalid_request_error", f"the body is over {MAX_BODY} bytes")
        try:
            body = json.loads(self.rfile.read(length), parse_constant=not_a_number)
        except ValueError:
            raise Refused(400, "invalid_request_error", "the body is not JSON") from None
        if not isinstance(body, dict):
            raise Refused(400, "invalid_request_error", "the body is not a JSON object")
        return body

    def answer(self, body, chat, prompt, pieces):
        kind = "chat.completion" if chat else "text_completion"
        head = {"id": f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}",
                "created": int(time.time()), "model": self.server.alias}
        made = 0
        usage = lambda: {"prompt_tokens": len(prompt), "completion_tokens": made,
                         "total_tokens": len(prompt) + made}
        self.streaming = bool(body.get("stream"))
        if not self.streaming:
            text, finish = "", "length"
            for piece, why, made in pieces:
                text += piece
                finish = why or finish
            choice = ({"index": 0, "message": {"role": "assistant", "content": text},
                       "finish_reason": finish} if chat else
                      {"index": 0, "text": text, "finish_reason": finish})
            return self.send_json(200, {**head, "object": kind, "choices": [choice],
                                        "usage": usage()})
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        event = lambda doc: self.wfile.write(b"data: " + json.dumps(doc).encode() + b"\n\n")
        chunk_kind = "chat.completion.chunk" if chat else "text_completion"
        try:
            for piece, why, made in pieces:
                delta = ({"index": 0, "delta": {"content": piece}, "finish_reason": why} if chat
                         else {"index": 0, "text": piece, "finish_reason": why})
                event({**head, "object": chunk_kind, "choices": [delta]})
                self.wfile.flush()
            event({**head, "object": chunk_kind, "choices": [], "usage": usage()})
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        except OSError:
            self.close_connection = True  # the client went away: generation stops with it


class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


def main():
    a = parse()
    key = read_key(a.key_file)
    if not os.path.isdir(a.model):
        sys.exit(f"serve.py: no model directory at {a.model}")
    engine = Engine(a)
    remove_stale_socket(a.socket)
    os.umask(0o177)  # the socket is created 0600
    server = Server(a.socket, Handler)
    os.umask(0o077)  # and what it writes later (MLX's caches) its own, directories searchable
    server.key, server.alias, server.engine = key, a.alias, engine
    server.started = int(time.time())
    print(f"serve.py: listening on {a.socket} model={a.alias} ctx={a.ctx_size} "
          f"n_predict={a.n_predict} parallel={a.parallel}", flush=True)
    import signal

    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    try:
        server.serve_forever()
    finally:
        try:
            os.unlink(a.socket)
        except FileNotFoundError:
            pass


if __name__ == "__main__":
    main()
