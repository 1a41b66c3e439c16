"""Request/reply across a network (as ActiveMQ's bridgeTempDestinations, on by default):
a requester on B asks through a queue whose service is on A and names its temporary queue
on B as reply-to; A's bridge makes that temporary destination on A when B's advisory tells
of it, so the service's reply, sent on A, goes back to the requester on B."""

from __future__ import annotations

import uuid
from pathlib import Path

from brokers import running_broker
from dovecote.client import ConnectionFactory, Message
from dovecote.core.destinations import queue
from networks import connector_toml, url, wait_for
from ports import free_port


def test_a_reply_to_a_temporary_queue_crosses_back_over_the_bridge(tmp_path: Path) -> None:
    name = f"net.svc.{uuid.uuid4().hex[:8]}"
    a_port, b_port = free_port(), free_port()
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
    with running_broker(connector_toml("A", [b_port], name="a-b"), tmp_path / "a",
                        openwire_port=a_port) as a, \
            running_broker(connector_toml("B", [a_port], name="b-a"), tmp_path / "b",
                           openwire_port=b_port) as b:  # fmt: skip
        wait_for(lambda: "bridge to broker B" in a.log_text(), "A->B")
        wait_for(lambda: "bridge to broker A" in b.log_text(), "B->A")
        with ConnectionFactory(url(a_port)).create_connection() as service_connection, \
                ConnectionFactory(url(b_port)).create_connection() as requester:  # fmt: skip
            service_connection.start()
            requester.start()
            service_session = service_connection.create_session()
            service = service_session.create_consumer(queue(name))
            answers = service_session.create_producer()
            session = requester.create_session()
            replies = session.create_temporary_queue()
            on_replies = session.create_consumer(replies)
            wait_for(lambda: f"forwarding {replies} to" in a.log_text(), "the reply demand")
            for i in range(10):
                session.create_producer(queue(name)).send(
                    Message(f"question {i}", reply_to=replies)
                )
                request = service.receive(30)
                assert request is not None and request.reply_to == replies
                answers.send(Message(f"answer to {request.text}"), destination=request.reply_to)
                reply = on_replies.receive(30)
                assert reply is not None and reply.text == f"answer to question {i}"
