"""Extract measured step times and layouts from MLPerf Training results into
benchmarks/external/data/throughput_mlperf.csv (an external throughput set: nothing is fitted on it).

    python benchmarks/external/throughput_mlperf_extract.py MIRROR [MIRROR ...]

MIRROR: a bare git directory of github:mlcommons/training_results_v4.1 or _v5.1 (the `fetch`
tool's /work/.mirror/mlcommons+training_results_v5.1/repo). For every NVIDIA-GPU submission of
the benchmarks below (any submitter), per results/<system>/<benchmark>/:

- GPU kind and count: systems/<system>.json (accelerator name, nodes x accelerators per node);
- global batch and sequence length: the result logs' `global_batch_size` and
  `max_sequence_length` (the benchmark's fixed length where a log has none);
- step time: the median of the logs' `tracked_stats` `train_step_time` (v5.1) or
  `train_step_timing in s` (v4.1 GPT-3) values, or global
  batch / `throughput` (v4.1 logs: samples/s per training block), per log, then the median over
  the logs (the first step of a log includes warm-up; the median ignores it);
- layout and precision: the submitter's config_*.sh of that benchmark whose nodes x GPUs and
  global batch (MINIBS x data-parallel size, MLPerf's convention) match, `source`d includes
  followed, and not one whose file name names another GPU kind (config_GB200_* for a GB300
  system); where several match, those whose file name names the system's GPU kind. A submission whose configs leave the layout or precision ambiguous (two matching
  configs that differ) is left out and counted, never guessed.

The CSV names the repository, commit and paths of each row's log folder and config.
"""

from __future__ import annotations

import csv
import json
import re
import statistics
import subprocess
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent / "data" / "throughput_mlperf.csv"

# benchmark -> (catalog model, goal, sequence length when the log has none)
BENCHMARKS = {
    "llama31_405b": ("llama31_405b", "pretrain", 8192),
    "llama31_8b": ("llama31_8b", "pretrain", 8192),
    "gpt3": ("gpt3_175b", "pretrain", 2048),
    "llama2_70b_lora": ("llama2_70b", "lora", 8192),
}
GPU_KINDS = ("gb300", "gb200", "b300", "b200", "h200", "h100")  # longest names first: "gb200" before "b200"
COLUMNS = ("source", "commit", "log_path", "config_path", "submitter", "benchmark", "model", "system", "gpus",
           "precision", "goal", "gbs", "mbs", "seq_length", "tp", "pp", "cp", "vp", "ep", "fsdp", "logs",
           "step_time_s", "tokens_per_sec_per_gpu")
# config variables, under the names the submitters' configs use
ALIASES = {
    "tp": ("TENSOR_MODEL_PARALLEL", "TP"), "pp": ("PIPELINE_MODEL_PARALLEL", "PP"),
    "cp": ("CONTEXT_PARALLEL", "CP"), "vp": ("INTERLEAVED_PIPELINE", "VP", "VIRTUAL_PIPELINE"),
    "mbs": ("MICRO_BATCH_SIZE", "MBS"), "minibs": ("MINIBS",), "nodes": ("DGXNNODES",), "gpn": ("DGXNGPU",),
}


class Mirror:
    def __init__(self, path: str) -> None:
        self.path = path
        self.commit = self._git("rev-parse", "HEAD").strip()
        self.files = self._git("ls-tree", "-r", "--name-only", "HEAD").splitlines()
        url = self._git("config", "--get", "remote.origin.url").strip() if self._has_remote() else ""
        self.source = url or "github:mlcommons/" + Path(path).parent.name.split("+", 1)[-1]

    def _has_remote(self) -> bool:
        return subprocess.run(["git", "-C", self.path, "config", "--get", "remote.origin.url"],
                              capture_output=True).returncode == 0

    def _git(self, *args: str) -> str:
        return subprocess.run(["git", "-C", self.path, *args], capture_output=True, text=True, check=True).stdout

    def read(self, name: str) -> str:
        """The file's text; "" for one the snapshot lists but does not hold (its largest files)."""
        try:
            return self._git("show", f"HEAD:{name}")
        except subprocess.CalledProcessError:
            return ""


def gpu_kind(system_json: dict) -> str | None:
    name = str(system_json.get("accelerator_model_name", "")).lower().replace(" ", "").replace("-", "")
    return next((k for k in GPU_KINDS if k in name), None)


def names_kind(filename: str, kind: str) -> bool:
    """Whether a config's file name names GPU `kind` ("config_GB200_..." names gb200, not b200)."""
    return re.search(rf"(?<![a-z]){kind}(?![0-9])", filename.lower().replace("dgx", "")) is not None


