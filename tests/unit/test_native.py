"""The modules build_native.py compiles are built from the sources as they are now.

Python imports an extension before a source of the same name, so an extension older than its
source would run (and test) code that is no longer there: `make install` rebuilds them.
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _build_native() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build_native", ROOT / "build_native.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_listed_module_is_compiled_from_its_current_source_or_none_is() -> None:
    native = _build_native()
    compiled = {module: native.built(module) for module in native.MODULES}
    assert all(len(files) <= 1 for files in compiled.values()), compiled
    if not any(compiled.values()):
        return  # no C compiler here: everything runs as Python
    missing = [module for module, files in compiled.items() if not files]
    assert not missing, f"not compiled (run `make install`): {missing}"
    # One build compiles them together (calls between them are native), so each must be
    # newer than every one of the sources.
    newest = max((native.SRC / module).stat().st_mtime for module in native.MODULES)
    stale = [module for module, files in compiled.items() if files[0].stat().st_mtime < newest]
    assert not stale, f"compiled before a source changed (run `make install`): {stale}"


def test_the_compiled_modules_are_the_ones_imported() -> None:
    native = _build_native()
    for module in native.MODULES:
        files = native.built(module)
        name = module.removesuffix(".py").replace("/", ".")
        imported = Path(importlib.import_module(name).__file__ or "")
        assert imported == (files[0] if files else native.SRC / module)


def test_no_extension_is_left_from_a_module_no_longer_listed() -> None:
    native = _build_native()
    listed = {native.SRC / module for module in native.MODULES}
    leftovers = [
        path
        for path in (native.SRC / "dovecote").rglob("*.so")
        if path.parent / (path.name.split(".", 1)[0] + ".py") not in listed
    ]
    assert not leftovers
