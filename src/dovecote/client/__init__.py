"""dovecote's Python client: ActiveMQ's client semantics over OpenWire (compatibility K1)."""

from dovecote.client.connection import (
    AckMode,
    Connection,
    ConnectionFactory,
    Message,
    MessageConsumer,
    MessageProducer,
    Session,
)
from dovecote.client.message import JavaByte, JavaChar, JavaFloat, JavaInt, JavaShort
from dovecote.client.options import OptionError, parse_broker_url
from dovecote.client.transport import JMSError, TransactionRolledBackException

__all__ = [
    "AckMode",
    "Connection",
    "ConnectionFactory",
    "JMSError",
    "JavaByte",
    "JavaChar",
    "JavaFloat",
    "JavaInt",
    "JavaShort",
    "Message",
    "MessageConsumer",
    "MessageProducer",
    "OptionError",
    "Session",
    "TransactionRolledBackException",
    "parse_broker_url",
]
