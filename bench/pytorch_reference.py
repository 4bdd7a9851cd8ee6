#!/usr/bin/python3
"""PyTorch reference for bench/bench_trainer.cpp: the same model, shape, batch and optimizer, timed
the same way (warm-up, then R runs of S steps, median tokens/s). Run with /usr/bin/python3 (Debian
python3-torch 1.13; scripts/setup.sh installs it). bench/check_export.py imports GPT from here;
--preset llama-small times tests/torch/hf_reference.py's Llama of meridian's llama-small shape.

The model is meridian's (core/model/gpt.cpp): token + position embeddings, pre-LN blocks, causal
multi-head attention with a fused qkv projection, tanh-GELU MLP of width 4C, final LayerNorm, logits
tied to wte. Linear weights are kept in meridian's / GPT-2's Conv1D layout [in, out] (y = x @ W + b)
and named as in meridian's export, so an exported state dict loads as is.
"""
import argparse
import ctypes
import math
import os
import sys
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="?", type=int, default=5, help="timed runs (default 5)")
    p.add_argument("steps", nargs="?", type=int, default=30, help="training steps per run (default 30)")
    p.add_argument("--torch-threads", type=int, default=2, help="torch.set_num_threads (default 2)")
    p.add_argument("--blas-threads", type=int, default=1,
                   help="OPENBLAS_NUM_THREADS, set before torch is imported (default 1)")
    p.add_argument("--preset", default="small", choices=["small", "llama-small"],
                   help="meridian's preset to time: the GPT reference shape or the Llama of its size")
    p.add_argument("--data", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                  "..", "data", "tinyshakespeare", "input.txt"))
    return p.parse_args()


if __name__ == "__main__":
    ARGS = parse_args()
    # OpenBLAS reads this once, when torch loads it. Debian's default OpenBLAS is the OpenMP build,
    # which ignores it and runs each BLAS call on torch's OpenMP threads (see bench/README.md).
    os.environ["OPENBLAS_NUM_THREADS"] = str(ARGS.blas_threads)

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

LN_EPS = 1e-5


class Conv1D(nn.Module):
    """GPT-2's linear layer: weight [n_in, n_out], y = x @ W + b."""

    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_in, n_out))
        self.bias = nn.Parameter(torch.zeros(n_out))

    def forward(self, x):
        return torch.addmm(self.bias, x.reshape(-1, x.shape[-1]), self.weight).view(*x.shape[:-1], -1)


class Block(nn.Module):
    def __init__(self, C, n_head, T):
        super().__init__()
        self.n_head = n_head
        self.ln_1 = nn.LayerNorm(C, eps=LN_EPS)
        self.attn = nn.Module()
        self.attn.c_attn = Conv1D(C, 3 * C)
        self.attn.c_proj = Conv1D(C, C)
        self.ln_2 = nn.LayerNorm(C, eps=LN_EPS)
        self.mlp = nn.Module()
        self.mlp.c_fc = Conv1D(C, 4 * C)
        self.mlp.c_proj = Conv1D(4 * C, C)
        self.register_buffer("mask", torch.ones(T, T, dtype=torch.bool).triu(1), persistent=False)

    def attention(self, x):
        B, T, C = x.shape
        hs = C // self.n_head
        q, k, v = self.attn.c_attn(x).split(C, dim=2)  # qkv row: [q | k | v], head h at h*hs
        q, k, v = (t.view(B, T, self.n_head, hs).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        att = att.masked_fill(self.mask[:T, :T], float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        return self.attn.c_proj(y)

    def forward(self, x):
        x = x + self.attention(self.ln_1(x))
        return x + self.mlp.c_proj(F.gelu(self.mlp.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, n_layer, n_head, d_model, seq_len, vocab):
        super().__init__()
        self.wte = nn.Embedding(vocab, d_model)
        self.wpe = nn.Embedding(seq_len, d_model)
        self.h = nn.ModuleList(Block(d_model, n_head, seq_len) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(d_model, eps=LN_EPS)

    def init_weights(self, seed):
        """meridian's init: N(0, 0.02) for matrices, 0.02/sqrt(2L) for c_proj, LN gains 1, biases 0."""
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if p.dim() == 1:
                    p.fill_(1.0 if name.endswith(".weight") else 0.0)
                else:
                    std = 0.02 / math.sqrt(2 * len(self.h)) if name.endswith("c_proj.weight") else 0.02
                    p.normal_(0.0, std, generator=g)

    def forward(self, idx, targets=None):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe.weight[:T]
        for block in self.h:
            x = block(x)
        logits = self.ln_f(x) @ self.wte.weight.t()  # tied output
        if targets is None:
            return logits
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1))


def blas_config():
    """The BLAS that torch calls (libblas.so.3), e.g. "OpenBLAS 0.3.21 ... USE_OPENMP ..."."""
    try:
        lib = ctypes.CDLL("libblas.so.3")
        lib.openblas_get_config.restype = ctypes.c_char_p
        return lib.openblas_get_config().decode()
    except (OSError, AttributeError):
        return "not OpenBLAS"


def main(args):
    torch.set_num_threads(args.torch_threads)
    torch.manual_seed(1337)
    L, NH, C, T, V, B = 4, 4, 128, 64, 256, 8  # the "small" preset, as bench_trainer
    with open(args.data, "rb") as f:
        data = torch.frombuffer(bytearray(f.read()), dtype=torch.uint8).long()
    offsets = torch.arange(T + 1)

    if args.preset == "llama-small":  # 2 key/value heads, SwiGLU 352, untied head (core/model/model_config.cpp)
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "torch"))
        from hf_reference import Llama, init_like_hf
        model = Llama({"vocab_size": V, "hidden_size": C, "intermediate_size": 352, "num_hidden_layers": L,
                       "num_attention_heads": NH, "num_key_value_heads": 2, "max_position_embeddings": T,
                       "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": False})
        init_like_hf(model, 1337)
    else:
        model = GPT(L, NH, C, T, V)
        model.init_weights(1337)
    decay = [p for p in model.parameters() if p.dim() == 2]  # matrices and embeddings, as meridian
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.95), eps=1e-8)

    def step():
        starts = torch.randint(0, data.numel() - T - 1, (B, 1))
        window = data[starts + offsets]
        loss = model(window[:, :-1], window[:, 1:])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss

    for _ in range(5):  # warm-up, as bench_trainer
        step()
    rates = []
    for _ in range(args.runs):
        t0 = time.perf_counter()
        for _ in range(args.steps):
            step()
        rates.append(args.steps * B * T / (time.perf_counter() - t0))
    rates.sort()
    n_params = sum(p.numel() for p in model.parameters())
    print(f"pytorch {torch.__version__}: preset {args.preset}, {L} layers, {NH} heads, {C} channels, context {T}, "
          f"vocab {V}, B={B}, {n_params} parameters")
    print(f"threads: torch.set_num_threads({torch.get_num_threads()}), "
          f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}, "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}; BLAS: {blas_config()}")
    print(f"pytorch: median {rates[len(rates) // 2]:.0f} tokens/s over {args.runs} runs of {args.steps} steps "
          f"(min {rates[0]:.0f}, max {rates[-1]:.0f})")
    return 0


if __name__ == "__main__":
    sys.exit(main(ARGS))
