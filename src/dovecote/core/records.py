"""How the command vocabulary's records are made fast to build, and pickled when compiled.

The command vocabulary is frozen dataclasses. The records built once or more for every
message (the message itself, its send, its dispatch, its ack; beyond core, a STOMP frame and
its request, an OpenWire request and structure, the store's add and remove, the journal's
sequenced add and its locations) are slotted dataclasses declared ``init=False`` with a written-out
``__init__``. Compiled by mypyc
(build_native.py) such a class is native: its ``__init__`` stores straight into the object
and compiled code reads its fields straight out. A dataclass-generated ``__init__`` stays
interpreted Python even in a compiled module (a frozen one sets each field through
``object.__setattr__``): building a 21-field Message that way cost ten times as much (more
frozen), twice per message routed, and every field read from compiled code went
through the interpreter's attribute lookup. The price: these records are not frozen at run
time nor for mypy, so nothing may assign to their fields once built (the stores and the
dispatch share them; ``dataclasses.replace`` makes a changed copy). Equality and hashing are
by value over the fields, as for the frozen ones; unit tests keep each ``__init__`` in step
with its fields.

The ids and destinations that key the dictionaries looked up for every message (consumer,
producer and connection ids; destinations) keep their hash in a field made once by
``__post_init__`` (``init=False``, left out of equality, repr and pickling), a quarter of the
built-in hash (``>> 2``). Compiled, a ``__hash__`` returns a mypyc integer, which holds 63
bits unboxed: a full 64-bit hash was a new int object made and freed at every lookup (a
third of a lookup's cost, seven lookups per OpenWire message); the quarter always fits.
"""

from __future__ import annotations

import copyreg
import sys
from dataclasses import fields, is_dataclass
from typing import Any


def pickle_by_fields(module: str) -> None:
    """Pickle (and copy) ``module``'s dataclasses by calling them with their fields.

    Compiled with mypyc, a class unpickles by making an empty object and setting its
    attributes one by one, which a frozen dataclass refuses and a native class with a
    written-out ``__init__`` cannot start (it makes the object through that ``__init__``);
    through the constructor it works compiled or not, and gives an equal object either way."""
    for value in list(vars(sys.modules[module]).values()):
        if isinstance(value, type) and value.__module__ == module and is_dataclass(value):
            copyreg.pickle(value, _by_fields)


def _by_fields(obj: Any) -> tuple[type, tuple[object, ...]]:
    return type(obj), tuple(getattr(obj, f.name) for f in fields(obj) if f.init)
