#!/usr/bin/env python3
"""Serve the model directory at /model with vLLM's OpenAI server on a Unix socket.

Contract:
  socket path  --uds, else $EINSORA_LLM_SOCKET, else /run/einsora/llm.sock: a stale socket is
               removed first; the socket is created 0600 (umask 077).
  API key      first line of $EINSORA_LLM_API_KEY_FILE (default /run/einsora/api-key); Einsora
               mounts it read-only. It reaches vLLM as VLLM_API_KEY in the server's own
               environment: never in argv, never in the container's configuration.
  model        --model, a safetensors directory the agent checked (mount it read-only).
  offline      HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE set here too; --trust-remote-code and
               anything that names a host or a port are refused.
Other arguments go to `vllm serve` as given (the agent sends --served-model-name,
--max-num-seqs and --max-model-len).
"""
import os
import stat
import sys

REFUSED = ("--trust-remote-code", "--host", "--port", "--api-key", "--download-dir")
# The image's vLLM; a stand-in in the recipe's own test.
VLLM = os.environ.get("EINSORA_VLLM_BIN") or "/opt/venv/bin/vllm"


def fail(why):
    sys.exit(f"serve.py: {why}")


def take(args, flag, default):
    """Removes `flag VALUE` (or `flag=VALUE`) from args; its value, or default."""
    for i, a in enumerate(args):
        if a == flag and i + 1 < len(args):
            value = args[i + 1]
            del args[i:i + 2]
            return value
        if a.startswith(flag + "="):
            del args[i]
            return a.split("=", 1)[1]
    return default


def read_key(path):
    with open(path, encoding="utf-8") as f:
        key = f.readline().strip()
    if not key:
        fail(f"empty API key in {path}")
    return key


def remove_stale_socket(path):
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(st.st_mode):
        fail(f"{path} exists and is not a socket; refusing to remove it")
    os.unlink(path)


def main(argv):
    args = list(argv)
    for a in args:
        if a.split("=", 1)[0] in REFUSED:
            fail(f"{a.split('=', 1)[0]} is not accepted")
    socket = take(args, "--uds", os.environ.get("EINSORA_LLM_SOCKET") or "/run/einsora/llm.sock")
    model = take(args, "--model", "/model")
    if not os.path.isfile(os.path.join(model, "config.json")):
        fail(f"no model directory at {model}")
    key = read_key(os.environ.get("EINSORA_LLM_API_KEY_FILE") or "/run/einsora/api-key")
    remove_stale_socket(socket)
    env = dict(os.environ)
    env.update(VLLM_API_KEY=key, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1")
    os.umask(0o077)
    os.execve(VLLM, [VLLM, "serve", model, "--uds", socket, *args], env)


if __name__ == "__main__":
    main(sys.argv[1:])
