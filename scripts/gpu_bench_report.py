#!/usr/bin/env python3
"""The results of scripts/gpu-bench.sh: LOGS/parts.jsonl (a line per part) and each part's log
(its last JSON line: bench_gpu's or the PyTorch peer's figures) become OUT/summary.json and
OUT/table.txt: every run's tokens/s, TFLOP/s, MFU and memory; meridian against torch.compile at
each micro-batch (the ratio); meridian's per-phase table; the kernel table of one step when Nsight
Compute ran; CURVE against plaintext from bench_transfer.

  gpu_bench_report.py LOGS OUT SECONDS
"""
import collections
import csv
import json
import re
import sys
from pathlib import Path

from gpu_report_io import write  # beside this script

# Kernel names by the group they belong to: the first pattern that matches.
KERNEL_GROUPS = [
    ("attention, fused (cuDNN) or tiled", r"sdpa|fmha|flash|tiled_(forward|backward)"),
    ("matmul", r"gemm|cutlass|sm90_xmma|nvjet|cublas"),
    ("attention softmax", r"softmax"),
    ("head permute", r"permute_heads|repeat(ed)?_heads"),
    ("cross-entropy", r"cross_entropy"),
    ("layernorm", r"layernorm|rmsnorm"),
    ("GELU / SwiGLU", r"gelu|swiglu"),
    ("rotary", r"rotate_kernel"),
    ("bias", r"broadcast_rows|column_sum|add_partials"),
    ("residual add", r"map_(packs|each)<.*\bAdd\b"),
    ("optimizer and norm", r"adamw|sum_squares|sum_partials|scale_kernel|to_(bf16|f16|f32)|unscale"),
    ("embedding", r"encoder|position_grad|token_grad|Radix|iota"),
]


def last_json(log):
    """The last line of a log that is a JSON object, or None."""
    found = None
    if not log.exists():
        return None
    for line in log.read_text(errors="replace").splitlines():
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            try:
                found = json.loads(line)
            except json.JSONDecodeError:
                pass
    return found


def lines_after(log, header):
    """The indented lines that follow `header` in a log (bench_gpu's phase table)."""
    if not log.exists():
        return []
    out, inside = [], False
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith(header):
            inside, out = True, [line]
        elif inside and line.startswith("  "):
            out.append(line)
        elif inside:
            inside = False
    return out


def kernel_table(log):
    """Nsight Compute's CSV rows in a log, summed by kernel group."""
    if not log.exists():
        return []
    rows = [l for l in log.read_text(errors="replace").splitlines() if l.startswith('"')]
    by, count = collections.Counter(), collections.Counter()
    for row in csv.DictReader(rows):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        name, ns = row["Kernel Name"], float(row["Metric Value"].replace(",", ""))
        group = next((g for g, rx in KERNEL_GROUPS if re.search(rx, name, re.I)), "other")
        if group == "matmul" and re.search(r"align[124](?!\d)", name):
            group = "matmul, a kernel for rows under 16-byte alignment"
        by[group] += ns
        count[group] += 1
    total = sum(by.values())
    if total == 0:
        return []
    out = [f"one B = 8 step by Nsight Compute: {total / 1e6:.2f} ms of kernel time"]
    for group, ns in by.most_common():
        out.append(f"  {group:52} {ns / 1e6:8.2f} ms {100 * ns / total:5.1f}%  ({count[group]} launches)")
    return out


def fmt_run(tag, r):
    mem = r.get("mem_gib", r.get("max_mem_gib"))
    step = r.get("step_ms", r.get("step_ms_median"))
    return (f"{tag:22} {r.get('B', ''):>3} {step:9.2f} {r['tokens_per_s']:10.0f} {r['tflops']:8.1f} "
            f"{100 * (r.get('mfu') or 0):5.1f}% {mem if mem is not None else '':>7}")


def read_lines(log):
    return log.read_text(errors="replace").splitlines() if log.exists() else []


