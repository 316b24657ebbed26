"""The property tier (issue 14): hypothesis profiles, the shared world of hostile files, and the
summary line CI logs show ("property tests: N invocations ...", printed whatever -r says).

Profiles: `ci` when CI=true (derandomize: the same examples on every run, so a failure in CI
reproduces anywhere), `dev` otherwise (random examples; set HYPOTHESIS_PROFILE=ci to replay CI's);
`explore` (HYPOTHESIS_PROFILE=explore) skips shrinking, to list many violations quickly.
Neither keeps an example database (nothing is written into the checkout). MBL_PROPERTY_SCALE
multiplies every test's number of examples (e.g. 10 for a long hunt on a workstation)."""

from __future__ import annotations

import os

import property_harness as H
import pytest
from hypothesis import HealthCheck, Phase, settings

_COMMON = dict(deadline=None, database=None, print_blob=True,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                      HealthCheck.filter_too_much])
settings.register_profile("ci", derandomize=True, **_COMMON)
settings.register_profile("dev", derandomize=False, **_COMMON)
# a first look at many violations at once: no shrinking (each failing test reports its first example)
settings.register_profile("explore", derandomize=True, phases=[Phase.explicit, Phase.generate], **_COMMON)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE")
                      or ("ci" if os.environ.get("CI", "").lower() == "true" else "dev"))


@pytest.fixture(scope="session")
def world(tmp_path_factory):
    return H.make_world(tmp_path_factory.mktemp("property-world"))


def pytest_terminal_summary(terminalreporter):
    if H.COUNTS:
        terminalreporter.write_line(H.summary())
        calls = H.slurm_calls()
        if calls:
            terminalreporter.write_line(f"property tests: Slurm stubs refused {calls}")
