"""The client's own threads (each connection's reader and keep-alive, failover, listeners),
started so that the application's signals never land on them.

The kernel hands a signal sent to the process to any thread that does not block it, while
Python runs its handlers only in the main thread, at its next instruction: a Ctrl-C landing
on a client thread would wait for the main thread to wake up, which a main thread waiting
for the broker (negotiating, up to 15 s) does only when that wait ends. Started with every
asynchronous signal blocked (a new thread takes its starter's mask), a client thread leaves
them all to the main thread."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import Any

_SYNCHRONOUS = frozenset(
    getattr(signal, name)
    for name in ("SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL", "SIGTRAP", "SIGSYS", "SIGABRT")
    if hasattr(signal, name)
)
"""Raised by the thread that faults, for that thread: never blocked."""


def start_daemon(target: Callable[..., object], name: str, *args: Any) -> threading.Thread:
    """A daemon thread running ``target(*args)``, started with the asynchronous signals
    blocked (where the platform has signal masks)."""
    thread = threading.Thread(target=target, name=name, args=args, daemon=True)
    if not hasattr(signal, "pthread_sigmask"):
        thread.start()
        return thread
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals() - _SYNCHRONOUS)
    try:
        thread.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
    return thread
