"""The ``dovecote`` command: ``dovecote broker`` runs the broker in the foreground; the other
commands are client tools (produce, consume, browse, purge, dstat).

argparse rather than typer: typer validates its options through pydantic, which the broker
process would carry for as long as it runs; argparse comes with Python and costs nothing
further (figures: docs/performance.md).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import logging
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dovecote import __version__, allocator
from dovecote.config import ConfigError, load_config, with_ports
from dovecote.config.logging import apply_logging
from dovecote.core.errors import DovecoteError

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from dovecote.app import BrokerApp

DEFAULT_URL = "tcp://127.0.0.1:61616"
YOUNG_COLLECTION_THRESHOLD = 20_000
MMAP_THRESHOLD = 8 << 20
"""glibc's malloc: allocations smaller than this come from the heap, not a mapping of their
own (see tune_allocator)."""
TRIM_THRESHOLD = 16 << 20
"""glibc's malloc: how much free memory at the heap's top it keeps rather than giving back."""


class CommandError(Exception):
    """A command failed in a way the user can act on; ``exit_code`` is the process's."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def broker(args: argparse.Namespace) -> None:
    """Run the broker in the foreground until Ctrl-C or SIGTERM."""
    try:
        cfg = load_config(args.config)
    except ConfigError as exc:
        raise CommandError(str(exc), 2) from None
    try:
        apply_logging(cfg.logging, args.log_level)
    except OSError as exc:
        raise CommandError(f"cannot open the log file {exc.filename}: {exc.strerror}", 2) from None
    cfg = with_ports(
        cfg, stomp=args.stomp_port, openwire=args.openwire_port, console=args.console_port
    )
    from dovecote.app import BrokerApp  # the broker's modules: not for the client tools

    try:
        import uvloop

        uvloop.install()
    except ImportError:  # uvloop is optional where it does not build
        pass
    try:
        broker_app = BrokerApp(cfg)
    except ConfigError as exc:
        raise CommandError(str(exc), 2) from None
    except OSError as exc:  # e.g. TLS files that cannot be read
        raise CommandError(f"cannot start the broker: {exc}", 2) from None
    try:
        asyncio.run(_serve(broker_app))
    except OSError as exc:
        raise CommandError(f"cannot start the broker: {exc}", 1) from None


async def _serve(broker_app: BrokerApp) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    # A slave waits in start() for the store's lock, as long as the master lives: a signal
    # must end that wait too.
    starting = asyncio.ensure_future(broker_app.start())
    stopping = asyncio.ensure_future(stop.wait())
    await asyncio.wait((starting, stopping), return_when=asyncio.FIRST_COMPLETED)
    stopping.cancel()
    if not starting.done():
        starting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await starting
        await broker_app.stop()
        return
    starting.result()  # a start that failed raises here
    tune_collector()
    tune_allocator()
    returning = None
    if broker_app.config.usage.return_free_memory_after_ms and allocator.can_trim():
        after_s = broker_app.config.usage.return_free_memory_after_ms / 1000
        returning = asyncio.ensure_future(return_free_memory(broker_app, after_s))
    # A line tests and scripts can wait for.
    listeners = []
    if broker_app.stomp is not None:
        listeners.append(f"stomp={broker_app.config.stomp.host}:{broker_app.stomp.port}")
    if broker_app.openwire is not None:
        listeners.append(f"openwire={broker_app.config.openwire.host}:{broker_app.openwire.port}")
    if broker_app.ssl is not None:
        listeners.append(f"ssl={broker_app.config.ssl.host}:{broker_app.ssl.port}")
    if broker_app.stomp_ssl is not None:
        listeners.append(
            f"stomp_ssl={broker_app.config.stomp_ssl.host}:{broker_app.stomp_ssl.port}"
        )
    if broker_app.auto is not None:
        listeners.append(f"auto={broker_app.config.auto.host}:{broker_app.auto.port}")
    if broker_app.console is not None:
        listeners.append(f"console={broker_app.config.console.host}:{broker_app.console.port}")
    print("dovecote ready: " + " ".join(listeners), flush=True)
    try:
        await stop.wait()
    finally:
        if returning is not None:
            returning.cancel()
        await broker_app.stop()


def tune_collector() -> None:
    """Once the broker has started. What start-up made (modules, config, the store's index)
    lives as long as the process: frozen, out of the collector's sight, a full collection
    under load no longer walks it (until a large commit moves it and its own survivors to the
    oldest generation: core/collector.py). And a message's objects die by reference counting as
    soon as it is delivered, yet every 700 allocations (the default) still set off a young
    collection; at YOUNG_COLLECTION_THRESHOLD they rarely do. Cycles are rare on the message
    path: garbage waits no longer to speak of (figures: docs/performance.md)."""
    gc.freeze()
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, *gc.get_threshold()[1:])


