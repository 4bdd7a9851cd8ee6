"""What scripts/gpu_bench_report.py and scripts/gpu_check_report.py share: their outputs are
rewritten after every part of a pass, whole or not at all."""


def write(path, text):
    """Through a temporary file and a rename: a loan may end mid-write."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)
