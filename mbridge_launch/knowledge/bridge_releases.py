"""What the training entry does differently with the Megatron Bridge release a Plan names.

A Plan records its catalog's release (plan.catalog.version); the command the tool renders must be
read the same way by that release's `scripts/training/run_recipe.py`:

- 0.7 (main from 2026-08 on) weak-scales: run at another world size than a benchmark recipe's, it
  scales `train.global_batch_size` to keep the samples per data-parallel rank, unless the batch is
  an explicit override (`_config_override_is_explicit`), and it takes that world size from
  WORLD_SIZE or SLURM_NTASKS, or the recipe's own GPU count in a dry run without them. A batch the
  tool leaves implicit would then be one number in `submit --dry-run`, in preflight and in the
  Plan, and another in the job (or in run_recipe.py's own --dry-run). So for such a release the
  tool writes the Plan's batch explicitly: every reader sees one global batch. World sizes that
  TP x PP x CP (and ETP x EP x PP) do not divide are refused by the planner's grid rules, as
  run_recipe.py's `data_parallel_size` refuses them.
- 0.6.2 has no weak scaling: its run_recipe.py keeps the recipe's batch; nothing is added.

Read from the 0.7.0 source tree (scripts/training/run_recipe.py `_apply_benchmark_weak_scaling`,
scripts/common/benchmark_parallelism.py); no 0.7 wheel was run here.
"""

from __future__ import annotations

from mbridge_launch.knowledge.compatibility import version_tuple

WEAK_SCALING_SINCE = (0, 7)
GBS_KEY = "train.global_batch_size"


def weak_scales_batch(release: str | None) -> bool:
    """Whether that release's run_recipe.py rescales an implicit global batch at another world
    size; False for an unknown or unreadable release (0.6.2's behaviour, the shipped catalog)."""
    parsed = version_tuple(release or "")
    return parsed is not None and parsed[:2] >= WEAK_SCALING_SINCE


def explicit_batch_overrides(release: str | None, gbs: int, override_keys: set[str]) -> list[str]:
    """The KEY=VALUE that pins the Plan's global batch for a weak-scaling release; none when the
    Plan already sets it (its own override wins) or the release keeps the recipe's batch."""
    # `+key` / `~key` name the same setting (a Plan that adds or removes the batch decides it)
    if not weak_scales_batch(release) or GBS_KEY in {key.lstrip("+~") for key in override_keys}:
        return []
    return [f"{GBS_KEY}={gbs}"]
