"""`mbridge-launch diagnose` on the real local Slurm cluster with the stand-in trainer: one failure
scenario per cause code that can be produced here, each submitted through the real gate, left to
fail the way it fails, then diagnosed with `diagnose --format json` (the real command line in a
fresh process). Each asserts the cause, the first failing rank, its node and the exact evidence
line (file, line number, text).

The scenarios run concurrently (a module fixture submits them all, each in its own thread, and
waits), so the module takes about as long as its slowest scenario (the time limit: Slurm's
smallest, one minute). Not produced here: host_oom (the cluster does not enforce memory:
TaskPlugin=task/none, no cgroup, so nothing is OOM-killed), gpu_hardware and network (no GPUs, no
InfiniBand): their messages are covered by the log fixtures of tests/fixtures/diagnose.
"""

from __future__ import annotations

import json
import re
import socket
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import pytest

from cli_helpers import Mbl
from diagnose_helpers import Submitted, diagnose, find_line, scenario_plan, step_log, submit, unique, wait_until

pytestmark = pytest.mark.slurm

RANK_PREFIX = re.compile(r"^(?:\[rank\d+\]:\s?)+")
NODE_TMP = "nodetmp"  # the cluster's TmpFS: each node bind-mounts its own directory there


@dataclass
class Outcome:
    """What a scenario produced and what its diagnosis must say."""

    sub: Submitted
    state: str  # Slurm's final state of the job
    cause: str
    rank: Optional[int]
    node: Optional[str]
    evidence_file: Path
    # a piece of the one line that must be the evidence; several: the lines of Slurm's daemons whose
    # order in the file varies from run to run (srun's and slurmstepd's), any one of them
    evidence_needle: str | tuple[str, ...]
    target: str = ""  # what `diagnose` is given (default: the run's name, with --ledger)
    extra: dict[str, Any] = field(default_factory=dict)


Scenario = Callable[["Env"], Outcome]
SCENARIOS: dict[str, Scenario] = {}


def scenario(fn: Scenario) -> Scenario:
    SCENARIOS[fn.__name__] = fn
    return fn


@dataclass
class Env:
    base: dict
    root: Path
    cluster: Any
    mbl: Mbl

    def shared(self, name: str) -> Path:
        d = self.root / name
        d.mkdir(parents=True, exist_ok=True)
        return d

    def run(self, name: str, **kw) -> Submitted:
        shared = self.shared(name)
        return submit(self.mbl, scenario_plan(self.base, shared, unique(name.replace("_", "-")), **kw), shared)

    def finish(self, sub: Submitted, timeout: float = 240) -> tuple[str, str]:
        """(final state, node list) of the job."""
        state = self.cluster.wait(sub.job_id, timeout=timeout)
        return state, self.cluster.node_list(sub.job_id)


# ---------------------------------------------------------------------- the scenarios
@scenario
def gpu_oom(env: Env) -> Outcome:
    """4 ranks on 2 nodes; rank 3 (on the second node) runs out of GPU memory, the other three
    time out in NCCL 3 s later: rank 3 and its node are named, not the timeouts."""
    sub = env.run("gpu_oom", nodes=2, iters=8, env={"MBL_STANDIN_OOM_AT": "3", "MBL_STANDIN_OOM_RANK": "3"})
    state, nodes = env.finish(sub)
    return Outcome(sub, state, "gpu_oom", 3, "h100-2", step_log(sub), "torch.OutOfMemoryError: CUDA out of memory",
                   extra={"symptom": "nccl_timeout", "nodes": nodes})


@scenario
def dataset_missing(env: Env) -> Outcome:
    shared = env.shared("dataset_missing")
    sub = env.run("dataset_missing", data_paths=[str(shared / "data" / "corpus_text_document")])
    state, node = env.finish(sub)
    return Outcome(sub, state, "dataset_missing", 0, node, step_log(sub),
                   "One or both of the .idx and .bin files cannot be found")


