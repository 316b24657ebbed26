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


def catalog_report() -> dict:
    """The available catalogs and where each comes from (site, user, package folder), the
    copies they shadow, where `catalog sync` writes, and folders that could not be read (reported,
    not fatal: the other folders still answer). `doctor` shows the same."""
    from mbridge_launch.base.data_dirs import CATALOGS_ENV, catalog_folders, sync_target_dir
    from mbridge_launch.base.errors import UserError
    from mbridge_launch.knowledge.catalog import catalog_entries

    problems: list[UserError] = []
    entries = catalog_entries(problems=problems)
    return {
        "catalogs": [{"version": e.version, "origin": e.origin, "path": str(e.path),
                      "shadows": [str(p) for p in e.shadowed]} for e in entries],
        "folders": [{"origin": f.origin, "path": str(f.path)} for f in catalog_folders()],
        "sync_writes_to": str(sync_target_dir()),
        "site_variable": CATALOGS_ENV,
        "errors": [exc.render() for exc in problems],
    }


def catalog_lines(report: dict) -> list[str]:
    """Text lines of catalog_report: one per catalog, then where sync writes."""
    from mbridge_launch.base.i18n import t

    lines = [t("versions.catalogs", versions=", ".join(c["version"] for c in report["catalogs"]))]
    for entry in report["catalogs"]:
        lines.append(t("versions.catalog_file", version=entry["version"], origin=t(f"catalog.origin.{entry['origin']}"),
                       path=entry["path"]))
        lines += [t("versions.catalog_shadowed", path=path) for path in entry["shadows"]]
    lines.append(t("versions.catalog_sync_folder", path=report["sync_writes_to"], variable=report["site_variable"]))
    lines += [t("versions.catalog_folder_error", error=error) for error in report["errors"]]
    return lines


def slurm_line(slurm: dict) -> str:
    """One line on whether Slurm can be asked (also `doctor`'s Slurm line)."""
    from mbridge_launch.base.i18n import t

    state = slurm["state"]
    if state == "ok":
        return t("doctor.slurm.ok", version=slurm["controller_version"] or slurm["client_version"] or "-")
    if state == "missing":
        return t("doctor.slurm.missing")
    return t(f"doctor.slurm.{state}", reason=slurm["reason"] or "-")


def collect() -> dict:
    import platform

    from mbridge_launch import __version__
    from mbridge_launch.executors import executor_names
    from mbridge_launch.knowledge.compatibility import installed_version
    from mbridge_launch.knowledge.hardware import known_hardware
    from mbridge_launch.knowledge.vocabulary import GOALS, PRECISIONS

    slurm = _slurm()
    catalogs = catalog_report()
    return {
        "mbridge_launch": __version__,
        "python": platform.python_version(),
        "megatron_bridge_catalogs": [c["version"] for c in catalogs["catalogs"]],
        "catalogs": catalogs,
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
    print("\n".join(catalog_lines(info["catalogs"])))
    for name, version in info["libraries"].items():
        print(f"  {name}: {version or missing}")
    if info["slurm_state"]["state"] == "ok":
        print(t("versions.slurm", version=info["slurm"]))
    else:  # not "?": the reason in words (not installed, no slurm.conf, controller unreachable)
        print(slurm_line(info["slurm_state"]))
    print(t("versions.supported", executors=", ".join(info["executors"]), gpus=", ".join(info["gpu_types"]),
            goals=", ".join(info["goals"]), precisions=", ".join(info["precisions"])))
    return 0
