"""A small static interpreter for the Megatron Bridge recipe sources (Python `ast`, no import).

Modules are executed lazily, the way Python would import them, but inside this interpreter:
`from X import Y` binds a lazy reference that loads X on first use, names from outside the
wheel become External placeholders, and dataclass instances are Obj values filled with their
field defaults (the wheel's own dataclasses, plus Megatron Core defaults for external bases).
Calling a recipe function therefore follows it into `_pretrain_common`, the perf helpers and
any other shared helper, and returns the ConfigContainer the real function would build, with
Unknown where a value depends on something outside the wheel (a Hugging Face config, the cwd).
"""

from __future__ import annotations

import ast
from typing import Any

from mbridge_launch.catalog_sync import objects
from mbridge_launch.catalog_sync.builtins_table import BUILTINS, call_external
from mbridge_launch.catalog_sync.expressions import ExpressionMixin
from mbridge_launch.catalog_sync.frames import Frame
from mbridge_launch.catalog_sync.hf_bridges import BridgeTable
from mbridge_launch.catalog_sync.source import SourceTree
from mbridge_launch.catalog_sync.statements import BranchExit, InterpRaise, ReturnSignal, StatementMixin
from mbridge_launch.catalog_sync.values import (
    DATACLASS,
    Builtin,
    ClassMethod,
    ClassValue,
    DataclassMarker,
    External,
    FuncValue,
    HFBridge,
    LazyImport,
    ModuleState,
    Obj,
    Partial,
    PropertyValue,
    StaticMethod,
    SuperProxy,
    Unknown,
    merge,
)

_MAX_DEPTH = 60


