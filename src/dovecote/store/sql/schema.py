"""The SQL store's tables (compatibility M3), named and shaped as ActiveMQ's JDBC store names them,
with the few columns dovecote adds marked as such. All SQL lives here and in adapter.py,
written with SQLAlchemy Core so the same statements run on SQLite and PostgreSQL.

- ACTIVEMQ_MSGS: the messages of queues and topics. ID orders them (the store's sequence);
  CONTAINER is the destination (``queue://A``); MSGID_PROD holds the message id; MSG the
  encoded message. REDELIVERY is dovecote's: the redelivery counter survives restarts.
- ACTIVEMQ_ACKS: one row per durable subscription. LAST_ACKED_ID is where the subscription
  started: it needs only messages with a larger ID.
- DOVECOTE_SUB_ACKS (dovecote's): the messages each durable subscription acknowledged
  individually, since STOMP and JMS clients may ack out of order.
- DOVECOTE_CHECKPOINT (dovecote's): for the journaled SQL store, the journal position up to
  which the tables hold everything.
- ACTIVEMQ_LOCK: one row that one broker at a time holds by lease.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
)

metadata = MetaData()

messages = Table(
    "ACTIVEMQ_MSGS",
    metadata,
    Column("ID", BigInteger, primary_key=True, autoincrement=False),
    Column("CONTAINER", String(250), nullable=False),
    Column("MSGID_PROD", String(250), nullable=False),
    Column("MSGID_SEQ", BigInteger, nullable=False, default=0),
    Column("EXPIRATION", BigInteger, nullable=False, default=0),
    Column("MSG", LargeBinary, nullable=False),
    Column("PRIORITY", Integer, nullable=False, default=4),
    Column("XID", String(250), nullable=True),
    Column("REDELIVERY", Integer, nullable=False, default=0),
    Index("ACTIVEMQ_MSGS_MIDX", "CONTAINER", "MSGID_PROD"),
)

acks = Table(
    "ACTIVEMQ_ACKS",
    metadata,
    Column("CONTAINER", String(250), primary_key=True),
    Column("SUB_DEST", String(250), nullable=True),
    Column("CLIENT_ID", String(250), primary_key=True),
    Column("SUB_NAME", String(250), primary_key=True),
    Column("SELECTOR", String(250), nullable=True),
    Column("LAST_ACKED_ID", BigInteger, nullable=False),
    Column("PRIORITY", Integer, primary_key=True, default=5),
    Column("XID", String(250), nullable=True),
    Column("NO_LOCAL", Boolean, nullable=False, default=False),
)

sub_acks = Table(
    "DOVECOTE_SUB_ACKS",
    metadata,
    Column("CLIENT_ID", String(250), primary_key=True),
    Column("SUB_NAME", String(250), primary_key=True),
    Column("MSG_ID", BigInteger, primary_key=True),
)

checkpoint = Table(
    "DOVECOTE_CHECKPOINT",
    metadata,
    Column("ID", Integer, primary_key=True, autoincrement=False),
    Column("FILE_ID", BigInteger, nullable=False),
    Column("FILE_OFFSET", BigInteger, nullable=False),
)

lock = Table(
    "ACTIVEMQ_LOCK",
    metadata,
    Column("ID", BigInteger, primary_key=True, autoincrement=False),
    Column("TIME", BigInteger, nullable=False),
    Column("BROKER_NAME", String(250), nullable=True),
)
