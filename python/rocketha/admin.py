"""The administration side of a RocketMQ client (``DefaultMQAdminExt``), for programs without
Java, against rocketha's brokers and RocketMQ's alike: topics and consumer groups created,
listed and deleted, a group's progress and lag per queue, its offsets reset to a time, a
broker's config read and changed at runtime, and messages found by key or by msgId.

    >>> with Admin("127.0.0.1:9876") as admin:          # doctest: +SKIP
    ...     admin.create_topic("orders", queues=8)
    ...     for q in admin.consumer_progress("billing"):
    ...         print(q.topic, q.broker_name, q.queue_id, q.lag)
    ...     for msg in admin.find("orders", "ORDER-42"):
    ...         print(msg.queue_id, msg.queue_offset, msg.body)
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rocketha._core import MessageExt, standard_json
from rocketha.acl import SessionCredentials, mq_client_api
from rocketha.client import check_topic, check_topic_name, namesrv_addrs
from rocketha.exceptions import MQBrokerError, MQClientError, RemotingConnectError

#: ``Long.MAX_VALUE``: no upper bound on the store time.
_FOREVER = 2**63 - 1
#: ``maxMsgsNumBatch``: the most messages one broker answers a key query with.
MAX_QUERY_NUM = 64
#: ``MixAll.MASTER_ID``.
_MASTER_ID = 0
#: ``ResponseCode.CONSUMER_NOT_ONLINE``.
_CONSUMER_NOT_ONLINE = 206
#: ``PermName``: read and write.
PERM_READ_WRITE = 6


class _Code:
    """The request codes (``RequestCode``) these operations send."""

    UPDATE_CONSUMER_OFFSET = 15
    QUERY_CONSUMER_OFFSET = 14
    UPDATE_AND_CREATE_TOPIC = 17
    UPDATE_BROKER_CONFIG = 25
    GET_BROKER_CONFIG = 26
    SEARCH_OFFSET_BY_TIMESTAMP = 29
    GET_MAX_OFFSET = 30
    GET_ALL_CONSUMER_OFFSET = 43
    GET_TIMER_CHECK_POINT = 60
    GET_TIMER_METRICS = 61
    GET_BROKER_CLUSTER_INFO = 106
    UPDATE_AND_CREATE_SUBSCRIPTIONGROUP = 200
    GET_ALL_SUBSCRIPTIONGROUP_CONFIG = 201
    GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206
    DELETE_SUBSCRIPTIONGROUP = 207
    DELETE_TOPIC_IN_BROKER = 215
    DELETE_TOPIC_IN_NAMESRV = 216
    INVOKE_BROKER_TO_RESET_OFFSET = 222
    GET_TOPIC_CONFIG = 351


@dataclass(frozen=True)
class QueueProgress:
    """One queue of a consumer group's progress (a row of ``mqadmin consumerProgress``)."""

    topic: str
    broker_name: str
    queue_id: int
    #: The queue's max offset: where the next message will go.
    broker_offset: int
    #: The group's committed offset: the next message it will read.
    consumer_offset: int

    @property
    def lag(self) -> int:
        """Messages stored and not yet consumed (``Diff``)."""
        return max(0, self.broker_offset - self.consumer_offset)