def names_other_kind(filename: str, kind: str) -> bool:
    """Whether a config's file name names a GPU kind other than `kind` and not `kind` itself."""
    return not names_kind(filename, kind) and any(names_kind(filename, k) for k in GPU_KINDS if k != kind)


def log_figures(text: str) -> tuple[int | None, int | None, float | None]:
    """(global batch, sequence length, median train_step_time) of one MLPerf result log."""
    gbs = seq = None
    steps: list[float] = []
    rates: list[float] = []
    for line in text.splitlines():
        if ":::MLLOG" not in line:
            continue
        try:
            entry = json.loads(line.split(":::MLLOG", 1)[1])
        except ValueError:
            continue
        key, value = entry.get("key"), entry.get("value")
        if key == "global_batch_size":
            gbs = int(value)
        elif key == "max_sequence_length":
            seq = int(value)
        elif key == "tracked_stats" and isinstance(value, dict) and STEP_KEYS & value.keys():
            steps.append(float(value[sorted(STEP_KEYS & value.keys())[0]]))
        elif key == "tracked_stats" and isinstance(value, dict) and "throughput" in value:
            rates.append(float(value["throughput"]))  # v4.1: samples/s of the training blocks
    if not steps and rates and gbs:
        steps = [gbs / r for r in rates if r > 0]
    return gbs, seq, statistics.median(steps) if steps else None


STEP_KEYS = {"train_step_time", "train_step_timing in s"}  # v5.1 NeMo 2 logs; v4.1 GPT-3 logs
_ASSIGN = re.compile(r'^\s*(?:export\s+)?([A-Z_][A-Z0-9_]*)=("?)([^"\s#;]*)\2')
_DEFAULT = re.compile(r'^\s*:\s*"\$\{([A-Z_][A-Z0-9_]*):=([^}]*)\}"')
_SOURCE = re.compile(r"^\s*(?:source|\.)\s+.*?([\w.-]+\.sh)\s*$")


def config_env(mirror: Mirror, path: str, seen: set | None = None) -> dict[str, str]:
    """The variables a config sets, its `source`d files (same folder) first, as bash runs them."""
    seen = seen if seen is not None else set()
    if path not in mirror.files:
        return {"_MISSING_INCLUDE": path}  # a file the submitter did not commit: its settings are unknown
    if path in seen:
        return {}
    seen.add(path)
    env: dict[str, str] = {}
    folder = path.rsplit("/", 1)[0]
    for line in mirror.read(path).splitlines():
        if (m := _SOURCE.match(line)) and "mounts" not in m.group(1):
            env.update(config_env(mirror, f"{folder}/{m.group(1)}", seen))
        elif m := _DEFAULT.match(line):
            env.setdefault(m.group(1), m.group(2))
        elif m := _ASSIGN.match(line):
            value = m.group(3)
            # export MINIBS="${MINIBS:=256}": the default, unless an earlier line set it
            if d := re.fullmatch(r"\$\{([A-Z_][A-Z0-9_]*):?[=-]([^}]*)\}", value):
                value = env.get(d.group(1), d.group(2))
            env[m.group(1)] = value
    return env


def _get(env: dict[str, str], name: str, default: int | None = None) -> int | None:
    for var in ALIASES[name]:
        value = env.get(var, "")
        if re.fullmatch(r"\d+", value):
            return int(value)
    return default


def precision_of(env: dict[str, str]) -> str | None:
    """The catalog's precision word of a config (MLPerf NeMo: FP8 with an amax history is delayed
    scaling); None when neither FP8 nor FP4 is set and an included file is missing."""
    if "FP8" not in env and "FP4" not in env and "_MISSING_INCLUDE" in env:
        return None
    if env.get("FP4", "").lower() == "true":
        return "nvfp4"
    if env.get("FP8", "").lower() == "true":
        recipe = env.get("FP8_RECIPE", "").lower()
        return {"mxfp8": "fp8mx", "tensorwise": "fp8cs", "current": "fp8cs", "blockwise": "fp8sc"}.get(recipe, "fp8ds")
    return "bf16"