@scenario
def time_limit(env: Env) -> Outcome:
    """Slurm's shortest limit (one minute) on a run that would take five; no --signal, so the
    trainer does not stop itself before Slurm kills it."""
    sub = env.run("time_limit", iters=1500, time_limit="00:01:00", signal=None)
    state, node = env.finish(sub, timeout=300)
    return Outcome(sub, state, "time_limit", None, node, sub.shared / "logs" / f"{sub.name}-{sub.job_id}.out",
                   "DUE TO TIME LIMIT", target=f"job:{sub.job_id}")


@scenario
def node_failure(env: Env) -> Outcome:
    """The job's node is set DOWN while it runs (exclusive: no other job is on that node); the
    node is resumed in `finally` whatever happens."""
    sub = env.run("node_failure", iters=1500, gpus_per_node=4, partition="gb200", exclusive=True)
    env.cluster.wait_state(sub.job_id, "RUNNING", timeout=240)
    node = env.cluster.scontrol_job(sub.job_id)["NodeList"]
    wait_until(lambda: "iteration" in _text(sub.shared / "logs"), 120, "the trainer's first iteration")
    try:
        env.cluster.run(["scontrol", "update", f"NodeName={node}", "State=DOWN", "Reason=diagnose-e2e-test"])
        state = env.cluster.wait(sub.job_id, timeout=120)
    finally:
        env.cluster.run(["scontrol", "update", f"NodeName={node}", "State=RESUME"], check=False)
    held = env.cluster.settled_sacct(sub.job_id, fields=("JobID", "State", "NodeList"))
    return Outcome(sub, state, "node_failure", None, node, sub.shared / "logs" / f"{sub.name}-{sub.job_id}.out",
                   ("srun: error: Node failure on", "DUE TO NODE FAILURE"), extra={"nodes": held["NodeList"]})


@scenario
def preempted(env: Env) -> Outcome:
    """`scontrol requeue` of a running job (what a preemption with PreemptMode=REQUEUE does): the
    trainer checkpoints on SIGTERM, the job goes back to the queue; diagnosed right then."""
    sub = env.run("preempted", iters=1500, requeue=True, save_interval=5)
    env.cluster.wait_state(sub.job_id, "RUNNING", timeout=240)
    wait_until(lambda: "iteration        3/" in _text(sub.shared / "logs"), 120, "iteration 3")
    node = env.cluster.scontrol_job(sub.job_id)["NodeList"]
    env.cluster.run(["scontrol", "requeue", sub.job_id])
    wait_until(lambda: env.cluster.scontrol_job(sub.job_id).get("Restarts") == "1", 60, "restart count 1")
    return Outcome(sub, "REQUEUED", "preempted", None, node, sub.shared / "logs" / f"{sub.name}-{sub.job_id}.out",
                   "DUE TO JOB REQUEUE", extra={"restarts": 1})


@scenario
def import_error(env: Env) -> Outcome:
    sub = env.run("import_error", env={"MBL_STANDIN_IMPORT_ERROR": "megatron.core.transformer.no_such_module"})
    state, node = env.finish(sub)
    return Outcome(sub, state, "import_error", 0, node, step_log(sub), "ModuleNotFoundError: No module named")


