"""Values of the static interpreter that runs recipe functions without importing Megatron Bridge.

Plain Python data (int, str, list, dict...) stands for itself. Everything else is one of:
- Unknown: a value the interpreter cannot know statically (a file read, a Hugging Face config).
- External: a name from outside the wheel (torch.bfloat16, a megatron.core class), by its path.
- Obj: an instance of a wheel class (ConfigContainer, GPTModelProvider, LoRA...) or of a known
  external dataclass; its attributes are a dict, filled with the dataclass defaults.
- FuncValue / ClassValue / ModuleState / Partial (bound methods too) / Builtin: callables and modules.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any, Callable


class Unknown:
    __slots__ = ("reason",)

    def __init__(self, reason: str = "") -> None:
        self.reason = reason

    def __repr__(self) -> str:
        return f"Unknown({self.reason})"


def unknown(reason: str = "") -> Unknown:
    return Unknown(reason)


@dataclass(frozen=True, slots=True)
class External:
    """A module, class, function or constant outside the wheel, known only by its dotted path."""

    qualname: str

    def __repr__(self) -> str:  # sets of values are iterated in repr order: keep this form
        return f"External({self.qualname})"

    @property
    def name(self) -> str:
        return self.qualname.rsplit(".", 1)[-1]


@dataclass(eq=False)
class ModuleState:
    """A wheel module as far as it has run; also the value of a name bound to the module."""

    name: str
    is_package: bool
    namespace: dict[str, Any] = field(default_factory=dict)
    done: bool = False


@dataclass(eq=False)
class LazyImport:
    """`from MODULE import NAME`, resolved on first read (keeps module loading lazy)."""

    module: str
    name: str


@dataclass(eq=False)
class FuncValue:
    node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
    module: ModuleState
    closure: Any  # the enclosing Frame, or None
    defaults: list[Any]  # positional defaults, aligned to the last positional parameters
    kw_defaults: dict[str, Any]
    name: str
    qualname: str

    @property
    def dotted(self) -> str:
        return f"{self.module.name}.{self.qualname}"


@dataclass(eq=False)
class FieldSpec:
    name: str
    default: Any = None
    has_default: bool = False
    factory: Any = None  # a callable value, for default_factory
    init: bool = True


@dataclass(eq=False)
class ClassValue:
    name: str
    qualname: str
    module: ModuleState
    bases: list[Any]
    namespace: dict[str, Any]
    annotations: list[str]  # names annotated in the class body, in order
    is_dataclass: bool = False
    _fields: dict[str, FieldSpec] | None = None

    @property
    def dotted(self) -> str:
        return f"{self.module.name}.{self.qualname}"

    def mro(self) -> list[Any]:
        """Depth-first, left-to-right, first occurrence wins: close enough to C3 for config classes."""
        order: list[Any] = []
        seen: set[int] = set()

        def visit(cls: Any) -> None:
            if id(cls) in seen:
                return
            seen.add(id(cls))
            order.append(cls)
            if isinstance(cls, ClassValue):
                for base in cls.bases:
                    visit(base)

        visit(self)
        return order

    def lineage(self) -> list[str]:
        """Class names along the MRO (wheel and external), for isinstance and peft detection."""
        return [c.name for c in self.mro() if isinstance(c, (ClassValue, External))]


class Obj:
    """An instance. `level` is the interpreter's uncertainty depth when it was created: changes
    made at a deeper level (inside a branch whose condition is unknown) are merged, not applied."""

    __slots__ = ("cls", "attrs", "origin", "level", "hf_model_id", "hf_derived")

    def __init__(self, cls: Any, level: int = 0) -> None:
        self.cls = cls
        self.attrs: dict[str, Any] = {}
        self.origin: str | None = None  # name of the wheel function that first returned it
        self.level = level
        self.hf_model_id: Any = None
        self.hf_derived = False

    @property
    def class_name(self) -> str:
        return self.cls.name if isinstance(self.cls, (ClassValue, External)) else "?"

    def lineage(self) -> list[str]:
        if isinstance(self.cls, ClassValue):
            return self.cls.lineage()
        if isinstance(self.cls, External):
            return [self.cls.name]
        return []

    def __repr__(self) -> str:
        return f"Obj({self.class_name})"


@dataclass(eq=False)
class Partial:
    """`functools.partial(func, *args, **kwargs)`; a bound method is one too (`bound_method`)."""

    func: Any
    args: list[Any]
    kwargs: dict[str, Any]


def bound_method(func: Any, self_value: Any) -> Partial:
    """`obj.method` (or a classmethod read from `cls`): `func` with `self_value` as first argument."""
    return Partial(func, [self_value], {})


@dataclass(eq=False)
class Builtin:
    name: str
    fn: Callable[..., Any]  # fn(interp, args, kwargs)


@dataclass(eq=False)
class Decorated:
    """A function under one of the builtin method decorators; the subclass says which."""

    func: Any


class PropertyValue(Decorated):
    """`@property`: reading the attribute calls `func(obj)`."""


class StaticMethod(Decorated):
    """`@staticmethod`: `func` itself, unbound."""


class ClassMethod(Decorated):
    """`@classmethod`: `func` bound to the class."""


@dataclass(eq=False)
class HFBridge:
    """AutoBridge.from_hf_pretrained(PATH): the HF id is all a static reader can know."""

    hf_model_id: Any


@dataclass(eq=False)
class SuperProxy:
    """`super()` inside a method of `cls`, bound to `obj`."""

    cls: Any
    obj: Any


class DataclassMarker:
    """`dataclass` or `dataclass(...)` used as a decorator."""


DATACLASS = DataclassMarker()


def same(a: Any, b: Any) -> bool:
    """Do two values certainly denote the same thing? (used to merge uncertain assignments)"""
    if a is b:
        return True
    if isinstance(a, Unknown) or isinstance(b, Unknown):
        return False
    if type(a) is not type(b):
        return False
    if isinstance(a, (bool, int, float, str, bytes, type(None))):
        return a == b
    if isinstance(a, External):
        return a == b
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return False


def merge(old: Any, new: Any) -> Any:
    """The value after an assignment that may or may not have happened."""
    return new if same(old, new) else Unknown("conditional")
