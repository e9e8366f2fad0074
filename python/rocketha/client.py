"""Clients of a rocketha (or RocketMQ) cluster over RocketMQ's remoting protocol.

>>> with Producer("127.0.0.1:9876", "orders-producer") as producer:
...     result = producer.send(Message("orders", b"hello"))
...     result.status
<SendStatus.SEND_OK: 'SEND_OK'>

:class:`Producer` follows RocketMQ's ``DefaultMQProducer``: it looks the topic's route up on
the name server (``GET_ROUTEINFO_BY_TOPIC``), falls back to the ``TBW102`` template's route for
a topic nobody created yet (the broker then creates it, ``autoCreateTopicEnable``), picks the
writable queues of master brokers round-robin, and retries on another broker group when a send
could not be delivered. A send whose request went out but whose answer never came raises
:class:`SendStatusUnknownError` instead of being retried: it may have been stored, and a retry
could store it twice.

The wire side (connections, headers, batches, message ids) is Rust (``_core.MQClientAPI``);
every network wait releases the GIL. Message ids: each message gets a ``UNIQ_KEY`` as Java's
``MessageClientIDSetter`` makes them (IPv4, pid, a per-process number, time since the start
of the month, a counter), except that the month starts in UTC rather than the local zone.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import datetime
import itertools
import json
import logging
import os
import re
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TypedDict

from rocketha import _core
from rocketha._async_send import AsyncSendService, SendTuple
from rocketha._core import Message
from rocketha._events import cancel_stop_at_exit, stop_at_exit
from rocketha._service import ServiceThread, Woke
from rocketha.acl import SessionCredentials, mq_client_api
from rocketha.exceptions import (
    MQBrokerError,
    MQClientError,
    RemotingConnectError,
    SendStatusUnknownError,
)
from rocketha.tls import client_tls
from rocketha.transaction import (
    Check,
    Execute,
    TransactionChecker,
    TransactionState,
    end_fields,
    end_transaction,
    half_message,
    state_of,
)

log = logging.getLogger("rocketha.client")

#: ``TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC`` (``TBW102``).
AUTO_CREATE_TOPIC_KEY_TOPIC = _core.AUTO_CREATE_TOPIC_KEY_TOPIC
#: ``PermName.PERM_WRITE``.
_PERM_WRITE = 2
#: ``MixAll.MASTER_ID``.
_MASTER_ID = "0"
#: Response codes: stored, with a wait that fell short (``SendStatus`` other than SEND_OK).
_SUCCESS, _FLUSH_DISK_TIMEOUT, _SLAVE_NOT_AVAILABLE, _FLUSH_SLAVE_TIMEOUT = 0, 10, 11, 12
#: Broker answers worth trying another broker group for (busy, or not serving sends).
_RETRY_ELSEWHERE = {2, 14}
#: Seconds a looked-up route is used before asking the name server again
#: (``pollNameServerInterval``).
_ROUTE_TTL = 30.0
#: ``Validators``: the characters and length of a topic name, and the default most bytes of
#: a body (``DefaultMQProducer.maxMessageSize``, the broker's own default limit too).
_TOPIC_PATTERN = re.compile(r"^[%|a-zA-Z0-9_-]+$")
TOPIC_MAX_LENGTH = 127
MAX_MESSAGE_SIZE = 4 * 1024 * 1024
#: ``MessageConst.PROPERTY_DELAY_TIME_LEVEL`` and 5.x's ``PROPERTY_TIMER_DELIVER_MS``.
PROPERTY_DELAY_TIME_LEVEL = "DELAY"
PROPERTY_TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
#: 5.x's ``setDelayTimeMs``: delivered this many milliseconds after the broker stores it.
PROPERTY_TIMER_DELAY_MS = "TIMER_DELAY_MS"
#: ``RequestCode.RECALL_MESSAGE``.
RECALL_MESSAGE = 370
#: ``TopicValidator``'s system topics a producer may not send to, the template included.
NOT_ALLOWED_SEND_TOPICS = frozenset(
    [
        AUTO_CREATE_TOPIC_KEY_TOPIC,
        "SCHEDULE_TOPIC_XXXX",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRACE_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        "TRANS_CHECK_MAX_TIME_TOPIC",
        "SELF_TEST_TOPIC",
        "OFFSET_MOVED_EVENT",
    ]
)


def check_topic(topic: str) -> None:
    """``Validators.checkTopic`` and ``isNotAllowedSendTopic``: a bad name is refused here,
    as the Java client does, before anything travels to a broker."""
    check_topic_name(topic)
    if topic in NOT_ALLOWED_SEND_TOPICS:
        raise MQClientError(f"topic {topic!r} is a system topic; producers may not send to it")


def check_topic_name(topic: str) -> None:
    """``Validators.checkTopic``: a name a broker can hold (a consumer may still read a system
    topic, which :func:`check_topic` refuses to a producer)."""
    if not topic or not topic.strip():
        raise MQClientError("the topic name is blank")
    if len(topic) > TOPIC_MAX_LENGTH:
        raise MQClientError(
            f"topic {topic[:32]!r}...: {len(topic)} characters, longer than the most, "
            f"{TOPIC_MAX_LENGTH}"
        )
    if not _TOPIC_PATTERN.match(topic):
        raise MQClientError(
            f"topic {topic!r} contains characters other than letters, digits, '%', '|', '_' and '-'"
        )


def with_delivery(
    msg: Message,
    delay_level: int = 0,
    deliver_time_ms: int | None = None,
    *,
    deliver_at: datetime.datetime | float | None = None,
    delay: datetime.timedelta | float | None = None,
) -> Message:
    """``msg`` held back by the broker, by one of: ``delay_level`` (``setDelayTimeLevel``,
    property ``DELAY``: level n of the broker's ``messageDelayLevel``, a level beyond its last
    meaning its last); ``deliver_time_ms`` or ``deliver_at`` (5.x's ``setDeliverTimeMs``,
    ``TIMER_DELIVER_MS``: epoch milliseconds, or an aware ``datetime`` / epoch seconds as
    ``time.time()`` gives them); ``delay`` (``setDelayTimeMs``, ``TIMER_DELAY_MS``: a
    ``timedelta`` or seconds from when the broker stores it). A time not in the future is
    delivered at once, as RocketMQ's broker does; the broker refuses one past its
    ``timerMaxDelaySec``. One at most: a RocketMQ broker given a level and a time keeps the
    level and drops the time in silence, so two are refused here."""
    for name, value in (("delay_level", delay_level), ("deliver_time_ms", deliver_time_ms)):
        if (value is not None or name == "delay_level") and (
            isinstance(value, bool) or not isinstance(value, int)
        ):
            raise MQClientError(f"{name} must be an int, got {value!r}")
    if delay_level < 0:
        raise MQClientError(
            f"delay_level must be >= 0 (0: no delay; n: the broker's n-th messageDelayLevel), "
            f"got {delay_level}"
        )
    if deliver_time_ms is not None and deliver_time_ms < 0:
        raise MQClientError(
            f"deliver_time_ms is a time in epoch milliseconds, got {deliver_time_ms}"
        )
    given = [
        name
        for name, value in (
            ("delay_level", delay_level or None),
            ("deliver_time_ms", deliver_time_ms),
            ("deliver_at", deliver_at),
            ("delay", delay),
        )
        if value is not None
    ]
    if len(given) > 1:
        raise MQClientError(
            f"{' and '.join(given)} exclude each other: give one (a RocketMQ broker keeps a "
            "level and drops a time)"
        )
    if not given:
        return msg
    properties: dict[str, object] = dict(msg.properties)
    if delay_level:
        properties[PROPERTY_DELAY_TIME_LEVEL] = str(delay_level)
    elif deliver_time_ms is not None:
        properties[PROPERTY_TIMER_DELIVER_MS] = str(deliver_time_ms)
    elif deliver_at is not None:
        properties[PROPERTY_TIMER_DELIVER_MS] = str(_epoch_ms(deliver_at))
    else:
        properties[PROPERTY_TIMER_DELAY_MS] = str(_delay_ms(delay))
    return Message(msg.topic, msg.body, properties=properties, queue_id=msg.queue_id, flag=msg.flag)


def _epoch_ms(at: datetime.datetime | float) -> int:
    if isinstance(at, datetime.datetime):
        if at.tzinfo is None:
            raise MQClientError(
                f"deliver_at {at} has no time zone: give an aware datetime "
                "(datetime.now(timezone.utc) + ...), or epoch seconds"
            )
        return round(at.timestamp() * 1000)
    if isinstance(at, bool) or not isinstance(at, int | float):
        raise MQClientError(f"deliver_at must be a datetime or epoch seconds, got {at!r}")
    return round(at * 1000)


def _delay_ms(delay: datetime.timedelta | float | None) -> int:
    seconds = delay.total_seconds() if isinstance(delay, datetime.timedelta) else delay
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
        raise MQClientError(f"delay must be a timedelta or seconds, 0 or more, got {delay!r}")
    return round(seconds * 1000)


def delay_level_of(msg: Message) -> int:
    """``Message.getDelayTimeLevel``: 0 when the property is absent or not a number."""
    try:
        return int(msg.properties.get(PROPERTY_DELAY_TIME_LEVEL, "0"))
    except ValueError:
        return 0


def check_topic_names(topics: str | Sequence[str]) -> list[str]:
    """A consumer's topics: one name or several, at least one, each valid."""
    names = [topics] if isinstance(topics, str) else list(topics)
    if not names:
        raise MQClientError(f"topics: at least one topic name, got {topics!r}")
    for topic in names:
        check_topic_name(topic)
    return names


