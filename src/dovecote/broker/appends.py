"""The ``Append`` stream request (docs/streams.md): many messages to one destination in one
frame, a stream block (dovecote.core.stream_blocks) as the body of an ordinary bytes message
sent to ``dovecote.Stream.Append.<name>``. The Spark source's writers use it instead of a
send per row.

The block is read as core/appended_blocks.py says. With the property ``transaction`` (the
sender's open local transaction, as its protocol names it: OpenWire's local transaction
number, STOMP's ``transaction`` header) the messages join that transaction's sends: stored in
its commit's one store write, with the rest (the journal keeps each block as it came), or
dropped with its rollback or its connection. Without, they are routed at once, in one store
write. Either way the sender's authorization to write to the destination and producer flow
control apply, once per block.
"""

from __future__ import annotations

from dovecote.broker.connection import ConnectionState, LocalTransaction
from dovecote.core.errors import BrokerError
from dovecote.core.message import Message

TRANSACTION_PROPERTY = "transaction"
PERSISTENT_PROPERTY = "persistent"


def open_transaction(state: ConnectionState, request: Message) -> LocalTransaction | None:
    """The open local transaction an Append request names (None when it names none)."""
    name = request.properties.get(TRANSACTION_PROPERTY)
    if name is None:
        return None
    wanted = str(name)
    for transaction_id, transaction in state.transactions.items():
        if transaction_id.value == wanted:
            return transaction
    raise BrokerError(f"an Append request names transaction {wanted}, which is not open")
