"""`mbridge-launch versions`: what this installation supports and finds, without importing the
heavy libraries (package metadata only)."""

from __future__ import annotations

import argparse

HELP = "help.versions"
LIBRARIES = ("nemo_run", "submitit", "pydantic", "PyYAML", "Jinja2", "leptonai")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from mbridge_launch.cli.main import add_common

    add_common(parser)


def _slurm() -> dict:
    """Whether Slurm can be asked, with its version: the probe `doctor` uses."""
    from mbridge_launch.preflight.cluster_survey import probe_slurm
    from mbridge_launch.preflight.slurm import SlurmClient

    return probe_slurm(SlurmClient()).as_dict()


def collect() -> dict:
    import platform

    from mbridge_launch import __version__
    from mbridge_launch.executors import executor_names
    from mbridge_launch.knowledge.catalog import available_versions
    from mbridge_launch.knowledge.compatibility import installed_version
    from mbridge_launch.knowledge.hardware import known_hardware
    from mbridge_launch.knowledge.vocabulary import GOALS, PRECISIONS

    slurm = _slurm()
    return {
        "mbridge_launch": __version__,
        "python": platform.python_version(),
        "megatron_bridge_catalogs": available_versions(),
        "libraries": {name: installed_version(name) for name in LIBRARIES},
        # the version (None when Slurm cannot be asked) and, in slurm_state, why not
        "slurm": slurm["controller_version"] or slurm["client_version"],
        "slurm_state": slurm,
        "executors": executor_names(),
        "gpu_types": known_hardware(),
        "goals": list(GOALS),
        "precisions": list(PRECISIONS),
    }


def run(args: argparse.Namespace) -> int:
    from mbridge_launch.base.i18n import t
    from mbridge_launch.base.output import print_json

    info = collect()
    if args.format == "json":
        print_json(info)
        return 0
    missing = t("versions.missing")
    print(f"mbridge-launch {info['mbridge_launch']} (Python {info['python']})")
    print(t("versions.catalogs", versions=", ".join(info["megatron_bridge_catalogs"])))
    for name, version in info["libraries"].items():
        print(f"  {name}: {version or missing}")
    if info["slurm_state"]["state"] == "ok":
        print(t("versions.slurm", version=info["slurm"]))
    else:  # not "?": the reason in words (not installed, no slurm.conf, controller unreachable)
        from mbridge_launch.cli.commands.doctor import slurm_line

        print(slurm_line(info["slurm_state"]))
    print(t("versions.supported", executors=", ".join(info["executors"]), gpus=", ".join(info["gpu_types"]),
            goals=", ".join(info["goals"]), precisions=", ".join(info["precisions"])))
    return 0