def namesrv_addrs(namesrv_addr: str) -> list[str]:
    """``namesrvAddr``'s ``;``-separated name servers; at least one."""
    addrs = [a.strip() for a in namesrv_addr.split(";") if a.strip()]
    if not addrs:
        raise MQClientError("namesrv_addr names no name server")
    return addrs


def check_messages(msgs: Sequence[Message], max_message_size: int = MAX_MESSAGE_SIZE) -> None:
    """``Validators.checkMessage`` for each message (its topic; a body neither empty nor over
    ``max_message_size`` bytes), and a batch's bodies together under the same limit."""
    for msg in msgs:
        check_topic(msg.topic)
        size = len(msg.body)
        if size == 0:
            raise MQClientError(f"topic {msg.topic}: the message body is empty")
        if size > max_message_size:
            raise MQClientError(
                f"topic {msg.topic}: the message body is {size} bytes, over the most, "
                f"{max_message_size} (maxMessageSize)"
            )
    total = sum(len(m.body) for m in msgs)
    if len(msgs) > 1 and total > max_message_size:
        raise MQClientError(
            f"the batch's bodies are {total} bytes together, over the most, {max_message_size} "
            "(maxMessageSize): send it in smaller batches"
        )


class SendStatus(StrEnum):
    """RocketMQ's ``SendStatus``: the message is stored in every case; the others say which
    wait fell short. ``str()`` is the bare name (``SEND_OK``), as for ``PutStatus``."""

    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


