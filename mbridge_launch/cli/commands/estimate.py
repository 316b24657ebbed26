"""mbridge-launch estimate: memory, step time and throughput of one given layout."""

from __future__ import annotations

import argparse

HELP = "estimate memory per GPU, step time, tokens/s/GPU and MFU of one parallel layout"

_MODEL_RULES = ("RULE_TP_KV_HEADS", "RULE_TP_HEADS", "RULE_TP_FFN", "RULE_EP_EXPERTS", "RULE_EP_DENSE", "RULE_PP_LAYERS")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from mbridge_launch.cli.main import add_common

    parser.add_argument("--model", help="recipe token (llama3_8b), name (Llama 3 8B) or HF id")
    parser.add_argument("--gpu-type", default="h100", help="h100, h200, b200, b300, gb200, gb300 (default h100)")
    parser.add_argument("--gpus", type=int, required=True, help="total number of GPUs")
    parser.add_argument("--tp", type=int, default=1)
    parser.add_argument("--pp", type=int, default=1)
    parser.add_argument("--vp", type=int, help="virtual pipeline stages per pipeline stage")
    parser.add_argument("--cp", type=int, default=1)
    parser.add_argument("--ep", type=int, default=1)
    parser.add_argument("--etp", type=int)
    parser.add_argument("--mbs", type=int, default=1, help="micro batch size (default 1)")
    parser.add_argument("--gbs", type=int, help="global batch size (default MBS x DP)")
    parser.add_argument("--seq-length", type=int, default=4096, help="sequence length (default 4096)")
    parser.add_argument("--precision", default="bf16", help="bf16, fp8cs, fp8mx, fp8sc, fp8ds, nvfp4 (default bf16)")
    parser.add_argument("--goal", default="pretrain", help="pretrain, sft, lora, dora (peft = lora)")
    parser.add_argument("--fsdp", action="store_true", help="Megatron-FSDP instead of the distributed optimizer")
    parser.add_argument("--bf16-grads", action="store_true",
                        help="gradients reduced in bf16 (ddp.grad_reduce_in_fp32=false, as benchmark recipes run)")
    parser.add_argument("--recompute", choices=("none", "selective", "full"), default="none")
    parser.add_argument("--recompute-layers", type=int, metavar="N",
                        help="with --recompute full: only the first N layers of each pipeline chunk "
                             "(recompute_method=block); default every layer")
    parser.add_argument("--cp-comm-type", choices=("p2p", "a2a", "a2a+p2p", "allgather"))
    parser.add_argument("--no-sp", action="store_true", help="turn sequence parallelism off (on by default when TP > 1)")
    parser.add_argument("--uneven-pp", action="store_true",
                        help="declare uneven first/last pipeline stages (layers need not divide PP x VP)")
    parser.add_argument("--mtp-layers", type=int, help="MTP depth to count (default: the model's)")
    parser.add_argument("--moe-token-drop", action="store_true", help="MoE with a capacity factor (no dropless sync)")
    parser.add_argument("--tokens", help="token budget (e.g. 1e12 or 15T): report wall-clock hours and GPU-hours")
    parser.add_argument("--hf-config", help="a local Hugging Face config.json (or checkpoint directory)")
    add_common(parser)


def run(args: argparse.Namespace) -> int:
    import sys

    from mbridge_launch.base.errors import UserError
    from mbridge_launch.base.i18n import t
    from mbridge_launch.base.output import print_json
    from mbridge_launch.planner import inputs
    from mbridge_launch.cli.render import plan_report as report
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
