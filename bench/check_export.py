#!/usr/bin/python3
"""Cross-framework check of meridian's Hugging Face export: load model.safetensors + config.json into
a GPT written in plain PyTorch (bench/pytorch_reference.py) and score a text file with it.

  check_export.py EXPORT_DIR [--data FILE] [--limit N]
      prints {"loss": ..., "tokens": ...}: the mean next-token loss over consecutive non-overlapping
      windows of n_positions+1 bytes from the start of FILE, as `meridian eval` computes it.
  check_export.py --compare-with-meridian BIN --checkpoint RUN_DIR [--data FILE] [EXPORT_DIR]
      runs `BIN export` (into EXPORT_DIR, or a temporary directory) and `BIN eval` on the same
      checkpoint and data, and exits non-zero unless the two losses agree within 1e-4 relative.
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402

from pytorch_reference import GPT  # noqa: E402

REL_TOL = 1e-4
DEFAULT_DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "tinyshakespeare", "input.txt")


def read_safetensors(path):
    """Parses a safetensors file by hand: u64 LE header size, JSON header, then the raw tensor bytes."""
    with open(path, "rb") as f:
        blob = f.read()
    (header_len,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + header_len])
    data = memoryview(blob)[8 + header_len:]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] != "F32":
            raise ValueError(f"{path}: {name} is {info['dtype']}, expected F32")
        begin, end = info["data_offsets"]
        numel = 1
        for d in info["shape"]:
            numel *= d
        if end - begin != 4 * numel:
            raise ValueError(f"{path}: {name} has {end - begin} bytes for shape {info['shape']}")
        tensors[name] = torch.frombuffer(bytearray(data[begin:end]), dtype=torch.float32).view(info["shape"])
    return tensors


def load_export(export_dir):
    with open(os.path.join(export_dir, "config.json")) as f:
        cfg = json.load(f)
    # The model below is exactly this GPT-2 variant; refuse anything else rather than mis-score it.
    expected = {"activation_function": "gelu_new", "layer_norm_epsilon": 1e-5, "n_inner": None,
                "tie_word_embeddings": True}
    for key, value in expected.items():
        if cfg.get(key, value) != value:
            raise ValueError(f"config.json: {key} = {cfg[key]!r}, this checker handles {value!r}")
    model = GPT(cfg["n_layer"], cfg["n_head"], cfg["n_embd"], cfg["n_positions"], cfg["vocab_size"])
    tensors = read_safetensors(os.path.join(export_dir, "model.safetensors"))
    state = {name.removeprefix("transformer."): t for name, t in tensors.items() if name != "lm_head.weight"}
    model.load_state_dict(state, strict=True)  # every tensor present, with the shape meridian documents
    return model.eval(), cfg


@torch.no_grad()
def score(model, cfg, data_path, limit=0, batch=64):
    T = cfg["n_positions"]
    with open(data_path, "rb") as f:
        tokens = torch.frombuffer(bytearray(f.read()), dtype=torch.uint8).long()
    windows = tokens.numel() // (T + 1)
    if limit:
        windows = min(windows, limit)
    if windows == 0:
        raise ValueError(f"{data_path}: {tokens.numel()} bytes, fewer than one window of {T + 1}")
    w = tokens[:windows * (T + 1)].view(windows, T + 1)
    total = 0.0
    for i in range(0, windows, batch):
        chunk = w[i:i + batch]
        total += model(chunk[:, :-1], chunk[:, 1:]).double().item() * chunk.shape[0]
    return {"loss": total / windows, "tokens": windows * T}


def run(cmd):
    print("+ " + " ".join(cmd), file=sys.stderr)
    return subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("export_dir", nargs="?", help="directory with model.safetensors and config.json")
    p.add_argument("--data", default=DEFAULT_DATA, help="text file to score (bytes are tokens)")
    p.add_argument("--limit", type=int, default=0, help="score at most this many windows (0: all)")
    p.add_argument("--compare-with-meridian", metavar="BIN", help="meridian binary to export and evaluate with")
    p.add_argument("--checkpoint", help="run directory or checkpoint, with --compare-with-meridian")
    args = p.parse_args()

    if not args.compare_with_meridian:
        if not args.export_dir:
            p.error("EXPORT_DIR is required without --compare-with-meridian")
        model, cfg = load_export(args.export_dir)
        print(json.dumps(score(model, cfg, args.data, args.limit)))
        return 0

    if not args.checkpoint:
        p.error("--compare-with-meridian needs --checkpoint")
    if args.limit:
        p.error("--limit does not apply to --compare-with-meridian (meridian eval scores the whole file)")
    with tempfile.TemporaryDirectory(prefix="meridian-export-") as tmp:
        out = args.export_dir or tmp
        run([args.compare_with_meridian, "export", "--checkpoint", args.checkpoint, "--out", out])
        meridian = json.loads(run([args.compare_with_meridian, "eval", "--checkpoint", args.checkpoint,
                                   "--data", args.data]).strip().splitlines()[-1])
        model, cfg = load_export(out)
        torch_result = score(model, cfg, args.data)
    rel = abs(torch_result["loss"] - meridian["loss"]) / abs(meridian["loss"])
    ok = rel <= REL_TOL and torch_result["tokens"] == meridian["tokens"]
    print(json.dumps({"meridian": meridian, "pytorch": torch_result, "rel_diff": rel, "ok": ok}))
    if not ok:
        print(f"check_export: MISMATCH (relative difference {rel:.3g}, tolerance {REL_TOL:g}; tokens "
              f"{meridian['tokens']} vs {torch_result['tokens']})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
