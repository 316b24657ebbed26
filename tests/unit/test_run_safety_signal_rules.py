"""Signals that save (issue 13, item 5), without Slurm: the default signal and the exit-handler
override recommend writes, the Plan's --signal grammar, the preflight rule for a hand-edited
signal the trainer would die of, and what each executor writes."""

from __future__ import annotations

import signal

import pytest
import yaml

import plan_fixtures as pf
from mbridge_launch.base.errors import UserError
from mbridge_launch.cli.main import main
from mbridge_launch.executors import get_executor
from mbridge_launch.plan import signals
from mbridge_launch.plan.model import Cluster, PlanInvalid, plan_from_dict
from mbridge_launch.preflight.context import PreflightContext
from mbridge_launch.preflight.plan_checks import check_signal_handled

pytestmark = pytest.mark.usefixtures("english")

HANDLER = {"key": "train.exit_signal_handler", "value": "true", "class": "execution"}


def _with(signal_text, *overrides):
    """The single-node golden Plan with this --signal and exactly these signal overrides."""
    data = pf.single_node_h100().canonical_dict()
    data["cluster"]["signal"] = signal_text
    data["overrides"] = [o for o in data["overrides"] if o["key"] not in signals.KEYS] + list(overrides)
    return plan_from_dict(data)


def _rule(plan) -> str:
    found = check_signal_handled(PreflightContext(plan))
    assert [c.severity for c in found] in ([], ["error"])
    return found[0].message() if found else ""


@pytest.fixture
def recommended(tmp_path, capsys):
    """recommend's Plan and its --verbose card (the first screen only counts the changes)."""
    out = tmp_path / "plan.yaml"
    rc = main(["recommend", "--model", "llama32_1b", "--gpus", "2", "--goal", "pretrain", "--dataset", "mock",
               "--time", "00:30:00", "--verbose", "-o", str(out)])
    card = capsys.readouterr().out
    assert rc == 0
    return yaml.safe_load(out.read_text()), card


def test_default_signal_is_bridges_sigterm_at_60_s():
    assert Cluster().signal == "TERM@60"
    sig = signals.parse(Cluster().signal)
    assert (sig.signum, sig.lead_s, sig.batch_only) == (signal.SIGTERM, 60, False)


def test_recommend_turns_the_exit_handler_on_as_an_execution_override(recommended):
    data, card = recommended
    assert data["cluster"]["signal"] == "TERM@60"
    handler = [o for o in data["overrides"] if o["key"] == "train.exit_signal_handler"]
    assert handler == [{"key": "train.exit_signal_handler", "value": "true", "from": "false", "class": "execution",
                        "reason": {"key": "change.reason.exit_signal",
                                   "params": {"name": "SIGTERM", "signal": "TERM@60", "lead": 60}},
                        "source": "launcher"}]
    assert not [o for o in data["overrides"] if o["key"] == "train.exit_signal"]  # SIGTERM is Bridge's default
    assert "train.exit_signal_handler=true" in card  # the command on the card
    assert "[execution] train.exit_signal_handler: false -> true" in card  # and the change, with its reason
    assert _rule(plan_from_dict(data)) == ""


def test_another_signal_gets_its_number_and_a_user_setting_is_kept():
    usr1 = signals.handler_overrides("USR1@300", set())
    assert [(o.key, o.value, o.change_class) for o in usr1] == [
        ("train.exit_signal_handler", "true", "execution"), ("train.exit_signal", str(int(signal.SIGUSR1)), "execution")]
    assert signals.handler_overrides("TERM@60", {"train.exit_signal_handler"}) == []
    assert signals.handler_overrides(None, set()) == []


@pytest.mark.parametrize("text, expected", [
    ("TERM@60", (signal.SIGTERM, 60, False)), ("SIGUSR1@300", (signal.SIGUSR1, 300, False)),
    ("15@90", (signal.SIGTERM, 90, False)), ("B:USR2", (signal.SIGUSR2, 60, True)), ("RB:term@5", (signal.SIGTERM, 5, True)),
])
def test_slurm_signal_grammar(text, expected):
    sig = signals.parse(text)
    assert (sig.signum, sig.lead_s, sig.batch_only) == expected


@pytest.mark.parametrize("bad", ["USR9@300", "TERM@-1", "TERM@soon", "X:TERM", "", "999"])
def test_a_bad_signal_is_a_plan_error_naming_the_field(bad):
    data = pf.single_node_h100().canonical_dict()
    data["cluster"]["signal"] = bad
    with pytest.raises(PlanInvalid) as err:
        plan_from_dict(data)
    text = str(err.value)
    assert "cluster.signal" in text and "is not a Slurm --signal" in text and "TERM@60" in text


def test_usr1_without_the_handler_is_a_preflight_error():
    text = _rule(_with("USR1@300"))
    assert text.startswith("cluster.signal USR1@300: train.exit_signal_handler is not true")
    assert "would kill the trainer 300 s before the limit without a checkpoint" in text and "TERM@60" in text


@pytest.mark.parametrize("signal_text, overrides, expected", [
    ("TERM@60", [HANDLER], ""),
    ("TERM@60", [], "SIGTERM would kill the trainer 60 s before the limit"),
    ("TERM@60", [HANDLER, {**HANDLER, "value": "false"}], "is not true"),  # the last one wins, as on the command line
    ("USR1@300", [HANDLER], "sends SIGUSR1 but the trainer handles SIGTERM"),
    ("USR1@300", [HANDLER, {"key": "train.exit_signal", "value": "10", "class": "execution"}], ""),
    ("USR1@300", [HANDLER, {"key": "train.exit_signal", "value": "SIGUSR1", "class": "execution"}],
     "write the signal's number, train.exit_signal=10"),
    ("B:TERM@60", [HANDLER], "B: signals the batch shell only"),
    (None, [], ""),
])
def test_signal_rule(signal_text, overrides, expected):
    text = _rule(_with(signal_text, *overrides))
    assert (expected in text) if expected else text == ""


def test_sbatch_and_nemo_run_write_the_plans_signal():
    plan = _with("TERM@60", HANDLER)
    for executor in ("sbatch", "nemo-run"):
        text = get_executor(executor).render(plan).text
        assert "#SBATCH --signal=TERM@60\n" in text, executor
        assert "train.exit_signal_handler=true" in text


def test_submitit_delivers_the_plans_sigterm_not_its_own_usr2():
    text = get_executor("submitit").render(_with("TERM@45", HANDLER)).text
    assert "#SBATCH --signal=TERM@45\n" in text and "USR2@90\n" not in text
    assert "# Signal: Slurm sends SIGTERM 45 s before the limit to every task" in text
    none = get_executor("submitit").render(_with(None)).text
    assert "#SBATCH --signal=TERM@0\n" in none and "# Signal: none before the limit" in none


@pytest.mark.parametrize("signal_text", ["USR1@300", "USR2@90", "B:TERM@60"])
def test_submitit_refuses_a_signal_its_task_process_would_not_survive(signal_text):
    plan = _with(signal_text, HANDLER, {"key": "train.exit_signal", "value": "10", "class": "execution"})
    with pytest.raises(UserError) as err:
        get_executor("submitit").render(plan)
    assert err.value.key == "executors.submitit_signal"
    text = str(err.value)
    assert "\n" not in text and f"cluster.signal {signal_text}" in text and "TERM@60" in text
