"""Statement execution for the static interpreter (a mixin of interp.Interpreter).

A branch whose condition is unknown is run in "uncertain" mode: the interpreter's level goes up,
and every assignment made at that level is merged with the previous value (kept if equal, else
Unknown). A `return` there records a possible result; a `raise` there just ends the branch,
since recipes raise on invalid arguments that a recipe's own defaults never hit.
"""

from __future__ import annotations

import ast
from typing import Any

from mbridge_launch.catalog_sync.expressions import EvalError, truth
from mbridge_launch.catalog_sync.values import (
    ClassValue,
    External,
    FuncValue,
    Obj,
    Unknown,
    merge,
)


class ReturnSignal(Exception):
    def __init__(self, value: Any) -> None:
        self.value = value


class BreakSignal(Exception):
    pass


class ContinueSignal(Exception):
    pass


class BranchExit(Exception):
    """Ends a branch whose condition is unknown (after a return, raise, break or continue)."""


class InterpRaise(Exception):
    """An exception raised by interpreted code, carrying the interpreted exception value and
    where it was raised (module:line)."""

    def __init__(self, value: Any, where: str = "") -> None:
        self.value = value
        self.where = where
        super().__init__(f"{value!r} at {where}")


def exception_name(value: Any) -> str:
    if isinstance(value, Obj):
        return value.class_name
    if isinstance(value, (External, ClassValue)):
        return value.name
    return "Exception"


