"""OpenWire v12's data structures as field tables, in loose marshalling order.

Facts from ActiveMQ 5.17's generated v12 marshallers (see shared/reference/openwire.md,
sections 3 and 4) and the ``@openwire:property version=N`` tags of its command classes; the
tables are ours. Versions 9 to 12 differ, for what a JMS client uses, only in three fields
that version 10 added (tagged below with their version); v11 and v12 added fields of
structures only broker networks use. Every structure whose code is in ``COMMANDS`` begins
with ``commandId`` (int) and ``responseRequired`` (bool) before the fields listed here.

Field kinds: bool, byte, short, int, long, string (nullable Java UTF), bytes (nullable int32
length + bytes), magic (8 fixed bytes), nested and cached (a nullable structure with its type
byte; the same on the wire while the marshal cache is off, which dovecote negotiates), array
(nullable int16 count of nested structures), throwable.
"""

from __future__ import annotations

from typing import Final

Field = tuple[str, str] | tuple[str, str, int]
"""(name, kind) or (name, kind, the protocol version that added the field)."""

WIRE_FORMAT_INFO: Final = 1
BROKER_INFO: Final = 2
CONNECTION_INFO: Final = 3
SESSION_INFO: Final = 4
CONSUMER_INFO: Final = 5
PRODUCER_INFO: Final = 6
TRANSACTION_INFO: Final = 7
DESTINATION_INFO: Final = 8
REMOVE_SUBSCRIPTION_INFO: Final = 9
KEEP_ALIVE_INFO: Final = 10
SHUTDOWN_INFO: Final = 11
REMOVE_INFO: Final = 12
CONTROL_COMMAND: Final = 14
FLUSH_COMMAND: Final = 15
CONNECTION_ERROR: Final = 16
CONSUMER_CONTROL: Final = 17
CONNECTION_CONTROL: Final = 18
PRODUCER_ACK: Final = 19
MESSAGE_PULL: Final = 20
MESSAGE_DISPATCH: Final = 21
MESSAGE_ACK: Final = 22
MESSAGE: Final = 23
BYTES_MESSAGE: Final = 24
MAP_MESSAGE: Final = 25
OBJECT_MESSAGE: Final = 26
STREAM_MESSAGE: Final = 27
TEXT_MESSAGE: Final = 28
BLOB_MESSAGE: Final = 29
RESPONSE: Final = 30
EXCEPTION_RESPONSE: Final = 31
DATA_RESPONSE: Final = 32
DATA_ARRAY_RESPONSE: Final = 33
INTEGER_RESPONSE: Final = 34
MESSAGE_DISPATCH_NOTIFICATION: Final = 90
BROKER_SUBSCRIPTION_INFO: Final = 92
QUEUE: Final = 100
TOPIC: Final = 101
TEMP_QUEUE: Final = 102
TEMP_TOPIC: Final = 103
MESSAGE_ID: Final = 110
LOCAL_TRANSACTION_ID: Final = 111
XA_TRANSACTION_ID: Final = 112
CONNECTION_ID: Final = 120
SESSION_ID: Final = 121
CONSUMER_ID: Final = 122
PRODUCER_ID: Final = 123
BROKER_ID: Final = 124

MESSAGE_TYPES: Final = frozenset(range(MESSAGE, BLOB_MESSAGE + 1))
DESTINATION_TYPES: Final = frozenset({QUEUE, TOPIC, TEMP_QUEUE, TEMP_TOPIC})

_MESSAGE_FIELDS: Final[tuple[Field, ...]] = (
    ("producerId", "cached"), ("destination", "cached"), ("transactionId", "cached"),
    ("originalDestination", "cached"), ("messageId", "nested"),
    ("originalTransactionId", "cached"), ("groupID", "string"), ("groupSequence", "int"),
    ("correlationId", "string"), ("persistent", "bool"), ("expiration", "long"),
    ("priority", "byte"), ("replyTo", "nested"), ("timestamp", "long"), ("type", "string"),
    ("content", "bytes"), ("marshalledProperties", "bytes"), ("dataStructure", "nested"),
    ("targetConsumerId", "cached"), ("compressed", "bool"), ("redeliveryCounter", "int"),
    ("brokerPath", "array"), ("arrival", "long"), ("userID", "string"),
    ("recievedByDFBridge", "bool"), ("droppable", "bool"), ("cluster", "array"),
    ("brokerInTime", "long"), ("brokerOutTime", "long"), ("jMSXGroupFirstForConsumer", "bool", 10),
)  # fmt: skip

