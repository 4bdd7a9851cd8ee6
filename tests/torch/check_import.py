#!/usr/bin/python3
"""`meridian import`, `eval` and `export` against the PyTorch reference, on every directory
tests/torch/make_fixtures.py wrote:

  check_import.py MERIDIAN FIXTURES_DIR

For each variant: import (at the fixture's window), then `meridian eval` of the run directory
equals the reference's loss on the same windows within 1e-4 relative; export, import again and
export again gives the same bytes (import, export, import is bit-identical); the export holds the
fixture's weights exactly (in the dtype exported: F32, and BF16 for a BF16 fixture); and the
reference loads the export and scores what meridian scores. Prints one line per variant; exits 1
on any mismatch.
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402

from hf_reference import load_hf, read_safetensors  # noqa: E402

REL_TOL = 1e-4


def run(*cmd):
    return subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True).stdout


def meridian_eval(meridian, checkpoint, data, seq_len):
    out = run(meridian, "eval", "--checkpoint", checkpoint, "--data", data, "--seq-len", str(seq_len))
    return json.loads(out.strip().splitlines()[-1])


@torch.no_grad()
def torch_eval(model, data, T):
    with open(data, "rb") as f:
        tokens = torch.frombuffer(bytearray(f.read()), dtype=torch.uint8).long()
    n = tokens.numel() // (T + 1)
    w = tokens[: n * (T + 1)].view(n, T + 1)
    total = sum(model(w[i:i + 16, :-1], w[i:i + 16, 1:]).double().item() * w[i:i + 16].shape[0]
                for i in range(0, n, 16))
    return {"loss": total / n, "tokens": n * T}


def fixture_tensors(hf_dir):
    """{name without GPT-2's "transformer.": fp32 tensor} of a fixture, one file or shards."""
    index = os.path.join(hf_dir, "model.safetensors.index.json")
    files = sorted(set(json.load(open(index))["weight_map"].values())) if os.path.exists(index) else ["model.safetensors"]
    tensors = {}
    for f in files:
        tensors.update(read_safetensors(os.path.join(hf_dir, f)))
    return {k.removeprefix("transformer."): v for k, v in tensors.items()}


def check(meridian, fixtures, name, work):
    expected = json.load(open(os.path.join(fixtures, name, "expected.json")))
    T, dtype = expected["seq_len"], expected["dtype"]
    hf, data = os.path.join(fixtures, name, "hf"), os.path.join(fixtures, "data.txt")
    problems = []
    first, second = (os.path.join(work, name, d) for d in ("run1", "run2"))
    exported, again = os.path.join(work, name, "export"), os.path.join(work, name, "export-again")
    run(meridian, "import", hf, "--out", first, "--seq-len", str(T))
    got = meridian_eval(meridian, first, data, T)
    rel = abs(got["loss"] - expected["eval"]["loss"]) / expected["eval"]["loss"]
    if rel > REL_TOL or got["tokens"] != expected["eval"]["tokens"]:
        problems.append(f"eval {got} against PyTorch's {expected['eval']} (relative {rel:.3g})")

    export_dtype = "bf16" if dtype == "BF16" else "f32"
    run(meridian, "export", "--checkpoint", first, "--out", exported, "--dtype", export_dtype)
    run(meridian, "import", exported, "--out", second, "--seq-len", str(T))
    run(meridian, "export", "--checkpoint", second, "--out", again, "--dtype", export_dtype)
    a = open(os.path.join(exported, "model.safetensors"), "rb").read()
    b = open(os.path.join(again, "model.safetensors"), "rb").read()
    if a != b:
        problems.append("import, export, import, export changed the weights' bytes")

    original, written = fixture_tensors(hf), fixture_tensors(exported)
    if set(original) != set(written):
        problems.append(f"export names {sorted(set(written) ^ set(original))} differently")
    elif any(not torch.equal(original[k], written[k]) for k in original):
        problems.append("export does not hold the fixture's weights exactly")

    if export_dtype == "f32":  # the reference reads meridian's export and scores as meridian did
        ref = torch_eval(load_hf(exported), data, T)
        if abs(ref["loss"] - got["loss"]) / got["loss"] > REL_TOL:
            problems.append(f"PyTorch on meridian's export scores {ref}, meridian {got}")
    print(f"{name:18s} {dtype:4s} shards={expected['shards']}: meridian eval {got['loss']:.9f}, PyTorch "
          f"{expected['eval']['loss']:.9f} (relative {rel:.2g}); round trip "
          f"{'bit-identical' if a == b else 'DIFFERS'}{'; ' + '; '.join(problems) if problems else ''}")
    return not problems


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    meridian, fixtures = sys.argv[1], sys.argv[2]
    variants = json.load(open(os.path.join(fixtures, "variants.json")))
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="meridian-hf-") as work:
        ok = [check(meridian, fixtures, name, work) for name in variants]
    print(f"check_import: {sum(ok)} of {len(ok)} variants match")
    return 0 if all(ok) else 1


if __name__ == "__main__":
    sys.exit(main())