async def return_free_memory(broker_app: BrokerApp, after_s: float) -> None:
    """As the broker runs: memory left free for ``after_s`` goes back to the system
    (allocator.FreeMemoryReturn), checked a few times in that span."""

    def messages_held() -> int:  # (the broker of the moment: a demoted one is rebuilt)
        return broker_app.broker.query.usage().memory_used

    giver = allocator.FreeMemoryReturn(after_s, messages_held)
    while True:
        await asyncio.sleep(min(after_s / 3, 5.0))
        returned = giver.check(time.monotonic())
        if returned:
            log.debug("gave %d MiB of free memory back to the system", returned >> 20)


def tune_allocator() -> None:
    """Once the broker has started: stream blocks, and the frames around them, reuse freed
    memory (dovecote.allocator; figures: docs/performance.md)."""
    allocator.tune_allocator(MMAP_THRESHOLD, TRIM_THRESHOLD)


def produce(args: argparse.Namespace) -> None:
    """Send COUNT messages: a body given, a file's content, or SIZE characters."""
    from dovecote.tools import body_of

    try:
        body = body_of(args.body, args.file, args.size)
    except OSError as exc:
        raise CommandError(f"cannot read {args.file}: {exc.strerror}", 1) from None
    _tool("produce", args.url, args.destination, args.count, args.persistent, body,
          args.header, args.property)  # fmt: skip


def consume(args: argparse.Namespace) -> None:
    """Receive up to COUNT messages."""
    _tool("consume", args.url, args.destination, args.count, args.timeout)


def browse(args: argparse.Namespace) -> None:
    """Show the first messages on a queue without consuming them."""
    _tool("browse", args.url, args.destination, args.limit)


def purge(args: argparse.Namespace) -> None:
    """Remove every message from a queue."""
    _tool("purge", args.url, args.destination, args.admin)


def dstat(args: argparse.Namespace) -> None:
    """Destination statistics: sizes, producers, consumers, enqueues, dequeues."""
    _tool("dstat", args.url, args.admin, args.kind, args.interval)


def passwd(args: argparse.Namespace) -> None:
    """Print a password hash for a [[security.users]] entry (asks for the password)."""
    if args.stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        import getpass

        password = getpass.getpass("Password: ")
        if getpass.getpass("Again: ") != password:
            raise CommandError("the passwords differ", 1)
    if not password:
        raise CommandError("an empty password", 1)
    from dovecote.broker.security.users import hash_password

    print(hash_password(password))


def import_config(args: argparse.Namespace) -> None:
    """Turn an ActiveMQ 5.x activemq.xml into a commented dovecote.toml (docs/migration.md)."""
    from dovecote.migrate import MigrationError, run

    try:
        run(args.activemq_xml, args.output)
    except MigrationError as exc:
        raise CommandError(str(exc), 2) from None


def _tool(name: str, *args: object) -> None:
    """Run a client tool: its table on stdout, then its summary line; after Ctrl-C the
    summary says so and the exit code is 130, as for a shell command interrupted."""
    # The client and rich load only for the tools, not in the broker process.
    from rich.console import Console

    from dovecote import tools
    from dovecote.client import JMSError, OptionError

    try:
        outcome = getattr(tools, name)(*args)
    except (OptionError, DovecoteError, JMSError, OSError) as exc:
        raise CommandError(str(exc), 1) from None
    if outcome.table is not None:
        # Without a terminal, as wide as the table is (not 80 columns), for scripts.
        Console(width=None if sys.stdout.isatty() else 10_000).print(outcome.table)
    print(outcome.summary, flush=True)
    if outcome.interrupted:
        sys.exit(INTERRUPTED)


INTERRUPTED = 130
"""The exit code of a command ended by Ctrl-C (128 + SIGINT), as shells report it."""


def _count(text: str) -> int:
    """A whole number, 0 or more (argparse names the option when it is not)."""
    value = int(text)
    if value < 0:
        raise ValueError(text)
    return value


_count.__name__ = "count"  # argparse says "invalid count value: '-1'"


class _Sized(argparse.HelpFormatter):
    """argparse's formatter, told the width: by itself each formatter (one per option added)
    asks shutil for the terminal's, and shutil brings its archivers (bz2, lzma), about
    0.4 MiB a broker would carry idle (docs/performance.md)."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=_columns() - 2)  # (argparse's own margin)


def _columns() -> int:
    """As shutil.get_terminal_size: COLUMNS, else the terminal's, else 80."""
    with contextlib.suppress(KeyError, ValueError):
        if (columns := int(os.environ["COLUMNS"])) > 0:
            return columns
    with contextlib.suppress(AttributeError, ValueError, OSError):
        if sys.__stdout__ is not None:
            return os.get_terminal_size(sys.__stdout__.fileno()).columns
    return 80


