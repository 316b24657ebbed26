"""mbridge-launch recommend: the right Megatron Bridge recipe, layout and command for your GPUs."""

from __future__ import annotations

import argparse

HELP = "help.recommend"
DEFAULT_TIME = "04:00:00"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from mbridge_launch.base.i18n import t
    from mbridge_launch.cli.main import add_common
    from mbridge_launch.cli.options import int_arg, path_arg, seq_length_arg

    parser.add_argument("--model", help=t("help.recommend.model"))
    parser.add_argument("--gpus", type=int_arg(), help=t("help.recommend.gpus"))
    parser.add_argument("--gpu-type", default="h100", help=t("help.common.gpu_type"))
    parser.add_argument("--goal", help=t("help.common.goal"))  # None: pretrain (told apart from --smoke-test's)
    parser.add_argument("--seq-length", type=seq_length_arg, help=t("help.recommend.seq_length"))
    parser.add_argument("--benchmark", action="store_true", help=t("help.recommend.benchmark"))
    parser.add_argument("--precision", help=t("help.recommend.precision"))
    parser.add_argument("--dataset", help=t("help.recommend.dataset"))
    parser.add_argument("--hf-config", help=t("help.recommend.hf_config"))
    parser.add_argument("--catalog-version", metavar="V", help=t("help.recommend.catalog_version"))
    parser.add_argument("--scheduler", default="slurm", help=t("help.recommend.scheduler"))  # others: scope.*
    parser.add_argument("--smoke-test", action="store_true", help=t("help.recommend.smoke_test"))
    parser.add_argument("-o", "--output", type=path_arg, help=t("help.recommend.output"))
    parser.add_argument("--verbose", action="store_true", help=t("help.recommend.verbose"))
    group = parser.add_argument_group(t("help.recommend.plan_settings"))
    group.add_argument("--name", help=t("help.recommend.name"))
    group.add_argument("--account", help=t("help.recommend.account"))
    group.add_argument("--partition", help=t("help.recommend.partition"))
    group.add_argument("--time", help=t("help.recommend.time"))  # default: DEFAULT_TIME, the smoke test's own
    group.add_argument("--container-image", help=t("help.recommend.container_image"))
    group.add_argument("--mount", action="append", default=[], metavar="SRC[:DST]", help=t("help.recommend.mount"))
    group.add_argument("--env", action="append", default=[], metavar="NAME", help=t("help.recommend.env"))
    group.add_argument("--save-dir", help=t("help.recommend.save_dir"))
    group.add_argument("--pretrained-checkpoint", metavar="PATH", help=t("help.recommend.pretrained_checkpoint"))
    group.add_argument("--from-scratch", action="store_true", help=t("help.recommend.from_scratch"))
    group.add_argument("--data-path", action="append", default=[], metavar="[WEIGHT:]PREFIX",
                       help=t("help.recommend.data_path"))
    group.add_argument("--segment-support", action="store_true", help=t("help.recommend.segment_support"))
    group.add_argument("--entry", nargs="+", help=t("help.recommend.entry"))
    group.add_argument("--workdir", help=t("help.recommend.workdir"))
    group.add_argument("--watcher-partition", help=t("help.recommend.watcher_partition"))
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help=t("help.common.overrides"))
    add_common(parser)


def _refuse_smoke_conflicts(args: argparse.Namespace) -> None:
    """--smoke-test is a short pretraining run: another --goal contradicts it (it was ignored)."""
    from mbridge_launch.base.errors import UserError
    from mbridge_launch.knowledge.vocabulary import normalize_goal

    if args.goal is not None and normalize_goal(args.goal) != "pretrain":
        raise UserError("recommend.smoke_test_conflict", flag="--goal", value=args.goal)


