"""hatchling's build hook: with DOVECOTE_NATIVE=1 (``make dist``) the wheel takes the
mypyc-compiled modules that build_native.py left beside their sources and is tagged for
this interpreter and platform; otherwise the wheel is pure Python (py3-none-any), whatever
``.so`` files a developer's tree holds."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class NativeModules(BuildHookInterface):  # type: ignore[misc]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or os.environ.get("DOVECOTE_NATIVE") != "1":
            return
        src = Path(self.root) / "src"
        compiled = sorted(src.rglob("*.so"))
        if not compiled:
            raise RuntimeError("DOVECOTE_NATIVE=1 without compiled modules: run build_native.py")
        build_data["pure_python"] = False
        build_data["infer_tag"] = True
        # The extensions are ignored by git (.gitignore), so they are named here; mypyc's
        # shared runtime module sits at the top level, beside the dovecote package.
        for path in compiled:
            build_data["force_include"][str(path)] = str(path.relative_to(src))