class _ShowDefaults(_Sized, argparse.ArgumentDefaultsHelpFormatter):
    """--help gives each option's default where it has one (not None, [] or a flag's off)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default in (None, []) or isinstance(action, argparse._StoreTrueAction):
            return action.help
        return super()._get_help_string(action)


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="dovecote",
        description="dovecote: an ActiveMQ-Classic-compatible message broker.",
        formatter_class=_Sized,
    )
    top.add_argument("--version", action="version", version=f"dovecote {__version__}")
    commands = top.add_subparsers(title="commands", metavar="COMMAND", required=True)

    def command(run: Any) -> argparse.ArgumentParser:
        doc = run.__doc__.strip()
        sub = commands.add_parser(
            run.__name__.replace("_", "-"),
            help=doc,
            description=doc,
            formatter_class=_ShowDefaults,
        )
        sub.set_defaults(run=run)
        return sub

    def url(sub: argparse.ArgumentParser) -> None:
        sub.add_argument(
            "--url", "-u", default=DEFAULT_URL, help="Broker URL (dovecote or ActiveMQ)."
        )

    def admin(sub: argparse.ArgumentParser) -> None:
        sub.add_argument(
            "--admin",
            "-a",
            help="dovecote's admin API, e.g. http://127.0.0.1:8161 (else over --url).",
        )

    sub = command(broker)
    sub.add_argument(
        "--config", "-c", type=Path, help="TOML configuration file (default: built-in)."
    )
    for name, what in (("stomp", "STOMP"), ("openwire", "OpenWire"), ("console", "admin/console")):
        sub.add_argument(
            f"--{name}-port", type=int, help=f"Override the {what} port (0 picks a free one)."
        )
    sub.add_argument(
        "--log-level",
        type=str.lower,
        choices=("debug", "info", "warning", "error"),
        help="debug, info, warning or error (default: [logging] level, else info).",
    )

    sub = command(passwd)
    sub.add_argument("--stdin", action="store_true", help="Read the password from a line of stdin.")

    sub = command(import_config)
    sub.add_argument("activemq_xml", type=Path, help="ActiveMQ's activemq.xml.")
    sub.add_argument("--output", "-o", type=Path, help="The TOML to write (default: stdout).")

    sub = command(produce)
    sub.add_argument("destination", help="queue://NAME, topic://NAME or NAME.")
    url(sub)
    sub.add_argument("--count", type=_count, default=1000, help="Messages to send.")
    body = sub.add_mutually_exclusive_group()
    body.add_argument("--body", "-b", help="The body of every message (text).")
    body.add_argument(
        "--file",
        "-f",
        type=Path,
        help="Send this file's content (text when it is UTF-8, else a bytes message).",
    )
    body.add_argument(
        "--size", type=_count, default=1024, help="Without --body or --file: body size in bytes."
    )
    sub.add_argument(
        "--header",
        "-H",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="A JMS header: correlation-id, type, reply-to, priority, time-to-live (ms) or "
        "group-id (JMS names too: JMSCorrelationID, ...). Repeat for more.",
    )
    sub.add_argument(
        "--property",
        "-P",
        action="append",
        default=[],
        metavar="NAME[:TYPE]=VALUE",
        help="A message property; TYPE string (default), int, long, double or bool. "
        "Repeat for more. Each message also has seq = its number from 0.",
    )
    sub.add_argument(
        "--persistent",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="Persistent messages.",
    )

    sub = command(consume)
    sub.add_argument("destination", help="queue://NAME, topic://NAME or NAME.")
    url(sub)
    sub.add_argument("--count", type=_count, default=1000, help="Stop after this many messages.")
    sub.add_argument(
        "--timeout", type=float, default=10.0, help="Stop after this many idle seconds."
    )

    sub = command(browse)
    sub.add_argument("destination", help="queue://NAME or NAME.")
    url(sub)
    sub.add_argument(
        "--limit", type=_count, default=20, help="Messages to show and read (0: all of them)."
    )

    sub = command(purge)
    sub.add_argument("destination", help="queue://NAME or NAME.")
    url(sub)
    admin(sub)

    sub = command(dstat)
    sub.add_argument("kind", nargs="?", default="all", help="all, queue or topic.")
    url(sub)
    admin(sub)
    sub.add_argument(
        "--interval",
        type=float,
        default=0.0,
        help="Seconds between two samples, to show rates (0: one sample).",
    )
    return top


def main(argv: Sequence[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:  # no command: say what there is
        parser().print_help()
        return
    args = parser().parse_args(argv)
    try:
        args.run(args)
    except CommandError as exc:
        print(f"dovecote: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:  # Ctrl-C where a tool does not count (connecting), or twice
        print(f"dovecote {args.run.__name__}: interrupted", file=sys.stderr)
        sys.exit(INTERRUPTED)
