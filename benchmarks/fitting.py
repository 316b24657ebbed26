"""Fit the throughput model's constants (mbridge_launch.planner.throughput.Calibration) on
published benchmark rows: a Nelder-Mead search over a robust log-error loss plus the ranking
term, every constant held inside its physical range (throughput.BOUNDS).

The fit lives in the package (mbridge_launch/planner/fitting.py, which `mbridge-launch
calibrate` runs); this module re-exports every name fit_constants.py, accuracy.py,
domain_table.py and the tests import from it.
"""

from __future__ import annotations

import calibration_rows  # noqa: F401 - puts the repository root on sys.path first
from mbridge_launch.planner.fitting import (  # noqa: F401
    _DICTS,
    _START_MARGIN,
    BOUNDS,
    CAL,
    DELTA,
    GRAD_BYTES,
    PARAMS,
    PRIORS,
    RANK_TAU,
    RANK_WEIGHT,
    RESTARTS,
    SHORTLIST,
    Bound,
    Calibration,
    RankProblem,
    Row,
    _bounded,
    _get,
    _grid_key,
    _logit,
    _model_for,
    _sig,
    at_bounds,
    estimate_step,
    fit,
    fit_ranked,
    from_vector,
    loss,
    nelder_mead,
    objective,
    out_of_bounds,
    perturbed,
    physical,
    predict,
    prepared,
    prior_penalty,
    rank_loss,
    rank_problems,
    refresh_shortlists,
    to_vector,
    utility,
    with_fitting_recompute,
)
