"""The run_recipe.py argument list a Plan stands for (--recipe, --mode, --dataset, then the
trailing KEY=VALUE ConfigContainer overrides, which win over everything else), and the human
command.

Executors and recommend share this, so the command a user sees is the one that runs.
"""

from __future__ import annotations

from mbridge_launch.base.quoting import sh_join
from mbridge_launch.knowledge.bridge_releases import explicit_batch_overrides
from mbridge_launch.plan.model import Plan


def dataset_overrides(plan: Plan) -> list[str]:
    ds = plan.dataset
    args: list[str] = []
    if ds.data_paths:
        if ds.weights:
            blend = [str(x) for pair in zip(ds.weights, ds.data_paths) for x in pair]
        else:
            blend = list(ds.data_paths)
        args.append("dataset.data_path=[" + ",".join(blend) + "]" if len(blend) > 1 else f"dataset.data_path={blend[0]}")
    args.extend(f"dataset.{k}={v}" for k, v in sorted(ds.fields.items()))
    return args


def checkpoint_overrides(plan: Plan) -> list[str]:
    ck = plan.checkpoint
    args = []
    if ck.save:
        args.append(f"checkpoint.save={ck.save}")
    if ck.load:
        args.append(f"checkpoint.load={ck.load}")
    if ck.save_interval:
        args.append(f"checkpoint.save_interval={ck.save_interval}")
    if ck.pretrained_checkpoint:
        args.append(f"checkpoint.pretrained_checkpoint={ck.pretrained_checkpoint}")
    return args


def recipe_selector(plan: Plan) -> str:
    """The --recipe name that makes run_recipe.py load the Plan's recipe.

    run_recipe.py looks a name up as a benchmark recipe first (recipe_metadata: benchmark
    precedence for every name perf_recipes exports), and ten library recipes share their canonical
    name with a benchmark function (deepseek_v3_pretrain_1024gpu_h100_bf16_config, ...): by that
    name it loads the benchmark and refuses --dataset ("Benchmark recipes own their canonical
    dataset"). Its own advice is the library recipe's generic alias (Catalog.run_recipe_name).
    The real Megatron Bridge tier (tests/bridge/test_plan_conformance.py) found this."""
    name = plan.recipe.name
    if plan.recipe.kind != "library":
        return name
    from mbridge_launch.base.errors import UserError
    from mbridge_launch.knowledge.catalog import load_catalog

    try:
        catalog = load_catalog(plan.catalog.version)
    except UserError:  # a catalog this install does not have: the Plan's name as written
        return name
    reached = catalog.run_recipe_name(name)
    if reached is None or reached == name:
        return name  # no collision, or one run_recipe.py cannot get around (recommend never picks it)
    library = catalog.require(name, kind="library")
    return plan.recipe.alias if plan.recipe.alias in library.aliases else reached


def trainer_args(plan: Plan) -> list[str]:
    """Arguments after the entry script: --recipe, --mode, --dataset, then KEY=VALUE overrides
    (dataset fields, checkpoint paths, the global batch where the release weak-scales, then the
    plan's overrides in order: later ones win)."""
    args = ["--recipe", recipe_selector(plan)]
    if plan.recipe.kind == "library":
        args += ["--mode", plan.mode, "--dataset", plan.dataset.selector]
    args += dataset_overrides(plan)
    args += checkpoint_overrides(plan)
    # a release that weak-scales an implicit batch (0.7) gets the Plan's own, written out
    args += explicit_batch_overrides(plan.catalog.version, plan.parallelism.gbs, {o.key for o in plan.overrides})
    args += [f"{o.key}={o.value}" for o in plan.overrides]
    return args


def human_command(plan: Plan) -> str:
    """The command a user would type: torchrun on one node, srun-native across nodes."""
    c = plan.cluster
    entry = list(plan.launch.entry)
    if c.nodes == 1:
        script = entry[-1]
        words = ["uv", "run", "python", "-m", "torch.distributed.run", f"--nproc_per_node={c.gpus_per_node}", script]
    else:
        words = ["srun", f"--nodes={c.nodes}", f"--ntasks-per-node={c.gpus_per_node}",
                 f"--gpus-per-node={c.gpus_per_node}", *entry]
    return sh_join(words + trainer_args(plan))
