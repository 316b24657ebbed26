"""mbridge-launch estimate: memory, step time and throughput of one given layout."""

from __future__ import annotations

import argparse
from typing import Any

HELP = "help.estimate"
MAX_MTP_LAYERS = 64  # multi-token prediction depth: DeepSeek-V3 uses 1; 10^20 gave a 2e18 s step

_MODEL_RULES = ("RULE_TP_KV_HEADS", "RULE_TP_HEADS", "RULE_TP_FFN", "RULE_EP_EXPERTS", "RULE_EP_DENSE", "RULE_PP_LAYERS",
                "RULE_PP_UNEVEN")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from mbridge_launch.base.i18n import t
    from mbridge_launch.cli.main import add_common
    from mbridge_launch.cli.options import int_arg, seq_length_arg

    parser.add_argument("--model", help=t("help.common.model"))
    parser.add_argument("--gpu-type", default="h100", help=t("help.common.gpu_type"))
    parser.add_argument("--gpus", type=int_arg(), required=True, help=t("help.common.gpus"))
    parser.add_argument("--tp", type=int_arg(), default=1, help=t("help.estimate.tp"))
    parser.add_argument("--pp", type=int_arg(), default=1, help=t("help.estimate.pp"))
    parser.add_argument("--vp", type=int_arg(), help=t("help.estimate.vp"))
    parser.add_argument("--cp", type=int_arg(), default=1, help=t("help.estimate.cp"))
    parser.add_argument("--ep", type=int_arg(), default=1, help=t("help.estimate.ep"))
    parser.add_argument("--etp", type=int_arg(), help=t("help.estimate.etp"))
    parser.add_argument("--mbs", type=int_arg(), default=1, help=t("help.estimate.mbs"))
    parser.add_argument("--gbs", type=int_arg(), help=t("help.estimate.gbs"))
    parser.add_argument("--seq-length", type=seq_length_arg, default=4096, help=t("help.estimate.seq_length"))
    parser.add_argument("--precision", default="bf16", help=t("help.common.precision"))
    parser.add_argument("--goal", default="pretrain", help=t("help.common.goal"))
    parser.add_argument("--fsdp", action="store_true", help=t("help.estimate.fsdp"))
    parser.add_argument("--no-distributed-optimizer", action="store_true", help=t("help.estimate.no_dist_opt"))
    parser.add_argument("--bf16-grads", action="store_true",
                        help=t("help.common.bf16_grads"))
    parser.add_argument("--recompute", choices=("none", "selective", "full"), default="none", help=t("help.estimate.recompute"))
    parser.add_argument("--recompute-layers", type=int_arg(), metavar="N",
                        help=t("help.estimate.recompute_layers"))
    parser.add_argument("--cp-comm-type", choices=("p2p", "a2a", "a2a+p2p", "allgather"), help=t("help.estimate.cp_comm_type"))
    parser.add_argument("--no-sp", action="store_true", help=t("help.estimate.no_sp"))
    parser.add_argument("--uneven-pp", action="store_true",
                        help=t("help.estimate.uneven_pp"))
    parser.add_argument("--pp-layout", metavar="LAYOUT", help=t("help.estimate.pp_layout"))
    parser.add_argument("--first-stage-layers", type=int_arg(), metavar="N", help=t("help.estimate.first_stage_layers"))
    parser.add_argument("--last-stage-layers", type=int_arg(), metavar="N", help=t("help.estimate.last_stage_layers"))
    parser.add_argument("--mtp-layers", type=int_arg(0, MAX_MTP_LAYERS), help=t("help.estimate.mtp_layers"))
    parser.add_argument("--moe-token-drop", action="store_true", help=t("help.estimate.moe_token_drop"))
    # the settings a Plan carries that change memory (plan/layout.py reads them from the Plan):
    # without them estimate charges what `plan` would choose, with them what the Plan runs
    parser.add_argument("--recompute-modules", metavar="M1,M2", help=t("help.estimate.recompute_modules"))
    parser.add_argument("--fp8-param-gather", action=argparse.BooleanOptionalAction, default=None,
                        help=t("help.estimate.fp8_param_gather"))
    parser.add_argument("--moe-dispatcher", help=t("help.estimate.moe_dispatcher"))
    # the recipe settings the memory model charges: --recipe NAME and one flag per setting
    from mbridge_launch.cli import memory_settings

    memory_settings.add_arguments(parser)
    parser.add_argument("--tokens", help=t("help.common.tokens"))
    parser.add_argument("--hf-config", help=t("help.common.hf_config"))
    parser.add_argument("--calibration", metavar="FILE", help=t("help.common.calibration"))
    add_common(parser)


