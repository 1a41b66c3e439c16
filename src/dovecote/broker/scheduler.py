"""Scheduled and delayed delivery (compatibility D5): ActiveMQ's SchedulerBroker and job scheduler,
as a broker plugin (installed with ``[broker] scheduler_support = true``).

A send whose message has ``AMQ_SCHEDULED_DELAY``, ``AMQ_SCHEDULED_PERIOD`` or
``AMQ_SCHEDULED_CRON`` (and no ``scheduledJobId``) becomes a job instead of being routed;
in a transaction, at commit. The rules are ActiveMQ 5.17's (SchedulerBroker,
JobSchedulerImpl, CronParser):

- Values: numbers of any integer width, or their text (STOMP headers are text: Java's
  ``Long.valueOf``); ``AMQ_SCHEDULED_REPEAT`` must be an int (or its text), not a long,
  and at most 1000. Anything else fails the send (or the commit) with an error.
- First time: now rounded up to the next 500 ms ("start"); a cron entry moves it to the
  entry's next minute after start; then plus the delay if positive, else plus the period.
- A job without cron fires, then, while repeats are left (a negative repeat: forever),
  fires again ``period`` ms after each firing: ``repeat`` n means n + 1 deliveries.
- A cron job without repeat fires at each time of its entry, forever; with a repeat, each
  time of its entry starts a new job of delay, period and repeat instead of firing.
- A delivered copy has ``scheduledJobId`` and none of the AMQ_SCHEDULED_* properties; a
  repeating or cron job's copies each get a new message id, a delayed message keeps its
  own. A copy with an expiration gets a new timestamp, and the expiration moves with it.
- ``ActiveMQ.Scheduler.Management`` (any destination of that name prefix, any case) takes
  ``AMQ_SCHEDULER_ACTION`` = ``BROWSE`` (a non-persistent copy of each job, of type
  Advisory, sent to the reply-to), ``REMOVE`` (the job named by ``scheduledJobId``) or
  ``REMOVEALL``, each within ``ACTION_START_TIME``..``ACTION_END_TIME`` (next fire times)
  when both are given; nothing sent there is routed.

Durability: a job is in the job store (store/schedules.py) before its send is answered.
A firing is routed (stored, when persistent) first and recorded in the job store after: a
crash between the two fires it again at the next start (a duplicate, never a loss), as in
ActiveMQ, whose scheduler records a firing after handing the message on too.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, ClassVar

from croniter import croniter
from dateutil.tz import tzlocal

from dovecote.broker.plugins import BrokerPlugin, PluginHost
from dovecote.broker.regions import now_ms
from dovecote.core.destinations import Destination
from dovecote.core.errors import BrokerError, DovecoteError
from dovecote.core.ids import TransactionId
from dovecote.core.message import Message, PropertyValue
from dovecote.protocol.openwire.primitives import JavaByte, JavaInt, JavaShort
from dovecote.store.schedules import JobStore, StoredJob

if TYPE_CHECKING:
    from collections.abc import Callable

    from dovecote.broker.connection import ConnectionState, LocalTransaction
    from dovecote.core.commands import SendMessage

log = logging.getLogger("dovecote.scheduler")

DELAY = "AMQ_SCHEDULED_DELAY"
PERIOD = "AMQ_SCHEDULED_PERIOD"
REPEAT = "AMQ_SCHEDULED_REPEAT"
CRON = "AMQ_SCHEDULED_CRON"
JOB_ID = "scheduledJobId"
SCHEDULE_PROPERTIES = frozenset((DELAY, PERIOD, REPEAT, CRON))
MANAGEMENT = "ActiveMQ.Scheduler.Management"
ACTION = "AMQ_SCHEDULER_ACTION"
START_TIME = "ACTION_START_TIME"
END_TIME = "ACTION_END_TIME"
MAX_REPEAT = 1000
STOP_WAIT_S = 5.0
_JAVA_INTEGER = re.compile(r"[+-]?[0-9]+")
_CRON_FIELD = re.compile(r"[0-9*,/ -]+")


class ScheduleError(BrokerError):
    """A scheduling property's value ActiveMQ would not take."""


