"""`catalog verify` end to end against the real Megatron Bridge: the user-facing command runs the
package's real_build in another interpreter (the tier's env stands in for a user's container: its
TE shim and offline HF cache come in through the environment, as a user's own site would), and
compares the real ConfigContainers with the catalog."""

from __future__ import annotations

import json
import os
from pathlib import Path

import hf_cache

HERE = Path(__file__).resolve().parent


def test_verify_reports_the_real_comparison(mbl, bridge_python):
    env = {
        "PYTHONPATH": str(HERE / "shim"),
        "HF_HOME": str(hf_cache.ensure(hf_cache.default_home())),
        "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "WANDB_MODE": "disabled",
        "MEGATRON_CONFIG_LOCK_DIR": str(hf_cache.default_home() / "locks"),
    }
    names = ["llama3_8b_pretrain_config", "ministral3_3b_sft_config"]
    result = mbl.run("catalog", "verify", "--python", bridge_python, *names, "--present-gpu", "--format", "json",
                     env=env, timeout=900)
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    answer = json.loads(result.stdout)
    assert answer["megatron_bridge"] == "0.6.2"
    assert answer["recipes"] == 2 and answer["built"] == 2
    # llama3_8b validates; ministral3 SFT is rejected by the real validation (in-batch packing
    # with micro-batch size 1) and the catalog's findings must say so
    assert answer["validated"] == 1
    (rejection,) = answer["rejections"]
    assert rejection["recipe"] == "ministral3_3b_sft_config"
    assert "enable_in_batch_packing" in rejection["error"]
    assert "in_batch_packing_mbs1" in rejection["predicted_by"], rejection
    assert result.rc == (0 if answer["passed"] else 1)
    assert os.environ.get("PYTHONPATH") != env["PYTHONPATH"]  # the shim never leaks into this process
