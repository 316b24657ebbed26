"""`estimate` takes the memory settings a Plan carries (recompute modules, fp8_param_gather, the MoE
dispatcher) and charges them exactly as the memory model charges a Plan's layout (in process)."""

from __future__ import annotations

import json

import pytest

from mbridge_launch.cli.main import main
from mbridge_launch.knowledge.hardware import get_hardware
from mbridge_launch.knowledge.models import load_arch
from mbridge_launch.planner.memory import estimate_memory
from mbridge_launch.planner.rules import Layout

MOE = ("--model", "olmoe_7b", "--gpus", "8", "--gpu-type", "h100", "--ep", "8", "--mbs", "1", "--gbs", "64",
       "--seq-length", "4096")
FP8 = ("--model", "llama3_8b", "--gpus", "8", "--gpu-type", "h100", "--tp", "2", "--precision", "fp8cs",
       "--seq-length", "8192", "--gbs", "32")


def estimate(capsys, *argv: str) -> tuple[int, dict, str]:
    code = main(["estimate", *argv, "--format", "json"])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip() else {}), err


def memory_of(data: dict) -> dict:
    return data["memory_gb"]


def test_each_setting_changes_what_is_charged(capsys):
    _, unknown, _ = estimate(capsys, *MOE)
    _, alltoall, _ = estimate(capsys, *MOE, "--moe-dispatcher", "alltoall")
    _, deepep, _ = estimate(capsys, *MOE, "--moe-dispatcher", "flex")  # flex = DeepEP by default
    # without a dispatcher the model charges the largest buffer, so a named one is never more
    assert memory_of(unknown)["dispatcher"] >= max(memory_of(alltoall)["dispatcher"], memory_of(deepep)["dispatcher"])
    assert memory_of(alltoall)["dispatcher"] != memory_of(deepep)["dispatcher"]
    _, gather, _ = estimate(capsys, *FP8, "--fp8-param-gather")
    _, copies, _ = estimate(capsys, *FP8, "--no-fp8-param-gather")
    assert memory_of(copies).get("fp8_copies", 0) > memory_of(gather).get("fp8_copies", 0)


def test_estimate_charges_what_the_memory_model_charges_for_the_same_layout(capsys):
    argv = (*MOE, "--recompute", "selective", "--recompute-modules", "layernorm,moe_act", "--moe-dispatcher", "alltoall")
    code, data, err = estimate(capsys, *argv)
    assert code == 0, err
    arch, hw = load_arch("olmoe_7b"), get_hardware("h100")
    layout = Layout(tp=1, pp=1, cp=1, ep=8, mbs=1, gbs=64, seq_length=4096, world=8, gpus_per_node=8,
                    recompute="selective", recompute_modules=("layernorm", "moe_act"), moe_dispatcher="alltoall")
    want = estimate_memory(arch, layout, hw.hbm_gb)
    assert data["memory_gb"]["total"] == pytest.approx(want.total, abs=0.01)
    assert data["memory_assumes"] == {"recompute_modules": ["layernorm", "moe_act"], "fp8_param_gather": None,
                                      "moe_dispatcher": "alltoall"}
    _, default_modules, _ = estimate(capsys, *MOE, "--recompute", "selective", "--recompute-modules", "core_attn",
                                     "--moe-dispatcher", "alltoall")
    assert default_modules["memory_gb"]["total"] > data["memory_gb"]["total"]  # core_attn alone drops less


@pytest.mark.parametrize("argv, flag, named", [
    (("--recompute", "selective", "--recompute-modules", "attention"), "--recompute-modules", "core_attn"),
    (("--recompute", "selective", "--recompute-modules", "mla_up_proj"), "--recompute-modules", "multi-latent attention"),
    (("--moe-dispatcher", "nccl"), "--moe-dispatcher", "hybridep"),
])
def test_bad_values_name_the_flag_and_the_valid_choices(capsys, argv, flag, named):
    code, _, err = estimate(capsys, *MOE, *argv)
    assert code == 2 and flag in err and named in err and "Traceback" not in err


def test_modules_need_selective(capsys):
    code, _, err = estimate(capsys, *MOE, "--recompute-modules", "layernorm")
    assert code == 2 and "--recompute selective" in err
