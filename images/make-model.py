#!/usr/bin/env python3
"""Write a tiny random-weight llama-architecture GGUF model (~0.5 MB).

Usage: make-model.py OUT.gguf [--seed N]

Its output is gibberish, but llama.cpp loads it like any real model, so the
server, the files and the protocol are real. Same seed, same bytes.
Needs the `gguf` and `numpy` packages (images/build makes target/pytools-images).
"""
import argparse
import os

import gguf
import numpy as np

N_EMBD, N_LAYER, N_HEAD, N_HEAD_KV, N_FF, N_CTX = 64, 2, 4, 2, 192, 2048

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}</s>\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


def vocab():
    """SentencePiece-style vocab: controls, the 256 byte-fallback tokens, a few pieces."""
    toks = [("<unk>", gguf.TokenType.UNKNOWN), ("<s>", gguf.TokenType.CONTROL),
            ("</s>", gguf.TokenType.CONTROL)]
    toks += [(f"<0x{b:02X}>", gguf.TokenType.BYTE) for b in range(256)]
    pieces = ["\u2581"] + [chr(c) for c in range(ord("a"), ord("z") + 1)]
    pieces += ["\u2581" + w for w in
               "the a to of and is in it you that hello world model token einsora".split()]
    pieces += ["<|system|>", "<|user|>", "<|assistant|>"]
    toks += [(p, gguf.TokenType.NORMAL) for p in pieces]
    return toks


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=1234)
    a = ap.parse_args()

    rng = np.random.default_rng(a.seed)
    toks = vocab()
    n_vocab = len(toks)
    head_dim = N_EMBD // N_HEAD

    def w(*shape):  # numpy shape is ggml's ne reversed: (rows, cols)
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    tmp = a.out + ".tmp"
    wr = gguf.GGUFWriter(tmp, "llama")
    wr.add_name("einsora-tiny-random")
    wr.add_context_length(N_CTX)
    wr.add_embedding_length(N_EMBD)
    wr.add_block_count(N_LAYER)
    wr.add_feed_forward_length(N_FF)
    wr.add_head_count(N_HEAD)
    wr.add_head_count_kv(N_HEAD_KV)
    wr.add_rope_dimension_count(head_dim)
    wr.add_layer_norm_rms_eps(1e-5)
    wr.add_file_type(gguf.LlamaFileType.ALL_F32)

    wr.add_tokenizer_model("llama")
    wr.add_token_list([t for t, _ in toks])
    wr.add_token_scores([0.0 if ty != gguf.TokenType.NORMAL else -float(i) for i, (_, ty) in enumerate(toks)])
    wr.add_token_types([int(ty) for _, ty in toks])
    wr.add_unk_token_id(0)
    wr.add_bos_token_id(1)
    wr.add_eos_token_id(2)
    wr.add_add_bos_token(True)
    wr.add_chat_template(CHAT_TEMPLATE)

    wr.add_tensor("token_embd.weight", w(n_vocab, N_EMBD))
    for i in range(N_LAYER):
        p = f"blk.{i}."
        wr.add_tensor(p + "attn_norm.weight", np.ones(N_EMBD, np.float32))
        wr.add_tensor(p + "attn_q.weight", w(N_HEAD * head_dim, N_EMBD))
        wr.add_tensor(p + "attn_k.weight", w(N_HEAD_KV * head_dim, N_EMBD))
        wr.add_tensor(p + "attn_v.weight", w(N_HEAD_KV * head_dim, N_EMBD))
        wr.add_tensor(p + "attn_output.weight", w(N_EMBD, N_HEAD * head_dim))
        wr.add_tensor(p + "ffn_norm.weight", np.ones(N_EMBD, np.float32))
        wr.add_tensor(p + "ffn_gate.weight", w(N_FF, N_EMBD))
        wr.add_tensor(p + "ffn_up.weight", w(N_FF, N_EMBD))
        wr.add_tensor(p + "ffn_down.weight", w(N_EMBD, N_FF))
    wr.add_tensor("output_norm.weight", np.ones(N_EMBD, np.float32))
    wr.add_tensor("output.weight", w(n_vocab, N_EMBD))

    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()
    os.replace(tmp, a.out)
    print(f"{a.out}: {os.path.getsize(a.out)} bytes, {n_vocab} tokens")


if __name__ == "__main__":
    main()