# -- the rules ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Schedule:
    delay: int = 0
    period: int = 0
    repeat: int = 0
    cron: str = ""


def wants_schedule(properties: Mapping[str, PropertyValue]) -> bool:
    """Whether a message is to be scheduled (rather than routed): SchedulerBroker.send."""
    if DELAY not in properties and PERIOD not in properties and CRON not in properties:
        return False
    job_id = properties.get(JOB_ID)
    if job_id is not None and not isinstance(job_id, str):
        raise ScheduleError(f"{JOB_ID} must be a string, not {_java_type(job_id)}")
    return job_id is None


def read_schedule(properties: Mapping[str, PropertyValue]) -> Schedule:
    """The schedule a message's properties ask for; ScheduleError for a bad value."""
    cron = properties.get(CRON)
    schedule = Schedule(
        delay=java_long(DELAY, properties.get(DELAY, 0)),
        period=java_long(PERIOD, properties.get(PERIOD, 0)),
        repeat=java_int(REPEAT, properties.get(REPEAT, JavaInt(0))),
        cron="" if cron is None else _java_text(cron),
    )
    if schedule.repeat > MAX_REPEAT:
        raise ScheduleError("The scheduled repeat value is too large")
    if schedule.cron:
        next_cron_time(schedule.cron, 0)  # refused now, not when it would fire
    return schedule


def java_long(name: str, value: PropertyValue) -> int:
    """TypeConversionSupport to Long: any integer width, or decimal text."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        return _parse_java_integer(name, value, 63)
    raise ScheduleError(f"{name} must be a number, not {_java_type(value)}")


def java_int(name: str, value: PropertyValue) -> int:
    """TypeConversionSupport to Integer: an int, short or byte (not a long), or text."""
    if isinstance(value, JavaInt | JavaShort | JavaByte):
        return int(value)
    if isinstance(value, str):
        return _parse_java_integer(name, value, 31)
    raise ScheduleError(f"{name} must be an int, not {_java_type(value)}")


def _parse_java_integer(name: str, text: str, bits: int) -> int:
    if _JAVA_INTEGER.fullmatch(text):
        value = int(text)
        if -(2**bits) <= value < 2**bits:
            return value
    raise ScheduleError(f"{name} is not a number: {text!r}")


def _java_text(value: PropertyValue) -> str:
    """A property's value as Java's toString gives it (the cron entry may be any type)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value.hex() if isinstance(value, bytes) else str(value)


def _java_type(value: PropertyValue) -> str:
    match value:
        case bool():
            return "a boolean"
        case JavaInt() | JavaShort() | JavaByte():
            return "an int"
        case int():
            return "a long"
        case float():
            return "a floating-point number"
        case bytes():
            return "a byte array"
    return repr(value)


def next_cron_time(entry: str, after_ms: int) -> int:
    """The first minute of ``entry`` (five fields, local time) strictly after ``after_ms``.
    ActiveMQ's CronParser reads ``?`` as ``*``; croniter does not, so it is translated."""
    fields = entry.split()
    if len(fields) != 5:
        raise ScheduleError(
            f"Not a valid cron entry - wrong number of tokens({len(fields)}): {entry}"
        )
    expression = " ".join("*" if f == "?" else f for f in fields)
    # CronParser reads numbers only: no month or day names, nor croniter's L, W, # or H.
    if not _CRON_FIELD.fullmatch(expression) or not croniter.is_valid(expression):
        raise ScheduleError(f"Not a valid cron entry: {entry}")
    start = datetime.fromtimestamp(after_ms / 1000, tz=tzlocal())
    return int(croniter(expression, start).get_next(float) * 1000)


def first_fire_time(schedule: Schedule, now: int) -> tuple[int, int]:
    """(start, first fire time) of a job scheduled at ``now`` (JobSchedulerImpl.doSchedule)."""
    start = (now + 500) // 500 * 500  # ActiveMQ groups jobs on 500 ms marks
    time = next_cron_time(schedule.cron, start) if schedule.cron else start
    return start, time + (schedule.delay if schedule.delay > 0 else schedule.period)