def main():
    logs, out, seconds = Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3])
    parts = []
    if (logs / "parts.jsonl").exists():
        parts = [json.loads(l) for l in (logs / "parts.jsonl").read_text().splitlines() if l.strip()]
    runs = {}
    for p in parts:
        last = last_json(logs / f"{p['part']}.log")
        if p["status"] != "pass" and last and last.get("error"):  # the peer's own reason (an OOM, a compile error)
            p["detail"] = f"{p['detail']}: {str(last['error'])[:200]}"
        figures = last if p["status"] == "pass" else None
        if figures and "tokens_per_s" in figures and p["part"] != "ncu_b8":  # timed under the profiler
            p["figures"] = figures
            runs[p["part"]] = figures
    comparison = []
    for B in (8, 16, 32, 64):
        plain, flash, e, c = (runs.get(f"{k}_b{B}") for k in ("meridian", "meridian_cudnn", "torch_eager",
                                                              "torch_compile"))
        # meridian's figure at a B is its faster attention kernel's (the run says which ran).
        m = max((r for r in (plain, flash) if r), key=lambda r: r["tokens_per_s"], default=None)
        if m:
            comparison.append({
                "B": B, "meridian_tokens_per_s": m["tokens_per_s"], "meridian_mfu": m["mfu"],
                "meridian_attention": m.get("attention_run", m.get("attention")),
                "cudnn_over_materialized": plain and flash and round(flash["tokens_per_s"] / plain["tokens_per_s"], 3),
                "torch_eager_tokens_per_s": e and e["tokens_per_s"],
                "torch_compile_tokens_per_s": c and c["tokens_per_s"],
                "meridian_over_compile": c and round(m["tokens_per_s"] / c["tokens_per_s"], 3),
            })
    best = max(comparison, key=lambda row: row["meridian_tokens_per_s"], default=None)
    llama = None
    llama_runs = [runs[k] for k in ("meridian_llama_1b", "meridian_cudnn_llama_1b") if k in runs]
    if llama_runs:
        m, c = max(llama_runs, key=lambda r: r["tokens_per_s"]), runs.get("torch_llama_1b_compile")
        llama = {"meridian_tokens_per_s": m["tokens_per_s"], "meridian_mfu": m["mfu"],
                 "meridian_attention": m.get("attention_run", m.get("attention")),
                 "torch_compile_tokens_per_s": c and c["tokens_per_s"], "torch_compile_mfu": c and c["mfu"],
                 "meridian_over_compile": c and round(m["tokens_per_s"] / c["tokens_per_s"], 3)}
    # The output layer's lever at B = 8: rows padded to 64 (the default) against the stride of before.
    lever = None
    if "meridian_b8" in runs and "meridian_b8_unaligned" in runs:
        padded, unaligned = runs["meridian_b8"], runs["meridian_b8_unaligned"]
        lever = {"padded_tokens_per_s": padded["tokens_per_s"], "unaligned_tokens_per_s": unaligned["tokens_per_s"],
                 "gain": round(padded["tokens_per_s"] / unaligned["tokens_per_s"], 3)}
    # Each fusion at B = 64: the default (both on) against the run without it, same pass.
    fusions = {}
    for name, tag in (("bias_epilogue", "meridian_b64_no_bias_epilogue"), ("fused_loss", "meridian_b64_no_fused_loss")):
        if "meridian_b64" in runs and tag in runs:
            fusions[name] = round(runs["meridian_b64"]["tokens_per_s"] / runs[tag]["tokens_per_s"], 3)
    summary = {"seconds": seconds, "parts": parts, "comparison": comparison, "best_meridian": best,
               "llama_1b": llama, "padded_logits_b8": lever, "fusions_b64": fusions}
    write(out / "summary.json", json.dumps(summary, indent=2) + "\n")

    text = [f"gpu-bench: {len(parts)} parts in {seconds:.0f} s"]
    for p in parts:
        text.append(f"  {p['part']:22} {p['status']:8} {p['seconds']:7.1f} s  {p['detail']}")
    text += ["", f"{'run':22} {'B':>3} {'step ms':>9} {'tokens/s':>10} {'TFLOP/s':>8} {'MFU':>6} {'GiB':>7}"]
    text += [fmt_run(tag, r) for tag, r in runs.items()]
    if comparison:
        text += ["", "meridian against torch.compile at each B (tokens/s):"]
        for row in comparison:
            ratio = row["meridian_over_compile"]
            text.append(f"  B = {row['B']:2}: {row['meridian_tokens_per_s']:10.0f} against "
                        f"{row['torch_compile_tokens_per_s'] or 0:10.0f}: "
                        f"{'%.3f' % ratio if ratio else 'no torch.compile run'}"
                        f" (attention: {row['meridian_attention']}; cuDNN's over the materialized: "
                        f"{row['cudnn_over_materialized'] or 'not both run'})")
    if llama:
        ratio = llama["meridian_over_compile"]
        text.append(f"  llama3.2-1b, B = 4 x T = 2,048: {llama['meridian_tokens_per_s']:10.0f} against "
                    f"{llama['torch_compile_tokens_per_s'] or 0:10.0f}: "
                    f"{'%.3f' % ratio if ratio else 'no torch.compile run'}")
    if lever:
        text += ["", f"output layer rows padded to 64 at B = 8: {lever['padded_tokens_per_s']:.0f} tokens/s against "
                     f"{lever['unaligned_tokens_per_s']:.0f} unaligned: x{lever['gain']:.3f}"]
    if fusions:
        text += ["", "fusions at B = 64, tokens/s with it over without it: " +
                 ", ".join(f"{name} x{gain:.3f}" for name, gain in fusions.items())]
    for tag in ("meridian_b8", "meridian_cudnn_b8", "meridian_b8_unaligned", "meridian_b64", "meridian_cudnn_b64",
                "meridian_llama_1b", "meridian_cudnn_llama_1b"):
        table = lines_after(logs / f"{tag}.log", "device time by phase")
        if table:
            text += ["", f"{tag}:"] + table
    ncu = kernel_table(logs / "ncu_b8.log")
    if ncu:
        text += [""] + ncu
    elif any(p["part"] == "ncu_b8" and p["status"] != "skipped" for p in parts):
        errors = [l for l in read_lines(logs / "ncu_b8.log") if "==ERROR==" in l or "==WARNING==" in l]
        text += ["", "ncu_b8: no kernel rows" + (f" ({errors[0].strip()})" if errors else "")]
    transfer = logs / "bench_transfer.log"
    if transfer.exists():
        curve = [l for l in transfer.read_text(errors="replace").splitlines() if "CURVE" in l]
        if curve:
            text += ["", "bench_transfer:"] + curve
    write(out / "table.txt", "\n".join(text) + "\n")
    print("\n".join(text))


if __name__ == "__main__":
    main()
