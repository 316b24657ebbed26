"""`mbridge-launch versions`: what this installation supports and finds, without importing the
heavy libraries (package metadata only)."""

from __future__ import annotations

import argparse

HELP = "help.versions"
LIBRARIES = ("nemo_run", "submitit", "pydantic", "PyYAML", "Jinja2", "leptonai")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from mbridge_launch.cli.main import add_common

    add_common(parser)


def _library_version(name: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _slurm_version() -> str | None:
    import shutil

    from mbridge_launch.executors.slurm_cli import SlurmUnavailable, call

    if not shutil.which("sinfo"):
        return None
    try:
        out = call(["sinfo", "-V"], timeout=10)
    except SlurmUnavailable:
        return None
    if out.ok and out.stdout.strip():
        return out.stdout.strip().split()[-1]
    return "?"  # the client is installed but finds no slurm.conf or controller


def collect() -> dict:
    import platform

    from mbridge_launch import __version__
    from mbridge_launch.executors import executor_names
    from mbridge_launch.knowledge.catalog import available_versions
    from mbridge_launch.knowledge.hardware import known_hardware
    from mbridge_launch.knowledge.vocabulary import GOALS, PRECISIONS

    return {
        "mbridge_launch": __version__,
        "python": platform.python_version(),
        "megatron_bridge_catalogs": available_versions(),
        "libraries": {name: _library_version(name) for name in LIBRARIES},
        "slurm": _slurm_version(),
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
    print(t("versions.slurm", version=info["slurm"] or missing))
    print(t("versions.supported", executors=", ".join(info["executors"]), gpus=", ".join(info["gpu_types"]),
            goals=", ".join(info["goals"]), precisions=", ".join(info["precisions"])))
    return 0
