"""The decorator for the records built once or more per message, and pickling for the
frozen ones when they run compiled.

The command vocabulary is frozen dataclasses. For the few built on every message (the
message itself, its send, its dispatch, its ack) freezing at run time is too dear: a frozen
dataclass's ``__init__`` sets each field through ``object.__setattr__``, so a 21-field
Message cost ~3 µs to build against ~0.6 µs for a plain slotted one, and it is built twice
per message routed (about a tenth of the broker's CPU per non-persistent message).
"""

from __future__ import annotations

import copyreg
import sys
from dataclasses import dataclass, fields, is_dataclass
from typing import Any, TypeVar, dataclass_transform

_T = TypeVar("_T")


@dataclass_transform(frozen_default=True)
def per_message_record(cls: type[_T]) -> type[_T]:
    """A slotted dataclass that is frozen for the type checker only.

    mypy rejects assigning to a field anywhere in the code, as it does for
    ``@dataclass(frozen=True)``; at run time nothing stops it, so nothing may do it (the
    stores and the dispatch share these objects). Equality and hashing are a frozen
    dataclass's: by value over the fields.
    """
    return dataclass(slots=True, unsafe_hash=True)(cls)


def pickle_frozen_by_fields(module: str) -> None:
    """Pickle (and copy) ``module``'s frozen dataclasses by calling them with their fields.

    Compiled with mypyc (build_native.py), a class unpickles by setting its attributes one
    by one, which a frozen dataclass refuses; through the constructor it works compiled or
    not, and gives an equal object either way."""
    for value in list(vars(sys.modules[module]).values()):
        if (
            isinstance(value, type)
            and value.__module__ == module
            and is_dataclass(value)
            and value.__dataclass_params__.frozen  # type: ignore[attr-defined]
        ):
            copyreg.pickle(value, _by_fields)


def _by_fields(obj: Any) -> tuple[type, tuple[object, ...]]:
    return type(obj), tuple(getattr(obj, f.name) for f in fields(obj))
