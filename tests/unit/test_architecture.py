"""The layout rules, checked on the sources themselves (with ast, nothing imported):

- nothing outside broker/ reaches into the broker's regions or its underscored attributes:
  it goes through the query API, ``contents`` and the documented entry points;
- the broker module knows nothing of the plugins built on it (statistics, streams);
- no import cycles among the broker's layers (everything in src/dovecote but the client
  package, which is a program of its own), type-only imports counted too;
- no module over 600 lines.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = SRC / "dovecote"
MAX_LINES = 600


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _imports(name: str, path: Path, known: dict[str, Path]) -> Iterator[tuple[str, bool]]:
    """The modules of src/dovecote that ``name`` imports, each with whether only for type
    checking (under ``if TYPE_CHECKING:``)."""
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    type_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            type_only.update(id(n) for child in node.body for n in ast.walk(child))
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            # "from package import module" imports the module; else the names are in base.
            targets = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names
            ]
        for target in targets:
            if target in known and target != name:
                yield target, id(node) in type_only


def _graph() -> dict[str, set[str]]:
    """Who imports whom, outside dovecote.client (at run time or for type checking)."""
    known = {n: p for n, p in _modules().items() if not n.startswith("dovecote.client")}
    return {name: {t for t, _ in _imports(name, path, known)} for name, path in known.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycles_among_the_broker_layers() -> None:
    assert _cycles(_graph()) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_the_import_reader_counts_type_only_imports(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "from typing import TYPE_CHECKING\nimport dovecote.core\n"
        "if TYPE_CHECKING:\n    from dovecote.broker.broker import Broker\n"
    )
    known = {"m": module, "dovecote.core": module, "dovecote.broker.broker": module}
    assert sorted(_imports("m", module, known)) == [
        ("dovecote.broker.broker", True),
        ("dovecote.core", False),
    ]


def _broker_internals_used(path: Path) -> list[str]:
    """Where a module reads ``.regions`` or an underscored attribute of something named
    ``broker`` (``broker._x``, ``self.broker._x``, ``app.broker._x``)."""
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        if node.attr == "regions":
            found.append(f"{path.name}:{node.lineno} .regions")
            continue
        owner = node.value
        owner_name = (
            owner.id
            if isinstance(owner, ast.Name)
            else owner.attr
            if isinstance(owner, ast.Attribute)
            else ""
        )
        is_private = node.attr.startswith("_") and not node.attr.startswith("__")
        if is_private and owner_name in ("broker", "_broker"):
            found.append(f"{path.name}:{node.lineno} {owner_name}.{node.attr}")
    return sorted(found)


def test_nothing_outside_broker_reaches_into_the_broker() -> None:
    outside = [p for name, p in _modules().items() if not name.startswith("dovecote.broker")]
    assert outside
    assert [use for path in outside for use in _broker_internals_used(path)] == []


def test_the_internals_scan_sees_a_reach_in(tmp_path: Path) -> None:
    module = tmp_path / "reaching.py"
    module.write_text(
        "def f(broker, self):\n"
        "    broker.regions.queues\n    self.broker._connections\n    broker.query.destinations()\n"
    )
    assert _broker_internals_used(module) == [
        "reaching.py:2 .regions",
        "reaching.py:3 broker._connections",
    ]


def test_the_broker_does_not_import_the_plugins_built_on_it() -> None:
    known = _modules()
    imported = {
        t for t, _ in _imports("dovecote.broker.broker", known["dovecote.broker.broker"], known)
    }
    assert not imported & {
        "dovecote.broker.stats",
        "dovecote.broker.streams",
        "dovecote.broker.scheduler",
        "dovecote.broker.security",
    }


def test_no_module_is_over_600_lines() -> None:
    long = {
        name: n
        for name, path in _modules().items()
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}
