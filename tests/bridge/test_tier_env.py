"""The tier itself: its env holds the real Megatron packages at their pins, the stand-ins are the
tier's own (and only those), nothing reaches the network or the user's HF cache, and the real
validation can say no (a tier that accepts everything would make every conformance test vacuous)."""

from __future__ import annotations

import json
import os
from pathlib import Path

HERE = Path(__file__).resolve().parent

PROBE = r"""
import json, os, sys
sys.path[:0] = [sys.argv[1] + "/shim", sys.argv[1]]
from importlib import metadata
import build_recipe, hf_cache
home = hf_cache.default_home()
build_recipe.setup_environment(home)
import megatron.bridge, transformer_engine
print(json.dumps({
    "python": list(sys.version_info[:2]),
    "versions": {n: metadata.version(n) for n in ("megatron-bridge", "megatron-core", "torch", "transformers")},
    "te_file": transformer_engine.__file__,
    "te_real": any(d.metadata["Name"].lower().startswith("transformer-engine") for d in metadata.distributions()),
    "hf_home": os.environ["HF_HOME"],
    "offline": [os.environ.get(k) for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")],
}))
"""


def _pins() -> dict[str, str]:
    pins = {}
    for line in (HERE / "requirements-bridge.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, version = line.split("==")
            pins[name.lower().replace("_", "-")] = version
    return pins


def test_env_has_the_pinned_real_packages_and_only_the_tier_stand_ins(run_bridge):
    proc = run_bridge(["-c", PROBE, str(HERE)], timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    facts = json.loads(proc.stdout.strip().splitlines()[-1])
    assert facts["python"] == [3, 12]
    pins = _pins()
    for name, version in facts["versions"].items():
        assert pins[name] == version, (name, version)
    assert facts["versions"]["megatron-bridge"] == "0.6.2"
    assert facts["versions"]["megatron-core"] == "0.19.2"
    # Transformer Engine is the tier's shim, never a real install: every TE check is "not verified"
    assert Path(facts["te_file"]).is_relative_to(HERE / "shim"), facts["te_file"]
    assert facts["te_real"] is False
    assert facts["offline"] == ["1", "1"]
    home = Path(facts["hf_home"])
    assert home != Path(os.path.expanduser("~/.cache/huggingface"))
    assert home.name.startswith("hf-home-")


def test_real_validation_accepts_a_shipped_recipe_and_rejects_a_broken_layout(run_jobs):
    results = run_jobs([
        {"id": "shipped", "name": "llama3_8b_pretrain_config", "gpus": 8},
        # TP 3 cannot divide 8 GPUs: Megatron Bridge's own data-parallel size check refuses it
        {"id": "tp3", "name": "llama3_8b_pretrain_config", "gpus": 8,
         "overrides": ["model.tensor_model_parallel_size=3"]},
    ])
    shipped, broken = results["shipped"], results["tp3"]
    assert shipped["built"] and shipped["validated"], shipped.get("error")
    assert shipped["validated_fields"]["tensor_model_parallel_size"] == shipped["recipe"]["tensor_model_parallel_size"]
    assert broken["built"] and not broken["validated"]
    assert broken["stage"] == "validate"
    assert "is not divisible by total_model_size" in broken["error"]["message"]
