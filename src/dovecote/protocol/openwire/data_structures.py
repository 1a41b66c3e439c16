"""What a message carries in its ``dataStructure`` field, as OpenWire structures: the
commands an advisory tells of (ActiveMQ's advisory messages carry the ConnectionInfo,
ConsumerInfo, ProducerInfo, DestinationInfo or RemoveInfo itself, or a copy of the
message that expired or went to a dead-letter queue)."""

from __future__ import annotations

from collections.abc import Callable

from dovecote.core.commands import (
    ConnectionInfo,
    ConsumerInfo,
    DestinationInfo,
    ProducerInfo,
    RemoveInfo,
    RemoveSubscriptionInfo,
)
from dovecote.core.destinations import Destination
from dovecote.core.ids import ConnectionId, ConsumerId, ProducerId, SessionId
from dovecote.core.message import Message
from dovecote.protocol.openwire import schema as t
from dovecote.protocol.openwire.codec import Structure

MessageStructure = Callable[[Message], Structure]


def id_structure(object_id: ConnectionId | SessionId | ConsumerId | ProducerId) -> Structure:
    match object_id:
        case ConnectionId(value=value):
            return Structure(t.CONNECTION_ID, {"value": value})
        case SessionId(connection_id=connection, value=value):
            return Structure(t.SESSION_ID, {"connectionId": connection.value, "value": value})
        case ConsumerId(session_id=session, value=value):
            return Structure(t.CONSUMER_ID, _child_fields(session, value))
        case ProducerId(session_id=session, value=value):
            return Structure(t.PRODUCER_ID, _child_fields(session, value))
    raise TypeError(f"not an id: {object_id!r}")


def _child_fields(session: SessionId, value: int) -> dict[str, object]:
    return {"connectionId": session.connection_id.value, "sessionId": session.value, "value": value}


def data_structure(
    value: object,
    destination: Callable[[Destination | None], Structure | None],
    message: MessageStructure,
) -> Structure | None:
    """The structure of what a message carries (None for anything else): ``destination``
    and ``message`` make those structures as the converter does."""
    match value:
        case ConsumerInfo():
            return Structure(t.CONSUMER_INFO, {
                "consumerId": id_structure(value.consumer_id),
                "browser": value.browser,
                "destination": destination(value.destination),
                "prefetchSize": value.prefetch_size,
                "maximumPendingMessageLimit": value.maximum_pending_message_limit,
                "dispatchAsync": value.dispatch_async,
                "selector": value.selector,
                "subscriptionName": value.subscription_name,
                "noLocal": value.no_local,
                "exclusive": value.exclusive,
                "priority": value.priority,
                "brokerPath": [Structure(t.BROKER_ID, {"value": broker})
                               for broker in value.broker_path] or None,
            })  # fmt: skip
        case ProducerInfo():
            return Structure(t.PRODUCER_INFO, {
                "producerId": id_structure(value.producer_id),
                "destination": destination(value.destination),
                "windowSize": value.window_size,
            })  # fmt: skip
        case ConnectionInfo():
            return Structure(t.CONNECTION_INFO, {
                "connectionId": id_structure(value.connection_id),
                "clientId": value.client_id,
                "password": value.password,
                "userName": value.user_name,
            })  # fmt: skip
        case RemoveInfo():
            return Structure(t.REMOVE_INFO, {"objectId": id_structure(value.object_id),
                                             "lastDeliveredSequenceId": 0})  # fmt: skip
        case RemoveSubscriptionInfo():
            return Structure(t.REMOVE_SUBSCRIPTION_INFO, {
                "subcriptionName": value.subscription_name,  # (OpenWire's spelling)
                "clientId": value.client_id,
            })  # fmt: skip
        case DestinationInfo():
            return Structure(t.DESTINATION_INFO, {
                "connectionId": id_structure(value.connection_id),
                "destination": destination(value.destination),
                "operationType": 0 if value.add else 1,
            })  # fmt: skip
        case Message():
            carried = message(value)
            if not value.body:
                # An advisory's copy has its body cleared: no content at all (a null text).
                carried.fields["content"] = None
            return carried
    return None
