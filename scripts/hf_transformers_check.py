#!/usr/bin/env python3
"""meridian's Hugging Face directories against transformers itself, on a machine that has it (the
GPU machine's image; scripts/gpu-check.sh runs this as its part "hf_transformers"):

  hf_transformers_check.py MERIDIAN WORK_DIR

For GPT-2 and for Llama (grouped-query, untied; multi-head, tied; Qwen 2's biases):
  1. export: a model written by the repository's PyTorch reference (tests/torch/hf_reference.py),
     imported by meridian and exported again, loads with transformers' from_pretrained, and its
     logits equal meridian's (`meridian eval --logits`) within 1e-4 relative;
  2. import: a random model of transformers' own, saved by save_pretrained (safetensors), imported
     by meridian, gives transformers' logits within 1e-4.
Prints one line per check and a JSON summary line; exits 1 on any mismatch, 2 without transformers.
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "torch"))

try:
    import torch
    import transformers
except ImportError as e:
    print(f"hf_transformers_check: {e}", file=sys.stderr)
    sys.exit(2)

from hf_reference import build, init_like_hf, save_hf  # noqa: E402

TOL = 1e-4
T, WINDOWS = 32, 4


def llama_config(tied, kv, model_type="llama"):
    return {"model_type": model_type, "architectures": ["Qwen2ForCausalLM" if model_type == "qwen2" else "LlamaForCausalLM"],
            "vocab_size": 256, "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
            "num_attention_heads": 4, "num_key_value_heads": kv, "max_position_embeddings": 128,
            "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "hidden_act": "silu", "tie_word_embeddings": tied}


def gpt2_config():
    return {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": 256, "n_positions": T,
            "n_ctx": T, "n_embd": 64, "n_layer": 2, "n_head": 4, "activation_function": "gelu_new",
            "layer_norm_epsilon": 1e-5, "tie_word_embeddings": True}


class CommandFailed(Exception):
    pass


def run(*cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:  # meridian's own words, not a bare exit status
        raise CommandFailed(f"{' '.join(cmd[:2])} exited {r.returncode}: {(r.stderr or r.stdout).strip()[-1500:]}")
    return r.stdout


def meridian_logits(meridian, model_dir, data, work, name):
    out = os.path.join(work, name + ".logits")
    run(meridian, "eval", "--checkpoint", model_dir, "--data", data, "--seq-len", str(T), "--batch", str(WINDOWS),
        "--logits", out)
    with open(out, "rb") as f:
        return torch.frombuffer(bytearray(f.read()), dtype=torch.float32).view(WINDOWS, T, -1)


@torch.no_grad()
def transformers_logits(model_dir, data):
    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir).eval()  # the config's float32
    with open(data, "rb") as f:
        tokens = torch.tensor(list(f.read()[: WINDOWS * (T + 1)]), dtype=torch.long).view(WINDOWS, T + 1)
    return model(tokens[:, :T]).logits.float()


def relative(a, b):
    return ((a - b).abs().max() / b.abs().max()).item()


def check_case(meridian, work, data, name, cfg):
    """(export against transformers, save_pretrained imported) relative errors for one config."""
    # 1. the reference writes it, meridian imports and exports it, transformers reads the export
    reference = build(cfg)
    init_like_hf(reference, 7)
    src, run_dir, export = (os.path.join(work, name, d) for d in ("reference", "run", "export"))
    save_hf(reference, src)
    run(meridian, "import", src, "--out", run_dir, "--seq-len", str(T))
    run(meridian, "export", "--checkpoint", run_dir, "--out", export)
    exported = relative(transformers_logits(export, data), meridian_logits(meridian, run_dir, data, work, name))
    # 2. transformers writes a random model of its own, meridian imports it
    hf_cfg = transformers.AutoConfig.for_model(**{k: v for k, v in cfg.items() if k != "architectures"})
    own = transformers.AutoModelForCausalLM.from_config(hf_cfg)
    saved, run2 = os.path.join(work, name, "saved"), os.path.join(work, name, "run2")
    own.save_pretrained(saved)  # safetensors, transformers' default
    run(meridian, "import", saved, "--out", run2, "--seq-len", str(T))
    imported = relative(meridian_logits(meridian, run2, data, work, name + "-saved"), transformers_logits(saved, data))
    return exported, imported


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    meridian, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    data = os.path.join(work, "data.txt")
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    with open(os.path.join(root, "data", "tinyshakespeare", "input.txt"), "rb") as f, open(data, "wb") as out:
        out.write(f.read()[:20000])
    torch.manual_seed(0)
    cases = {"gpt2": gpt2_config(), "llama-gqa-untied": llama_config(False, 2),
             "llama-mha-tied": llama_config(True, 4), "qwen2": llama_config(True, 2, "qwen2")}
    results, ok = {}, True
    for name, cfg in cases.items():
        try:  # one case's failure says why and leaves the others' results
            exported, imported = check_case(meridian, work, data, name, cfg)
        except Exception as e:  # noqa: BLE001: an import, export, eval or transformers error alike
            ok = False
            results[name] = {"ok": False, "error": f"{type(e).__name__}: {e}"}
            print(f"{name:18s} FAILED: {type(e).__name__}: {e}")
            continue
        good = exported <= TOL and imported <= TOL
        ok = ok and good
        results[name] = {"export_vs_transformers": exported, "save_pretrained_import": imported, "ok": good}
        print(f"{name:18s} export -> from_pretrained: {exported:.2e}; save_pretrained -> import: {imported:.2e} "
              f"(relative, bound {TOL:g}) {'ok' if good else 'MISMATCH'}")
    print(json.dumps({"transformers": transformers.__version__, "torch": torch.__version__, "cases": results}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