class Admin:
    """Finds messages as ``mqadmin queryMsgByKey`` and ``queryMsgByUniqueKey`` do: a
    QUERY_MESSAGE to each broker group of the topic (its master, or a slave when the master is
    down), answered from the broker's index of ``KEYS`` and ``UNIQ_KEY``."""

    def __init__(
        self,
        namesrv_addr: str,
        *,
        timeout: float = 3.0,
        client_ip: str = "127.0.0.1",
        credentials: SessionCredentials | None = None,
    ) -> None:
        self.namesrv_addrs = namesrv_addrs(namesrv_addr)
        self.timeout = timeout
        self._api = mq_client_api(client_ip, credentials)

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._api.close()

    # -- the cluster ---------------------------------------------------------------------------

    def clusters(self) -> dict[str, dict[str, dict[int, str]]]:
        """``mqadmin clusterList``: cluster -> broker name -> broker id -> address."""
        info = self._ask_namesrv(_Code.GET_BROKER_CLUSTER_INFO, {})
        brokers = info.get("brokerAddrTable") or {}
        out: dict[str, dict[str, dict[int, str]]] = {}
        for cluster, names in (info.get("clusterAddrTable") or {}).items():
            out[cluster] = {
                name: {
                    int(i): a for i, a in (brokers.get(name, {}).get("brokerAddrs") or {}).items()
                }
                for name in sorted(names)
            }
        return out

    def masters(self, cluster: str | None = None) -> dict[str, str]:
        """Broker name -> master address, in ``cluster`` or in every cluster."""
        clusters = self.clusters()
        if cluster is not None and cluster not in clusters:
            raise MQClientError(
                f"no cluster {cluster!r}: the name servers know {sorted(clusters) or 'none'}"
            )
        return {
            name: ids[_MASTER_ID]
            for c, names in clusters.items()
            if cluster is None or c == cluster
            for name, ids in names.items()
            if _MASTER_ID in ids
        }

    # -- topics --------------------------------------------------------------------------------

    def topics(self) -> list[str]:
        """``mqadmin topicList``: every topic some broker registered, sorted."""
        body = self._ask_namesrv(_Code.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, {})
        return sorted(body.get("topicList") or [])

    def create_topic(
        self,
        topic: str,
        queues: int = 8,
        *,
        cluster: str | None = None,
        perm: int = PERM_READ_WRITE,
        order: bool = False,
        attributes: Mapping[str, str | None] | None = None,
    ) -> list[str]:
        """``mqadmin updateTopic -c``: creates ``topic`` (or updates its queues and permission)
        on every master of ``cluster`` (of every cluster when None); the masters' addresses.

        ``attributes`` (``updateTopic -a``) sets RocketMQ 5's topic attributes, a None value
        deleting one: ``{"message.type": "DELAY"}`` makes it a topic for delayed messages.
        Those not named keep their values. The broker checks keys and values (``message.type``
        is one of NORMAL, FIFO, DELAY, TRANSACTION, MIXED, UNSPECIFIED) and refuses a bad one
        with :class:`MQBrokerError` naming it."""
        check_topic(topic)
        if queues < 1:
            raise ValueError(f"queues must be at least 1, got {queues}")
        fields = {
            "topic": topic,
            "defaultTopic": "TBW102",
            "readQueueNums": str(queues),
            "writeQueueNums": str(queues),
            "perm": str(perm),
            "topicFilterType": "SINGLE_TAG",
            "topicSysFlag": "0",
            "order": str(order).lower(),
        }
        if attributes:
            fields["attributes"] = _attributes_text(attributes)
        addrs = self._masters_or_fail(cluster)
        for addr in addrs:
            self._ask(addr, _Code.UPDATE_AND_CREATE_TOPIC, fields)
        return addrs

    def topic_config(self, broker_addr: str, topic: str) -> dict[str, Any]:
        """``examineTopicConfig``: the topic's config on one broker, as RocketMQ's
        ``TopicConfig`` (``readQueueNums``, ``writeQueueNums``, ``perm``, ``order``,
        ``attributes``, ...)."""
        check_topic_name(topic)
        return self._ask(broker_addr, _Code.GET_TOPIC_CONFIG, {"topic": topic})

    def delete_topic(self, topic: str, *, cluster: str | None = None) -> None:
        """``mqadmin deleteTopic``: the masters of ``cluster`` forget the topic, its queues and
        its consumers' offsets, then the name servers stop routing it."""
        check_topic_name(topic)
        for addr in self._masters_or_fail(cluster):
            self._ask(addr, _Code.DELETE_TOPIC_IN_BROKER, {"topic": topic})
        fields = {"topic": topic} if cluster is None else {"topic": topic, "clusterName": cluster}
        for addr in self.namesrv_addrs:
            self._ask(addr, _Code.DELETE_TOPIC_IN_NAMESRV, fields)

    # -- consumer groups -----------------------------------------------------------------------

    def groups(self, cluster: str | None = None) -> list[str]:
        """The subscription groups the masters know (retry and system groups included)."""
        names: set[str] = set()
        for addr in self.masters(cluster).values():
            body = self._ask(addr, _Code.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, {})
            names.update((body.get("subscriptionGroupTable") or {}).keys())
        return sorted(names)

    def create_group(
        self,
        group: str,
        *,
        cluster: str | None = None,
        retry_max_times: int = 16,
        retry_queue_nums: int = 1,
        consume_enable: bool = True,
        orderly: bool = False,
        broadcast: bool = True,
    ) -> list[str]:
        """``mqadmin updateSubGroup``: creates or updates ``group`` on every master of
        ``cluster``; the masters' addresses."""
        config = {
            "groupName": group,
            "consumeEnable": consume_enable,
            "consumeFromMinEnable": True,
            "consumeBroadcastEnable": broadcast,
            "consumeMessageOrderly": orderly,
            "retryQueueNums": retry_queue_nums,
            "retryMaxTimes": retry_max_times,
            "brokerId": _MASTER_ID,
            "whichBrokerWhenConsumeSlowly": 1,
            "notifyConsumerIdsChangedEnable": True,
        }
        body = json.dumps(config).encode()
        addrs = self._masters_or_fail(cluster)
        for addr in addrs:
            self._ask(addr, _Code.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, body)
        return addrs

    def delete_group(
        self, group: str, *, cluster: str | None = None, clean_offset: bool = True
    ) -> None:
        """``mqadmin deleteSubGroup``: the masters forget ``group`` (and its committed offsets
        unless ``clean_offset`` is False)."""
        fields = {"groupName": group, "cleanOffset": str(clean_offset).lower()}
        for addr in self._masters_or_fail(cluster):
            self._ask(addr, _Code.DELETE_SUBSCRIPTIONGROUP, fields)

    def consumer_progress(self, group: str, *, cluster: str | None = None) -> list[QueueProgress]:
        """``mqadmin consumerProgress -g``: each queue of the topics ``group`` committed an
        offset in (a queue it never committed in at offset 0, as RocketMQ's consume stats
        count it), with the queue's max offset and the lag, ordered by topic, broker and
        queue."""
        out = []
        for name, addr in sorted(self.masters(cluster).items()):
            committed = {(t, q): o for t, q, o in self._committed(addr, group)}
            for topic in sorted({t for t, _ in committed}):
                try:
                    queue_ids = self._queue_ids(topic, name)
                except MQClientError:  # no longer routed: what the group committed in
                    queue_ids = sorted(q for t, q in committed if t == topic)
                for queue_id in queue_ids:
                    fields = {"topic": topic, "queueId": str(queue_id)}
                    head = int(self._ask_fields(addr, _Code.GET_MAX_OFFSET, fields)["offset"])
                    offset = committed.get((topic, queue_id), 0)
                    out.append(QueueProgress(topic, name, queue_id, head, offset))
        return sorted(out, key=lambda q: (q.topic, q.broker_name, q.queue_id))

    def reset_offset(
        self, group: str, topic: str, timestamp_ms: int, *, cluster: str | None = None
    ) -> dict[tuple[str, int], int]:
        """``mqadmin resetOffsetByTime``: each queue of ``topic`` on the masters of ``cluster``
        to its first message stored at or after ``timestamp_ms`` (-1: past the last), whether
        the group's consumers run or not. The brokers set the offsets and move each running
        consumer at its next pull (RocketMQ 5's server-side reset); a broker that asks its
        consumers to do it (RocketMQ 4) and has none online gets the offsets committed
        instead, as mqadmin does. (broker name, queue id) -> new offset."""
        check_topic_name(topic)
        masters = self._masters_or_fail_named(cluster)
        fields = {"topic": topic, "group": group, "timestamp": str(timestamp_ms), "isForce": "true"}
        reset: dict[tuple[str, int], int] = {}
        for name, addr in sorted(masters.items()):
            queue_ids = self._queue_ids(topic, name)
            if not queue_ids:
                continue
            try:
                self._invoke(addr, _Code.INVOKE_BROKER_TO_RESET_OFFSET, fields)
            except MQBrokerError as e:
                if e.code != _CONSUMER_NOT_ONLINE:
                    raise
                self._commit_by_time(addr, group, topic, queue_ids, timestamp_ms)
            for t, queue_id, offset in self._committed(addr, group):
                if t == topic:
                    reset[(name, queue_id)] = offset
        return reset

    def _commit_by_time(
        self, addr: str, group: str, topic: str, queue_ids: list[int], timestamp_ms: int
    ) -> None:
        """``resetOffsetByTimestampOld``: each queue's offset at the time, committed."""
        for queue_id in queue_ids:
            queue = {"topic": topic, "queueId": str(queue_id)}
            if timestamp_ms < 0:
                found = self._ask_fields(addr, _Code.GET_MAX_OFFSET, queue)
            else:
                at = {**queue, "timestamp": str(timestamp_ms)}
                found = self._ask_fields(addr, _Code.SEARCH_OFFSET_BY_TIMESTAMP, at)
            commit = {**queue, "consumerGroup": group, "commitOffset": found["offset"]}
            self._invoke(addr, _Code.UPDATE_CONSUMER_OFFSET, commit)

    # -- broker config -------------------------------------------------------------------------

    def broker_config(self, broker_addr: str) -> dict[str, str]:
        """``mqadmin getBrokerConfig``: every key of the broker's running config."""
        text = self._invoke(broker_addr, _Code.GET_BROKER_CONFIG, {})[3].decode()
        pairs = (line.split("=", 1) for line in text.splitlines() if "=" in line)
        return {k.strip(): v.strip() for k, v in pairs}

    def update_broker_config(self, broker_addr: str, changes: dict[str, Any]) -> None:
        """``mqadmin updateBrokerConfig``: changes keys of a running broker. A rocketha broker
        takes only the keys that act at once (``brokerPermission``, ``autoCreateTopicEnable``,
        ``autoCreateSubscriptionGroup``, ``slaveReadEnable``, ``maxMessageSize``) and refuses
        any update naming another, changing nothing."""
        if not changes:
            raise ValueError("no key to change")
        text = "".join(f"{k}={_java_text(v)}\n" for k, v in changes.items())
        self._invoke(broker_addr, _Code.UPDATE_BROKER_CONFIG, {}, text.encode())

    def timer_check_point(self, broker_addr: str) -> dict[str, int]:
        """GET_TIMER_CHECK_POINT (what a RocketMQ 5 slave syncs): how far the broker's timer
        delivered (``lastReadTimeMs``), its timer log's flushed end, how far it placed the timer
        topic's queue, and its master's."""
        raw = self._invoke(broker_addr, _Code.GET_TIMER_CHECK_POINT, {})[3]
        names = (
            "lastReadTimeMs",
            "lastTimerLogFlushPos",
            "lastTimerQueueOffset",
            "masterTimerQueueOffset",
            "stateVersion",
            "timestamp",
            "counter",
        )
        values = struct.unpack(f">{len(raw) // 8}q", raw[: len(raw) // 8 * 8])
        return dict(zip(names, values, strict=False))

    def timer_metrics(self, broker_addr: str) -> dict[str, int]:
        """GET_TIMER_METRICS: the timer messages waiting, per real topic."""
        body = json.loads(self._invoke(broker_addr, _Code.GET_TIMER_METRICS, {})[3])
        return {t: m["count"] for t, m in body.get("timingCount", {}).items()}

    # -- the wire ------------------------------------------------------------------------------

    def _invoke(
        self, addr: str, code: int, fields: dict[str, str], body: bytes = b""
    ) -> tuple[int, str | None, dict[str, str], bytes]:
        """One request; a refusal raises :class:`MQBrokerError` with the broker's code."""
        try:
            reply = self._api.invoke_admin(
                addr, code, ext_fields=fields, body=body, timeout=self.timeout
            )
        except RemotingConnectError as e:
            raise MQClientError(f"{addr}: {e}") from None
        if reply[0] != 0:
            raise MQBrokerError(reply[0], reply[1] or "", addr)
        return reply

    def _ask(
        self, addr: str, code: int, fields: dict[str, str], body: bytes = b""
    ) -> dict[str, Any]:
        """The answer's JSON body (fastjson's bare integer keys read too); {} for none."""
        raw = self._invoke(addr, code, fields, body)[3]
        return json.loads(standard_json(raw)) if raw else {}

    def _ask_fields(self, addr: str, code: int, fields: dict[str, str]) -> dict[str, str]:
        """The answer's header fields."""
        return self._invoke(addr, code, fields)[2]

    def _ask_namesrv(self, code: int, fields: dict[str, str]) -> dict[str, Any]:
        """The first name server's answer that comes."""
        failures = []
        for addr in self.namesrv_addrs:
            try:
                return self._ask(addr, code, fields)
            except MQClientError as e:
                failures.append(str(e))
        raise MQClientError(f"no name server answered: {'; '.join(failures)}")

    def _masters_or_fail_named(self, cluster: str | None) -> dict[str, str]:
        masters = self.masters(cluster)
        if not masters:
            raise MQClientError("no master is registered with the name servers")
        return masters

    def _masters_or_fail(self, cluster: str | None) -> list[str]:
        return sorted(self._masters_or_fail_named(cluster).values())

    def _committed(self, addr: str, group: str) -> list[tuple[str, int, int]]:
        """(topic, queue id, offset) of each offset ``group`` committed on the broker."""
        table = self._ask(addr, _Code.GET_ALL_CONSUMER_OFFSET, {}).get("offsetTable") or {}
        out: list[tuple[str, int, int]] = []
        for key, queues in table.items():
            topic, _, owner = key.rpartition("@")
            if owner == group:
                out.extend((topic, int(q), int(o)) for q, o in queues.items())
        return out

    def _queue_ids(self, topic: str, broker_name: str) -> list[int]:
        """The read queues ``topic`` has on the broker, from its route."""
        route = self._api.get_topic_route_info(";".join(self.namesrv_addrs), topic, self.timeout)
        if route is None:
            raise MQClientError(
                f"no route for topic {topic!r}: the name servers know no such topic"
            )
        for queue in json.loads(route).get("queueDatas") or []:
            if queue.get("brokerName") == broker_name:
                return list(range(int(queue["readQueueNums"])))
        return []

    def find(
        self,
        topic: str,
        key: str,
        *,
        begin: int = 0,
        end: int = _FOREVER,
        max_num: int = MAX_QUERY_NUM,
    ) -> list[MessageExt]:
        """Messages of ``topic`` with ``key`` among their keys, stored between ``begin`` and
        ``end`` (ms since the epoch), oldest first: up to ``max_num`` per broker group (a
        broker answers at most 64)."""
        found = self._query(topic, key, max_num, begin, end, unique=False)
        return [m for m in found if key in m.keys]

    def find_by_id(self, topic: str, msg_id: str) -> MessageExt | None:
        """The message whose msgId (``SendResult.msg_id``, its ``UNIQ_KEY``) is ``msg_id``."""
        found = self._query(topic, msg_id, 32, 0, _FOREVER, unique=True)
        return next((m for m in found if m.properties.get("UNIQ_KEY") == msg_id), None)

    def _query(
        self, topic: str, key: str, max_num: int, begin: int, end: int, *, unique: bool
    ) -> list[MessageExt]:
        check_topic(topic)
        if not key:
            raise ValueError("the key to find is empty")
        if begin > end:
            raise ValueError(f"begin {begin} is after end {end}")
        out: list[MessageExt] = []
        for addrs in self._brokers(topic):
            out.extend(self._ask_group(addrs, topic, key, max_num, begin, end, unique))
        return sorted(out, key=lambda m: (m.store_timestamp, m.store_host, m.commitlog_offset))

    def _ask_group(
        self,
        addrs: list[str],
        topic: str,
        key: str,
        max_num: int,
        begin: int,
        end: int,
        unique: bool,
    ) -> list[MessageExt]:
        """The group's answer from its master or, when that cannot be reached (dead, but still
        in the route until the name server notices), from its slaves in broker id order: each
        holds the index its replication built."""
        failures = []
        for addr in addrs:
            try:
                return self._api.query_message(
                    addr,
                    topic=topic,
                    key=key,
                    max_num=max_num,
                    begin=begin,
                    end=end,
                    unique=unique,
                    timeout=self.timeout,
                )
            except RemotingConnectError as e:
                failures.append(f"{addr}: {e}")
        raise MQClientError(f"no broker of the group could be asked: {'; '.join(failures)}")

    def _brokers(self, topic: str) -> list[list[str]]:
        """Per broker group of the topic, its addresses: the master first (RocketMQ's
        ``BrokerData.selectBrokerAddr``), then the slaves."""
        try:
            raw = self._api.get_topic_route_info(";".join(self.namesrv_addrs), topic, self.timeout)
        except RemotingConnectError as e:
            raise MQClientError(str(e)) from None
        if raw is None:
            raise MQClientError(
                f"no route for topic {topic!r}: the name servers know no such topic"
            )
        out = []
        for broker in json.loads(raw).get("brokerDatas") or []:
            addrs = {int(k): v for k, v in (broker.get("brokerAddrs") or {}).items()}
            if addrs:
                out.append([addrs[i] for i in sorted(addrs)])
        return out


def _attributes_text(attributes: Mapping[str, str | None]) -> str:
    """``AttributeParser.parseToString`` of the changes: ``+key=value`` sets, ``-key`` deletes."""
    return ",".join(f"-{k}" if v is None else f"+{k}={v}" for k, v in attributes.items())


def _java_text(value: object) -> str:
    """A value as a ``broker.conf`` holds it: Java's ``true``/``false`` for booleans."""
    return str(value).lower() if isinstance(value, bool) else str(value)


__all__ = ["MAX_QUERY_NUM", "PERM_READ_WRITE", "Admin", "QueueProgress"]
