"""mbridge-launch estimate: memory, step time and throughput of one given layout."""

from __future__ import annotations

import argparse

HELP = "help.estimate"

_MODEL_RULES = ("RULE_TP_KV_HEADS", "RULE_TP_HEADS", "RULE_TP_FFN", "RULE_EP_EXPERTS", "RULE_EP_DENSE", "RULE_PP_LAYERS")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from mbridge_launch.base.i18n import t
    from mbridge_launch.cli.main import add_common

    parser.add_argument("--model", help=t("help.common.model"))
    parser.add_argument("--gpu-type", default="h100", help=t("help.common.gpu_type"))
    parser.add_argument("--gpus", type=int, required=True, help=t("help.common.gpus"))
    parser.add_argument("--tp", type=int, default=1, help=t("help.estimate.tp"))
    parser.add_argument("--pp", type=int, default=1, help=t("help.estimate.pp"))
    parser.add_argument("--vp", type=int, help=t("help.estimate.vp"))
    parser.add_argument("--cp", type=int, default=1, help=t("help.estimate.cp"))
    parser.add_argument("--ep", type=int, default=1, help=t("help.estimate.ep"))
    parser.add_argument("--etp", type=int, help=t("help.estimate.etp"))
    parser.add_argument("--mbs", type=int, default=1, help=t("help.estimate.mbs"))
    parser.add_argument("--gbs", type=int, help=t("help.estimate.gbs"))
    parser.add_argument("--seq-length", type=int, default=4096, help=t("help.estimate.seq_length"))
    parser.add_argument("--precision", default="bf16", help=t("help.common.precision"))
    parser.add_argument("--goal", default="pretrain", help=t("help.common.goal"))
    parser.add_argument("--fsdp", action="store_true", help=t("help.estimate.fsdp"))
    parser.add_argument("--bf16-grads", action="store_true",
                        help=t("help.common.bf16_grads"))
    parser.add_argument("--recompute", choices=("none", "selective", "full"), default="none", help=t("help.estimate.recompute"))
    parser.add_argument("--recompute-layers", type=int, metavar="N",
                        help=t("help.estimate.recompute_layers"))
    parser.add_argument("--cp-comm-type", choices=("p2p", "a2a", "a2a+p2p", "allgather"), help=t("help.estimate.cp_comm_type"))
    parser.add_argument("--no-sp", action="store_true", help=t("help.estimate.no_sp"))
    parser.add_argument("--uneven-pp", action="store_true",
                        help=t("help.estimate.uneven_pp"))
    parser.add_argument("--mtp-layers", type=int, help=t("help.estimate.mtp_layers"))
    parser.add_argument("--moe-token-drop", action="store_true", help=t("help.estimate.moe_token_drop"))
    parser.add_argument("--tokens", help=t("help.common.tokens"))
    parser.add_argument("--hf-config", help=t("help.common.hf_config"))
    add_common(parser)


def run(args: argparse.Namespace) -> int:
    import sys

    from mbridge_launch.base.errors import UserError
    from mbridge_launch.base.i18n import t
    from mbridge_launch.base.output import print_json
    from mbridge_launch.cli.render import plan_report as report
    from mbridge_launch.planner import inputs
    from mbridge_launch.planner.memory import BF16_GRAD_BYTES, GRAD_BYTES, HEADROOM
    from mbridge_launch.planner.rules import Layout, check_layout
    from mbridge_launch.planner.search import estimate_layout

    for flag in ("gpus", "tp", "pp", "cp", "ep", "mbs", "seq_length"):
        inputs.positive("--" + flag.replace("_", "-"), getattr(args, flag))
    for flag in ("vp", "etp", "gbs", "recompute_layers"):
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
        world=args.gpus, fsdp=args.fsdp, recompute=args.recompute, recompute_layers=args.recompute_layers,
        cp_comm_type=args.cp_comm_type or ("p2p" if args.cp > 1 else None), uneven_pp=args.uneven_pp,
        gpus_per_node=hw.gpus_per_node,
    )
    violations = check_layout(layout, got.arch, hw)
    broken = [v for v in violations if v.severity == "error"]
    if broken:  # every broken rule on one line, the most fundamental (model) ones first
        broken.sort(key=lambda v: v.code not in _MODEL_RULES)
        raise UserError("planner.broken_rule", code=broken[0].code,
                        message="; ".join(f"{v.message()}" + (f" [{v.code}]" if i else "") for i, v in enumerate(broken)))
    cand = estimate_layout(layout, got.arch, hw, precision=got.precision, goal=got.goal,
                           mtp_layers=args.mtp_layers, moe_token_drop=args.moe_token_drop,
                           grad_bytes=BF16_GRAD_BYTES if args.bf16_grads else GRAD_BYTES)
    warnings = [{"code": v.code, "message": v.message()} for v in violations]
    if not cand.fits:
        warnings.append({"code": "RULE_MEMORY", "message": t("planner.estimate_oom", total=cand.memory_total_gb,
                                                                limit=HEADROOM * hw.hbm_gb, gpu=hw.label)})
    if args.format == "json":
        data = {"model": got.model, "gpu_type": hw.name, "precision": got.precision, "goal": got.goal}
        data.update(report.candidate_json(cand, hw, args.tokens))
        data["warnings"] = warnings
        print_json(data)
    else:
        lines = [t("planner.header", model=got.model, gpus=args.gpus, gpu=hw.label, precision=got.precision,
                   goal=got.goal, gbs=layout.gbs, seq=layout.seq_length), ""]
        lines.extend(report.candidate_text(1, cand, hw, args.tokens))
        print("\n".join(lines))
        for w in warnings:
            print(t("warning.prefix", message=f"{w['code']}: {w['message']}"), file=sys.stderr)
    return 0