_STATUS_OF_CODE = {
    _SUCCESS: SendStatus.SEND_OK,
    _FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    _FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    _SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}


@dataclass(frozen=True)
class MessageQueue:
    topic: str
    broker_name: str
    queue_id: int


@dataclass(frozen=True)
class SendResult:
    """Where a send landed. ``msg_id`` is the client's ``UNIQ_KEY`` (comma-separated for a
    batch), ``offset_msg_id`` the broker's store host + commit log offset id."""

    status: SendStatus
    msg_id: str
    offset_msg_id: str
    queue: MessageQueue
    queue_offset: int
    #: A timer message's handle for :meth:`Producer.recall` (RocketMQ 5.5's
    #: ``SendResult.getRecallHandle``); ``None`` for other sends.
    recall_handle: str | None = None

    @property
    def queue_id(self) -> int:
        return self.queue.queue_id


@dataclass(frozen=True)
class TransactionSendResult:
    """``TransactionSendResult``: where the half message landed and what the local transaction
    said. ``transaction_id`` is its ``UNIQ_KEY``, what a check-back names."""

    send_result: SendResult
    transaction_id: str
    local_state: TransactionState


class _SendArgs(TypedDict):
    """What every send call names besides its address and messages."""

    producer_group: str
    queue_id: int
    timeout: float
    default_topic: str
    default_topic_queue_nums: int


@dataclass
class _PublishInfo:
    """``TopicPublishInfo``: the writable queues of master brokers, and their addresses."""

    queues: list[MessageQueue]
    master_addrs: dict[str, str]
    from_template: bool
    fetched: float