def delivered_copy(job: StoredJob, message_id: str, now: int) -> Message:
    """The message a firing delivers (SchedulerBroker.scheduledJob)."""
    m = job.message
    properties = {k: v for k, v in m.properties.items() if k not in SCHEDULE_PROPERTIES}
    properties[JOB_ID] = job.job_id
    timestamp, expiration = m.timestamp, m.expiration
    if timestamp > 0 and expiration > 0 and expiration - timestamp + now > expiration:
        timestamp, expiration = now, expiration - timestamp + now
    return replace(
        m, message_id=message_id, properties=properties, timestamp=timestamp,
        expiration=expiration, redelivery_counter=0, sequence=0,
    )  # fmt: skip


def is_management(destination: Destination) -> bool:
    name = destination.name
    # Asked of every send: the first letter rules out nearly all before any copy is made.
    return name[:1] in ("A", "a") and name[:_MANAGEMENT_LENGTH].lower() == _MANAGEMENT_LOWER


_MANAGEMENT_LENGTH = len(MANAGEMENT)
_MANAGEMENT_LOWER = MANAGEMENT.lower()


# -- the plugin --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JobView:
    """A scheduled job as the admin API shows it."""

    job_id: str
    destination: Destination
    message_id: str
    next_time: int
    start: int
    delay: int
    period: int
    repeat: int
    cron: str
    persistent: bool
    body_size: int

    def as_json(self) -> dict[str, object]:
        return {
            "job_id": self.job_id,
            "destination": self.destination.name,
            "type": "queue" if self.destination.is_queue else "topic",
            "message_id": self.message_id,
            "next_time": self.next_time,
            "start": self.start,
            "delay": self.delay,
            "period": self.period,
            "repeat": self.repeat,
            "cron": self.cron,
            "persistent": self.persistent,
            "body_size": self.body_size,
        }


