"""The error taxonomy shared by every layer.

Errors carry data, and who caused them decides their class (h11's split): a peer that broke
a protocol raises a ``RemoteProtocolError``; a request the broker refuses for a reason of
state (unknown subscription, unknown transaction, a full store) is a ``BrokerError``. The
transports map them to a STOMP ERROR frame or an OpenWire ExceptionResponse in one place.
"""

from __future__ import annotations


class DovecoteError(Exception):
    """Base of every error dovecote raises on purpose."""


class ProtocolError(DovecoteError):
    """A protocol rule was broken. ``fatal`` means the connection cannot go on."""

    fatal: bool = True


class RemoteProtocolError(ProtocolError):
    """The peer sent bytes or frames the protocol does not allow."""


class MalformedCommandError(RemoteProtocolError):
    """A command that was framed and parsed but whose content the protocol does not allow
    (an unknown ack type, a missing id): it is answered and the connection goes on, since the
    stream is still in step."""

    fatal = False


def peer_error(exc: Exception, what: str, fatal: bool = True) -> RemoteProtocolError:
    """A failure decoding a peer's bytes that is not one of ours (struct.error, KeyError,
    UnicodeDecodeError...) as the RemoteProtocolError it is, naming ``what`` was read. The
    original's traceback is dropped: it says nothing about the broker."""
    kind = RemoteProtocolError if fatal else MalformedCommandError
    error = kind(f"malformed {what}: {type(exc).__name__}: {exc}")
    error.__suppress_context__ = True
    return error


class UnknownCommandError(RemoteProtocolError):
    """A frame whose command the protocol does not have; ``receipt`` is the receipt it asked
    for, if it could be read (the ERROR answering it carries it)."""

    def __init__(self, message: str, receipt: str | None = None) -> None:
        super().__init__(message)
        self.receipt = receipt


class LocalProtocolError(ProtocolError):
    """Our own side tried to send something the protocol does not allow (a bug or misuse)."""


class FrameTooLargeError(RemoteProtocolError):
    """A frame (or its headers) exceeds the configured maximum size."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"frame of at least {size} bytes exceeds the maximum of {limit} bytes")
        self.size = size
        self.limit = limit


class InvalidSelectorError(DovecoteError):
    """A JMS message selector could not be parsed."""

    def __init__(self, selector: str, reason: str) -> None:
        super().__init__(f"invalid selector {selector!r}: {reason}")
        self.selector = selector
        self.reason = reason


class InvalidDestinationError(DovecoteError):
    """A destination name that dovecote cannot interpret."""


class BrokerError(DovecoteError):
    """The broker refused an operation (unknown id, bad state, a limit reached)."""


class InvalidClientIdError(BrokerError):
    """A connection asked for a client id another connection holds."""


class UnknownSubscriptionError(BrokerError):
    """An ack, nack or unsubscribe named a subscription that does not exist."""


class UnknownTransactionError(BrokerError):
    """A commit, abort, send or ack named a transaction that was never begun."""


class ResourceLimitError(BrokerError):
    """A memory, store or temp limit was reached and the policy is to fail, not wait."""


class SecurityError(BrokerError):
    """Authentication or authorization failed."""


class StoreFailedError(BrokerError):
    """The store could not write (a full disk, an I/O error): the operation was not done,
    nothing written before it is lost, and the broker goes on serving."""