def run(args: argparse.Namespace) -> int:
    import sys

    from mbridge_launch.base.errors import EXIT_NO_LAYOUT, UserError
    from mbridge_launch.base.i18n import t
    from mbridge_launch.base.output import print_json
    from mbridge_launch.cli.render import plan_report as report
    from mbridge_launch.plan.shipped import shipped_recipe_for_layout
    from mbridge_launch.planner import inputs
    from mbridge_launch.planner.memory import BF16_GRAD_BYTES, GRAD_BYTES, HEADROOM
    from mbridge_launch.planner.rules import Layout, check_layout

    for flag in ("gpus", "tp", "pp", "cp", "ep", "mbs", "seq_length"):
        inputs.positive("--" + flag.replace("_", "-"), getattr(args, flag))
    for flag in ("vp", "etp", "gbs", "recompute_layers", "first_stage_layers", "last_stage_layers"):
        inputs.positive("--" + flag.replace("_", "-"), getattr(args, flag))
    args.tokens = inputs.token_count("--tokens", args.tokens)
    if args.mtp_layers is not None and args.mtp_layers < 0:
        raise UserError("planner.bad_number", flag="--mtp-layers", value=args.mtp_layers)
    got = inputs.resolve(args.model, args.gpu_type, args.precision, args.goal, args.hf_config)
    hw = got.hardware
    dp = max(args.gpus // (args.tp * args.pp * args.cp), 1)
    layout = Layout(
        tp=args.tp, pp=args.pp, vp=args.vp if args.vp and args.vp > 1 else None, cp=args.cp, ep=args.ep, etp=args.etp,
        sp=args.tp > 1 and not args.no_sp, mbs=args.mbs, gbs=args.gbs or args.mbs * dp, seq_length=args.seq_length,
        world=args.gpus, fsdp=args.fsdp, distributed_optimizer=not args.no_distributed_optimizer,
        recompute=args.recompute, recompute_layers=args.recompute_layers,
        cp_comm_type=args.cp_comm_type or ("p2p" if args.cp > 1 else None),
        gpus_per_node=hw.gpus_per_node,
        recompute_modules=_recompute_modules(args, got.arch, got.precision),
        fp8_param_gather=args.fp8_param_gather,
        moe_dispatcher=_moe_dispatcher(args.moe_dispatcher),
    )
    layout = _with_split(layout, args, got.arch)
    from dataclasses import replace as with_settings

    from mbridge_launch.cli import memory_settings

    # the named recipe's (or the recipe that ships this layout's) settings, under the user's flags
    chosen = memory_settings.choose(args, got.model, hw, got.precision, got.goal, layout, got.arch.num_layers)
    layout = with_settings(layout, **chosen.changes)
    violations = check_layout(layout, got.arch, hw)
    broken = [v for v in violations if v.severity == "error"]
    if broken:  # every broken rule on one line, the most fundamental (model) ones first
        broken.sort(key=lambda v: v.code not in _MODEL_RULES)
        raise UserError("planner.broken_rule", code=broken[0].code,
                        message="; ".join(f"{v.message()}" + (f" [{v.code}]" if i else "") for i, v in enumerate(broken)))
    from mbridge_launch.planner.entry import PlanRequest, calibration_in_use, estimate_request

    calibration = calibration_in_use(args.calibration)  # --calibration, the state's, or shipped
    request = PlanRequest(got.model, got.arch, hw, args.gpus, layout.gbs, layout.seq_length, got.precision, got.goal,
                          grad_bytes=BF16_GRAD_BYTES if args.bf16_grads else GRAD_BYTES, mtp_layers=args.mtp_layers,
                          moe_token_drop=args.moe_token_drop)
    # corrected by NVIDIA's published rows of this configuration, and assessed, as `plan` is (planner.entry)
    estimated = estimate_request(request, layout, calibration)
    cand, assessment = estimated.candidate, estimated.assessment
    # each rule warning and layout pitfall once, with its severity; not fitting is the verdict
    # (exit 3, EXIT_NO_LAYOUT), not a warning
    warnings = [{"code": v.code, "severity": v.severity, "message": v.message()}
                for v in [*violations, *getattr(cand, "pitfalls", ())]]
    verdict = None if cand.fits else t("planner.estimate_does_not_fit", total=cand.memory_total_gb,
                                       limit=HEADROOM * hw.hbm_gb, gpu=hw.label, hbm=hw.hbm_gb, headroom=1 - HEADROOM)
    shipped_by = shipped_recipe_for_layout(got.model, hw.name, layout) if verdict is not None else None
    if shipped_by is not None:
        # NVIDIA ships and runs this layout: an estimate above HBM is a question for the memory
        # model, said as a warning (as recommend and preflight do), not a refusal
        warnings.append({"code": "MEMORY_SHIPPED", "severity": "warning",
                         "message": t("planner.estimate_over_but_shipped", verdict=verdict, recipe=shipped_by)})
        verdict = None
    if args.format == "json":
        data: dict[str, Any] = {"model": got.model, "gpu_type": hw.name, "precision": got.precision, "goal": got.goal}
        data.update(report.candidate_json(cand, hw, args.tokens, arch=got.arch))
        data.update(assessment.as_json())
        data["calibration"] = calibration.source.as_json()
        data["recipe_settings"] = chosen.as_json()
        data["warnings"] = warnings
        data["verdict"] = verdict  # None when it fits
        print_json(data)
    else:
        lines = [t("planner.header", model=got.model, gpus=args.gpus, gpu=hw.label, precision=got.precision,
                   goal=got.goal, gbs=layout.gbs, seq=layout.seq_length), ""]
        lines.extend(report.candidate_text(1, cand, hw, args.tokens, arch=got.arch, precision=got.precision))
        lines.extend(report.domain_lines(assessment))
        lines.append(calibration.source.text())
        lines.extend(str(line) for line in chosen.lines())
        split = report.split_text(cand, got.arch) if cand is not None else None
        if split is not None and not layout.uneven_pp:  # the card shows uneven splits itself
            lines.append(t("planner.split_line", split=split))
        print("\n".join(lines))
        for w in warnings:
            print(t("planner.severity_line", severity=t(f"planner.severity.{w['severity']}"), code=w["code"],
                    message=w["message"]), file=sys.stderr)
    if verdict is not None:
        print(t("error.prefix", message=verdict), file=sys.stderr)
        return EXIT_NO_LAYOUT
    return 0


# the dispatcher kinds the memory model tells apart (planner.memory.dispatcher_bytes); "flex"
# is Megatron's name for DeepEP/HybridEP chosen by moe_flex_dispatcher_backend (DeepEP by default)
_DISPATCHERS = ("alltoall", "allgather", "deepep", "hybridep", "flex")


def _moe_dispatcher(value: str | None) -> str | None:
    from mbridge_launch.base.errors import UserError

    if value is None:
        return None
    kind = value.strip().lower()
    if kind not in _DISPATCHERS:
        raise UserError("arg.choice", flag="--moe-dispatcher", value=value, choices=", ".join(_DISPATCHERS))
    return "deepep" if kind == "flex" else kind


def _recompute_modules(args: argparse.Namespace, arch, precision: str):  # noqa: ANN001, ANN202 - planner types
    """--recompute-modules as the tuple the memory model charges; names Megatron Core would refuse
    for this model and precision are an error naming the valid ones."""
    from mbridge_launch.base.errors import UserError
    from mbridge_launch.planner.recompute import parse_modules, refusal

    if args.recompute_modules is None:
        return None
    if args.recompute != "selective":
        raise UserError("planner.recompute_modules_need_selective")
    modules = parse_modules(args.recompute_modules) or ()
    refused = refusal(modules, arch, precision)
    if refused is not None:
        if not refused.params.get("value") and refused.key == "arg.choice":
            refused.params["value"] = args.recompute_modules
        raise refused
    return modules


def _with_split(layout, args: argparse.Namespace, arch):  # noqa: ANN001, ANN202 - planner types, imported late
    """The pipeline split to estimate: the user's (--pp-layout, --first/--last-stage-layers), which
    the rules then judge, else the one the planner chooses for this PP x VP (pipeline_split.
    choose_split, as `plan` does); --uneven-pp is accepted and changes nothing."""
    from dataclasses import replace as evolve

    from mbridge_launch.base.errors import UserError
    from mbridge_launch.planner import pipeline_split as ps

    counts = args.first_stage_layers is not None or args.last_stage_layers is not None
    if args.pp_layout is not None and counts:
        raise UserError("planner.split_flags")
    if args.pp_layout is not None:
        split = ps.PipelineSplit.from_settings({ps.LAYOUT_KEY: args.pp_layout})
        if layout.vp is None and split.stages and len(split.stages) % layout.pp == 0 and len(split.stages) > layout.pp:
            layout = evolve(layout, vp=len(split.stages) // layout.pp)  # Megatron reads VP off the layout
        return evolve(layout, split=split, uneven_pp=True)
    if counts:
        split = ps.PipelineSplit(ps.FIRST_LAST, first=args.first_stage_layers, last=args.last_stage_layers)
        return evolve(layout, split=split, uneven_pp=True)
    if layout.pp <= 1:
        return layout
    return ps.settle(layout, arch)