class Producer:
    """RocketMQ's ``DefaultMQProducer``, synchronous and asyncio. Thread-safe.

    ``use_tls=True`` (the Java client's ``useTLS``) speaks TLS to the name servers and the
    brokers alike; their certificates must chain to ``tls_trust_cert_path`` (PEM) and name the
    address dialled, unless ``tls_verify=False`` trusts any certificate (RocketMQ's
    ``tls.test.mode.enable``: encrypted, but anyone can answer). ``tls_cert_path`` and
    ``tls_key_path`` are the client's own certificate, for servers that ask for one
    (``tls.server.need.client.auth``).
    """

    def __init__(
        self,
        namesrv_addr: str,
        group: str = "DEFAULT_PRODUCER",
        *,
        send_timeout: float = 3.0,
        retry_times_when_send_failed: int = 2,
        default_topic_queue_nums: int = _core.DEFAULT_TOPIC_QUEUE_NUMS,
        max_message_size: int = MAX_MESSAGE_SIZE,
        client_ip: str = "127.0.0.1",
        heartbeat_broker_interval: float = 30.0,
        use_tls: bool = False,
        tls_trust_cert_path: str | None = None,
        tls_verify: bool = True,
        tls_cert_path: str | None = None,
        tls_key_path: str | None = None,
        credentials: SessionCredentials | None = None,
        check_transaction: Check | None = None,
    ) -> None:
        self.namesrv_addrs = namesrv_addrs(namesrv_addr)
        self.group = group
        self.send_timeout = send_timeout
        self.retry_times_when_send_failed = retry_times_when_send_failed
        self.default_topic_queue_nums = default_topic_queue_nums
        #: ``maxMessageSize``: bigger bodies are refused before they are sent (a broker
        #: refuses what is over its own ``maxMessageSize``).
        self.max_message_size = max_message_size
        self.heartbeat_broker_interval = heartbeat_broker_interval
        #: ``ClientConfig.buildMQClientId``: ip@instanceName, the instance named after the pid
        #: and a clock as ``changeInstanceNameToPID`` does.
        self.client_id = f"{client_ip}@{os.getpid()}#{time.monotonic_ns()}"
        self._api = mq_client_api(
            client_ip,
            credentials,
            client_tls(
                use_tls,
                trust_cert_path=tls_trust_cert_path,
                verify=tls_verify,
                cert_path=tls_cert_path,
                key_path=tls_key_path,
            ),
        )
        # Guards the route table, the known brokers and the services; the network calls run
        # outside it.
        self._lock = threading.Lock()
        self._routes: dict[str, _PublishInfo] = {}
        #: Master addresses of every route seen: where heartbeats go.
        self._brokers: set[str] = set()
        self._send_which_queue = itertools.count()
        self._async: AsyncSendService | None = None
        self._heartbeat: ServiceThread | None = None
        self._closed = threading.Event()
        #: Answers brokers' check-backs: ``check_transaction`` for a transaction this process
        #: did not send (before a restart), a send's own ``check`` for its own.
        self._checker = TransactionChecker(self._api, group, check_transaction, send_timeout)
        if check_transaction is not None:
            self._checker.start()
        stop_at_exit(self.shutdown)

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def shutdown(self) -> None:
        """Unregisters from every broker (``UNREGISTER_CLIENT``), closes the connections
        (sends in flight fail) and stops. A producer is not used after this."""
        cancel_stop_at_exit(self.shutdown)
        self._closed.set()
        with self._lock:
            self._routes.clear()
            brokers, self._brokers = sorted(self._brokers), set()
            heartbeat, self._heartbeat = self._heartbeat, None
            service, self._async = self._async, None
        if heartbeat is not None:
            heartbeat.shutdown(timeout=self.send_timeout + 1)
        self._checker.close()
        for addr in brokers:
            try:
                self._api.unregister_client(
                    addr, self.client_id, producer_group=self.group, timeout=self.send_timeout
                )
            except (RemotingConnectError, SendStatusUnknownError) as e:
                log.info("unregistering from %s failed: %s", addr, e)
        self._api.close()
        if service is not None:
            service.shutdown()

    def close(self) -> None:
        """:meth:`shutdown`."""
        self.shutdown()

    # -- heartbeats ------------------------------------------------------------------------

    def _heartbeat_to(self, addrs: list[str]) -> None:
        """``sendHeartbeatToAllBroker``: a failure is logged; the next round tries again."""
        for addr in addrs:
            try:
                self._api.send_heartbeat(addr, self.client_id, self.group, self.send_timeout)
            except (RemotingConnectError, SendStatusUnknownError) as e:
                log.warning("heartbeat to broker %s failed: %s", addr, e)

    def _heartbeat_loop(self, service: ServiceThread) -> None:
        while service.wait_for_running(self.heartbeat_broker_interval) is not Woke.STOPPED:
            with self._lock:
                brokers = sorted(self._brokers)
            self._heartbeat_to(brokers)

    def _learn_brokers(self, info: _PublishInfo) -> None:
        """A master seen for the first time gets a heartbeat before the first send, then one
        every ``heartbeat_broker_interval`` seconds."""
        with self._lock:
            if self._closed.is_set():
                raise MQClientError("the producer was shut down")
            new = sorted(set(info.master_addrs.values()) - self._brokers)
            self._brokers.update(new)
            if self._heartbeat is None:
                self._heartbeat = ServiceThread("rocketha-producer-heartbeat", self._heartbeat_loop)
                self._heartbeat.start()
        self._heartbeat_to(new)

    # -- routes ----------------------------------------------------------------------------

    def _query_route(self, topic: str) -> bytes | None:
        """The route from the first name server that answers, in ``namesrvAddr``'s order."""
        namesrv_addr = ";".join(self.namesrv_addrs)
        try:
            return self._api.get_topic_route_info(namesrv_addr, topic, self.send_timeout)
        except RemotingConnectError as e:
            raise MQClientError(str(e)) from None

    def _publish_info(self, topic: str) -> _PublishInfo:
        with self._lock:
            info = self._routes.get(topic)
        if (
            info is not None
            and not info.from_template
            and time.monotonic() - info.fetched < _ROUTE_TTL
        ):
            return info
        try:
            raw = self._query_route(topic)
        except MQClientError as e:
            if info is None or info.from_template:
                raise
            # As MQClientInstance keeps a route when no name server answers its refresh: the
            # brokers are likely still there. Ask again after another TTL, not on every send.
            log.warning("keeping the cached route of %s: %s", topic, e)
            stale = dataclasses.replace(info, fetched=time.monotonic())
            with self._lock:
                self._routes[topic] = stale
            return stale
        from_template = raw is None
        if raw is None:
            raw = self._query_route(AUTO_CREATE_TOPIC_KEY_TOPIC)
        if raw is None:
            raise MQClientError(
                f"no route info of topic {topic}: the name servers know no such topic, and no "
                f"broker offers {AUTO_CREATE_TOPIC_KEY_TOPIC} to create it "
                "(autoCreateTopicEnable=false): create the topic first"
            )
        info = _parse_route(topic, raw, from_template, self.default_topic_queue_nums)
        if not info.queues:
            raise MQClientError(f"topic {topic} has no writable queue on a master broker")
        self._learn_brokers(info)
        with self._lock:
            self._routes[topic] = info
        return info

    def _forget(self, topic: str) -> None:
        with self._lock:
            self._routes.pop(topic, None)

    def _select(
        self,
        info: _PublishInfo,
        last_broker: str | None,
        queue_id: int | None = None,
        sharding_key: str | None = None,
    ) -> MessageQueue:
        """``selectOneMessageQueue``: round-robin, avoiding the broker that just failed; only
        over the queues numbered ``queue_id`` (one per broker group) when it is given. A
        ``sharding_key`` picks one queue as ``SelectMessageQueueByHash`` does."""
        queues = info.queues
        if sharding_key is not None:
            return queues[abs(java_string_hash(sharding_key)) % len(queues)]
        if queue_id is not None:
            queues = [mq for mq in queues if mq.queue_id == queue_id]
            if not queues:
                raise MQClientError(
                    f"topic {info.queues[0].topic} has no writable queue {queue_id} (its "
                    f"groups' queues: {sorted({mq.queue_id for mq in info.queues})})"
                )
        start = next(self._send_which_queue)
        n = len(queues)
        for i in range(n):
            mq = queues[(start + i) % n]
            if mq.broker_name != last_broker:
                return mq
        return queues[start % n]

    # -- sends -----------------------------------------------------------------------------

    def send(
        self,
        msg: Message,
        *,
        delay_level: int = 0,
        deliver_time_ms: int | None = None,
        deliver_at: datetime.datetime | float | None = None,
        delay: datetime.timedelta | float | None = None,
        sharding_key: str | None = None,
    ) -> SendResult:
        """Sends one message and returns once the broker answered. ``delay_level``,
        ``deliver_time_ms``, ``deliver_at`` or ``delay`` hold it back: see
        :func:`with_delivery`. ``sharding_key`` sends
        it to the queue RocketMQ's ``SelectMessageQueueByHash`` picks for that key (Java's
        ``String.hashCode`` modulo the topic's writable queues), so one key's messages are in
        one queue in send order, for an orderly consumer; such a send is not retried on
        another queue, as ``send(msg, selector, arg)`` is not."""
        if sharding_key is not None and not isinstance(sharding_key, str):
            raise MQClientError(f"sharding_key must be a str, got {sharding_key!r}")
        held = with_delivery(msg, delay_level, deliver_time_ms, deliver_at=deliver_at, delay=delay)
        return self._send([held], None, sharding_key)

    def recall(self, topic: str, recall_handle: str) -> str:
        """``recallMessage`` (RECALL_MESSAGE, RocketMQ 5.5): cancels a timer message not
        delivered yet, by the :attr:`SendResult.recall_handle` its send returned; the
        message's id. The broker refuses (:class:`MQBrokerError`) a handle that is no handle,
        of another topic or broker, or of a message already delivered, and any recall while
        its ``recallMessageEnable`` is false (RocketMQ's default)."""
        try:
            raw = base64.urlsafe_b64decode(recall_handle.encode()).decode()
            broker_name = raw.split(" ")[2]
        except (ValueError, IndexError, UnicodeDecodeError):
            raise MQClientError(f"recall handle {recall_handle!r} is invalid") from None
        info = self._publish_info(topic)
        addr = info.master_addrs.get(broker_name)
        if addr is None:
            raise MQClientError(
                f"the recall handle names broker {broker_name}, which serves no queue of "
                f"topic {topic} now"
            )
        fields = {"producerGroup": self.group, "topic": topic, "recallHandle": recall_handle}
        code, remark, ext, _ = self._api.invoke_admin(
            addr, RECALL_MESSAGE, ext_fields=fields, body=b"", timeout=self.send_timeout
        )
        if code != 0:
            raise MQBrokerError(code, remark or "", addr)
        return ext.get("msgId", "")

    async def recall_async(self, topic: str, recall_handle: str) -> str:
        """:meth:`recall` for asyncio (a worker thread waits for the broker's answer)."""
        return await asyncio.to_thread(self.recall, topic, recall_handle)

    def send_batch(self, msgs: Sequence[Message], *, queue_id: int | None = None) -> SendResult:
        """Sends messages of one topic in one request (``SEND_BATCH_MESSAGE``) to one queue:
        the next in round-robin, or queue ``queue_id`` of a broker group that has it. Delay
        levels are refused, as ``MessageBatch`` refuses them (send those one by one)."""
        if not msgs:
            raise MQClientError("send_batch needs at least one message")
        if any(delay_level_of(m) > 0 for m in msgs):
            raise MQClientError(
                "a batch cannot hold delayed messages (property DELAY), as RocketMQ's "
                "MessageBatch refuses them: send them one by one with delay_level"
            )
        return self._send(list(msgs), queue_id)

    async def send_async(
        self,
        msg: Message,
        *,
        delay_level: int = 0,
        deliver_time_ms: int | None = None,
        deliver_at: datetime.datetime | float | None = None,
        delay: datetime.timedelta | float | None = None,
    ) -> SendResult:
        """:meth:`send` for asyncio (``send(msg, SendCallback)``): the request is queued on
        the broker's connection and the coroutine resumes when the Rust client matches the
        answer; hundreds of sends can be in flight on one connection. A route not cached yet
        is looked up in a worker thread."""
        msgs = [
            with_delivery(msg, delay_level, deliver_time_ms, deliver_at=deliver_at, delay=delay)
        ]
        check_messages(msgs, self.max_message_size)
        topic = msgs[0].topic
        last_broker: str | None = None
        last_error: Exception | None = None
        for attempt in range(1 + self.retry_times_when_send_failed):
            info = self._cached(topic)
            if info is None:
                info = await asyncio.to_thread(self._publish_info, topic)
            mq, addr = self._pick(info, last_broker)
            try:
                reply = await self._send_native(addr, msgs, mq)
            except RemotingConnectError as e:
                last_broker, last_error = self._not_sent(topic, mq, addr, attempt, e), e
                continue
            except SendStatusUnknownError as e:
                raise _unknown(mq, addr, e) from e
            outcome = self._outcome(topic, info, mq, addr, reply)
            if isinstance(outcome, SendResult):
                return outcome
            last_broker, last_error = mq.broker_name, outcome
        raise self._exhausted(topic, last_error)

    def send_in_transaction(
        self, msg: Message, execute: Execute, check: Check | None = None
    ) -> TransactionSendResult:
        """``sendMessageInTransaction``: stores ``msg`` as a half message, runs ``execute(msg)``
        (the local transaction), then commits or rolls back as it answers; see
        :mod:`rocketha.transaction`. ``check`` answers the broker's check-backs for this
        message (an UNKNOWN answer, or a producer that dies before its end). A half message the
        broker did not store with SEND_OK is rolled back without running ``execute``. If
        ``execute`` raises, nothing is ended (the broker checks back) and the error propagates.
        """
        result = self._send([half_message(msg, self.group)])
        if result.status is not SendStatus.SEND_OK:
            return self._end_in_transaction(msg, result, TransactionState.ROLLBACK)
        self._checker.expect(result.msg_id, check)
        return self._end_in_transaction(msg, result, execute(msg))

    async def send_in_transaction_async(
        self,
        msg: Message,
        execute: Callable[[Message], Awaitable[TransactionState]],
        check: Check | None = None,
    ) -> TransactionSendResult:
        """:meth:`send_in_transaction` for asyncio: ``execute`` is a coroutine function."""
        result = await self.send_async(half_message(msg, self.group))
        state: object = TransactionState.ROLLBACK
        if result.status is SendStatus.SEND_OK:
            self._checker.expect(result.msg_id, check)
            state = await execute(msg)
        return await asyncio.to_thread(self._end_in_transaction, msg, result, state)

    def _end_in_transaction(
        self, msg: Message, result: SendResult, outcome: object
    ) -> TransactionSendResult:
        """``endTransaction``: tells the broker that stored the half message its outcome."""
        state = state_of(outcome, "execute")
        if state is not TransactionState.UNKNOWN:
            addr = self._publish_info(msg.topic).master_addrs[result.queue.broker_name]
            end_transaction(
                self._api,
                addr,
                end_fields(self.group, result.msg_id, result.offset_msg_id, result.queue_offset),
                state,
                self.send_timeout,
            )
            self._checker.ended(result.msg_id)
        return TransactionSendResult(result, result.msg_id, state)

    def send_oneway(self, msg: Message) -> None:
        """``sendOneway``: the request is written and never answered; nothing says whether
        the broker stored it. One attempt, as RocketMQ makes."""
        check_messages([msg], self.max_message_size)
        _, mq, addr = self._route(msg.topic, None)
        self._api.send_message_oneway(addr, [msg], **self._send_args(mq))

    def _send_args(self, mq: MessageQueue) -> _SendArgs:
        return {
            "producer_group": self.group,
            "queue_id": mq.queue_id,
            "timeout": self.send_timeout,
            "default_topic": AUTO_CREATE_TOPIC_KEY_TOPIC,
            "default_topic_queue_nums": self.default_topic_queue_nums,
        }

    async def _send_native(self, addr: str, msgs: list[Message], mq: MessageQueue) -> SendTuple:
        with self._lock:
            if self._async is None:
                if self._closed.is_set():
                    raise MQClientError("the producer was shut down")
                self._async = AsyncSendService(self._api)
            service = self._async
        ticket = self._api.send_message_async(addr, msgs, **self._send_args(mq))
        return await service.register(ticket)

    def _cached(self, topic: str) -> _PublishInfo | None:
        with self._lock:
            info = self._routes.get(topic)
        if info is None or info.from_template or time.monotonic() - info.fetched >= _ROUTE_TTL:
            return None
        return info

    def _route(
        self,
        topic: str,
        last_broker: str | None,
        queue_id: int | None = None,
        sharding_key: str | None = None,
    ) -> tuple[_PublishInfo, MessageQueue, str]:
        info = self._publish_info(topic)
        return (info, *self._pick(info, last_broker, queue_id, sharding_key))

    def _pick(
        self,
        info: _PublishInfo,
        last_broker: str | None,
        queue_id: int | None = None,
        sharding_key: str | None = None,
    ) -> tuple[MessageQueue, str]:
        mq = self._select(info, last_broker, queue_id, sharding_key)
        return mq, info.master_addrs[mq.broker_name]

    def _not_sent(self, topic: str, mq: MessageQueue, addr: str, attempt: int, e: Exception) -> str:
        log.info("send to %s (%s) failed, attempt %d: %s", mq.broker_name, addr, attempt, e)
        self._forget(topic)
        return mq.broker_name

    def _outcome(
        self, topic: str, info: _PublishInfo, mq: MessageQueue, addr: str, reply: SendTuple
    ) -> SendResult | MQBrokerError:
        """The broker's answer: a result, or an error worth trying elsewhere (raised if not)."""
        code, remark, offset_id, queue_id, queue_offset, ids, recall_handle = reply
        status = _STATUS_OF_CODE.get(code)
        if status is not None:
            if info.from_template:
                # The broker created the topic and registers it: ask for its own route next.
                self._forget(topic)
            return SendResult(
                status,
                ",".join(ids),
                offset_id,
                MessageQueue(topic, mq.broker_name, queue_id),
                queue_offset,
                recall_handle,
            )
        error = MQBrokerError(code, remark or "", addr)
        if code in _RETRY_ELSEWHERE:
            return error
        raise error

    def _exhausted(self, topic: str, last_error: Exception | None) -> MQClientError:
        error = MQClientError(
            f"send to topic {topic} failed after {1 + self.retry_times_when_send_failed} "
            f"attempts: {last_error}"
        )
        error.__cause__ = last_error
        return error

    def _send(
        self, msgs: list[Message], queue_id: int | None = None, sharding_key: str | None = None
    ) -> SendResult:
        check_messages(msgs, self.max_message_size)
        topic = msgs[0].topic
        last_broker: str | None = None
        last_error: Exception | None = None
        retries = 0 if sharding_key is not None else self.retry_times_when_send_failed
        for attempt in range(1 + retries):
            info, mq, addr = self._route(topic, last_broker, queue_id, sharding_key)
            try:
                reply = self._api.send_message(addr, msgs, **self._send_args(mq))
            except RemotingConnectError as e:
                last_broker, last_error = self._not_sent(topic, mq, addr, attempt, e), e
                continue
            except SendStatusUnknownError as e:
                raise _unknown(mq, addr, e) from e
            outcome = self._outcome(topic, info, mq, addr, reply)
            if isinstance(outcome, SendResult):
                return outcome
            last_broker, last_error = mq.broker_name, outcome
        raise self._exhausted(topic, last_error)


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units, as a signed 32-bit int)."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def _unknown(mq: MessageQueue, addr: str, e: Exception) -> SendStatusUnknownError:
    return SendStatusUnknownError(
        f"sent to {mq.broker_name} ({addr}) but no answer came: the message may or "
        f"may not be stored; not retried, to avoid a duplicate ({e})"
    )


