"""`preflight --on-nodes`: submit ONLY the node-check step (the executors' rendering), wait for
it, and report per node: GPU count and type, and NVLink between a node's GPUs where
`nvidia-smi topo -m` exists.

This is the one part of preflight that submits a job. Its output goes to preflight's own cache
directory (the sbatch command line overrides the script's --output), and a job still pending at
the timeout is cancelled, so nothing is left behind on the cluster; so is one whose wait is
interrupted (Ctrl-C, SIGTERM: exit 130, saying so). A wait longer than a few seconds shows the
job's state and Slurm's pending reason.
"""

from __future__ import annotations

import re
import signal
import sys
import time
from pathlib import Path

from mbridge_launch.preflight.context import PreflightContext
from mbridge_launch.preflight.model import Check
from mbridge_launch.preflight.progress import Progress
from mbridge_launch.preflight.slurm import SlurmClient, SlurmUnavailable, parse_oneliner

WAIT_TIMEOUT_S = 300
POLL_S = 0.5
PROGRESS_AFTER_S = 5.0  # a wait longer than this says where the job is
PROGRESS_EVERY_S = 15.0  # then at most one line per this many seconds
TOPO_TAG = "MBL-TOPO"
# Prints `nvidia-smi topo -m` on each node, every line tagged with the node name (a code
# constant: no value from the Plan reaches this shell text).
TOPOLOGY_PROGRAM = (
    'node=${SLURMD_NODENAME:-$(hostname)}; '
    'if command -v nvidia-smi >/dev/null 2>&1 && topo=$(nvidia-smi topo -m 2>/dev/null); then '
    'printf "%s\\n" "$topo" | sed "s/^/' + TOPO_TAG + ' $node | /"; '
    'else echo "' + TOPO_TAG + ' $node | unavailable"; fi'
)
_TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "PREEMPTED"}


def topology_step(nodes: int) -> str:
    from mbridge_launch.base.quoting import sh_join

    argv = ["srun", "--export=ALL", f"--nodes={nodes}", f"--ntasks={nodes}", "--ntasks-per-node=1", "bash", "-c", TOPOLOGY_PROGRAM]
    return sh_join(argv) + "\n"


def node_check_job(ctx: PreflightContext) -> str:
    """The executors' node-check script (rendered in English so its lines can be parsed; the
    report is translated), followed by the topology step."""
    from mbridge_launch.base import i18n
    from mbridge_launch.executors.batch_script import node_check_script

    previous = i18n.current_lang()
    i18n.set_lang("en")
    try:
        script = node_check_script(ctx.plan)
    finally:
        i18n.set_lang(previous)
    return script.rstrip("\n") + "\n" + topology_step(ctx.plan.cluster.nodes)


def _line_pattern(key: str) -> re.Pattern[str]:
    """A regex for the English node-check message `key`, placeholders as named groups."""
    from mbridge_launch.base.i18n import template

    text = template(key, "en")
    assert isinstance(text, str), key  # node-check lines have no plural forms
    parts = re.split(r"\{(\w+)\}", text)
    regex = ""
    for i, part in enumerate(parts):
        regex += re.escape(part) if i % 2 == 0 else f"(?P<{part}>.+?)"
    return re.compile(r"mbridge-launch: " + regex + r"\s*$")


def parse_node_lines(text: str) -> dict[str, dict[str, str]]:
    """node -> {status: ok|mismatch|type_unknown, found_count, found_type, source, ...}."""
    patterns = {status: _line_pattern(f"executors.node_check.{status}") for status in ("ok", "mismatch", "type_unknown")}
    nodes: dict[str, dict[str, str]] = {}
    for line in text.splitlines():
        for status, pattern in patterns.items():
            match = pattern.search(line)
            if match:
                nodes[match.group("node")] = {"status": status, **match.groupdict()}
                break
    return nodes


def parse_topology(text: str) -> dict[str, dict[str, object]]:
    """node -> {"available": bool, "gpus": n, "missing": [(i, j, link)...]} from tagged
    `nvidia-smi topo -m` matrices (entries NV<n> are NVLink; PIX/PXB/PHB/NODE/SYS are not)."""
    per_node: dict[str, list[str]] = {}
    for line in text.splitlines():
        if line.startswith(TOPO_TAG + " "):
            node, _, rest = line[len(TOPO_TAG) + 1:].partition(" | ")
            per_node.setdefault(node.strip(), []).append(rest)
    result: dict[str, dict[str, object]] = {}
    for node, lines in per_node.items():
        if any(line.strip() == "unavailable" for line in lines):
            result[node] = {"available": False, "gpus": 0, "missing": []}
            continue
        result[node] = topology_matrix(lines)
    return result


