#!/usr/bin/python3
"""Writes the Hugging Face directories and expected figures that meridian's import, eval, export and
training are checked against (tests/core/test_torch_parity.cpp, tests/torch/check_import.py).

  make_fixtures.py OUT_DIR

For every variant (GPT-2 and the Llama family; F32, BF16, F16; one file and sharded; tied and
untied; multi-head, grouped-query and multi-query; Qwen 2's biases; Llama 3.1's rope scaling) it
trains the reference model 20 AdamW steps on windows of OUT_DIR/data.txt, rounds the weights to
the dtype the directory stores, writes OUT_DIR/<variant>/hf, and records in expected.json what the
next steps give: the logits of the next batch, then the losses of ten AdamW steps from these
weights with a fresh optimizer (the first is "PyTorch's next step"), the eval loss of data.txt,
and the logits at every position of twice the window of text (or the model's context).
The batches are OUT_DIR/<variant>/batches.bin: int32 tokens, STEPS x B x (T + 1).
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_reference import build, init_like_hf, round_to, save_hf  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
B, STEPS, PRETRAIN = 4, 10, 20
ADAMW = {"lr": 1e-3, "beta1": 0.9, "beta2": 0.95, "eps": 1e-8, "weight_decay": 0.1, "clip": 1.0}


def llama(layers, C, heads, kv, ffn, T, tied, model_type="llama", rope_scaling=None):
    cfg = {"model_type": model_type, "architectures": [{"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM",
                                                         "mistral": "MistralForCausalLM"}[model_type]],
           "vocab_size": 256, "hidden_size": C, "intermediate_size": ffn, "num_hidden_layers": layers,
           "num_attention_heads": heads, "num_key_value_heads": kv, "max_position_embeddings": 4 * T,
           "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "rope_scaling": rope_scaling, "hidden_act": "silu",
           "tie_word_embeddings": tied}
    if model_type == "qwen2":
        cfg.update(use_sliding_window=False, sliding_window=4 * T)
    if model_type == "mistral":
        cfg.update(sliding_window=None)
    return cfg, T


def gpt2(layers, C, heads, T):
    return {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": 256, "n_positions": T,
            "n_ctx": T, "n_embd": C, "n_layer": layers, "n_head": heads, "n_inner": None,
            "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5, "tie_word_embeddings": True}, T


LLAMA3_SCALING = {"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                  "original_max_position_embeddings": 16}

# name: (config and window, dtype, shards, GPT-2 names under "transformer.")
VARIANTS = {
    "llama-small": (llama(4, 128, 4, 2, 352, 64, False), "F32", 1, True),  # meridian's llama-small preset
    "llama-small-mha": (llama(4, 128, 4, 4, 352, 64, False), "F32", 2, True),
    "llama-tied-bf16": (llama(2, 64, 4, 2, 96, 32, True, rope_scaling=LLAMA3_SCALING), "BF16", 2, True),
    "llama-mqa-f16": (llama(2, 64, 4, 1, 96, 32, False), "F16", 1, True),
    "qwen2": (llama(2, 64, 4, 2, 96, 32, True, "qwen2"), "F32", 1, True),
    "mistral": (llama(2, 64, 4, 2, 96, 32, False, "mistral"), "BF16", 1, True),
    "gpt2": (gpt2(2, 64, 4, 32), "F32", 1, True),
    "gpt2-bf16-shards": (gpt2(2, 64, 4, 32), "BF16", 2, False),
    "gpt2-f16": (gpt2(2, 64, 4, 32), "F16", 1, True),
}


def windows(data, T, n, g):
    starts = torch.randint(0, data.numel() - T - 1, (n, 1), generator=g)
    return data[starts + torch.arange(T + 1)]


def adamw(model):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": ADAMW["weight_decay"]},
                              {"params": rest, "weight_decay": 0.0}], lr=ADAMW["lr"],
                             betas=(ADAMW["beta1"], ADAMW["beta2"]), eps=ADAMW["eps"])


def step(model, opt, batch):
    loss = model(batch[:, :-1], batch[:, 1:])
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), ADAMW["clip"])
    opt.step()
    return loss.item()


@torch.no_grad()
def eval_loss(model, data, T):
    n = data.numel() // (T + 1)
    w = data[: n * (T + 1)].view(n, T + 1)
    total = sum(model(w[i:i + 16, :-1], w[i:i + 16, 1:]).double().item() * w[i:i + 16].shape[0]
                for i in range(0, n, 16))
    return {"loss": total / n, "tokens": n * T}


def positions(cfg, T):
    return cfg.get("n_positions", cfg.get("max_position_embeddings", T))


@torch.no_grad()
def text_logits(model, data, length):
    """The logits at every position of `length` tokens of the text (from byte 1,000 on): what a
    decoder fed the same tokens one at a time must give, past the training window where the model
    has the positions."""
    ids = data[1000:1000 + length]
    return {"tokens": ids.tolist(), "logits": model(ids[None]).reshape(-1).tolist()}


def make(out, name, spec, data, seed):
    (cfg, T), dtype, shards, prefix = spec
    torch.manual_seed(seed)
    model = build(cfg)
    init_like_hf(model, seed)
    g = torch.Generator().manual_seed(seed)
    opt = adamw(model)
    for _ in range(PRETRAIN):
        step(model, opt, windows(data, T, B, g))
    round_to(model, dtype)  # what the directory will hold: the next steps start from exactly that
    save_hf(model, os.path.join(out, name, "hf"), dtype, shards, prefix)
    batches = windows(data, T, STEPS * B, g).to(torch.int32)
    with open(os.path.join(out, name, "batches.bin"), "wb") as f:
        f.write(batches.numpy().tobytes())
    with torch.no_grad():
        logits = model(batches[:B, :-1].long()).reshape(-1).tolist()
    evaluation = eval_loss(model, data, T)
    decode = text_logits(model, data, min(2 * T, positions(cfg, T)))
    opt = adamw(model)
    losses = [step(model, opt, batches[k * B:(k + 1) * B].long()) for k in range(STEPS)]
    expected = {"seq_len": T, "batch": B, "steps": STEPS, "dtype": dtype, "shards": shards, "adamw": ADAMW,
                "logits": logits, "losses": losses, "eval": evaluation, "decode": decode}
    with open(os.path.join(out, name, "expected.json"), "w") as f:
        json.dump(expected, f)


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(1)
    with open(os.path.join(ROOT, "data", "tinyshakespeare", "input.txt"), "rb") as f:
        text = f.read()[:40000]
    with open(os.path.join(out, "data.txt"), "wb") as f:
        f.write(text)
    data = torch.frombuffer(bytearray(text), dtype=torch.uint8).long()
    for i, (name, spec) in enumerate(VARIANTS.items()):
        make(out, name, spec, data, 1000 + i)
    with open(os.path.join(out, "variants.json"), "w") as f:
        json.dump(list(VARIANTS), f)
    print(f"make_fixtures: {len(VARIANTS)} variants in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
