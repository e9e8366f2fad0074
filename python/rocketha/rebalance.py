"""What a consumer reads and which of it is its own: RocketMQ's ``RebalanceImpl`` pieces.

:func:`parse_subscribe_route` turns a topic's route into the readable queues of every broker
group and the addresses of each group's brokers by id (``topicRouteData2TopicSubscribeInfo``);
:func:`allocate_message_queue_averagely` is ``AllocateMessageQueueAveragely``: the sorted
queues cut into contiguous runs, one per sorted consumer id, the first ``len(queues) %
len(cids)`` consumers taking one queue more.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from rocketha._core import MQClientAPI
from rocketha.client import MessageQueue

#: ``PermName.PERM_READ``.
_PERM_READ = 4


class ConsumeFromWhere(Enum):
    """Where a queue starts when the group has no committed offset for it."""

    CONSUME_FROM_LAST_OFFSET = "CONSUME_FROM_LAST_OFFSET"
    CONSUME_FROM_FIRST_OFFSET = "CONSUME_FROM_FIRST_OFFSET"
    CONSUME_FROM_TIMESTAMP = "CONSUME_FROM_TIMESTAMP"


@dataclass(frozen=True)
class SubscribeInfo:
    """A topic's readable queues and, per broker group, its brokers' addresses by id."""

    queues: list[MessageQueue]
    broker_addrs: dict[str, dict[int, str]]


def parse_subscribe_route(topic: str, raw: bytes) -> SubscribeInfo:
    """``topicRouteData2TopicSubscribeInfo``: read queues of every broker group the route
    lists, whether or not its master is alive (a slave serves pulls too)."""
    route = json.loads(raw)
    addrs: dict[str, dict[int, str]] = {}
    for broker in route.get("brokerDatas") or []:
        by_id = {int(k): v for k, v in (broker.get("brokerAddrs") or {}).items() if v}
        if by_id:
            addrs[broker["brokerName"]] = by_id
    queues = [
        MessageQueue(topic, qd["brokerName"], i)
        for qd in route.get("queueDatas") or []
        if qd.get("perm", 0) & _PERM_READ and qd["brokerName"] in addrs
        for i in range(qd["readQueueNums"])
    ]
    queues.sort(key=lambda q: (q.broker_name, q.queue_id))
    return SubscribeInfo(queues, addrs)


def allocate_message_queue_averagely(
    queues: Sequence[MessageQueue], cids: Sequence[str], current_cid: str
) -> list[MessageQueue]:
    """The queues ``current_cid`` consumes: both lists are sorted first, so every consumer of
    the group computes the same split. A consumer the broker does not list yet gets none."""
    ordered_cids = sorted(cids)
    if current_cid not in ordered_cids or not queues:
        return []
    ordered = sorted(queues, key=lambda q: (q.topic, q.broker_name, q.queue_id))
    index = ordered_cids.index(current_cid)
    share, extra = divmod(len(ordered), len(ordered_cids))
    if index < extra:
        start, size = index * (share + 1), share + 1
    else:
        start, size = extra * (share + 1) + (index - extra) * share, share
    return ordered[start : start + size]


def queue_key(mq: MessageQueue) -> tuple[str, str, int]:
    """The order every consumer of a group sorts queues in."""
    return (mq.topic, mq.broker_name, mq.queue_id)


def compute_pull_from_where(
    api: MQClientAPI,
    addr: str,
    group: str,
    mq: MessageQueue,
    where: ConsumeFromWhere,
    timestamp: int,
    timeout: float,
) -> int:
    """``computePullFromWhere``: the group's committed offset of ``mq`` on the broker at
    ``addr``, else where ``where`` says (``timestamp`` in ms for CONSUME_FROM_TIMESTAMP)."""
    offset = api.query_consumer_offset(addr, group, mq.topic, mq.queue_id, timeout)
    if offset is not None and offset >= 0:
        return offset
    if where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET:
        return api.get_min_offset(addr, mq.topic, mq.queue_id, timeout)
    if where is ConsumeFromWhere.CONSUME_FROM_TIMESTAMP:
        return api.search_offset_by_timestamp(addr, mq.topic, mq.queue_id, timestamp, timeout)
    return api.get_max_offset(addr, mq.topic, mq.queue_id, timeout)


__all__ = [
    "ConsumeFromWhere",
    "SubscribeInfo",
    "allocate_message_queue_averagely",
    "compute_pull_from_where",
    "parse_subscribe_route",
    "queue_key",
]
