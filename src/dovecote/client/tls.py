"""TLS for ``ssl://`` broker URLs: the client's end of ActiveMQ's SslTransport.

The trust store is the system's (and ``SSL_CERT_FILE``, as the JVM's default trust store
and ``javax.net.ssl.trustStore``), or what ``SslConnectionFactory`` is given, named as
ActiveMQSslConnectionFactory names it (PEM files here, not Java keystores). The broker's
certificate must name the host of the URL unless ``verifyHostName=false``.

One SSL object is shared by the reader thread and the senders; OpenSSL does not allow two
threads in it at once, so it runs over memory buffers under a lock, and only the socket's
reads happen outside it.
"""

from __future__ import annotations

import socket
import ssl
import threading

from dovecote.client.connection import ConnectionFactory
from dovecote.client.options import TransportOptions


def client_context(
    verify_host_name: bool = True,
    trust_store: str | None = None,
    key_store: str | None = None,
    key_store_password: str | None = None,
) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=trust_store)
    context.check_hostname = verify_host_name
    if key_store is not None:  # a client certificate (PEM: the certificate and its key)
        context.load_cert_chain(key_store, password=key_store_password)
    return context


class TlsChannel:
    """A TLS session over a connected blocking socket."""

    def __init__(self, sock: socket.socket, options: TransportOptions, host: str) -> None:
        context = options.tls_context or client_context(options.verifyHostName)
        if not options.verifyHostName and context.check_hostname:
            raise ValueError("verifyHostName=false with a context that checks host names")
        self.sock = sock
        self._incoming, self._outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self._tls = context.wrap_bio(self._incoming, self._outgoing, server_hostname=host)
        self._lock = threading.Lock()

    def handshake(self) -> None:
        """Within the socket's timeout (the connect's): a peer that is not TLS fails it."""
        while True:
            try:
                self._tls.do_handshake()
                self._flush()
                return
            except ssl.SSLWantReadError:
                self._flush()
                data = self.sock.recv(65536)
                if not data:
                    raise ConnectionError("closed by the broker in the TLS handshake") from None
                self._incoming.write(data)

    @property
    def version(self) -> str | None:
        return self._tls.version()

    def _flush(self) -> None:
        if pending := self._outgoing.read():
            self.sock.sendall(pending)

    def sendall(self, data: bytes) -> None:
        with self._lock:  # records leave in the order they were sealed
            self._tls.write(data)
            self._flush()

    def recv(self, size: int) -> bytes | None:
        """Application bytes; b"" at the end; None when what came was TLS's own (a ticket)."""
        data = self.sock.recv(size)
        with self._lock:
            if not data:
                self._incoming.write_eof()
            else:
                self._incoming.write(data)
            chunks = []
            try:
                while chunk := self._tls.read(size):
                    chunks.append(chunk)
            except ssl.SSLWantReadError:
                pass
            except ssl.SSLZeroReturnError:
                return b""  # the broker's close_notify
            self._flush()
        if chunks:
            return b"".join(chunks)
        return b"" if not data else None


class SslConnectionFactory(ConnectionFactory):
    """ActiveMQSslConnectionFactory's counterpart: a ConnectionFactory whose ssl:// brokers
    are trusted by ``trust_store`` (a PEM file of CA certificates; None: the system's),
    with a client certificate from ``key_store`` (PEM, certificate and key) when the broker
    asks for one."""

    def __init__(
        self,
        url: str = "ssl://127.0.0.1:61617",
        trust_store: str | None = None,
        key_store: str | None = None,
        key_store_password: str | None = None,
    ) -> None:
        super().__init__(url)
        for member in self.url.members:
            if member.transport.tls:
                member.transport.tls_context = client_context(
                    member.transport.verifyHostName, trust_store, key_store, key_store_password
                )
