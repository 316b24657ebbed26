"""Fixtures shared by the end-to-end modules (tests/conftest.py has the cluster itself)."""

from __future__ import annotations

import pytest

from gate_fixtures import recommend_base_plan


@pytest.fixture(scope="module")
def base_plan(tmp_path_factory) -> dict:
    """One `recommend -o` per module; tests patch names and paths into copies of it
    (gate_fixtures.write_plan)."""
    return recommend_base_plan(tmp_path_factory.mktemp("recommend"))
