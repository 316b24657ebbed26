"""Executor adapters. The registry maps a name to a module imported on first use, so that
`mbridge-launch recommend` never imports nemo_run or submitit."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mbridge_launch.executors.base import Executor

REGISTRY: dict[str, str] = {
    "sbatch": "mbridge_launch.executors.sbatch",
    "nemo-run": "mbridge_launch.executors.nemo_run",
    "submitit": "mbridge_launch.executors.submitit",
}


def executor_names() -> list[str]:
    return list(REGISTRY)


def get_executor(name: str, **options: object) -> "Executor":
    from mbridge_launch.base.errors import UserError

    module_name = REGISTRY.get(name)
    if module_name is None:
        raise UserError("arg.choice", flag="--executor", value=name, choices=", ".join(REGISTRY))
    module = importlib.import_module(module_name)
    return module.create(**options)
