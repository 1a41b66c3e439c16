"""The [logging] table: the level of every logger or of some, plain lines or JSON lines, to
stderr or to a file that rotates; applied with the standard library's
``logging.config.dictConfig``. Without the table the broker logs as it always has: plain
lines on stderr at the level of ``--log-level`` (info).

Example::

    [logging]
    level = "info"
    format = "json"                 # one JSON object per line
    file = "log/dovecote.log"       # rotated at max_bytes, backup_count files kept
    max_bytes = 10485760
    backup_count = 5

    [logging.levels]
    "dovecote.store" = "debug"
    "dovecote.network" = "warning"
"""

from __future__ import annotations

import datetime as dt
import logging
import sys
from pathlib import Path
from typing import Any, Literal

from msgspec import field

from dovecote.config.base import NonNegative, Section

Level = Literal["debug", "info", "warning", "error", "critical"]
PLAIN_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"


class LoggingSection(Section, frozen=True):
    level: Level = "info"
    """The root logger's level: what every logger not in ``levels`` passes on
    (``dovecote broker --log-level`` overrides it)."""
    levels: dict[str, Level] = field(default_factory=dict)
    """Levels of particular loggers and those below them, e.g. {"dovecote.store" = "debug"}."""
    format: Literal["plain", "json"] = "plain"
    """plain: "time level logger: message" lines; json: one object per line with time,
    level, logger and message (and exception, when there is one)."""
    file: Path | None = None
    """Write here instead of stderr (relative paths are relative to the working directory);
    the file rotates at max_bytes."""
    max_bytes: NonNegative = 10 * 1024 * 1024
    """With a file: once it is this large it becomes file.1 (file.1 becomes file.2, ...);
    0: it never rotates."""
    backup_count: NonNegative = 5
    """With a file: how many rotated files are kept."""
    stderr: bool | None = None
    """Log to stderr too; unset: only when there is no file."""


class JsonLines(logging.Formatter):
    """A record as one line of JSON: time (ISO 8601, UTC), level, logger, message, and
    exception with its traceback when the record has one."""

    def format(self, record: logging.LogRecord) -> str:
        import json  # here: plain lines, the default, do without it (idle memory)

        line: dict[str, Any] = {
            "time": self.formatTime(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        moment = dt.datetime.fromtimestamp(record.created, dt.UTC)
        return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def logging_dict(section: LoggingSection, level: str | None = None) -> dict[str, Any]:
    """The dictConfig for ``section``; ``level`` (the command line's) wins over its own."""
    formatter: dict[str, Any] = (
        {"()": JsonLines} if section.format == "json" else {"format": PLAIN_FORMAT}
    )
    handlers: dict[str, Any] = {}
    if section.file is not None:
        handlers["file"] = {
            "class": "logging.handlers.RotatingFileHandler",
            "filename": str(section.file),
            "maxBytes": section.max_bytes,
            "backupCount": section.backup_count,
            "encoding": "utf-8",
            "formatter": "lines",
        }
    if section.stderr or (section.stderr is None and section.file is None):
        handlers["stderr"] = {
            "class": "logging.StreamHandler",
            "stream": "ext://sys.stderr",
            "formatter": "lines",
        }
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"lines": formatter},
        "handlers": handlers,
        "root": {"level": (level or section.level).upper(), "handlers": list(handlers)},
        "loggers": {name: {"level": value.upper()} for name, value in section.levels.items()},
    }


def apply_logging(section: LoggingSection, level: str | None = None) -> None:
    """Configure the standard library's logging from ``section`` (OSError: the file cannot
    be opened)."""
    if section.file is None and section.format == "plain" and not section.levels:
        # Plain lines on stderr, as most brokers log, set up as dictConfig would: its modules
        # (logging.config, logging.handlers, socketserver, pickle) stay out of an idle broker.
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(PLAIN_FORMAT))
        root = logging.getLogger()
        for old in root.handlers[:]:
            root.removeHandler(old)
            old.close()
        root.addHandler(handler)
        root.setLevel((level or section.level).upper())
        return
    from logging import config as logging_config

    if section.file is not None:
        section.file.parent.mkdir(parents=True, exist_ok=True)
    try:
        logging_config.dictConfig(logging_dict(section, level))
    except ValueError as exc:  # dictConfig wraps the handler's own error
        cause = exc.__cause__
        if isinstance(cause, OSError):
            raise cause from None
        raise
