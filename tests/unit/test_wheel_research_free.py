"""The wheel holds no research code (issue 34, item 6): no optimizer, no constants' fit, no refit or
held-out protocol. They live in benchmarks/ (fitting.py, refits.py, generalisation.py, ...);
`calibrate` corrects the constants in closed form (planner/calibration_correction.py).

An ast check over every module the wheel installs (mbridge_launch/, and executors/, installed as
mbridge_launch.executors): no module of a research name, no function or class of one, no import of
the research modules."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_DIRS = (ROOT / "mbridge_launch", ROOT / "executors")

# modules of benchmarks/ that hold the fit and the held-out protocols
RESEARCH_MODULES = {"fitting", "fit_constants", "refits", "generalisation", "accuracy", "training_domain",
                    "domain_table", "calibrate_heldout", "calibrate_speed"}
# the optimizer, the fit and its objective, the refits and the protocols that run them
RESEARCH_FUNCTIONS = re.compile(
    r"^(nelder_mead|fit|fit_ranked|fit_for_calibrate|prior_penalty|objective|rank_loss|rank_problems"
    r"|refresh_shortlists|parallel_rank_problems|perturbed|run_fits|run_start|refit|refit_constants|run_refits?"
    r"|leave_one_.*_out.*|time_ordered.*|held_out_protocol.*)$")
RESEARCH_CLASSES = {"RankProblem", "Fit", "OptimizerFit", "Split"}


def _modules() -> list[Path]:
    return sorted(p for d in PACKAGE_DIRS for p in d.rglob("*.py") if "__pycache__" not in p.parts)


def test_the_package_is_scanned():
    names = {p.stem for p in _modules()}
    assert {"calibration_correction", "throughput", "calibrate", "calibration_file"} <= names  # what calibrate needs


def test_no_research_module_function_or_import_in_the_wheel():
    found = []
    for path in _modules():
        where = path.relative_to(ROOT)
        if path.stem in RESEARCH_MODULES:
            found.append(f"{where}: a research module")
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and RESEARCH_FUNCTIONS.match(node.name):
                found.append(f"{where}:{node.lineno}: def {node.name}")
            elif isinstance(node, ast.ClassDef) and node.name in RESEARCH_CLASSES:
                found.append(f"{where}:{node.lineno}: class {node.name}")
            elif isinstance(node, ast.ImportFrom) and node.module:
                last = node.module.rsplit(".", 1)[-1]
                if last in RESEARCH_MODULES or any(a.name in RESEARCH_MODULES for a in node.names):
                    found.append(f"{where}:{node.lineno}: imports {node.module}")
            elif isinstance(node, ast.Import):
                found += [f"{where}:{node.lineno}: imports {a.name}" for a in node.names
                          if a.name.rsplit(".", 1)[-1] in RESEARCH_MODULES]
    assert found == [], "research code in the wheel (it belongs in benchmarks/):\n" + "\n".join(found)
