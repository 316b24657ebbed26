"""Instances, classes and calls for the static interpreter: dataclass fields and defaults,
attribute lookup along the class chain, argument binding, and the model-provider stand-in for
`AutoBridge.from_hf_pretrained(...).to_megatron_provider()`."""

from __future__ import annotations

import ast
import copy
from functools import lru_cache
from typing import Any

from mbridge_launch.catalog_sync.mcore_defaults import EXECUTION_FIELDS, external_defaults
from mbridge_launch.catalog_sync.values import (
    Builtin,
    ClassMethod,
    ClassValue,
    External,
    FieldSpec,
    FuncValue,
    HFBridge,
    Obj,
    PropertyValue,
    StaticMethod,
    SuperProxy,
    Unknown,
    bound_method,
)

_PLAIN_METHODS = {
    str: {"lower", "upper", "replace", "split", "rsplit", "join", "startswith", "endswith", "strip", "rstrip",
          "lstrip", "format", "partition", "rpartition", "title", "capitalize", "count", "find", "isdigit"},
    list: {"append", "extend", "insert", "pop", "index", "count", "copy", "remove", "sort", "reverse"},
    dict: {"get", "items", "keys", "values", "update", "pop", "copy", "setdefault"},
    tuple: {"index", "count"},
    set: {"add", "update", "union", "copy", "discard"},
}
_MUTATORS = {"append", "extend", "insert", "pop", "update", "setdefault", "sort", "reverse", "remove", "add", "discard"}
AUTO_BRIDGE = "megatron.bridge.models.conversion.auto_bridge.AutoBridge"


# --- classes ------------------------------------------------------------------------------------
def class_fields(cls: ClassValue) -> dict[str, FieldSpec]:
    """Dataclass fields in definition order, bases first (as dataclasses.fields orders them)."""
    if cls._fields is not None:
        return cls._fields
    fields: dict[str, FieldSpec] = {}
    for klass in reversed(cls.mro()):
        if not isinstance(klass, ClassValue) or not klass.is_dataclass:
            continue
        for name in klass.annotations:
            declared = klass.namespace.get(name, _MISSING)
            if isinstance(declared, FieldSpec):
                spec = FieldSpec(name, declared.default, declared.has_default, declared.factory, declared.init)
            elif declared is _MISSING:
                spec = FieldSpec(name)
            else:
                spec = FieldSpec(name, declared, True)
            fields[name] = spec
    cls._fields = fields
    return fields


_MISSING = object()


def external_bases(cls: Any) -> list[External]:
    if isinstance(cls, External):
        return [cls]
    if isinstance(cls, ClassValue):
        return [c for c in cls.mro() if isinstance(c, External)]
    return []


def external_default(cls: Any, name: str) -> tuple[bool, Any]:
    for base in external_bases(cls):
        table = external_defaults(base.qualname)
        if table is not None and name in table:
            return True, copy.deepcopy(table[name])
    return False, None


def instantiate(interp: Any, cls: ClassValue, args: list[Any], kwargs: dict[str, Any]) -> Any:
    if cls.dotted == AUTO_BRIDGE:
        return Unknown("AutoBridge()")
    obj = Obj(cls, interp.level)
    for klass in cls.mro():
        if isinstance(klass, ClassValue) and klass.is_dataclass and "__init__" not in klass.namespace:
            _dataclass_init(interp, obj, cls, args, kwargs)
            return obj
        if isinstance(klass, ClassValue) and isinstance(klass.namespace.get("__init__"), FuncValue):
            interp.call_function(klass.namespace["__init__"], [obj, *args], kwargs)
            return obj
        if isinstance(klass, External):
            obj.attrs.update(kwargs)
            if args and klass.name.endswith(("Error", "Exception", "Warning")):
                obj.attrs["args"] = tuple(args)
            return obj
    obj.attrs.update(kwargs)
    return obj


