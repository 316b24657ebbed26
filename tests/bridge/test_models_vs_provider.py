"""catalog/models.yaml against the real Megatron Bridge 0.6.2 (issue 34, part 1).

Wherever 0.6.2 states a model's sizes itself (provider dataclass defaults, the literal provider
arguments of the recipes that construct their provider, Step-3.5's config class: see
provider_values.py), the catalog's architecture must say the same. Models that 0.6.2 builds
from the Hugging Face config.json only are checked by test_hf_cache_configs.py instead.
"""

from __future__ import annotations

import json

import pytest

from mbridge_launch.knowledge.models import load_arch

pytestmark = pytest.mark.bridge

MAMBA = {"mamba_num_heads": "num_heads", "mamba_head_dim": "head_dim", "mamba_num_groups": "num_groups",
         "mamba_state_dim": "state_dim"}


@pytest.fixture(scope="module")
def provider_values(run_bridge) -> dict:
    proc = run_bridge(["tests/bridge/provider_values.py"], timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _catalog_value(arch, field: str):
    if field in MAMBA:
        return getattr(arch.mamba, MAMBA[field])
    return getattr(arch, field)


def test_the_probe_reads_every_model_it_names(provider_values):
    assert len(provider_values) >= 12
    assert all(values for values in provider_values.values()), provider_values


def test_catalog_architectures_equal_the_providers_values(provider_values):
    differences = {}
    for token, values in provider_values.items():
        arch = load_arch(token)
        assert arch is not None, token
        for field, value in values.items():
            if value is None or (field in MAMBA and not arch.is_hybrid):
                continue  # unset in the provider, or a Mamba default of a model without Mamba layers
            if _catalog_value(arch, field) != value:
                differences[f"{token}.{field}"] = (_catalog_value(arch, field), value)
    assert not differences, differences
