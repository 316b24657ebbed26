"""Run Plans' run_recipe.py argument lists through the real Megatron Bridge, up to its validation.

Runs INSIDE the tier's Python 3.12 environment (tests/bridge/make-env.sh), never in the project's:

    $ENV/bin/python tests/bridge/run_plan.py --jobs JOBS.jsonl [--out RESULTS.jsonl]

A job (tests/bridge/plan_conformance.py writes them) is {"id", "argv", "gpus", "gpu_type", ...}: argv
is exactly what the job's `scripts/training/run_recipe.py` receives (mbridge_launch's trainer_args).
The runner takes the steps run_recipe.py takes between its command line and `pretrain()`/`finetune()`,
in its order, with the real library functions where the wheel has them, then
`runtime_config_update(cfg)` (what `pretrain()` calls first: mixed precision, comm overlap,
`cfg.validate()`). run_recipe.py itself and its helpers (recipe_runner.py, recipe_metadata.py,
scripts/common/benchmark_parallelism.py) are scripts of the Megatron Bridge checkout, not part of
the wheel: the steps below are written from them (Megatron-Bridge, branch r0.6.0 at 6124fbe, the
0.6.1 release plus one recipe cherry-pick: the mirror has no v0.6.2 tag; its
recipes/utils/dataset_utils.py and omegaconf_utils.py are byte-identical to the 0.6.2 wheel's):

 1. argument parsing: --recipe/--model, --mode, --dataset (choices: DATASET_PRESETS), the
    convenience options (-tp ... -> KEY=VALUE, before the trailing overrides), trailing KEY=VALUE;
 2. the mode inferred from the recipe name when absent, and checked against it;
 3. a benchmark recipe (name pattern + exported by perf_recipes.<family>) is checked for its scope
    (mode = the name's task, PEFT only lora, no --dataset);
 4. the recipe function called with the kwargs it accepts (peft_scheme / peft for lora and dora);
 5. benchmark SFT/PEFT text recipes get the mock dataset (run_recipe's flat-runner default);
 6. --dataset: `build_dataset_config(recipe, name)` and the train-mode check; --deterministic;
 7. `process_config_with_overrides(cfg, cli_overrides)`;
 8. the recipe's pipeline layout rebuilt after a PP/VP override (unless the layout is overridden);
 9. benchmarks: precision-aware optimizer default (bf16 + adam), weak-scaled GBS at WORLD_SIZE;
10. the recipe's env vars exported (apply_environment_variables; nccl_ub's NCCL defaults);
11. SFT with CP: per-token loss; offline packing aligned; model.seq_length := dataset.seq_length;
12. the forward step resolved (its module imported); a finetuning run: finetune()'s assertion;
13. `runtime_config_update(cfg)` at WORLD_SIZE = the Plan's GPU count, torch.cuda showing a GPU of
    the Plan's type (fake_gpu).

Paths: validation asserts that `checkpoint.pretrained_checkpoint` exists. A Plan's path (a cluster
path) is replaced by the tier's empty placeholder directory, and a library SFT/LoRA/DoRA Plan that
names none gets it as a user input (PEFT validation: "PEFT requires a pretrained checkpoint path";
every finetune run: setup's FileNotFoundError when nothing is loadable, as on a first run); an
Energon dataset without `dataset.path` likewise. Every substitution is listed in the job's result (`placeholders`);
what the checkpoint holds is not verified (not_verified.py: plan-placeholder-paths).
Not done (they need a launch): the benchmark re-exec (its environment step is done), --dry-run's
YAML dump, the training loop.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import math
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import build_recipe as br  # noqa: E402 - the tier's environment, fake GPU, error and field readers

from mbridge_launch.catalog_sync.real_build import emit_lines  # noqa: E402

# run_recipe.py's convenience options and the ConfigContainer field each one sets
COMMON_OVERRIDE_FIELDS = (
    (("-ms", "--max_steps"), int, "train.train_iters"),
    (("-gb", "--global_batch_size"), int, "train.global_batch_size"),
    (("-mb", "--micro_batch_size"), int, "train.micro_batch_size"),
    (("-sl", "--seq_length"), int, "dataset.seq_length"),
    (("-tp", "--tensor_model_parallel_size"), int, "model.tensor_model_parallel_size"),
    (("-pp", "--pipeline_model_parallel_size"), int, "model.pipeline_model_parallel_size"),
    (("-cp", "--context_parallel_size"), int, "model.context_parallel_size"),
    (("-vp", "--virtual_pipeline_model_parallel_size"), int, "model.virtual_pipeline_model_parallel_size"),
    (("-ep", "--expert_model_parallel_size"), int, "model.expert_model_parallel_size"),
    (("-etp", "--expert_tensor_parallel_size"), int, "model.expert_tensor_parallel_size"),
    (("--lr",), float, "optimizer.lr"),
    (("--min_lr",), float, "optimizer.min_lr"),
    (("--warmup_iters",), int, "scheduler.lr_warmup_iters"),
    (("--pretrained_checkpoint",), str, "checkpoint.pretrained_checkpoint"),
    (("--save_dir",), str, "checkpoint.save"),
    (("--load_dir",), str, "checkpoint.load"),
    (("--save_interval",), int, "checkpoint.save_interval"),
)

BENCHMARK_NAME = re.compile(r"_(?P<task>pretrain|sft|peft)_(?P<gpus>[1-9][0-9]*)gpu_(?P<hw>[a-z0-9]+)_"
                            r"(?P<precision>bf16|fp8cs|fp8mx|fp8sc|nvfp4)(?:_[a-z0-9_]+)?_config$")
# recipe name prefix -> perf_recipes subpackage (recipe_metadata.BENCHMARK_RECIPE_FAMILY_PREFIXES; first match)
BENCHMARK_FAMILIES = (("qwen3_vl_", "qwen_vl"), ("qwen35_vl_", "qwen_vl"), ("deepseek_", "deepseek"),
                      ("gpt_oss_", "gpt_oss"), ("nemotron", "nemotronh"), ("llama", "llama"), ("qwen", "qwen"),
                      ("kimi_", "kimi"), ("glm5", "glm_moe_dsa"), ("wan_", "wan"))
# recipe name prefix -> forward step (recipe_metadata.RECIPE_FORWARD_STEP_PREFIXES; default llm_step)
STEP_PREFIXES = (("nemotron_nano_v2_vl_", "llava_step"), ("nemotron_omni_", "nemotron_omni_step"),
                 ("qwen2_audio_", "audio_lm_step"), ("qwen3_omni_", "qwen3_omni_step"), ("qwen3_vl_", "qwen3_vl_step"),
                 ("qwen35_vl_", "qwen3_vl_step"), ("step37_", "step37_flickr8k_step"), ("gemma3_vl_", "vlm_step"),
                 ("gemma4_vl_", "vlm_step"), ("glm_45v_", "vlm_step"), ("kimi_k25_vl_", "vlm_step"),
                 ("ministral3_", "vlm_step"), ("qwen25_vl_", "vlm_step"), ("flux_", "flux_step"), ("wan_", "wan_step"))
# forward step -> (module, attribute) (recipe_runner.STEP_FUNCTIONS)
STEP_FUNCTIONS = {
    "audio_lm_step": ("megatron.bridge.training.audio_lm_step", "forward_step"),
    "dsv4_step": ("megatron.bridge.models.deepseek.deepseek_v4_step", "forward_step"),
    "gpt_step": ("megatron.bridge.training.gpt_step", "forward_step"),
    "llm_step": ("megatron.bridge.training.gpt_step", "forward_step"),
    "vlm_step": ("megatron.bridge.training.vlm_step", "forward_step"),
    "qwen3_omni_step": ("megatron.bridge.models.qwen_omni.qwen3_omni_step", "forward_step"),
    "qwen3_vl_step": ("megatron.bridge.models.qwen_vl.qwen3_vl_step", "forward_step"),
    "step37_flickr8k_step": ("megatron.bridge.models.stepfun.step37_flickr8k_step", "forward_step"),
    "llava_step": ("megatron.bridge.training.llava_step", "forward_step"),
    "nemotron_omni_step": ("megatron.bridge.training.nemotron_omni_step", "forward_step"),
    "flux_step": ("megatron.bridge.diffusion.models.flux.flux_step", "FluxForwardStep"),
    "wan_step": ("megatron.bridge.diffusion.models.wan.wan_step", "WanForwardStep"),
}
TEXT_STEPS = frozenset({"dsv4_step", "gpt_step", "llm_step"})


class RunRecipeError(Exception):
    """What run_recipe.py itself refuses (argparse error or one of its ValueErrors), before Megatron."""


# ------------------------------------------------------------------ 1-3: the command line


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse would exit 2 with this text on stderr
        raise RunRecipeError(f"run_recipe.py: error: {message}")


def parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    from megatron.bridge.recipes.utils.dataset_utils import DATASET_PRESETS

    parser = _Parser(prog="run_recipe.py", allow_abbrev=False)
    selection = parser.add_mutually_exclusive_group(required=True)
    selection.add_argument("--model")
    selection.add_argument("--recipe")
    parser.add_argument("--mode", choices=["pretrain", "sft", "lora", "dora"])
    parser.add_argument("--step-func", "--step_func", dest="step_func")
    parser.add_argument("--dataset", choices=sorted(DATASET_PRESETS))
    for flags, kind, field in COMMON_OVERRIDE_FIELDS:
        parser.add_argument(*flags, type=kind, dest=field)
    parser.add_argument("--dry-run", "--dry_run", action="store_true", dest="dryrun")
    parser.add_argument("--deterministic", action="store_true")
    parser.add_argument("--dump-env", "--dump_env", action="store_true", dest="dump_env")
    args, unknown = parser.parse_known_args(argv)
    trailing = []
    for value in unknown:
        if value.startswith("-"):
            parser.error(f"Unknown option: {value}")
        if "=" not in value:
            parser.error(f"Expected override in KEY=VALUE form, got {value!r}")
        trailing.append(value)
    common = [f"{field}={json.dumps(v) if isinstance(v, str) else v}"
              for _, _, field in COMMON_OVERRIDE_FIELDS if (v := getattr(args, field)) is not None]
    if args.mode is None and args.recipe:
        args.mode = infer_mode(args.recipe)
    if args.mode is None:
        raise RunRecipeError("Unable to infer training mode; pass --mode or use a conventional --recipe name.")
    return args, common + trailing


def infer_mode(name: str) -> str | None:
    n = f"_{name.lower().strip('_')}_"
    for marks, mode in ((("_pretrain_",), "pretrain"), (("_sft_", "_finetune_"), "sft"), (("_dora_",), "dora"),
                        (("_peft_", "_lora_"), "lora")):
        if any(m in n for m in marks):
            return mode
    return None


def task_of(mode: str) -> str:
    return "peft" if mode in ("lora", "dora") else mode


def step_of(name: str) -> str:
    return next((step for prefix, step in STEP_PREFIXES if name.startswith(prefix)), "llm_step")


def benchmark_task(name: str) -> str | None:
    """The task of a benchmark recipe (run_recipe looks a name up as a benchmark first), else None."""
    m = BENCHMARK_NAME.search(name)
    family = next((f for prefix, f in BENCHMARK_FAMILIES if name.startswith(prefix)), None)
    if m is None or family is None:
        return None
    module = importlib.import_module(f"megatron.bridge.perf_recipes.{family}")
    return m.group("task") if callable(getattr(module, name, None)) else None


def check_benchmark_scope(name: str, task: str, args: argparse.Namespace) -> None:
    if task_of(args.mode) != task:
        raise RunRecipeError(f"Mode '{args.mode}' is incompatible with benchmark task '{task}'.")
    if task == "peft" and args.mode != "lora":
        raise RunRecipeError("Benchmark PEFT recipes are fixed LoRA configs; omit --mode or pass --mode lora.")
    if args.step_func is not None and not steps_match(args.step_func, step_of(name)):
        raise RunRecipeError(f"Benchmark recipe '{name}' uses the canonical {step_of(name)} forward step")
    if args.dataset is not None:
        raise RunRecipeError("Benchmark recipes own their canonical dataset; omit --dataset or continue using "
                             "scripts/performance for non-canonical benchmark data.")


def steps_match(a: str, b: str) -> bool:
    a, b = a.lower(), b.lower()
    return a == b or {a, b} <= TEXT_STEPS


# ------------------------------------------------------------------ 4-6: the recipe and its dataset


def recipe_function(name: str, benchmark: bool) -> Any:
    if benchmark:
        family = next(f for prefix, f in BENCHMARK_FAMILIES if name.startswith(prefix))
        return getattr(importlib.import_module(f"megatron.bridge.perf_recipes.{family}"), name)
    import pkgutil

    recipes = importlib.import_module("megatron.bridge.recipes")
    if callable(getattr(recipes, name, None)):
        return getattr(recipes, name)
    for info in pkgutil.iter_modules(recipes.__path__):  # the H100-named aliases live in <family>.h100
        if info.ispkg and not info.name.startswith("_") and info.name != "utils":
            try:
                module = importlib.import_module(f"{recipes.__name__}.{info.name}.h100")
            except ModuleNotFoundError:
                continue
            if callable(getattr(module, name, None)):
                return getattr(module, name)
    raise RunRecipeError(f"Recipe '{name}' not found in megatron.bridge.recipes or megatron.bridge.perf_recipes.")


def recipe_kwargs(fn: Any, mode: str) -> dict[str, Any]:
    """peft_scheme (or peft) for lora/dora, when the function takes it (recipe_runner's rule)."""
    scheme = mode if mode in ("lora", "dora") else None
    if scheme is None:
        return {}
    try:
        params = inspect.signature(fn).parameters
        var_kw = any(p.kind == inspect.Parameter.VAR_KEYWORD for p in params.values())
        if "peft_scheme" in params:
            return {"peft_scheme": scheme}
        if "peft" in params or var_kw:
            return {"peft": scheme}
    except (TypeError, ValueError):
        return {"peft": scheme}
    if scheme != "lora":
        raise RunRecipeError(f"Recipe '{getattr(fn, '__name__', fn)}' does not accept a configurable PEFT scheme; "
                             f"--mode {scheme} is unsupported.")
    return {}


def benchmark_mock_dataset(cfg: Any, name: str, task: str) -> None:
    """run_recipe's flat-runner default: benchmark SFT/PEFT text recipes train on mock data."""
    from megatron.bridge.recipes.utils.dataset_utils import build_dataset_config

    if task not in ("sft", "peft") or not steps_match(step_of(name), "llm_step"):
        return
    source, mock = getattr(cfg, "dataset", None), build_dataset_config(cfg, "mock")
    for field in ("num_workers", "pin_memory", "persistent_workers"):
        if source is not None and hasattr(source, field) and hasattr(mock, field):
            setattr(mock, field, getattr(source, field))
    if hasattr(mock, "split"):
        mock.split = "99990,8,2"
    cfg.dataset = mock


def apply_dataset(cfg: Any, selector: str | None, mode: str) -> None:
    from megatron.bridge.recipes.utils.dataset_utils import build_dataset_config, dataset_train_mode

    if selector is None:
        return
    cfg.dataset = build_dataset_config(cfg, selector)
    if dataset_train_mode(cfg.dataset) != ("pretrain" if mode == "pretrain" else "finetune"):
        raise RunRecipeError(f"Mode '{mode}' is incompatible with dataset '{selector}'.")


# ------------------------------------------------------------------ 8-11: after the overrides


def override_keys(overrides: list[str]) -> set[str]:
    return {o.lstrip("+~").split("=", 1)[0] for o in overrides}


def sync_pipeline_layout(cfg: Any, overrides: list[str]) -> None:
    keys = override_keys(overrides)
    if not keys & {"model.pipeline_model_parallel_size", "model.virtual_pipeline_model_parallel_size"}:
        return
    if "model.pipeline_model_parallel_layout" in keys:
        return
    builder = getattr(cfg.model, "_pipeline_model_parallel_layout_builder", None)
    if builder is not None:
        cfg.model.pipeline_model_parallel_layout = builder(cfg.model.pipeline_model_parallel_size,
                                                           cfg.model.virtual_pipeline_model_parallel_size)


def topology(model: Any) -> tuple[int, int, int, int, int, int, int]:
    etp = getattr(model, "expert_tensor_parallel_size", None)
    tp = getattr(model, "tensor_model_parallel_size", 1)
    g = next((getattr(model, n) for n in ("gtp_weight_remat_size", "gtp_remat_size") if hasattr(model, n)), 1)
    eg = next((getattr(model, n) for n in ("expert_gtp_weight_remat_size", "expert_gtp_remat_size") if hasattr(model, n)), 1)
    return (tp, getattr(model, "pipeline_model_parallel_size", 1), getattr(model, "context_parallel_size", 1),
            getattr(model, "expert_model_parallel_size", 1), tp if etp is None else etp, g, eg)


def data_parallel(gpus: int, topo: tuple[int, ...]) -> int:
    """benchmark_parallelism.data_parallel_size: both grids must divide the world."""
    tp, pp, cp, ep, etp, g, eg = topo
    if any(not isinstance(s, int) or s <= 0 for s in topo):
        raise RunRecipeError(f"Parallel sizes must be positive integers, got {topo}.")
    dense = tp * pp * cp * g
    if gpus % dense:
        raise RunRecipeError(f"Requested {gpus} GPUs is not divisible by TP * PP * CP ({tp} * {pp} * {cp} = {dense}). "
                             "Override the parallel sizes for this GPU count.")
    expert = etp * ep * pp * eg
    if gpus % expert:
        raise RunRecipeError(f"The expert-parallel grid is incompatible with requested {gpus} GPUs: the world size "
                             f"must be divisible by ETP * EP * PP ({etp} * {ep} * {pp} = {expert}).")
    return gpus // dense


def benchmark_runtime(cfg: Any, name: str, overrides: list[str], canonical: tuple[tuple[int, ...], int],
                      world: int) -> None:
    """Precision-aware optimizer default, then weak scaling of GBS to the requested DP."""
    keys = override_keys(overrides)
    m = BENCHMARK_NAME.search(name)
    assert m is not None
    if not keys & {"optimizer", "optimizer.use_precision_aware_optimizer"} and m.group("precision") == "bf16" \
            and getattr(cfg.optimizer, "optimizer", None) == "adam":
        cfg.optimizer.use_precision_aware_optimizer = True
    topo, gbs = canonical
    base_dp = data_parallel(int(m.group("gpus")), topo)
    dp = data_parallel(world, topology(cfg.model))
    if keys & {"train", "train.global_batch_size"} or dp == base_dp:
        return
    if gbs * dp % base_dp:
        raise RunRecipeError(f"Weak scaling GBS {gbs} from DP {base_dp} to DP {dp} does not produce an integer "
                             "global batch size. Pass --global_batch_size explicitly.")
    cfg.train.global_batch_size = gbs * dp // base_dp


def runtime_environment(cfg: Any) -> None:
    from megatron.bridge.training.config import apply_environment_variables

    apply_environment_variables(cfg)
    if getattr(getattr(cfg, "ddp", None), "nccl_ub", False):
        os.environ.setdefault("NCCL_NVLS_ENABLE", "1")
        os.environ.setdefault("NCCL_CTA_POLICY", "1")


def cp_sizes(cfg: Any) -> set[int]:
    sizes = {getattr(cfg.model, "context_parallel_size", 1)}
    eval_cp = getattr(getattr(cfg, "dist", None), "eval_context_parallel_size", None)
    return sizes | ({eval_cp} if eval_cp is not None else set())


def finetuning_cp(cfg: Any, mode: str) -> None:
    dataset = getattr(cfg, "dataset", None)
    if mode == "pretrain" or not (hasattr(dataset, "enable_offline_packing") or hasattr(dataset, "enable_in_batch_packing")):
        return
    if any(s > 1 for s in cp_sizes(cfg)):
        if hasattr(cfg.model, "calculate_per_token_loss"):
            cfg.model.calculate_per_token_loss = True
        if getattr(cfg, "ddp", None) is not None and hasattr(cfg.ddp, "average_in_collective"):
            cfg.ddp.average_in_collective = False


def offline_packing(cfg: Any) -> None:
    dataset = getattr(cfg, "dataset", None)
    if not getattr(dataset, "enable_offline_packing", False):
        return
    from megatron.bridge.data.packing import PackedSequenceSpecs

    specs = getattr(dataset, "offline_packing_specs", None)
    if specs is None or isinstance(specs, dict):
        specs = PackedSequenceSpecs(**(specs or {}))
        dataset.offline_packing_specs = specs
    if getattr(dataset, "seq_length", None) is not None:
        specs.packed_sequence_size = dataset.seq_length
    tp, sp = cfg.model.tensor_model_parallel_size, bool(getattr(cfg.model, "sequence_parallel", False))
    sizes = cp_sizes(cfg)
    multiples = [2 * s if s > 1 else 1 for s in sizes] + [s * tp if sp and tp > 1 else 1 for s in sizes]
    specs.pad_seq_to_mult = math.lcm(specs.pad_seq_to_mult or 1, *multiples)


def sequence_length(cfg: Any) -> None:
    if getattr(cfg, "model", None) is None or not hasattr(cfg.model, "seq_length") or getattr(cfg, "dataset", None) is None:
        return
    seq = getattr(cfg.dataset, "seq_length", None)
    seq = getattr(cfg.dataset, "sequence_length", None) if seq is None else seq
    if seq is not None and cfg.model.seq_length != seq:
        cfg.model.seq_length = seq


def forward_step(name: str, step_func: str | None) -> None:
    step = (step_func or step_of(name)).lower()
    if step not in STEP_FUNCTIONS:
        raise RunRecipeError(f"Unknown step type: {step}. Choose from: {', '.join(STEP_FUNCTIONS)}")
    module, attribute = STEP_FUNCTIONS[step]
    getattr(importlib.import_module(module), attribute)


# ------------------------------------------------------------------ placeholders


PRETRAINED = "checkpoint.pretrained_checkpoint"


def substitute_paths(overrides: list[str], used: list[dict[str, Any]]) -> list[str]:
    """A Plan's pretrained checkpoint (a cluster path) -> the tier's placeholder directory."""
    out = []
    for o in overrides:
        key, _, value = o.partition("=")
        if key.lstrip("+~") == PRETRAINED and value not in ("", "null", "None"):
            used.append({"key": PRETRAINED, "plan": value, "used": br.PLACEHOLDERS["pretrained-checkpoint"],
                         "why": "the Plan's path does not exist here; validation asserts it exists"})
            o = f"{key}={br.PLACEHOLDERS['pretrained-checkpoint']}"
        out.append(o)
    return out


def supply_user_inputs(cfg: Any, used: list[dict[str, Any]], finetune: bool) -> None:
    """Inputs a user must add that the Plan leaves unset, as placeholders: build_recipe.user_inputs
    (PEFT: validation asserts a pretrained checkpoint; Energon: dataset.path), and for every run
    that enters `finetune()` a pretrained checkpoint too: its setup raises FileNotFoundError
    ("Finetuning requires loading from an available pretrained checkpoint or resuming from a
    checkpoint") when neither it nor checkpoint.load holds a checkpoint, as on a Plan's first run."""
    items = br.user_inputs(cfg)
    unset = not br.get(cfg, "checkpoint", "pretrained_checkpoint") and not any(i.startswith(PRETRAINED) for i in items)
    if finetune and unset:
        items.append(f"{PRETRAINED}={br.PLACEHOLDERS['pretrained-checkpoint']}")
    for item in items:
        key, _, value = item.partition("=")
        section, attr = key.split(".")
        setattr(getattr(cfg, section), attr, value)
        used.append({"key": key, "plan": None, "used": value, "why": "the Plan sets none; the real code requires it"})


def finetune_entry(cfg: Any) -> None:
    """What `finetune()` asserts before `pretrain()` (run_recipe.py runs library SFT/LoRA/DoRA there)."""
    assert cfg.checkpoint.pretrained_checkpoint is not None or cfg.checkpoint.load is not None, (
        "Finetuning requires a loading from a pretrained checkpoint or resuming from a checkpoint")


# ------------------------------------------------------------------ one job


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    from fake_gpu import fake_gpu
    from megatron.bridge.training.config import runtime_config_update
    from megatron.bridge.training.utils.omegaconf_utils import process_config_with_overrides

    world, hw = int(job["gpus"]), str(job["gpu_type"])
    out: dict[str, Any] = {"id": job["id"], "argv": job["argv"], "world_size": world, "gpu_type": hw,
                           "built": False, "validated": False, "placeholders": []}
    t0 = time.perf_counter()
    stage = "arguments"
    try:
        with br.scoped_environ(world), fake_gpu(hw):
            args, overrides = parse(list(job["argv"]))
            name = args.recipe or f"{args.model}_{task_of(args.mode)}_config"
            out["recipe"], out["mode"] = name, args.mode
            task = benchmark_task(name)
            out["kind"] = "benchmark" if task else "library"
            if task:
                check_benchmark_scope(name, task, args)
            named = infer_mode(name) if args.recipe else None
            if named is not None and task_of(named) != task_of(args.mode):
                raise RunRecipeError(f"Mode '{args.mode}' is incompatible with recipe '{name}'.")
            stage = "build"
            fn = recipe_function(name, bool(task))
            cfg = fn(**recipe_kwargs(fn, args.mode))
            out["built"] = True
            stage = "dataset"
            if task:
                benchmark_mock_dataset(cfg, name, task)
            apply_dataset(cfg, args.dataset, args.mode)
            if args.deterministic:
                from megatron.bridge.recipes.utils.determinism_utils import apply_determinism_overrides

                apply_determinism_overrides(cfg)
            canonical = (topology(cfg.model), getattr(cfg.train, "global_batch_size", 1))
            stage = "override"
            overrides = substitute_paths(overrides, out["placeholders"])
            out["overrides"] = overrides
            cfg = process_config_with_overrides(cfg, cli_overrides=overrides or None)
            finetune = not task and args.mode != "pretrain"  # benchmarks always run pretrain()
            supply_user_inputs(cfg, out["placeholders"], finetune)
            stage = "runner"
            sync_pipeline_layout(cfg, overrides)
            if task:
                benchmark_runtime(cfg, name, overrides, canonical, world)
            runtime_environment(cfg)
            finetuning_cp(cfg, args.mode)
            offline_packing(cfg)
            sequence_length(cfg)
            forward_step(name, args.step_func)
            if finetune:
                finetune_entry(cfg)
            stage = "validate"
            runtime_config_update(cfg)
            out["validated"] = True
            out["validated_fields"] = br.record(cfg)
    except Exception as exc:  # every failure is data: the stage and the real error
        out["stage"] = stage
        out["error"] = br.error_of(exc)
    out["seconds"] = round(time.perf_counter() - t0, 3)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=Path, required=True, help="JSON lines: {id, argv, gpus, gpu_type}")
    ap.add_argument("--out", type=Path, help="also write the result lines here")
    ap.add_argument("--hf-home", type=Path, help="the tier's HF cache (default as build_recipe.py)")
    args = ap.parse_args(argv)
    jobs = [json.loads(line) for line in args.jobs.read_text().splitlines() if line.strip()]

    import hf_cache

    hf_home = args.hf_home or hf_cache.default_home()
    hf_cache.ensure(hf_home)
    br.setup_environment(hf_home)
    br.make_placeholders(hf_home)
    t = time.perf_counter()
    import megatron.bridge.perf_recipes  # noqa: F401
    import megatron.bridge.recipes  # noqa: F401
    br.no_config_retry_sleep()
    print(json.dumps({"event": "import", "seconds": round(time.perf_counter() - t, 1)}), file=sys.stderr, flush=True)

    emit_lines((run_job(job) for job in jobs), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