def topology_matrix(lines: list[str]) -> dict[str, object]:
    header: list[str] = []
    rows: dict[str, list[str]] = {}
    for line in lines:
        cells = re.sub(r"\x1b\[[0-9;]*m", "", line).split()
        if not cells:
            continue
        if not header and cells[0].startswith("GPU0"):
            header = [c for c in cells if re.fullmatch(r"GPU\d+", c)]
        elif header and re.fullmatch(r"GPU\d+", cells[0]):
            rows[cells[0]] = cells[1:1 + len(header)]
    missing = []
    for row, cells in rows.items():
        for col, link in zip(header, cells):
            if row != col and link != "X" and not link.startswith("NV"):
                missing.append((row, col, link))
    return {"available": bool(header), "gpus": len(header), "missing": missing}


def run_node_checks(ctx: PreflightContext, client: SlurmClient, timeout_s: float = WAIT_TIMEOUT_S) -> list[Check]:
    """Submit the node-check job, wait for it, report. An interrupt (Ctrl-C, SIGTERM) once the
    job exists cancels it, says so, and goes on as KeyboardInterrupt (exit 130): nothing is left
    queued. The sbatch call itself is not cut: interrupts wait for its answer (base/signals.py),
    so the job id is known when they land."""
    from mbridge_launch.base.signals import deferred_signals

    try:
        script = node_check_job(ctx)
    except Exception as exc:  # noqa: BLE001 - the renderer is another module; say why we stop
        return [Check("nodes.render_failed", "error", {"reason": f"{type(exc).__name__}: {exc}"})]
    out_dir = _out_dir(ctx)
    argv = ["sbatch", "--parsable", f"--output={out_dir}/node-check-%j.out", f"--error={out_dir}/node-check-%j.out"]
    job_id = None
    with _sigterm_as_interrupt():
        try:
            with deferred_signals():
                try:
                    result = client.run(argv, stdin=script)
                except SlurmUnavailable as exc:
                    return [Check("nodes.submit_failed", "error", {"reason": str(exc)})]
                job_id = _job_id(result.stdout)
            if result.returncode != 0 or job_id is None:
                lines = (result.stderr or result.stdout).strip().splitlines()
                return [Check("nodes.submit_failed", "error", {"reason": lines[-1] if lines else f"sbatch exited {result.returncode}"})]
            state = _wait_reporting(ctx, client, job_id, timeout_s)
        except KeyboardInterrupt:
            if job_id is not None:
                _cancel_interrupted(client, job_id)
            raise
    output_path = out_dir / f"node-check-{job_id}.out"
    if state is None:
        client.run(["scancel", job_id], cache=False)
        return [Check("nodes.timeout", "error", {"job": job_id, "seconds": int(timeout_s), "log": str(output_path)})]
    text = _read(output_path)
    return report_nodes(ctx, job_id, state, text, output_path)


def _job_id(stdout: str) -> str | None:
    job_id = stdout.strip().split(";")[0]
    return job_id if job_id.isdigit() else None


class _sigterm_as_interrupt:
    """SIGTERM raises KeyboardInterrupt while preflight owns a node-check job, so that a kill
    cancels the job as Ctrl-C does (Python's default for SIGTERM exits without any cleanup)."""

    def __enter__(self) -> "_sigterm_as_interrupt":
        import threading

        self.previous = None
        if threading.current_thread() is threading.main_thread():
            self.previous = signal.signal(signal.SIGTERM, self._raise)
        return self

    @staticmethod
    def _raise(signum: int, frame: object) -> None:
        raise KeyboardInterrupt()

    def __exit__(self, *exc: object) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGTERM, self.previous)


def _cancel_interrupted(client: SlurmClient, job_id: str) -> None:
    from mbridge_launch.base.i18n import t
    from mbridge_launch.base.signals import deferred_signals

    with deferred_signals():  # a second Ctrl-C must not stop the scancel half-way
        try:
            result = client.run(["scancel", job_id], cache=False)
            reason = "" if result.ok else (result.stderr or result.stdout).strip() or f"scancel exited {result.returncode}"
        except SlurmUnavailable as exc:
            reason = str(exc)
    if reason:
        print(t("preflight.nodes.interrupt_cancel_failed", job=job_id, reason=reason), file=sys.stderr, flush=True)
    else:
        print(t("preflight.nodes.interrupt_cancelled", job=job_id), file=sys.stderr, flush=True)


def _out_dir(ctx: PreflightContext) -> Path:
    from mbridge_launch.base.paths import cache_dir

    path = (ctx.cache_dir or cache_dir()) / "node-check"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _wait_reporting(ctx: PreflightContext, client: SlurmClient, job_id: str, timeout_s: float) -> str | None:
    from mbridge_launch.base.i18n import t

    with Progress(ctx.progress_stream, t("preflight.progress.nodes", job=job_id), int(timeout_s)) as progress:
        return _wait(client, job_id, timeout_s, progress, _WaitReport(job_id, progress))


