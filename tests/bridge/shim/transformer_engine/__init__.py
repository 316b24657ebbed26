"""Import shim for Transformer Engine, for the Megatron Bridge conformance tier only.

Why it exists: `import megatron.bridge` imports `transformer_engine.pytorch` unconditionally (its PEFT
LoRA layers subclass and annotate TE modules), and megatron-core subclasses TE's modules when it can
import them. Real TE needs CUDA and nvcc to install. The tier never builds a model or trains: it
only builds recipes, applies overrides and runs the config validation. This package makes those
imports succeed and nothing more:

- every `transformer_engine.*` submodule can be imported (a meta path finder serves it);
- every capitalised name in one is a placeholder class (a `torch.nn.Module` subclass, so that
  megatron-core can subclass it) that raises `ShimUsed` when instantiated; every lower-case name is a
  placeholder submodule that also raises `ShimUsed` when called (TE's functions, e.g. `fp8_autocast`);
- `__version__` is the TE release that Megatron Bridge 0.6.x locks (uv.lock of v0.6.0:
  transformer-engine 2.17.1), so megatron-core's `is_te_min_version` checks answer as they would in
  the release's container;
- `transformer_engine.pytorch.optimizers.FusedAdam` has TE's real constructor signature, because
  megatron-core's `OptimizerConfig.__post_init__` inspects it (precision-aware optimizer check).

Anything that passes only because of this shim is listed in tests/bridge/not_verified.py, and every
name the shim served is recorded in `SERVED` so that the tier can report it.

Lives in tests/bridge/shim, which only the tier puts on sys.path (never the project's .venv).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
from typing import Any

import torch

__version__ = "2.17.1"
SHIM = True  # lets the tier (and a reader of a traceback) tell this package from the real one

#: every placeholder the shim handed out, as "module.Name", in order of first use
SERVED: list[str] = []


class ShimUsed(RuntimeError):
    """Raised when code tries to use Transformer Engine for real: the tier must never get there."""


def _raise(what: str) -> Any:
    raise ShimUsed(
        f"{what} is a placeholder of the Megatron Bridge tier's transformer_engine shim "
        "(tests/bridge/shim): real Transformer Engine is not installed, nothing may be built or run"
    )


def _placeholder_class(module: str, name: str) -> type:
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        _raise(f"{module}.{name}()")

    return type(name, (torch.nn.Module,), {"__init__": __init__, "__module__": module, "__doc__": "TE placeholder"})


def _is_class_name(name: str) -> bool:
    return name.lstrip("_")[:1].isupper()


class ShimModule(types.ModuleType):
    """A placeholder `transformer_engine.*` module: attributes appear on first use."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)  # keep import machinery, pickle, inspect and copy honest
        full = f"{self.__name__}.{name}"
        value: Any
        if _is_class_name(name):
            value = _placeholder_class(self.__name__, name)
        else:
            value = importlib.import_module(full)  # a submodule, or a TE function
        setattr(self, name, value)
        SERVED.append(full)
        return value

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _raise(f"{self.__name__}()")


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves any `transformer_engine.*` module that has no file in the shim as a ShimModule."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        # appended last to sys.meta_path: the real files of the shim (pytorch/, optimizers/) win
        if fullname.startswith(__name__ + "."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = ShimModule(spec.name)
        module.__path__ = []  # a package, so that deeper submodules import too
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        SERVED.append(module.__name__)


if not any(isinstance(f, _Finder) for f in sys.meta_path):
    sys.meta_path.append(_Finder())
# `import transformer_engine as te; te.common.recipe` must work like a package attribute too
sys.modules[__name__].__class__ = ShimModule