class StatementMixin:
    level: int
    loop_limit: int

    def exec_block(self, body: list[ast.stmt], frame: Any) -> None:
        for stmt in body:
            self.exec_stmt(stmt, frame)

    def exec_stmt(self, stmt: ast.stmt, frame: Any) -> None:
        method = getattr(self, "_exec_" + type(stmt).__name__, None)
        if method is None:
            return  # pass, global declarations handled below, imports of unusual shape...
        try:
            method(stmt, frame)
        except (EvalError, TypeError, ValueError, ArithmeticError, KeyError, IndexError, AttributeError) as exc:
            self.note(f"{frame.module.name}:{getattr(stmt, 'lineno', '?')}: {type(exc).__name__}: {exc}")

    def uncertain(self, body: list[ast.stmt], frame: Any) -> None:
        self.level += 1
        try:
            self.exec_block(body, frame)
        except (BranchExit, BreakSignal, ContinueSignal):
            pass
        except InterpRaise:
            pass
        finally:
            self.level -= 1

    # --- simple statements -----------------------------------------------------------------------
    def _exec_Expr(self, stmt: ast.Expr, frame: Any) -> None:
        self.eval(stmt.value, frame)

    def _exec_Assign(self, stmt: ast.Assign, frame: Any) -> None:
        value = self.eval(stmt.value, frame)
        for target in stmt.targets:
            self.assign(target, value, frame)

    def _exec_AnnAssign(self, stmt: ast.AnnAssign, frame: Any) -> None:
        if frame.is_class and isinstance(stmt.target, ast.Name):
            frame.annotations.append(stmt.target.id)
        if stmt.value is not None:
            self.assign(stmt.target, self.eval(stmt.value, frame), frame)

    def _exec_AugAssign(self, stmt: ast.AugAssign, frame: Any) -> None:
        load = _as_load(stmt.target)
        binop = ast.BinOp(left=load, op=stmt.op, right=stmt.value)
        ast.copy_location(binop, stmt)
        value = self.eval(binop, frame)
        if isinstance(value, Unknown):
            current = self.eval(load, frame)
            if isinstance(current, list) and isinstance(stmt.op, ast.Add):
                extra = self.eval(stmt.value, frame)
                if isinstance(extra, (list, tuple)):
                    current.extend(extra)
                    return
        self.assign(stmt.target, value, frame)

    def _exec_Return(self, stmt: ast.Return, frame: Any) -> None:
        value = None if stmt.value is None else self.eval(stmt.value, frame)
        if self.level > frame.base_level:
            frame.maybe_returns.append(value)
            raise BranchExit()
        raise ReturnSignal(value)

    def _exec_Raise(self, stmt: ast.Raise, frame: Any) -> None:
        if self.level > frame.base_level:
            raise BranchExit()
        value = self.eval(stmt.exc, frame) if stmt.exc is not None else Unknown("re-raise")
        if isinstance(value, (ClassValue, External)):
            value = self.call(value, [], {})
        raise InterpRaise(value, f"{frame.module.name}:{stmt.lineno}")

    def _exec_Assert(self, stmt: ast.Assert, frame: Any) -> None:
        return  # asserts guard invariants; recipes' defaults satisfy them

    def _exec_Delete(self, stmt: ast.Delete, frame: Any) -> None:
        for target in stmt.targets:
            if isinstance(target, ast.Name):
                frame.locals.pop(target.id, None)

    def _exec_Global(self, stmt: ast.Global, frame: Any) -> None:
        frame.globals_declared.update(stmt.names)

    def _exec_Break(self, stmt: ast.Break, frame: Any) -> None:
        raise BranchExit() if self.level > frame.loop_level else BreakSignal()

    def _exec_Continue(self, stmt: ast.Continue, frame: Any) -> None:
        raise BranchExit() if self.level > frame.loop_level else ContinueSignal()

    # --- definitions ----------------------------------------------------------------------------------
    def _exec_FunctionDef(self, stmt: ast.FunctionDef, frame: Any) -> None:
        if any(isinstance(d, ast.Attribute) and d.attr in ("setter", "deleter") for d in stmt.decorator_list):
            return  # keep the property the getter defined
        defaults, kw_defaults = self.eval_defaults(stmt.args, frame)
        qualname = f"{frame.qualname_prefix}{stmt.name}"
        func: Any = FuncValue(stmt, frame.module, frame.closure_for_children(), defaults, kw_defaults, stmt.name, qualname)
        for decorator in reversed(stmt.decorator_list):
            func = self.apply_decorator(self.eval(decorator, frame), func)
        frame.set_local(stmt.name, func, self)

    _exec_AsyncFunctionDef = _exec_FunctionDef

    def _exec_ClassDef(self, stmt: ast.ClassDef, frame: Any) -> None:
        bases = [self.eval(base, frame) for base in stmt.bases]
        qualname = f"{frame.qualname_prefix}{stmt.name}"
        body_frame = frame.class_scope(qualname)
        self.exec_block(stmt.body, body_frame)
        cls: Any = ClassValue(stmt.name, qualname, frame.module, bases, body_frame.locals, body_frame.annotations)
        for decorator in reversed(stmt.decorator_list):
            cls = self.apply_decorator(self.eval(decorator, frame), cls)
        frame.set_local(stmt.name, cls, self)

    def _exec_Import(self, stmt: ast.Import, frame: Any) -> None:
        for alias in stmt.names:
            if alias.asname:
                frame.set_local(alias.asname, self.import_module_value(alias.name), self)
            else:
                top = alias.name.split(".")[0]
                frame.set_local(top, self.import_module_value(top), self)

    def _exec_ImportFrom(self, stmt: ast.ImportFrom, frame: Any) -> None:
        module = self.resolve_relative(stmt.module or "", stmt.level, frame.module)
        for alias in stmt.names:
            if alias.name == "*":
                for name, value in self.star_names(module):
                    frame.set_local(name, value, self)
            else:
                frame.set_local(alias.asname or alias.name, self.import_from(module, alias.name), self)

    # --- control flow -------------------------------------------------------------------------------
    def _exec_If(self, stmt: ast.If, frame: Any) -> None:
        condition = truth(self.eval(stmt.test, frame))
        if condition is True:
            self.exec_block(stmt.body, frame)
        elif condition is False:
            self.exec_block(stmt.orelse, frame)
        else:
            self.uncertain(stmt.body, frame)
            self.uncertain(stmt.orelse, frame)

    def _exec_For(self, stmt: ast.For, frame: Any) -> None:
        items = self.iterate(self.eval(stmt.iter, frame))
        if items is None:
            self.assign(stmt.target, Unknown("loop"), frame)
            self.uncertain(stmt.body, frame)
            return
        saved = frame.loop_level
        frame.loop_level = self.level
        try:
            for count, item in enumerate(items):
                if count >= self.loop_limit:
                    break
                self.assign(stmt.target, item, frame)
                try:
                    self.exec_block(stmt.body, frame)
                except ContinueSignal:
                    continue
                except BreakSignal:
                    break
            else:
                self.exec_block(stmt.orelse, frame)
        finally:
            frame.loop_level = saved

    def _exec_While(self, stmt: ast.While, frame: Any) -> None:
        saved = frame.loop_level
        frame.loop_level = self.level
        try:
            for _ in range(self.loop_limit):
                condition = truth(self.eval(stmt.test, frame))
                if condition is None:
                    self.uncertain(stmt.body, frame)
                    return
                if not condition:
                    self.exec_block(stmt.orelse, frame)
                    return
                try:
                    self.exec_block(stmt.body, frame)
                except ContinueSignal:
                    continue
                except BreakSignal:
                    return
        finally:
            frame.loop_level = saved

    def _exec_With(self, stmt: ast.With, frame: Any) -> None:
        for item in stmt.items:
            value = self.eval(item.context_expr, frame)
            if item.optional_vars is not None:
                self.assign(item.optional_vars, Unknown("context manager") if not isinstance(value, Obj) else value, frame)
        self.exec_block(stmt.body, frame)

    _exec_AsyncWith = _exec_With

    def _exec_Try(self, stmt: ast.Try, frame: Any) -> None:
        try:
            try:
                self.exec_block(stmt.body, frame)
            except InterpRaise as raised:
                handler = self._matching_handler(stmt.handlers, raised.value, frame)
                if handler is None:
                    raise
                if handler.name:
                    frame.set_local(handler.name, raised.value, self)
                self.exec_block(handler.body, frame)
            else:
                self.exec_block(stmt.orelse, frame)
        finally:
            self.exec_block(stmt.finalbody, frame)

    _exec_TryStar = _exec_Try

    def _matching_handler(self, handlers: list[ast.ExceptHandler], value: Any, frame: Any) -> ast.ExceptHandler | None:
        raised = exception_name(value)
        lineage = value.lineage() if isinstance(value, Obj) else [raised]
        for handler in handlers:
            if handler.type is None:
                return handler
            kinds = self.eval(handler.type, frame)
            for kind in kinds if isinstance(kinds, tuple) else (kinds,):
                name = kind.name if isinstance(kind, (External, ClassValue)) else None
                if name in ("Exception", "BaseException") or name in lineage:
                    return handler
        return None

    # --- assignment -------------------------------------------------------------------------------------
    def assign(self, target: ast.expr, value: Any, frame: Any) -> None:
        if isinstance(target, ast.Name):
            frame.set_local(target.id, value, self)
        elif isinstance(target, ast.Attribute):
            self.set_attr(self.eval(target.value, frame), target.attr, value)
        elif isinstance(target, ast.Subscript):
            container = self.eval(target.value, frame)
            key = self.eval(target.slice, frame)
            if isinstance(container, (dict, list)) and not isinstance(key, Unknown):
                if self.level > 0 and isinstance(container, dict) and key in container:
                    container[key] = merge(container[key], value)
                else:
                    container[key] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            items = self.unpack(value, len(target.elts))
            for element, item in zip(target.elts, items):
                self.assign(element, item, frame)
        elif isinstance(target, ast.Starred):
            self.assign(target.value, value, frame)

    def unpack(self, value: Any, count: int) -> list[Any]:
        if isinstance(value, (list, tuple)) and len(value) == count:
            return list(value)
        return [Unknown("unpack")] * count


def _as_load(target: ast.expr) -> ast.expr:
    """The same target read instead of written (for augmented assignment)."""
    clone = ast.parse(ast.unparse(target), mode="eval").body
    return ast.copy_location(clone, target)