def layout_of(env: dict[str, str], gpus_per_node: int | None = None) -> dict | None:
    """The config's layout; `gpus_per_node` (the systems JSON's) where the config leaves DGXNGPU
    to the run script."""
    nodes, gpn = _get(env, "nodes"), _get(env, "gpn", gpus_per_node)
    if not nodes or not gpn:
        return None
    tp, pp, cp = _get(env, "tp", 1), _get(env, "pp", 1), _get(env, "cp", 1)
    assert tp and pp and cp
    world = nodes * gpn
    dp = world // (tp * pp * cp) if world % (tp * pp * cp) == 0 else None
    minibs = _get(env, "minibs")
    vp = _get(env, "vp", 1) if pp > 1 else 1
    return {"gpus": world, "tp": tp, "pp": pp, "cp": cp, "vp": vp or 1, "mbs": _get(env, "mbs", 1),
            "gbs": minibs * dp if minibs and dp else None, "precision": precision_of(env)}


def extract(mirror: Mirror) -> tuple[list[dict], list[str]]:
    rows, skipped = [], []
    folders: dict[tuple[str, str, str], list[str]] = {}
    for name in mirror.files:
        parts = name.split("/")
        if len(parts) == 5 and parts[1] == "results" and parts[3] in BENCHMARKS and re.match(r"result_\d+\.txt$", parts[4]):
            folders.setdefault((parts[0], parts[2], parts[3]), []).append(name)
    configs: dict[tuple[str, str], list[str]] = {}
    for name in mirror.files:
        parts = name.split("/")
        if len(parts) >= 4 and parts[1] == "benchmarks" and parts[2] in BENCHMARKS and \
                re.match(r"config_.*\.sh$", parts[-1]) and "common" not in parts[-1] and "mounts" not in parts[-1]:
            configs.setdefault((parts[0], parts[2]), []).append(name)
    for (submitter, system, bench), logs in sorted(folders.items()):
        where = f"{submitter}/results/{system}/{bench}"
        try:
            sysinfo = json.loads(mirror.read(f"{submitter}/systems/{system}.json"))
        except ValueError:
            skipped.append(f"{where}: no systems JSON")
            continue
        kind = gpu_kind(sysinfo)
        if kind is None:
            skipped.append(f"{where}: not an NVIDIA GPU the catalog knows ({sysinfo.get('accelerator_model_name')})")
            continue
        try:
            gpus = int(sysinfo["number_of_nodes"]) * int(sysinfo["accelerators_per_node"])
        except (KeyError, ValueError):
            skipped.append(f"{where}: no GPU count")
            continue
        figures = [log_figures(mirror.read(p)) for p in sorted(logs)]
        times = [s for _, _, s in figures if s]
        gbs = next((g for g, _, _ in figures if g), None)
        model, goal, seq_default = BENCHMARKS[bench]
        seq = next((s for _, s, _ in figures if s), seq_default)
        if not times or not gbs:
            skipped.append(f"{where}: no train_step_time or global batch in the logs")
            continue
        matches = {}
        for path in configs.get((submitter, bench), []):
            lay = layout_of(config_env(mirror, path), int(sysinfo["accelerators_per_node"]))
            if lay and lay["gpus"] == gpus and lay["gbs"] == gbs and not names_other_kind(path.rsplit("/", 1)[-1], kind):
                key = tuple(sorted(lay.items()))
                matches.setdefault(key, path)
        if len(matches) > 1:  # configs of other GPU kinds at the same shape: the one named for this kind
            named = {k: p for k, p in matches.items() if names_kind(p.rsplit("/", 1)[-1], kind)}
            matches = named or matches
        if len(matches) != 1:
            skipped.append(f"{where}: {len(matches)} configs match {gpus} GPUs at GBS {gbs}")
            continue
        (key, config_path), = matches.items()
        lay = dict(key)
        if lay["precision"] is None:
            skipped.append(f"{where}: {config_path} includes a file the submission lacks; precision unknown")
            continue
        step = statistics.median(times)
        rows.append({"source": mirror.source, "commit": mirror.commit, "log_path": where, "config_path": config_path,
                     "submitter": submitter, "benchmark": bench, "model": model, "system": kind, "gpus": gpus,
                     "precision": lay["precision"], "goal": goal, "gbs": gbs, "mbs": lay["mbs"], "seq_length": seq,
                     "tp": lay["tp"], "pp": lay["pp"], "cp": lay["cp"], "vp": lay["vp"], "ep": 1, "fsdp": 0,
                     "logs": len(times), "step_time_s": round(step, 4),
                     "tokens_per_sec_per_gpu": round(gbs * seq / step / gpus, 1)})
    return rows, skipped


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    rows: list[dict] = []
    for path in argv:
        got, skipped = extract(Mirror(path))
        rows.extend(got)
        print(f"{path}: {len(got)} rows, {len(skipped)} left out")
        for line in skipped:
            print(f"  left out {line}")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with OUT.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {OUT} ({len(rows)} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
