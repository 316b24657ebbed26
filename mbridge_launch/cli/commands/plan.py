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
    from mbridge_launch.planner.entry import PlanRequest, calibration_in_use, plan_request
    from mbridge_launch.planner.memory import BF16_GRAD_BYTES, GRAD_BYTES
    from mbridge_launch.planner.search import rejection_summary

    args.tokens = inputs.token_count("--tokens", args.tokens)
    gpus: int = inputs.positive("--gpus", args.gpus) or args.gpus  # --gpus is required: never None
    inputs.positive("--top", args.top)
    inputs.positive("--seq-length", args.seq_length)
    inputs.positive("--gbs", args.gbs)
    got = inputs.resolve(args.model, args.gpu_type, args.precision, args.goal, args.hf_config)
    defaults = inputs.recipe_defaults(got.model, got.goal) if not (args.gbs and args.seq_length) else {}
    seq = args.seq_length or defaults.get("seq_length", 4096)
    gbs = args.gbs or defaults.get("gbs") or inputs.default_gbs(gpus)
    calibration = calibration_in_use(args.calibration)  # --calibration, the state's, or shipped
    from mbridge_launch.recommend.plan_file import plan_recipe

    request = PlanRequest(got.model, got.arch, got.hardware, gpus, gbs, seq, got.precision, got.goal,
                          recompute=args.recompute, fsdp=True if args.fsdp else None,
                          grad_bytes=BF16_GRAD_BYTES if args.bf16_grads else GRAD_BYTES, top=args.top,
                          # the recipe the written Plan runs: its memory settings in every estimate
                          recipe=plan_recipe(got, gpus, seq))
    result = plan_request(request, calibration)
    hw = got.hardware
    if not result.candidates:
        reasons = rejection_summary(result.rejected)  # codes with their rules' messages
        raise NoLayoutError("planner.no_layout", model=got.model, gpus=gpus, gpu=hw.label, gbs=gbs, seq=seq,
                            precision=got.precision, reasons=reasons,
                            hint=_smallest_fit_hint(request, calibration, result.rejected))
    if args.format == "json":
        ties = report.near_tie_json(result)
        print_json({
            "model": got.model, "gpu_type": hw.name, "gpus": gpus, "gbs": gbs, "seq_length": seq,
            "precision": got.precision, "goal": got.goal, "evaluated": result.evaluated,
            "candidates": [report.candidate_json(c, hw, args.tokens, arch=got.arch) for c in result.candidates],
            **result.assessment.as_json(),
            "calibration": calibration.source.as_json(),
            "near_tie": ties["size"],  # how many layouts the near-tie set holds (ties["layouts"]: those listed)
            "near_tie_set": ties,
            "nvidia_layout": report.nvidia_json(result.nvidia, hw),
            "rejected": report.rejected_json(result.rejected),
        })
    else:
        lines = [t("planner.header", model=got.model, gpus=gpus, gpu=hw.label, precision=got.precision,
                   goal=got.goal, gbs=gbs, seq=seq), ""]
        # the answer first: the ranked layouts (with the near-tie caveat above them), then how far
        # the figures can be trusted (domain, band, constants), then NVIDIA's layout and the
        # rejections. With no reliable estimate the order is not a ranking: that comes first.
        trust = [*report.domain_lines(result.assessment), calibration.source.text(), ""]
        if not result.reliable:
            lines.extend(trust)
        lines.extend(report.near_tie_text(result))
        for rank, cand in enumerate(result.candidates, 1):
            lines.extend(report.candidate_text(rank, cand, hw, args.tokens, result.candidates, arch=got.arch,
                                               precision=got.precision))
            lines.append("")
        if result.reliable:
            lines.extend(trust)
        lines.extend(report.nvidia_text(result.nvidia, hw, len(result.candidates), precision=got.precision))
        lines.extend(report.rejected_text(result.rejected))
        print("\n".join(lines))
    if args.output:
        from mbridge_launch.recommend.plan_file import write_plan

        path, digest = write_plan(result.candidates[0], got, gpus, args.output, name=args.name)
        from mbridge_launch.base.escape import t_line

        print(t_line("plan.written", path=path, hash=digest), file=sys.stderr)
    return 0


def _smallest_fit_hint(request, calibration, rejected: dict) -> str:  # noqa: ANN001 - planner types, imported late
    """When memory is what rules every layout out, the smallest doubling of the GPU count that
    fits (the same GBS and sequence length), or that none up to 64x does (planner.entry)."""
    from mbridge_launch.base.i18n import t
    from mbridge_launch.planner.entry import smallest_fitting_gpus
    from mbridge_launch.planner.rules import size_limit

    if "RULE_MEMORY" not in rejected:
        return ""  # rules, not memory, stand in the way: more GPUs would not help
    count, found = smallest_fitting_gpus(request, calibration, limit=size_limit("world"))
    label = request.hardware.label
    return t("planner.fits_at", gpus=count, gpu=label) if found else t("planner.fits_nowhere", gpus=count, gpu=label)
