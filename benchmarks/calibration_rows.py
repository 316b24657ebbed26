"""The published Megatron Bridge benchmark rows (benchmarks/data/perf_calibration.csv) as
planner inputs: architecture, hardware, precision and the published layout of each row.

The reading lives in the package (mbridge_launch/planner/calibration_rows.py, which
`mbridge-launch calibrate` uses on the shipped copy catalog/perf_calibration.csv; a unit test
keeps the two copies identical); this module re-exports it under the names fit_constants.py,
accuracy.py and domain_table.py import, and puts the repository root on sys.path for them.
"""

from __future__ import annotations

import csv  # noqa: F401 - re-exported (the names this module has always had)
import sys
from dataclasses import dataclass, replace  # noqa: F401
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from mbridge_launch.knowledge.hardware import Hardware, get_hardware  # noqa: E402, F401
from mbridge_launch.knowledge.models import ModelArch, load_arch  # noqa: E402, F401
from mbridge_launch.knowledge.vocabulary import normalize_precision  # noqa: E402, F401
from mbridge_launch.planner import calibration_rows as _rows  # noqa: E402
from mbridge_launch.planner.calibration_rows import GRAD_BYTES, Row, with_fitting_recompute  # noqa: E402, F401
from mbridge_launch.planner.memory import estimate_memory  # noqa: E402, F401
from mbridge_launch.planner.rules import Layout, check_layout, errors  # noqa: E402, F401

CSV_PATH = Path(__file__).resolve().parent / "data" / "perf_calibration.csv"


def _int(text: str, default: int | None = None) -> int | None:
    return int(text) if text not in ("", None) else default


def load_rows(path: Path = CSV_PATH) -> list[Row]:
    """The rows of `path` (default the benchmarks' copy); rows of unknown models are left out."""
    return _rows.load_rows(path)
