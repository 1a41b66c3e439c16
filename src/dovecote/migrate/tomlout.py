"""Writing the converted configuration as TOML with a comment on each key (the standard
library reads TOML but does not write it, and no writer keeps comments where we want them)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

Scalar = str | int | float | bool
Parse = Callable[[str], Scalar]
"""How an ActiveMQ attribute's text becomes a dovecote value (ValueError: it cannot)."""
Value = Scalar | list[str] | list[dict[str, Scalar]] | dict[str, Scalar]


@dataclass
class Table:
    """One ``[name]`` (or ``[[name]]`` when ``array``) table, keys in the order set."""

    name: str
    array: bool = False
    comment: str = ""
    keys: dict[str, tuple[Value, str]] = field(default_factory=dict)

    def set(self, key: str, value: Value, comment: str = "") -> None:
        self.keys[key] = (value, comment)

    def get(self, key: str) -> Value | None:
        return self.keys[key][0] if key in self.keys else None

    def data(self) -> dict[str, Value]:
        return {key: value for key, (value, _) in self.keys.items()}


def scalar(value: Scalar) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    return json.dumps(value, ensure_ascii=False)  # JSON's escapes are TOML's basic string's


def value_text(value: Value) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {scalar(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(value_text(v) for v in value) + "]"
    return scalar(value)


def comment_lines(text: str, width: int = 92) -> list[str]:
    """``text`` as ``#`` lines of at most ``width`` characters."""
    lines: list[str] = []
    for paragraph in text.splitlines():
        words, line = paragraph.split(" "), "#"
        for word in words:
            if len(line) + 1 + len(word) > width and line != "#":
                lines.append(line)
                line = "#  "
            line += " " + word
        lines.append(line.rstrip())
    return lines


def render(header: list[str], tables: list[Table]) -> str:
    out = [*header]
    for table in tables:
        if not table.keys and not table.array and not table.comment:
            continue
        out.append("")
        if table.comment:
            out.extend(comment_lines(table.comment))
        out.append(f"[[{table.name}]]" if table.array else f"[{table.name}]")
        for key, (value, comment) in table.keys.items():
            line = f"{key} = {value_text(value)}"
            if comment and len(line) + len(comment) + 3 <= 100:
                out.append(f"{line}  # {comment}")
            else:
                out.extend(comment_lines(comment) if comment else [])
                out.append(line)
    return "\n".join(out) + "\n"
