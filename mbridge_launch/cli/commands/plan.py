"""mbridge-launch plan: ranked parallel layouts for a model on a GPU count, with the reasons."""

from __future__ import annotations

import argparse

HELP = "help.plan"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from mbridge_launch.base.i18n import t
    from mbridge_launch.cli.main import add_common
    from mbridge_launch.cli.options import int_arg, path_arg, seq_length_arg

    parser.add_argument("--model", help=t("help.common.model"))
    parser.add_argument("--gpus", type=int_arg(), required=True, help=t("help.common.gpus"))
    parser.add_argument("--gpu-type", default="h100", help=t("help.common.gpu_type"))
    parser.add_argument("--goal", default="pretrain", help=t("help.common.goal"))
    parser.add_argument("--seq-length", type=seq_length_arg, help=t("help.plan.seq_length"))
    parser.add_argument("--gbs", type=int_arg(), help=t("help.plan.gbs"))
    parser.add_argument("--precision", default="bf16", help=t("help.common.precision"))
    parser.add_argument("--top", type=int_arg(), default=5, help=t("help.plan.top"))
    parser.add_argument("--tokens", help=t("help.common.tokens"))
    parser.add_argument("--recompute", choices=("none", "selective", "full"), help=t("help.plan.recompute"))
    parser.add_argument("--fsdp", action="store_true", help=t("help.plan.fsdp"))
    parser.add_argument("--bf16-grads", action="store_true",
                        help=t("help.common.bf16_grads"))
    parser.add_argument("--hf-config", help=t("help.common.hf_config"))
    parser.add_argument("-o", "--output", type=path_arg, help=t("help.plan.output"))
    parser.add_argument("--name", help=t("help.plan.name"))
    parser.add_argument("--calibration", metavar="FILE", help=t("help.common.calibration"))
    add_common(parser)


def run(args: argparse.Namespace) -> int:
    import sys

    from mbridge_launch.base.errors import NoLayoutError
    from mbridge_launch.base.i18n import t
    from mbridge_launch.base.output import print_json
    from mbridge_launch.cli.render import plan_report as report
    from mbridge_launch.planner import inputs
    from mbridge_launch.planner.domain import assess
    from mbridge_launch.planner.memory import BF16_GRAD_BYTES, GRAD_BYTES
    from mbridge_launch.planner.search import Options, rejection_summary, search

    args.tokens = inputs.token_count("--tokens", args.tokens)
    gpus: int = inputs.positive("--gpus", args.gpus) or args.gpus  # --gpus is required: never None
    inputs.positive("--top", args.top)
    inputs.positive("--seq-length", args.seq_length)
    inputs.positive("--gbs", args.gbs)
    got = inputs.resolve(args.model, args.gpu_type, args.precision, args.goal, args.hf_config)
    defaults = inputs.recipe_defaults(got.model, got.goal) if not (args.gbs and args.seq_length) else {}
    seq = args.seq_length or defaults.get("seq_length", 4096)
    gbs = args.gbs or defaults.get("gbs") or inputs.default_gbs(gpus)
    from mbridge_launch.planner.calibration_file import resolve as resolve_calibration

    cal, cal_source = resolve_calibration(args.calibration)  # --calibration, the state's, or shipped
    from mbridge_launch.planner.measured import shipped_for

    # NVIDIA's published rows of this very configuration, and the user's own in the calibration
    # in use, correct the estimates and rank the layouts they ran first (planner.measured)
    options = Options(recompute=args.recompute, fsdp=True if args.fsdp else None,
                      grad_bytes=BF16_GRAD_BYTES if args.bf16_grads else GRAD_BYTES, cal=cal,
                      measured=shipped_for(got.arch.name, got.hardware.name, gpus, got.precision),
                      own_measured=cal_source.measured)
    result = search(got.arch, got.hardware, gpus, gbs=gbs, seq_length=seq, precision=got.precision,
                    goal=got.goal, options=options, top=args.top)
    hw = got.hardware
    if not result.candidates:
        reasons = rejection_summary(result.rejected)  # codes with their rules' messages
        raise NoLayoutError("planner.no_layout", model=got.model, gpus=gpus, gpu=hw.label, gbs=gbs, seq=seq,
                            precision=got.precision, reasons=reasons,
                            hint=_smallest_fit_hint(got, gpus, gbs, seq, options, result.rejected))
    # once per request: every dimension of the domain (system, precision, family, goal, sequence,
    # GPU count) is the request's, the same for every candidate
    # the band of estimates corrected by measured rows where the first one is (planner.measured)
    assessment = assess(got.model, got.arch, hw.name, got.precision, got.goal, seq, args.gpus,
                        measured=result.candidates[0].twin is not None)
    band = assessment.near_tie()  # the near-tie tolerance (planner.domain.tie_band)
    # NVIDIA's tuned layout (a 0.6.2 benchmark recipe of this model, system, GPU count and
    # precision), estimated like the candidates but shown apart: it never enters the ranking
    from mbridge_launch.planner.nvidia_layout import nvidia_option, shipped_recipes

    nvidia = nvidia_option(shipped_recipes(), got.model, got.arch, hw, gpus, precision=got.precision, goal=got.goal,
                           gbs=gbs, seq_length=seq, candidates=result.candidates, grad_bytes=options.grad_bytes,
                           cal=options.cal)
    if args.format == "json":
        ties = report.near_tie_json(result.candidates, band, args.top)
        print_json({
            "model": got.model, "gpu_type": hw.name, "gpus": gpus, "gbs": gbs, "seq_length": seq,
            "precision": got.precision, "goal": got.goal, "evaluated": result.evaluated,
            "candidates": [report.candidate_json(c, hw, args.tokens, arch=got.arch) for c in result.candidates],
            **assessment.as_json(),
            "calibration": cal_source.as_json(),
            "near_tie": len(ties["layouts"]),  # how many layouts the near-tie set holds
            "near_tie_set": ties,
            "nvidia_layout": report.nvidia_json(nvidia, hw),
            "rejected": report.rejected_json(result.rejected),
        })
    else:
        lines = [t("planner.header", model=got.model, gpus=gpus, gpu=hw.label, precision=got.precision,
                   goal=got.goal, gbs=gbs, seq=seq), ""]
        lines.extend(report.domain_lines(assessment))
        lines.append(cal_source.text())
        lines.append("")
        lines.extend(report.near_tie_text(result.candidates, band, args.top))
        for rank, cand in enumerate(result.candidates, 1):
            lines.extend(report.candidate_text(rank, cand, hw, args.tokens, result.candidates, arch=got.arch))
            lines.append("")
        lines.extend(report.nvidia_text(nvidia, hw, len(result.candidates)))
        lines.extend(report.rejected_text(result.rejected))
        print("\n".join(lines))
    if args.output:
        from mbridge_launch.recommend.plan_file import write_plan

        path, digest = write_plan(result.candidates[0], got, gpus, args.output, name=args.name)
        from mbridge_launch.base.escape import t_line

        print(t_line("plan.written", path=path, hash=digest), file=sys.stderr)
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
