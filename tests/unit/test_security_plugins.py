"""The security plugins on a real broker (memory store): a client certificate naming the
user, the login cache on the connect path, the per-connection write cache of sends, and
what a refusal leaves behind (nothing)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from dovecote.broker.broker import Broker
from dovecote.broker.connection import Peer, Principal
from dovecote.broker.policy import BrokerSettings
from dovecote.broker.security import users
from dovecote.broker.security.authorization import AuthorizationEntry, AuthorizationMap, Rights
from dovecote.broker.security.plugins import (
    CertificateUsers,
    SecuritySettings,
    common_name,
    normal_subject,
)
from dovecote.broker.security.users import User, UserStore, hash_password
from dovecote.core.commands import ConnectionInfo, ConsumerInfo, SendMessage, SessionInfo
from dovecote.core.destinations import queue
from dovecote.core.errors import SecurityError
from dovecote.core.ids import ConnectionId, ConsumerId, SessionId
from dovecote.core.message import Message
from dovecote.store.memory import MemoryPersistenceAdapter

WRITERS = frozenset({"writers"})
STORE = UserStore(
    [User("alice", hash_password("wonderland"), WRITERS), User("robot", None, WRITERS)]
)
SETTINGS = SecuritySettings(
    users=STORE,
    certificates=CertificateUsers({normal_subject("CN=robot, O=example"): "robot"}, True),
    authorization=AuthorizationMap(
        (AuthorizationEntry("orders.>", True, Rights(WRITERS, WRITERS, WRITERS)),)
    ),
)


@pytest.fixture
async def broker() -> AsyncIterator[Broker]:
    b = Broker(
        BrokerSettings(expire_messages_period_ms=0),
        MemoryPersistenceAdapter(),
        plugins=SETTINGS.plugins(),
    )
    await b.start()
    yield b
    await b.stop()


def info(n: int, user: str | None = None, password: str | None = None) -> ConnectionInfo:
    return ConnectionInfo(ConnectionId(f"ID:c{n}"), f"client{n}", user, password)


async def test_a_verified_certificate_names_its_user_without_a_password(broker: Broker) -> None:
    peer = Peer("10.0.0.1:4000", "openwire", True, "cn=robot,o=example")
    state = await broker.add_connection(info(1), lambda d: None, peer)
    assert state.principal == Principal("robot", WRITERS)
    # By CN: a configured user's name.
    by_cn = Peer("10.0.0.1:4001", "openwire", True, "CN=alice,O=elsewhere")
    state = await broker.add_connection(info(2), lambda d: None, by_cn)
    assert state.principal == Principal("alice", WRITERS)


async def test_without_a_known_certificate_the_password_decides(broker: Broker) -> None:
    stranger = Peer("10.0.0.1:4000", "openwire", True, "CN=mallory,O=example")
    with pytest.raises(SecurityError, match=r"User name \[mallory\] or password is invalid\."):
        await broker.add_connection(info(1, "mallory", "x"), lambda d: None, stranger)
    with pytest.raises(SecurityError, match=r"User name \[null\] or password is invalid\."):
        await broker.add_connection(info(2), lambda d: None, stranger)
    # A user without a password cannot log in with one.
    with pytest.raises(SecurityError):
        await broker.add_connection(info(3, "robot", ""), lambda d: None)
    state = await broker.add_connection(info(4, "alice", "wonderland"), lambda d: None, stranger)
    assert state.principal == Principal("alice", WRITERS)
    # Nothing of the refused ones was registered: their client ids are free.
    await broker.add_connection(info(1, "alice", "wonderland"), lambda d: None)


async def test_a_second_login_costs_no_scrypt(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    await broker.add_connection(info(1, "alice", "wonderland"), lambda d: None)
    calls: list[str] = []
    monkeypatch.setattr(users, "_derive", lambda *args: calls.append("scrypt") or b"")
    await broker.add_connection(info(2, "alice", "wonderland"), lambda d: None)
    assert calls == []


async def test_sends_are_checked_once_per_connection_and_destination(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    connection = info(1, "alice", "wonderland")
    await broker.add_connection(connection, lambda d: None)
    cid = connection.connection_id
    session = SessionId(cid, 1)
    await broker.process(cid, SessionInfo(session))

    def send(name: str, n: int) -> SendMessage:
        return SendMessage(Message(f"ID:p:1:1:{n}", queue(name), b"x"))

    await broker.process(cid, send("orders.a", 1))
    checks: list[str] = []
    real = AuthorizationMap.allows
    monkeypatch.setattr(
        AuthorizationMap,
        "allows",
        lambda self, *args: checks.append("check") or real(self, *args),
    )
    for n in range(2, 12):
        await broker.process(cid, send("orders.a", n))
    assert checks == []
    with pytest.raises(SecurityError, match="User alice is not authorized to write to: queue://Q"):
        await broker.process(cid, send("Q", 12))
    assert checks == ["check"]
    # Refused consumers are not made; the connection goes on.
    with pytest.raises(SecurityError, match="read from: queue://Q"):
        await broker.process(cid, ConsumerInfo(ConsumerId(session, 1), queue("Q")))
    await broker.process(cid, ConsumerInfo(ConsumerId(session, 2), queue("orders.a")))
    assert broker.query.destination_exists(queue("orders.a"))
    assert not broker.query.destination_exists(queue("Q"))


def test_a_subject_is_split_only_at_commas_that_are_not_escaped() -> None:
    subject = r"CN=Smith\, John, O=example"
    assert normal_subject(subject) == r"CN=Smith\, John,O=example"
    assert common_name(subject) == "Smith, John"
    assert common_name(r"O=x,CN=a\\b") == "a\\b"
