"""Read-only Slurm queries for preflight, each run at most once per preflight call.

Two queries answer nearly everything: `scontrol show partition -o` and the node list (JSON from
`scontrol show node --json` on Slurm 23.02+ or `sinfo --json` on 22.05, else `scontrol show node
-o`). The Slurm version, `scontrol show config`, `srun --help` and `sacctmgr` are asked only when a
check needs them. Nothing here changes cluster state; `sbatch --test-only` lives in cluster_checks.
Commands run through the executors' Slurm layer (mbridge_launch/slurm/commands.py).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Mapping

from mbridge_launch.slurm.commands import SlurmCommandError, SlurmResult, SlurmUnavailable, call

QUERY_TIMEOUT_S = 20

# Node states in which a node cannot take a new job now.
_BAD_BASE_STATES = {"down", "drained", "draining", "drain", "fail", "failing", "future", "unknown", "inval", "maint"}
_BAD_FLAGS = {"drain", "draining", "drained", "fail", "failing", "maint", "not_responding", "reboot_requested", "reboot_issued", "invalid_reg"}
_KV = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_/:.]*)=")


def _d(key: str, **params: object) -> str:
    from mbridge_launch.base.i18n import t

    return t(f"preflight.detail.{key}", **params)


@dataclass
class Node:
    name: str
    state: str  # base state, lower case (idle, mixed, allocated, down, ...)
    flags: tuple[str, ...] = ()  # lower case (drain, not_responding, ...)
    gres: str = ""
    features: tuple[str, ...] = ()
    partitions: tuple[str, ...] = ()
    reason: str = ""

    @property
    def available(self) -> bool:
        return self.state not in _BAD_BASE_STATES and not (set(self.flags) & _BAD_FLAGS)

    @property
    def state_text(self) -> str:
        return "+".join((self.state, *self.flags))

    def gpus(self) -> dict[str, int]:
        """GPU count per GRES type ("" for untyped GPUs)."""
        return parse_gpu_gres(self.gres)


@dataclass
class Partition:
    name: str
    nodes_expr: str = ""
    state: str = "up"
    max_time: str = "UNLIMITED"
    max_nodes: str = "UNLIMITED"
    allow_accounts: tuple[str, ...] = ("all",)
    deny_accounts: tuple[str, ...] = ()
    default: bool = False
    raw: dict[str, str] = field(default_factory=dict)


def parse_gpu_gres(gres: str) -> dict[str, int]:
    """`gpu:h100:8(S:0-1),nic:1` -> {"h100": 8}; `gpu:4` -> {"": 4}."""
    counts: dict[str, int] = {}
    text = re.sub(r"\([^)]*\)", "", gres or "")
    for item in text.split(","):
        parts = item.strip().split(":")
        if not parts or parts[0] != "gpu":
            continue
        if len(parts) == 2 and parts[1].isdigit():
            gtype, count = "", int(parts[1])
        elif len(parts) >= 3 and parts[-1].isdigit():
            gtype, count = ":".join(parts[1:-1]), int(parts[-1])
        else:
            continue
        counts[gtype] = counts.get(gtype, 0) + count
    return counts


def parse_oneliner(line: str) -> dict[str, str]:
    """`Key=value Key2=va lue ...` (scontrol -o) -> dict. Values may hold spaces (OS=, Reason=);
    a new field starts only at a space followed by `Key=`."""
    fields: dict[str, str] = {}
    matches = list(_KV.finditer(line))
    for i, match in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(line)
        fields[match.group(1)] = line[match.end():end].strip()
    return fields


def _split_state(text: str) -> tuple[str, tuple[str, ...]]:
    """`IDLE+DRAIN` / `DOWN*` -> ("idle", ("drain",)) / ("down", ("not_responding",))."""
    text = text.strip().lower()
    flags: list[str] = []
    for char, flag in (("*", "not_responding"), ("~", "powered_down"), ("#", "powering_up"), ("%", "powering_down"), ("!", "power_down_pending"), ("$", "maint"), ("@", "reboot_requested"), ("^", "reboot_issued"), ("-", "planned")):
        if text.endswith(char):
            text = text[:-1]
            flags.append(flag)
    parts = [p for p in text.split("+") if p]
    base = parts[0] if parts else "unknown"
    return base, tuple(parts[1:]) + tuple(flags)


def _as_list(value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(v for v in value.split(",") if v)
    if isinstance(value, (list, tuple)):
        return tuple(str(v) for v in value)
    return (str(value),)


def node_from_json(entry: Mapping[str, object]) -> Node:
    """A node of `sinfo --json` (22.05: state "idle" + state_flags) or `scontrol show node --json`
    (23.02+: state ["IDLE", "DRAIN"])."""
    raw_state = entry.get("state")
    if isinstance(raw_state, list):
        states = [str(s).lower() for s in raw_state] or ["unknown"]
        base, flags = states[0], tuple(states[1:])
    else:
        base, flags = _split_state(str(raw_state or "unknown"))
    flags = flags + tuple(str(f).lower() for f in _as_list(entry.get("state_flags")))
    features = entry.get("features") or entry.get("active_features") or ""
    return Node(
        name=str(entry.get("name", "")),
        state=base,
        flags=flags,
        gres=str(entry.get("gres") or ""),
        features=tuple(f.lower() for f in _as_list(features)),
        partitions=_as_list(entry.get("partitions")),
        reason=str(entry.get("reason") or ""),
    )


def node_from_oneliner(fields: Mapping[str, str]) -> Node:
    base, flags = _split_state(fields.get("State", "unknown"))
    features = fields.get("AvailableFeatures") or fields.get("ActiveFeatures") or ""
    return Node(
        name=fields.get("NodeName", ""),
        state=base,
        flags=flags,
        gres="" if fields.get("Gres") in (None, "(null)") else fields["Gres"],
        features=tuple(f.lower() for f in _as_list(features) if f != "(null)"),
        partitions=_as_list(fields.get("Partitions")),
        reason=fields.get("Reason", ""),
    )


def partition_from_oneliner(fields: Mapping[str, str]) -> Partition:
    def accounts(value: str | None, default: tuple[str, ...]) -> tuple[str, ...]:
        if not value or value in ("(null)",):
            return default
        return tuple(a.lower() for a in value.split(",") if a)

    return Partition(
        name=fields.get("PartitionName", ""),
        nodes_expr=fields.get("Nodes", ""),
        state=fields.get("State", "UP").lower(),
        max_time=fields.get("MaxTime", "UNLIMITED"),
        max_nodes=fields.get("MaxNodes", "UNLIMITED"),
        allow_accounts=accounts(fields.get("AllowAccounts"), ("all",)),
        deny_accounts=accounts(fields.get("DenyAccounts"), ()),
        default=fields.get("Default", "NO").upper() == "YES",
        raw=dict(fields),
    )


def parse_slurm_version(text: str) -> tuple[int, int] | None:
    match = re.search(r"(\d+)\.(\d+)", text or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


class SlurmClient:
    """Runs each read-only query at most once. `env` carries SLURM_CONF and PATH."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        self.env = dict(os.environ if env is None else env)
        self.calls: list[list[str]] = []  # every command actually run (tests count them)
        self._memo: dict[tuple[str, ...], SlurmResult] = {}

    def run(self, argv: list[str], stdin: str | None = None, timeout: float = QUERY_TIMEOUT_S, cache: bool = True) -> SlurmResult:
        """Run a Slurm command, cached per client when it reads no stdin and `cache` is true
        (polling passes cache=False). Missing binaries and timeouts become SlurmUnavailable."""
        key = tuple(argv)
        cache = cache and stdin is None
        if cache and key in self._memo:
            return self._memo[key]
        conf = self.env.get("SLURM_CONF")
        if conf and not os.path.isfile(conf):
            # Slurm's commands retry a missing config file for 60 s before giving up
            raise SlurmUnavailable(_d("slurm_conf_missing", path=conf))
        self.calls.append(list(argv))
        try:
            result = call(argv, env=self.env, stdin=stdin, timeout=timeout)
        except SlurmCommandError as exc:
            if exc.kind == "missing":
                raise SlurmUnavailable(_d("command_missing", command=argv[0])) from None
            if exc.kind == "timeout":
                raise SlurmUnavailable(_d("command_timeout", command=" ".join(argv), seconds=f"{timeout:.0f}")) from None
            raise SlurmUnavailable(f"{argv[0]}: {exc.reason}") from None
        if cache:
            self._memo[key] = result
        return result

    def _checked(self, argv: list[str]) -> str:
        result = self.run(argv)
        if result.returncode != 0:
            message = (result.stderr or result.stdout).strip().splitlines()
            raise SlurmUnavailable(message[-1] if message else _d("exited", command=argv[0], code=result.returncode))
        return result.stdout

    # ------------------------------------------------------------------ queries
    def partitions(self) -> dict[str, Partition]:
        key = ("__partitions__",)
        if key not in self._memo:
            text = self._checked(["scontrol", "show", "partition", "-o"])
            parts = [partition_from_oneliner(parse_oneliner(line)) for line in text.splitlines() if line.strip()]
            self._memo[key] = {p.name: p for p in parts}  # type: ignore[assignment]
        return self._memo[key]  # type: ignore[return-value]

    def nodes(self) -> dict[str, Node]:
        key = ("__nodes__",)
        if key not in self._memo:
            self._memo[key] = {n.name: n for n in self._fetch_nodes()}  # type: ignore[assignment]
        return self._memo[key]  # type: ignore[return-value]

    def _fetch_nodes(self) -> list[Node]:
        for argv in (["scontrol", "show", "node", "--json"], ["sinfo", "--json"]):
            result = self.run(argv)
            if result.returncode == 0:
                try:
                    data = json.loads(result.stdout)
                except ValueError:
                    continue
                entries = data.get("nodes") if isinstance(data, dict) else None
                if isinstance(entries, list) and all(isinstance(e, dict) and "name" in e for e in entries):
                    return [node_from_json(e) for e in entries]
        text = self._checked(["scontrol", "show", "node", "-o"])
        return [node_from_oneliner(parse_oneliner(line)) for line in text.splitlines() if line.strip()]

    def version(self) -> tuple[tuple[int, int] | None, str]:
        """((major, minor), "22.05.8") of the Slurm the commands talk to."""
        text = self._checked(["scontrol", "--version"]).strip()
        match = re.search(r"\d+\.\d+(?:\.\d+)?", text)
        return parse_slurm_version(text), match.group(0) if match else (text or "?")

    def config(self) -> dict[str, str]:
        key = ("__config__",)
        if key not in self._memo:
            values: dict[str, str] = {}
            for line in self._checked(["scontrol", "show", "config"]).splitlines():
                name, sep, value = line.partition("=")
                if sep:
                    values[name.strip()] = value.strip()
            self._memo[key] = values  # type: ignore[assignment]
        return self._memo[key]  # type: ignore[return-value]

    def has_pyxis(self) -> bool:
        """Pyxis registers --container-image with srun through SPANK; `srun --help` lists it."""
        result = self.run(["srun", "--help"])
        return "--container-image" in (result.stdout + result.stderr)

    def user_accounts(self, user: str) -> set[str] | None:
        """Accounts the user has associations with, or None when that cannot be known
        (no accounting database, no associations recorded)."""
        try:
            result = self.run(["sacctmgr", "-n", "-P", "show", "assoc", f"user={user}", "format=account"])
        except SlurmUnavailable:
            return None
        if result.returncode != 0:
            return None
        accounts = {line.strip().lower() for line in result.stdout.splitlines() if line.strip()}
        return accounts or None