def _dataclass_init(interp: Any, obj: Obj, cls: ClassValue, args: list[Any], kwargs: dict[str, Any]) -> None:
    fields = [spec for spec in class_fields(cls).values()]
    positional = list(args)
    for spec in fields:
        if spec.init and positional:
            obj.attrs[spec.name] = positional.pop(0)
        elif spec.init and spec.name in kwargs:
            obj.attrs[spec.name] = kwargs[spec.name]
        elif spec.factory is not None:
            obj.attrs[spec.name] = interp.call(spec.factory, [], {})
        elif spec.has_default:
            obj.attrs[spec.name] = spec.default
        elif spec.init:
            obj.attrs[spec.name] = Unknown(f"required {spec.name}")
    for name, value in kwargs.items():  # fields of an external base (megatron.core) passed by keyword
        obj.attrs.setdefault(name, value)


def new_external_obj(interp: Any, ext: External, kwargs: dict[str, Any]) -> Obj | None:
    table = external_defaults(ext.qualname)
    if table is None and not _looks_like_config_class(ext):
        return None
    obj = Obj(ext, interp.level)
    obj.attrs.update(kwargs)
    return obj


def _looks_like_config_class(ext: External) -> bool:
    """A megatron.core / megatron.training dataclass whose defaults are not tabled: still an
    object (its keyword arguments are known), rather than an unknown value."""
    return ext.qualname.startswith(("megatron.core.", "megatron.training.")) and ext.name[:1].isupper()


def hf_provider(interp: Any, hf_model_id: Any, via_bridge: bool = True, builder: bool = False) -> Obj:
    """The model provider a Hugging Face config would give: execution settings at their Megatron
    Core defaults, or as the model's bridge fixes them when its architecture is known
    (hf_bridges.py); the architecture itself unknown until the recipe sets it. `builder`: the
    model config of `get_model_config()` (0.7's builder path), which takes flat assignments the
    same way, with the fields its own bridge hook fixes."""
    provider_cls = External("megatron.core.transformer.transformer_config.TransformerConfig")
    obj = Obj(provider_cls, interp.level)
    obj.hf_model_id = hf_model_id
    obj.hf_derived = True
    table = interp.bridges
    fixed = (table.builder_fields_for(hf_model_id) if builder else table.fields_for(hf_model_id)) if via_bridge else None
    obj.attrs.update(fixed or {})
    return obj


def _derived_provider(interp: Any, source: Obj) -> Obj:
    from mbridge_launch.catalog_sync.mcore_defaults import BRIDGE_FIELDS

    derived = hf_provider(interp, source.hf_model_id, via_bridge=False)
    derived.attrs.update({k: copy.deepcopy(v) for k, v in source.attrs.items() if k in BRIDGE_FIELDS})
    return derived


# --- attribute lookup -------------------------------------------------------------------------------
def _class_lookup(cls: Any, name: str) -> tuple[bool, Any]:
    if not isinstance(cls, ClassValue):
        return False, None
    for klass in cls.mro():
        if isinstance(klass, ClassValue) and name in klass.namespace:
            return True, klass.namespace[name]
    return False, None


def get_obj_attr(interp: Any, obj: Obj, name: str) -> Any:
    if name in obj.attrs:
        return obj.attrs[name]
    if name == "__class__":
        return obj.cls
    found, value = _class_lookup(obj.cls, name)
    if found:
        value = interp.resolve(value)
        if isinstance(value, FuncValue):
            return bound_method(value, obj)
        if isinstance(value, PropertyValue):
            return interp.call(value.func, [obj], {})
        if isinstance(value, StaticMethod):
            return value.func
        if isinstance(value, ClassMethod):
            return bound_method(value.func, obj.cls)
        if isinstance(value, FieldSpec):
            return value.default if value.has_default else Unknown(f"field {name}")
        return value
    if obj.hf_derived and name.startswith("to_") and name.endswith("_provider"):
        # e.g. vlm_provider.to_text_provider(): still a provider built from the same HF config
        # the text provider copies the execution settings of this one (MiniMax-M3's to_text_provider
        # passes every init field on), so what the bridge or the recipe fixed carries over
        return Builtin(name, lambda i, a, k: _derived_provider(i, obj))
    if obj.hf_derived and name not in EXECUTION_FIELDS:
        return Unknown(f"hf config: {name}")
    known, default = external_default(obj.cls, name)
    if known:
        return default
    return Unknown(f"{obj.class_name}.{name}")


