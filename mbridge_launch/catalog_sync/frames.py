"""Scopes of the static interpreter: module, function and class frames with Python's lookup order."""

from __future__ import annotations

from typing import Any

from mbridge_launch.catalog_sync.values import ModuleState, merge


class Frame:
    """One scope. Functions see their own locals, then enclosing function scopes (never class
    bodies), then the module namespace, then builtins."""

    __slots__ = (
        "locals", "parent", "module", "base_level", "loop_level", "maybe_returns", "is_class",
        "is_module", "annotations", "globals_declared", "qualname_prefix", "function",
    )

    def __init__(self, module: ModuleState, parent: "Frame | None", base_level: int, *, is_module: bool = False) -> None:
        self.module = module
        self.parent = parent
        self.is_module = is_module
        self.is_class = False
        self.locals: dict[str, Any] = module.namespace if is_module else {}
        self.base_level = base_level
        self.loop_level = base_level
        self.maybe_returns: list[Any] = []
        self.annotations: list[str] = []
        self.globals_declared: set[str] = set()
        self.qualname_prefix = ""
        self.function: Any = None  # the FuncValue running in this frame (for super())

    def closure_for_children(self) -> "Frame | None":
        """What a function defined here closes over (module and class scopes are not closures)."""
        if self.is_module:
            return None
        if self.is_class:
            return self.parent
        return self

    def child_scope(self) -> "Frame":
        """A comprehension scope: its own loop variables, reading through to this frame."""
        child = Frame(self.module, self, self.base_level)
        child.loop_level = self.loop_level
        return child

    def class_scope(self, qualname: str) -> "Frame":
        child = Frame(self.module, self.closure_for_children(), self.base_level)
        child.is_class = True
        child.qualname_prefix = qualname + "."
        return child

    def set_local(self, name: str, value: Any, interp: Any) -> None:
        target = self.module.namespace if name in self.globals_declared else self.locals
        if interp.level > self.base_level and name in target:
            value = merge(target[name], value)
        target[name] = value

    def find(self, name: str) -> tuple[bool, Any]:
        frame: Frame | None = self
        while frame is not None:
            if name in frame.locals and not (frame.is_class and frame is not self):
                return True, frame.locals[name]
            frame = frame.parent
        if name in self.module.namespace:
            return True, self.module.namespace[name]
        return False, None