def _parse_route(topic: str, raw: bytes, from_template: bool, default_nums: int) -> _PublishInfo:
    """``topicRouteData2TopicPublishInfo``: write queues of brokers that have a master."""
    route = json.loads(raw)
    masters: dict[str, str] = {}
    for broker in route.get("brokerDatas") or []:
        addr = (broker.get("brokerAddrs") or {}).get(_MASTER_ID)
        if addr:
            masters[broker["brokerName"]] = addr
    queues: list[MessageQueue] = []
    for qd in sorted(route.get("queueDatas") or [], key=lambda q: q["brokerName"]):
        if not qd.get("perm", 0) & _PERM_WRITE or qd["brokerName"] not in masters:
            continue
        nums = qd["writeQueueNums"]
        if from_template:
            nums = min(nums, default_nums)
        queues.extend(MessageQueue(topic, qd["brokerName"], i) for i in range(nums))
    return _PublishInfo(queues, masters, from_template, time.monotonic())


__all__ = [
    "AUTO_CREATE_TOPIC_KEY_TOPIC",
    "MAX_MESSAGE_SIZE",
    "TOPIC_MAX_LENGTH",
    "MessageQueue",
    "Producer",
    "SendResult",
    "SendStatus",
    "check_messages",
    "check_topic",
    "check_topic_names",
    "namesrv_addrs",
    "with_delivery",
]
