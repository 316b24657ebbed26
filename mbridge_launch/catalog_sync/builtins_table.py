"""Python builtins and the few standard-library calls recipes make, as seen by the interpreter.

Each works on known values and answers Unknown otherwise; nothing here touches the file system,
the environment or the network (os.getcwd() and os.environ are Unknown on purpose). The one reading
of the environment is the recipe's own: `os.environ.get(NAME, DEFAULT)` / `os.getenv(NAME, DEFAULT)`
is DEFAULT, the value the recipe has where NAME is unset (0.7's Qwen3-Omni recipes name their HF
checkpoint that way); without a default it stays Unknown.
"""

from __future__ import annotations

import math
from typing import Any

from mbridge_launch.catalog_sync import objects
from mbridge_launch.catalog_sync.expressions import is_plain, truth
from mbridge_launch.catalog_sync.values import (
    DATACLASS,
    Builtin,
    ClassValue,
    External,
    FieldSpec,
    FuncValue,
    Obj,
    Partial,
    Unknown,
)

_PY_TYPES = {"str": str, "int": int, "float": float, "bool": bool, "list": list, "dict": dict, "tuple": tuple,
             "set": set, "frozenset": frozenset}


def _isinstance(interp: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    if len(args) != 2:
        return Unknown("isinstance")
    value, kinds = args
    verdicts = [_instance_of(value, kind) for kind in (kinds if isinstance(kinds, tuple) else (kinds,))]
    if any(v is True for v in verdicts):
        return True
    if any(v is None for v in verdicts):
        return Unknown("isinstance")
    return False


def _instance_of(value: Any, kind: Any) -> bool | None:
    if isinstance(value, Unknown):
        return None
    if isinstance(kind, Builtin) and kind.name in _PY_TYPES:
        if isinstance(value, (Obj, External, FuncValue, ClassValue)):
            return False
        return isinstance(value, _PY_TYPES[kind.name])
    if isinstance(kind, Builtin):
        return None
    if isinstance(value, Obj):
        if value.hf_derived:
            return None if not isinstance(kind, External) else None
        if isinstance(kind, ClassValue):
            return isinstance(value.cls, ClassValue) and any(c is kind for c in value.cls.mro())
        if isinstance(kind, External):
            if kind.name in value.lineage():
                return True
            return None if objects.external_bases(value.cls) else False
        return None
    if isinstance(kind, (ClassValue,)):
        return False  # plain data is never an instance of a wheel class
    return None


def _hasattr(interp: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    value, name = (args + [None, None])[:2]
    if not isinstance(name, str) or isinstance(value, Unknown):
        return Unknown("hasattr")
    if isinstance(value, Obj):
        verdict = objects.has_obj_attr(interp, value, name)
        return Unknown("hasattr") if verdict is None else verdict
    if value is None or is_plain(value):
        return hasattr(value, name)
    return Unknown("hasattr")


def _getattr(interp: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    if len(args) < 2 or not isinstance(args[1], str):
        return Unknown("getattr")
    value, name = args[0], args[1]
    if len(args) == 3 and isinstance(value, Obj):
        verdict = objects.has_obj_attr(interp, value, name)
        if verdict is False:
            return args[2]
        if verdict is None:
            return Unknown(f"getattr {name}")
    if len(args) == 3 and (value is None or is_plain(value)) and not hasattr(value, name):
        return args[2]
    return interp.get_attr(value, name)


def _setattr(interp: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    if len(args) == 3 and isinstance(args[1], str):
        interp.set_attr(args[0], args[1], args[2])
    return None


def _plain(func: Any) -> Any:
    """A builtin applied for real when every argument is plain data."""

    def run(interp: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        if not all(is_plain(a) for a in args) or not all(is_plain(v) for v in kwargs.values()):
            return Unknown(getattr(func, "__name__", "builtin"))
        try:
            return func(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - a failing builtin gives an unknown value
            return Unknown(f"{exc}")

    return run


def _container(kind: type) -> Any:
    def run(interp: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        if not args:
            return kind(**kwargs) if kind is dict else kind()
        items = interp.iterate(args[0]) if kind is not dict else None
        if kind is dict:
            if isinstance(args[0], dict):
                return {**args[0], **kwargs}
            pairs = interp.iterate(args[0])
            if pairs is None or not all(isinstance(p, (tuple, list)) and len(p) == 2 for p in pairs):
                return Unknown("dict()")
            return {**{p[0]: p[1] for p in pairs}, **kwargs}
        if items is None:
            return Unknown(kind.__name__)
        if kind in (set, frozenset):
            return kind(items) if is_plain(items) else Unknown("set")
        return kind(items)

    return run


def _len(interp: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    if args and isinstance(args[0], (list, tuple, dict, str, set, frozenset)):
        return len(args[0])
    return Unknown("len")


def _iter_builtin(name: str) -> Any:
    def run(interp: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        lists = [interp.iterate(a) for a in args]
        if any(items is None for items in lists):
            return Unknown(name)
        if name == "enumerate":
            start = kwargs.get("start", 0)
            return [(i + start, v) for i, v in enumerate(lists[0])]
        if name == "zip":
            return [tuple(t) for t in zip(*lists)]
        if name == "reversed":
            return list(reversed(lists[0]))
        if name in ("any", "all"):
            verdicts = [truth(v) for v in lists[0]]
            if name == "any":
                return True if True in verdicts else (Unknown("any") if None in verdicts else False)
            return False if False in verdicts else (Unknown("all") if None in verdicts else True)
        return Unknown(name)

    return run


def _sorted(interp: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    items = interp.iterate(args[0]) if args else None
    if items is None or not is_plain(items) or "key" in kwargs:
        return Unknown("sorted")
    return sorted(items, reverse=bool(kwargs.get("reverse", False)))


def _type(interp: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    value = args[0] if args else None
    if isinstance(value, Obj):
        return value.cls
    for name, kind in _PY_TYPES.items():
        if type(value) is kind:
            return BUILTINS[name]
    return Unknown("type")


def _bool(args: list[Any]) -> Any:
    if not args:
        return False
    verdict = truth(args[0])
    return Unknown("bool") if verdict is None else verdict


def _noop(interp: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    return None


def _unknown(name: str) -> Any:
    return lambda interp, args, kwargs: Unknown(name)


_HANDLERS: dict[str, Any] = {
    "isinstance": _isinstance,
    "hasattr": _hasattr,
    "getattr": _getattr,
    "setattr": _setattr,
    "len": _len,
    "bool": lambda i, a, k: _bool(a),
    "sorted": _sorted,
    "type": _type,
    "super": _unknown("super()"),
    **{kind.__name__: _container(kind) for kind in (list, tuple, dict, set, frozenset)},
    **{func.__name__: _plain(func) for func in (int, float, str, min, max, sum, abs, round, divmod, range, repr)},
    **{name: _iter_builtin(name) for name in ("enumerate", "zip", "reversed", "any", "all")},
    **{name: _unknown(name) for name in ("iter", "next", "map", "filter", "callable", "id", "open")},
    **{name: _noop for name in ("print", "staticmethod", "classmethod", "property")},
}
BUILTINS: dict[str, Any] = {name: Builtin(name, handler) for name, handler in _HANDLERS.items()}
for _exc in ("Exception", "BaseException", "ValueError", "TypeError", "KeyError", "IndexError", "RuntimeError",
             "NotImplementedError", "ImportError", "ModuleNotFoundError", "AttributeError", "AssertionError",
             "ArithmeticError", "ZeroDivisionError", "OSError", "FileNotFoundError", "UserWarning", "DeprecationWarning",
             "Warning", "object", "StopIteration", "LookupError"):
    BUILTINS[_exc] = External(f"builtins.{_exc}")
BUILTINS["__name__"] = "__main__"


# --- calls of names from outside the wheel --------------------------------------------------------------
def _field(interp: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    spec = FieldSpec("", init=kwargs.get("init", True) is not False)
    if "default" in kwargs:
        spec.default, spec.has_default = kwargs["default"], True
    if "default_factory" in kwargs:
        spec.factory = kwargs["default_factory"]
    return spec


def _replace(interp: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    if not args or not isinstance(args[0], Obj):
        return Unknown("replace")
    clone = Obj(args[0].cls, interp.level)
    clone.attrs = {**args[0].attrs, **kwargs}
    clone.hf_derived, clone.hf_model_id = args[0].hf_derived, args[0].hf_model_id
    return clone


def deep_copy(value: Any, memo: dict[int, Any] | None = None) -> Any:
    memo = {} if memo is None else memo
    if id(value) in memo:
        return memo[id(value)]
    if isinstance(value, Obj):
        clone = Obj(value.cls, value.level)
        memo[id(value)] = clone
        clone.hf_derived, clone.hf_model_id, clone.origin = value.hf_derived, value.hf_model_id, value.origin
        clone.attrs = {k: deep_copy(v, memo) for k, v in value.attrs.items()}
        return clone
    if isinstance(value, list):
        return [deep_copy(v, memo) for v in value]
    if isinstance(value, tuple):
        return tuple(deep_copy(v, memo) for v in value)
    if isinstance(value, dict):
        return {k: deep_copy(v, memo) for k, v in value.items()}
    return value


def _copy(interp: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    value = args[0] if args else Unknown("copy")
    if isinstance(value, Obj):
        return _replace(interp, [value], {})
    if isinstance(value, (list, dict)):
        return value.copy()
    return value


def _path_join(interp: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    if all(isinstance(a, str) for a in args):
        return "/".join(a.rstrip("/") for a in args)
    return Unknown("path")


def _env_default(interp: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    default = args[1] if len(args) == 2 else kwargs.get("default", _NO_DEFAULT)
    return Unknown("environment variable") if default is _NO_DEFAULT else default


_NO_DEFAULT = object()
_MATH = {name: getattr(math, name) for name in ("ceil", "floor", "gcd", "sqrt", "log2", "isqrt", "prod", "lcm")}

EXTERNAL_CALLS: dict[str, Any] = {
    "dataclasses.field": _field,
    "dataclasses.replace": _replace,
    "dataclasses.dataclass": lambda i, a, k: DATACLASS if not a else i.apply_decorator(DATACLASS, a[0]),
    "functools.partial": lambda i, a, k: Partial(a[0], list(a[1:]), dict(k)) if a else Unknown("partial"),
    "copy.deepcopy": lambda i, a, k: deep_copy(a[0]) if a else Unknown("deepcopy"),
    "copy.copy": _copy,
    "os.path.join": _path_join,
    "typing.cast": lambda i, a, k: a[1] if len(a) == 2 else Unknown("cast"),
    "warnings.warn": _noop,
    "os.environ.get": _env_default,
    "os.getenv": _env_default,
}
for _name, _fn in _MATH.items():
    EXTERNAL_CALLS[f"math.{_name}"] = _plain(_fn)


def call_external(interp: Any, func: External, args: list[Any], kwargs: dict[str, Any]) -> Any:
    handler = EXTERNAL_CALLS.get(func.qualname)
    if handler is not None:
        return handler(interp, args, kwargs)
    if func.qualname.endswith(".__init__"):
        return objects.init_external_onto(args, kwargs)
    if func.qualname.startswith("builtins."):
        obj = Obj(func, interp.level)
        obj.attrs["args"] = tuple(args)
        return obj
    obj = objects.new_external_obj(interp, func, kwargs)
    if obj is not None:
        return obj
    return Unknown(f"call {func.qualname}")
