"""TLS on the broker's listeners (ssl://, stomp+ssl://, auto+ssl://, the console's HTTPS):
the server's SSL context made from PEM files, and a verified client certificate's subject
as text.

ActiveMQ's ssl transport takes a Java key store and trust store; here the certificate
chain, its key and the CA certificates that client certificates must chain to are PEM
files (what ``openssl`` writes). ``client_auth`` is ActiveMQ's pair of transport options:
"want" (wantClientAuth) asks for a client certificate and verifies one that comes, "need"
(needClientAuth) refuses a client without one.
"""

from __future__ import annotations

import logging
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

ClientAuth = Literal["none", "want", "need"]

_VERIFY_MODES: dict[str, ssl.VerifyMode] = {
    "none": ssl.CERT_NONE,
    "want": ssl.CERT_OPTIONAL,
    "need": ssl.CERT_REQUIRED,
}


class TlsSetupError(OSError):
    """The certificate, key or CA file cannot be used; the message names the file."""


@dataclass(frozen=True, slots=True)
class TlsFiles:
    """Where the broker's certificate, its key and the client certificates' CAs are."""

    certificate_file: Path
    key_file: Path | None = None
    """None: the key is in certificate_file, after the certificates."""
    key_password: str | None = None
    ca_file: Path | None = None
    client_auth: ClientAuth = "none"


def server_context(files: TlsFiles, client_auth: bool = True) -> ssl.SSLContext:
    """A server-side context: TLS 1.2 or later, the broker's certificate chain, and client
    certificates asked for as ``files.client_auth`` says (never with ``client_auth=False``:
    the console's users sign in with their passwords). Raises TlsSetupError."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(files.certificate_file, files.key_file, files.key_password)
    except (OSError, ValueError) as exc:
        key = f" with key {files.key_file}" if files.key_file is not None else ""
        raise TlsSetupError(
            f"cannot use TLS certificate {files.certificate_file}{key}: {_reason(exc)}"
        ) from None
    if client_auth and files.client_auth != "none":
        context.verify_mode = _VERIFY_MODES[files.client_auth]
        try:
            if files.ca_file is not None:
                context.load_verify_locations(cafile=files.ca_file)
            else:
                context.load_default_certs(ssl.Purpose.CLIENT_AUTH)
        except (OSError, ValueError) as exc:
            raise TlsSetupError(f"cannot use TLS CA file {files.ca_file}: {_reason(exc)}") from None
    return context


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLError):
        return exc.reason or str(exc)
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc)


def handshake_failure(exc: BaseException) -> str:
    """Why a TLS handshake failed, in a few words for the log line."""
    if isinstance(exc, ssl.SSLEOFError):
        return "closed by the client"
    if isinstance(exc, ssl.SSLError) and exc.reason:
        # What a plain-text client's first bytes look like to OpenSSL.
        if exc.reason in ("WRONG_VERSION_NUMBER", "HTTP_REQUEST", "HTTPS_PROXY_REQUEST"):
            return f"not TLS ({exc.reason})"
        return exc.reason
    if isinstance(exc, ConnectionAbortedError | TimeoutError):
        # asyncio's ssl_handshake_timeout (the one ConnectionAbortedError it raises here).
        return "no handshake within the timeout"
    if isinstance(exc, ConnectionResetError | BrokenPipeError):
        return "closed by the client"
    return str(exc) or type(exc).__name__


def handshake_failure_level(exc: BaseException) -> int:
    """INFO for a client that went silent or away (as for a plain listener's silent
    socket); WARNING for one that spoke something else, or whose certificate was refused."""
    if isinstance(exc, ssl.SSLEOFError) or not isinstance(exc, ssl.SSLError):
        return logging.INFO
    return logging.WARNING


# getpeercert()'s attribute names, as RFC 4514 (and Java's X500Principal) spell them.
_SHORT_NAMES = {
    "commonName": "CN",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}


def certificate_subject(peercert: Any) -> str | None:
    """A verified certificate's subject (what ``getpeercert()`` returns) as RFC 4514 text,
    most specific part first: "CN=alice,O=dovecote" for a certificate made with
    ``-subj /O=dovecote/CN=alice``, as Java's X500Principal.getName() writes it. None
    without a certificate."""
    if not isinstance(peercert, dict):
        return None
    subject = peercert.get("subject")
    if not subject:
        return None
    rdns = [
        "+".join(f"{_SHORT_NAMES.get(name, name)}={_escape(value)}" for name, value in rdn)
        for rdn in subject
    ]
    return ",".join(reversed(rdns))


def _escape(value: str) -> str:
    """RFC 4514 section 2.4: the characters that would end or change an attribute."""
    out = []
    for i, char in enumerate(value):
        special = char in ',+"\\<>;' or (i == 0 and char in "# ")
        if special or (i == len(value) - 1 and char == " "):
            out.append("\\" + char)
        elif char == "\0":
            out.append("\\00")
        else:
            out.append(char)
    return "".join(out)
