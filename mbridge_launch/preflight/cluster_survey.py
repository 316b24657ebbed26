"""What the Slurm of this machine is and offers, for `doctor` and `versions` (one probe for both).

`probe_slurm()` says whether Slurm can be asked at all, in four states:
  missing      no sinfo/scontrol on PATH
  no_config    the client is installed but finds no slurm.conf (SLURM_CONF names a missing file,
               or `sinfo -V` cannot establish a configuration source)
  unreachable  the configuration is read but the controller does not answer `scontrol show config`
  ok           the controller answered
`survey_cluster()` then reads, through preflight's SlurmClient (cached, read-only): the Pyxis
options `srun --help` lists, the MPI plugins, TopologyPlugin (topology/block for --segment),
accounting (AccountingStorageType, whether sacct and sacct --json answer) and the GPU GRES types
per partition. Nothing here changes cluster state.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass, field

from mbridge_launch.preflight.slurm import SlurmClient
from mbridge_launch.slurm.commands import SlurmUnavailable

_VERSION = re.compile(r"\d+\.\d+(?:\.\d+)?")
# bounded sacct queries: an empty time window answers quickly on a site with a long history
_SACCT = ["sacct", "-n", "-X", "-P", "-o", "JobIDRaw", "-S", "now", "-E", "now"]
_SACCT_JSON = ["sacct", "--json", "-X", "-S", "now", "-E", "now"]


@dataclass
class SlurmProbe:
    state: str  # missing | no_config | unreachable | ok
    client_version: str | None = None  # sinfo -V (the client's own version, no controller needed)
    controller_version: str | None = None  # SLURM_VERSION of scontrol show config
    reason: str = ""  # Slurm's own words when state is no_config or unreachable

    @property
    def version(self) -> str | None:
        return self.controller_version or self.client_version

    def as_dict(self) -> dict[str, str | None]:
        """The JSON form `doctor` and `versions` print (stable keys)."""
        return {"state": self.state, "client_version": self.client_version,
                "controller_version": self.controller_version, "reason": self.reason}


@dataclass
class ClusterSurvey:
    pyxis_options: dict[str, bool] = field(default_factory=dict)  # option -> listed by srun --help
    mpi_plugins: list[str] | None = None  # srun --mpi=list; None when it did not answer
    topology_plugin: str = ""
    accounting_type: str = ""
    sacct: bool = False  # sacct answered a query
    sacct_json: bool = False  # sacct --json answered with JSON
    gpu_types: dict[str, dict[str, int]] = field(default_factory=dict)  # partition -> {type: GPUs per node}
    errors: list[str] = field(default_factory=list)  # queries that gave no answer, with Slurm's reason

    @property
    def accounting(self) -> bool:
        return self.accounting_type not in ("", "(null)", "accounting_storage/none")

    @property
    def topology_block(self) -> bool:
        return self.topology_plugin.strip() == "topology/block"

    @property
    def pyxis_present(self) -> bool:
        return any(self.pyxis_options.values())


def _version(text: str) -> str | None:
    match = _VERSION.search(text or "")
    return match.group(0) if match else None


def probe_slurm(client: SlurmClient) -> SlurmProbe:
    path = client.env.get("PATH", os.defpath)
    if not (shutil.which("sinfo", path=path) and shutil.which("scontrol", path=path)):
        return SlurmProbe("missing")
    conf = client.env.get("SLURM_CONF")
    if conf and not os.path.isfile(conf):
        return SlurmProbe("no_config", reason=f"SLURM_CONF={conf}: no such file")
    try:
        answer = client.run(["sinfo", "-V"])
    except SlurmUnavailable as exc:
        return SlurmProbe("unreachable", reason=str(exc))
    if not answer.ok:
        # without a slurm.conf (or configless DNS records) even the version needs a configuration
        fatal = [ln.split("fatal:", 1)[1].strip() for ln in answer.output.splitlines() if "fatal:" in ln]
        return SlurmProbe("no_config", reason=fatal[-1] if fatal else answer.reason)
    probe = SlurmProbe("ok", client_version=_version(answer.stdout))
    try:
        config = client.config()
    except SlurmUnavailable as exc:
        probe.state, probe.reason = "unreachable", str(exc)
        return probe
    probe.controller_version = _version(config.get("SLURM_VERSION", ""))
    return probe


def _gpu_types(client: SlurmClient) -> dict[str, dict[str, int]]:
    """{partition: {GRES GPU type: GPUs per node (the largest node)}}; a partition without GPU
    nodes maps to {}; an untyped `gpu:N` is the type ""."""
    result: dict[str, dict[str, int]] = {name: {} for name in client.partitions()}
    for node in client.nodes().values():
        for partition in node.partitions:
            types = result.setdefault(partition, {})
            for gtype, count in node.gpus().items():
                types[gtype] = max(types.get(gtype, 0), count)
    return dict(sorted(result.items()))


def _sacct_json(client: SlurmClient) -> bool:
    answer = client.run(_SACCT_JSON)
    if not answer.ok:
        return False
    try:
        data = json.loads(answer.stdout)
    except ValueError:
        return False
    return isinstance(data, dict) and "jobs" in data


def survey_cluster(client: SlurmClient, options: tuple[str, ...]) -> ClusterSurvey:
    """What a reachable cluster offers; `options`: the container options to look for in
    `srun --help`. A query that gives no answer is recorded in `errors`, the rest still runs."""
    survey = ClusterSurvey()
    try:
        config = client.config()
        survey.topology_plugin = config.get("TopologyPlugin", "")
        survey.accounting_type = config.get("AccountingStorageType", "")
    except SlurmUnavailable as exc:
        survey.errors.append(f"scontrol show config: {exc}")
    try:
        answer = client.run(["srun", "--help"])
        text = answer.stdout + answer.stderr
        # an option is listed when it starts a word (--container-image=..., not --no-container-image)
        survey.pyxis_options = {o: re.search(rf"(?<![\w-]){re.escape(o)}(?![\w-])", text) is not None
                                for o in options}
    except SlurmUnavailable as exc:
        survey.errors.append(f"srun --help: {exc}")
    try:
        answer = client.run(["srun", "--mpi=list"])
        if answer.ok or answer.stdout.strip():
            lines = (answer.stdout + answer.stderr).splitlines()
            survey.mpi_plugins = [ln.strip() for ln in lines if ln.startswith(("\t", " ")) and ln.strip()]
    except SlurmUnavailable as exc:
        survey.errors.append(f"srun --mpi=list: {exc}")
    try:
        survey.sacct = client.run(_SACCT).ok
        survey.sacct_json = survey.sacct and _sacct_json(client)
    except SlurmUnavailable as exc:
        survey.errors.append(f"sacct: {exc}")
    try:
        survey.gpu_types = _gpu_types(client)
    except SlurmUnavailable as exc:
        survey.errors.append(f"scontrol show partition/node: {exc}")
    return survey
