"""The scheduler's rules (compatibility D5), as ActiveMQ 5.17's SchedulerBroker and JobSchedulerImpl
apply them: which values are taken, when a job first fires, how delay, period, repeat and
cron combine, and what a delivered copy carries. The broker is a stand-in here that
records what the scheduler publishes; the clock is set by hand."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from dateutil.tz import tzlocal

from dovecote.app import make_plugins
from dovecote.broker.scheduler import (
    JOB_ID,
    Schedule,
    ScheduleError,
    Scheduler,
    delivered_copy,
    first_fire_time,
    is_management,
    next_cron_time,
    read_schedule,
    wants_schedule,
)
from dovecote.config import load_config
from dovecote.core.commands import SendMessage
from dovecote.core.destinations import queue, topic
from dovecote.core.ids import IdGenerator
from dovecote.core.message import Message
from dovecote.protocol.openwire.primitives import JavaInt, JavaShort
from dovecote.store.schedules import MemoryJobStore, StoredJob

T0 = 1_700_000_000_000  # a multiple of 500 ms


# -- values --------------------------------------------------------------------------------


def test_text_values_are_taken_as_java_parses_them() -> None:
    # STOMP headers are text: Long.valueOf / Integer.valueOf.
    props = {"AMQ_SCHEDULED_DELAY": "1500", "AMQ_SCHEDULED_PERIOD": "+20",
             "AMQ_SCHEDULED_REPEAT": "-1", "AMQ_SCHEDULED_CRON": "* * * * *"}  # fmt: skip
    assert read_schedule(props) == Schedule(1500, 20, -1, "* * * * *")


def test_numbers_of_any_integer_width_are_taken_for_delay_and_period() -> None:
    props = {"AMQ_SCHEDULED_DELAY": JavaShort(7), "AMQ_SCHEDULED_PERIOD": 2**40}
    assert read_schedule(props) == Schedule(delay=7, period=2**40)


@pytest.mark.parametrize(
    "props",
    [
        {"AMQ_SCHEDULED_DELAY": "1 000"},
        {"AMQ_SCHEDULED_DELAY": " 5"},
        {"AMQ_SCHEDULED_DELAY": "5.0"},
        {"AMQ_SCHEDULED_DELAY": 1.5},
        {"AMQ_SCHEDULED_DELAY": True},
        {"AMQ_SCHEDULED_PERIOD": "9223372036854775808"},
        # A long is not an Integer to TypeConversionSupport: ActiveMQ fails the send.
        {"AMQ_SCHEDULED_DELAY": 10, "AMQ_SCHEDULED_REPEAT": 2},
        {"AMQ_SCHEDULED_DELAY": 10, "AMQ_SCHEDULED_REPEAT": "2147483648"},
        {"AMQ_SCHEDULED_DELAY": 10, "AMQ_SCHEDULED_REPEAT": "1001"},
        {"AMQ_SCHEDULED_CRON": "* * * *"},
        {"AMQ_SCHEDULED_CRON": "61 * * * *"},
        {"AMQ_SCHEDULED_CRON": "x * * * *"},
        {"AMQ_SCHEDULED_CRON": "0 12 * * MON"},
        {"AMQ_SCHEDULED_CRON": "0 12 L * *"},
        {"AMQ_SCHEDULED_CRON": "* * * * * *"},
    ],
)
def test_bad_values_are_refused(props: dict[str, Any]) -> None:
    with pytest.raises(ScheduleError):
        read_schedule(props)


def test_repeat_limit_is_a_thousand() -> None:
    assert read_schedule({"AMQ_SCHEDULED_REPEAT": JavaInt(1000)}).repeat == 1000
    with pytest.raises(ScheduleError, match="too large"):
        read_schedule({"AMQ_SCHEDULED_REPEAT": JavaInt(1001)})


def test_what_is_scheduled() -> None:
    assert not wants_schedule({})
    assert not wants_schedule({"AMQ_SCHEDULED_REPEAT": JavaInt(3)})  # repeat alone: at once
    assert wants_schedule({"AMQ_SCHEDULED_DELAY": "0"})
    assert wants_schedule({"AMQ_SCHEDULED_PERIOD": 5})
    assert wants_schedule({"AMQ_SCHEDULED_CRON": ""})
    # A copy the scheduler delivered is never scheduled again.
    assert not wants_schedule({"AMQ_SCHEDULED_DELAY": 5, JOB_ID: "ID:x:1:1:1"})


def test_management_destination_is_any_with_its_prefix_in_any_case() -> None:
    assert is_management(queue("ActiveMQ.Scheduler.Management"))
    assert is_management(topic("activemq.scheduler.management.x"))
    assert not is_management(queue("ActiveMQ.Scheduler"))


# -- times ---------------------------------------------------------------------------------


def test_first_time_rounds_up_to_500_ms_then_adds_delay_else_period() -> None:
    assert first_fire_time(Schedule(delay=1000), T0 + 1) == (T0 + 500, T0 + 1500)
    assert first_fire_time(Schedule(delay=1000), T0) == (T0 + 500, T0 + 1500)
    assert first_fire_time(Schedule(period=300), T0 + 499) == (T0 + 500, T0 + 800)
    assert first_fire_time(Schedule(delay=200, period=300), T0) == (T0 + 500, T0 + 700)
    assert first_fire_time(Schedule(delay=-5, period=300), T0) == (T0 + 500, T0 + 800)


def test_cron_gives_the_next_minute_of_its_entry_after_start_in_local_time() -> None:
    local = datetime(2026, 3, 4, 10, 17, 30, tzinfo=tzlocal())
    now = int(local.timestamp() * 1000)
    every_minute = next_cron_time("* * * * *", now)
    assert every_minute == int(local.replace(minute=18, second=0).timestamp() * 1000)
    assert next_cron_time("0 12 ? * *", now) == int(
        local.replace(hour=12, minute=0, second=0).timestamp() * 1000
    )
    start, first = first_fire_time(Schedule(delay=1000, cron="* * * * *"), now)
    assert first == next_cron_time("* * * * *", start) + 1000


def test_delivered_copy_drops_the_schedule_and_names_the_job() -> None:
    sent = Message(
        "ID:p:1:1:1", queue("q"), b"x", timestamp=T0, expiration=T0 + 10_000,
        properties={"AMQ_SCHEDULED_DELAY": 5, "AMQ_SCHEDULED_REPEAT": JavaInt(1), "k": "v"},
    )  # fmt: skip
    job = StoredJob("ID:p:1:1:9", sent, T0, "", 5, 0, 1, T0 + 5, True)
    copy = delivered_copy(job, "ID:s:0:0:1", T0 + 60_000)
    assert copy.message_id == "ID:s:0:0:1"
    assert dict(copy.properties) == {"k": "v", JOB_ID: "ID:p:1:1:9"}
    # The time to live counts from the delivery, and the timestamp moves with it.
    assert (copy.timestamp, copy.expiration) == (T0 + 60_000, T0 + 70_000)
    # Without an expiration the timestamp is the producer's.
    kept = delivered_copy(StoredJob("j", Message("m", queue("q"), timestamp=T0), T0, "", 5,
                                    0, 0, T0, False), "m", T0 + 60_000)  # fmt: skip
    assert kept.timestamp == T0


# -- firing --------------------------------------------------------------------------------


class FakeBroker:
    """What the scheduler uses of a broker (a PluginHost): ids, publish, and deliver for
    browse replies."""

    def __init__(self) -> None:
        self.ids = IdGenerator()
        self.published: list[Message] = []
        self.routed: list[Message] = []

    async def publish(self, message: Message) -> None:
        self.published.append(message)

    async def deliver(self, messages: list[Message]) -> None:
        self.routed.extend(messages)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        return self.now


@pytest.fixture
async def setup() -> Any:
    clock = Clock()
    broker = FakeBroker()
    scheduler = Scheduler(MemoryJobStore(), clock)
    await scheduler.start(broker)  # type: ignore[arg-type]
    yield scheduler, broker, clock
    await scheduler.stop()


async def send(scheduler: Scheduler, seq: int, **props: Any) -> None:
    message = Message(f"ID:c:1:1:{seq}", queue("q"), b"m", properties=props)
    assert await scheduler.on_send(None, SendMessage(message))


async def run_until(scheduler: Scheduler, clock: Clock, until: int, step: int = 100) -> None:
    """Advance the clock to ``until`` in steps, firing what is due at each step."""
    while clock.now < until:
        clock.now += step
        await scheduler._fire_all(scheduler._take_due(clock.now))


async def test_delay_fires_once_keeping_the_message_id(setup: Any) -> None:
    scheduler, broker, clock = setup
    await send(scheduler, 1, AMQ_SCHEDULED_DELAY=1000)
    await run_until(scheduler, clock, T0 + 1400)
    assert broker.published == []
    await run_until(scheduler, clock, T0 + 5000)
    assert [m.message_id for m in broker.published] == ["ID:c:1:1:1"]
    assert broker.published[0].properties[JOB_ID] == "ID:c:1:1:1"
    assert scheduler.jobs() == []


async def test_repeat_n_delivers_n_plus_one_copies_a_period_apart_with_new_ids(
    setup: Any,
) -> None:
    scheduler, broker, clock = setup
    await send(scheduler, 1, AMQ_SCHEDULED_DELAY=1000, AMQ_SCHEDULED_PERIOD=500,
               AMQ_SCHEDULED_REPEAT=JavaInt(2))  # fmt: skip
    times = []
    while clock.now < T0 + 10_000:
        clock.now += 100
        before = len(broker.published)
        await scheduler._fire_all(scheduler._take_due(clock.now))
        times += [clock.now - T0] * (len(broker.published) - before)
    assert times == [1500, 2000, 2500]
    ids = [m.message_id for m in broker.published]
    assert len(set(ids)) == 3 and "ID:c:1:1:1" not in ids
    assert {m.properties[JOB_ID] for m in broker.published} == {"ID:c:1:1:1"}


async def test_period_without_repeat_is_a_delay(setup: Any) -> None:
    scheduler, broker, clock = setup
    await send(scheduler, 1, AMQ_SCHEDULED_PERIOD=1000)
    await run_until(scheduler, clock, T0 + 1400)
    assert broker.published == []
    await run_until(scheduler, clock, T0 + 10_000)
    assert [m.message_id for m in broker.published] == ["ID:c:1:1:1"]


async def test_negative_repeat_goes_on_until_removed(setup: Any) -> None:
    scheduler, broker, clock = setup
    await send(scheduler, 1, AMQ_SCHEDULED_PERIOD=1000, AMQ_SCHEDULED_REPEAT="-1")
    await run_until(scheduler, clock, T0 + 20_500, step=500)
    assert len(broker.published) == 20
    [job] = scheduler.jobs()
    assert job.repeat == -1
    assert await scheduler.remove(job.job_id)
    await run_until(scheduler, clock, T0 + 30_000, step=500)
    assert len(broker.published) == 20


async def test_cron_fires_at_each_minute_of_its_entry(setup: Any) -> None:
    scheduler, broker, clock = setup
    await send(scheduler, 1, AMQ_SCHEDULED_CRON="* * * * *")
    await run_until(scheduler, clock, T0 + 3 * 60_000 + 1000, step=1000)
    assert len(broker.published) == 3
    assert len({m.message_id for m in broker.published}) == 3
    assert len(scheduler.jobs()) == 1  # a cron job never ends


async def test_cron_with_repeat_starts_a_repeating_job_at_each_time(setup: Any) -> None:
    scheduler, broker, clock = setup
    await send(scheduler, 1, AMQ_SCHEDULED_CRON="* * * * *", AMQ_SCHEDULED_PERIOD=1000,
               AMQ_SCHEDULED_REPEAT=JavaInt(1))  # fmt: skip
    minute = next_cron_time("* * * * *", T0 + 500)
    await run_until(scheduler, clock, minute + 500, step=500)
    assert broker.published == []  # the cron job itself never delivers
    await run_until(scheduler, clock, minute + 10_000, step=500)
    assert len(broker.published) == 2  # the started job: once, and one repeat
    spawned = {m.properties[JOB_ID] for m in broker.published}
    assert len(spawned) == 1 and spawned != {"ID:c:1:1:1"}


async def test_browse_and_remove_through_the_management_destination(setup: Any) -> None:
    scheduler, broker, clock = setup
    await send(scheduler, 1, AMQ_SCHEDULED_DELAY=5000)
    await send(scheduler, 2, AMQ_SCHEDULED_DELAY=1000)
    reply = queue("replies")
    browse = Message("ID:c:1:1:3", queue("ActiveMQ.Scheduler.Management"), reply_to=reply,
                     properties={"AMQ_SCHEDULER_ACTION": "BROWSE"})  # fmt: skip
    assert await scheduler.on_send(None, SendMessage(browse))
    assert [m.properties[JOB_ID] for m in broker.routed] == [j.job_id for j in scheduler.jobs()]
    first = broker.routed[0]
    assert first.destination == reply and first.original_destination == queue("q")
    assert (first.type, first.persistent) == ("Advisory", False)
    assert first.properties["AMQ_SCHEDULED_DELAY"] == 1000  # the job's message as sent
    remove = Message("ID:c:1:1:4", queue("ActiveMQ.Scheduler.Management"),
                     properties={"AMQ_SCHEDULER_ACTION": "REMOVE",
                                 JOB_ID: first.properties[JOB_ID]})  # fmt: skip
    assert await scheduler.on_send(None, SendMessage(remove))
    assert [j.message.message_id for j in scheduler.jobs()] == ["ID:c:1:1:1"]
    remove_all = Message("ID:c:1:1:5", queue("ActiveMQ.Scheduler.Management"),
                         properties={"AMQ_SCHEDULER_ACTION": "REMOVEALL"})  # fmt: skip
    assert await scheduler.on_send(None, SendMessage(remove_all))
    assert scheduler.jobs() == []
    await run_until(scheduler, clock, T0 + 10_000, step=500)
    assert broker.published == []


async def test_remove_all_within_a_time_range(setup: Any) -> None:
    scheduler, _, _ = setup
    await send(scheduler, 1, AMQ_SCHEDULED_DELAY=1000)
    await send(scheduler, 2, AMQ_SCHEDULED_DELAY=5000)
    assert await scheduler.remove_all(T0, T0 + 2000) == 1
    assert [j.message.message_id for j in scheduler.jobs()] == ["ID:c:1:1:2"]


async def test_a_bad_value_fails_the_send_and_schedules_nothing(setup: Any) -> None:
    scheduler, _, _ = setup
    message = Message("ID:c:1:1:1", queue("q"), properties={"AMQ_SCHEDULED_DELAY": "soon"})
    with pytest.raises(ScheduleError):
        await scheduler.on_send(None, SendMessage(message))
    assert scheduler.jobs() == []


async def test_messages_without_schedule_pass(setup: Any) -> None:
    scheduler, _, _ = setup
    for props in ({}, {"other": 1}, {"AMQ_SCHEDULED_REPEAT": JavaInt(2)}):
        message = Message("ID:c:1:1:1", queue("q"), properties=props)
        assert not await scheduler.on_send(None, SendMessage(message))


def test_scheduler_support_is_off_unless_configured(tmp_path: Path) -> None:
    assert load_config(None).broker.scheduler_support is False
    path = tmp_path / "dovecote.toml"
    path.write_text("[broker]\nscheduler_support = true\n")
    config = load_config(path)
    assert config.broker.scheduler_support is True
    assert [type(p).__name__ for p in make_plugins(config)].count("Scheduler") == 1
    assert "Scheduler" not in [type(p).__name__ for p in make_plugins(load_config(None))]
