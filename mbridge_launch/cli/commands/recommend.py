"""mbridge-launch recommend: the right Megatron Bridge recipe, layout and command for your GPUs."""

from __future__ import annotations

import argparse

HELP = "recommend a Megatron Bridge recipe, dataset, layout and command (writes a Plan with -o)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from mbridge_launch.cli.main import add_common

    parser.add_argument("--model", help="recipe token (llama3_8b), name (Llama 3 8B) or HF id (meta-llama/Meta-Llama-3-8B)")
    parser.add_argument("--gpus", type=int, help="number of GPUs (default: the recipe's canonical count)")
    parser.add_argument("--gpu-type", default="h100", help="h100, h200, b200, b300, gb200, gb300 (default h100)")
    parser.add_argument("--goal", default="pretrain", help="pretrain, sft, lora, dora (peft = lora)")
    parser.add_argument("--seq-length", type=int, help="sequence length in tokens")
    parser.add_argument("--benchmark", action="store_true", help="a benchmark (perf) recipe: mock-data throughput only")
    parser.add_argument("--precision", help="bf16, fp8cs, fp8mx, fp8sc, fp8ds, nvfp4")
    parser.add_argument("--dataset", help="dataset selector (mock, megatron-indexed, squad, tulu3, ...)")
    parser.add_argument("--hf-config", help="a local Hugging Face config.json (or a checkpoint directory) for the architecture")
    parser.add_argument("--catalog-version", metavar="V", help="Megatron Bridge catalog version (default: the newest)")
    parser.add_argument("--smoke-test", action="store_true", help="a first try of Megatron Bridge: Llama 3 8B pretrain on mock data")
    parser.add_argument("-o", "--output", help="write the answer as a Plan YAML file")
    group = parser.add_argument_group("plan settings (with -o)")
    group.add_argument("--name", help="run name (job name, checkpoint folder)")
    group.add_argument("--account")
    group.add_argument("--partition")
    group.add_argument("--time", default="04:00:00", help="Slurm time limit (default 04:00:00)")
    group.add_argument("--container-image")
    group.add_argument("--mount", action="append", default=[], metavar="SRC[:DST]")
    group.add_argument("--env", action="append", default=[], metavar="NAME", help="forward an environment variable by name")
    group.add_argument("--save-dir", help="checkpoint root on shared storage (the run saves under SAVE_DIR/NAME)")
    group.add_argument("--data-path", action="append", default=[], metavar="[WEIGHT:]PREFIX",
                       help="megatron-indexed prefix, repeat for a blend")
    group.add_argument("--segment-support", action="store_true", help="the cluster supports sbatch --segment (Slurm 24.11+ topology/block)")
    group.add_argument("--entry", nargs="+", help="trainer program and script (default: python scripts/training/run_recipe.py)")
    group.add_argument("--workdir", help="Megatron Bridge checkout the job starts in")
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="ConfigContainer overrides, as for run_recipe.py")
    add_common(parser)


def run(args: argparse.Namespace) -> int:
    from mbridge_launch.base.errors import UserError
    from mbridge_launch.base.i18n import t
    from mbridge_launch.base.output import print_json
    from mbridge_launch.plan.overrides import parse_overrides
    from mbridge_launch.plan.model import save_plan
    from mbridge_launch.recommend.build import SMOKE_TEST_MODEL, recommend
    from mbridge_launch.cli.render.recommend import as_card, as_json
    from mbridge_launch.recommend.request import Request, normalize_goal, normalize_precision, validate_counts
    from mbridge_launch.recommend.to_plan import ClusterFlags, build_plan
    from mbridge_launch.plan.trainer_args import human_command

    if args.smoke_test:
        model, goal, dataset = args.model or SMOKE_TEST_MODEL, "pretrain", args.dataset or "mock"
    else:
        if not args.model:
            raise UserError("arg.invalid", flag="--model", reason=t("recommend.reason.model_required"))
        model, goal, dataset = args.model, args.goal, args.dataset
    validate_counts(args.gpus, args.seq_length)
    request = Request(model=model, gpus=args.gpus, gpu_type=args.gpu_type, goal=normalize_goal(goal),
                      seq_length=args.seq_length, benchmark=args.benchmark,
                      precision=normalize_precision(args.precision), dataset=dataset,
                      overrides=parse_overrides(args.overrides), hf_config=args.hf_config,
                      catalog_version=args.catalog_version)
    rec = recommend(request)
    flags = ClusterFlags(name=args.name, account=args.account, partition=args.partition, time=args.time,
                         container_image=args.container_image, mounts=args.mount, env=args.env,
                         save_dir=args.save_dir, data_paths=args.data_path, segment_support=args.segment_support,
                         entry=args.entry, workdir=args.workdir)
    plan = build_plan(rec, flags)
    command = human_command(plan)
    if args.format == "json":
        print_json(as_json(rec, plan, command))
    else:
        print(as_card(rec, plan, command))
    if args.output:
        path = save_plan(plan, args.output)
        import sys

        print(t("plan.written", path=path, hash=plan.plan_hash()), file=sys.stderr)
    return 0