def has_obj_attr(interp: Any, obj: Obj, name: str) -> bool | None:
    if name in obj.attrs or _class_lookup(obj.cls, name)[0]:
        return True
    if external_default(obj.cls, name)[0]:
        return True
    if obj.hf_derived or external_bases(obj.cls):
        return None  # an external base may define it
    return False


def init_of(klass: Any, after: Any = None) -> Any:
    """The `__init__` that `klass.__init__` (or `super().__init__` from `after`) names: an explicit
    method, a dataclass's generated init, or an external base's init."""
    mro = klass.mro() if isinstance(klass, ClassValue) else [klass]
    if after is not None:
        mro = mro[next((i + 1 for i, c in enumerate(mro) if c is after), len(mro)):]
    for candidate in mro:
        if isinstance(candidate, ClassValue):
            if isinstance(candidate.namespace.get("__init__"), FuncValue):
                return candidate.namespace["__init__"]
            if candidate.is_dataclass:
                return Builtin(f"{candidate.name}.__init__", lambda i, a, k, c=candidate: _init_onto(i, c, a, k))
        elif isinstance(candidate, External):
            return External(f"{candidate.qualname}.__init__")
    return Builtin("object.__init__", lambda i, a, k: None)


def _init_onto(interp: Any, cls: ClassValue, args: list[Any], kwargs: dict[str, Any]) -> None:
    if args and isinstance(args[0], Obj):
        _dataclass_init(interp, args[0], cls, list(args[1:]), kwargs)
    return None


def init_external_onto(args: list[Any], kwargs: dict[str, Any]) -> None:
    """`ExternalBase.__init__(self, **kwargs)`: the keyword values become attributes."""
    if args and isinstance(args[0], Obj):
        for key, value in kwargs.items():
            args[0].attrs[key] = value
    return None


def super_attr(interp: Any, proxy: SuperProxy, name: str) -> Any:
    obj_cls = proxy.obj.cls if isinstance(proxy.obj, Obj) else proxy.obj
    if name == "__init__":
        init = init_of(obj_cls, after=proxy.cls)
        return bound_method(init, proxy.obj) if not isinstance(init, External) else Builtin(
            "external __init__", lambda i, a, k: init_external_onto([proxy.obj, *a], k))
    mro = obj_cls.mro() if isinstance(obj_cls, ClassValue) else []
    start = next((i + 1 for i, c in enumerate(mro) if c is proxy.cls), len(mro))
    for klass in mro[start:]:
        if isinstance(klass, ClassValue) and name in klass.namespace:
            value = interp.resolve(klass.namespace[name])
            return bound_method(value, proxy.obj) if isinstance(value, FuncValue) else value
    return Unknown(f"super().{name}")


def get_class_attr(interp: Any, cls: ClassValue, name: str) -> Any:
    if name == "__init__":
        return init_of(cls)
    if name == "__dataclass_fields__":
        return dict(class_fields(cls)) if cls.is_dataclass else Unknown("__dataclass_fields__")
    if cls.dotted == AUTO_BRIDGE and name in ("from_hf_pretrained", "from_hf_config"):
        return Builtin(f"AutoBridge.{name}", lambda _i, args, kwargs: HFBridge(args[0] if args and name == "from_hf_pretrained" else kwargs.get("hf_model_id")))
    if name == "__name__":
        return cls.name
    found, value = _class_lookup(cls, name)
    if not found:
        for base in external_bases(cls):
            return External(f"{base.qualname}.{name}")
        return Unknown(f"{cls.name}.{name}")
    value = interp.resolve(value)
    if isinstance(value, StaticMethod):
        return value.func
    if isinstance(value, ClassMethod):
        return bound_method(value.func, cls)
    if isinstance(value, FieldSpec):
        return value.default if value.has_default else Unknown(f"field {name}")
    return value