class _WaitReport:
    """What a long wait shows: on a terminal the progress bar's label (job, state, Slurm's
    reason); elsewhere (a pipe, a CI log) one line on stderr after PROGRESS_AFTER_S, then at most
    one every PROGRESS_EVERY_S, or PROGRESS_AFTER_S after a change of state."""

    def __init__(self, job_id: str, progress: Progress | None) -> None:
        self.job_id, self.progress = job_id, progress
        self.start = time.monotonic()
        self.last_line: float | None = None
        self.last_state = ""

    def __call__(self, state: str, reason: str) -> None:
        from mbridge_launch.base.i18n import t

        now = time.monotonic()
        waited = now - self.start
        text = t("preflight.nodes.waiting", job=self.job_id, state=state or "?", reason=reason or "-",
                 seconds=int(waited))
        changed, self.last_state = state != self.last_state, state
        if self.progress is not None and self.progress.stream is not None:
            self.progress.label = text
            return
        since = None if self.last_line is None else now - self.last_line
        due = since is None or since >= PROGRESS_EVERY_S or (changed and since >= PROGRESS_AFTER_S)
        if waited >= PROGRESS_AFTER_S and due:
            self.last_line = now
            print(text, file=sys.stderr, flush=True)


def _wait(client: SlurmClient, job_id: str, timeout_s: float, progress: Progress | None = None,
          report: "_WaitReport | None" = None) -> str | None:
    """The job's final state, or None at the timeout. `scontrol show job` keeps finished jobs
    for MinJobAge; after that the job is gone and counts as finished."""
    start = time.monotonic()
    deadline = start + timeout_s
    while time.monotonic() < deadline:
        if progress is not None:  # the bar shows the time waited against the timeout
            progress.advance(int(time.monotonic() - start) - progress.done)
        result = client.run(["scontrol", "show", "job", "-o", job_id], timeout=30, cache=False)
        if result.returncode != 0:
            return "UNKNOWN"
        fields = parse_oneliner(result.stdout.strip())
        state = fields.get("JobState", "")
        if state in _TERMINAL:
            return state
        if report is not None:
            report(state, fields.get("Reason", ""))
        time.sleep(POLL_S)
    return None


NODE_OUTPUT_MAX = 4 << 20  # the node check prints a few lines per node


def _read(path: Path) -> str:
    """The job's output, bounded (base/files.py): the output folder may be shared, and what
    stands at the path a FIFO, a device or a huge file; those read as nothing."""
    from mbridge_launch.base.files import probe_read

    for _ in range(20):  # the output file may appear a moment after the job ends
        probe = probe_read(path, NODE_OUTPUT_MAX)
        if probe.kind != "missing":
            return probe.data.decode("utf-8", "replace") if probe.data is not None else ""
        time.sleep(0.1)
    return ""


def report_nodes(ctx: PreflightContext, job_id: str, state: str, text: str, log: Path) -> list[Check]:
    cluster = ctx.plan.cluster
    nodes = parse_node_lines(text)
    topology = parse_topology(text)
    checks: list[Check] = []
    for node in sorted(nodes):
        info = nodes[node]
        params = {"node": node, "found_count": info.get("found_count", "?"), "found_type": info.get("found_type", "?"),
                  "expected_count": cluster.gpus_per_node, "expected_type": cluster.gpu_type, "source": info.get("source", "?")}
        if info["status"] == "ok":
            checks.append(Check("nodes.node_ok", "info", params, subject=node))
        elif info["status"] == "type_unknown":
            checks.append(Check("nodes.type_unverified", "warning", params, subject=node))
        else:
            checks.append(Check("nodes.node_mismatch", "error", params, subject=node))
    for node in sorted(topology):
        topo = topology[node]
        if not topo["available"]:
            checks.append(Check("nodes.topology_unavailable", "info", {"node": node}, subject=node))
        elif topo["missing"]:
            pairs = ", ".join(f"{a}-{b} {link}" for a, b, link in topo["missing"][:6])  # type: ignore[index]
            checks.append(Check("nodes.nvlink_missing", "warning", {"node": node, "pairs": pairs}, subject=node))
        else:
            checks.append(Check("nodes.nvlink_ok", "info", {"node": node, "gpus": topo["gpus"]}, subject=node))
    reported = len(nodes)
    if state != "COMPLETED" and not any(c.severity == "error" for c in checks):
        tail = " | ".join(line for line in text.strip().splitlines()[-3:]) or "-"
        checks.append(Check("nodes.job_failed", "error", {"job": job_id, "state": state, "tail": tail, "log": str(log)}))
    elif reported < cluster.nodes:
        checks.append(Check("nodes.missing_reports", "error", {"job": job_id, "reported": reported, "nodes": cluster.nodes, "log": str(log)}))
    return checks
