"""`mbridge-launch doctor`: what this installation and this machine's Slurm are, what the cluster
offers (Pyxis, topology/block for --segment, accounting, MPI plugins, GPU GRES per partition), and
whether each version found is supported according to the compatibility matrix
(catalog/compatibility.yaml, knowledge/compatibility.py).

Exit codes: 0 nothing found is unsupported (untested versions are named, as warnings); 1 Slurm
cannot be asked (not installed, no slurm.conf, controller unreachable) or a version found is
unsupported; 2 bad arguments (argparse). Library versions come from package metadata: nothing
heavy is imported.
"""

from __future__ import annotations

import argparse
from typing import Any

HELP = "help.doctor"
# distribution name -> matrix component; the executors' libraries are extras, absent is no fault
_LIBRARIES = {"nemo_run": "nemo_run", "submitit": "submitit", "leptonai": "leptonai",
              "megatron-bridge": "megatron_bridge", "megatron-core": "megatron_core"}
_ALWAYS_SHOWN = ("nemo_run", "submitit")  # listed even when absent (the others only when installed)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from mbridge_launch.cli.main import add_common

    add_common(parser)


def _judge(component: str, label: str, version: str | None) -> dict[str, Any]:
    from mbridge_launch.knowledge.compatibility import support

    if version is None:
        return {"component": label, "version": None, "status": "absent", "note": ""}
    status, note = support(component, version)
    return {"component": label, "version": version, "status": status, "note": note}


def _pyxis_row(options: dict[str, bool]) -> dict[str, Any]:
    from mbridge_launch.knowledge.compatibility import support

    missing = [o for o, listed in options.items() if not listed]
    if len(missing) == len(options):
        return {"component": "pyxis", "version": None, "status": "absent", "note": ""}
    if missing:  # a Pyxis the executors' flags would break on at srun time
        return {"component": "pyxis", "version": None, "status": "unsupported",
                "note": "srun --help lacks " + ", ".join(missing)}
    status, note = support("pyxis", "0")
    return {"component": "pyxis", "version": None, "status": status, "note": note}


def _features(version: str | None, survey: Any) -> dict[str, bool | None]:
    from mbridge_launch.knowledge.compatibility import feature_available

    def new_enough(key: str) -> bool | None:
        return feature_available(key, version)

    pmix = None if survey.mpi_plugins is None else "pmix" in survey.mpi_plugins
    return {
        "segment": bool(new_enough("segment")) and survey.topology_block,
        "json_output": bool(new_enough("json_output")) and survey.sacct_json,
        "node_json": new_enough("node_json"),
        "accounting": survey.accounting and survey.sacct,
        "pmix": pmix,
    }


def collect(env: dict[str, str] | None = None) -> dict[str, Any]:
    """The whole report, as `--format json` prints it (stable keys)."""
    import platform

    from mbridge_launch import __version__
    from mbridge_launch.cli.commands.versions import catalog_report
    from mbridge_launch.knowledge.compatibility import installed_version, pyxis_options
    from mbridge_launch.preflight.cluster_survey import probe_slurm, survey_cluster
    from mbridge_launch.preflight.slurm import SlurmClient

    libraries = {name: installed_version(name) for name in _LIBRARIES}
    components = [_judge("python", "python", platform.python_version())]
    catalog_files = catalog_report()
    catalogs = [c["version"] for c in catalog_files["catalogs"]]
    components += [_judge("megatron_bridge", "megatron_bridge (catalog)", v) for v in catalogs]
    for name, key in _LIBRARIES.items():
        if libraries[name] is not None or name in _ALWAYS_SHOWN:
            components.append(_judge(key, name, libraries[name]))
    client = SlurmClient(env)
    probe = probe_slurm(client)
    slurm = probe.as_dict()
    cluster: dict[str, Any] | None = None
    if probe.state == "ok":
        components.append(_judge("slurm", "slurm", probe.version))
        survey = survey_cluster(client, pyxis_options())
        components.append(_pyxis_row(survey.pyxis_options))
        cluster = {
            "pyxis": {"present": survey.pyxis_present, "options": survey.pyxis_options},
            "topology": {"plugin": survey.topology_plugin, "block": survey.topology_block},
            "accounting": {"storage_type": survey.accounting_type, "enabled": survey.accounting,
                           "sacct": survey.sacct, "sacct_json": survey.sacct_json},
            "mpi_plugins": survey.mpi_plugins,
            "gpu_types": survey.gpu_types,
            "features": _features(probe.version, survey),
            "errors": survey.errors,
        }
    unsupported = [c["component"] for c in components if c["status"] == "unsupported"]
    untested = [c["component"] for c in components if c["status"] == "untested"]
    return {
        "mbridge_launch": __version__,
        "python": platform.python_version(),
        "megatron_bridge_catalogs": catalogs,
        "catalogs": catalog_files,  # where each comes from, what it shadows, where sync writes
        "libraries": {name.replace("-", "_"): v for name, v in libraries.items()},
        "slurm": slurm,
        "cluster": cluster,
        "components": components,
        "unsupported": unsupported,
        "untested": untested,
        "exit_code": 1 if unsupported or probe.state != "ok" else 0,
    }