def hf_bridge_attr(interp: Any, bridge: HFBridge, name: str) -> Any:
    if name in ("to_megatron_provider", "to_provider"):
        return Builtin(name, lambda i, args, kwargs: hf_provider(i, bridge.hf_model_id))
    if name == "get_model_config":
        return Builtin(name, lambda i, args, kwargs: hf_provider(i, bridge.hf_model_id, builder=True))
    return Unknown(f"AutoBridge.{name}")


def external_attr(ext: External, name: str) -> Any:
    if ext.qualname == "typing" and name == "TYPE_CHECKING":
        return False
    return External(f"{ext.qualname}.{name}")


def plain_attr(value: Any, name: str) -> Any:
    for kind, methods in _PLAIN_METHODS.items():
        if isinstance(value, kind) and name in methods:
            return getattr(value, name)
    if isinstance(value, (FuncValue, ClassValue)) and name == "__name__":
        return value.name
    return Unknown(f"attribute {name}")


def call_plain_method(method: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    owner = getattr(method, "__self__", None)
    name = getattr(method, "__name__", "")
    if isinstance(owner, str) and not all(isinstance(a, (str, int, type(None), tuple, list)) for a in args):
        return Unknown(f"str.{name}")
    if isinstance(owner, str) and name == "join" and not all(isinstance(a, str) for a in (args[0] if args else [])):
        return Unknown("str.join")
    if isinstance(owner, list) and name in ("extend", "insert") and any(isinstance(a, Unknown) for a in args):
        # `stage.extend(["decoder"] * num_layers)` with num_layers from the HF config: the list's
        # contents are unknown from here on, which an Unknown element says (extract.to_data)
        owner.append(Unknown(f"list.{name}"))
        return None
    try:
        result = method(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - any failure of plain-data code is an unknown value
        return Unknown(f"{name}: {exc}")
    if name == "items":
        return [tuple(x) for x in result]
    if name in ("keys", "values"):
        return list(result)
    if name in _MUTATORS and result is None:
        return None
    return result


# --- functions -------------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def _generator_flag(node_id: int, node: ast.AST) -> bool:
    stack = list(ast.iter_child_nodes(node))
    while stack:
        child = stack.pop()
        if isinstance(child, (ast.Yield, ast.YieldFrom)):
            return True
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        stack.extend(ast.iter_child_nodes(child))
    return False


def is_generator(node: ast.AST) -> bool:
    return not isinstance(node, ast.Lambda) and _generator_flag(id(node), node)


def bind_arguments(func: FuncValue, args: list[Any], kwargs: dict[str, Any], frame: Any) -> None:
    spec = func.node.args
    positional = [*spec.posonlyargs, *spec.args]
    names = [a.arg for a in positional]
    values: dict[str, Any] = {}
    extra = list(args[len(names):])
    for name, value in zip(names, args):
        values[name] = value
    first_default = len(names) - len(func.defaults)
    for index, name in enumerate(names):
        if name not in values:
            if name in kwargs:
                values[name] = kwargs[name]
            elif index >= first_default:
                values[name] = func.defaults[index - first_default]
            else:
                values[name] = Unknown(f"missing argument {name}")
    for arg in spec.kwonlyargs:
        if arg.arg in kwargs:
            values[arg.arg] = kwargs[arg.arg]
        elif arg.arg in func.kw_defaults:
            values[arg.arg] = func.kw_defaults[arg.arg]
        else:
            values[arg.arg] = Unknown(f"missing argument {arg.arg}")
    if spec.vararg is not None:
        values[spec.vararg.arg] = tuple(extra)
    if spec.kwarg is not None:
        known = set(names) | {a.arg for a in spec.kwonlyargs}
        values[spec.kwarg.arg] = {k: v for k, v in kwargs.items() if k not in known}
    frame.locals.update(values)
