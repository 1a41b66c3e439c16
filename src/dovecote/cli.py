"""The ``dovecote`` command: ``dovecote broker`` runs the broker in the foreground."""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from dovecote import __version__
from dovecote.app import BrokerApp
from dovecote.config import ConfigError, load_config
from dovecote.core.errors import DovecoteError

app = typer.Typer(
    help="dovecote: an ActiveMQ-Classic-compatible message broker.",
    no_args_is_help=True,
    add_completion=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"dovecote {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version.")
    ] = False,
) -> None:
    """dovecote: an ActiveMQ-Classic-compatible message broker."""


@app.command()
def broker(
    config: Annotated[
        Path | None,
        typer.Option("--config", "-c", help="TOML configuration file (default: built-in)."),
    ] = None,
    stomp_port: Annotated[
        int | None, typer.Option(help="Override the STOMP port (0 picks a free one).")
    ] = None,
    openwire_port: Annotated[
        int | None, typer.Option(help="Override the OpenWire port (0 picks a free one).")
    ] = None,
    console_port: Annotated[
        int | None, typer.Option(help="Override the admin/console port (0 picks a free one).")
    ] = None,
    log_level: Annotated[str, typer.Option(help="debug, info, warning or error.")] = "info",
) -> None:
    """Run the broker in the foreground until Ctrl-C or SIGTERM."""
    logging.basicConfig(
        level=log_level.upper(),
        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        cfg = load_config(config)
    except ConfigError as exc:
        typer.echo(f"dovecote: {exc}", err=True)
        raise typer.Exit(2) from None
    if stomp_port is not None:
        cfg = cfg.model_copy(update={"stomp": cfg.stomp.model_copy(update={"port": stomp_port})})
    if openwire_port is not None:
        cfg = cfg.model_copy(
            update={"openwire": cfg.openwire.model_copy(update={"port": openwire_port})}
        )
    if console_port is not None:
        cfg = cfg.model_copy(
            update={"console": cfg.console.model_copy(update={"port": console_port})}
        )
    try:
        import uvloop

        uvloop.install()
    except ImportError:  # uvloop is optional where it does not build
        pass
    try:
        asyncio.run(_serve(BrokerApp(cfg)))
    except OSError as exc:
        typer.echo(f"dovecote: cannot start the broker: {exc}", err=True)
        raise typer.Exit(1) from None


async def _serve(broker_app: BrokerApp) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await broker_app.start()
    # What start-up made (modules, config, the store's index) lives as long as the process:
    # out of the collector's sight, every full collection under load no longer walks it
    # (measured: 3-4% of the broker's CPU with a topic fan-out).
    gc.freeze()
    # A line tests and scripts can wait for.
    listeners = []
    if broker_app.stomp is not None:
        listeners.append(f"stomp={broker_app.config.stomp.host}:{broker_app.stomp.port}")
    if broker_app.openwire is not None:
        listeners.append(f"openwire={broker_app.config.openwire.host}:{broker_app.openwire.port}")
    if broker_app.auto is not None:
        listeners.append(f"auto={broker_app.config.auto.host}:{broker_app.auto.port}")
    if broker_app.console is not None:
        listeners.append(f"console={broker_app.config.console.host}:{broker_app.console.port}")
    print("dovecote ready: " + " ".join(listeners), flush=True)
    try:
        await stop.wait()
    finally:
        await broker_app.stop()


URL_OPTION = typer.Option("--url", "-u", help="Broker URL (dovecote or ActiveMQ).")


@app.command()
def produce(
    destination: Annotated[str, typer.Argument(help="queue://NAME, topic://NAME or NAME.")],
    url: Annotated[str, URL_OPTION] = "tcp://127.0.0.1:61616",
    count: Annotated[int, typer.Option(help="Messages to send.")] = 1000,
    size: Annotated[int, typer.Option(help="Body size in bytes.")] = 1024,
    persistent: Annotated[bool, typer.Option(help="Persistent messages.")] = True,
) -> None:
    """Send COUNT text messages of SIZE bytes."""
    typer.echo(_tool("produce", url, destination, count, size, persistent))


@app.command()
def consume(
    destination: Annotated[str, typer.Argument(help="queue://NAME, topic://NAME or NAME.")],
    url: Annotated[str, URL_OPTION] = "tcp://127.0.0.1:61616",
    count: Annotated[int, typer.Option(help="Stop after this many messages.")] = 1000,
    timeout: Annotated[float, typer.Option(help="Stop after this many idle seconds.")] = 10.0,
) -> None:
    """Receive up to COUNT messages."""
    typer.echo(_tool("consume", url, destination, count, timeout))


@app.command()
def browse(
    destination: Annotated[str, typer.Argument(help="queue://NAME or NAME.")],
    url: Annotated[str, URL_OPTION] = "tcp://127.0.0.1:61616",
    limit: Annotated[int, typer.Option(help="Messages to print.")] = 20,
) -> None:
    """Show the messages on a queue without consuming them."""
    lines, summary = _tool("browse", url, destination, limit)
    for line in lines:
        typer.echo(line)
    typer.echo(summary)


ADMIN_OPTION = typer.Option(
    "--admin", "-a", help="dovecote's admin API, e.g. http://127.0.0.1:8161 (else over --url)."
)


@app.command()
def purge(
    destination: Annotated[str, typer.Argument(help="queue://NAME or NAME.")],
    url: Annotated[str, URL_OPTION] = "tcp://127.0.0.1:61616",
    admin: Annotated[str | None, ADMIN_OPTION] = None,
) -> None:
    """Remove every message from a queue."""
    typer.echo(_tool("purge", url, destination, admin))


@app.command()
def dstat(
    kind: Annotated[str, typer.Argument(help="all, queue or topic.")] = "all",
    url: Annotated[str, URL_OPTION] = "tcp://127.0.0.1:61616",
    admin: Annotated[str | None, ADMIN_OPTION] = None,
    interval: Annotated[
        float, typer.Option(help="Seconds between two samples, to show rates (0: one sample).")
    ] = 0.0,
) -> None:
    """Destination statistics: sizes, producers, consumers, enqueues, dequeues."""
    for line in _tool("dstat", url, admin, kind, interval):
        typer.echo(line)


def _tool(name: str, *args: object) -> Any:
    # The client and rich load only for the tools, not in the broker process.
    from dovecote import tools
    from dovecote.client import JMSError, OptionError

    try:
        return getattr(tools, name)(*args)
    except (OptionError, DovecoteError, JMSError, OSError) as exc:
        typer.echo(f"dovecote: {exc}", err=True)
        raise typer.Exit(1) from None


def main() -> None:
    app()
