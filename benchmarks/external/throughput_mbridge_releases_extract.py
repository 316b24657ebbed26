"""Extract the rows of Megatron Bridge's published performance summary for the container releases
the calibration CSV does not hold (26.04 onwards) into
benchmarks/external/data/throughput_mbridge_releases.csv (an external throughput set: the release
drift the constants never saw; nothing is fitted on it).

    python benchmarks/external/throughput_mbridge_releases_extract.py MIRROR

MIRROR: a bare git directory of github:NVIDIA-NeMo/Megatron-Bridge (the `fetch` tool's
/work/.mirror/NVIDIA-NeMo+Megatron-Bridge/repo). Read: docs/performance-summary.md (the newest
release) and docs/performance-summary-archive.md (the others). Each table row gives the system,
GPU count, precision, GBS, MBS, sequence length, (FSDP,) TP/PP/CP/VP/EP and tokens/s/GPU under a
"## <release> NeMo Container" heading, a "### Pre-Training/SFT/LoRA Performance" heading and a
"#### Model: <name>" heading. A model name the table below does not map is left out and counted.
"""

from __future__ import annotations

import csv
import re
import subprocess
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent / "data" / "throughput_mbridge_releases.csv"
DOCS = ("docs/performance-summary.md", "docs/performance-summary-archive.md")
CALIBRATED = ("25.09", "25.11", "26.02", "26.02.01")  # the releases of catalog/perf_calibration.csv
# the summary's model headings -> catalog model names
MODELS = {
    "LLAMA3_70B": "llama3_70b", "LLAMA3.1_405B": "llama31_405b", "DeepSeekV3": "deepseek_v3",
    "GPT OSS 120B": "gpt_oss_120b", "Qwen3_30B_a3B": "qwen3_30b_a3b", "Qwen3_235B_a22B": "qwen3_235b_a22b",
    "Kimi_K2": "kimi_k2", "Nemotron_3_Nano": "nemotron_3_nano", "Nemotron_3_Super": "nemotron_3_super",
    "Nemotron_3_Ultra": "nemotron_3_ultra", "Nemotron_3_5_Lightning": "nemotron_3_5_lightning",
    "DeepSeekV4 Flash": "deepseek_v4_flash",
}
GOALS = {"pre-training": "pretrain", "sft": "sft", "lora": "lora"}
PRECISIONS = {"fp8": "fp8cs", "fp8-cs": "fp8cs", "mxfp8": "fp8mx", "nvfp4": "nvfp4", "bf16": "bf16",
              "fp8-mx": "fp8mx", "fp8_cs": "fp8cs"}
COLUMNS = ("source", "commit", "path", "release", "model", "system", "gpus", "precision", "goal", "gbs", "mbs",
           "seq_length", "fsdp", "tp", "pp", "cp", "vp", "ep", "tokens_per_sec_per_gpu")


def _git(mirror: str, *args: str) -> str:
    return subprocess.run(["git", "-C", mirror, *args], capture_output=True, text=True, check=True).stdout


def _int(text: str) -> int:
    return int(text) if re.fullmatch(r"\d+", text.strip()) else 1


def rows_of(text: str, path: str, commit: str, skipped: list[str]) -> list[dict]:
    rows: list[dict] = []
    release = goal = model = None
    header: list[str] = []
    for line in text.splitlines():
        if m := re.match(r"^## (\d+\.\d+(?:\.\d+)?) NeMo Container", line):
            release, goal, model = m.group(1), None, None
        elif m := re.match(r"^### (.+?) Performance", line):
            goal = GOALS.get(m.group(1).strip().lower())
        elif m := re.match(r"^#### Model: (.+)$", line):
            model = m.group(1).strip()
        elif line.startswith("| System"):
            header = [c.strip().lower() for c in line.strip().strip("|").split("|")]
        elif line.startswith("| DGX-") and release and release not in CALIBRATED and header:
            cells = dict(zip(header, (c.strip() for c in line.strip().strip("|").split("|"))))
            if goal is None or model not in MODELS:
                skipped.append(f"{release} {model} ({goal}): not mapped")
                continue
            precision = PRECISIONS.get(cells["precision"].lower())
            if precision is None:
                skipped.append(f"{release} {model}: precision {cells['precision']}")
                continue
            rows.append({"source": "github:NVIDIA-NeMo/Megatron-Bridge", "commit": commit, "path": path,
                         "release": release, "model": MODELS[model], "system": cells["system"][4:].lower(),
                         "gpus": int(cells["#-gpus"]), "precision": precision, "goal": goal,
                         "gbs": int(cells["gbs"]), "mbs": int(cells["mbs"]),
                         "seq_length": int(cells["sequence length"]), "fsdp": _int(cells.get("fsdp", "0")) if
                         cells.get("fsdp", "").strip().isdigit() else 0,
                         "tp": _int(cells["tp"]), "pp": _int(cells["pp"]), "cp": _int(cells["cp"]),
                         "vp": _int(cells["vp"]), "ep": _int(cells["ep"]),
                         "tokens_per_sec_per_gpu": float(cells["tokens / sec / gpu"])})
    return rows


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__)
        return 2
    mirror = argv[0]
    commit = _git(mirror, "rev-parse", "HEAD").strip()
    rows: list[dict] = []
    skipped: list[str] = []
    for path in DOCS:
        rows.extend(rows_of(_git(mirror, "show", f"HEAD:{path}"), path, commit, skipped))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with OUT.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    for line in skipped:
        print(f"  left out {line}")
    print(f"wrote {OUT} ({len(rows)} rows, {len(skipped)} left out)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
