#!/usr/bin/env python3
"""Serve the model directory at /model with vLLM's OpenAI server on a Unix socket.

Contract:
  socket path  --uds, else $EINSORA_LLM_SOCKET, else /run/einsora/llm.sock: a stale socket is
               removed first; the socket is created 0600 (umask 077).
  API key      first line of $EINSORA_LLM_API_KEY_FILE (default /run/einsora/api-key); Einsora
               mounts it read-only. It reaches vLLM as VLLM_API_KEY in the server's own
               environment: never in argv, never in the container's configuration.
  model        --model, a safetensors directory the agent checked (mount it read-only).
  offline      HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE set here too.
Only the flags below are passed on, each as one `--flag=value` argument (so no value can read as
a flag of vLLM's); anything else (--trust-remote-code, --host, --port, --config, an
abbreviation or an underscore spelling of any flag) is refused.
"""
import os
import stat
import sys

# The flags passed on to `vllm serve`, and whether their value is a whole number.
PASSED = {"--served-model-name": False, "--max-num-seqs": True, "--max-model-len": True}
# vLLM's command line, run by this interpreter (not its console script, whose first line names
# the path its environment was built at); a stand-in in the recipe's own test.
VLLM = ([os.environ["EINSORA_VLLM_BIN"]] if os.environ.get("EINSORA_VLLM_BIN") else [
    sys.executable, "-c",
    "import sys; from vllm.entrypoints.cli.main import main; sys.argv[0] = 'vllm'; main()"])


def fail(why):
    sys.exit(f"serve.py: {why}")


def parse(argv):
    """`--flag value` or `--flag=value` pairs of known flags, by flag; anything else fails."""
    known = {"--uds", "--model", *PASSED}
    given, i = {}, 0
    while i < len(argv):
        flag, eq, value = argv[i].partition("=")
        if flag not in known:
            fail(f"{flag[:40]!r} is not accepted")
        if not eq:
            if i + 1 >= len(argv):
                fail(f"{flag} needs a value")
            i += 1
            value = argv[i]
        if flag in given:
            fail(f"{flag} is given twice")
        if PASSED.get(flag) and not (value.isdigit() and int(value) > 0):
            fail(f"{flag} must be a positive whole number")
        given[flag] = value
        i += 1
    return given


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
    given = parse(argv)
    socket = given.pop("--uds", None) or os.environ.get("EINSORA_LLM_SOCKET") or "/run/einsora/llm.sock"
    model = given.pop("--model", "/model")
    if not os.path.isfile(os.path.join(model, "config.json")):
        fail(f"no model directory at {model}")
    key = read_key(os.environ.get("EINSORA_LLM_API_KEY_FILE") or "/run/einsora/api-key")
    remove_stale_socket(socket)
    env = dict(os.environ)
    env.update(VLLM_API_KEY=key, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1")
    passed = [f"{flag}={value}" for flag, value in given.items()]
    os.umask(0o077)
    os.execve(VLLM[0], [*VLLM, "serve", model, f"--uds={socket}", *passed], env)


if __name__ == "__main__":
    main(sys.argv[1:])
