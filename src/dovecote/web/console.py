"""The console port, bound at start-up, served from its first connection on.

The admin API (web/admin.py: Starlette, uvicorn and prometheus-client) is a sizeable share
of an idle broker's memory (docs/performance.md), for a port most brokers rarely see
a request on. So the port is bound and listening from the start (connections queue in its backlog,
as they do in any server's), and the admin modules load when the first connection arrives:
in a thread, so that the broker's loop goes on serving messages meanwhile, then uvicorn
accepts on the same socket, the waiting connection first. The first request waits for the
import; the memory stays once it is in use.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import socket
import ssl
from typing import TYPE_CHECKING, Any

from dovecote.web.access import ConsoleAccess

if TYPE_CHECKING:
    from dovecote.broker.broker import Broker
    from dovecote.web.admin import AdminServer

log = logging.getLogger("dovecote.web")


class Console:
    """The console's listening socket; the admin server behind it once somebody calls."""

    def __init__(
        self,
        broker: Broker,
        host: str,
        port: int,
        tls: ssl.SSLContext | None = None,
        access: ConsoleAccess | None = None,
    ) -> None:
        self.broker = broker
        self.host = host
        self.port = port
        self.access = (access or ConsoleAccess()).serving(host)
        """Who may call, from which page (web/access.py); open without users."""
        self.tls = tls
        """HTTPS with this context (the connection waiting at the start is TLS too)."""
        self.admin: AdminServer | None = None
        self._sock: socket.socket | None = None
        self._starting: asyncio.Task[None] | None = None

    async def start(self) -> None:
        sock = socket.create_server((self.host, self.port), reuse_port=False)
        sock.setblocking(False)
        self.port = sock.getsockname()[1]
        self._sock = sock
        asyncio.get_running_loop().add_reader(sock.fileno(), self._called)

    def _called(self) -> None:
        # A connection waits in the backlog: stop watching, start the admin server.
        assert self._sock is not None
        asyncio.get_running_loop().remove_reader(self._sock.fileno())
        self._starting = asyncio.create_task(self._start_admin(self._sock))

    async def _start_admin(self, sock: socket.socket) -> None:
        try:
            module: Any = await asyncio.to_thread(importlib.import_module, "dovecote.web.admin")
            admin: AdminServer = module.AdminServer(
                self.broker, sock, tls=self.tls, access=self.access
            )
            await admin.start()
        except Exception:
            # Without its modules there is no console; say so, and the broker goes on.
            log.exception("the console on port %d cannot start", self.port)
            sock.close()
            return
        self.admin = admin
        log.info("console serving on %s:%d", self.host, self.port)

    async def stop(self) -> None:
        if self._sock is None:
            return
        if self._starting is None:
            asyncio.get_running_loop().remove_reader(self._sock.fileno())
        else:
            await self._starting  # a start under way finishes, then stops
        if self.admin is not None:
            await self.admin.stop()
        self._sock.close()
        self._sock = None