class Interpreter(ExpressionMixin, StatementMixin):
    def __init__(self, source: SourceTree) -> None:
        self.source = source
        self.modules: dict[str, ModuleState] = {}
        self.level = 0
        self.loop_limit = 4096
        self.depth = 0
        self.notes: list[str] = []
        self.bridges = BridgeTable(self)  # what each model's bridge fixes, read on first use

    def note(self, message: str) -> None:
        if len(self.notes) < 10000:
            self.notes.append(message)

    # --- modules ---------------------------------------------------------------------------------
    def load_module(self, dotted: str) -> ModuleState | None:
        state = self.modules.get(dotted)
        if state is not None:
            return state
        found = self.source.module_path(dotted)
        if found is None:
            if self.source.has_package(dotted):  # a namespace package such as `megatron`
                state = ModuleState(dotted, True, done=True)
                self.modules[dotted] = state
                return state
            return None
        path, is_package = found
        state = ModuleState(dotted, is_package)
        state.namespace["__name__"] = dotted
        self.modules[dotted] = state
        try:
            tree = ast.parse(self.source.read(path), filename=path)
        except SyntaxError as exc:
            self.note(f"{path}: cannot parse: {exc}")
            state.done = True
            return state
        frame = Frame(state, None, self.level, is_module=True)
        saved_level, self.level = self.level, 0
        frame.base_level = frame.loop_level = 0
        try:
            for stmt in tree.body:
                try:
                    self.exec_stmt(stmt, frame)
                except (InterpRaise, BranchExit, ReturnSignal) as exc:
                    self.note(f"{path}:{stmt.lineno}: module statement stopped: {exc!r}")
        finally:
            self.level = saved_level
            state.done = True
        return state

    def is_wheel_module(self, dotted: str) -> bool:
        return self.source.module_path(dotted) is not None or self.source.has_package(dotted)

    def import_module_value(self, dotted: str) -> Any:
        state = self.load_module(dotted) if self.is_wheel_module(dotted) else None
        return state if state is not None else External(dotted)

    def resolve_relative(self, module: str, level: int, current: ModuleState) -> str:
        if level == 0:
            return module
        parts = current.name.split(".")
        if not current.is_package:
            parts = parts[:-1]
        if level > 1:
            parts = parts[: len(parts) - (level - 1)]
        return ".".join(parts + ([module] if module else []))

    def import_from(self, module: str, name: str) -> Any:
        if self.is_wheel_module(module):
            return LazyImport(module, name)
        return External(f"{module}.{name}")

    def star_names(self, module: str) -> list[tuple[str, Any]]:
        state = self.load_module(module) if self.is_wheel_module(module) else None
        if state is None:
            return []
        exported = state.namespace.get("__all__")
        if isinstance(exported, (list, tuple)) and all(isinstance(n, str) for n in exported):
            names = list(exported)
        else:
            names = [n for n in state.namespace if not n.startswith("_")]
        return [(n, state.namespace[n]) for n in names if n in state.namespace] + [
            (n, LazyImport(module, n)) for n in names if n not in state.namespace
        ]

    def resolve(self, value: Any) -> Any:
        hops = 0
        while isinstance(value, LazyImport):
            hops += 1
            if hops > 50:
                return Unknown("import cycle")
            state = self.load_module(value.module)
            if state is None:
                return External(f"{value.module}.{value.name}")
            if value.name in state.namespace:
                value = state.namespace[value.name]
                continue
            sub = f"{value.module}.{value.name}"
            if self.is_wheel_module(sub):
                return self.import_module_value(sub)
            return Unknown(f"{sub} not found")
        return value

    def make_super(self, frame: Frame) -> Any:
        """Zero-argument super(): the class that defines the running method, and its `self`."""
        func = frame.function
        node = getattr(func, "node", None)
        if func is None or "." not in func.qualname or not getattr(node, "args", None) or not node.args.args:
            return Unknown("super()")
        owner: Any = func.module
        for part in func.qualname.split(".")[:-1]:
            owner = self.get_attr(owner, part)
        first = frame.locals.get(node.args.args[0].arg)
        if not isinstance(owner, ClassValue) or first is None:
            return Unknown("super()")
        return SuperProxy(owner, first)

    def lookup(self, name: str, frame: Frame) -> Any:
        found, value = frame.find(name)
        if found:
            resolved = self.resolve(value)
            if resolved is not value and not isinstance(resolved, Unknown):
                frame_ns = frame.module.namespace
                if frame_ns.get(name) is value:
                    frame_ns[name] = resolved  # memoise the resolved import
            return resolved
        if name in BUILTINS:
            return BUILTINS[name]
        return Unknown(f"name {name}")

    # --- attributes ---------------------------------------------------------------------------
    def get_attr(self, value: Any, name: str) -> Any:
        if isinstance(value, Obj):
            return objects.get_obj_attr(self, value, name)
        if isinstance(value, ModuleState):
            if name in value.namespace:
                return self.resolve(value.namespace[name])
            sub = f"{value.name}.{name}"
            if self.is_wheel_module(sub):
                return self.import_module_value(sub)
            return Unknown(f"{sub}")
        if isinstance(value, ClassValue):
            return objects.get_class_attr(self, value, name)
        if isinstance(value, External):
            return objects.external_attr(value, name)
        if isinstance(value, HFBridge):
            return objects.hf_bridge_attr(self, value, name)
        if isinstance(value, SuperProxy):
            return objects.super_attr(self, value, name)
        if isinstance(value, (FuncValue,)) and name == "__name__":
            return value.name
        if isinstance(value, Unknown):
            return value
        return objects.plain_attr(value, name)

    def set_attr(self, target: Any, name: str, value: Any) -> None:
        if isinstance(target, Obj):
            if self.level > target.level:
                old = objects.get_obj_attr(self, target, name) if objects.has_obj_attr(self, target, name) else Unknown()
                value = merge(old, value)
            target.attrs[name] = value
        elif isinstance(target, ModuleState):
            target.namespace[name] = value

    # --- calls ---------------------------------------------------------------------------------------
    def call(self, func: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        if isinstance(func, FuncValue):
            return self.call_function(func, args, kwargs)
        if isinstance(func, ClassValue):
            return objects.instantiate(self, func, args, kwargs)
        if isinstance(func, Builtin):
            return func.fn(self, args, kwargs)
        if isinstance(func, Partial):
            return self.call(func.func, [*func.args, *args], {**func.kwargs, **kwargs})
        if isinstance(func, External):
            return call_external(self, func, args, kwargs)
        if isinstance(func, DataclassMarker):
            if len(args) == 1 and isinstance(args[0], ClassValue):
                return self.apply_decorator(DATACLASS, args[0])
            return DATACLASS
        if isinstance(func, (StaticMethod, ClassMethod)):
            return self.call(func.func, args, kwargs)
        if callable(func) and not isinstance(func, type):  # a bound method of plain data
            return objects.call_plain_method(func, args, kwargs)
        return Unknown("call")

    def call_function(self, func: FuncValue, args: list[Any], kwargs: dict[str, Any]) -> Any:
        if self.depth >= _MAX_DEPTH or objects.is_generator(func.node):
            return Unknown("call depth" if self.depth >= _MAX_DEPTH else "generator")
        frame = Frame(func.module, func.closure, self.level)
        frame.function = func
        objects.bind_arguments(func, args, kwargs, frame)
        self.depth += 1
        outcomes: list[Any] = []
        try:
            if isinstance(func.node, ast.Lambda):
                outcomes.append(self.eval(func.node.body, frame))
            else:
                self.exec_block(func.node.body, frame)
                outcomes.append(None)
        except ReturnSignal as signal:
            outcomes.append(signal.value)
        except InterpRaise:
            # Raised after a possible early return: the return is the path the defaults take
            # when the raise only guards the other case (e.g. "if isinstance(x, list): return
            # ...; raise TypeError"). With no possible return, the raise is real.
            if not frame.maybe_returns:
                raise
        finally:
            self.depth -= 1
        outcomes.extend(frame.maybe_returns)
        result = outcomes[0]
        for possible in outcomes[1:]:
            result = merge(possible, result)
        if isinstance(result, Obj) and result.origin is None:
            result.origin = func.name
        return result

    def apply_decorator(self, decorator: Any, target: Any) -> Any:
        if isinstance(decorator, DataclassMarker) or (isinstance(decorator, External) and decorator.qualname == "dataclasses.dataclass"):
            if isinstance(target, ClassValue):
                target.is_dataclass = True
            return target
        if isinstance(decorator, Builtin) and decorator.name in ("staticmethod", "classmethod", "property"):
            return {"staticmethod": StaticMethod, "classmethod": ClassMethod, "property": PropertyValue}[decorator.name](target)
        if isinstance(decorator, (FuncValue, ClassValue)):
            result = self.call(decorator, [target], {})
            return target if isinstance(result, Unknown) else result
        return target  # external decorators (functools.wraps, lru_cache, deprecations) keep the function

    def eval_defaults(self, arguments: ast.arguments, frame: Frame) -> tuple[list[Any], dict[str, Any]]:
        defaults = [self.eval(d, frame) for d in arguments.defaults]
        kw_defaults = {
            arg.arg: self.eval(default, frame)
            for arg, default in zip(arguments.kwonlyargs, arguments.kw_defaults)
            if default is not None
        }
        return defaults, kw_defaults

    def iterate(self, value: Any) -> list[Any] | None:
        if isinstance(value, (list, tuple, str)):
            return list(value)
        if isinstance(value, dict):
            return list(value.keys())
        if isinstance(value, (set, frozenset)):
            return sorted(value, key=repr)
        if isinstance(value, range):
            return list(value) if len(value) <= self.loop_limit else None
        return None