class Scheduler(BrokerPlugin):
    name: ClassVar[str] = "scheduler"
    intercepts_sends: ClassVar[bool] = True

    def __init__(self, store: JobStore, clock: Callable[[], int] = now_ms) -> None:
        self.store = store
        self.clock = clock
        self._broker: PluginHost | None = None
        self._jobs: dict[str, StoredJob] = {}
        self._heap: list[tuple[int, int, str]] = []
        """(next time, order, job id); an entry whose job has moved or gone is skipped."""
        self._order = itertools.count()
        self._job_order: dict[str, int] = {}
        self._held: dict[TransactionId, tuple[ConnectionState, list[Message]]] = {}
        """Scheduled sends of open transactions, scheduled at commit."""
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._job_seq = itertools.count(1)
        self._copy_seq = itertools.count(1)
        self._producer = ""

    # -- lifecycle ---------------------------------------------------------------------

    async def start(self, broker: PluginHost) -> None:
        self._broker = broker
        self._producer = f"{broker.ids.next_name()}:0:0"
        recovered = self.store.load()
        for job in recovered:
            self._put(job)
        # Job ids end in a counter, as ActiveMQ's: go on after the highest recovered.
        numbers = [int(n) for j in recovered if (n := j.job_id.rpartition(":")[2]).isdigit()]
        self._job_seq = itertools.count(max(numbers, default=0) + 1)
        if recovered:
            log.info("recovered %d scheduled jobs", len(recovered))
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        self._stopping = True
        self._wakeup.set()
        if self._task is not None:
            # The firing under way finishes and is recorded; one stuck (a full broker) is cut.
            try:
                await asyncio.wait_for(asyncio.shield(self._task), STOP_WAIT_S)
            except TimeoutError:
                self._task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._task
        await self.store.close()

    @property
    def broker(self) -> PluginHost:
        assert self._broker is not None, "the scheduler is not started"
        return self._broker

    # -- sends -------------------------------------------------------------------------

    async def on_send(self, state: ConnectionState | None, command: SendMessage) -> bool:
        message = command.message
        if is_management(message.destination):
            await self._manage(message)
            return True
        if not message.properties or not wants_schedule(message.properties):
            return False
        if command.transaction_id is None:
            await self.schedule([message])
            return True
        assert state is not None  # transacted sends always come with their connection
        tx = state.transaction_of(command)
        self._forget_ended_transactions()
        self._held.setdefault(tx.transaction_id, (state, []))[1].append(message)
        return True

    async def after_commit(self, state: ConnectionState, tx: LocalTransaction) -> None:
        held = self._held.pop(tx.transaction_id, None)
        if held is not None:
            await self.schedule(held[1])

    def _forget_ended_transactions(self) -> None:
        """Drop what rolled-back transactions (or their closed connections) held."""
        for tid in [t for t, (state, _) in self._held.items() if t not in state.transactions]:
            del self._held[tid]

    async def schedule(self, messages: list[Message]) -> list[str]:
        """Make jobs of messages; durable when this returns. Their ids, in order."""
        now = self.clock()
        jobs = []
        for message in messages:
            schedule = read_schedule(message.properties)
            job_id = self._job_id(message)
            start, first = first_fire_time(schedule, now)
            fresh_ids = schedule.repeat != 0 or bool(schedule.cron)
            copy = replace(message, redelivery_counter=0, sequence=0)
            jobs.append(StoredJob(
                job_id, copy, start, schedule.cron, schedule.delay, schedule.period,
                schedule.repeat, first, fresh_ids,
            ))  # fmt: skip
        await self.store.write(added=jobs)
        for job in jobs:
            self._put(job)
        self._wakeup.set()
        return [job.job_id for job in jobs]

    def _job_id(self, message: Message) -> str:
        """As ActiveMQ: the sending producer's id and a counter, in a message id's form."""
        producer = message.message_id.rpartition(":")[0] or message.producer_id or "ID:"
        return f"{producer}:{next(self._job_seq)}"

    def _put(self, job: StoredJob) -> None:
        self._jobs[job.job_id] = job
        order = next(self._order)
        self._job_order[job.job_id] = order
        heapq.heappush(self._heap, (job.next_time, order, job.job_id))

    # -- firing ------------------------------------------------------------------------

    async def _run(self) -> None:
        while not self._stopping:
            try:
                due = self._take_due(self.clock())
                if due:
                    await self._fire_all(due)
                    continue
            except Exception:  # the loop must go on; the trace says what failed
                log.exception("scheduled delivery failed")
            self._wakeup.clear()
            timeout = None
            if self._heap:
                timeout = max(0.0, (self._heap[0][0] - self.clock()) / 1000)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wakeup.wait(), timeout)

    def _take_due(self, now: int) -> list[StoredJob]:
        due = []
        while self._heap and self._heap[0][0] <= now:
            time, order, job_id = heapq.heappop(self._heap)
            job = self._jobs.get(job_id)
            if job is not None and job.next_time == time and self._job_order[job_id] == order:
                due.append(job)
        return due

    async def _fire_all(self, due: list[StoredJob]) -> None:
        """Fire what is due (JobSchedulerImpl.mainLoop), then record the jobs' new state."""
        now = self.clock()
        added: list[StoredJob] = []
        rescheduled: list[StoredJob] = []
        removed: list[str] = []
        for job in due:
            if not job.cron or job.repeat == 0:
                await self._deliver(job, now)
            if self._jobs.get(job.job_id) is not job:
                continue  # removed while it was being delivered
            job.fired += 1
            if job.cron:
                job.next_time = next_cron_time(job.cron, now)
                rescheduled.append(job)
                if job.repeat != 0:
                    added.append(self._spawn(job, now))
            elif job.repeat != 0:
                job.next_time = now + job.period
                if job.repeat > 0:
                    job.repeat -= 1
                rescheduled.append(job)
            else:
                del self._jobs[job.job_id]
                del self._job_order[job.job_id]
                removed.append(job.job_id)
        for job in rescheduled + added:
            self._put(job)
        await self.store.write(added, rescheduled, removed)

    def _spawn(self, cron_job: StoredJob, now: int) -> StoredJob:
        """A cron job with a repeat starts a job of its delay, period and repeat."""
        schedule = Schedule(cron_job.delay, cron_job.period, cron_job.repeat)
        start, first = first_fire_time(schedule, now)
        return StoredJob(
            f"{self._producer}:{next(self._job_seq)}", cron_job.message, start, "",
            schedule.delay, schedule.period, schedule.repeat, first, True,
        )  # fmt: skip

    async def _deliver(self, job: StoredJob, now: int) -> None:
        message_id = job.message.message_id
        if job.fresh_ids:
            message_id = f"{self._producer}:{next(self._copy_seq)}"
        copy = delivered_copy(job, message_id, now)
        try:
            # (publish refuses a temporary destination gone with its connection since.)
            await self.broker.publish(copy)
        except DovecoteError as exc:
            log.error("scheduled message of job %s not delivered: %s", job.job_id, exc)

    # -- management and the admin view ---------------------------------------------------

    def jobs(self, start: int | None = None, end: int | None = None) -> list[StoredJob]:
        """The jobs, by next fire time (and then age); within [start, end] when given."""
        order = self._job_order
        ordered = sorted(self._jobs.values(), key=lambda j: (j.next_time, order[j.job_id]))
        if start is None or end is None:
            return ordered
        return [j for j in ordered if start <= j.next_time <= end]

    def views(self, start: int | None = None, end: int | None = None) -> list[JobView]:
        return [
            JobView(
                j.job_id, j.message.destination, j.message.message_id, j.next_time, j.start,
                j.delay, j.period, j.repeat, j.cron, j.message.persistent, len(j.message.body),
            )
            for j in self.jobs(start, end)
        ]  # fmt: skip

    async def remove(self, job_id: str) -> bool:
        """Cancel one job; False when there is none of that id."""
        if self._jobs.pop(job_id, None) is None:
            return False
        del self._job_order[job_id]
        await self.store.write(removed=[job_id])
        return True

    async def remove_all(self, start: int | None = None, end: int | None = None) -> int:
        """Cancel every job (within [start, end] of next fire times when both are given)."""
        gone = [j.job_id for j in self.jobs(start, end)]
        for job_id in gone:
            del self._jobs[job_id]
            del self._job_order[job_id]
        await self.store.write(removed=gone)
        return len(gone)

    async def _manage(self, request: Message) -> None:
        """A message to ActiveMQ.Scheduler.Management: act on it; route nothing."""
        properties = request.properties
        action = properties.get(ACTION)
        if action is None:
            return
        if not isinstance(action, str):
            raise ScheduleError(f"{ACTION} must be a string, not {_java_type(action)}")
        start, end = _time_range(properties)
        if request.reply_to is not None and action == "BROWSE":
            replies = [self._browse_copy(job, request.reply_to) for job in self.jobs(start, end)]
            await self.broker.deliver(replies)
        job_id = properties.get(JOB_ID)
        if job_id is not None and not isinstance(job_id, str):
            raise ScheduleError(f"{JOB_ID} must be a string, not {_java_type(job_id)}")
        if job_id is not None and action == "REMOVE":
            await self.remove(job_id)
        elif action == "REMOVEALL":
            await self.remove_all(start, end)

    def _browse_copy(self, job: StoredJob, reply_to: Destination) -> Message:
        m = job.message
        return replace(
            m, message_id=f"{self._producer}:{next(self._copy_seq)}", destination=reply_to,
            persistent=False, type="Advisory", original_destination=m.destination,
            producer_id=self._producer, properties={**m.properties, JOB_ID: job.job_id},
            redelivery_counter=0, sequence=0,
        )  # fmt: skip


def _time_range(properties: Mapping[str, PropertyValue]) -> tuple[int | None, int | None]:
    """ACTION_START_TIME and ACTION_END_TIME, when both are there."""
    start, end = properties.get(START_TIME), properties.get(END_TIME)
    if start is None or end is None:
        return None, None
    return java_long(START_TIME, start), java_long(END_TIME, end)
