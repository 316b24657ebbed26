"""GPU systems and precisions."""

from __future__ import annotations

import pytest

from mbridge_launch.base.errors import UserError
from mbridge_launch.knowledge.hardware import get_hardware, known_hardware
from mbridge_launch.knowledge.vocabulary import PRECISIONS, normalize_precision


def test_known_systems_and_facts():
    assert known_hardware() == ["h100", "h200", "b200", "b300", "gb200", "gb300"]
    h100 = get_hardware("h100")
    assert (h100.gpus_per_node, h100.nvlink_domain, h100.hbm_gb) == (8, 8, 80)
    assert (h100.peak("bf16"), h100.peak("fp8cs")) == (989, 1979)
    gb200 = get_hardware("gb200")
    assert (gb200.gpus_per_node, gb200.nvlink_domain, gb200.hbm_gb) == (4, 72, 186)
    assert (gb200.peak("bf16"), gb200.peak("fp8mx"), gb200.peak("nvfp4")) == (2500, 5000, 10000)
    assert get_hardware("b300").hbm_gb == 288 and get_hardware("gb300").peak("nvfp4") == 15000
    for name in known_hardware():
        hw = get_hardware(name)
        assert hw.nvlink_gbps > hw.network_gbps > 0 and hw.hbm_tbps > 0


@pytest.mark.parametrize("alias,name", [("H100", "h100"), ("h100-sxm", "h100"), ("H100_SXM", "h100"),
                                        ("GB200-NVL72", "gb200"), ("gb300_nvl72", "gb300"), ("H200 SXM", "h200"),
                                        (" B200 ", "b200")])
def test_aliases_case_insensitive(alias, name):
    assert get_hardware(alias).name == name


def test_unknown_gpu_lists_valid_types():
    with pytest.raises(UserError) as err:
        get_hardware("a100")
    assert err.value.key == "hardware.unknown" and err.value.exit_code == 2
    assert "h100, h200, b200, b300, gb200, gb300" in str(err.value)


def test_precisions_per_system():
    assert normalize_precision("FP8_CS") == "fp8cs" and normalize_precision("mxfp8") == "fp8mx"
    assert normalize_precision("fp8_blockwise") == "fp8sc" and set(PRECISIONS) >= {"nvfp4", "fp8ds"}
    h100 = get_hardware("h100")
    assert h100.supports("fp8cs") and not h100.supports("fp8mx") and not h100.supports("nvfp4")
    with pytest.raises(UserError) as err:
        h100.peak("nvfp4")
    assert err.value.key == "hardware.precision_unsupported" and "fp8cs" in err.value.params["valid"]
    with pytest.raises(UserError):
        normalize_precision("int4")


def test_link_choice_by_group_span():
    hw = get_hardware("h100")
    assert hw.link_gbps(8) == hw.nvlink_gbps and hw.link_gbps(16) == hw.network_gbps
    assert get_hardware("gb200").link_gbps(64) == get_hardware("gb200").nvlink_gbps
