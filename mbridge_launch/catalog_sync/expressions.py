"""Expression evaluation for the static interpreter (a mixin of interp.Interpreter).

Operations on known Python data are carried out; anything touching an Unknown yields Unknown,
and a conditional whose condition is unknown yields a value only if both sides agree.
"""

from __future__ import annotations

import ast
import operator
from typing import Any

from mbridge_launch.catalog_sync.values import (
    Builtin,
    External,
    FuncValue,
    Obj,
    Unknown,
    same,
)

_BINOPS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
    ast.BitOr: operator.or_, ast.BitAnd: operator.and_, ast.BitXor: operator.xor,
    ast.LShift: operator.lshift, ast.RShift: operator.rshift,
}
_CMPOPS = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge,
}
_PLAIN = (bool, int, float, str, bytes, type(None), list, tuple, dict, set, frozenset)


class EvalError(Exception):
    """A construct the interpreter does not model; the caller turns the value into Unknown."""


def is_plain(value: Any) -> bool:
    """Plain Python data whose operations can be run for real."""
    if isinstance(value, (bool, int, float, str, bytes, type(None))):
        return True
    if isinstance(value, (list, tuple, set, frozenset)):
        return all(is_plain(v) for v in value)
    if isinstance(value, dict):
        return all(is_plain(k) and is_plain(v) for k, v in value.items())
    return False


def truth(value: Any) -> bool | None:
    """bool(value), or None when it cannot be known."""
    if isinstance(value, Unknown):
        return None
    if isinstance(value, (bool, int, float, str, bytes, type(None), list, tuple, dict, set, frozenset)):
        return bool(value)
    if isinstance(value, External):
        return None
    return True  # objects, functions, classes, modules