@scenario
def port_in_use(env: Env) -> Outcome:
    """A real listener on the port the job's rank 0 must bind (MASTER_PORT in the Plan's env)."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("0.0.0.0", 0))
    listener.listen(1)
    try:
        port = listener.getsockname()[1]
        sub = env.run("port_in_use", env={"MASTER_PORT": str(port)})
        state, node = env.finish(sub)
    finally:
        listener.close()
    return Outcome(sub, state, "port_in_use", 0, node, step_log(sub), "name: EADDRINUSE", extra={"port": port})


@scenario
def nan_loss(env: Env) -> Outcome:
    sub = env.run("nan_loss", iters=6, env={"MBL_STANDIN_NAN_AT": "3"})
    state, node = env.finish(sub)
    # the log file alone: Megatron's training_log line names no rank (print_rank_last) and no node
    return Outcome(sub, state, "nan_loss", None, None, step_log(sub), "iteration        3/       6 |",
                   target=str(step_log(sub)))


@scenario
def loss_spike(env: Env) -> Outcome:
    sub = env.run("loss_spike", iters=30, env={"MBL_STANDIN_SPIKE_AT": "25", "MBL_STANDIN_SPIKE_FACTOR": "6",
                                               "MBL_STANDIN_ITER_SECONDS": "0.05"})
    state, node = env.finish(sub)
    # the run's logs and Slurm's view: no rank on the log line, the job's one node
    return Outcome(sub, state, "loss_spike", None, node, step_log(sub), "iteration       25/      30 |")


@scenario
def checkpoint_corrupt(env: Env) -> Outcome:
    """A run saves iterations 2 and 4; rank 1's shard of iteration 4 is then cut short; the next
    run of the same directory resumes from it and rank 1 fails reading it."""
    first = env.run("checkpoint_corrupt", iters=4, save_interval=2)
    assert env.finish(first)[0] == "COMPLETED"
    shard = first.shared / "ckpt" / "iter_0000004" / "__1_0.distcp"
    shard.write_bytes(shard.read_bytes()[:9])  # truncated, as by a node that died mid-write
    sub = env.run("checkpoint_corrupt", iters=8, save_interval=2)
    state, node = env.finish(sub)
    return Outcome(sub, state, "checkpoint_corrupt", 1, node, step_log(sub), "CheckpointException ranks:dict_keys([1])")


@scenario
def tp_kv_mismatch(env: Env) -> Outcome:
    sub = env.run("tp_kv_mismatch", tp=2, overrides={"model.num_query_groups": "3"})
    state, node = env.finish(sub)
    return Outcome(sub, state, "tp_kv_mismatch", 0, node, step_log(sub), "num_query_groups (3) must be a multiple")


@scenario
def cuda_graph_conflict(env: Env) -> Outcome:
    sub = env.run("cuda_graph_conflict", env={"MBL_STANDIN_CUDA_GRAPH_CONFLICT": "1"})
    state, node = env.finish(sub)
    return Outcome(sub, state, "cuda_graph_conflict", 0, node, step_log(sub), "CUDA graphs not supported with CPU")


@scenario
def shared_fs(env: Env) -> Outcome:
    """The data is written into h100-1's node-local TmpFS only (by a job step on that node); a
    2-node job reads it: rank 0 on h100-1 finds it, rank 1 on h100-2 does not."""
    token = unique("h2data")
    local = Path(env.cluster.dir) / NODE_TMP / token
    prefix = local / "corpus_text_document"
    env.cluster.run(["srun", "-p", "h100", "-w", "h100-1", "-N1", "-n1", "-t", "1", "bash", "-c",
                     f"mkdir -p {local} && head -c 64 /dev/zero > {prefix}.bin && head -c 64 /dev/zero > {prefix}.idx"],
                    timeout=120)
    try:
        sub = env.run("shared_fs", nodes=2, gpus_per_node=1, data_paths=[str(prefix)])
        state, nodes = env.finish(sub)
    finally:
        env.cluster.run(["srun", "-p", "h100", "-w", "h100-1", "-N1", "-n1", "-t", "1", "rm", "-rf", str(local)],
                        timeout=120, check=False)
    return Outcome(sub, state, "shared_fs", 1, "h100-2", step_log(sub), "One or both of the .idx and .bin files",
                   extra={"nodes": nodes, "prefix": str(prefix)})


@scenario
def unknown(env: Env) -> Outcome:
    """An error no pattern knows (the stand-in's plain RuntimeError): `unknown`, with that line."""
    sub = env.run("unknown", env={"MBL_STANDIN_CRASH_AT": "2"})
    state, node = env.finish(sub)
    return Outcome(sub, state, "unknown", 0, node, step_log(sub), "RuntimeError: stand-in: simulated crash")


@scenario
def none(env: Env) -> Outcome:
    """A clean run: no failure, exit 0."""
    sub = env.run("none", iters=4)
    state, node = env.finish(sub)
    return Outcome(sub, state, "none", None, None, Path(), "")


def _text(logs: Path) -> str:
    return "".join(p.read_text(errors="replace") for p in sorted(logs.glob("*")) if p.is_file()) if logs.is_dir() else ""


# ---------------------------------------------------------------------- running them
@pytest.fixture(scope="module")
def outcomes(base_plan, slurm_cluster, _shared_root) -> dict[str, Any]:
    """Every scenario, concurrently; a scenario that raised is its exception (its test re-raises)."""
    env = Env(base_plan, _shared_root / "diagnose-e2e", slurm_cluster, Mbl())
    env.root.mkdir(parents=True, exist_ok=True)
    patch = pytest.MonkeyPatch()
    patch.setenv("SLURM_CONF", slurm_cluster.slurm_conf)  # the CLI's children find the cluster
    patch.setenv("MBL_SLURM_DIR", str(slurm_cluster.dir))

    def one(name: str) -> Any:
        try:
            return SCENARIOS[name](env)
        except BaseException as exc:  # noqa: BLE001 - reported by that scenario's test
            return exc

    with ThreadPoolExecutor(max_workers=len(SCENARIOS)) as pool:
        results = dict(zip(SCENARIOS, pool.map(one, SCENARIOS)))
    yield results
    for result in results.values():  # nothing left running (other tests need the nodes)
        if isinstance(result, Outcome):
            slurm_cluster.cancel(result.sub.job_id)
    patch.undo()


def _outcome(outcomes: dict, name: str) -> Outcome:
    result = outcomes[name]
    if isinstance(result, BaseException):
        raise result
    return result


def _evidence_text(line: str) -> str:
    """The evidence text of a log line: without torch's `[rankN]:` prefixes, stripped."""
    return RANK_PREFIX.sub("", line).strip()


def _diagnose(mbl, o: Outcome, *extra: str):
    target = o.target or o.sub.name
    proc = diagnose(mbl, target, o.sub.ledger, *extra)
    assert proc.returncode == (0 if o.cause == "none" else 1), proc.stdout + proc.stderr
    return proc.json()


# ---------------------------------------------------------------------- the assertions
# Slurm's final word on each scenario's job: numeric faults complete (the trainer goes on), Slurm's
# own interruptions have their states, everything else fails.
SLURM_STATE = {"nan_loss": "COMPLETED", "loss_spike": "COMPLETED", "none": "COMPLETED", "time_limit": "TIMEOUT",
               "node_failure": "NODE_FAIL", "preempted": "REQUEUED"}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario_is_diagnosed(outcomes, slurm_env, mbl, name):
    o = _outcome(outcomes, name)
    assert o.state == SLURM_STATE.get(name, "FAILED")
    got = _diagnose(mbl, o)
    assert set(got) >= {"cause", "rank", "node", "evidence", "fix", "retry"}, got
    assert (got["cause"], got["rank"], got["node"]) == (o.cause, o.rank, o.node), (o.state, json.dumps(got)[:3000])
    if o.cause == "none":
        assert got["evidence"] == [] and got["retry"] == "no"
        return
    assert got["fix"] and got["retry"] in ("resubmit", "resubmit_excluding_node", "rollback", "no")
    needles = o.evidence_needle if isinstance(o.evidence_needle, tuple) else (o.evidence_needle,)
    # Slurm writes the step's "DUE TO NODE FAILURE" line only when slurmstepd outlives the node
    # going down (seen missing once on the clean-clone machine): each needle is a line the evidence
    # may name, and at least one of them must be in the log.
    allowed = []
    for needle in needles:
        try:
            allowed.append(find_line(o.evidence_file, needle))
        except AssertionError:
            continue
    assert allowed, (needles, o.evidence_file.read_text(errors="replace")[-2000:])
    first = got["evidence"][0]
    assert first["file"] == str(o.evidence_file), (allowed, got["evidence"])
    assert (first["line"], first["text"]) in [(n, _evidence_text(line)) for n, line in allowed], (allowed, got["evidence"])


def test_oom_names_the_first_failing_rank_and_keeps_the_timeouts_as_symptoms(outcomes, slurm_env, mbl):
    o = _outcome(outcomes, "gpu_oom")
    assert o.state == "FAILED" and o.extra["nodes"] == "h100-[1-2]"
    got = _diagnose(mbl, o)
    timeouts = [s for s in got["symptoms"] if s["cause"] == "nccl_timeout"]
    # every other rank timed out (each watchdog line names its rank; c10d's terminate line names none)
    assert {s["rank"] for s in timeouts} - {None} == {0, 1, 2}, got["symptoms"]
    assert {s["node"] for s in timeouts if s["rank"] is not None} == {"h100-1", "h100-2"}
    assert got["retry"] == "no"  # a software/configuration error: a retry fails the same way
    assert "OutOfMemoryError" not in json.dumps(timeouts)


def test_shared_fs_names_the_rank_on_the_node_without_the_data(outcomes, slurm_env, mbl):
    o = _outcome(outcomes, "shared_fs")
    assert o.state == "FAILED" and o.extra["nodes"] == "h100-[1-2]"
    log = step_log(o.sub)
    assert "Load the _IndexReader from " + o.extra["prefix"] in log.read_text()  # rank 0 on h100-1 found it
    got = _diagnose(mbl, o)
    assert o.extra["prefix"] in got["evidence"][0]["text"]


def test_node_failure_names_the_node_and_excludes_it(outcomes, slurm_env, mbl, slurm_cluster):
    o = _outcome(outcomes, "node_failure")
    assert o.state == "NODE_FAIL"
    got = _diagnose(mbl, o)
    assert got["exclude_nodes"] == [o.node] and got["retry"] == "resubmit_excluding_node"
    state = slurm_cluster.run(["sinfo", "-h", "-n", o.node, "-o", "%T"]).stdout.strip()
    assert state not in ("down", "down*", "drained"), state  # restored for everyone else


def test_requeue_shows_the_restart_count_and_says_it_is_still_going(outcomes, slurm_env, mbl):
    o = _outcome(outcomes, "preempted")
    got = _diagnose(mbl, o)
    assert got["restarts"] == 1 and got["running"] is True, got
    assert got["retry"] == "resubmit"
    proc = mbl.run("diagnose", o.sub.name, "--ledger", str(o.sub.ledger))  # the text form says so too
    assert proc.returncode == 1 and "still going" in proc.stderr, (proc.stdout, proc.stderr)


def test_time_limit_by_job_id_reads_slurms_view_and_the_job_logs(outcomes, slurm_env, mbl):
    o = _outcome(outcomes, "time_limit")
    assert o.state == "TIMEOUT"
    got = _diagnose(mbl, o)  # the bare job id: sacct + the StdOut scontrol names
    assert got["job_id"] == o.sub.job_id and got["slurm_state"] == "TIMEOUT"
    assert got["retry"] == "resubmit"


def test_a_run_that_ended_gets_its_diagnosis_in_the_ledger_and_in_status(outcomes, slurm_env, mbl):
    from mbridge_launch.runs import ledger as L

    o = _outcome(outcomes, "import_error")
    _diagnose(mbl, o)
    with L.Ledger.open(o.sub.ledger) as ledger:
        run = ledger.get_run(o.sub.name)
        events = [e for e in ledger.events(run.id) if e["kind"] == "diagnosis"]
    assert events and events[-1]["detail"]["cause"] == "import_error" and events[-1]["detail"]["rank"] == 0
    status = mbl.run("status", o.sub.name, "--ledger", str(o.sub.ledger))
    assert status.returncode == 0
    [line] = [ln for ln in status.stdout.splitlines() if ln.strip().startswith("diagnosis:")]
    assert "import_error on rank 0" in line, status.stdout
    data = mbl.run("status", o.sub.name, "--ledger", str(o.sub.ledger), "--format", "json").json()
    assert data["diagnosis"]["cause"] == "import_error"


def test_text_and_chinese_output_of_a_real_failure(outcomes, slurm_env, mbl):
    o = _outcome(outcomes, "tp_kv_mismatch")
    proc = mbl.run("diagnose", o.sub.name, "--ledger", str(o.sub.ledger))
    assert proc.returncode == 1
    number, line = find_line(o.evidence_file, o.evidence_needle)
    assert f"{o.evidence_file}:{number}: {_evidence_text(line)}" in proc.stdout
    zh = mbl.run("diagnose", o.sub.name, "--ledger", str(o.sub.ledger), "--lang", "zh", lang="zh")
    assert zh.returncode == 1 and "原因" in zh.stdout and "tp_kv_mismatch" in zh.stdout

