"""What every part of the configuration shares: the error, the base of its tables, the
number types and reading a TOML file."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Annotated, Any

from msgspec import Meta, Struct

# msgspec rather than pydantic: the same typed, validated, frozen tree for a fraction of the
# memory pydantic's import and first model take (docs/performance.md).
NonNegative = Annotated[int, Meta(ge=0)]
Positive = Annotated[int, Meta(gt=0)]
Port = Annotated[int, Meta(ge=0, le=65535)]
LimitOrUnset = Annotated[int, Meta(ge=-1)]
"""-1: not set here (the broker's own limit applies)."""


class ConfigError(Exception):
    """The configuration file is missing, unreadable or invalid; the message says where."""


class Section(Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """A table of the file: unknown keys are refused, and nothing changes once read (each
    subclass says frozen again for the type checker; msgspec inherits it anyway)."""


def read_toml(path: Path, what: str) -> dict[str, Any]:
    """A TOML file's tables; ConfigError saying ``what`` file could not be read."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read {what} {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{what} {path} is not valid TOML: {exc}") from None


# msgspec says "Expected `int` <= 65535 - at `$.stomp.port`" and "Object contains unknown
# field `prot` - at `$.stomp`"; the user wrote stomp.port and stomp.prot.
_AT = re.compile(r"^(?P<what>.*?)(?: - at `\$(?P<where>[^`]*)`)?$", re.DOTALL)
_UNKNOWN = re.compile(r"^Object contains unknown field `(?P<key>[^`]*)`$")


def problem(message: str) -> str:
    """msgspec's message as ``dotted.key: what is wrong``."""
    match = _AT.match(message)
    assert match is not None  # the pattern matches any text
    what, where = match["what"], (match["where"] or "").lstrip(".")
    where = re.sub(r"\[(\d+)\]", r".\1", where)  # policy.entries[0] -> policy.entries.0
    if unknown := _UNKNOWN.match(what):
        where = f"{where}.{unknown['key']}" if where else unknown["key"]
        what = "unknown key"
    return f"{where}: {what}" if where else what