def run(args: argparse.Namespace) -> int:
    from mbridge_launch.base.errors import UserError
    from mbridge_launch.base.escape import t_line
    from mbridge_launch.base.i18n import t
    from mbridge_launch.base.output import print_json
    from mbridge_launch.cli.render.recommend import as_card, as_json
    from mbridge_launch.knowledge.vocabulary import normalize_goal
    from mbridge_launch.plan.model import save_plan
    from mbridge_launch.plan.overrides import check_override_keys, parse_overrides
    from mbridge_launch.plan.trainer_args import human_command
    from mbridge_launch.recommend import scope, smoke
    from mbridge_launch.recommend.build import recommend
    from mbridge_launch.recommend.request import (
        Request,
        normalize_precision,
        validate_counts,
        validate_starting_weights,
    )
    from mbridge_launch.recommend.starting_weights import starting_weights_warnings
    from mbridge_launch.recommend.time_fit import scale_sanity_warnings
    from mbridge_launch.recommend.to_plan import ClusterFlags, build_plan

    if args.smoke_test:
        _refuse_smoke_conflicts(args)
        model, goal, dataset = args.model or smoke.SMOKE_TEST_MODEL, "pretrain", args.dataset or "mock"
    else:
        if not args.model:
            raise UserError("arg.invalid", flag="--model", reason=t("recommend.reason.model_required"))
        model, goal, dataset = args.model, args.goal, args.dataset
    from mbridge_launch.knowledge.models import cached_config_for  # an HF id the catalog cannot plan, cached

    scheduler = scope.check_scheduler(args.scheduler)
    validate_counts(args.gpus, args.seq_length)
    raw_overrides = parse_overrides(args.overrides)
    validate_starting_weights(args.pretrained_checkpoint, args.from_scratch, raw_overrides, normalize_goal(goal))
    request = Request(model=model, gpus=args.gpus, gpu_type=args.gpu_type, goal=normalize_goal(goal),
                      seq_length=args.seq_length, benchmark=args.benchmark,
                      precision=normalize_precision(args.precision), dataset=dataset,
                      overrides=raw_overrides, hf_config=args.hf_config or cached_config_for(model),
                      catalog_version=args.catalog_version, scheduler=scheduler,
                      pretrained_checkpoint=args.pretrained_checkpoint, from_scratch=args.from_scratch)
    scope.check_request(request)  # out of scope (other GPUs, schedulers, model kinds): exit 2, with why
    _scheduler_hint()
    rec = smoke.recommend_smoke(request) if args.smoke_test else recommend(request)
    time = args.time or (smoke.SMOKE_TEST_TIME if args.smoke_test else DEFAULT_TIME)
    rec.warnings += starting_weights_warnings(rec)  # a fine-tuning goal says where its weights come from
    rec.warnings += scale_sanity_warnings(rec, time)  # a step or run beyond --time, a batch too small for MFU
    flags = ClusterFlags(name=args.name, account=args.account, partition=args.partition, time=time,
                         container_image=args.container_image, mounts=args.mount, env=args.env,
                         save_dir=args.save_dir, data_paths=args.data_path, segment_support=args.segment_support,
                         entry=args.entry, workdir=args.workdir, watcher_partition=_watcher_partition(args))
    if args.smoke_test:  # runs in the release's NeMo container unless --workdir/--entry/--container-image say otherwise
        flags = smoke.container_route(flags, rec.catalog.version)
    plan = build_plan(rec, flags)
    # the user's keys against the release's real configuration (the recipe's own model provider)
    check_override_keys([o.key for o in request.overrides], plan.catalog.version, plan.recipe.name,
                        plan.recipe.kind)
    from mbridge_launch.executors.batch_script import training_step

    # the script's own training line, in the card and the JSON alike: what a submit runs
    command = training_step(plan)
    if args.format == "json":
        print_json(as_json(rec, plan, command, manual_command=human_command(plan)))
    else:
        print(as_card(rec, plan, command, verbose=args.verbose))
    if args.output:
        path = save_plan(plan, args.output)
        import sys

        print(t_line("plan.written", path=path, hash=plan.plan_hash()), file=sys.stderr)
        from mbridge_launch.base.quoting import sh

        # the next step: check the plan, then read the exact script a submit would send
        print(t("recommend.smoke.next", path=sh(str(args.output))), file=sys.stderr)
    elif args.format != "json":
        print(t("recommend.next_write"))
    return 0


def _scheduler_hint() -> None:
    """On a Kubernetes pod without Slurm, say where the Plan can be submitted (a hint, not an error)."""
    import sys

    from mbridge_launch.base.i18n import t
    from mbridge_launch.recommend.scope import scheduler_hint

    hint = scheduler_hint()
    if hint is not None:
        print(t("hint.prefix", message=hint.render()), file=sys.stderr)


def _watcher_partition(args: argparse.Namespace) -> str | None:
    """--watcher-partition, else the site default in the environment, read HERE only: the Plan
    records where its watcher job runs, and preflight checks that place."""
    import os

    from mbridge_launch.gate.watcher_job import PARTITION_ENV

    return args.watcher_partition or os.environ.get(PARTITION_ENV) or None
