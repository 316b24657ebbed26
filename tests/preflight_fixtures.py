"""Plans and data fixtures for the preflight tests (unit, cli and e2e), built by hand with the Plan
model (no recommender). `valid_plan` is a small pretraining plan that passes every check on the
local cluster; each test breaks one thing in a copy of it."""

from __future__ import annotations

import sys
from pathlib import Path

from cli_helpers import run_cli
from mbridge_launch.plan.model import (
    CatalogRef,
    CheckpointPaths,
    Cluster,
    ClusterProfile,
    DatasetSpec,
    Launch,
    Parallelism,
    Plan,
    RecipeRef,
    save_plan,
)
from mbridge_launch.preflight.megatron_index import write_index
from plan_fixtures import edit, override  # noqa: F401  (re-exported to the preflight tests)

REPO = Path(__file__).resolve().parents[1]
# A small real model of the catalog (Qwen3 0.6B: 16 heads, 8 KV heads, 28 layers): its two
# checkpoints (~17 GB) fit the test machines' disks.
MODEL = "qwen3_600m"
RECIPE = "qwen3_600m_pretrain_1gpu_h100_bf16_config"


def make_blend(root: Path, names: tuple[str, ...] = ("web", "code")) -> list[str]:
    root.mkdir(parents=True, exist_ok=True)
    prefixes = []
    for name in names:
        prefix = str(root / f"{name}_text_document")
        write_index(prefix, [11, 7, 5, 9])
        prefixes.append(prefix)
    return prefixes


def valid_plan(base: Path, *, nodes: int = 1, partition: str | None = "h100", entry: list[str] | None = None) -> Plan:
    """A plan that passes preflight on the local cluster: data, save and log directories under
    `base` (a directory every fake node sees)."""
    prefixes = make_blend(base / "data")
    gpus = 8 * nodes
    return Plan(
        name="pf-valid",
        catalog=CatalogRef(source="catalog/megatron-bridge-0.6.2.json", version="0.6.2"),
        recipe=RecipeRef(name=RECIPE, kind="library", family="qwen", model=MODEL),
        mode="pretrain",
        dataset=DatasetSpec(selector="megatron-indexed", data_paths=prefixes, weights=[0.6, 0.4]),
        parallelism=Parallelism(tp=1, pp=1, cp=1, dp=gpus, mbs=1, gbs=gpus * 4, seq_length=4096),
        overrides=[override("train.train_iters", "100", "convergence", "short run"),
                   # the trainer saves on the default cluster.signal (TERM@60), as recommend writes it
                   override("train.exit_signal_handler", "true", "execution", "save on the signal")],
        cluster=Cluster(partition=partition, nodes=nodes, gpus_per_node=8, gpu_type="h100", time="01:00:00",
                        profile=ClusterProfile(slurm_version="22.05", pyxis=False, mpi=None)),
        checkpoint=CheckpointPaths(save=str(base / "ckpt"), save_interval=50),
        launch=Launch(shape="srun", entry=entry or [sys.executable, str(REPO / "tests" / "standin_trainer.py")],
                      workdir=str(base), log_dir=str(base / "logs")),
    )


def write(plan: Plan, directory: Path, name: str = "plan.yaml") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    return save_plan(plan, directory / name)


def preflight_json(plan_path: Path, *extra: str, env: dict[str, str | None] | None = None,
                   cwd: Path | None = None) -> tuple[int, dict]:
    """`preflight PLAN --format json EXTRA` through the CLI: (exit code, report). `env` goes on
    top of the test's environment (a None value removes a variable)."""
    result = run_cli("preflight", str(plan_path), "--format", "json", *extra, env=env, cwd=cwd)
    return result.returncode, result.json()


def codes(report: dict, severity: str | None = None) -> list[str]:
    return [c["code"] for c in report["checks"] if severity is None or c["severity"] == severity]
