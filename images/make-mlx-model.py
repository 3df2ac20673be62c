#!/usr/bin/env python3
"""Write a tiny random-weight llama-architecture model directory, as MLX models are published
(config.json, tokenizer.json, tokenizer_config.json, model.safetensors; ~0.3 MB).

Usage: make-mlx-model.py OUT_DIR [--seed N]

Its output is gibberish, but mlx-lm loads it like any real model, so the server, the files and
the protocol are real. Same seed, same bytes. Needs `numpy`, `safetensors` and `tokenizers`
(images/build makes target/pytools-images).
"""
import argparse
import json
import os

import numpy as np
from safetensors.numpy import save_file
from tokenizers import Tokenizer, decoders, models, pre_tokenizers

HIDDEN, LAYERS, HEADS, KV_HEADS, FF, CTX = 64, 2, 4, 2, 128, 2048
SPECIAL = ["<unk>", "<s>", "</s>"]
WORDS = ("hello world the a an is of to and in you i it say hi yes no model tiny answer "
         "user assistant system : . , ! ?").split()

CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }} : {{ m['content'] }} </s> {% endfor %}"
    "{% if add_generation_prompt %}assistant : {% endif %}"
)


def tokenizer(out):
    vocab = {w: i for i, w in enumerate(SPECIAL + WORDS)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##")  # joins words with spaces
    tok.save(os.path.join(out, "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
        "model_max_length": CTX, "chat_template": CHAT_TEMPLATE,
    }
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump(config, f, indent=1, sort_keys=True)
    return len(vocab)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=42)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    n_vocab = tokenizer(a.out)
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "hidden_size": HIDDEN, "num_hidden_layers": LAYERS, "intermediate_size": FF,
        "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS, "vocab_size": n_vocab,
        "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "max_position_embeddings": CTX,
        "tie_word_embeddings": True, "bos_token_id": 1, "eos_token_id": 2,
    }
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(config, f, indent=1, sort_keys=True)
    rng = np.random.default_rng(a.seed)
    w = lambda *shape: (rng.standard_normal(shape) * 0.02).astype(np.float32)
    head = HIDDEN // HEADS
    tensors = {"model.embed_tokens.weight": w(n_vocab, HIDDEN),
               "model.norm.weight": np.ones(HIDDEN, np.float32)}
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        tensors.update({
            p + "self_attn.q_proj.weight": w(HEADS * head, HIDDEN),
            p + "self_attn.k_proj.weight": w(KV_HEADS * head, HIDDEN),
            p + "self_attn.v_proj.weight": w(KV_HEADS * head, HIDDEN),
            p + "self_attn.o_proj.weight": w(HIDDEN, HEADS * head),
            p + "mlp.gate_proj.weight": w(FF, HIDDEN),
            p + "mlp.up_proj.weight": w(FF, HIDDEN),
            p + "mlp.down_proj.weight": w(HIDDEN, FF),
            p + "input_layernorm.weight": np.ones(HIDDEN, np.float32),
            p + "post_attention_layernorm.weight": np.ones(HIDDEN, np.float32),
        })
    save_file(tensors, os.path.join(a.out, "model.safetensors"), metadata={"format": "mlx"})


if __name__ == "__main__":
    main()
