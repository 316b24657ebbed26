"""`recommend --smoke-test`: a first Megatron Bridge job that a new user can run in minutes.

A small model at its recipe's own count (Llama 3.2 1B, one GPU: it fits one node of any supported
system and the memory estimate), mock data, a few dozen iterations with a learning-rate schedule
fitted to them, a short validation, no checkpoint, a 30-minute limit. Every setting it adds is a
recorded change with its reason; a setting the user gives on the command line wins.

The class of each change is the change-control table's (plan/changecontrol.py), as for any other
override: the iteration count, batch and schedule are convergence settings (a smoke run is a
different experiment, and its losses are no evidence about the recipe), the checkpoint interval is
an execution setting. Declaring them benchmark_only would be what preflight flags as
misclassified (plan.override_misclassified); the reason says they are the smoke test's.

Why these settings (Megatron Bridge 0.6.2, training/config.py and train.py):
- `train.train_iters`: the recipe's 1,168,251 iterations would run for months.
- `train.global_batch_size`: the recipe's 512 samples per iteration make one iteration about a
  minute and a half on one GPU; two micro-batches per data-parallel rank still exercise gradient
  accumulation.
- `scheduler.lr_warmup_iters` / `scheduler.lr_decay_iters`: the recipe warms up for 2,000
  iterations; ConfigContainer caps a warmup that is not shorter than the decay with a warning, so
  both are set to fit the run (decay over the whole run, warmup a tenth of it).
- `validation.eval_interval` / `validation.eval_iters`: the recipe validates every 2,000
  iterations for 32 iterations; the smoke test validates twice, briefly.
- `checkpoint.save_interval=0`: train.py saves neither at an interval nor at the end when it is 0
  (`save_interval != 0`), so the run needs no checkpoint space: an 8B checkpoint with optimizer
  state is 112 GB, more than an ordinary disk has free.

Where it runs: in the NeMo Framework container of the catalog's release (the compatibility
matrix's `containers` row: image and the in-image Megatron Bridge path), so a fresh machine needs no
checkout and the dry run is one a real submit accepts. The job starts in the directory `recommend`
ran in (launch.workdir, absolute), mounted at the same path in the image, so its relative paths
(logs, checkpoint.save/load) mean the same place on the host and in the container; the trainer is
the image's own run_recipe.py at its absolute path. `--workdir DIR` (a checkout), `--entry` or
`--container-image` keep what the user chose: the container route is only the default.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Optional

from mbridge_launch.base.i18n import Msg, msg
from mbridge_launch.plan.overrides import RawOverride, whole_number
from mbridge_launch.recommend.request import Request

SMOKE_TEST_MODEL = "llama32_1b"
SMOKE_TEST_TIME = "00:30:00"
SMOKE_TEST_ITERS = 50
SMOKE_TEST_EVAL_ITERS = 2
MICRO_BATCHES_PER_RANK = 2



def smoke_settings(layout: Any, user: list[RawOverride]) -> list[tuple[str, str, Msg]]:
    """(key, value, reason) of every setting the smoke test adds for `layout` (the planner's
    layout without them), leaving out the keys the user sets."""
    given = {o.path for o in user}
    iters = whole_number(next((o.value for o in user if o.path == "train.train_iters"), None)) or SMOKE_TEST_ITERS
    per_step = max(1, int(getattr(layout, "mbs", 1) or 1) * int(getattr(layout, "dp", 1) or 1))
    gbs = per_step * MICRO_BATCHES_PER_RANK
    warmup = iters // 10
    reason, schedule = msg("change.reason.smoke_test"), msg("change.reason.smoke_test_schedule", iters=iters)
    settings = [
        ("train.train_iters", str(iters), reason),
        ("train.global_batch_size", str(gbs), reason),
        ("scheduler.lr_warmup_iters", str(warmup), schedule),
        ("scheduler.lr_decay_iters", str(iters), schedule),
        ("validation.eval_interval", str(max(1, iters // 2)), reason),
        ("validation.eval_iters", str(SMOKE_TEST_EVAL_ITERS), reason),
        ("checkpoint.save_interval", "0", msg("change.reason.smoke_test_checkpoint")),
    ]
    return [s for s in settings if s[0] not in given]


def container_route(flags: Any, release: str, here: Optional[Path] = None) -> Any:
    """`flags` (recommend.to_plan.ClusterFlags) with the release's container, in-image trainer and
    the start directory mounted at its own path; unchanged where the user chose the start directory,
    the trainer or an image, or the matrix names no container for the release."""
    from mbridge_launch.knowledge.compatibility import release_container

    container = release_container(release)
    if container is None or flags.workdir or flags.entry or flags.container_image:
        return flags
    start = str((here or Path.cwd()).resolve())
    mounts = list(flags.mounts)
    if not any(m.split(":")[-1] == start for m in mounts):
        mounts.append(f"{start}:{start}")
    return replace(flags, container_image=container.image, entry=["python", container.entry_script],
                   workdir=start, mounts=mounts)


def recommend_smoke(request: Request) -> Any:
    """The recommendation for the smoke test: the planner's layout for the model, then the smoke
    settings on top of the user's overrides (theirs come last and win), recorded as changes with
    the smoke test's reasons."""
    from mbridge_launch.recommend.build import recommend

    first = recommend(request)
    settings = smoke_settings(first.layout, request.overrides)
    extra = [RawOverride(key, value) for key, value, _ in settings]
    rec = recommend(replace(request, overrides=[*extra, *request.overrides]))
    reasons = {key: reason for key, _, reason in settings}
    for change in rec.changes:
        if change.source == "user" and change.field in reasons:
            change.reason = reasons[change.field]
    return rec
