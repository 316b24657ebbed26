"""mbridge-launch plan: ranked parallel layouts for a model on a GPU count, with the reasons."""

from __future__ import annotations

import argparse

HELP = "rank parallel layouts (TP/PP/VP/CP/EP/ETP/MBS/recompute/FSDP) by predicted throughput"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from mbridge_launch.cli.main import add_common

    parser.add_argument("--model", help="recipe token (llama3_8b), name (Llama 3 8B) or HF id")
    parser.add_argument("--gpus", type=int, required=True, help="total number of GPUs")
    parser.add_argument("--gpu-type", default="h100", help="h100, h200, b200, b300, gb200, gb300 (default h100)")
    parser.add_argument("--goal", default="pretrain", help="pretrain, sft, lora, dora (peft = lora)")
    parser.add_argument("--seq-length", type=int, help="sequence length (default: the model's recipe, else 4096)")
    parser.add_argument("--gbs", type=int, help="global batch size (default: the model's recipe, else >= 512)")
    parser.add_argument("--precision", default="bf16", help="bf16, fp8cs, fp8mx, fp8sc, fp8ds, nvfp4 (default bf16)")
    parser.add_argument("--top", type=int, default=5, help="how many layouts to show (default 5)")
    parser.add_argument("--tokens", help="token budget (e.g. 1e12 or 15T): report wall-clock hours and GPU-hours")
    parser.add_argument("--recompute", choices=("none", "selective", "full"), help="only this recompute level")
    parser.add_argument("--fsdp", action="store_true", help="only Megatron-FSDP layouts")
    parser.add_argument("--bf16-grads", action="store_true",
                        help="gradients reduced in bf16 (ddp.grad_reduce_in_fp32=false, as benchmark recipes run)")
    parser.add_argument("--hf-config", help="a local Hugging Face config.json (or checkpoint directory)")
    parser.add_argument("-o", "--output", help="write the best layout into a Plan YAML file")
    parser.add_argument("--name", help="run name for the Plan written with -o")
    add_common(parser)


def run(args: argparse.Namespace) -> int:
    import sys

    from mbridge_launch.base.errors import NoLayoutError
    from mbridge_launch.base.i18n import t
    from mbridge_launch.base.output import print_json
    from mbridge_launch.planner import inputs
    from mbridge_launch.cli.render import plan_report as report
    from mbridge_launch.planner.memory import BF16_GRAD_BYTES, GRAD_BYTES
    from mbridge_launch.planner.search import Options, search

    args.tokens = inputs.token_count("--tokens", args.tokens)
    gpus = inputs.positive("--gpus", args.gpus)
    inputs.positive("--top", args.top)
    inputs.positive("--seq-length", args.seq_length)
    inputs.positive("--gbs", args.gbs)
    got = inputs.resolve(args.model, args.gpu_type, args.precision, args.goal, args.hf_config)
    defaults = inputs.recipe_defaults(got.model, got.goal) if not (args.gbs and args.seq_length) else {}
    seq = args.seq_length or defaults.get("seq_length", 4096)
    gbs = args.gbs or defaults.get("gbs") or inputs.default_gbs(gpus)
    options = Options(recompute=args.recompute, fsdp=True if args.fsdp else None,
                      grad_bytes=BF16_GRAD_BYTES if args.bf16_grads else GRAD_BYTES)
    result = search(got.arch, got.hardware, gpus, gbs=gbs, seq_length=seq, precision=got.precision,
                    goal=got.goal, options=options, top=args.top)
    hw = got.hardware
    if not result.candidates:
        top_reasons = sorted(result.rejected.values(), key=lambda r: -r.count)[:3]
        reasons = "; ".join(f"{r.code} x{r.count} ({r.example})" for r in top_reasons) or "-"
        raise NoLayoutError("planner.no_layout", model=got.model, gpus=gpus, gpu=hw.label, gbs=gbs, seq=seq,
                            precision=got.precision, reasons=reasons,
                            hint=_smallest_fit_hint(got, gpus, gbs, seq, options, result.rejected))
    if args.format == "json":
        print_json({
            "model": got.model, "gpu_type": hw.name, "gpus": gpus, "gbs": gbs, "seq_length": seq,
            "precision": got.precision, "goal": got.goal, "evaluated": result.evaluated,
            "candidates": [report.candidate_json(c, hw, args.tokens) for c in result.candidates],
            "near_tie": report.near_tie_count(result.candidates),
            "rejected": report.rejected_json(result.rejected),
        })
    else:
        lines = [t("planner.header", model=got.model, gpus=gpus, gpu=hw.label, precision=got.precision,
                   goal=got.goal, gbs=gbs, seq=seq), ""]
        lines.extend(report.near_tie_text(result.candidates))
        for rank, cand in enumerate(result.candidates, 1):
            lines.extend(report.candidate_text(rank, cand, hw, args.tokens, result.candidates))
            lines.append("")
        lines.extend(report.rejected_text(result.rejected))
        print("\n".join(lines))
    if args.output:
        from mbridge_launch.recommend.plan_file import write_plan

        path, digest = write_plan(result.candidates[0], got, gpus, args.output, name=args.name)
        print(t("plan.written", path=path, hash=digest), file=sys.stderr)
    return 0


# doublings tried when nothing fits: 64x takes one 8-GPU node to 512 GPUs
_GROWTH_STEPS = 6


def _smallest_fit_hint(got, gpus: int, gbs: int, seq: int, options, rejected: dict) -> str:
    """When memory is what rules every layout out, the smallest doubling of the GPU count that
    fits (the same GBS and sequence length), or that none up to 64x does."""
    from mbridge_launch.base.i18n import t
    from mbridge_launch.planner.rules import size_limit
    from mbridge_launch.planner.search import search

    if "RULE_MEMORY" not in rejected:
        return ""  # rules, not memory, stand in the way: more GPUs would not help
    hw = got.hardware
    count = gpus
    for _ in range(_GROWTH_STEPS):
        count *= 2
        if count > size_limit("world"):
            break
        found = search(got.arch, hw, count, gbs=gbs, seq_length=seq, precision=got.precision, goal=got.goal,
                       options=options, top=1)
        if found.candidates:
            return t("planner.fits_at", gpus=count, gpu=hw.label)
    return t("planner.fits_nowhere", gpus=count, gpu=hw.label)
