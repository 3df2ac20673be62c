#!/usr/bin/env python3
"""Run code in a Jupyter kernel over the server's websocket, through its Unix socket.

Usage: ws-exec.py SOCKET TOKEN KERNEL_ID CODE   -> prints "<status> <stdout>"
Standard library only (a minimal RFC 6455 client), used by images/smoke.
"""
import base64
import json
import os
import socket
import struct
import sys
import uuid

sock_path, token, kernel_id, code = sys.argv[1:5]
s = socket.socket(socket.AF_UNIX)
s.settimeout(60)
s.connect(sock_path)
s.sendall((
    f"GET /api/kernels/{kernel_id}/channels HTTP/1.1\r\nHost: localhost\r\n"
    "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
    f"Sec-WebSocket-Key: {base64.b64encode(os.urandom(16)).decode()}\r\n"
    f"Authorization: token {token}\r\n\r\n").encode())
buf = b""
while b"\r\n\r\n" not in buf:
    chunk = s.recv(4096)
    if not chunk:
        sys.exit("connection closed during handshake")
    buf += chunk
head, buf = buf.split(b"\r\n\r\n", 1)
if not head.startswith(b"HTTP/1.1 101"):
    sys.exit(f"handshake refused: {head.splitlines()[0].decode()}")


def take(n):
    global buf
    while len(buf) < n:
        chunk = s.recv(65536)
        if not chunk:
            raise EOFError("websocket closed")
        buf += chunk
    out, buf = buf[:n], buf[n:]
    return out


def send(obj):
    data, mask = json.dumps(obj).encode(), os.urandom(4)
    n = len(data)
    hdr = bytes([0x81]) + (bytes([0x80 | n]) if n < 126 else bytes([0xFE]) + struct.pack("!H", n))
    s.sendall(hdr + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))


def recv():
    while True:
        b0, b1 = take(2)
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack("!H", take(2))[0]
        elif n == 127:
            n = struct.unpack("!Q", take(8))[0]
        data, op = take(n), b0 & 0x0F
        if op == 1:
            return json.loads(data)
        if op == 8:
            raise EOFError("websocket closed by server")


msg_id = uuid.uuid4().hex
send({"header": {"msg_id": msg_id, "username": "smoke", "session": uuid.uuid4().hex,
                 "msg_type": "execute_request", "version": "5.3", "date": ""},
      "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
      "content": {"code": code, "silent": False, "store_history": False,
                  "user_expressions": {}, "allow_stdin": False, "stop_on_error": True}})
out = ""
while True:
    m = recv()
    if m.get("parent_header", {}).get("msg_id") != msg_id:
        continue
    if m["msg_type"] == "stream":
        out += m["content"]["text"]
    elif m["msg_type"] == "execute_reply":
        print(m["content"]["status"], out.strip())
        break
