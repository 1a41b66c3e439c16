"""Redelivery, expiry and the dead-letter queues: what happens to a message its consumers
gave back (compatibility R1, R2), to one that expired (R4), and to one a consumer poisoned. Past
the policy's limits a message goes to its dead-letter queue, or is dropped where the
policy keeps none."""

from __future__ import annotations

import logging
from dataclasses import replace

from dovecote.broker.connection import Origin
from dovecote.broker.consumer import Entry
from dovecote.broker.plugins import PluginChain
from dovecote.broker.queue import Queue
from dovecote.broker.regions import Regions
from dovecote.broker.topic import TopicSubscription
from dovecote.core.message import Message
from dovecote.store.api import StoreOp, UpdateRedelivery

log = logging.getLogger("dovecote.broker")

DLQ_CAUSE_PROPERTY = "dlqDeliveryFailureCause"
ORIGINAL_EXPIRATION_PROPERTY = "originalExpiration"
ORIGINAL_DELIVERY_MODE_PROPERTY = "originalDeliveryMode"


class DeadLetters:
    def __init__(self, regions: Regions, plugins: PluginChain | None = None) -> None:
        self.regions = regions
        self.settings = regions.settings
        self.plugins = plugins if plugins is not None else PluginChain()
        """Told of each message expired or dead-lettered (advisories), if they watch."""

    async def redeliver(self, origin: Origin, entries: list[Entry]) -> None:
        """Return entries for redelivery with their counter raised (compatibility R1); past the
        policy's limit they go to the dead-letter queue instead (R2)."""
        if not entries or origin is None:
            return
        limit = self.settings.policies.for_destination(entries[0].message.destination)
        back: list[Entry] = []
        dead: list[Entry] = []
        ops: list[StoreOp] = []
        for entry in entries:
            entry.redelivery_counter += 1
            if 0 <= limit.maximum_redeliveries < entry.redelivery_counter:
                dead.append(entry)
                continue
            back.append(entry)
            message = entry.message
            if message.persistent:
                ops.append(
                    UpdateRedelivery(
                        message.destination, message.message_id, entry.redelivery_counter
                    )
                )
        if ops:
            await self.regions.store.write(ops)
        origin.requeue(back)
        if dead:
            cause = f"redelivery count {dead[0].redelivery_counter} exceeded the maximum"
            await self.dead_letter(origin, dead, cause)
        await self.regions.dispatch(origin)

    async def expire(self, origin: Queue | TopicSubscription, entries: list[Entry]) -> None:
        """Expired messages are never delivered (compatibility R4): to the DLQ or dropped."""
        if isinstance(origin, Queue):
            origin.stats.expired += len(entries)
        # (The body stays where it is: what is told of an expired message leaves it out.)
        told = [entry.message for entry in entries] if self.plugins.watches_expiry else []
        await self.dead_letter(origin, entries, None, expired=True)
        for message in told:
            await self.plugins.on_message_expired(message)

    async def dead_letter(
        self,
        origin: Queue | TopicSubscription,
        entries: list[Entry],
        cause: str | None,
        expired: bool = False,
    ) -> None:
        """Remove entries from their origin, copying those the policy keeps to its DLQ, as
        ActiveMQ copies them: no expiry (the old one in ``originalExpiration``), persistent,
        and the cause, if any, in ``dlqDeliveryFailureCause`` (an expiry's in its words)."""
        ops = self.regions.consume_ops(origin, entries)
        copies: list[Message] = []
        kept: list[Message] = []
        for entry in entries:
            message = entry.full_message()
            entry.release()
            strategy = self.settings.policies.for_destination(message.destination).dead_letter
            target = strategy.dead_letter_destination(message.destination)
            why = cause
            if expired:  # (ActiveMQ's words: its Throwable's toString)
                why = f"java.lang.Throwable: Message Expired. Expiration:{message.expiration}"
            if target == message.destination or not strategy.wants(message.persistent, expired):
                log.info("discarding %s from %s: %s", message.message_id, message.destination,
                         why or "poison ack from the consumer")  # fmt: skip
                continue
            kept.append(message)
            properties = dict(message.properties)
            properties.setdefault(ORIGINAL_EXPIRATION_PROPERTY, message.expiration)
            if not message.persistent:
                properties[ORIGINAL_DELIVERY_MODE_PROPERTY] = "NON_PERSISTENT"
            if why is not None:
                properties[DLQ_CAUSE_PROPERTY] = why
            copies.append(
                replace(
                    message,
                    destination=target,
                    original_destination=message.destination,
                    expiration=0,
                    persistent=True,
                    redelivery_counter=entry.redelivery_counter,
                    properties=properties,
                )
            )
        if isinstance(origin, Queue):
            origin.stats.dequeued += len(entries)
        await self.regions.route(copies, extra_ops=ops)
        if self.plugins.watches_dead_letters:
            for message in kept:
                await self.plugins.on_message_dead_lettered(message)

    async def sweep_expired(self) -> None:
        regions = self.regions
        now = regions.clock()
        for queue in list(regions.queues.values()):
            expired = queue.remove_pending(lambda e: e.message.is_expired(now))
            if expired:
                await self.expire(queue, expired)
        for subs in [*regions.topic_subs.values(), regions.wildcard_subs]:
            for sub in list(subs):
                expired = sub.remove_pending(now)
                if expired:
                    await self.expire(sub, expired)
