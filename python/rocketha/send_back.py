"""A consumer hands back a message it failed: RocketMQ's ``sendMessageBack``.

:meth:`SendBack.send_back` asks the broker that stored the message (``CONSUMER_SEND_MSG_BACK``,
naming it by its commit-log offset) to schedule it in the group's retry topic
``%RETRY%<group>`` after a delay level, or to put it in the dead-letter queue ``%DLQ%<group>``
once it was consumed ``max_reconsume_times`` times (or when the level is negative). When that
request fails, the message is sent again as a new message to the retry topic, carrying what
the broker would have stamped (``RETRY_TOPIC``, ``ORIGIN_MESSAGE_ID``, the reconsume count and
its bound, delay level ``3 + reconsumeTimes``), as ``sendMessageBackAsNormalMessage`` does
through the client's inner producer. Only when both fail does :meth:`SendBack.send_back` raise:
the caller must then keep the message (a push consumer consumes it again later and commits
nothing past it).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from typing import Any

from rocketha._core import Message, MessageExt, MQClientAPI
from rocketha.client import PROPERTY_DELAY_TIME_LEVEL, Producer
from rocketha.exceptions import MQBrokerError, MQClientError, RocketHAError
from rocketha.process_queue import MASTER_ID
from rocketha.rebalance import SubscribeInfo

log = logging.getLogger("rocketha.consumer")

#: ``MixAll.RETRY_GROUP_TOPIC_PREFIX`` and ``DLQ_GROUP_TOPIC_PREFIX``.
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
#: ``DefaultMQPushConsumer.maxReconsumeTimes`` when unset (-1): 16.
DEFAULT_MAX_RECONSUME_TIMES = 16
#: ``MessageConst`` properties a send-back reads or stamps.
PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"
PROPERTY_ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
PROPERTY_RECONSUME_TIME = "RECONSUME_TIME"
PROPERTY_MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"
PROPERTY_UNIQ_KEY = "UNIQ_KEY"
#: ``MixAll.CLIENT_INNER_PRODUCER_GROUP``: the group of the fallback sends.
CLIENT_INNER_PRODUCER_GROUP = "CLIENT_INNER_PRODUCER"
_SUCCESS = 0


def retry_topic(group: str) -> str:
    """``MixAll.getRetryTopic``."""
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    """``MixAll.getDLQTopic``."""
    return DLQ_GROUP_TOPIC_PREFIX + group


def client_msg_id(msg: MessageExt) -> str:
    """``MessageClientExt.getMsgId``: the producer's ``UNIQ_KEY``, else the offset id."""
    return msg.properties.get(PROPERTY_UNIQ_KEY) or msg.msg_id


def restore_retry_topic(msg: MessageExt, group: str) -> MessageExt:
    """``resetRetryAndNamespace``: a message of the group's retry topic shows its original
    topic (``RETRY_TOPIC``) to the handler; any other is returned as it is."""
    original = msg.properties.get(PROPERTY_RETRY_TOPIC)
    if original and msg.topic == retry_topic(group):
        return msg.with_topic(original)
    return msg


def send_back_target(
    routes: Iterable[SubscribeInfo], msg: MessageExt, broker_name: str | None = None
) -> tuple[str, str | None]:
    """Where a send-back goes, as ``findBrokerAddressInPublish``: the master of the message's
    broker group (``broker_name``, else the group one of whose brokers stored it), else the
    message's store host, the broker that wrote it."""
    for info in routes:
        for name, by_id in info.broker_addrs.items():
            if name == broker_name or (broker_name is None and msg.store_host in by_id.values()):
                master = by_id.get(MASTER_ID)
                if master is not None:
                    return master, name
                return msg.store_host, name
    return msg.store_host, broker_name


def check_max_reconsume_times(value: int | None) -> int:
    """The bound a send-back carries: RocketMQ's 16 unless given (-1 also means 16)."""
    if value is None or value == -1:
        return DEFAULT_MAX_RECONSUME_TIMES
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise MQClientError(f"max_reconsume_times must be an int >= 0 (or -1: 16), got {value!r}")
    return value


def retry_message(msg: MessageExt, group: str, max_reconsume_times: int) -> Message:
    """``sendMessageBackAsNormalMessage``: ``msg`` as a new message of the group's retry topic,
    stamped as the broker's send-back would."""
    properties: dict[str, object] = dict(msg.properties)
    properties.setdefault(PROPERTY_ORIGIN_MESSAGE_ID, client_msg_id(msg))
    properties[PROPERTY_RETRY_TOPIC] = msg.topic
    properties[PROPERTY_RECONSUME_TIME] = str(msg.reconsume_times + 1)
    properties[PROPERTY_MAX_RECONSUME_TIMES] = str(max_reconsume_times)
    properties.pop(PROPERTY_TRANSACTION_PREPARED, None)
    properties[PROPERTY_DELAY_TIME_LEVEL] = str(3 + msg.reconsume_times)
    return Message(retry_topic(group), msg.body, properties=properties, flag=msg.flag)