def _print_cluster(cluster: dict[str, Any]) -> None:
    from mbridge_launch.base.i18n import t

    yes, no = t("doctor.yes"), t("doctor.no")
    print(t("doctor.section.cluster"))
    pyxis = cluster["pyxis"]
    listed = [o for o, ok in pyxis["options"].items() if ok]
    missing = [o for o, ok in pyxis["options"].items() if not ok]
    if not listed:
        print(t("doctor.pyxis.absent"))
    else:
        print(t("doctor.pyxis.present", options=", ".join(listed)))
        if missing:
            print(t("doctor.pyxis.lacks", options=", ".join(missing)))
    topo = cluster["topology"]
    segment = t("doctor.segment.yes") if cluster["features"]["segment"] else t("doctor.segment.no")
    print(t("doctor.topology", plugin=topo["plugin"] or "-", segment=segment))
    acct = cluster["accounting"]
    key = "doctor.accounting.on" if acct["enabled"] else "doctor.accounting.off"
    print(t(key, type=acct["storage_type"] or "-", sacct=yes if acct["sacct"] else no,
            json=yes if acct["sacct_json"] else no))
    plugins = cluster["mpi_plugins"]
    print(t("doctor.mpi", plugins=", ".join(plugins) if plugins else "-"))
    for partition, types in cluster["gpu_types"].items():
        if types:
            text = ", ".join(f"{gtype or '-'} x{count}" for gtype, count in types.items())
            print(t("doctor.gres", partition=partition, types=text))
        else:
            print(t("doctor.gres_none", partition=partition))
    for error in cluster["errors"]:
        print(t("doctor.query_failed", error=error))


def run(args: argparse.Namespace) -> int:
    from mbridge_launch.base.i18n import t
    from mbridge_launch.base.output import print_json

    report = collect()
    if args.format == "json":
        print_json(report)
        return int(report["exit_code"])
    print(t("doctor.title", version=report["mbridge_launch"], python=report["python"]))
    from mbridge_launch.cli.commands.versions import catalog_lines, slurm_line

    print("\n".join(catalog_lines(report["catalogs"])))
    print(slurm_line(report["slurm"]))
    if report["cluster"] is not None:
        _print_cluster(report["cluster"])
    print(t("doctor.section.components"))
    for row in report["components"]:
        # a supported row's note is in the JSON and the README; the text names only what to act on
        note = t("doctor.note", note=row["note"]) if row["note"] and row["status"] != "supported" else ""
        name = row["component"] if row["version"] is None else f"{row['component']} {row['version']}"
        print(t("doctor.component", component=name, status=t(f"doctor.status.{row['status']}"), note=note))
    if report["slurm"]["state"] != "ok":
        print(t("doctor.verdict.no_slurm"))
    elif report["unsupported"]:
        print(t("doctor.verdict.unsupported", names=", ".join(report["unsupported"])))
    elif report["untested"]:
        print(t("doctor.verdict.untested", names=", ".join(report["untested"])))
    else:
        print(t("doctor.verdict.ok"))
    return int(report["exit_code"])
