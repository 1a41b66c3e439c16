"""Compiles dovecote's hot modules to C extensions with mypyc, in place (`make install` runs it).

The modules stay ordinary, typed Python: mypyc turns them into C that calls the same
objects, checks the type hints at run time and skips the interpreter's dispatch. Python
imports an extension before a ``.py`` of the same name, so the compiled modules take over
where they are built and the sources run as they are where they are not (no C compiler, or
Python's headers missing: the broker is then slower, not different).
``tests/unit/test_native.py`` fails when a built module is older than its source.

Modules are chosen by where the broker's time goes with many small messages (frame
reading and writing, dispatch, acks, the journal's appends, and the ids, destinations and
commands they all read). The records built per message are native classes compiled, with
a written-out ``__init__`` (core/records.py says why). Left out: core/records.py,
core/errors.py, and anything whose classes tests or users subclass or patch (an interpreted
class cannot inherit from a compiled one). Compiled dataclasses unpickle through their
constructor (``records.pickle_by_fields``). A compiled module checks its type hints when it
runs: a hint that lies is a TypeError there, so a module joins the list only once the whole
suite passes with it compiled.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parent
SRC = ROOT / "src"
BUILD = ROOT / "build" / "native"

MODULES = [
    "dovecote/core/appended_blocks.py",
    "dovecote/core/commands.py",
    "dovecote/core/destinations.py",
    "dovecote/core/ids.py",
    "dovecote/core/message.py",
    "dovecote/core/selector.py",
    "dovecote/core/stream_blocks.py",
    "dovecote/protocol/openwire/ack_frames.py",
    "dovecote/protocol/openwire/bigendian.py",
    "dovecote/protocol/openwire/codec.py",
    "dovecote/protocol/openwire/compiled.py",
    "dovecote/protocol/openwire/converter.py",
    "dovecote/protocol/openwire/dispatch_frames.py",
    "dovecote/protocol/openwire/mutf8.py",
    "dovecote/protocol/openwire/send_frames.py",
    "dovecote/protocol/openwire/straight.py",
    "dovecote/protocol/openwire/structures.py",
    "dovecote/protocol/stomp/converter.py",
    "dovecote/protocol/stomp/frames.py",
    "dovecote/protocol/stomp/headers.py",
    "dovecote/protocol/stomp/message_frames.py",
    "dovecote/protocol/stomp/names.py",
    "dovecote/transport/servers.py",
    "dovecote/transport/settings.py",
    "dovecote/transport/listener.py",
    "dovecote/transport/openwire.py",
    "dovecote/transport/stomp.py",
    "dovecote/transport/stream.py",
    "dovecote/broker/acks.py",
    "dovecote/broker/attach.py",
    "dovecote/broker/broker.py",
    "dovecote/broker/connection.py",
    "dovecote/broker/consumer.py",
    "dovecote/broker/deadletters.py",
    "dovecote/broker/durables.py",
    "dovecote/broker/paging.py",
    "dovecote/broker/queue.py",
    "dovecote/broker/regions.py",
    "dovecote/broker/sequencer.py",
    "dovecote/broker/temps.py",
    "dovecote/broker/topic.py",
    "dovecote/broker/transactions.py",
    "dovecote/broker/usage.py",
    "dovecote/store/groupcommit.py",
    "dovecote/store/messagecodec.py",
    "dovecote/store/ops.py",
    "dovecote/store/journal/adapter.py",
    "dovecote/store/journal/datafiles.py",
    "dovecote/store/journal/index.py",
    "dovecote/store/journal/index_layout.py",
    "dovecote/store/journal/records.py",
]


HIDDEN = "-fvisibility=hidden"
"""The library's own functions and tables are not exported: Python finds each module through
its PyInit_ function (exported whatever this says) and the modules find one another through
a capsule, never through the dynamic linker. Exported, its ~5,200 symbols took ~390 KiB of
symbol tables the loader read at every start (0.45 MiB of an idle broker), ~6,700 references
to them were looked up by name (~450 are left), and each call between the modules went
through the PLT."""


def built(module: str) -> list[Path]:
    """The extension files built for a module's source (none when it runs as Python)."""
    source = SRC / module
    return sorted(source.parent.glob(source.stem + ".cpython-*.so"))


def clean() -> None:
    for path in SRC.rglob("*.so"):
        path.unlink()


def missing_toolchain() -> str | None:
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        return f"no C compiler ({compiler})"
    if not (Path(sysconfig.get_paths()["include"]) / "Python.h").exists():
        return "Python's headers (Python.h) are not installed"
    return None


def main() -> int:
    clean()
    if "--clean" in sys.argv:
        return 0
    why = missing_toolchain()
    if why is not None:
        print(f"build_native: {why}; dovecote runs as plain Python (slower)", file=sys.stderr)
        return 0
    from mypyc.build import mypycify
    from setuptools import setup

    os.chdir(SRC)  # module names follow the paths; --inplace puts each beside its source
    extensions = mypycify(MODULES, target_dir=str(BUILD / "c"), multi_file=True)
    for extension in extensions:
        extension.extra_compile_args.append(HIDDEN)
    setup(
        name="dovecote-native",
        ext_modules=extensions,
        script_args=["--quiet", "build_ext", "--inplace", "--parallel", "2",
                     "--build-temp", str(BUILD / "obj"), "--build-lib", str(BUILD / "lib")],
    )  # fmt: skip
    # setuptools copies an unchanged extension with its old time; the build is from the
    # sources as they are now, which is what test_native.py checks by the times.
    for module in MODULES:
        for path in built(module):
            path.touch()
    return 0


if __name__ == "__main__":
    sys.exit(main())