#: The consumer options its inner producer takes too: it connects as the consumer does.
_PRODUCER_OPTIONS = (
    "client_ip",
    "use_tls",
    "tls_trust_cert_path",
    "tls_verify",
    "tls_cert_path",
    "tls_key_path",
    "credentials",
)


def producer_options(consumer_options: dict[str, Any]) -> dict[str, Any]:
    """The inner producer's options out of a consumer's (its constructor's ``locals()``),
    with ``request_timeout`` as the send timeout."""
    options = {k: consumer_options[k] for k in _PRODUCER_OPTIONS}
    options["send_timeout"] = consumer_options["request_timeout"]
    return options


class SendBack:
    """``sendMessageBack`` for one consumer group: the request to the broker, then the
    fallback send through an inner producer (:func:`producer_options`), made on first need."""

    def __init__(
        self, api: MQClientAPI, group: str, namesrv_addr: str, options: dict[str, Any]
    ) -> None:
        self._api = api
        self.group = group
        self._namesrv_addr = namesrv_addr
        self._options = options
        self._timeout: float = options["send_timeout"]
        self._producer: Producer | None = None
        self._lock = threading.Lock()
        self._closed = False

    def request(
        self,
        msg: MessageExt,
        addr: str,
        broker_name: str | None,
        delay_level: int,
        max_reconsume_times: int,
    ) -> None:
        """``MQClientAPIImpl.consumerSendMessageBack``: raises :class:`MQBrokerError` with the
        broker's code and remark when it refuses."""
        code, remark = self._api.consumer_send_message_back(
            addr,
            offset=msg.commitlog_offset,
            group=self.group,
            delay_level=delay_level,
            origin_msg_id=client_msg_id(msg),
            origin_topic=msg.topic,
            max_reconsume_times=max_reconsume_times,
            broker_name=broker_name,
            timeout=self._timeout,
        )
        if code != _SUCCESS:
            raise MQBrokerError(code, remark or "", addr)

    def send_back(
        self,
        msg: MessageExt,
        addr: str,
        broker_name: str | None,
        delay_level: int = 0,
        max_reconsume_times: int | None = None,
    ) -> None:
        """``msg`` comes again through ``%RETRY%<group>`` after ``delay_level`` (0: the
        broker's ``3 + reconsume_times``), or goes to ``%DLQ%<group>`` (a negative level, or
        consumed ``max_reconsume_times`` times, 16 unless given): asked of the broker at
        ``addr``, else sent to the retry topic as a new message. Raises when both failed."""
        if isinstance(delay_level, bool) or not isinstance(delay_level, int):
            raise MQClientError(f"delay_level must be an int, got {delay_level!r}")
        bound = check_max_reconsume_times(max_reconsume_times)
        try:
            self.request(msg, addr, broker_name, delay_level, bound)
            return
        except RocketHAError as e:
            log.warning(
                "group %s: sending back %s (%s, queue offset %d) to %s failed (%s); sending it "
                "to %s as a new message",
                self.group,
                client_msg_id(msg),
                msg.topic,
                msg.queue_offset,
                addr,
                e,
                retry_topic(self.group),
            )
            first = e
        try:
            self._inner_producer().send(retry_message(msg, self.group, bound))
        except RocketHAError as e:
            raise MQClientError(
                f"group {self.group}: message {client_msg_id(msg)} could not be sent back "
                f"({first}) nor to {retry_topic(self.group)} ({e})"
            ) from e

    def _inner_producer(self) -> Producer:
        with self._lock:
            if self._closed:
                raise MQClientError("the consumer was closed")
            if self._producer is None:
                self._producer = Producer(
                    self._namesrv_addr, CLIENT_INNER_PRODUCER_GROUP, **self._options
                )
            return self._producer

    def close(self) -> None:
        with self._lock:
            self._closed = True
            producer, self._producer = self._producer, None
        if producer is not None:
            producer.shutdown()


__all__ = [
    "CLIENT_INNER_PRODUCER_GROUP",
    "DEFAULT_MAX_RECONSUME_TIMES",
    "SendBack",
    "check_max_reconsume_times",
    "dlq_topic",
    "producer_options",
    "restore_retry_topic",
    "retry_message",
    "retry_topic",
    "send_back_target",
]
