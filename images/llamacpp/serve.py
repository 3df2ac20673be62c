#!/usr/bin/env python3
"""Serve /model/model.gguf with llama.cpp's own HTTP server (xllamacpp) on a Unix socket.

Contract:
  socket path  --socket, else $EINSORA_LLM_SOCKET, else /run/einsora/llm.sock (must end in .sock)
  API key      first line of --api-key-file, else $EINSORA_LLM_API_KEY_FILE,
               else /run/einsora/api-key. The key itself never goes through env or argv.
  model        /model/model.gguf (mount it read-only), or --model where there is no mount (a Mac)
  limits       --ctx-size (total, split over --parallel slots), --n-predict (default
               max_tokens), --parallel, --threads (default 1)
  routes       /v1/chat/completions (tools and tool_choice through the model's own Jinja chat
               template), /v1/completions, and /v1/embeddings from the same server and model
               (--no-embeddings turns it off). Embeddings pool the model's way when its GGUF
               names one, else by --pooling (default mean): llama.cpp's default for a
               generative model, no pooling, is refused on the OpenAI route.
"""
import argparse
import os
import signal
import stat
import struct
import sys
import threading

MODEL = "/model/model.gguf"
# llama.cpp's enum llama_pooling_type.
POOLING = {"none": 0, "mean": 1, "cls": 2, "last": 3, "rank": 4}


def env_default(name, fallback):
    return os.environ.get(name) or fallback


def parse():
    ap = argparse.ArgumentParser()
    ap.add_argument("--socket", default=env_default("EINSORA_LLM_SOCKET", "/run/einsora/llm.sock"))
    ap.add_argument("--api-key-file",
                    default=env_default("EINSORA_LLM_API_KEY_FILE", "/run/einsora/api-key"))
    ap.add_argument("--model", default=MODEL, help="the GGUF file")
    ap.add_argument("--alias", default="einsora-local", help="model id in /v1/models")
    ap.add_argument("--ctx-size", type=int, default=2048, help="total context, shared by slots")
    ap.add_argument("--n-predict", type=int, default=256, help="max_tokens when a request sets none")
    ap.add_argument("--parallel", type=int, default=1, help="concurrent request slots")
    ap.add_argument("--threads", type=int, default=1, help="CPU threads for inference")
    ap.add_argument("--no-embeddings", dest="embeddings", action="store_false",
                    help="don't serve /v1/embeddings")
    ap.add_argument("--pooling", choices=("mean", "cls", "last"), default="mean",
                    help="how embeddings pool, where the model names no way of its own")
    a = ap.parse_args()
    if not a.socket.endswith(".sock"):
        ap.error("--socket must end in .sock (llama.cpp binds a Unix socket only then)")
    for name in ("ctx_size", "n_predict", "parallel", "threads"):
        if getattr(a, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be >= 1")
    return a


def read_key(path):
    with open(path, encoding="utf-8") as f:
        key = f.readline().strip()
    if not key:
        sys.exit(f"serve.py: empty API key in {path}")
    return key


def gguf_pooling(path):
    """The pooling type the GGUF's metadata names (`<arch>.pooling_type`), else None.

    Reads the header only, warily: a file that doesn't parse names none."""
    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
    try:
        with open(path, "rb") as f:
            end = os.fstat(f.fileno()).st_size

            def take(n):
                if n < 0 or f.tell() + n > end:
                    raise ValueError("past the end")
                return f.read(n)

            def u32():
                return struct.unpack("<I", take(4))[0]

            def u64():
                return struct.unpack("<Q", take(8))[0]

            def skip(kind):
                if kind == 8:
                    take(u64())
                elif kind == 9:
                    item, count = u32(), u64()
                    if item in sizes:
                        take(sizes[item] * count)
                    else:
                        for _ in range(count):
                            skip(item)
                elif kind in sizes:
                    take(sizes[kind])
                else:
                    raise ValueError(f"unknown type {kind}")

            if take(4) != b"GGUF" or u32() < 2:
                return None
            u64()  # tensors
            for _ in range(u64()):
                key = take(u64()).decode("utf-8", "replace")
                kind = u32()
                if key.endswith(".pooling_type") and kind in (4, 5):
                    return struct.unpack("<i" if kind == 5 else "<I", take(4))[0]
                skip(kind)
    except (OSError, ValueError, struct.error):
        return None
    return None


def remove_stale_socket(path):
    # llama.cpp never unlinks its socket, so a restart would fail on the old file.
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(st.st_mode):
        sys.exit(f"serve.py: {path} exists and is not a socket; refusing to remove it")
    os.unlink(path)


def main():
    a = parse()
    key = read_key(a.api_key_file)
    if not os.path.isfile(a.model):
        sys.exit(f"serve.py: no model at {a.model}")
    remove_stale_socket(a.socket)

    import xllamacpp as xlc

    p = xlc.CommonParams()
    p.model.path = a.model
    p.model_alias = {a.alias}
    p.hostnames = [a.socket]  # ends in .sock: AF_UNIX, no TCP port
    p.api_keys = [key]
    p.n_ctx = a.ctx_size
    # n_predict is the default for requests that set no max_tokens; a request may ask for
    # more. The hard cap per request is the slot's context (ctx_size / parallel): with
    # context shift off, generation stops when the slot is full.
    p.n_predict = a.n_predict
    p.ctx_shift = False
    p.n_parallel = a.parallel
    p.cpuparams.n_threads = a.threads
    p.cpuparams_batch.n_threads = a.threads
    p.n_threads_http = a.parallel + 2
    p.ui = False
    p.endpoint_slots = False  # slot dumps show other clients' prompts
    p.endpoint_metrics = False
    p.offline = True
    p.cache_ram_mib = 0  # no host-RAM prompt cache (default 8 GiB); KV reuse per slot stays
    p.use_jinja = True  # the model's own template: tools, tool_choice and tool calls
    pooling = None
    if a.embeddings:
        # One server serves embeddings and generation alike (llama.cpp turns embeddings on
        # per batch that asks for them).
        p.embedding = True
        named = gguf_pooling(a.model)
        pooling = named if named not in (None, POOLING["none"]) else POOLING[a.pooling]
        p.pooling_type = pooling

    os.umask(0o177)  # the socket is created 0600
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    server = xlc.Server(p)
    print(f"serve.py: listening on {a.socket} model={a.model} ctx={a.ctx_size} "
          f"n_predict={a.n_predict} parallel={a.parallel} threads={a.threads} "
          f"embeddings={'off' if pooling is None else pooling}", flush=True)
    stop.wait()
    del server
    try:
        os.unlink(a.socket)
    except FileNotFoundError:
        pass


if __name__ == "__main__":
    main()