SCHEMAS: Final[dict[int, tuple[Field, ...]]] = {
    WIRE_FORMAT_INFO: (("magic", "magic"), ("version", "int"), ("marshalledProperties", "bytes")),
    BROKER_INFO: (
        ("brokerId", "cached"), ("brokerURL", "string"), ("peerBrokerInfos", "array"),
        ("brokerName", "string"), ("slaveBroker", "bool"), ("masterBroker", "bool"),
        ("faultTolerantConfiguration", "bool"), ("duplexConnection", "bool"),
        ("networkConnection", "bool"), ("connectionId", "long"), ("brokerUploadUrl", "string"),
        ("networkProperties", "string"),
    ),
    CONNECTION_INFO: (
        ("connectionId", "cached"), ("clientId", "string"), ("password", "string"),
        ("userName", "string"), ("brokerPath", "array"), ("brokerMasterConnector", "bool"),
        ("manageable", "bool"), ("clientMaster", "bool"), ("faultTolerant", "bool"),
        ("failoverReconnect", "bool"), ("clientIp", "string"),
    ),
    SESSION_INFO: (("sessionId", "cached"),),
    CONSUMER_INFO: (
        ("consumerId", "cached"), ("browser", "bool"), ("destination", "cached"),
        ("prefetchSize", "int"), ("maximumPendingMessageLimit", "int"),
        ("dispatchAsync", "bool"), ("selector", "string"), ("clientId", "string", 10),
        ("subscriptionName", "string"), ("noLocal", "bool"), ("exclusive", "bool"),
        ("retroactive", "bool"), ("priority", "byte"), ("brokerPath", "array"),
        ("additionalPredicate", "nested"), ("networkSubscription", "bool"),
        ("optimizedAcknowledge", "bool"), ("noRangeAcks", "bool"),
        ("networkConsumerPath", "array"),
    ),
    PRODUCER_INFO: (
        ("producerId", "cached"), ("destination", "cached"), ("brokerPath", "array"),
        ("dispatchAsync", "bool"), ("windowSize", "int"),
    ),
    TRANSACTION_INFO: (("connectionId", "cached"), ("transactionId", "cached"), ("type", "byte")),
    DESTINATION_INFO: (
        ("connectionId", "cached"), ("destination", "cached"), ("operationType", "byte"),
        ("timeout", "long"), ("brokerPath", "array"),
    ),
    REMOVE_SUBSCRIPTION_INFO: (
        ("connectionId", "cached"), ("subcriptionName", "string"), ("clientId", "string"),
    ),
    KEEP_ALIVE_INFO: (),
    SHUTDOWN_INFO: (),
    REMOVE_INFO: (("objectId", "cached"), ("lastDeliveredSequenceId", "long")),
    CONTROL_COMMAND: (("command", "string"),),
    FLUSH_COMMAND: (),
    CONNECTION_ERROR: (("exception", "throwable"), ("connectionId", "nested")),
    CONSUMER_CONTROL: (
        ("destination", "nested"), ("close", "bool"), ("consumerId", "nested"),
        ("prefetch", "int"), ("flush", "bool"), ("start", "bool"), ("stop", "bool"),
    ),
    CONNECTION_CONTROL: (
        ("close", "bool"), ("exit", "bool"), ("faultTolerant", "bool"), ("resume", "bool"),
        ("suspend", "bool"), ("connectedBrokers", "string"), ("reconnectTo", "string"),
        ("rebalanceConnection", "bool"), ("token", "bytes"),
    ),
    PRODUCER_ACK: (("producerId", "nested"), ("size", "int")),
    MESSAGE_PULL: (
        ("consumerId", "cached"), ("destination", "cached"), ("timeout", "long"),
        ("correlationId", "string"), ("messageId", "nested"),
    ),
    MESSAGE_DISPATCH: (
        ("consumerId", "cached"), ("destination", "cached"), ("message", "nested"),
        ("redeliveryCounter", "int"),
    ),
    MESSAGE_ACK: (
        ("destination", "cached"), ("transactionId", "cached"), ("consumerId", "cached"),
        ("ackType", "byte"), ("firstMessageId", "nested"), ("lastMessageId", "nested"),
        ("messageCount", "int"), ("poisonCause", "throwable"),
    ),
    **{code: _MESSAGE_FIELDS for code in range(MESSAGE, BLOB_MESSAGE)},
    BLOB_MESSAGE: (
        *_MESSAGE_FIELDS, ("remoteBlobUrl", "string"), ("mimeType", "string"),
        ("deletedByBroker", "bool"),
    ),
    RESPONSE: (("correlationId", "int"),),
    EXCEPTION_RESPONSE: (("correlationId", "int"), ("exception", "throwable")),
    DATA_RESPONSE: (("correlationId", "int"), ("data", "nested")),
    DATA_ARRAY_RESPONSE: (("correlationId", "int"), ("data", "array")),
    INTEGER_RESPONSE: (("correlationId", "int"), ("result", "int")),
    MESSAGE_DISPATCH_NOTIFICATION: (
        ("consumerId", "cached"), ("destination", "cached"), ("deliverySequenceId", "long"),
        ("messageId", "nested"),
    ),
    # A broker's durable subscriptions, for a network bridge's syncDurableSubs (v12 only).
    BROKER_SUBSCRIPTION_INFO: (
        ("brokerId", "nested", 12), ("brokerName", "string", 12),
        ("subscriptionInfos", "array", 12),
    ),
    QUEUE: (("physicalName", "string"),),
    TOPIC: (("physicalName", "string"),),
    TEMP_QUEUE: (("physicalName", "string"),),
    TEMP_TOPIC: (("physicalName", "string"),),
    MESSAGE_ID: (
        ("textView", "string", 10), ("producerId", "cached"), ("producerSequenceId", "long"),
        ("brokerSequenceId", "long"),
    ),
    LOCAL_TRANSACTION_ID: (("value", "long"), ("connectionId", "cached")),
    XA_TRANSACTION_ID: (
        ("formatId", "int"), ("globalTransactionId", "bytes"), ("branchQualifier", "bytes"),
    ),
    CONNECTION_ID: (("value", "string"),),
    SESSION_ID: (("connectionId", "string"), ("value", "long")),
    CONSUMER_ID: (("connectionId", "string"), ("sessionId", "long"), ("value", "long")),
    PRODUCER_ID: (("connectionId", "string"), ("value", "long"), ("sessionId", "long")),
    BROKER_ID: (("value", "string"),),
}  # fmt: skip

COMMANDS: Final = frozenset(
    code
    for code in SCHEMAS
    if 2 <= code <= 34 or code in (MESSAGE_DISPATCH_NOTIFICATION, BROKER_SUBSCRIPTION_INFO)
)


def fields_for(type_code: int, version: int) -> tuple[tuple[str, str], ...]:
    """The fields of a structure as the given protocol version lays them out."""
    cached = _BY_VERSION.get((type_code, version))
    if cached is None:
        cached = tuple((f[0], f[1]) for f in SCHEMAS[type_code] if len(f) == 2 or version >= f[2])
        _BY_VERSION[(type_code, version)] = cached
    return cached


_BY_VERSION: dict[tuple[int, int], tuple[tuple[str, str], ...]] = {}


TYPE_NAMES: Final = {
    value: "".join(part.title() for part in name.split("_"))
    for name, value in list(globals().items())
    if name.isupper() and type(value) is int
}
"""Each type code's name as ActiveMQ's class names it (MESSAGE_ACK: MessageAck), for errors."""


def type_name(code: int) -> str:
    return TYPE_NAMES.get(code, f"type {code}")
