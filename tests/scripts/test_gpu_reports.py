#!/usr/bin/env python3
"""The GPU passes' report scripts on logs of the programs' own formats, here without a GPU: what a
loan returns is only what these scripts make of its logs, so a parsing slip loses a loan's figures.

  test_gpu_reports.py        (ctest: gpu_reports; exits 1 on the first failed check)
"""
import json
import subprocess
import sys
import tempfile
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def bench_line(B, tokens, attention="materialized", **extra):
    """bench_gpu's last line (bench/bench_gpu.cpp's printf)."""
    return json.dumps({"preset": "gpt2", "precision": "bf16", "attention": attention, "attention_run": attention,
                       "B": B, "T": 1024, "logits_align": 64, "bias_epilogue": 1, "fused_loss": 1,
                       "params": 124475904, "tokens_per_s": tokens, "tflops": tokens * 8.8e-7, "mfu": tokens * 9e-10,
                       "step_ms": B * 1024 / tokens * 1e3, "mem_gib": 10.0, "phases_ms": {"AdamW": 1.0}, **extra})


def write_parts(logs, parts):
    logs.mkdir(parents=True, exist_ok=True)
    rows = []
    for name, status, log in parts:
        rows.append(json.dumps({"part": name, "status": status, "seconds": 1.0, "detail": "", "figures": {}}))
        (logs / f"{name}.log").write_text(log)
    (logs / "parts.jsonl").write_text("\n".join(rows) + "\n")


def run(script, *args):
    subprocess.run([sys.executable, str(SCRIPTS / script), *map(str, args)], check=True, stdout=subprocess.DEVNULL)


def check(ok, what):
    if not ok:
        print(f"FAILED: {what}")
        sys.exit(1)
    print(f"ok: {what}")


def bench_report(tmp):
    logs, out = tmp / "bench-logs", tmp / "bench-out"
    out.mkdir()
    ncu_csv = "\n".join([
        '"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"',
        '"0","void meridian::kernels::cuda::map_packs<__nv_bfloat16, meridian::kernels::cuda::(anonymous '
        'namespace)::Add>(T1 *, const T1 *, const T1 *, unsigned long, T2)","gpu__time_duration.sum","ns","2,000"',
        '"1","cudnn_generated_fort_native_sdpa_sm90_knob_7_64x128x64_4x1x1_kernel0_0","gpu__time_duration.sum",'
        '"ns","6,000"',
        '"2","sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_cublas","gpu__time_duration.sum","ns",'
        '"12,000"'])
    write_parts(logs, [
        ("meridian_b64", "pass", "device time by phase (ms a step):\n  AdamW 1.0\n" + bench_line(64, 400000.0)),
        ("meridian_cudnn_b64", "pass", bench_line(64, 500000.0, "cudnn")),
        ("torch_compile_b64", "pass", json.dumps({"bench": "torch_gpt_gpu", "B": 64, "tokens_per_s": 450000.0,
                                                 "tflops": 390.0, "mfu": 0.39, "step_ms_median": 145.0})),
        ("meridian_b8_unaligned", "pass", bench_line(8, 150000.0)),
        ("meridian_b8", "pass", bench_line(8, 200000.0)),
        ("ncu_b8", "pass", ncu_csv + "\n" + bench_line(8, 1000.0)),
        ("torch_compile_b8", "fail", json.dumps({"bench": "torch_gpt_gpu", "B": 8, "error": "oom"})),
    ])
    run("gpu_bench_report.py", logs, out, 100)
    summary = json.loads((out / "summary.json").read_text())
    table = (out / "table.txt").read_text()
    row = next(r for r in summary["comparison"] if r["B"] == 64)
    check(row["meridian_tokens_per_s"] == 500000.0 and row["meridian_over_compile"] == round(500 / 450, 3),
          "meridian's faster kernel at B = 64 against torch.compile")
    check(summary["padded_logits_b8"]["gain"] == round(200 / 150, 3), "the padded output layer's gain at B = 8")
    check(summary["best_meridian"]["B"] == 64, "the best micro-batch")
    ncu_part = next(p for p in summary["parts"] if p["part"] == "ncu_b8")
    check(ncu_part["figures"] == {} and "\nncu_b8 " not in table, "the profiled step is no throughput run")
    check(all(g in table for g in ("residual add", "attention, fused (cuDNN) or tiled", "matmul")),
          "Nsight's kernels fall in their groups")
    check("device time by phase" in table, "the phase table is carried into table.txt")
    check(not list(out.glob("*.tmp")), "no half-written file is left")
    check("torch_compile_b8" in table and ": oom" in table, "a failed peer's own reason is in the table")

    # The profiler ran but wrote no rows: said so, with its own error.
    write_parts(logs, [("ncu_b8", "pass", "==ERROR== Failed to initialize the profiler\n")])
    run("gpu_bench_report.py", logs, out, 1)
    check("no kernel rows (==ERROR== Failed to initialize the profiler)" in (out / "table.txt").read_text(),
          "an ncu run without rows says why")


def check_report(tmp):
    work, out = tmp / "check", tmp / "check-out"
    out.mkdir()
    suite_log = "\n".join([
        "=== test_cuda_models",
        "parity test_cuda_models.cpp:90 gpu_grads err 4.500e-07 tol 1.0e-04",
        "parity test_cuda_models.cpp:57 each tensor's gradient (worst: h.0.attn.c_attn.weight) err 2.0e-06 tol 1.0e-03",
        "[doctest] test cases:  8 |  8 passed | 0 failed | 0 skipped"])
    hf_log = "\n".join([
        "gpt2               export -> from_pretrained: 3.10e-07; save_pretrained -> import: 2.90e-07 "
        "(relative, bound 0.0001) ok",
        "qwen2              FAILED: CommandFailed: meridian import exited 1: config.json: unknown model_type",
        json.dumps({"transformers": "5.17.0", "torch": "2.11.0", "cases": {"gpt2": {"ok": True},
                                                                         "qwen2": {"ok": False, "error": "x"}}})])
    write_parts(work / "logs", [
        ("suite", "pass", suite_log),
        ("memcheck_kernels", "pass", "========= ERROR SUMMARY: 0 errors\n"),
        ("racecheck_llama_kernels", "pass", "========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)\n"),
        ("hf_transformers", "fail", hf_log),
        ("train_gpu_fp32", "pass", ""),  # its CPU twin still training: no verdict yet
    ])
    run("gpu_check_report.py", work, out, 100)
    parts = {p["part"]: p for p in json.loads((out / "summary.json").read_text())["parts"]}
    suite = parts["suite"]["figures"]
    check(suite["parity_checks"] == 2 and abs(suite["worst_err_over_tol"] - 4.5e-3) < 1e-12,
          "both parity lines, the per-tensor one included, and the worst ratio")
    check(parts["memcheck_kernels"]["status"] == "pass", "a clean memcheck passes")
    check(parts["racecheck_llama_kernels"]["status"] == "fail", "a hazard fails a racecheck that exited 0")
    check(parts["train_gpu_fp32"]["status"] == "pass" and "had not finished" in parts["train_gpu_fp32"]["figures"]["note"],
          "a GPU run is not judged before its CPU twin has finished")
    hf = parts["hf_transformers"]["figures"]
    check(any("FAILED" in l for l in hf["lines"]) and hf["cases"]["qwen2"]["ok"] is False,
          "a failed transformers case keeps its reason")


def main():
    with tempfile.TemporaryDirectory() as d:
        bench_report(Path(d))
        check_report(Path(d))
    return 0


if __name__ == "__main__":
    sys.exit(main())
