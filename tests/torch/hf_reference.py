"""An independent PyTorch implementation of the models meridian trains, in Hugging Face's conventions,
and Hugging Face model directories written and read by hand (the machines running the tests have
PyTorch 1.13 but neither transformers nor safetensors).

  Llama: LlamaForCausalLM's modules and names (model.embed_tokens, model.layers.N.self_attn.q_proj,
         ..., model.norm, lm_head), RMSNorm in fp32, rotary embeddings in the rotate-half layout with
         Llama 3.1's frequency scaling, grouped-query attention by repeating key/value heads, SwiGLU;
         Qwen 2's q/k/v biases when the config's model_type is "qwen2".
  GPT-2: bench/pytorch_reference.py's GPT (Conv1D [in, out] weights), named as GPT2LMHeadModel's.

Nothing here imports meridian: the C++ side is checked against this, never the reverse.
"""
import json
import math
import os
import struct
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from pytorch_reference import GPT  # noqa: E402

DTYPES = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}
TORCH_DTYPE_NAMES = {"F32": "float32", "BF16": "bfloat16", "F16": "float16"}


def rope_inv_freq(cfg):
    """As transformers' _compute_default_rope_parameters and _compute_llama3_parameters."""
    hs = cfg["hidden_size"] // cfg["num_attention_heads"]
    base = cfg.get("rope_theta", 10000.0)
    inv_freq = 1.0 / (base ** (torch.arange(0, hs, 2, dtype=torch.int64).float() / hs))
    scaling = cfg.get("rope_scaling")
    if not scaling or scaling.get("rope_type", scaling.get("type")) == "default":
        return inv_freq
    factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    old_context = scaling["original_max_position_embeddings"]
    low_wavelen, high_wavelen = old_context / low, old_context / high
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
    smooth = (old_context / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
    return torch.where(medium, smoothed, scaled)


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class RMSNorm(nn.Module):
    def __init__(self, C, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(C))
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


class LlamaBlock(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        C, NH = cfg["hidden_size"], cfg["num_attention_heads"]
        KV = cfg.get("num_key_value_heads", NH)
        hs, bias = C // NH, cfg.get("model_type") == "qwen2"
        self.NH, self.KV, self.hs = NH, KV, hs
        self.input_layernorm = RMSNorm(C, cfg["rms_norm_eps"])
        self.self_attn = nn.Module()
        self.self_attn.q_proj = nn.Linear(C, NH * hs, bias=bias)
        self.self_attn.k_proj = nn.Linear(C, KV * hs, bias=bias)
        self.self_attn.v_proj = nn.Linear(C, KV * hs, bias=bias)
        self.self_attn.o_proj = nn.Linear(NH * hs, C, bias=False)
        self.post_attention_layernorm = RMSNorm(C, cfg["rms_norm_eps"])
        self.mlp = nn.Module()
        F_ = cfg["intermediate_size"]
        self.mlp.gate_proj = nn.Linear(C, F_, bias=False)
        self.mlp.up_proj = nn.Linear(C, F_, bias=False)
        self.mlp.down_proj = nn.Linear(F_, C, bias=False)

    def attention(self, x, cos, sin):
        B, T, _ = x.shape
        a = self.self_attn
        q = a.q_proj(x).view(B, T, self.NH, self.hs).transpose(1, 2)
        k = a.k_proj(x).view(B, T, self.KV, self.hs).transpose(1, 2)
        v = a.v_proj(x).view(B, T, self.KV, self.hs).transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        rep = self.NH // self.KV  # transformers' repeat_kv: query head h reads key/value head h // rep
        k = k[:, :, None].expand(B, self.KV, rep, T, self.hs).reshape(B, self.NH, T, self.hs)
        v = v[:, :, None].expand(B, self.KV, rep, T, self.hs).reshape(B, self.NH, T, self.hs)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(self.hs)
        mask = torch.ones(T, T, dtype=torch.bool).triu(1)
        att = att.masked_fill(mask, float("-inf")).softmax(dim=-1, dtype=torch.float32).to(q.dtype)
        return a.o_proj((att @ v).transpose(1, 2).reshape(B, T, self.NH * self.hs))

    def forward(self, x, cos, sin):
        x = x + self.attention(self.input_layernorm(x), cos, sin)
        h = self.post_attention_layernorm(x)
        return x + self.mlp.down_proj(F.silu(self.mlp.gate_proj(h)) * self.mlp.up_proj(h))


class Llama(nn.Module):
    """LlamaForCausalLM (and Qwen2ForCausalLM, MistralForCausalLM) from its config.json dict."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.model = nn.Module()
        self.model.embed_tokens = nn.Embedding(cfg["vocab_size"], cfg["hidden_size"])
        self.model.layers = nn.ModuleList(LlamaBlock(cfg) for _ in range(cfg["num_hidden_layers"]))
        self.model.norm = RMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])
        self.tied = cfg.get("tie_word_embeddings", False)
        if not self.tied:
            self.lm_head = nn.Linear(cfg["hidden_size"], cfg["vocab_size"], bias=False)
        self.register_buffer("inv_freq", rope_inv_freq(cfg), persistent=False)

    def forward(self, idx, targets=None):
        T = idx.shape[1]
        freqs = torch.outer(torch.arange(T).float(), self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        x = self.model.embed_tokens(idx)
        for block in self.model.layers:
            x = block(x, cos, sin)
        x = self.model.norm(x)
        logits = x @ (self.model.embed_tokens.weight if self.tied else self.lm_head.weight).t()
        if targets is None:
            return logits
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1))


class Gpt2(nn.Module):
    """GPT2LMHeadModel's names over bench/pytorch_reference.py's GPT (tied head, Conv1D weights)."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.transformer = GPT(cfg["n_layer"], cfg["n_head"], cfg["n_embd"], cfg["n_positions"], cfg["vocab_size"])

    def forward(self, idx, targets=None):
        return self.transformer(idx, targets)


def build(cfg):
    return Gpt2(cfg) if cfg["model_type"] == "gpt2" else Llama(cfg)


def init_like_hf(model, seed, std=0.02):
    """N(0, std) matrices and embeddings, unit norm gains, small random biases: every tensor carries signal."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2:
                p.normal_(0.0, std, generator=g)
            elif "norm" in name or "ln_" in name:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.02 * torch.randn(p.shape, generator=g))


def round_to(model, dtype_name):
    """Rounds the weights to the dtype they will be stored in, so the reference scores what the file holds."""
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.to(DTYPES[dtype_name]).float())


def hf_state(model, with_prefix=True):
    """{Hugging Face name: tensor}; GPT-2's under "transformer." unless with_prefix is False."""
    state = dict(model.state_dict())
    if isinstance(model, Gpt2) and not with_prefix:
        state = {k.removeprefix("transformer."): v for k, v in state.items()}
    return state


def tensor_bytes(t, dtype_name):
    t = t.detach().to(DTYPES[dtype_name]).contiguous()
    if dtype_name == "F32":
        return t.numpy().tobytes()
    return t.view(torch.int16).numpy().tobytes()  # numpy has no bfloat16; the bits are what the file holds


def write_safetensors(path, tensors, dtype_name):
    header, chunks, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, t in tensors.items():
        data = tensor_bytes(t, dtype_name)
        header[name] = {"dtype": dtype_name, "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    blob = json.dumps(header).encode()
    blob += b" " * ((8 - len(blob) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        for c in chunks:
            f.write(c)


def save_hf(model, out_dir, dtype_name="F32", shards=1, with_prefix=True):
    """config.json and the weights as one model.safetensors or `shards` files with an index."""
    os.makedirs(out_dir, exist_ok=True)
    cfg = dict(model.cfg, torch_dtype=TORCH_DTYPE_NAMES[dtype_name])
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    state = hf_state(model, with_prefix)
    if shards == 1:
        write_safetensors(os.path.join(out_dir, "model.safetensors"), state, dtype_name)
        return
    names = list(state)
    weight_map = {}
    for s in range(shards):
        part = names[s::shards]
        file = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        write_safetensors(os.path.join(out_dir, file), {n: state[n] for n in part}, dtype_name)
        weight_map.update({n: file for n in part})
    with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f, indent=2)


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    data = memoryview(blob)[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        raw = bytearray(data[begin:end])
        if info["dtype"] == "F32":
            t = torch.frombuffer(raw, dtype=torch.float32)
        else:
            t = torch.frombuffer(raw, dtype=torch.int16).view(DTYPES[info["dtype"]]).float()
        out[name] = t.reshape(info["shape"])
    return out


def load_hf(model_dir):
    """A model from a directory save_hf or `meridian export` wrote (single file, F32 or BF16)."""
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    model = build(cfg)
    state = read_safetensors(os.path.join(model_dir, "model.safetensors"))
    model.load_state_dict(state, strict=True)
    return model.eval()
