"""``make dist``: the sdist, a pure-Python wheel and a wheel with the mypyc-compiled modules
for this interpreter and platform, into dist/.

Everything is built from a copy of the sources in a temporary directory, so that the
compiled modules never land beside the sources of the working tree (where they would shadow
later edits). Where there is no C compiler, only the pure wheel and the sdist are made.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent
FILES = ["pyproject.toml", "README.md", "LICENSE", "build_native.py", "hatch_build.py"]


def copy_sources(tree: Path) -> None:
    for name in FILES:
        shutil.copy2(ROOT / name, tree / name)
    shutil.copytree(
        ROOT / "src",
        tree / "src",
        ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyc", "*.egg-info"),
    )


def uv_build(uv: str, tree: Path, out: Path, *what: str, native: bool = False) -> None:
    env = {**os.environ, "DOVECOTE_NATIVE": "1" if native else "0"}
    subprocess.run([uv, "build", "--quiet", *what, "--out-dir", str(out), str(tree)],
                   check=True, env=env)  # fmt: skip


def main() -> int:
    options = argparse.ArgumentParser(description=__doc__)
    options.add_argument("--uv", default="uv", help="the uv command")
    options.add_argument("--out", type=Path, default=ROOT / "dist", help="where the files go")
    options.add_argument("--pure-only", action="store_true", help="no compiled wheel")
    args = options.parse_args()
    with tempfile.TemporaryDirectory(prefix="dovecote-dist-") as tmp:
        tree, out = Path(tmp) / "tree", Path(tmp) / "out"
        tree.mkdir()
        copy_sources(tree)
        # The sdist, then the pure wheel built from it (which shows the sdist is complete).
        uv_build(args.uv, tree, out)
        if not args.pure_only:
            subprocess.run([sys.executable, str(tree / "build_native.py")], check=True)
            if any((tree / "src").rglob("*.so")):
                uv_build(args.uv, tree, out, "--wheel", native=True)
        args.out.mkdir(parents=True, exist_ok=True)
        for built in sorted(out.iterdir()):
            if built.suffix in (".whl", ".gz"):
                shutil.copy2(built, args.out / built.name)
                print(args.out / built.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