class ExpressionMixin:
    level: int

    def eval(self, node: ast.expr, frame: Any) -> Any:
        method = getattr(self, "_eval_" + type(node).__name__, None)
        if method is None:
            return Unknown(f"expr {type(node).__name__}")
        try:
            return method(node, frame)
        except (EvalError, TypeError, ValueError, ArithmeticError, KeyError, IndexError, AttributeError) as exc:
            return Unknown(f"{type(exc).__name__}: {exc}")

    # --- atoms ------------------------------------------------------------------------------------
    def _eval_Constant(self, node: ast.Constant, frame: Any) -> Any:
        return node.value

    def _eval_Name(self, node: ast.Name, frame: Any) -> Any:
        return self.lookup(node.id, frame)

    def _eval_Attribute(self, node: ast.Attribute, frame: Any) -> Any:
        return self.get_attr(self.eval(node.value, frame), node.attr)

    def _eval_Call(self, node: ast.Call, frame: Any) -> Any:
        if isinstance(node.func, ast.Name) and node.func.id == "super" and not node.args:
            return self.make_super(frame)
        func = self.eval(node.func, frame)
        args: list[Any] = []
        for arg in node.args:
            if isinstance(arg, ast.Starred):
                value = self.eval(arg.value, frame)
                if not isinstance(value, (list, tuple)):
                    return Unknown("star-args")
                args.extend(value)
            else:
                args.append(self.eval(arg, frame))
        kwargs: dict[str, Any] = {}
        for keyword in node.keywords:
            value = self.eval(keyword.value, frame)
            if keyword.arg is None:
                if not isinstance(value, dict):
                    return Unknown("star-kwargs")
                kwargs.update(value)
            else:
                kwargs[keyword.arg] = value
        return self.call(func, args, kwargs)

    def _eval_JoinedStr(self, node: ast.JoinedStr, frame: Any) -> Any:
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value))
                continue
            inner = self.eval(value.value, frame)  # FormattedValue
            if not isinstance(inner, (bool, int, float, str, type(None))):
                return Unknown("f-string")
            spec = ""
            if value.format_spec is not None:
                spec = self.eval(value.format_spec, frame)
                if not isinstance(spec, str):
                    return Unknown("f-string")
            if value.conversion == ord("r"):
                inner = repr(inner)
            parts.append(format(inner, spec))
        return "".join(parts)

    def _eval_Lambda(self, node: ast.Lambda, frame: Any) -> Any:
        defaults, kw_defaults = self.eval_defaults(node.args, frame)
        return FuncValue(node, frame.module, frame.closure_for_children(), defaults, kw_defaults, "<lambda>", "<lambda>")

    def _eval_NamedExpr(self, node: ast.NamedExpr, frame: Any) -> Any:
        value = self.eval(node.value, frame)
        self.assign(node.target, value, frame)
        return value

    # --- containers ---------------------------------------------------------------------------------
    def _eval_List(self, node: ast.List, frame: Any) -> Any:
        return self._elements(node.elts, frame)

    def _eval_Tuple(self, node: ast.Tuple, frame: Any) -> Any:
        items = self._elements(node.elts, frame)
        return tuple(items) if isinstance(items, list) else items

    def _eval_Set(self, node: ast.Set, frame: Any) -> Any:
        items = self._elements(node.elts, frame)
        if isinstance(items, list) and is_plain(items):
            return set(items)
        return Unknown("set")

    def _elements(self, elts: list[ast.expr], frame: Any) -> Any:
        items: list[Any] = []
        for elt in elts:
            if isinstance(elt, ast.Starred):
                value = self.eval(elt.value, frame)
                if isinstance(value, (list, tuple)):
                    items.extend(value)
                elif isinstance(value, (set, frozenset, dict)) and is_plain(value):
                    items.extend(sorted(value, key=repr))
                else:
                    return Unknown("starred")
            else:
                items.append(self.eval(elt, frame))
        return items

    def _eval_Dict(self, node: ast.Dict, frame: Any) -> Any:
        result: dict[Any, Any] = {}
        for key, value in zip(node.keys, node.values):
            if key is None:
                spread = self.eval(value, frame)
                if not isinstance(spread, dict):
                    return Unknown("dict spread")
                result.update(spread)
                continue
            k = self.eval(key, frame)
            if not isinstance(k, (str, int, float, bool, tuple, type(None), External)):
                return Unknown("dict key")
            result[k] = self.eval(value, frame)
        return result

    def _eval_Subscript(self, node: ast.Subscript, frame: Any) -> Any:
        container = self.eval(node.value, frame)
        index = self.eval(node.slice, frame)
        if isinstance(container, Unknown) or isinstance(index, Unknown):
            return Unknown("subscript")
        if isinstance(container, (External, type)) or isinstance(container, (Builtin,)):
            return container  # a type annotation such as list[str] or Optional[int]
        if isinstance(container, (list, tuple, str, dict)):
            return container[index]
        return Unknown("subscript")

    def _eval_Slice(self, node: ast.Slice, frame: Any) -> Any:
        parts = [None if p is None else self.eval(p, frame) for p in (node.lower, node.upper, node.step)]
        if any(isinstance(p, Unknown) for p in parts):
            return Unknown("slice")
        return slice(*parts)

    # --- operators --------------------------------------------------------------------------------
    def _eval_BinOp(self, node: ast.BinOp, frame: Any) -> Any:
        left = self.eval(node.left, frame)
        right = self.eval(node.right, frame)
        op = _BINOPS.get(type(node.op))
        if op is None:
            return Unknown("binop")
        if isinstance(node.op, ast.BitOr) and (isinstance(left, (External, Builtin)) or left is None):
            return left  # a type union in an annotation-like expression
        if isinstance(node.op, ast.Mod) and isinstance(left, str):
            if is_plain(right):
                return left % right
            return Unknown("format")
        if isinstance(left, (list, tuple)) and isinstance(right, (list, tuple, int)) and isinstance(node.op, (ast.Add, ast.Mult)):
            return op(left, right)
        if isinstance(left, dict) and isinstance(right, dict) and isinstance(node.op, ast.BitOr):
            return {**left, **right}
        if is_plain(left) and is_plain(right):
            return op(left, right)
        return Unknown("binop")

    def _eval_UnaryOp(self, node: ast.UnaryOp, frame: Any) -> Any:
        operand = self.eval(node.operand, frame)
        if isinstance(node.op, ast.Not):
            value = truth(operand)
            return Unknown("not") if value is None else not value
        if isinstance(operand, (int, float)) and not isinstance(operand, bool) or isinstance(operand, bool):
            if isinstance(node.op, ast.USub):
                return -operand
            if isinstance(node.op, ast.UAdd):
                return +operand
            if isinstance(node.op, ast.Invert):
                return ~operand
        return Unknown("unary")

    def _eval_BoolOp(self, node: ast.BoolOp, frame: Any) -> Any:
        is_and = isinstance(node.op, ast.And)
        result: Any = None
        for value_node in node.values:
            result = self.eval(value_node, frame)
            value = truth(result)
            if value is None:
                # Later operands may still settle it: `unknown and False` is falsy.
                rest = [self.eval(v, frame) for v in node.values[node.values.index(value_node) + 1:]]
                if is_and and any(truth(r) is False for r in rest):
                    return False
                if not is_and and any(truth(r) is True for r in rest):
                    return Unknown("or")  # truthy, but which value is unknown
                return Unknown("boolop")
            if is_and and not value:
                return result
            if not is_and and value:
                return result
        return result

    def _eval_Compare(self, node: ast.Compare, frame: Any) -> Any:
        left = self.eval(node.left, frame)
        for op, right_node in zip(node.ops, node.comparators):
            right = self.eval(right_node, frame)
            outcome = self.compare(op, left, right)
            if outcome is None:
                return Unknown("compare")
            if not outcome:
                return False
            left = right
        return True

    def compare(self, op: ast.cmpop, left: Any, right: Any) -> bool | None:
        if isinstance(op, (ast.Is, ast.IsNot)):
            if isinstance(left, Unknown) or isinstance(right, Unknown):
                return None
            if isinstance(left, External) or isinstance(right, External):
                if left is None or right is None:
                    result = False
                else:
                    return None
            elif isinstance(left, (bool, type(None))) or isinstance(right, (bool, type(None))):
                result = left is right
            else:
                result = left is right or same(left, right) and isinstance(left, (int, str))
            return result if isinstance(op, ast.Is) else not result
        if isinstance(op, (ast.In, ast.NotIn)):
            if isinstance(right, (list, tuple, set, frozenset, dict, str)) and is_plain(left):
                if isinstance(right, str) and not isinstance(left, str):
                    return None
                keys = list(right.keys()) if isinstance(right, dict) else right
                if not isinstance(right, str) and not all(is_plain(k) for k in keys):
                    return None
                result = left in right
                return result if isinstance(op, ast.In) else not result
            return None
        func = _CMPOPS.get(type(op))
        if func is None:
            return None
        if isinstance(op, (ast.Eq, ast.NotEq)):
            if isinstance(left, Unknown) or isinstance(right, Unknown):
                return None
            if isinstance(left, External) and isinstance(right, External):
                equal = left == right
            elif is_plain(left) and is_plain(right):
                equal = left == right
            elif isinstance(left, Obj) or isinstance(right, Obj):
                if left is right:
                    equal = True
                elif left is None or right is None or is_plain(left) or is_plain(right):
                    equal = False
                else:
                    return None
            else:
                return None
            return equal if isinstance(op, ast.Eq) else not equal
        if is_plain(left) and is_plain(right):
            return bool(func(left, right))
        return None

    def _eval_IfExp(self, node: ast.IfExp, frame: Any) -> Any:
        condition = truth(self.eval(node.test, frame))
        if condition is True:
            return self.eval(node.body, frame)
        if condition is False:
            return self.eval(node.orelse, frame)
        a = self.eval(node.body, frame)
        b = self.eval(node.orelse, frame)
        return a if same(a, b) else Unknown("ifexp")

    # --- comprehensions ------------------------------------------------------------------------------
    def _comprehension(self, generators: list[ast.comprehension], frame: Any, emit: Any) -> bool:
        inner = frame.child_scope()
        budget = [self.loop_limit]

        def run(index: int) -> bool:
            if index == len(generators):
                emit(inner)
                return True
            gen = generators[index]
            iterable = self.iterate(self.eval(gen.iter, inner))
            if iterable is None:
                return False
            for item in iterable:
                budget[0] -= 1
                if budget[0] < 0:
                    return False
                self.assign(gen.target, item, inner)
                verdicts = [truth(self.eval(cond, inner)) for cond in gen.ifs]
                if any(v is None for v in verdicts):
                    return False
                if all(verdicts) and not run(index + 1):
                    return False
            return True

        return run(0)

    def _eval_ListComp(self, node: ast.ListComp, frame: Any) -> Any:
        out: list[Any] = []
        ok = self._comprehension(node.generators, frame, lambda f: out.append(self.eval(node.elt, f)))
        return out if ok else Unknown("listcomp")

    def _eval_GeneratorExp(self, node: ast.GeneratorExp, frame: Any) -> Any:
        out: list[Any] = []
        ok = self._comprehension(node.generators, frame, lambda f: out.append(self.eval(node.elt, f)))
        return out if ok else Unknown("genexp")

    def _eval_SetComp(self, node: ast.SetComp, frame: Any) -> Any:
        out: list[Any] = []
        ok = self._comprehension(node.generators, frame, lambda f: out.append(self.eval(node.elt, f)))
        return set(out) if ok and is_plain(out) else Unknown("setcomp")

    def _eval_DictComp(self, node: ast.DictComp, frame: Any) -> Any:
        out: dict[Any, Any] = {}

        def emit(f: Any) -> None:
            key = self.eval(node.key, f)
            if not is_plain(key):
                raise EvalError("dict comprehension key")
            out[key] = self.eval(node.value, f)

        ok = self._comprehension(node.generators, frame, emit)
        return out if ok else Unknown("dictcomp")
